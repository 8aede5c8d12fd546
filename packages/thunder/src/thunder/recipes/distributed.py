"""``thunder.recipes.Distributed``: data-parallel or sharded training as a recipe."""

from __future__ import annotations

from typing import Any

from thunder.recipes.base import BaseRecipe
from thunder_ir import Transform

__all__ = ["Distributed"]


class Distributed(BaseRecipe):
    """Prepares the model for ``strategy`` when it is compiled and places the communication in
    its traces: ``"ddp"`` (``thunder.distributed.ddp``), ``"fsdp"`` / ``"fsdp_zero3"`` or
    ``"fsdp_zero2"`` (``thunder.distributed.fsdp``). ``options`` go to ``ddp`` / ``fsdp``.
    ``torch.distributed`` must be initialized first."""

    def __init__(self, strategy: str = "ddp", **options: Any) -> None:
        from thunder.distributed.setup import STRATEGIES

        if strategy not in STRATEGIES:
            raise ValueError(
                f"Distributed: unknown strategy {strategy!r}; expected one of {sorted(STRATEGIES)}"
            )
        self.strategy = strategy
        self.options = options

    def validate(self, model: Any) -> None:
        import torch

        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"Distributed applies to an nn.Module, got {type(model).__name__}")

    def setup_transforms(self) -> list[Transform]:
        from thunder.distributed import DistributedTransform

        return [DistributedTransform(self.strategy, **self.options)]

    def __repr__(self) -> str:
        return f"Distributed({self.strategy!r})"
