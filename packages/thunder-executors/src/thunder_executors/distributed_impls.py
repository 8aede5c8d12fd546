"""What the collective prims run: ``torch.distributed`` calls (gloo on CPU, NCCL on GPU).

Execution traces print these as ``torch_dist.<name>(...)``. Each communicates into a new tensor
(the prims are functional). An asynchronous call returns a ``Pending`` that ``wait`` completes.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

__all__ = ["Pending", "all_gather", "all_reduce", "broadcast", "reduce_scatter", "wait"]


class Pending:
    """A collective in flight: its work handle and the tensor it writes."""

    __slots__ = ("result", "work")

    def __init__(self, work: Any, result: torch.Tensor) -> None:
        self.work = work
        self.result = result


def _reduce_op(op: str) -> Any:
    return {
        "sum": dist.ReduceOp.SUM,
        "avg": dist.ReduceOp.AVG,
        "max": dist.ReduceOp.MAX,
        "min": dist.ReduceOp.MIN,
    }[op]


def _finish(work: Any, result: torch.Tensor, do_async: bool) -> Any:
    if do_async:
        return Pending(work, result)
    work.wait()
    return result


def all_reduce(a: torch.Tensor, op: str, group: Any, do_async: bool = False) -> Any:
    out = a.detach().clone(memory_format=torch.contiguous_format)
    work = dist.all_reduce(out, op=_reduce_op(op), group=group, async_op=True)
    return _finish(work, out, do_async)


def all_gather(a: torch.Tensor, group: Any, world_size: int, do_async: bool = False) -> Any:
    out = torch.empty((a.shape[0] * world_size, *a.shape[1:]), dtype=a.dtype, device=a.device)
    work = dist.all_gather_into_tensor(out, a.detach().contiguous(), group=group, async_op=True)
    return _finish(work, out, do_async)


def reduce_scatter(
    a: torch.Tensor, op: str, group: Any, world_size: int, do_async: bool = False
) -> Any:
    out = torch.empty((a.shape[0] // world_size, *a.shape[1:]), dtype=a.dtype, device=a.device)
    work = dist.reduce_scatter_tensor(
        out, a.detach().contiguous(), op=_reduce_op(op), group=group, async_op=True
    )
    return _finish(work, out, do_async)


def broadcast(a: torch.Tensor, src: int, group: Any, do_async: bool = False) -> Any:
    out = a.detach().clone(memory_format=torch.contiguous_format)
    work = dist.broadcast(out, src=src, group=group, async_op=True)
    return _finish(work, out, do_async)


def wait(pending: Pending) -> torch.Tensor:
    pending.work.wait()
    return pending.result
