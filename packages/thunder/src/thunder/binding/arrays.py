"""Numpy arrays made into tensors by the program: ``torch.from_numpy``, ``torch.as_tensor``,
``torch.asarray`` and ``torch.tensor``.

An array the program reads from outside (an argument, a global, an attribute) may hold other
values on the next call, and ``from_numpy`` shares its memory. The tensor is therefore an input
of the program: the prologue makes it with ``torch.from_numpy`` on every call (its shape and
dtype guarded), so the values are the call's own and in-place writes reach the array as in
eager. ``torch.tensor`` copies it, as eager does.

An array the program builds itself holds values fixed by what the trace already guards, so
``torch.tensor`` of it is a constant. The sharing forms of such an array are refused: writes to
the array or the tensor after the call would have to be seen through both, and the trace has no
memory behind the array.
"""

from __future__ import annotations

import functools
import sys
from typing import Any

import torch

from thunder.access import FROM_NUMPY, Access
from thunder.errors import UnsupportedOperationError
from thunder_ir import TensorProxy, ops

__all__ = ["array_lookasides"]

# A constant array is printed into the trace as Python values: large ones are refused.
_MAX_CONSTANT_ELEMENTS = 4096


def _is_array(x: Any) -> bool:
    cls = type(x)
    return cls.__module__ == "numpy" and cls.__name__ == "ndarray"


def _is_numpy_scalar(x: Any) -> bool:
    numpy = sys.modules.get("numpy")
    return numpy is not None and isinstance(x, numpy.generic)


def _options(kwargs: dict[str, Any], allowed: tuple[str, ...], name: str) -> dict[str, Any]:
    for key in kwargs:
        if key not in allowed:
            raise TypeError(f"{name}() got an unexpected keyword argument '{key}'")
    return kwargs


def array_lookasides(binder: Any, table: dict[Any, Any]) -> dict[Any, Any]:
    """Lookasides for the conversions above, taking arrays before the usual lookaside (the IR op,
    or the torch fallback) sees the call."""

    def tensor_of(array: Any, name: str, shares: bool) -> TensorProxy:
        if _is_numpy_scalar(array):  # a value (guarded where it was read): a constant of its dtype
            t = torch.as_tensor(array)
            return ops.tensor(t.item(), dtype=t.dtype, device="cpu")  # type: ignore[no-any-return]
        access = binder.access_for(array)
        if access is not None:
            t = torch.from_numpy(array)  # eager's own errors: unsupported dtypes, ...
            return binder._tensor_input(t, Access(FROM_NUMPY, None, access), guarded=True)  # type: ignore[no-any-return]
        if shares:
            raise UnsupportedOperationError(
                f"torch.{name}",
                "the array is built inside the jitted function and the tensor would share its "
                "memory; use torch.tensor(array) for a copy, or pass the array in",
            )
        t = torch.from_numpy(array)
        if t.numel() > _MAX_CONSTANT_ELEMENTS:
            raise UnsupportedOperationError(
                f"torch.{name}",
                f"an array of {t.numel()} elements built inside the jitted function would be a "
                "constant of the trace; pass it in as an argument",
            )
        return ops.tensor(t.tolist(), dtype=t.dtype, device="cpu")  # type: ignore[no-any-return]

    def convert(x: TensorProxy, dtype: Any, device: Any) -> TensorProxy:
        if dtype is None and device is None:
            return x
        return ops.to(x, device=device, dtype=dtype)  # type: ignore[no-any-return]

    def wrap(fn: Any, impl: Any) -> Any:
        mirrored = table.get(fn)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if args and (
                _is_array(args[0]) or (fn is not torch.from_numpy and _is_numpy_scalar(args[0]))
            ):
                return impl(*args, **kwargs)
            if (
                fn is torch.asarray
                and len(args) == 1
                and isinstance(args[0], TensorProxy)
                and set(kwargs) <= {"dtype", "device"}
            ):
                # A tensor: itself where nothing changes (``torch.asarray(x) is x``), as eager.
                return convert(args[0], kwargs.get("dtype"), kwargs.get("device"))
            if mirrored is not None:
                return mirrored(*args, **kwargs)
            return binder._cb_opaque_call(fn, args, kwargs)

        return call

    def from_numpy(array: Any) -> Any:
        return tensor_of(array, "from_numpy", shares=True)

    def as_tensor(array: Any, dtype: Any = None, device: Any = None) -> Any:
        return convert(tensor_of(array, "as_tensor", shares=True), dtype, device)

    def asarray(array: Any, **kwargs: Any) -> Any:
        options = _options(kwargs, ("dtype", "device", "copy", "requires_grad"), "asarray")
        if options.get("requires_grad"):
            raise UnsupportedOperationError("torch.asarray", "requires_grad=True inside jit")
        copy = options.get("copy")
        x = tensor_of(array, "asarray", shares=not copy)
        out = convert(x, options.get("dtype"), options.get("device"))
        return ops.clone(out) if copy and out is x else out

    def tensor(array: Any, **kwargs: Any) -> Any:
        options = _options(
            kwargs, ("dtype", "device", "requires_grad", "pin_memory", "names"), "tensor"
        )
        if options.get("requires_grad") or options.get("pin_memory") or options.get("names"):
            raise UnsupportedOperationError(
                "torch.tensor", "requires_grad, pin_memory or names with an array inside jit"
            )
        x = tensor_of(array, "tensor", shares=False)
        out = convert(x, options.get("dtype"), options.get("device"))
        return ops.clone(out) if out is x and binder.access_for(array) is not None else out

    return {
        torch.from_numpy: wrap(torch.from_numpy, from_numpy),
        torch.as_tensor: wrap(torch.as_tensor, as_tensor),
        torch.asarray: wrap(torch.asarray, asarray),
        torch.tensor: wrap(torch.tensor, tensor),
    }
