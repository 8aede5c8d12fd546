"""Broadcasting, type promotion and dtype conversion as torch does them, for writing ops."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import torch

from thunder_ir import dtypes, prims
from thunder_ir.dtypes import DType
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.proxies import NumberProxy, TensorProxy
from thunder_ir.sizes import same_size
from thunder_ir.symbol import Symbol
from thunder_ir.utils import check, dtype_of, result_type

__all__ = [
    "Promotion",
    "broadcast",
    "broadcast_shapes",
    "check_no_complex_half",
    "elementwise_unary",
    "expand_to",
    "is_number",
    "opmath",
    "promote",
    "to_dtype",
    "to_shape",
]


class Promotion(enum.Enum):
    """torch's ELEMENTWISE_TYPE_PROMOTION_KIND."""

    DEFAULT = "default"
    INT_TO_FLOAT = "int_to_float"
    ALWAYS_BOOL = "always_bool"
    COMPLEX_TO_FLOAT = "complex_to_float"
    BOOL_TO_LONG = "bool_to_long"
    NO_OPMATH = "no_opmath"


def is_number(x: Any) -> bool:
    return isinstance(x, (bool, int, float, complex, NumberProxy))


def is_int(x: Any) -> bool:
    """An int argument: a Python int (not bool) or a symbolic one."""
    return (isinstance(x, int) and not isinstance(x, bool)) or (
        isinstance(x, NumberProxy) and x.python_type is int
    )


def is_real(x: Any) -> bool:
    """A real number argument (int or float, not bool), symbolic or not."""
    return (isinstance(x, (int, float)) and not isinstance(x, bool)) or (
        isinstance(x, NumberProxy) and x.python_type in (int, float)
    )


def to_shape(shape: Any) -> tuple[Any, ...]:
    """Accepts ``f(2, 3)``-style varargs, a tuple/list, or a torch.Size."""
    if (len(shape) == 1 and isinstance(shape[0], (tuple, list))) or (
        len(shape) == 1 and type(shape[0]).__name__ == "Size"
    ):
        shape = shape[0]
    return tuple(shape)


def _is_one(d: Any) -> bool:
    """Whether a size is 1 (for a symbolic size, the answer is a constraint of the trace)."""
    return d == 1 if isinstance(d, int) else bool(d == 1)


def broadcast_shapes(*shapes: Sequence[Any]) -> tuple[Any, ...]:
    n = max((len(s) for s in shapes), default=0)
    out: list[Any] = [None] * n
    for s in shapes:
        for i, d in enumerate(s):
            j = n - len(s) + i
            cur = out[j]
            if cur is None:  # the first size seen here: nothing to compare yet
                out[j] = d
                continue
            if same_size(cur, d) or _is_one(d):
                continue
            if _is_one(cur):
                out[j] = d
            else:
                # Symbolic sizes: the program relies on them being equal (a constraint).
                check(
                    bool(cur == d),
                    lambda: (
                        f"The size of tensor a ({cur}) must match the size of tensor b ({d}) at non-singleton dimension {j}"
                    ),
                )
    return tuple(out)


def expand_to(a: TensorProxy, shape: Sequence[Any]) -> TensorProxy:
    """``a`` broadcast to ``shape`` (a no-op, recording nothing, when it already has it)."""
    if len(a.shape) == len(shape) and all(same_size(x, y) for x, y in zip(a.shape, shape)):
        return a
    offset = len(shape) - a.ndim
    check(offset >= 0, lambda: f"cannot broadcast a tensor of shape {a.shape} to {tuple(shape)}")
    return prims.broadcast_in_dim(a, tuple(shape), tuple(range(offset, len(shape))))  # type: ignore[no-any-return]


def broadcast(*args: Any) -> tuple[Any, ...]:
    """Tensors among ``args`` broadcast to their common shape; numbers and None pass through.
    A zero-dimensional CPU tensor joins tensors of another device on theirs, as in torch
    (``cuda_tensor * torch.tensor(3.0)``)."""
    shapes = [a.shape for a in args if isinstance(a, TensorProxy)]
    if not shapes:
        return args
    common = broadcast_shapes(*shapes)
    args = _cpu_scalars_moved(args)
    return tuple(expand_to(a, common) if isinstance(a, TensorProxy) else a for a in args)


def _cpu_scalars_moved(args: tuple[Any, ...]) -> tuple[Any, ...]:
    others = {a.device for a in args if isinstance(a, TensorProxy) and a.device.type != "cpu"}
    if len(others) != 1:
        return args  # all on the CPU, or devices that do not mix: the prim says so
    (device,) = others
    return tuple(
        prims.device_put(a, device)
        if isinstance(a, TensorProxy) and a.device.type == "cpu" and a.ndim == 0
        else a
        for a in args
    )


def check_no_complex_half(*args: Any) -> None:
    """Refuses operands whose torch result type is complex32 (``torch.chalf``), which the IR has
    no dtype for: float16 tensors with a complex number or complex 0-dim tensor of lower
    priority (``half_tensor + 1j``). Computing in complex64 would return another dtype than
    eager's, so the call is refused by name instead."""
    tensors = [x for x in args if isinstance(x, TensorProxy)]
    dims = [t for t in tensors if t.ndim > 0]
    zeros = [t for t in tensors if t.ndim == 0]
    numbers = [x for x in args if x is not None and not isinstance(x, TensorProxy)]
    if dims:
        higher, lower = dims, [*zeros, *numbers]
    elif zeros:
        higher, lower = zeros, numbers
    else:
        return
    if not lower:
        return
    higher_dtype = result_type(*higher)
    if higher_dtype == dtypes.float16 and result_type(*lower).is_complex:
        raise UnsupportedOptionError(
            "an elementwise op of a float16 tensor with a complex number (or complex 0-dim "
            "tensor): torch computes it in complex32 (torch.chalf), a dtype thunder does not "
            "support; convert the tensor first (x.float() or x.to(torch.complex64))"
        )
    if (
        higher_dtype.is_exact
        and any(dtype_of(x).is_complex for x in numbers)
        and torch.get_default_dtype() == torch.float16
    ):
        # An integer or bool tensor with a complex number computes in the default dtype's
        # complex dtype: complex32 where that is float16.
        raise UnsupportedOptionError(
            "an elementwise op of an integer or bool tensor with a complex number while "
            "torch.float16 is the default dtype: torch computes it in complex32 (torch.chalf), "
            "a dtype thunder does not support; convert the tensor first (x.to(torch.complex64))"
        )


def promote(*args: Any, kind: Promotion) -> tuple[DType, DType]:
    """(computation dtype, result dtype) of an elementwise op, as torch's
    elementwise_dtypes: low-precision floats compute in float32 unless NO_OPMATH."""
    check_no_complex_half(*args)
    rt = result_type(*args)
    if kind is Promotion.ALWAYS_BOOL:
        return opmath(rt), dtypes.bool8
    if kind is Promotion.INT_TO_FLOAT and rt.is_exact:
        rt = dtypes.default_float_dtype()
    if kind is Promotion.BOOL_TO_LONG and rt.is_boolean:
        rt = dtypes.int64
    result = rt
    if kind is Promotion.COMPLEX_TO_FLOAT and rt.is_complex:
        result = dtypes.corresponding_real_dtype(rt)
    computation = rt if kind is Promotion.NO_OPMATH else opmath(rt)
    return computation, result


def opmath(dtype: DType) -> DType:
    """The dtype torch computes in for ``dtype``: float32 for the low-precision floats
    (bfloat16, float16, the float8s), ``dtype`` itself otherwise."""
    return dtypes.float32 if dtype.is_low_precision else dtype


def to_dtype(a: Any, dtype: DType) -> Any:
    """``a`` converted to ``dtype``; tensors already of that dtype and numbers pass unchanged
    (numbers are weak: the prim takes them as they are)."""
    if isinstance(a, TensorProxy):
        return a if a.dtype == dtype else prims.convert_element_type(a, dtype)
    return a


def elementwise_unary(prim: Symbol, a: Any, kind: Promotion = Promotion.DEFAULT) -> Any:
    check(
        isinstance(a, TensorProxy) or is_number(a),
        lambda: f"{prim.name}(): argument 'input' must be Tensor, not {type(a).__name__}",
        TypeError,
    )
    if not isinstance(a, TensorProxy):
        return prim(a)
    computation, result = promote(a, kind=kind)
    out = prim(to_dtype(a, computation))
    if kind is Promotion.ALWAYS_BOOL:
        return out
    return to_dtype(out, result)


def _for_computation(x: Any, dtype: DType) -> Any:
    if isinstance(x, TensorProxy):
        return to_dtype(x, dtype)
    # A Python number joins the computation at the computation dtype's kind (2 * float_tensor).
    if isinstance(x, NumberProxy):
        return x
    if dtype.is_complex:
        return complex(x)
    if dtype.is_float:
        return float(x)
    if dtype.is_boolean:
        return bool(x)
    return int(x) if not isinstance(x, (float, complex)) else x


def dtype_arg(dtype: Any) -> DType | None:
    """Normalizes a ``dtype=`` argument (torch dtype, IR dtype, Python type or None); a torch
    dtype the IR has none for (complex32) is refused by name."""
    if dtype is None:
        return None
    try:
        return dtypes.to_dtype(dtype).strong()
    except TypeError:
        if isinstance(dtype, torch.dtype):
            raise UnsupportedOptionError(f"dtype {dtype} is not supported by thunder") from None
        raise


__all__ += ["dtype_arg", "dtype_of"]
