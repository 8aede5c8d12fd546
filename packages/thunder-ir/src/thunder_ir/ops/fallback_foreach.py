"""Eager's refusals of a ``torch._foreach_*_`` write's arguments.

A foreach write is recorded as the per-tensor in-place ops it is defined as (``fallback.py``:
``_foreach_in_place``), which accept more than the foreach op does: torch's argument parser
refuses a tensor where the op takes a number (``_foreach_sub_(tensors, t)`` with a ``t`` that
requires grad or has dimensions) and the op's checks a scalar tensor of other than 0 dimensions
(``_foreach_add_(tensors, torch.ones(1))``), where ``tensors[i].sub_(t)`` broadcasts. The op
itself runs first on meta tensors of this call's shapes and dtypes, so that it refuses what eager
refuses, before anything is recorded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from thunder_ir.devices import to_torch_device
from thunder_ir.dtypes import to_torch_dtype
from thunder_ir.proxies import NumberProxy, TensorProxy
from thunder_ir.tracectx import get_tracectx

__all__ = ["check_foreach_arguments"]

# The per-tensor scalars of ``_foreach_addcmul_``/``_foreach_addcdiv_`` (their fourth argument) may
# be tensors in a list: torch.optim's Adamax passes its step tensors so while thunder traces
# (``torch.compiler.is_compiling()`` is True there, as under torch.compile), read as numbers.
_SCALARS_AS_TENSORS = frozenset({"_foreach_addcmul_", "_foreach_addcdiv_"})

# A CPU tensor outside the lists (a scalar, or the scalars packed in one tensor: read by the
# kernel) of at most this many elements stands in as a real one; any other as a meta tensor.
_REAL_SCALARS = 64


def check_foreach_arguments(
    name: str, fn: Any, args: Sequence[Any], kwargs: dict[str, Any]
) -> None:
    """Raises what eager's ``fn(*args, **kwargs)`` (a foreach write) raises for its arguments'
    kinds, sizes and dtypes: ``fn`` run on meta tensors of this call's sizes (no constraint on
    symbolic ones: the key and the prologue guard what the answer depends on)."""
    trace = get_tracectx()
    grad = torch.is_grad_enabled() and (trace is None or trace.grad_enabled)
    if name.rpartition(".")[2] in _SCALARS_AS_TENSORS:
        if len(args) >= 4:
            args = (*args[:3], _as_numbers(args[3]), *args[4:])
        if "scalars" in kwargs:
            kwargs = {**kwargs, "scalars": _as_numbers(kwargs["scalars"])}
    made: dict[int, torch.Tensor] = {}

    def stand_in(x: Any, listed: bool) -> Any:
        if isinstance(x, NumberProxy):
            return x.value
        if not isinstance(x, TensorProxy):
            return x
        found = made.get(id(x))
        if found is None:
            shape = tuple(int(s.value if isinstance(s, NumberProxy) else s) for s in x.shape)
            real = not listed and x.device.type == "cpu" and math.prod(shape) <= _REAL_SCALARS
            found = torch.ones(
                shape,
                dtype=to_torch_dtype(x.dtype),
                device=to_torch_device(x.device) if real else "meta",
            )
            if x.requires_grad and (found.is_floating_point() or found.is_complex()):
                found.requires_grad_(True)
                if grad:  # not a leaf: whether the program may write it is the binder's question
                    found = found.clone()
            made[id(x)] = found
        return found

    def argument(a: Any) -> Any:
        if isinstance(a, (list, tuple)):
            return type(a)(stand_in(x, True) for x in a)
        return stand_in(a, False)

    try:
        with torch.inference_mode(False), torch.set_grad_enabled(grad):
            fn(*[argument(a) for a in args], **{k: argument(v) for k, v in kwargs.items()})
    except NotImplementedError:  # no meta kernel: the per-tensor ops' own checks remain
        return


def _as_numbers(scalars: Any) -> Any:
    if not isinstance(scalars, (list, tuple)):
        return scalars
    return [1.0 if isinstance(s, TensorProxy) else s for s in scalars]
