"""Distributed training on ``torch.distributed``: data parallelism (``ddp``) and sharding
(``fsdp``, ZeRO-2 and ZeRO-3), prepared before ``thunder.jit``; the jit then adds the transform
that places the communication in the traces (``DDPTransform``, ``FSDPTransform``). The
collectives are IR prims (``prims.all_reduce``, ``all_gather``, ``reduce_scatter``,
``broadcast``, ``wait``) run by torch.distributed (gloo on CPU, NCCL on GPU)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder.distributed.checkpoint import load_optimizer_state_dict, optimizer_state_dict
from thunder.distributed.ddp import DDPTransform, ddp, no_sync, state_of
from thunder.distributed.fsdp import (
    FSDPTransform,
    fsdp,
    fsdp_state_of,
    full_state_dict,
    load_full_state_dict,
)
from thunder.distributed.setup import DistributedTransform
from thunder.distributed.tensor_parallel import tensor_parallel
from thunder_ir import Transform

__all__ = [
    "DDPTransform",
    "DistributedTransform",
    "FSDPTransform",
    "ddp",
    "fsdp",
    "full_state_dict",
    "load_full_state_dict",
    "load_optimizer_state_dict",
    "no_sync",
    "optimizer_state_dict",
    "tensor_parallel",
    "transforms_for",
]


def transforms_for(model: Any, transforms: Sequence[Transform]) -> tuple[Transform, ...]:
    """The transforms ``thunder.jit`` adds for a model ``ddp`` or ``fsdp`` prepared (none when
    the list already has one)."""
    if any(isinstance(t, DistributedTransform) for t in transforms):
        return ()
    if state_of(model) is not None and not any(isinstance(t, DDPTransform) for t in transforms):
        return (DDPTransform(model),)
    if fsdp_state_of(model) is not None and not any(
        isinstance(t, FSDPTransform) for t in transforms
    ):
        return (FSDPTransform(model),)
    return ()
