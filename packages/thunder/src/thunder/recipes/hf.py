"""``thunder.recipes.HFTransformers``: Hugging Face transformers models."""

from __future__ import annotations

from typing import Any

from thunder.lookasides import Lookaside
from thunder.recipes.base import BaseRecipe
from thunder_ir import Transform

__all__ = ["HFTransformers"]


def _no_warning(*args: Any, **kwargs: Any) -> None:
    return None


class HFTransformers(BaseRecipe):
    """For ``transformers.PreTrainedModel`` models.

    The jit already answers ``torch.compiler.is_compiling()`` with True, so the library takes
    its compile-friendly paths. The recipe adds a lookaside that skips the library's eager-only
    padding check (``warn_if_padding_and_no_attention_mask``: it only warns, and reads token
    values to decide). Caching stays the jit's default (a new sequence length compiles a new
    program); pass ``cache="symbolic values"`` to serve every length with one program (text
    generation: one program for the prompt, one for all decoding steps).

    ``distributed``: None, or a strategy of ``thunder.recipes.Distributed`` (``"ddp"``,
    ``"fsdp"``, ``"fsdp_zero2"``...): the model is prepared for it when compiled."""

    def __init__(self, distributed: str | None = None, **distributed_options: Any) -> None:
        from thunder.distributed.setup import STRATEGIES

        if distributed is not None and distributed not in STRATEGIES:
            raise ValueError(
                f"HFTransformers: unknown distributed strategy {distributed!r}; expected None or "
                f"one of {sorted(STRATEGIES)}"
            )
        self.distributed = distributed
        self.distributed_options = distributed_options

    def setup_transforms(self) -> list[Transform]:
        if self.distributed is None:
            return []
        from thunder.distributed import DistributedTransform

        return [DistributedTransform(self.distributed, **self.distributed_options)]

    def validate(self, model: Any) -> None:
        try:
            import transformers
        except ImportError as e:
            raise ValueError("HFTransformers needs the transformers package") from e
        if not isinstance(model, transformers.PreTrainedModel):
            raise ValueError(
                "HFTransformers applies to Hugging Face transformers models "
                f"(transformers.PreTrainedModel), got {type(model).__name__}"
            )

    def setup_lookasides(self) -> list[Lookaside]:
        import transformers

        check = getattr(transformers.PreTrainedModel, "warn_if_padding_and_no_attention_mask", None)
        return [Lookaside(check, _no_warning)] if check is not None else []
