"""``DistributedTransform``: data parallelism or sharding as one transform (what the recipes'
``distributed`` option adds): it prepares the model when the jit receives it (``ddp`` or
``fsdp``) and then places the communication as ``DDPTransform`` / ``FSDPTransform`` do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder.distributed.ddp import DDPTransform, ddp
from thunder.distributed.fsdp import FSDPTransform, fsdp
from thunder_ir import Trace, Transform

__all__ = ["STRATEGIES", "DistributedTransform"]

# The values of the ``distributed`` option: the strategy, and for sharding its ZeRO stage.
STRATEGIES = {"ddp": None, "fsdp": "ZERO3", "fsdp_zero3": "ZERO3", "fsdp_zero2": "ZERO2"}


class DistributedTransform(Transform):
    """``strategy``: ``"ddp"``, ``"fsdp"`` (ZeRO-3), ``"fsdp_zero3"`` or ``"fsdp_zero2"``;
    ``options`` go to ``ddp`` / ``fsdp`` (``bucket_size_in_mb``, ``group``...)."""

    def __init__(self, strategy: str, **options: Any) -> None:
        if strategy not in STRATEGIES:
            raise ValueError(
                f"unknown distributed strategy {strategy!r}; expected one of {sorted(STRATEGIES)}"
            )
        self.strategy = strategy
        self.options = options
        self.inner: Transform | None = None

    def transform_module(self, model: Any) -> None:
        if self.inner is not None:
            raise ValueError("a DistributedTransform prepares one model; make one per model")
        if self.strategy == "ddp":
            self.inner = DDPTransform(ddp(model, **self.options))
        else:
            stage = STRATEGIES[self.strategy] or "ZERO3"
            self.inner = FSDPTransform(fsdp(model, sharding_strategy=stage, **self.options))

    def _require_inner(self) -> Transform:
        if self.inner is None:
            raise ValueError("DistributedTransform applies to an nn.Module passed to thunder.jit")
        return self.inner

    def transform_traces_pre_prologue(
        self, prologue: Trace, computation: Trace, epilogue: Trace | None, **kwargs: Any
    ) -> tuple[Trace, Trace, Trace | None]:
        return self._require_inner().transform_traces_pre_prologue(
            prologue, computation, epilogue, **kwargs
        )

    def transform_backward(self, backward: Trace, *, inputs: Sequence[Any], **kwargs: Any) -> Trace:
        return self._require_inner().transform_backward(backward, inputs=inputs, **kwargs)

    def __repr__(self) -> str:
        return f"DistributedTransform({self.strategy!r})"
