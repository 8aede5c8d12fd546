"""Elementwise torch-language ops of two or more operands: arithmetic, comparisons, logical and
bitwise ops, ``where``, ``masked_fill``, ``lerp``, ``addcmul``/``addcdiv``.

Operands broadcast to a common shape and promote to a common dtype as torch does (``compute`` in
``elementwise``); Python numbers are weak and keep their place in the prim call."""

from __future__ import annotations

import math
import warnings
from typing import Any

from thunder_ir import dtypes, prims
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.ops._helpers import (
    Promotion,
    _for_computation,
    broadcast,
    check_no_complex_half,
    is_number,
    promote,
    to_dtype,
)
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.elementwise import (
    check_dtype,
    check_number_fits,
    check_tensor_arg,
    check_value_fits,
    compute,
    inplace,
    low_precision_cpu_dtype,
    not_implemented_for,
    reciprocal,
    scalars_in_common_dtype,
    torch_dtype_name,
    zero_of,
)
from thunder_ir.ops.shape import contiguous
from thunder_ir.proxies import NumberProxy, TensorProxy
from thunder_ir.symbol import Symbol
from thunder_ir.tags import OpTag
from thunder_ir.utils import check, dtype_of, result_type

_EW = (OpTag.ELEMENTWISE,)
# mul's and div's CPU kernels read a scalar second operand as given (their fast path) but
# convert a scalar first operand to the low-precision dtype (see ``compute``).
_FIRST_ONLY = (0,)


def _is_bool(x: Any) -> bool:
    if isinstance(x, TensorProxy):
        return x.dtype.is_boolean
    if isinstance(x, NumberProxy):
        return x.python_type is bool
    return isinstance(x, bool)


def _is_float_number(x: Any) -> bool:
    if isinstance(x, NumberProxy):
        return x.python_type in (float, complex)
    return isinstance(x, (float, complex))


def _check_operands(op: str, a: Any, b: Any) -> None:
    for x, what in ((a, "input"), (b, "other")):
        check(
            isinstance(x, TensorProxy) or is_number(x),
            lambda: f"{op}(): argument '{what}' must be Tensor or Number, not {type(x).__name__}",
            TypeError,
        )


def _is_scalar_tensor(x: Any) -> bool:
    """A tensor torch's argument parser takes for a Number argument (it reads its value): of 0
    dimensions, not requiring grad."""
    return isinstance(x, TensorProxy) and x.ndim == 0 and not x.requires_grad


def _check_number_arg(op: str, what: str, x: Any) -> None:
    """torch's TypeError for a Number argument (``alpha``, ``value``) given something else."""
    check(
        is_number(x) or _is_scalar_tensor(x),
        lambda: (
            f"{op}(): argument '{what}' must be Number, not "
            f"{'Tensor' if isinstance(x, TensorProxy) else type(x).__name__}"
        ),
        TypeError,
    )


def _scalar_kind(x: Any) -> str:
    """The kind of Python number a Number argument is read as: "bool", "int", "float" or
    "complex" (a 0-dim tensor's by its dtype)."""
    if isinstance(x, TensorProxy):
        return str(x.dtype.kind)
    if isinstance(x, NumberProxy):
        return x.python_type.__name__
    return type(x).__name__


def _check_alpha(op: str, a: Any, b: Any, alpha: Any) -> None:
    _check_number_arg(op, "alpha", alpha)
    rt = result_type(a, b)
    kind = _scalar_kind(alpha)
    check(
        not (rt.is_exact and kind in ("float", "complex")),
        "For integral input tensors, argument alpha must not be a floating point number.",
    )
    check(
        rt.is_complex or kind != "complex",
        "For non-complex input tensors, argument alpha must not be a complex number.",
    )
    check(
        not (_is_bool(alpha) and not rt.is_boolean),
        "Boolean alpha only supported for Boolean results.",
    )
    if not isinstance(alpha, TensorProxy):
        check_number_fits(alpha, rt)  # torch converts alpha to the result dtype, checked


def _binary(
    op: str,
    prim: Symbol,
    a: Any,
    b: Any,
    kind: Promotion = Promotion.DEFAULT,
    casts_cpu_scalars: bool | tuple[int, ...] = False,
) -> Any:
    return compute(op, kind, prim, a, b, casts_cpu_scalars=casts_cpu_scalars)


def _check_common_dtype(op: str, a: Any, b: Any) -> None:
    """torch's "not implemented for" error where the dtype the op computes in (the operands'
    common dtype: a bool tensor with an int is int64) is bool or complex."""
    common = result_type(a, b)
    if common.is_boolean or common.is_complex:
        raise not_implemented_for(op, common)


def _with_alpha(op: str, prim: Symbol, a: Any, b: Any, alpha: Any) -> Any:
    """``prim(a, b * alpha)``; ``b`` is scaled before it is broadcast (fewer elements). In
    bfloat16 and float16 on the CPU torch computes ``a + alpha * b`` in float32 with ``alpha``
    converted to the dtype, rounding once: so does this."""
    if isinstance(alpha, (int, float)) and alpha == 1:
        return _binary(op, prim, a, b, casts_cpu_scalars=True)
    symbolic_low_precision = (
        isinstance(alpha, NumberProxy) and low_precision_cpu_dtype((a, b)) is not None
    )
    if isinstance(alpha, TensorProxy) or symbolic_low_precision:
        # A 0-dim tensor alpha is read as a number of the result dtype (bool alpha of a bool
        # add is True for any nonzero), then computed with as a Python alpha is; a symbolic
        # alpha of a low-precision CPU op is converted by the program (a 0-dim tensor) first.
        if isinstance(alpha, TensorProxy):
            scale = to_dtype(alpha, result_type(a, b))
        else:
            scale = scalars_in_common_dtype((a, b, alpha), scalar_positions=(2,))[2]
        return compute(
            op,
            Promotion.DEFAULT,
            lambda x, y, w: prim(x, prims.mul(y, w)),
            a,
            b,
            scale,
            casts_cpu_scalars=True,
        )
    if type(alpha) in (int, float) and low_precision_cpu_dtype((a, b)) is not None:
        alpha_cast = scalars_in_common_dtype((a, b, alpha), scalar_positions=(2,))[2]
        return compute(
            op,
            Promotion.DEFAULT,
            lambda x, y: prim(x, prims.mul(y, alpha_cast)),
            a,
            b,
            casts_cpu_scalars=True,
        )
    return _binary(op, prim, a, mul(b, alpha), casts_cpu_scalars=True)


# Arithmetic ------------------------------------------------------------------------------


@torchop("torch.add", "torch.Tensor.add", tags=_EW)
def add(a: Any, b: Any, *, alpha: Any = 1) -> Any:
    _check_operands("add", a, b)
    _check_alpha("add", a, b, alpha)
    return _with_alpha("add", prims.add, a, b, alpha)


def _check_sub_bool(a: Any, b: Any) -> None:
    check(
        not (_is_bool(a) and _is_bool(b)),
        "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
        "`logical_xor()` operator instead.",
    )
    check(
        not (_is_bool(a) or _is_bool(b)),
        "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
        "invert a mask, use the `~` or `logical_not()` operator instead.",
    )


@torchop("torch.sub", "torch.Tensor.sub", "torch.subtract", "torch.Tensor.subtract", tags=_EW)
def sub(a: Any, b: Any, *, alpha: Any = 1) -> Any:
    if isinstance(a, TensorProxy) or isinstance(b, TensorProxy):
        _check_sub_bool(a, b)
    _check_operands("sub", a, b)
    _check_alpha("sub", a, b, alpha)
    return _with_alpha("sub", prims.sub, a, b, alpha)


@torchop("torch.rsub", tags=_EW)
def rsub(a: Any, b: Any, *, alpha: Any = 1) -> Any:
    """``b - alpha * a``."""
    return sub(b, a, alpha=alpha)


@torchop("torch.mul", "torch.multiply", "torch.Tensor.mul", "torch.Tensor.multiply", tags=_EW)
def mul(a: Any, b: Any) -> Any:
    return _binary("mul", prims.mul, a, b, casts_cpu_scalars=_FIRST_ONLY)


def _true_divide(a: Any, b: Any) -> Any:
    return _binary("div", prims.div, a, b, Promotion.INT_TO_FLOAT, casts_cpu_scalars=_FIRST_ONLY)


def _trunc_divide(a: Any, b: Any) -> Any:
    if result_type(a, b).is_exact:
        return compute(
            "div", Promotion.DEFAULT, prims.trunc_divide, a, b, casts_cpu_scalars=_FIRST_ONLY
        )
    if isinstance(b, TensorProxy) and b.ndim > 0:
        # As torch's kernels: a tensor quotient is rounded to the result dtype, then truncated
        # (this differs from truncating in float32 for low-precision dtypes) ...
        return prims.trunc(
            compute("div", Promotion.DEFAULT, prims.div, a, b, casts_cpu_scalars=_FIRST_ONLY)
        )
    # ... while a quotient by a scalar is truncated in the computation dtype.
    return compute(
        "div",
        Promotion.DEFAULT,
        lambda x, y: prims.trunc(prims.div(x, y)),
        a,
        b,
        casts_cpu_scalars=_FIRST_ONLY,
    )


@torchop("torch.div", "torch.Tensor.div", "torch.divide", "torch.Tensor.divide", tags=_EW)
def div(a: Any, b: Any, *, rounding_mode: str | None = None) -> Any:
    if rounding_mode is None:
        return _true_divide(a, b)
    if rounding_mode == "trunc":
        check_dtype("div_trunc", a, lambda d: not d.is_boolean)
        return _trunc_divide(a, b)
    if rounding_mode == "floor":
        return floor_divide(a, b)
    raise RuntimeError(
        f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{rounding_mode}'"
    )


@torchop("torch.true_divide", "torch.Tensor.true_divide", tags=_EW)
def true_divide(a: Any, b: Any) -> Any:
    return _true_divide(a, b)


@torchop("torch.floor_divide", "torch.Tensor.floor_divide", tags=_EW)
def floor_divide(a: Any, b: Any) -> Any:
    _check_common_dtype("div_floor", a, b)
    # torch's float16/bfloat16 CPU kernel without a scalar divisor rounds each step of
    # c10::div_floor_floating; one of a huge quotient (a subnormal divisor) is nan in its vector
    # loop, 0 in its scalar one
    return compute(
        "floor_divide",
        Promotion.DEFAULT,
        prims.floor_divide,
        a,
        b,
        casts_cpu_scalars=_FIRST_ONLY,
        own_low_precision_kernel=True,
    )


@torchop("torch.remainder", "torch.Tensor.remainder", tags=_EW)
def remainder(a: Any, b: Any) -> Any:
    _check_common_dtype("remainder", a, b)
    # fmod's kernel (see there)
    return compute(
        "remainder",
        Promotion.DEFAULT,
        prims.remainder,
        a,
        b,
        casts_cpu_scalars=True,
        own_low_precision_kernel=True,
    )


@torchop("torch.fmod", "torch.Tensor.fmod", tags=_EW)
def fmod(a: Any, b: Any) -> Any:
    check_tensor_arg(a, "fmod", "input", 1)
    _check_common_dtype("fmod", a, b)
    # torch's float16/bfloat16 CPU kernel of a huge quotient (a subnormal divisor) is nan in its
    # vector loop, 0 in its scalar one (a tail, a broadcast or strided operand)
    return compute(
        "fmod",
        Promotion.DEFAULT,
        prims.fmod,
        a,
        b,
        casts_cpu_scalars=True,
        own_low_precision_kernel=True,
    )


@torchop("torch.pow", "torch.Tensor.pow", tags=_EW)
def pow(a: Any, b: Any) -> Any:
    check(
        not (
            isinstance(a, TensorProxy)
            and a.dtype.is_exact
            and isinstance(b, int)
            and not isinstance(b, bool)
            and b < 0
        ),
        "Integers to negative integer powers are not allowed.",
    )
    if _exponent_is_converted(a, b):
        # torch's kernel converts the exponent to the tensor's dtype first, checked: 70000.0
        # does not fit float16 (eager raises where an unchecked pow would give inf)
        check_number_fits(b, a.dtype)
    if _rounds_twice_in_torch(a, b):
        # torch's CPU kernel computes these as x * x * x and 1 / (x * x) in bfloat16, rounding
        # after each step (float16 and other exponents round once): the same steps, the same
        # values.
        square = mul(a, a)
        return mul(square, a) if b == 3 else reciprocal(square)
    if _exponent_is_converted(a, b) and a.device.type == "cpu":
        # Nor is any other exponent torch's float32 kernel rounded: float16's computes every
        # one as pow (pow(-inf, 0.5) is inf where sqrt gives nan), bfloat16's takes -0.5 to
        # rsqrt's kernel (see ``elementwise._float_unary``). The prim on the tensor as it is,
        # with the number unconverted, runs eager's kernel.
        return prims.pow(a, b)
    return _binary("pow", prims.pow, a, b, casts_cpu_scalars=True)


def _exponent_is_converted(a: Any, b: Any) -> bool:
    """A real number exponent of a float16 or bfloat16 tensor: torch's pow kernels take it as a
    scalar of that dtype (float32 and float64 kernels take a double)."""
    return (
        isinstance(a, TensorProxy)
        and a.dtype.strong() in (dtypes.float16, dtypes.bfloat16)
        and (
            type(b) in (int, float)
            or (isinstance(b, NumberProxy) and b.python_type in (int, float))
        )
    )


def _rounds_twice_in_torch(a: Any, b: Any) -> bool:
    return (
        isinstance(a, TensorProxy)
        and a.dtype.strong() == dtypes.bfloat16
        and a.device.type == "cpu"
        and (type(b) in (int, float) or isinstance(b, NumberProxy))
        and b in (3, -2)  # a symbolic exponent: decided, and checked by the prologue
    )


@torchop("torch.float_power", "torch.Tensor.float_power", tags=_EW)
def float_power(a: Any, b: Any) -> Any:
    check(
        isinstance(a, TensorProxy) or isinstance(b, TensorProxy),
        "float_power(): one of the arguments must be a tensor",
        TypeError,
    )
    complex_ = any(dtype_of(x).is_complex for x in (a, b))
    dtype = dtypes.complex128 if complex_ else dtypes.float64
    # Converted before they are broadcast, as eager's ``pow(a.to(dtype), b.to(dtype))``: the
    # gradient of an operand broadcast is summed in that dtype, then converted once.
    a, b = broadcast(_for_computation(a, dtype), _for_computation(b, dtype))
    return prims.pow(a, b)


@torchop("torch.atan2", "torch.Tensor.atan2", "torch.arctan2", "torch.Tensor.arctan2", tags=_EW)
def atan2(a: Any, b: Any) -> Any:
    check_tensor_arg(a, "atan2", "input", 1)
    check_tensor_arg(b, "atan2", "other", 2)
    # torch's float16/bfloat16 CPU kernel computes its scalar loop with another function than
    # its vector loop
    return compute(
        "atan2",
        Promotion.INT_TO_FLOAT,
        prims.atan2,
        a,
        b,
        casts_cpu_scalars=True,
        own_low_precision_kernel=True,
    )


@torchop("torch.hypot", "torch.Tensor.hypot", tags=_EW)
def hypot(a: Any, b: Any) -> Any:
    check_tensor_arg(a, "hypot", "input", 1)
    check_tensor_arg(b, "hypot", "other", 2)
    for x in (a, b):
        check_dtype("hypot", x, lambda d: d.is_float)
    return compute("hypot", Promotion.DEFAULT, _scaled_hypot, a, b, casts_cpu_scalars=True)


def _scaled_hypot(x: Any, y: Any) -> Any:
    """``sqrt(x * x + y * y)`` without squaring the larger magnitude, which overflows (3e20) or
    underflows (1e-30) in float32 where torch's kernel does not: ``big * sqrt(1 + (small /
    big) ** 2)``; 0 where both are 0, inf where either is inf (also against NaN), as torch."""
    ax, ay = prims.abs(x), prims.abs(y)
    big, small = prims.maximum(ax, ay), prims.minimum(ax, ay)
    ratio = prims.div(small, big)
    out = prims.mul(big, prims.sqrt(prims.add(prims.mul(ratio, ratio), 1.0)))
    out = prims.where(prims.eq(big, 0.0), big, out)
    infinite = prims.bitwise_or(prims.isinf(x), prims.isinf(y))
    return prims.where(infinite, float("inf"), out)


@torchop("torch.copysign", "torch.Tensor.copysign", tags=_EW)
def copysign(a: Any, b: Any) -> Any:
    check_tensor_arg(a, "copysign", "input", 1)
    return _binary("copysign", prims.copysign, a, b, Promotion.INT_TO_FLOAT, casts_cpu_scalars=True)


def _check_no_complex(op: str, *args: Any) -> None:
    for x in args:
        check_dtype(op, x, lambda d: not d.is_complex)


@torchop("torch.maximum", "torch.Tensor.maximum", tags=_EW)
def maximum(a: Any, b: Any) -> Any:
    check_tensor_arg(a, "maximum", "input", 1)
    check_tensor_arg(b, "maximum", "other", 2)
    _check_no_complex("maximum", a, b)
    return _binary("maximum", prims.maximum, a, b, casts_cpu_scalars=True)


@torchop("torch.minimum", "torch.Tensor.minimum", tags=_EW)
def minimum(a: Any, b: Any) -> Any:
    check_tensor_arg(a, "minimum", "input", 1)
    check_tensor_arg(b, "minimum", "other", 2)
    _check_no_complex("minimum", a, b)
    return _binary("minimum", prims.minimum, a, b, casts_cpu_scalars=True)


def _nan_ignoring(prim: Symbol) -> Any:
    def fn(x: Any, y: Any) -> Any:
        if not x.dtype.is_float:
            return prim(x, y)
        # NaN loses against a number; two NaNs give NaN.
        out = prim(x, y)
        out = prims.where(prims.isnan(x), y, out)
        return prims.where(prims.isnan(y), x, out)

    return fn


@torchop("torch.fmax", "torch.Tensor.fmax", tags=_EW)
def fmax(a: Any, b: Any) -> Any:
    check_tensor_arg(a, "fmax", "input", 1)
    check_tensor_arg(b, "fmax", "other", 2)
    _check_no_complex("fmax", a, b)
    return compute(
        "fmax", Promotion.DEFAULT, _nan_ignoring(prims.maximum), a, b, casts_cpu_scalars=True
    )


@torchop("torch.fmin", "torch.Tensor.fmin", tags=_EW)
def fmin(a: Any, b: Any) -> Any:
    check_tensor_arg(a, "fmin", "input", 1)
    check_tensor_arg(b, "fmin", "other", 2)
    _check_no_complex("fmin", a, b)
    return compute(
        "fmin", Promotion.DEFAULT, _nan_ignoring(prims.minimum), a, b, casts_cpu_scalars=True
    )


# Bitwise and logical -------------------------------------------------------------------------


def _bitwise(op: str, prim: Symbol, a: Any, b: Any) -> Any:
    for x in (a, b):
        check_dtype(op, x, lambda d: d.is_exact)
        check(
            not _is_float_number(x),
            lambda: f"{op}(): expected integer or bool operands, got {type(x).__name__}",
            TypeError,
        )
    return _binary(op, prim, a, b)


@torchop("torch.bitwise_and", "torch.Tensor.bitwise_and", tags=_EW)
def bitwise_and(a: Any, b: Any) -> Any:
    return _bitwise("bitwise_and", prims.bitwise_and, a, b)


@torchop("torch.bitwise_or", "torch.Tensor.bitwise_or", tags=_EW)
def bitwise_or(a: Any, b: Any) -> Any:
    return _bitwise("bitwise_or", prims.bitwise_or, a, b)


@torchop("torch.bitwise_xor", "torch.Tensor.bitwise_xor", tags=_EW)
def bitwise_xor(a: Any, b: Any) -> Any:
    return _bitwise("bitwise_xor", prims.bitwise_xor, a, b)


@torchop("torch.bitwise_left_shift", "torch.Tensor.bitwise_left_shift", tags=_EW)
def bitwise_left_shift(a: Any, b: Any) -> Any:
    return _bitwise("bitwise_left_shift", prims.shift_left, a, b)


@torchop("torch.bitwise_right_shift", "torch.Tensor.bitwise_right_shift", tags=_EW)
def bitwise_right_shift(a: Any, b: Any) -> Any:
    return _bitwise("bitwise_right_shift", prims.shift_right, a, b)


def _logical(op: str, prim: Symbol, a: Any, b: Any) -> Any:
    check_tensor_arg(a, op, "input", 1)
    check_tensor_arg(b, op, "other", 2)

    def truth(x: Any) -> Any:
        if isinstance(x, TensorProxy):
            return x if x.dtype.is_boolean else prims.ne(x, zero_of(x.dtype))
        return bool(x)

    a, b = broadcast(a, b)
    return prim(truth(a), truth(b))


@torchop("torch.logical_and", "torch.Tensor.logical_and", tags=_EW)
def logical_and(a: Any, b: Any) -> Any:
    return _logical("logical_and", prims.bitwise_and, a, b)


@torchop("torch.logical_or", "torch.Tensor.logical_or", tags=_EW)
def logical_or(a: Any, b: Any) -> Any:
    return _logical("logical_or", prims.bitwise_or, a, b)


@torchop("torch.logical_xor", "torch.Tensor.logical_xor", tags=_EW)
def logical_xor(a: Any, b: Any) -> Any:
    return _logical("logical_xor", prims.bitwise_xor, a, b)


# Comparisons ---------------------------------------------------------------------------------


def _compare(op: str, prim: Symbol, a: Any, b: Any, ordered: bool) -> Any:
    check_tensor_arg(a, op, "input", 1)
    if ordered:
        _check_no_complex(op, a, b)
    return _binary(op, prim, a, b, Promotion.ALWAYS_BOOL, casts_cpu_scalars=True)


@torchop("torch.eq", "torch.Tensor.eq", tags=_EW)
def eq(a: Any, b: Any) -> Any:
    return _compare("eq", prims.eq, a, b, False)


@torchop("torch.ne", "torch.Tensor.ne", "torch.not_equal", "torch.Tensor.not_equal", tags=_EW)
def ne(a: Any, b: Any) -> Any:
    return _compare("ne", prims.ne, a, b, False)


@torchop("torch.lt", "torch.Tensor.lt", "torch.less", "torch.Tensor.less", tags=_EW)
def lt(a: Any, b: Any) -> Any:
    return _compare("lt", prims.lt, a, b, True)


@torchop("torch.le", "torch.Tensor.le", "torch.less_equal", "torch.Tensor.less_equal", tags=_EW)
def le(a: Any, b: Any) -> Any:
    return _compare("le", prims.le, a, b, True)


@torchop("torch.gt", "torch.Tensor.gt", "torch.greater", "torch.Tensor.greater", tags=_EW)
def gt(a: Any, b: Any) -> Any:
    return _compare("gt", prims.gt, a, b, True)


@torchop(
    "torch.ge", "torch.Tensor.ge", "torch.greater_equal", "torch.Tensor.greater_equal", tags=_EW
)
def ge(a: Any, b: Any) -> Any:
    return _compare("ge", prims.ge, a, b, True)


# Ternary ------------------------------------------------------------------------------------


@torchop("torch.lerp", "torch.Tensor.lerp", tags=_EW)
def lerp(start: Any, end: Any, weight: Any) -> Any:
    check_tensor_arg(start, "lerp", "input", 1)
    check_tensor_arg(end, "lerp", "end", 2)
    for x, what in ((end, "end"), (weight, "weight")):
        # torch takes a zero-dimensional weight of any float dtype as a scalar.
        scalar = what == "weight" and isinstance(x, TensorProxy) and x.ndim == 0
        check(
            not isinstance(x, TensorProxy) or x.dtype == start.dtype or scalar,
            lambda: (
                f"expected dtype {torch_dtype_name(start.dtype).lower()} for `{what}` but got "
                f"dtype {torch_dtype_name(x.dtype).lower()}"
            ),
        )
    check(
        is_number(weight) or isinstance(weight, TensorProxy),
        lambda: f"lerp(): argument 'weight' must be Number or Tensor, not {type(weight).__name__}",
        TypeError,
    )
    check_dtype("lerp", start, lambda d: d.is_inexact)

    def fn(s: Any, e: Any, w: Any) -> Any:
        # As torch: weight < 0.5 ? start + weight * (end - start) : end - (end - start) * (1 - weight)
        diff = prims.sub(e, s)
        low = prims.add(s, prims.mul(w, diff))
        high = prims.sub(e, prims.mul(diff, prims.sub(1.0, w)))
        if isinstance(w, TensorProxy):
            return prims.where(prims.lt(prims.abs(w), 0.5), low, high)
        return low if abs(w) < 0.5 else high

    computation = dtypes.float32 if start.dtype.is_low_precision else start.dtype
    if not isinstance(weight, TensorProxy):
        check_number_fits(weight, computation)  # torch converts a number weight, checked
    s, e, w = broadcast(start, end, weight)
    out = fn(*(_for_computation(x, computation) for x in (s, e, w)))
    return to_dtype(out, start.dtype)


@torchop("torch.addcmul", "torch.Tensor.addcmul", tags=_EW)
def addcmul(a: Any, t1: Any, t2: Any, *, value: Any = 1) -> Any:
    for i, (x, what) in enumerate(((a, "input"), (t1, "tensor1"), (t2, "tensor2"))):
        check_tensor_arg(x, "addcmul", what, i + 1)
    _check_number_arg("addcmul", "value", value)
    _check_value_fits(value, a, t1, t2)
    return compute(
        "addcmul",
        Promotion.DEFAULT,
        # torch's order: self + value * t1 * t2 (rounding as its kernels round)
        lambda x, y, z, *v: prims.add(x, prims.mul(prims.mul(_value_as(value, v, x), y), z)),
        a,
        t1,
        t2,
        *_value_operand(value, a, t1, t2),
    )


def _check_value_fits(value: Any, *tensors: Any) -> None:
    """torch converts addcmul's and addcdiv's number ``value`` to the dtype it computes in,
    checked; CUDA kernels read it for an integer tensor as int64 (nothing to refuse there)."""
    if isinstance(value, TensorProxy):
        return
    computation = promote(*tensors, kind=Promotion.DEFAULT)[0]
    if computation.is_exact and tensors[0].device.type != "cpu":
        return
    check_number_fits(value, computation)


def _value_operand(value: Any, *tensors: Any) -> tuple[Any, ...]:
    """A 0-dim tensor ``value`` as one more operand of the computation, read in the dtype the
    op computes in (as torch reads the number); nothing for a number (``_value_as``)."""
    if not isinstance(value, TensorProxy):
        return ()
    computation, result = promote(*tensors, kind=Promotion.DEFAULT)
    # Among 0-dim operands only, an operand of the computation dtype (float32 for float16)
    # would promote the result: it is then read in the result dtype.
    dims = any(t.ndim > 0 for t in tensors)
    return (to_dtype(value, computation if dims else result),)


def _value_as(value: Any, operand: tuple[Any, ...], x: Any) -> Any:
    """The ``value`` of addcmul/addcdiv in the computation: its tensor operand broadcast
    (``_value_operand``), else the number as ``x``'s dtype holds it."""
    return operand[0] if operand else _number_as(value, x.dtype)


@torchop("torch.addcdiv", "torch.Tensor.addcdiv", tags=_EW)
def addcdiv(a: Any, t1: Any, t2: Any, *, value: Any = 1) -> Any:
    for i, (x, what) in enumerate(((a, "input"), (t1, "tensor1"), (t2, "tensor2"))):
        check_tensor_arg(x, "addcdiv", what, i + 1)
    check(
        not (t1.dtype.is_exact and t2.dtype.is_exact),
        "Integer division with addcdiv is no longer supported, and in a future release addcdiv "
        "will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can "
        "be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
        "integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future "
        "addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), "
        "for all dtypes.",
    )
    _check_number_arg("addcdiv", "value", value)
    _check_value_fits(value, a, t1, t2)
    return compute(
        "addcdiv",
        Promotion.DEFAULT,
        # torch's order: self + value * t1 / t2
        lambda x, y, z, *v: prims.add(x, prims.div(prims.mul(_value_as(value, v, x), y), z)),
        a,
        t1,
        t2,
        *_value_operand(value, a, t1, t2),
    )


@torchop("torch.where", tags=_EW)
def where(condition: Any, a: Any = None, b: Any = None) -> Any:
    if a is None and b is None:
        raise UnsupportedOptionError(
            "where(condition) with one argument (the indices of nonzero elements) is not "
            "supported: its output shape depends on the data; use torch.nonzero outside the "
            "compiled region"
        )
    check_tensor_arg(condition, "where", "condition", 1)
    if condition.dtype == dtypes.uint8:
        # eager accepts a uint8 condition (deprecated, with a warning): nonzero is true
        warnings.warn(
            "where received a uint8 condition tensor. This behavior is deprecated and will be "
            "removed in a future version of PyTorch. Use a boolean condition instead.",
            UserWarning,
            stacklevel=2,
        )
        condition = prims.ne(condition, 0)
    check(
        condition.dtype.is_boolean,
        lambda: (
            "where expected condition to be a boolean tensor, but got a tensor with dtype "
            f"{torch_dtype_name(condition.dtype)}"
        ),
    )
    for x, what in ((a, "input"), (b, "other")):
        check(
            isinstance(x, TensorProxy) or is_number(x),
            lambda: f"where(): argument '{what}' must be Tensor or Number, not {type(x).__name__}",
            TypeError,
        )
    check_no_complex_half(a, b)
    dtype = result_type(a, b)
    for x in (a, b):
        if not isinstance(x, TensorProxy):
            # torch converts a number, checked, to the result dtype (float32 for float16 and
            # bfloat16: where(c, half, 1e6) holds inf)
            check_number_fits(x, dtypes.float32 if dtype.is_low_precision else dtype)
    c, x, y = broadcast(condition, a, b)
    return prims.where(c, _for_computation(x, dtype), _for_computation(y, dtype))


@torchop("torch.Tensor.where", tags=_EW)
def tensor_where(a: Any, condition: Any, other: Any) -> Any:
    """``a.where(condition, other)``: ``torch.where(condition, a, other)``."""
    return where(condition, a, other)


@torchop("torch.masked_fill", "torch.Tensor.masked_fill", tags=_EW)
def masked_fill(a: Any, mask: Any, value: Any) -> Any:
    check_tensor_arg(a, "masked_fill", "input", 1)
    check_tensor_arg(mask, "masked_fill", "mask", 2)
    check(
        mask.dtype.is_boolean,
        lambda: (
            "masked_fill_ only supports boolean masks, but got mask with dtype "
            f"{torch_dtype_name(mask.dtype).lower()}"
        ),
    )
    if isinstance(value, TensorProxy):
        check(
            value.ndim == 0,
            lambda: (
                "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                f"{value.ndim} dimension(s)."
            ),
        )
        fill: Any = value
        if value.dtype != a.dtype:
            if value.device.type == "cpu":
                check_value_fits(value, a.dtype)  # eager converts value.item(), checked
            fill = prims.convert_element_type(value, a.dtype)
    else:
        check(
            is_number(value),
            lambda: (
                f"masked_fill(): argument 'value' must be Number or Tensor, not {type(value).__name__}"
            ),
            TypeError,
        )
        check_number_fits(value, a.dtype)
        fill = _number_as(value, a.dtype)
    x, m, f = broadcast(a, mask, fill)
    # torch fills a contiguous copy of the input: its layout, whatever the input's
    return contiguous(prims.where(m, f, x))


def _number_as(value: Any, dtype: Any) -> Any:
    """A Python number as a tensor of ``dtype`` would hold it (ints truncate toward zero)."""
    if isinstance(value, NumberProxy):
        return value
    if isinstance(value, complex) and not dtype.is_complex:
        value = value.real  # what fits a real dtype has no imaginary part (check_number_fits)
    if dtype.is_boolean:
        return bool(value)
    if dtype.is_exact:
        check(
            math.isfinite(value),
            lambda: f"value cannot be converted to type {torch_dtype_name(dtype)} without overflow",
        )
        return int(value)
    if dtype.is_complex:
        return complex(value)
    return float(value)


# In-place variants -----------------------------------------------------------------------------

add_ = inplace(add, "torch.Tensor.add_")
sub_ = inplace(sub, "torch.Tensor.sub_", "torch.Tensor.subtract_")
mul_ = inplace(mul, "torch.Tensor.mul_", "torch.Tensor.multiply_")
div_ = inplace(div, "torch.Tensor.div_", "torch.Tensor.divide_")
true_divide_ = inplace(true_divide, "torch.Tensor.true_divide_")
floor_divide_ = inplace(floor_divide, "torch.Tensor.floor_divide_")
remainder_ = inplace(remainder, "torch.Tensor.remainder_")
fmod_ = inplace(fmod, "torch.Tensor.fmod_")
pow_ = inplace(pow, "torch.Tensor.pow_")
float_power_ = inplace(float_power, "torch.Tensor.float_power_")
atan2_ = inplace(atan2, "torch.Tensor.atan2_", "torch.Tensor.arctan2_")
hypot_ = inplace(hypot, "torch.Tensor.hypot_")
copysign_ = inplace(copysign, "torch.Tensor.copysign_")
bitwise_and_ = inplace(bitwise_and, "torch.Tensor.bitwise_and_")
bitwise_or_ = inplace(bitwise_or, "torch.Tensor.bitwise_or_")
bitwise_xor_ = inplace(bitwise_xor, "torch.Tensor.bitwise_xor_")
bitwise_left_shift_ = inplace(bitwise_left_shift, "torch.Tensor.bitwise_left_shift_")
bitwise_right_shift_ = inplace(bitwise_right_shift, "torch.Tensor.bitwise_right_shift_")
logical_and_ = inplace(logical_and, "torch.Tensor.logical_and_")
logical_or_ = inplace(logical_or, "torch.Tensor.logical_or_")
logical_xor_ = inplace(logical_xor, "torch.Tensor.logical_xor_")
eq_ = inplace(eq, "torch.Tensor.eq_")
ne_ = inplace(ne, "torch.Tensor.ne_", "torch.Tensor.not_equal_")
lt_ = inplace(lt, "torch.Tensor.lt_", "torch.Tensor.less_")
le_ = inplace(le, "torch.Tensor.le_", "torch.Tensor.less_equal_")
gt_ = inplace(gt, "torch.Tensor.gt_", "torch.Tensor.greater_")
ge_ = inplace(ge, "torch.Tensor.ge_", "torch.Tensor.greater_equal_")
lerp_ = inplace(lerp, "torch.Tensor.lerp_")
addcmul_ = inplace(addcmul, "torch.Tensor.addcmul_")
addcdiv_ = inplace(addcdiv, "torch.Tensor.addcdiv_")
masked_fill_ = inplace(masked_fill, "torch.Tensor.masked_fill_")
