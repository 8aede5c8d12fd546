"""VJP rules of the elementwise and reduction prims, written with prims (inputs of an elementwise
prim already share shape and dtype, so the rules need no broadcasting), and of the composite
elementwise ops whose decomposition differentiates to another gradient than eager's (at the end).
Each follows eager's derivative formula, so values at ties, NaNs, infinities and zeros match."""

from __future__ import annotations

import cmath
import math
from typing import Any

from thunder_ir import BoundSymbol, NumberProxy, TensorProxy, dtypes, prims
from thunder_ir import ops as ltorch
from thunder_transforms.autodiff.registry import (
    GradPairs,
    bound_arguments,
    expand_reduced,
    is_real_number,
    register_vjp,
    sum_to_shape,
    zeros_like,
)

__all__: list[str] = []

P = prims


def _x_y(bsym: BoundSymbol) -> tuple[Any, TensorProxy]:
    return bsym.args[0], bsym.output


def _unary(sym: Any, dx: Any) -> None:
    """Registers ``g * dx(x, y)`` as the rule of a unary prim."""

    @register_vjp(sym)
    def rule(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
        x, y = _x_y(bsym)
        return [(x, P.mul(g, dx(x, y)))]


def _divided(sym: Any, denominator: Any) -> None:
    """Registers ``g / denominator(x)`` as the rule of a unary prim: eager divides, where
    ``g * (1 / d)`` overflows at a subnormal ``d`` (1 / 1e-45 is inf, 0.5 / 1e-45 is not)."""

    @register_vjp(sym)
    def rule(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
        x = bsym.args[0]
        return [(x, P.div(g, denominator(x)))]


def _sq(x: Any) -> Any:
    return P.mul(x, x)


_unary(P.exp, lambda x, y: y)
_unary(P.exp2, lambda x, y: P.mul(y, math.log(2.0)))
_unary(P.expm1, lambda x, y: P.add(y, 1.0))
_divided(P.log, lambda x: x)
_divided(P.log1p, lambda x: P.add(x, 1.0))
_divided(P.log2, lambda x: P.mul(x, math.log(2.0)))
_divided(P.log10, lambda x: P.mul(x, math.log(10.0)))
_unary(P.sqrt, lambda x, y: P.div(0.5, y))
_unary(P.rsqrt, lambda x, y: P.mul(-0.5, P.mul(y, _sq(y))))
_unary(P.reciprocal, lambda x, y: P.neg(_sq(y)))
_unary(P.sin, lambda x, y: P.cos(x))
_unary(P.cos, lambda x, y: P.neg(P.sin(x)))
_unary(P.tan, lambda x, y: P.add(_sq(y), 1.0))
_unary(P.asin, lambda x, y: P.rsqrt(P.sub(1.0, _sq(x))))
_unary(P.acos, lambda x, y: P.neg(P.rsqrt(P.sub(1.0, _sq(x)))))
_unary(P.atan, lambda x, y: P.reciprocal(P.add(_sq(x), 1.0)))
_unary(P.sinh, lambda x, y: P.cosh(x))
_unary(P.cosh, lambda x, y: P.sinh(x))
_unary(P.tanh, lambda x, y: P.sub(1.0, _sq(y)))
_unary(P.asinh, lambda x, y: P.rsqrt(P.add(_sq(x), 1.0)))
_unary(P.acosh, lambda x, y: P.rsqrt(P.sub(_sq(x), 1.0)))
_unary(P.atanh, lambda x, y: P.reciprocal(P.sub(1.0, _sq(x))))
_unary(P.erf, lambda x, y: P.mul(2.0 / math.sqrt(math.pi), P.exp(P.neg(_sq(x)))))
_unary(P.erfc, lambda x, y: P.mul(-2.0 / math.sqrt(math.pi), P.exp(P.neg(_sq(x)))))
_unary(P.erfinv, lambda x, y: P.mul(math.sqrt(math.pi) / 2.0, P.exp(_sq(y))))
_unary(P.lgamma, lambda x, y: P.digamma(x))
_unary(P.sigmoid, lambda x, y: P.mul(y, P.sub(1.0, y)))


@register_vjp(P.abs)
def _abs(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    x, y = _x_y(bsym)
    if not x.dtype.is_complex:
        return [(x, P.mul(g, P.sign(x)))]
    # |x| of a complex x: eager's gradient is g * sgn(x), sgn(x) = x / |x| (0 where x is 0)
    safe = P.where(P.eq(y, 0.0), 1.0, y)
    sgn = P.div(x, P.convert_element_type(safe, x.dtype))
    sgn = P.where(P.eq(y, 0.0), P.convert_element_type(P.mul(y, 0.0), x.dtype), sgn)
    return [(x, P.mul(P.convert_element_type(g, x.dtype), sgn))]


@register_vjp(P.neg)
def _neg(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    return [(bsym.args[0], P.neg(g))]


# Piecewise constant: the gradient is zero (eager returns zeros, so the input counts as reached).
@register_vjp(P.floor, P.ceil, P.round, P.trunc, P.sign, P.trunc_divide)
def _zero_grad(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    return []


@register_vjp(P.add)
def _add(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    return [(a, g), (b, g)]


@register_vjp(P.sub)
def _sub(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    return [(a, g), (b, P.neg(g) if isinstance(b, TensorProxy) else None)]


def _conj(x: Any) -> Any:
    """The complex conjugate (eager's gradients of complex products are taken with it); a real
    value as it is. The IR has no conjugation prim: torch's ``conj_physical`` runs it."""
    if isinstance(x, TensorProxy):
        return ltorch.torch_fallback("torch.conj_physical", x) if x.dtype.is_complex else x
    return x.conjugate() if isinstance(x, complex) else x


@register_vjp(P.mul)
def _mul(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    return [
        (a, P.mul(g, _conj(b)) if isinstance(a, TensorProxy) else None),
        (b, P.mul(g, _conj(a)) if isinstance(b, TensorProxy) else None),
    ]


@register_vjp(P.div)
def _div(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    ga = P.div(g, _conj(b)) if isinstance(a, TensorProxy) else None
    # As eager: -g * ((a / b) / b), which overflows and underflows where eager's does.
    gb = P.neg(P.mul(g, _conj(P.div(bsym.output, b)))) if isinstance(b, TensorProxy) else None
    return [(a, ga), (b, gb)]


def _log_of_number(x: Any) -> Any:
    """log of a Python number base as eager's ``Scalar`` log: -inf at 0, NaN below 0 (for a real
    base; a complex one takes the principal branch)."""
    if isinstance(x, complex) or getattr(x, "python_type", None) is complex:
        x = complex(x)  # a symbolic complex base: its value on this call (a constraint)
        return cmath.log(x) if x != 0 else complex(-math.inf, 0.0)
    if x == 0:
        return -math.inf
    return math.log(x) if x > 0 else math.nan


@register_vjp(P.pow)
def _pow(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    y = bsym.output
    pairs = []
    if isinstance(a, TensorProxy):
        # torch: exponent * a ** (exponent - 1), with 0 where the exponent is 0.
        if isinstance(b, TensorProxy):
            d = P.mul(g, P.mul(b, P.pow(a, P.sub(b, 1.0))))
            pairs.append((a, P.where(P.eq(b, 0.0), 0.0, d)))  # +0, not g * 0
        elif not (is_real_number(b) and b == 0):
            pairs.append((a, P.mul(g, P.mul(b, P.pow(a, P.sub(b, 1.0))))))
    if isinstance(b, TensorProxy):
        # torch: a ** b * log(a), with 0 where a == 0 and b >= 0.
        if is_real_number(a) and isinstance(a, NumberProxy):
            d = _times_log_of_symbolic_base(y, a, b)
        elif isinstance(a, (int, float, complex, NumberProxy)):  # a number: log(a) known now
            d = P.mul(y, _log_of_number(a))
            if a == 0:
                d = P.where(P.ge(b, 0.0), 0.0, d)
        else:
            d = P.mul(y, P.log(a))
            d = P.where(P.bitwise_and(P.eq(a, 0.0), P.ge(b, 0.0)), 0.0, d)
        pairs.append((b, P.mul(g, d)))
    return pairs


def _times_log_of_symbolic_base(y: TensorProxy, a: NumberProxy, b: TensorProxy) -> Any:
    """``y * log(a)`` of a symbolic real base, 0 where a == 0 and b >= 0: the log taken by the
    program (float64, as eager's Scalar log; -inf at 0, NaN below), so one program serves every
    base; the product in the computation dtype, as eager's multiply by a scalar."""
    base = P.full(tuple(y.shape), a, device=y.device, dtype=dtypes.float64)
    compute = dtypes.float32 if y.dtype.is_low_precision else y.dtype
    log = P.convert_element_type(P.log(base), compute)
    d = P.mul(y if y.dtype == compute else P.convert_element_type(y, compute), log)
    d = P.where(P.bitwise_and(P.eq(base, 0.0), P.ge(b, 0.0)), 0.0, d)
    return d if d.dtype == y.dtype else P.convert_element_type(d, y.dtype)


def _select_between(bsym: BoundSymbol, g: TensorProxy, a_loses: Any, b_loses: Any) -> GradPairs:
    """maximum/minimum as eager: ``where(a == b, g / 2, g)`` masked to 0 where that operand
    loses. A NaN operand loses no comparison: both operands get the whole gradient."""
    a, b = bsym.args
    shared = P.where(P.eq(a, b), P.mul(g, 0.5), g)
    ga = P.where(a_loses, 0.0, shared) if isinstance(a, TensorProxy) else None
    gb = P.where(b_loses, 0.0, shared) if isinstance(b, TensorProxy) else None
    return [(a, ga), (b, gb)]


@register_vjp(P.maximum)
def _maximum(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    return _select_between(bsym, g, P.lt(a, b), P.gt(a, b))


@register_vjp(P.minimum)
def _minimum(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    return _select_between(bsym, g, P.gt(a, b), P.lt(a, b))


@register_vjp(P.atan2)
def _atan2(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    # As eager: 1 / (a^2 + b^2), taken as 0 where that sum is 0 (atan2(0, 0) has gradient 0).
    denom = P.add(_sq(a), _sq(b))
    recip = P.where(P.eq(denom, 0.0), 0.0, P.reciprocal(denom))
    return [(a, P.mul(P.mul(g, b), recip)), (b, P.mul(P.mul(g, P.neg(a)), recip))]


def _derivative_not_implemented(torch_name: str, bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    """Eager has no derivative for this call and raises when a gradient reaches it: the backward
    runs the torch callable under autograd, which raises that same error."""
    args = tuple(bsym.args)
    grads = ltorch.torch_fallback_vjp(torch_name, args, {}, (g,))
    return list(zip(args, grads))


@register_vjp(P.floor_divide)
def _floor_divide(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    return _derivative_not_implemented("torch.floor_divide", bsym, g)


@register_vjp(P.remainder)
def _remainder(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    if not isinstance(a, TensorProxy):
        return _derivative_not_implemented("torch.remainder", bsym, g)  # remainder(Scalar, Tensor)
    # As eager: -g * div(a, b, rounding_mode="floor"), not floor(a / b), which rounds the
    # quotient first (1 % 0.1) and differs at infinities.
    gb = P.neg(P.mul(g, P.floor_divide(a, b))) if isinstance(b, TensorProxy) else None
    return [(a, g), (b, gb)]


@register_vjp(P.fmod)
def _fmod(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    gb = P.neg(P.mul(g, P.trunc(P.div(a, b)))) if isinstance(b, TensorProxy) else None
    return [(a, g), (b, gb)]


@register_vjp(P.copysign)
def _copysign(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, _ = bsym.args
    # Eager: g * (result / a), the ratio taken as 0 where a is 0 (so the zero has g's sign).
    ratio = P.where(P.eq(a, 0.0), 0.0, P.div(bsym.output, P.where(P.eq(a, 0.0), 1.0, a)))
    return [(a, P.mul(g, ratio))]


@register_vjp(P.where)
def _where(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    pred, a, b = bsym.args
    return [(a, P.where(pred, g, 0.0)), (b, P.where(pred, 0.0, g))]


@register_vjp(P.convert_element_type)
def _convert_element_type(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a = bsym.args[0]
    if not isinstance(a, TensorProxy) or not a.dtype.is_inexact:
        return []
    if g.dtype.is_complex and not a.dtype.is_complex:
        g = P.real(g)  # a real value made complex: eager's gradient is the real part
    return [(a, g if g.dtype == a.dtype else P.convert_element_type(g, a.dtype))]


# Reductions -----------------------------------------------------------------------------------


def _reduced_dims(a: TensorProxy, dims: Any) -> tuple[int, ...]:
    return tuple(d % a.ndim for d in dims) if a.ndim else ()


def _count(a: TensorProxy, dims: tuple[int, ...]) -> Any:
    n: Any = 1
    for d in dims:
        n = n * a.shape[d]
    return n


@register_vjp(P.sum)
def _sum(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, dims = bsym.args
    return [(a, expand_reduced(g, a.shape, _reduced_dims(a, dims)))]


def _count_zeros(a: TensorProxy) -> Any:
    """The number of zero elements of ``a``, an int64 scalar tensor."""
    is_zero = P.convert_element_type(P.eq(a, 0.0), dtypes.int64)
    return P.sum(is_zero, tuple(range(a.ndim)))


def _scalar_to(t: Any, shape: Any) -> Any:
    return P.broadcast_in_dim(t, tuple(shape), ())


def _products_of_others(g: TensorProxy, a: TensorProxy, d: int) -> Any:
    """Eager's ``prod_safe_zeros_backward``: ``g`` times the product of the elements before and
    of those after each element along ``d`` (exclusive cumulative products), no division."""
    n = a.shape[d]
    if isinstance(n, int) and n == 0:
        return g
    ones_shape = [1 if i == d else s for i, s in enumerate(a.shape)]
    ones = P.full(tuple(ones_shape), 1.0, device=a.device, dtype=a.dtype)

    def narrow(start: Any, stop: Any) -> Any:
        lo = [start if i == d else 0 for i in range(a.ndim)]
        hi = [stop if i == d else s for i, s in enumerate(a.shape)]
        return P.slice_prim(a, lo, hi)

    before = P.cumprod(P.cat([ones, narrow(0, n - 1)], d), d)
    after = P.flip(P.cumprod(P.cat([ones, P.flip(narrow(1, n), (d,))], d), d), (d,))
    return P.mul(g, P.mul(before, after))


def _merged_last(t: TensorProxy, ds: tuple[int, ...]) -> Any:
    """``t`` with the dims ``ds`` moved last and merged into one."""
    kept = [i for i in range(t.ndim) if i not in ds]
    moved = P.transpose(t, (*kept, *ds))
    return P.reshape(moved, (*(t.shape[i] for i in kept), _count(t, ds)))


def _unmerged(t: TensorProxy, like: TensorProxy, ds: tuple[int, ...]) -> Any:
    """The inverse of ``_merged_last``: ``t`` back in the shape of ``like``."""
    perm = (*(i for i in range(like.ndim) if i not in ds), *ds)
    moved = P.reshape(t, tuple(like.shape[i] for i in perm))
    return P.transpose(moved, tuple(perm.index(i) for i in range(like.ndim)))


@register_vjp(P.prod)
def _prod(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's prod_backward: g * result / a when the input holds no zero; else the products of
    # the other elements, computed without division (a NaN or inf elsewhere shows). A full
    # reduction with two or more zeros gives zeros.
    a, dims = bsym.args
    if a.ndim == 0:
        return [(a, g)]
    return [(a, _prod_grad(a, _reduced_dims(a, dims), bsym.output, g))]


def _prod_grad(a: TensorProxy, ds: tuple[int, ...], result: TensorProxy, g: TensorProxy) -> Any:
    """Eager's prod_backward of ``result = a.prod(ds)`` (``ds`` removed from its shape), in
    ``a``'s dtype: each op rounds there as eager's."""
    gb = expand_reduced(g, a.shape, ds)
    by_division = P.mul(gb, P.div(expand_reduced(result, a.shape, ds), a))
    zeros = _scalar_to(_count_zeros(a), a.shape)
    if len(ds) == 1:
        others = _products_of_others(gb, a, ds[0])
    else:  # several dims (all of them, for torch's prod()): reduced as one
        last = a.ndim - len(ds)
        merged = _products_of_others(_merged_last(gb, ds), _merged_last(a, ds), last)
        others = _unmerged(merged, a, ds)
    if len(ds) == a.ndim:
        others = P.where(P.eq(zeros, 1), others, 0.0)
    return P.where(P.eq(zeros, 0), by_division, others)


def _low_precision_prod(bsym: BoundSymbol) -> bool:
    args = bound_arguments(bsym)
    a, dtype = args["a"], args["dtype"]
    return (
        isinstance(a, TensorProxy)
        and a.dtype.is_low_precision
        and a.ndim > 0
        and (dtype is None or dtypes.to_dtype(dtype) == a.dtype)
    )


@register_vjp(ltorch.prod, applies=_low_precision_prod)
def _ltorch_prod(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    """float16/bfloat16: kept whole, so the forward is torch's kernel (the decomposition
    multiplies in float32, torch's kernel otherwise); the gradient eager's, in that dtype."""
    args = bound_arguments(bsym)
    a, dim, keepdim = args["a"], args["dim"], args["keepdim"]
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        ds = tuple(range(a.ndim))
    else:
        ds = tuple(
            sorted({d % a.ndim for d in (dim if isinstance(dim, (tuple, list)) else (dim,))})
        )
    result = bsym.output
    if keepdim:
        reduced = tuple(s for i, s in enumerate(a.shape) if i not in ds)
        result, g = P.reshape(result, reduced), P.reshape(g, reduced)
    return [(a, _prod_grad(a, ds, result, g))]


@register_vjp(P.amax, P.amin)
def _amax(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, dims = bsym.args
    ds = _reduced_dims(a, dims)
    hit = P.convert_element_type(P.eq(a, expand_reduced(bsym.output, a.shape, ds)), a.dtype)
    count = expand_reduced(P.sum(hit, ds), a.shape, ds)
    return [(a, P.mul(expand_reduced(g, a.shape, ds), P.div(hit, count)))]


def var_scale(n: Any, correction: Any) -> Any:
    """2 / (n - correction); inf with no degrees of freedom left, as eager (its gradient is NaN)."""
    dof = P.sub(n, correction)
    if isinstance(dof, (int, float)) and dof == 0:
        return math.inf
    return P.div(2.0, dof)


def times_var_scale(x: TensorProxy, n: Any, correction: Any) -> Any:
    """``x * var_scale(n, correction)``. A count read from data (``x[mask].var(0)``) may be the
    correction on some call, where a number's division raises: the tensor is divided instead,
    which gives eager's inf and NaN there."""
    dof = P.sub(n, correction)
    if isinstance(dof, NumberProxy):
        return P.div(P.mul(x, 2.0), dof)
    return P.mul(x, var_scale(n, correction))


def _var_grad(a: TensorProxy, ds: tuple[int, ...], correction: Any, gv: Any, mean: Any) -> Any:
    if mean is None:
        mean = P.div(P.sum(a, ds), _count(a, ds))
    centered = P.sub(a, expand_reduced(mean, a.shape, ds))
    return times_var_scale(
        P.mul(expand_reduced(gv, a.shape, ds), centered), _count(a, ds), correction
    )


@register_vjp(P.var)
def _var(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, dims = bsym.args
    ds = _reduced_dims(a, dims)
    return [(a, _var_grad(a, ds, bsym.kwargs["correction"], g, None))]


@register_vjp(P.var_mean)
def _var_mean(bsym: BoundSymbol, gv: Any, gm: Any) -> GradPairs:
    a, dims = bsym.args
    ds = _reduced_dims(a, dims)
    pairs = []
    if gv is not None:
        pairs.append((a, _var_grad(a, ds, bsym.kwargs["correction"], gv, bsym.output[1])))
    if gm is not None:
        pairs.append((a, P.div(expand_reduced(gm, a.shape, ds), _count(a, ds))))
    return pairs


@register_vjp(P.cumsum)
def _cumsum(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, dim = bsym.args
    if a.ndim == 0:
        return [(a, g)]
    return [(a, P.flip(P.cumsum(P.flip(g, (dim,)), dim), (dim,)))]


@register_vjp(P.cumprod)
def _cumprod(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, dim = bsym.args
    if a.ndim == 0 or (isinstance(a.shape[dim], int) and a.shape[dim] == 1):
        return [(a, g)]
    d = dim % a.ndim

    def rev_cumsum(t: Any) -> Any:
        return P.flip(P.cumsum(P.flip(t, (d,)), d), (d,))

    # As eager: sum_{j >= i} g_j * y_j / a_i before the first zero; at the first zero z1, the
    # product of the elements before it times sum_{z1 <= j < z2} g_j * prod_{z1 < k <= j} a_k
    # (z2 the second zero); after it, 0.
    is_zero = P.eq(a, 0.0)
    zeros_seen = P.cumsum(P.convert_element_type(is_zero, dtypes.int64), d)
    before = P.eq(zeros_seen, 0)
    first_run = P.eq(zeros_seen, 1)
    before_grad = P.div(
        rev_cumsum(P.where(before, P.mul(bsym.output, g), 0.0)), P.where(before, a, 1.0)
    )
    tail = P.cumprod(P.where(P.bitwise_and(first_run, P.bitwise_not(is_zero)), a, 1.0), d)
    tail_sum = expand_reduced(P.sum(P.mul(tail, P.where(first_run, g, 0.0)), (d,)), a.shape, (d,))
    at_zero = P.mul(tail_sum, P.cumprod(P.where(before, a, 1.0), d))
    first_zero = P.bitwise_and(first_run, is_zero)
    return [(a, P.where(before, before_grad, P.where(first_zero, at_zero, 0.0)))]


# Composite elementwise ops whose decomposition differentiates to another gradient than eager's
# at ties, NaNs or infinities: their rules follow eager's derivative formulas. Written with the
# torch-language ops, which broadcast and promote as torch; each gradient is summed back to
# its input's shape.


def _to_shape(grad: Any, x: Any) -> Any:
    return sum_to_shape(grad, x.shape) if isinstance(x, TensorProxy) else None


def _zero_where_not(keep: Any, g: TensorProxy) -> Any:
    return ltorch.where(keep, g, 0.0)


def _low_precision_true_division(args: dict[str, Any]) -> bool:
    a, b = args["a"], args["b"]
    return (
        args.get("rounding_mode") is None
        and isinstance(b, TensorProxy)
        and any(isinstance(x, TensorProxy) and x.dtype.is_low_precision for x in (a, b))
    )


def _div_applies(bsym: BoundSymbol) -> bool:
    args = bound_arguments(bsym)
    return args["rounding_mode"] is not None or _low_precision_true_division(args)


def _true_divide_applies(bsym: BoundSymbol) -> bool:
    return _low_precision_true_division(bound_arguments(bsym))


@register_vjp(ltorch.true_divide, applies=_true_divide_applies)
@register_vjp(ltorch.div, applies=_div_applies)
def _div_composite(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    args = bound_arguments(bsym)
    a, b = args["a"], args["b"]
    if args.get("rounding_mode") is None:
        # float16/bfloat16, as eager's formula rounds: grad / b and -grad * ((a / b) / b), the
        # quotient the rounded result
        ga = ltorch.div(g, b)
        gb = ltorch.mul(ltorch.neg(g), ltorch.div(bsym.output, b))
        return [(a, _to_shape(ga, a)), (b, _to_shape(gb, b))]
    # Eager: zeros for both operands of a rounded division, whatever the gradient (floor_divide
    # itself has no derivative, see its prim's rule).
    operands = (a, b)
    return [(x, zeros_like(x)) for x in operands if isinstance(x, TensorProxy)]


def _fmax_fmin(bsym: BoundSymbol, g: TensorProxy, compare: Any) -> GradPairs:
    # Eager: the whole gradient to ``a`` where it wins or ties or ``b`` is NaN, else to ``b``.
    args = bound_arguments(bsym)
    a, b = args["a"], args["b"]
    a_taken = ltorch.logical_or(compare(a, b), ltorch.isnan(b))
    return [
        (a, _to_shape(_zero_where_not(a_taken, g), a)),
        (b, _to_shape(ltorch.where(a_taken, 0.0, g), b)),
    ]


@register_vjp(ltorch.fmax)
def _fmax(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    return _fmax_fmin(bsym, g, ltorch.ge)


@register_vjp(ltorch.fmin)
def _fmin(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    return _fmax_fmin(bsym, g, ltorch.le)


def _clamp_grads(g: TensorProxy, a: TensorProxy, lo: Any, hi: Any) -> GradPairs:
    """Eager's clamp_backward and clamp_backward_min_max: ``a`` gets the gradient where
    ``lo <= a <= hi`` (never at a NaN input or bound); a tensor bound gets it where it clamped,
    ``lo`` only where ``lo < hi``."""
    keep = None
    if lo is not None:
        keep = ltorch.ge(a, lo)
    if hi is not None:
        below_hi = ltorch.le(a, hi)
        keep = below_hi if keep is None else ltorch.logical_and(keep, below_hi)
    pairs: list[tuple[Any, Any]] = [(a, _to_shape(_zero_where_not(keep, g), a))]
    if isinstance(lo, TensorProxy):
        took_lo = ltorch.lt(a, lo)
        if hi is not None:
            took_lo = ltorch.logical_and(took_lo, ltorch.lt(lo, hi))
        pairs.append((lo, _to_shape(_zero_where_not(took_lo, g), lo)))
    if isinstance(hi, TensorProxy):
        took_hi = ltorch.gt(a, hi)
        if lo is not None:
            took_hi = ltorch.logical_or(took_hi, ltorch.lt(hi, lo))
        pairs.append((hi, _to_shape(_zero_where_not(took_hi, g), hi)))
    return pairs


def _clamps_float(bsym: BoundSymbol) -> bool:
    a = bsym.args[0] if bsym.args else None
    return isinstance(a, TensorProxy) and a.dtype.is_float


@register_vjp(ltorch.clamp, applies=_clamps_float)
def _clamp(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    args = bound_arguments(bsym)
    return _clamp_grads(g, args["a"], args["min"], args["max"])


@register_vjp(ltorch.clamp_min, applies=_clamps_float)
def _clamp_min(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    args = bound_arguments(bsym)
    return _clamp_grads(g, args["a"], args["min"], None)


@register_vjp(ltorch.clamp_max, applies=_clamps_float)
def _clamp_max(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    args = bound_arguments(bsym)
    return _clamp_grads(g, args["a"], None, args["max"])


@register_vjp(ltorch.hypot)
def _hypot(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager: g * x / result for each operand. The op kept whole also keeps torch's forward,
    # which neither overflows nor underflows as the decomposition's sqrt(x * x + y * y).
    args = bound_arguments(bsym)
    y = bsym.output
    return [(x, _to_shape(ltorch.div(ltorch.mul(g, x), y), x)) for x in (args["a"], args["b"])]


@register_vjp(ltorch.nan_to_num)
def _nan_to_num(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager: g * isfinite(a) (a zero of g's sign where a is not finite).
    a = bsym.args[0]
    return [(a, P.mul(g, P.convert_element_type(P.isfinite(a), g.dtype)))]


def _scaled_by_alpha(bsym: BoundSymbol) -> bool:
    args = bound_arguments(bsym)
    alpha = args["alpha"]
    return (
        isinstance(alpha, (int, float, NumberProxy))
        and not (type(alpha) in (int, float) and alpha == 1)
        and any(isinstance(x, TensorProxy) and x.dtype.is_inexact for x in (args["a"], args["b"]))
    )


@register_vjp(ltorch.add, ltorch.sub, ltorch.rsub, applies=_scaled_by_alpha)
def _add_sub_alpha(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager: grad and (-)grad * alpha. Kept whole, the forward is torch's kernel, which computes
    # a + alpha * b rounding once where the decomposition rounds the product first (rsub(a, b)
    # is b - alpha * a).
    args = bound_arguments(bsym)
    a, b, alpha = args["a"], args["b"], args["alpha"]
    if bsym.sym is ltorch.rsub:
        a, b = b, a
    gb = ltorch.mul(g if bsym.sym is ltorch.add else ltorch.neg(g), alpha)
    return [(a, _to_shape(g, a)), (b, _to_shape(gb, b))]


@register_vjp(ltorch.addcdiv)
def _addcdiv(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager: g * (value / t2) and -g * (value * t1 / (t2 * t2)), not the gradient of the
    # decomposition's division, which rounds (and overflows) at other steps.
    args = bound_arguments(bsym)
    a, t1, t2, value = args["a"], args["t1"], args["t2"], args["value"]
    g1 = ltorch.mul(g, ltorch.div(value, t2))
    g2 = ltorch.mul(ltorch.neg(g), ltorch.div(ltorch.mul(t1, value), ltorch.mul(t2, t2)))
    return [(a, _to_shape(g, a)), (t1, _to_shape(g1, t1)), (t2, _to_shape(g2, t2))]


@register_vjp(ltorch.addcmul)
def _addcmul(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager: grad, grad * (t2 * value) and grad * (t1 * value); a rule keeps the forward one op
    # (torch's kernel rounds once where the decomposition rounds after each product).
    args = bound_arguments(bsym)
    a, t1, t2, value = args["a"], args["t1"], args["t2"], args["value"]
    g1 = ltorch.mul(g, _conj(ltorch.mul(t2, value)))
    g2 = ltorch.mul(g, _conj(ltorch.mul(t1, value)))
    return [(a, _to_shape(g, a)), (t1, _to_shape(g1, t1)), (t2, _to_shape(g2, t2))]


@register_vjp(P.digamma)
def _digamma(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    x = bsym.args[0]
    trigamma = ltorch.torch_fallback("torch.special.polygamma", 1, x)
    return [(x, P.mul(g, trigamma))]


@register_vjp(P.real)
def _real(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    x = bsym.args[0]
    if not x.dtype.is_complex:
        return [(x, g)]
    return [(x, P.convert_element_type(g, x.dtype))]  # g + 0j


@register_vjp(P.imag)
def _imag(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    x = bsym.args[0]
    # 0 + g j, built from its parts (g * 1j would make 0 * inf = nan of an infinite g)
    return [(x, ltorch.torch_fallback("torch.complex", zeros_like(g), g))]
