"""Collective communication prims: data-parallel and sharded training on torch.distributed.

Every collective takes a tensor and a process group (an opaque object, printed by name) and is
functional: it returns a new tensor and leaves its input alone (the executor communicates into
a copy). With ``do_async=True`` it returns a ``FutureTensorProxy`` that only ``wait`` reads, so
the trace can start communication early and wait for it late (overlap with computation).
Gathering and scattering work on the first dimension; ``world_size`` is the group's size, given
explicitly so that metadata never needs the group.
"""

from __future__ import annotations

from typing import Any

from thunder_ir.prims._common import check_tensor, make_prim
from thunder_ir.proxies import FutureTensorProxy, TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import check

__all__ = ["REDUCE_OPS", "all_gather", "all_reduce", "broadcast", "reduce_scatter", "wait"]

# Reductions the collectives take (avg is a sum divided by the group's size).
REDUCE_OPS = ("sum", "avg", "max", "min")
# Communication is an effect every rank must agree on: never removed, merged or fused.
_COLLECTIVE = (OpTag.DONT_DCE,)


def _result(a: TensorProxy, shape: Any, do_async: bool) -> TensorProxy | FutureTensorProxy:
    check(isinstance(do_async, bool), "do_async must be a bool", TypeError)
    if do_async:
        return FutureTensorProxy(shape=shape, dtype=a.dtype, device=a.device)
    return TensorProxy(shape=shape, dtype=a.dtype, device=a.device, requires_grad=a.requires_grad)


def _check_op(op: Any) -> None:
    check(op in REDUCE_OPS, lambda: f"unknown reduction {op!r}; expected one of {REDUCE_OPS}")


def _check_world_size(world_size: Any) -> None:
    check(
        isinstance(world_size, int) and world_size >= 1,
        lambda: f"world_size must be a positive int, got {world_size!r}",
    )


def _all_reduce_meta(a: Any, op: str, group: Any, do_async: bool = False) -> Any:
    a = check_tensor(a, "prims.all_reduce")
    _check_op(op)
    return _result(a, a.shape, do_async)


def _all_gather_meta(a: Any, group: Any, world_size: int, do_async: bool = False) -> Any:
    a = check_tensor(a, "prims.all_gather")
    _check_world_size(world_size)
    check(a.ndim >= 1, "prims.all_gather: expected a tensor of at least one dimension")
    return _result(a, (a.shape[0] * world_size, *a.shape[1:]), do_async)


def _reduce_scatter_meta(
    a: Any, op: str, group: Any, world_size: int, do_async: bool = False
) -> Any:
    a = check_tensor(a, "prims.reduce_scatter")
    _check_op(op)
    _check_world_size(world_size)
    check(a.ndim >= 1, "prims.reduce_scatter: expected a tensor of at least one dimension")
    check(
        bool(a.shape[0] % world_size == 0),
        lambda: (
            f"prims.reduce_scatter: the first dimension ({a.shape[0]}) must divide evenly "
            f"among {world_size} ranks"
        ),
    )
    return _result(a, (a.shape[0] // world_size, *a.shape[1:]), do_async)


def _broadcast_meta(a: Any, src: int, group: Any, do_async: bool = False) -> Any:
    a = check_tensor(a, "prims.broadcast")
    check(isinstance(src, int) and src >= 0, lambda: f"src must be a rank, got {src!r}")
    return _result(a, a.shape, do_async)


def _wait_meta(fut: Any) -> TensorProxy:
    check(
        isinstance(fut, FutureTensorProxy),
        lambda: f"prims.wait: expected the result of an asynchronous collective, got {fut!r}",
        TypeError,
    )
    return TensorProxy(shape=fut.shape, dtype=fut.dtype, device=fut.device)


all_reduce = make_prim("all_reduce", _all_reduce_meta, tags=_COLLECTIVE)
all_gather = make_prim("all_gather", _all_gather_meta, tags=_COLLECTIVE)
reduce_scatter = make_prim("reduce_scatter", _reduce_scatter_meta, tags=_COLLECTIVE)
broadcast = make_prim("broadcast", _broadcast_meta, tags=_COLLECTIVE)
wait = make_prim("wait", _wait_meta, tags=_COLLECTIVE)
