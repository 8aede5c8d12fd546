"""VJP rules of the elementwise and reduction prims, written with prims (inputs of an elementwise
prim already share shape and dtype, so the rules need no broadcasting)."""

from __future__ import annotations

import math
from typing import Any

from thunder_ir import BoundSymbol, TensorProxy, dtypes, prims
from thunder_transforms.autodiff.registry import (
    GradPairs,
    expand_reduced,
    register_vjp,
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


def _sq(x: Any) -> Any:
    return P.mul(x, x)


_unary(P.exp, lambda x, y: y)
_unary(P.exp2, lambda x, y: P.mul(y, math.log(2.0)))
_unary(P.expm1, lambda x, y: P.add(y, 1.0))
_unary(P.log, lambda x, y: P.reciprocal(x))
_unary(P.log1p, lambda x, y: P.reciprocal(P.add(x, 1.0)))
_unary(P.log2, lambda x, y: P.reciprocal(P.mul(x, math.log(2.0))))
_unary(P.log10, lambda x, y: P.reciprocal(P.mul(x, math.log(10.0))))
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
@register_vjp(P.floor, P.ceil, P.round, P.trunc, P.sign, P.floor_divide, P.trunc_divide)
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


@register_vjp(P.mul)
def _mul(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    return [
        (a, P.mul(g, b) if isinstance(a, TensorProxy) else None),
        (b, P.mul(g, a) if isinstance(b, TensorProxy) else None),
    ]


@register_vjp(P.div)
def _div(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    ga = P.div(g, b) if isinstance(a, TensorProxy) else None
    gb = P.neg(P.div(P.mul(g, bsym.output), b)) if isinstance(b, TensorProxy) else None
    return [(a, ga), (b, gb)]


@register_vjp(P.pow)
def _pow(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    y = bsym.output
    pairs = []
    if isinstance(a, TensorProxy):
        # torch: exponent * a ** (exponent - 1), with 0 where the exponent is 0.
        if isinstance(b, TensorProxy):
            d = P.where(P.eq(b, 0.0), 0.0, P.mul(b, P.pow(a, P.sub(b, 1.0))))
            pairs.append((a, P.mul(g, d)))
        elif not (isinstance(b, (int, float)) and b == 0):
            pairs.append((a, P.mul(g, P.mul(b, P.pow(a, P.sub(b, 1.0))))))
    if isinstance(b, TensorProxy):
        # torch: a ** b * log(a), with 0 where a == 0 and b >= 0.
        d = P.mul(y, P.log(a))
        d = P.where(P.bitwise_and(P.eq(a, 0.0), P.ge(b, 0.0)), 0.0, d)
        pairs.append((b, P.mul(g, d)))
    return pairs


def _select_between(bsym: BoundSymbol, g: TensorProxy, a_wins: Any) -> GradPairs:
    """maximum/minimum: the gradient goes to the winner, halved between equal operands."""
    a, b = bsym.args
    half = P.mul(g, 0.5)
    tie = P.eq(a, b)
    ga = P.where(tie, half, P.where(a_wins, g, 0.0))
    gb = P.where(tie, half, P.where(a_wins, 0.0, g))
    return [(a, ga if isinstance(a, TensorProxy) else None), (b, gb)]


@register_vjp(P.maximum)
def _maximum(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    return _select_between(bsym, g, P.gt(a, b))


@register_vjp(P.minimum)
def _minimum(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    return _select_between(bsym, g, P.lt(a, b))


@register_vjp(P.atan2)
def _atan2(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    # As eager: 1 / (a^2 + b^2), taken as 0 where that sum is 0 (atan2(0, 0) has gradient 0).
    denom = P.add(_sq(a), _sq(b))
    recip = P.where(P.eq(denom, 0.0), 0.0, P.reciprocal(denom))
    return [(a, P.mul(P.mul(g, b), recip)), (b, P.mul(P.mul(g, P.neg(a)), recip))]


@register_vjp(P.remainder)
def _remainder(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    gb = P.neg(P.mul(g, P.floor(P.div(a, b)))) if isinstance(b, TensorProxy) else None
    return [(a, g), (b, gb)]


@register_vjp(P.fmod)
def _fmod(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    gb = P.neg(P.mul(g, P.trunc(P.div(a, b)))) if isinstance(b, TensorProxy) else None
    return [(a, g), (b, gb)]


@register_vjp(P.copysign)
def _copysign(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, _ = bsym.args
    y = bsym.output
    # d|a|*sign(b)/da is sign(a) * sign(y) = a / y away from 0; torch uses 0 at a == 0.
    safe = P.where(P.eq(y, 0.0), 1.0, y)
    return [(a, P.where(P.eq(a, 0.0), 0.0, P.mul(g, P.div(a, safe))))]


@register_vjp(P.where)
def _where(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    pred, a, b = bsym.args
    return [(a, P.where(pred, g, 0.0)), (b, P.where(pred, 0.0, g))]


@register_vjp(P.convert_element_type)
def _convert_element_type(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a = bsym.args[0]
    if not isinstance(a, TensorProxy) or not a.dtype.is_inexact:
        return []
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


@register_vjp(P.prod)
def _prod(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, dims = bsym.args
    ds = _reduced_dims(a, dims)
    gb = expand_reduced(g, a.shape, ds)
    is_zero = P.eq(a, 0.0)
    # The product of the other elements: y / a where no element is 0; where exactly one is, the
    # product of the nonzero ones at that element and 0 elsewhere; with two or more, 0.
    prod_nonzero = expand_reduced(P.prod(P.where(is_zero, 1.0, a), ds), a.shape, ds)
    zeros = expand_reduced(P.sum(P.convert_element_type(is_zero, a.dtype), ds), a.shape, ds)
    safe_a = P.where(is_zero, 1.0, a)
    others = P.where(
        P.eq(zeros, 0.0),
        P.div(prod_nonzero, safe_a),
        P.where(P.bitwise_and(P.eq(zeros, 1.0), is_zero), prod_nonzero, 0.0),
    )
    return [(a, P.mul(gb, others))]


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


def _var_grad(a: TensorProxy, ds: tuple[int, ...], correction: Any, gv: Any, mean: Any) -> Any:
    if mean is None:
        mean = P.div(P.sum(a, ds), _count(a, ds))
    centered = P.sub(a, expand_reduced(mean, a.shape, ds))
    scale = var_scale(_count(a, ds), correction)
    return P.mul(P.mul(expand_reduced(gv, a.shape, ds), centered), scale)


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
