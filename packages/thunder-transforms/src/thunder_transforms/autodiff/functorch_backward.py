"""The compiled backward under ``torch.func`` transforms (``grad``, ``vjp``, ``jacrev``).

functorch runs an ``autograd.Function``'s forward on unwrapped tensors, but calls its backward
with its own tensors: ``GradTrackingTensor`` cotangents under ``grad``/``vjp``, ``BatchedTensor``
ones where ``jacrev`` vmaps the vjp. A compiled backward (fusion regions, Triton kernels) is made
for plain tensors of the traced shapes, so it runs below the transforms: each level is peeled
off (a grad level unwrapped, a vmap level looped over its batch) and its results wrapped back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch._C._functorch import (
    TransformType,
    _add_batch_dim,
    _unwrap_batched,
    _unwrap_for_grad,
    _wrap_for_grad,
    peek_interpreter_stack,
)
from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

__all__ = ["run_below_transforms", "under_transforms"]


def under_transforms() -> bool:
    """Whether a ``torch.func`` transform is active."""
    return peek_interpreter_stack() is not None


def run_below_transforms(fn: Callable[..., Sequence[Any]], args: Sequence[Any]) -> list[Any]:
    """``fn(*args)`` (a sequence of tensors or None) on plain tensors, its results as the active
    transforms expect them. A vmap level runs ``fn`` once per batch element."""
    if peek_interpreter_stack() is None:
        return list(fn(*args))
    interpreter = retrieve_current_functorch_interpreter()
    level, key = interpreter.level(), interpreter.key()
    if key == TransformType.Vmap:
        return _below_vmap(fn, args, level, interpreter)
    if key == TransformType.Grad:
        plain = [_unwrap_for_grad(a, level) if _is_tensor(a) else a for a in args]
        with interpreter.lower():
            outs = run_below_transforms(fn, plain)
        return [_wrap_for_grad(o, level) if _is_tensor(o) else o for o in outs]
    raise NotImplementedError(
        f"thunder: a compiled backward cannot run under torch.func's {key.name} transform"
    )


def _below_vmap(
    fn: Callable[..., Sequence[Any]], args: Sequence[Any], level: int, interpreter: Any
) -> list[Any]:
    unbatched = [_unwrap_batched(a, level) if _is_tensor(a) else (a, None) for a in args]
    with interpreter.lower():
        if all(bdim is None for _, bdim in unbatched):
            return run_below_transforms(fn, [a for a, _ in unbatched])
        size = interpreter.batch_size()
        per_element = [
            run_below_transforms(
                fn, [a if bdim is None else a.select(bdim, i) for a, bdim in unbatched]
            )
            for i in range(size)
        ]
        stacked = [
            torch.stack(column) if all(map(_is_tensor, column)) else column[0]
            for column in zip(*per_element)
        ]
    return [_add_batch_dim(s, 0, level) if _is_tensor(s) else s for s in stacked]


def _is_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor)
