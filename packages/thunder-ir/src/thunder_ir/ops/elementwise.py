"""Elementwise torch-language ops, unary ones, and what all elementwise ops share: broadcasting
and type promotion (from ``_helpers``), in-place variants and torch's dtype checks.

Binary and ternary ops live in ``elementwise_binary``."""

from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any

import torch

from thunder_ir import dtypes, prims
from thunder_ir.dtypes import DType
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.ops._helpers import (
    Promotion,
    _for_computation,
    broadcast,
    elementwise_unary,
    is_int,
    is_number,
    promote,
    to_dtype,
)
from thunder_ir.ops._registry import torchop
from thunder_ir.proxies import NumberProxy, TensorProxy
from thunder_ir.symbol import Symbol
from thunder_ir.tags import OpTag
from thunder_ir.utils import check

_EW = (OpTag.ELEMENTWISE,)

# torch's names for dtypes in its error messages ("result type Float can't be cast to ... Long").
_TORCH_DTYPE_NAMES = {
    "bool8": "Bool",
    "uint8": "Byte",
    "int8": "Char",
    "int16": "Short",
    "int32": "Int",
    "int64": "Long",
    "bfloat16": "BFloat16",
    "float16": "Half",
    "float32": "Float",
    "float64": "Double",
    "complex64": "ComplexFloat",
    "complex128": "ComplexDouble",
}


def torch_dtype_name(d: DType) -> str:
    """The name torch's messages use for a dtype (``Float``, ``Long``...)."""
    return _TORCH_DTYPE_NAMES.get(d.name, d.name)


def can_cast(src: DType, dst: DType) -> bool:
    """torch.can_cast: no float -> integer, complex -> real or non-bool -> bool."""
    if src.is_complex and not dst.is_complex:
        return False
    if src.is_float and dst.is_exact:
        return False
    return src.is_boolean or not dst.is_boolean


# The C++ names torch's "value cannot be converted to type ... without overflow" gives dtypes.
_C10_TYPE_NAMES = {
    "uint8": "uint8_t",
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int",
    "int64": "int64_t",
    "bfloat16": "c10::BFloat16",
    "float16": "c10::Half",
    "float32": "float",
    "float64": "double",
    "complex64": "c10::complex<float>",
    "complex128": "c10::complex<double>",
}


def _real_overflows(x: int | float, dtype: DType) -> bool:
    """c10's ``overflows<To>(x)`` for a real ``x`` and a real, non-bool ``dtype``."""
    torch_dtype = dtypes.to_torch_dtype(dtype)
    assert torch_dtype is not None
    if dtype.is_exact:
        info = torch.iinfo(torch_dtype)
        if isinstance(x, int):
            if info.min == 0:  # unsigned: negative numbers wrap (uint8 takes -255..255)
                return x > info.max or -x > info.max
            return not info.min <= x <= info.max
        # A float is compared in double precision: NaN and infinities do not fit.
        return not (math.isfinite(x) and float(info.min) <= x <= float(info.max))
    finfo = torch.finfo(torch_dtype)
    if math.isinf(x) or math.isnan(x):
        return False  # every float dtype holds infinities and NaN
    return not finfo.min <= x <= finfo.max


def number_overflows(value: Any, dtype: DType) -> bool:
    """Whether torch refuses to convert the Python number ``value`` to a scalar of ``dtype``
    (c10's checked conversion, as ``masked_fill``, ``fill_``, ``full`` and ``addmm``'s ``beta``
    convert theirs): out of the dtype's range, a NaN or infinity for an integer dtype, an
    imaginary part for a real one. Nothing overflows bool. A symbolic number is not checked."""
    if dtype.is_boolean or isinstance(value, (bool, NumberProxy)):
        return False
    if isinstance(value, complex):
        if not dtype.is_complex and value.imag != 0:
            return True
        real = dtypes.corresponding_real_dtype(dtype)
        return _real_overflows(value.real, real) or _real_overflows(value.imag, real)
    return _real_overflows(value, dtypes.corresponding_real_dtype(dtype))


def check_number_fits(value: Any, dtype: DType) -> None:
    """torch's error for a number that a tensor of ``dtype`` cannot hold (``number_overflows``).
    A symbolic number is compared with the dtype's range: the comparisons are decisions the
    prologue checks, so a later call with a number on the other side compiles anew and raises
    as eager (a fusion region would wrap or overflow it silently)."""
    if isinstance(value, NumberProxy):
        if _symbolic_number_may_overflow(value, dtype):
            value = value.value
        else:
            return
    check(
        not number_overflows(value, dtype),
        lambda: (
            f"value cannot be converted to type {_C10_TYPE_NAMES.get(dtype.name, dtype.name)} "
            "without overflow"
        ),
    )


def _symbolic_number_may_overflow(value: NumberProxy, dtype: DType) -> bool:
    if dtype.is_boolean or value.python_type not in (int, float):
        return False  # nothing overflows bool; a symbolic complex number is not checked
    real = dtypes.corresponding_real_dtype(dtype)
    torch_dtype = dtypes.to_torch_dtype(real)
    assert torch_dtype is not None
    if real.is_exact:
        info = torch.iinfo(torch_dtype)
        # unsigned: negative ints wrap (uint8 takes -255..255), as ``_real_overflows``
        low = -info.max if info.min == 0 and value.python_type is int else info.min
        # written so that NaN (every comparison False) counts as out of range
        return not (value >= low and value <= info.max)
    high = torch.finfo(torch_dtype).max
    # infinities and NaN fit every float dtype
    return bool((value > high and value < math.inf) or (value < -high and value > -math.inf))


def check_value_fits(value: TensorProxy, dtype: DType) -> None:
    """``check_number_fits`` for the number a one-element tensor holds (the ``value.item()``
    that ``masked_fill`` and ``index_fill`` convert, checked): a check on every call."""
    if dtype.is_boolean or value.dtype.is_boolean:
        return  # nothing overflows bool, and a bool fits everything
    v = value if value.ndim == 0 else prims.reshape(value, ())
    target = dtypes.corresponding_real_dtype(dtype)
    fits = []
    if value.dtype.is_complex:
        imag = prims.imag(v)
        v = prims.real(v)
        fits.append(_real_value_fits(imag, target) if dtype.is_complex else prims.eq(imag, 0))
    fits.append(_real_value_fits(v, target))
    cond = fits[0]
    for f in fits[1:]:
        cond = prims.bitwise_and(cond, f)
    prims.check_values(
        cond,
        f"value cannot be converted to type {_C10_TYPE_NAMES.get(dtype.name, dtype.name)} "
        "without overflow",
    )


def _real_value_fits(v: TensorProxy, target: DType) -> TensorProxy:
    """c10's ``not overflows<target>(v)`` for a real 0-dim tensor ``v``, compared in 64 bits
    as the ``Scalar`` that ``item()`` gives."""
    torch_dtype = dtypes.to_torch_dtype(target)
    assert torch_dtype is not None
    within: Any
    if v.dtype.is_exact:
        v = prims.convert_element_type(v, dtypes.int64) if v.dtype != dtypes.int64 else v
        if target.is_exact:
            info = torch.iinfo(torch_dtype)
            low = -info.max if info.min == 0 else info.min  # unsigned: negative ints wrap
            return prims.bitwise_and(prims.ge(v, low), prims.le(v, info.max))  # type: ignore[no-any-return]
        finfo = torch.finfo(torch_dtype)
        v = prims.convert_element_type(v, dtypes.float64)
        return prims.bitwise_and(prims.ge(v, finfo.min), prims.le(v, finfo.max))  # type: ignore[no-any-return]
    v = prims.convert_element_type(v, dtypes.float64) if v.dtype != dtypes.float64 else v
    if target.is_exact:
        info = torch.iinfo(torch_dtype)
        within = prims.bitwise_and(prims.ge(v, float(info.min)), prims.le(v, float(info.max)))
        return prims.bitwise_and(prims.isfinite(v), within)  # type: ignore[no-any-return]
    finfo = torch.finfo(torch_dtype)
    within = prims.bitwise_and(prims.ge(v, finfo.min), prims.le(v, finfo.max))
    return prims.bitwise_or(prims.bitwise_not(prims.isfinite(v)), within)  # type: ignore[no-any-return]


def not_implemented_for(op: str, d: DType) -> UnsupportedOptionError:
    """torch's error for an op without a kernel for a dtype (``"abs" not implemented for 'Bool'``)."""
    return UnsupportedOptionError(f"\"{op}\" not implemented for '{torch_dtype_name(d)}'")


def check_dtype(op: str, a: Any, ok: Callable[[DType], bool]) -> None:
    """Raises torch's "not implemented for" error when a tensor's dtype fails ``ok``."""
    if isinstance(a, TensorProxy) and not ok(a.dtype):
        raise not_implemented_for(op, a.dtype)


def check_tensor_arg(x: Any, op: str, what: str, position: int) -> None:
    """torch's TypeError for an argument that must be a tensor."""
    check(
        isinstance(x, TensorProxy),
        lambda: (
            f"{op}(): argument '{what}' (position {position}) must be Tensor, not {type(x).__name__}"
        ),
        TypeError,
    )


def identity(a: TensorProxy) -> TensorProxy:
    """A fresh proxy with ``a``'s value (ops that return their input, e.g. ``floor`` of an int
    tensor, still define a new name in the trace)."""
    return prims.convert_element_type(a, a.dtype)  # type: ignore[no-any-return]


def full_like(a: TensorProxy, value: Any, dtype: DType) -> TensorProxy:
    return prims.full(a.shape, value, device=a.device, dtype=dtype)  # type: ignore[no-any-return]


def compute(
    op: str,
    kind: Promotion,
    fn: Callable[..., Any],
    *args: Any,
    names: tuple[str, ...] = (),
    casts_cpu_scalars: bool | tuple[int, ...] = False,
    own_low_precision_kernel: bool = False,
) -> Any:
    """Runs ``fn`` (written with prims) on ``args`` broadcast to their common shape and converted to
    the computation dtype of ``kind``; converts its result to the result dtype. Tensors and
    numbers are accepted; None passes through untouched.

    ``own_low_precision_kernel``: ``fn`` is one prim whose torch float16/bfloat16 CPU kernel is
    not its float32 kernel rounded (see ``_float_unary``); where every tensor is of such a dtype
    on the CPU (after the conversions below), the prim takes them as they are, and the torch
    executor runs eager's kernel on eager's layout.

    ``casts_cpu_scalars``: the op's torch CPU kernel converts a number (or 0-dim tensor) operand
    to the common dtype, bfloat16 or float16, before computing in float32 (``x + 0.7`` adds
    bfloat16(0.7)); the op says so where it is defined, True for every position or a tuple of
    the positions converted. Measured against torch 2.13's CPU kernels, element by element: most
    binary ops convert in either position; mul and div (all rounding modes) read a second
    operand as given but convert a first one (their kernels' scalar fast path is only for the
    second operand); lerp's weight and addcmul's value are read as given. CUDA kernels read it
    as given."""
    for i, x in enumerate(args):
        what = names[i] if i < len(names) else ("input" if i == 0 else "other")
        check(
            x is None or isinstance(x, TensorProxy) or is_number(x),
            lambda: f"{op}(): argument '{what}' must be Tensor or Number, not {type(x).__name__}",
            TypeError,
        )
    if not any(isinstance(x, TensorProxy) for x in args):
        return fn(*args)
    if casts_cpu_scalars is True:
        args = scalars_in_common_dtype(args)
    elif casts_cpu_scalars:
        args = scalars_in_common_dtype(args, scalar_positions=casts_cpu_scalars)
    computation, result = promote(*(x for x in args if x is not None), kind=kind)
    as_given = () if isinstance(casts_cpu_scalars, bool) else casts_cpu_scalars
    args = _in_common_dtype(args, kind, result, as_given)
    if own_low_precision_kernel and kind is not Promotion.ALWAYS_BOOL:
        low = low_precision_cpu_dtype(args)
        if low == result and all(not isinstance(x, TensorProxy) or x.dtype == low for x in args):
            computation = low
    converted = [None if x is None else _for_computation(x, computation) for x in broadcast(*args)]
    out = fn(*converted)
    if kind is Promotion.ALWAYS_BOOL:
        return out
    return to_dtype(out, result)


def _in_common_dtype(
    args: tuple[Any, ...], kind: Promotion, result: DType, scalars_converted: tuple[int, ...]
) -> tuple[Any, ...]:
    """``args`` with the tensors of another dtype than the operands' common one converted to it
    before they are broadcast, as torch's TensorIterator converts them: a bfloat16 op reads an
    int tensor's 257 as 256 (and compares it so), a float32 op with a bfloat16 operand computes
    on the converted operand's own layout, and that operand's gradient is summed over the
    broadcast dimensions in float32, then rounded once. 0-dim tensors are ``compute``'s
    ``casts_cpu_scalars``' to convert, and so is a one-element CPU tensor where the op converts
    only some positions: mul's and div's CPU kernels read a second one as given."""
    if kind in (Promotion.ALWAYS_BOOL, Promotion.COMPLEX_TO_FLOAT):
        result = promote(*(x for x in args if x is not None), kind=Promotion.DEFAULT)[1]

    def converted(i: int, x: Any) -> bool:
        if not isinstance(x, TensorProxy) or x.ndim == 0 or x.dtype.strong() == result:
            return False
        one_element = all(isinstance(n, int) and n == 1 for n in x.shape)
        read_as_given = bool(scalars_converted) and i not in scalars_converted
        return not (one_element and read_as_given and x.device.type == "cpu")

    return tuple(to_dtype(x, result) if converted(i, x) else x for i, x in enumerate(args))


def low_precision_cpu_dtype(args: tuple[Any, ...]) -> DType | None:
    """The operands' common dtype where it is bfloat16 or float16 and every tensor is on the
    CPU; None otherwise."""
    tensors = [x for x in args if isinstance(x, TensorProxy)]
    if not tensors or any(t.device.type != "cpu" for t in tensors):
        return None
    common = promote(*(x for x in args if x is not None), kind=Promotion.DEFAULT)[1].strong()
    return common if common in (dtypes.bfloat16, dtypes.float16) else None


def scalars_in_common_dtype(
    args: tuple[Any, ...], scalar_positions: tuple[int, ...] | None = None
) -> tuple[Any, ...]:
    """``args`` with Python numbers and 0-dim tensors converted to the common dtype where that
    is bfloat16 or float16 and the tensors are on the CPU (see ``compute``'s ``casts_cpu_scalars``);
    ``scalar_positions``: the only arguments converted (all when None)."""
    common = low_precision_cpu_dtype(args)
    if common is None:
        return args
    tensors = [x for x in args if isinstance(x, TensorProxy)]
    low = dtypes.to_torch_dtype(common)
    out = list(args)
    for i, x in enumerate(args):
        if scalar_positions is not None and i not in scalar_positions:
            continue
        if type(x) in (int, float) and math.isfinite(x):
            out[i] = float(torch.tensor(x, dtype=torch.float32).to(low).item())
        elif isinstance(x, NumberProxy) and x.python_type in (int, float):
            out[i] = symbolic_number_in_dtype(x, common, tensors[0].device)
        elif (
            isinstance(x, TensorProxy)
            and x.ndim == 0
            and x.dtype.strong() != common
            and len(tensors) > 1
        ):
            out[i] = prims.convert_element_type(x, common)
    return tuple(out)


def symbolic_number_in_dtype(x: NumberProxy, dtype: DType, device: Any) -> TensorProxy:
    """A symbolic number converted to ``dtype`` as a constant one is (through float32), by the
    program: a 0-dim tensor, which promotes as the number would with the operands."""
    as_float32 = prims.full((), x, device=device, dtype=dtypes.float32)
    return prims.convert_element_type(as_float32, dtype)  # type: ignore[no-any-return]


def zero_of(dtype: DType) -> Any:
    """0 of a dtype's Python kind (for comparing a tensor with zero)."""
    return dtypes.python_type_of(dtype)(0)


def check_in_place_result(out: TensorProxy, a: TensorProxy) -> None:
    """Eager's checks before an in-place op writes its result ``out`` into ``a``."""
    check(
        can_cast(out.dtype, a.dtype),
        lambda: (
            f"result type {torch_dtype_name(out.dtype)} can't be cast to the desired "
            f"output type {torch_dtype_name(a.dtype)}"
        ),
    )
    check(
        tuple(out.shape) == tuple(a.shape),
        lambda: (
            f"output with shape {list(a.shape)} doesn't match the broadcast shape {list(out.shape)}"
        ),
    )


def inplace(op: Symbol, *torch_names: str) -> Symbol:
    """Declares ``ltorch.<op>_``: ``op`` on the arguments, then ``prims.copy_`` of the result
    (converted to the first argument's dtype) into the first argument, with torch's checks."""
    name = op.name + "_"

    def fn(a: Any, *args: Any, **kwargs: Any) -> Any:
        check(
            isinstance(a, TensorProxy),
            lambda: f"{name}(): argument 'self' must be Tensor, not {type(a).__name__}",
            TypeError,
        )
        out = op(a, *args, **kwargs)
        check_in_place_result(out, a)
        return prims.copy_(to_dtype(out, a.dtype), a)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"In-place {op.name}: the result is copied into the first argument."
    return torchop(*torch_names, name=name, tags=(OpTag.IN_PLACE,))(fn)


def _float_unary(prim: Symbol, a: Any) -> Any:
    if isinstance(a, TensorProxy) and low_precision_cpu_dtype((a,)) is not None:
        # torch's float16/bfloat16 CPU kernels are not its float32 kernels rounded: erf's and
        # sqrt's are other code than the float32 ones (MKL's), sin of float16 300 and cosh of
        # bfloat16 89 differ, rsqrt's scalar loop (a tail, a strided input) rounds the root
        # first. The prim on the tensor as it is runs eager's kernel.
        return prim(a)
    return elementwise_unary(prim, a, Promotion.INT_TO_FLOAT)


# Sign and magnitude ------------------------------------------------------------------------


@torchop("torch.abs", "torch.Tensor.abs", "torch.absolute", "torch.Tensor.absolute", tags=_EW)
def abs(a: Any) -> Any:
    check_dtype("abs", a, lambda d: not d.is_boolean)
    if isinstance(a, TensorProxy) and a.dtype.is_exact and a.dtype == dtypes.uint8:
        return identity(a)
    return elementwise_unary(prims.abs, a, Promotion.COMPLEX_TO_FLOAT)


@torchop("torch.neg", "torch.Tensor.neg", "torch.negative", "torch.Tensor.negative", tags=_EW)
def neg(a: Any) -> Any:
    check(
        not (isinstance(a, TensorProxy) and a.dtype.is_boolean),
        "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
        "invert a mask, use the `~` or `logical_not()` operator instead.",
    )
    return elementwise_unary(prims.neg, a)


@torchop("torch.positive", "torch.Tensor.positive", tags=_EW)
def positive(a: Any) -> Any:
    check(
        not (isinstance(a, TensorProxy) and a.dtype.is_boolean),
        "The `+` operator, on a bool tensor is not supported.",
    )
    return identity(a) if isinstance(a, TensorProxy) else a


@torchop("torch.sign", "torch.Tensor.sign", tags=_EW)
def sign(a: Any) -> Any:
    check(
        not (isinstance(a, TensorProxy) and a.dtype.is_complex),
        "Unlike NumPy, torch.sign is not intended to support complex numbers. Please use "
        "torch.sgn instead.",
        UnsupportedOptionError,
    )
    if isinstance(a, TensorProxy) and a.dtype.is_boolean:
        return identity(a)
    return elementwise_unary(prims.sign, a)


@torchop("torch.sgn", "torch.Tensor.sgn", tags=_EW)
def sgn(a: Any) -> Any:
    if not (isinstance(a, TensorProxy) and a.dtype.is_complex):
        return sign(a)
    magnitude = prims.abs(a)
    is_zero = prims.eq(magnitude, 0.0)
    safe = prims.where(is_zero, 1.0, magnitude)
    unit = prims.div(a, prims.convert_element_type(safe, a.dtype))
    return prims.where(is_zero, 0j, unit)


@torchop("torch.signbit", "torch.Tensor.signbit", tags=_EW)
def signbit(a: Any) -> Any:
    check(
        not (isinstance(a, TensorProxy) and a.dtype.is_complex),
        "signbit is not implemented for complex tensors.",
        UnsupportedOptionError,
    )
    if isinstance(a, TensorProxy) and a.dtype.is_exact:
        if a.dtype.is_boolean or a.dtype == dtypes.uint8:
            return full_like(a, False, dtypes.bool8)
        return prims.lt(a, 0)
    return elementwise_unary(prims.signbit, a, Promotion.ALWAYS_BOOL)


# Exponentials, logarithms, powers ---------------------------------------------------------


@torchop("torch.exp", "torch.Tensor.exp", tags=_EW)
def exp(a: Any) -> Any:
    return _float_unary(prims.exp, a)


@torchop("torch.exp2", "torch.Tensor.exp2", "torch.special.exp2", tags=_EW)
def exp2(a: Any) -> Any:
    return _float_unary(prims.exp2, a)


@torchop("torch.expm1", "torch.Tensor.expm1", "torch.special.expm1", tags=_EW)
def expm1(a: Any) -> Any:
    return _float_unary(prims.expm1, a)


@torchop("torch.log", "torch.Tensor.log", tags=_EW)
def log(a: Any) -> Any:
    return _float_unary(prims.log, a)


@torchop("torch.log1p", "torch.Tensor.log1p", "torch.special.log1p", tags=_EW)
def log1p(a: Any) -> Any:
    return _float_unary(prims.log1p, a)


@torchop("torch.log2", "torch.Tensor.log2", tags=_EW)
def log2(a: Any) -> Any:
    return _float_unary(prims.log2, a)


@torchop("torch.log10", "torch.Tensor.log10", tags=_EW)
def log10(a: Any) -> Any:
    return _float_unary(prims.log10, a)


@torchop("torch.sqrt", "torch.Tensor.sqrt", tags=_EW)
def sqrt(a: Any) -> Any:
    return _float_unary(prims.sqrt, a)


@torchop("torch.rsqrt", "torch.Tensor.rsqrt", tags=_EW)
def rsqrt(a: Any) -> Any:
    return _float_unary(prims.rsqrt, a)


@torchop("torch.reciprocal", "torch.Tensor.reciprocal", tags=_EW)
def reciprocal(a: Any) -> Any:
    return _float_unary(prims.reciprocal, a)


@torchop("torch.square", "torch.Tensor.square", tags=_EW)
def square(a: Any) -> Any:
    return compute("square", Promotion.BOOL_TO_LONG, lambda x: prims.mul(x, x), a)


# Trigonometric and hyperbolic ---------------------------------------------------------------


@torchop("torch.sin", "torch.Tensor.sin", tags=_EW)
def sin(a: Any) -> Any:
    return _float_unary(prims.sin, a)


@torchop("torch.cos", "torch.Tensor.cos", tags=_EW)
def cos(a: Any) -> Any:
    return _float_unary(prims.cos, a)


@torchop("torch.tan", "torch.Tensor.tan", tags=_EW)
def tan(a: Any) -> Any:
    return _float_unary(prims.tan, a)


@torchop("torch.asin", "torch.Tensor.asin", "torch.arcsin", "torch.Tensor.arcsin", tags=_EW)
def asin(a: Any) -> Any:
    return _float_unary(prims.asin, a)


@torchop("torch.acos", "torch.Tensor.acos", "torch.arccos", "torch.Tensor.arccos", tags=_EW)
def acos(a: Any) -> Any:
    return _float_unary(prims.acos, a)


@torchop("torch.atan", "torch.Tensor.atan", "torch.arctan", "torch.Tensor.arctan", tags=_EW)
def atan(a: Any) -> Any:
    return _float_unary(prims.atan, a)


@torchop("torch.sinh", "torch.Tensor.sinh", tags=_EW)
def sinh(a: Any) -> Any:
    return _float_unary(prims.sinh, a)


@torchop("torch.cosh", "torch.Tensor.cosh", tags=_EW)
def cosh(a: Any) -> Any:
    return _float_unary(prims.cosh, a)


@torchop("torch.tanh", "torch.Tensor.tanh", "torch.nn.functional.tanh", tags=_EW)
def tanh(a: Any) -> Any:
    return _float_unary(prims.tanh, a)


@torchop("torch.asinh", "torch.Tensor.asinh", "torch.arcsinh", "torch.Tensor.arcsinh", tags=_EW)
def asinh(a: Any) -> Any:
    return _float_unary(prims.asinh, a)


@torchop("torch.acosh", "torch.Tensor.acosh", "torch.arccosh", "torch.Tensor.arccosh", tags=_EW)
def acosh(a: Any) -> Any:
    return _float_unary(prims.acosh, a)


@torchop("torch.atanh", "torch.Tensor.atanh", "torch.arctanh", "torch.Tensor.arctanh", tags=_EW)
def atanh(a: Any) -> Any:
    return _float_unary(prims.atanh, a)


# Special functions ----------------------------------------------------------------------------


@torchop("torch.erf", "torch.Tensor.erf", "torch.special.erf", tags=_EW)
def erf(a: Any) -> Any:
    return _float_unary(prims.erf, a)


@torchop("torch.erfc", "torch.Tensor.erfc", "torch.special.erfc", tags=_EW)
def erfc(a: Any) -> Any:
    return _float_unary(prims.erfc, a)


@torchop("torch.erfinv", "torch.Tensor.erfinv", "torch.special.erfinv", tags=_EW)
def erfinv(a: Any) -> Any:
    return _float_unary(prims.erfinv, a)


@torchop("torch.lgamma", "torch.Tensor.lgamma", "torch.special.gammaln", tags=_EW)
def lgamma(a: Any) -> Any:
    return _float_unary(prims.lgamma, a)


@torchop(
    "torch.digamma", "torch.Tensor.digamma", "torch.special.digamma", "torch.special.psi", tags=_EW
)
def digamma(a: Any) -> Any:
    return _float_unary(prims.digamma, a)


@torchop(
    "torch.sigmoid",
    "torch.Tensor.sigmoid",
    "torch.special.expit",
    "torch.nn.functional.sigmoid",
    tags=_EW,
)
def sigmoid(a: Any) -> Any:
    return _float_unary(prims.sigmoid, a)


# Rounding ----------------------------------------------------------------------------------


def _rounding(name: str, prim: Symbol, a: Any) -> Any:
    check_dtype(f"{name}", a, lambda d: not d.is_boolean)
    if isinstance(a, TensorProxy) and a.dtype.is_exact:
        return identity(a)
    return elementwise_unary(prim, a)


@torchop("torch.floor", "torch.Tensor.floor", tags=_EW)
def floor(a: Any) -> Any:
    return _rounding("floor", prims.floor, a)


@torchop("torch.ceil", "torch.Tensor.ceil", tags=_EW)
def ceil(a: Any) -> Any:
    return _rounding("ceil", prims.ceil, a)


@torchop("torch.trunc", "torch.Tensor.trunc", "torch.fix", "torch.Tensor.fix", tags=_EW)
def trunc(a: Any) -> Any:
    return _rounding("trunc", prims.trunc, a)


@torchop("torch.round", "torch.Tensor.round", tags=_EW)
def round(a: Any, *, decimals: int | None = None) -> Any:
    """``decimals`` given, even 0, is torch's ``round.decimals`` overload, which has no kernel
    for integer tensors (``round.default`` gives them back)."""
    if decimals is None:
        return _rounding("round", prims.round, a)
    check(
        is_int(decimals),
        lambda: f"round(): argument 'decimals' must be int, not {type(decimals).__name__}",
        TypeError,
    )
    decimals = int(decimals)  # a symbolic one: the program holds for this value (a guard)
    if isinstance(a, TensorProxy) and a.dtype.is_exact:
        kernel = "round_vml_cpu" if decimals == 0 else "round_cpu"
        raise not_implemented_for(kernel if a.device.type == "cpu" else "round", a.dtype)
    if decimals == 0 or not isinstance(a, TensorProxy):
        return _rounding("round", prims.round, a)

    # As torch: scale by 10**|decimals|, round half to even, scale back, in the tensor's dtype.
    def scaled(x: Any) -> Any:
        scale = float(10 ** builtins.abs(decimals))
        if decimals > 0:
            return prims.div(prims.round(prims.mul(x, scale)), scale)
        return prims.mul(prims.round(prims.div(x, scale)), scale)

    return compute("round", Promotion.DEFAULT, scaled, a)


@torchop("torch.special.round", tags=_EW)
def special_round(a: Any, *, decimals: int = 0) -> Any:
    return round(a, decimals=decimals)  # always the decimals overload, as torch's


@torchop("torch.frac", "torch.Tensor.frac", tags=_EW)
def frac(a: Any) -> Any:
    check_dtype("frac", a, lambda d: d.is_inexact)
    return compute("frac", Promotion.DEFAULT, lambda x: prims.sub(x, prims.trunc(x)), a)


# Classification ----------------------------------------------------------------------------


def _classify(name: str, prim: Symbol, a: Any, exact_value: bool) -> Any:
    if isinstance(a, TensorProxy) and a.dtype.is_exact:
        return full_like(a, exact_value, dtypes.bool8)
    return elementwise_unary(prim, a, Promotion.ALWAYS_BOOL)


@torchop("torch.isfinite", "torch.Tensor.isfinite", tags=_EW)
def isfinite(a: Any) -> Any:
    return _classify("isfinite", prims.isfinite, a, True)


@torchop("torch.isnan", "torch.Tensor.isnan", tags=_EW)
def isnan(a: Any) -> Any:
    return _classify("isnan", prims.isnan, a, False)


@torchop("torch.isinf", "torch.Tensor.isinf", tags=_EW)
def isinf(a: Any) -> Any:
    return _classify("isinf", prims.isinf, a, False)


def _is_signed_inf(name: str, a: Any, value: float) -> Any:
    check(
        isinstance(a, TensorProxy),
        lambda: f"{name}(): argument 'input' (position 1) must be Tensor, not {type(a).__name__}",
        TypeError,
    )
    check(not a.dtype.is_complex, lambda: f"{name} does not support complex inputs.")
    if a.dtype.is_exact:
        return full_like(a, False, dtypes.bool8)
    return prims.eq(a, value)


@torchop("torch.isposinf", "torch.Tensor.isposinf", tags=_EW)
def isposinf(a: Any) -> Any:
    return _is_signed_inf("isposinf", a, math.inf)


@torchop("torch.isneginf", "torch.Tensor.isneginf", tags=_EW)
def isneginf(a: Any) -> Any:
    return _is_signed_inf("isneginf", a, -math.inf)


@torchop("torch.isreal", "torch.Tensor.isreal", tags=_EW)
def isreal(a: Any) -> Any:
    check(
        isinstance(a, TensorProxy),
        lambda: f"isreal(): argument 'input' (position 1) must be Tensor, not {type(a).__name__}",
        TypeError,
    )
    if not a.dtype.is_complex:
        return full_like(a, True, dtypes.bool8)
    return prims.eq(prims.imag(a), 0.0)


# Logical and bitwise -------------------------------------------------------------------------


@torchop("torch.bitwise_not", "torch.Tensor.bitwise_not", tags=_EW)
def bitwise_not(a: Any) -> Any:
    check_dtype("bitwise_not", a, lambda d: d.is_exact)
    return elementwise_unary(prims.bitwise_not, a)


@torchop("torch.logical_not", "torch.Tensor.logical_not", tags=_EW)
def logical_not(a: Any) -> Any:
    check(
        isinstance(a, TensorProxy),
        lambda: (
            f"logical_not(): argument 'input' (position 1) must be Tensor, not {type(a).__name__}"
        ),
        TypeError,
    )
    return prims.eq(a, zero_of(a.dtype))


# Complex parts -------------------------------------------------------------------------------


# torch.real and torch.imag of a complex tensor are views of it (and torch.real of a real tensor is
# the tensor itself).
@torchop("torch.real", "torch.Tensor.real", tags=(*_EW, OpTag.VIEW))
def real(a: Any) -> Any:
    check(
        isinstance(a, TensorProxy),
        lambda: f"real(): argument 'input' (position 1) must be Tensor, not {type(a).__name__}",
        TypeError,
    )
    return prims.real(a) if a.dtype.is_complex else identity(a)


@torchop("torch.imag", "torch.Tensor.imag", tags=(*_EW, OpTag.VIEW))
def imag(a: Any) -> Any:
    check(
        isinstance(a, TensorProxy),
        lambda: f"imag(): argument 'input' (position 1) must be Tensor, not {type(a).__name__}",
        TypeError,
    )
    check(a.dtype.is_complex, "imag is not implemented for tensors with non-complex dtypes.")
    return prims.imag(a)


# Replacing and clamping values ----------------------------------------------------------------


@torchop("torch.nan_to_num", "torch.Tensor.nan_to_num", tags=_EW)
def nan_to_num(
    a: Any, nan: float | None = 0.0, posinf: float | None = None, neginf: float | None = None
) -> Any:
    check(
        isinstance(a, TensorProxy),
        lambda: (
            f"nan_to_num(): argument 'input' (position 1) must be Tensor, not {type(a).__name__}"
        ),
        TypeError,
    )
    if a.dtype.is_exact:
        return identity(a)
    if a.dtype.is_complex:
        raise UnsupportedOptionError("nan_to_num: complex tensors are not supported")
    torch_dtype = dtypes.to_torch_dtype(a.dtype)
    assert torch_dtype is not None
    info = torch.finfo(torch_dtype)
    nan = 0.0 if nan is None else float(nan)
    posinf = info.max if posinf is None else float(posinf)
    neginf = info.min if neginf is None else float(neginf)
    out = prims.where(prims.isnan(a), nan, a)
    out = prims.where(prims.eq(out, math.inf), posinf, out)
    return prims.where(prims.eq(out, -math.inf), neginf, out)


def _clamp(op: str, a: Any, lo: Any, hi: Any) -> Any:
    check(
        isinstance(a, TensorProxy),
        lambda: f"{op}(): argument 'input' (position 1) must be Tensor, not {type(a).__name__}",
        TypeError,
    )
    check(
        lo is not None or hi is not None,
        "torch.clamp: At least one of 'min' or 'max' must not be None",
    )
    for x, what in ((lo, "min"), (hi, "max")):
        check(
            x is None
            or isinstance(x, TensorProxy)
            or (is_number(x) and not isinstance(x, complex)),
            lambda: f"{op}(): argument '{what}' must be Number or Tensor, not {type(x).__name__}",
            TypeError,
        )
    check(
        not a.dtype.is_complex, "clamp is not supported for complex types", UnsupportedOptionError
    )

    def fn(x: Any, mn: Any, mx: Any) -> Any:
        # As torch: a NaN input stays NaN, a NaN bound gives NaN; min wins over a smaller max.
        maybe_nan = x.dtype.is_float
        if mn is not None:
            keep = prims.ge(x, mn)
            if maybe_nan:
                keep = prims.bitwise_or(keep, prims.isnan(x))
            x = prims.where(keep, x, mn)
        if mx is not None:
            keep = prims.le(x, mx)
            if maybe_nan:
                keep = prims.bitwise_or(keep, prims.isnan(x))
            x = prims.where(keep, x, mx)
        return x

    # torch converts a number bound to the result dtype, checked (int8 and max=1000 raises)
    result = promote(*(x for x in (a, lo, hi) if x is not None), kind=Promotion.NO_OPMATH)[1]
    for x in (lo, hi):
        if x is not None and not isinstance(x, TensorProxy):
            check_number_fits(x, result)
    return compute(op, Promotion.NO_OPMATH, fn, a, lo, hi, names=("input", "min", "max"))


@torchop("torch.clamp", "torch.Tensor.clamp", "torch.clip", "torch.Tensor.clip", tags=_EW)
def clamp(a: Any, min: Any = None, max: Any = None) -> Any:
    return _clamp("clamp", a, min, max)


@torchop("torch.clamp_min", "torch.Tensor.clamp_min", tags=_EW)
def clamp_min(a: Any, min: Any) -> Any:
    return _clamp("clamp_min", a, min, None)


@torchop("torch.clamp_max", "torch.Tensor.clamp_max", tags=_EW)
def clamp_max(a: Any, max: Any) -> Any:
    return _clamp("clamp_max", a, None, max)


# In-place variants -----------------------------------------------------------------------------

abs_ = inplace(abs, "torch.Tensor.abs_", "torch.abs_", "torch.Tensor.absolute_")
neg_ = inplace(neg, "torch.Tensor.neg_", "torch.neg_", "torch.Tensor.negative_", "torch.negative_")
sign_ = inplace(sign, "torch.Tensor.sign_")
sgn_ = inplace(sgn, "torch.Tensor.sgn_")
exp_ = inplace(exp, "torch.Tensor.exp_", "torch.exp_")
exp2_ = inplace(exp2, "torch.Tensor.exp2_", "torch.exp2_")
expm1_ = inplace(expm1, "torch.Tensor.expm1_", "torch.expm1_")
log_ = inplace(log, "torch.Tensor.log_", "torch.log_")
log1p_ = inplace(log1p, "torch.Tensor.log1p_", "torch.log1p_")
log2_ = inplace(log2, "torch.Tensor.log2_", "torch.log2_")
log10_ = inplace(log10, "torch.Tensor.log10_", "torch.log10_")
sqrt_ = inplace(sqrt, "torch.Tensor.sqrt_", "torch.sqrt_")
rsqrt_ = inplace(rsqrt, "torch.Tensor.rsqrt_", "torch.rsqrt_")
reciprocal_ = inplace(reciprocal, "torch.Tensor.reciprocal_", "torch.reciprocal_")
square_ = inplace(square, "torch.Tensor.square_", "torch.square_")
sin_ = inplace(sin, "torch.Tensor.sin_", "torch.sin_")
cos_ = inplace(cos, "torch.Tensor.cos_", "torch.cos_")
tan_ = inplace(tan, "torch.Tensor.tan_", "torch.tan_")
asin_ = inplace(asin, "torch.Tensor.asin_", "torch.asin_", "torch.Tensor.arcsin_", "torch.arcsin_")
acos_ = inplace(acos, "torch.Tensor.acos_", "torch.acos_", "torch.Tensor.arccos_", "torch.arccos_")
atan_ = inplace(atan, "torch.Tensor.atan_", "torch.atan_", "torch.Tensor.arctan_", "torch.arctan_")
sinh_ = inplace(sinh, "torch.Tensor.sinh_", "torch.sinh_")
cosh_ = inplace(cosh, "torch.Tensor.cosh_", "torch.cosh_")
tanh_ = inplace(tanh, "torch.Tensor.tanh_", "torch.tanh_")
asinh_ = inplace(
    asinh, "torch.Tensor.asinh_", "torch.asinh_", "torch.Tensor.arcsinh_", "torch.arcsinh_"
)
acosh_ = inplace(
    acosh, "torch.Tensor.acosh_", "torch.acosh_", "torch.Tensor.arccosh_", "torch.arccosh_"
)
atanh_ = inplace(
    atanh, "torch.Tensor.atanh_", "torch.atanh_", "torch.Tensor.arctanh_", "torch.arctanh_"
)
erf_ = inplace(erf, "torch.Tensor.erf_", "torch.erf_")
erfc_ = inplace(erfc, "torch.Tensor.erfc_", "torch.erfc_")
erfinv_ = inplace(erfinv, "torch.Tensor.erfinv_")
lgamma_ = inplace(lgamma, "torch.Tensor.lgamma_")
digamma_ = inplace(digamma, "torch.Tensor.digamma_")
sigmoid_ = inplace(sigmoid, "torch.Tensor.sigmoid_", "torch.sigmoid_")
floor_ = inplace(floor, "torch.Tensor.floor_", "torch.floor_")
ceil_ = inplace(ceil, "torch.Tensor.ceil_", "torch.ceil_")
trunc_ = inplace(trunc, "torch.Tensor.trunc_", "torch.trunc_", "torch.Tensor.fix_", "torch.fix_")
round_ = inplace(round, "torch.Tensor.round_", "torch.round_")
frac_ = inplace(frac, "torch.Tensor.frac_", "torch.frac_")
bitwise_not_ = inplace(bitwise_not, "torch.Tensor.bitwise_not_")
logical_not_ = inplace(logical_not, "torch.Tensor.logical_not_")
nan_to_num_ = inplace(nan_to_num, "torch.Tensor.nan_to_num_", "torch.nan_to_num_")
clamp_ = inplace(clamp, "torch.Tensor.clamp_", "torch.clamp_", "torch.Tensor.clip_", "torch.clip_")
clamp_min_ = inplace(clamp_min, "torch.Tensor.clamp_min_", "torch.clamp_min_")
clamp_max_ = inplace(clamp_max, "torch.Tensor.clamp_max_", "torch.clamp_max_")
