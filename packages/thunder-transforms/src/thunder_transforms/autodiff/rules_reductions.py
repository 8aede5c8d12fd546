"""VJP rules of composite reductions whose decomposition differentiates to another gradient than
eager's at edge points: ``max``/``min`` (ties, NaNs), norms at zero (``0 * inf``), ``std`` of a
constant input (``sqrt`` at 0), ``var``/``std`` with no degrees of freedom left."""

from __future__ import annotations

import math
from typing import Any

from thunder_ir import BoundSymbol, NumberProxy, TensorProxy, dtypes, prims
from thunder_ir import ops as ltorch
from thunder_ir.ops import nn_base
from thunder_ir.ops._helpers import broadcast, dtype_arg, to_dtype
from thunder_ir.utils import canonicalize_dim, canonicalize_dims, result_type
from thunder_transforms.autodiff.registry import (
    GradPairs,
    bound_arguments,
    expand_reduced,
    is_real_number,
    register_vjp,
    sum_to_shape,
    zeros_like,
)
from thunder_transforms.autodiff.rules_elementwise import times_var_scale
from thunder_transforms.autodiff.rules_low_precision import var_grad_low_precision

__all__: list[str] = []

P = prims


def _reduced(a: TensorProxy, dim: Any) -> tuple[int, ...]:
    """The dims a reduction over ``dim`` removes: all for None or (); none for a 0-d tensor."""
    if a.ndim == 0:
        return ()
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(a.ndim))
    return tuple(canonicalize_dims(a.ndim, dim))


def _expand(t: TensorProxy, shape: Any, ds: tuple[int, ...], keepdim: bool) -> TensorProxy:
    """A reduction's result, ``keepdim`` or not, broadcast back to the input's ``shape``."""
    if keepdim:
        return P.broadcast_in_dim(t, tuple(shape), tuple(range(len(shape))))  # type: ignore[no-any-return]
    return expand_reduced(t, shape, ds)


def _opmath(t: Any, dtype: Any) -> Any:
    return t if t.dtype == dtype else P.convert_element_type(t, dtype)


def _compute_dtype(d: Any) -> Any:
    return dtypes.float32 if d.is_low_precision else d


def _count(shape: Any, ds: tuple[int, ...]) -> Any:
    n: Any = 1
    for d in ds:
        n = n * shape[d]
    return n


# max/min along a dim ----------------------------------------------------------------------------


def _along_dim_or_all(bsym: BoundSymbol) -> bool:
    # max(a), max(a, dim); max(a, other) is maximum (its decomposition).
    # A symbolic dim too: the rule uses it as it is on this call (a constraint).
    dim = bound_arguments(bsym)["dim"]
    return dim is None or (
        is_real_number(dim) and not isinstance(getattr(dim, "value", dim), float)
    )


@register_vjp(ltorch.max, ltorch.min, applies=_along_dim_or_all)
def _max_min(bsym: BoundSymbol, g: Any, *_: Any) -> GradPairs:
    args = bound_arguments(bsym)
    a = args["a"]
    if g is None:
        return []
    if args["dim"] is None:
        return [(a, _evenly_distributed(g, a, bsym.output))]
    if a.ndim == 0:
        return [(a, g)]
    # The whole gradient goes to the element the returned index names, ties or not: eager's
    # scatter into zeros (a scatter_add would turn a -0 gradient into +0).
    d = canonicalize_dim(a.ndim, args["dim"])
    indices = bsym.output[1]
    if not args["keepdim"]:
        g, indices = P.unsqueeze(g, d), P.unsqueeze(indices, d)
    return [(a, ltorch.scatter(zeros_like(a), d, indices, g))]


def _evenly_distributed(g: TensorProxy, a: TensorProxy, value: TensorProxy) -> Any:
    """Eager's evenly_distribute_backward of max()/min(): the gradient split evenly between the
    elements equal to the result, or between the NaN elements where the result is NaN (the
    elements a NaN result comes from), 0 elsewhere."""
    shape, everything = tuple(a.shape), tuple(range(a.ndim))
    v = P.broadcast_in_dim(value, shape, ())
    both_nan = P.bitwise_and(P.isnan(a), P.isnan(v))
    mask = P.bitwise_or(P.eq(a, v), both_nan)
    count = P.sum(P.convert_element_type(mask, dtypes.int64), everything)
    share = P.div(g, P.convert_element_type(count, g.dtype))
    return P.where(mask, P.broadcast_in_dim(share, shape, ()), 0.0)


def _low_precision_nansum(bsym: BoundSymbol) -> bool:
    a = bound_arguments(bsym)["a"]
    return isinstance(a, TensorProxy) and a.dtype.is_low_precision


@register_vjp(ltorch.nansum, applies=_low_precision_nansum)
def _nansum(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Kept whole: torch's float16/bfloat16 kernel sums in another order than the decomposition.
    # Eager: the gradient in the input's dtype, summed back, times self.isnan().logical_not().
    args = bound_arguments(bsym)
    a = args["a"]
    grad = _expand(_opmath(g, a.dtype), a.shape, _reduced(a, args["dim"]), bool(args["keepdim"]))
    return [(a, ltorch.mul(grad, ltorch.logical_not(ltorch.isnan(a))))]


# Norms ------------------------------------------------------------------------------------------


def _norm_grad(x: Any, p: Any, norm: Any, g: Any, ds: tuple[int, ...]) -> Any:
    """Eager's norm backward: ``norm`` and ``g`` broadcast to ``x``'s shape. Where the norm is 0
    the gradient is 0 (the subgradient), not the ``0 * inf`` of the decomposition. A symbolic
    ``p`` is decided on as it is on this call (the formula's form depends on it); the exponents
    stay symbolic."""
    if p == 1:
        return P.mul(P.sign(x), g)
    if p == 2:
        return P.mul(g, P.where(P.eq(norm, 0.0), 0.0, P.div(x, norm)))
    if p == math.inf or p == -math.inf:
        ax = P.abs(x)
        mask = P.convert_element_type(P.bitwise_or(P.eq(ax, norm), P.isnan(ax)), x.dtype)
        count = expand_reduced(P.sum(mask, ds), x.shape, ds)
        return P.mul(P.sign(x), P.mul(P.div(g, count), mask))
    if p < 1:
        scaled = P.mul(P.sign(x), P.where(P.eq(x, 0.0), 0.0, P.pow(P.abs(x), p - 1.0)))
        return P.mul(P.mul(scaled, g), P.pow(norm, 1.0 - p))
    if p < 2:
        scaled = P.mul(P.sign(x), P.pow(P.abs(x), p - 1.0))
    else:
        scaled = P.mul(x, P.pow(P.abs(x), p - 2.0))
    scale = P.where(P.eq(norm, 0.0), 0.0, P.div(g, P.pow(norm, p - 1.0)))
    return P.mul(scaled, scale)


def _real_nonzero_ord(bsym: BoundSymbol, x: str, ord: str) -> bool:
    # bool(): a symbolic ord answers a truth value outside any trace (a constraint)
    return _real_ord(bsym, x, ord) and bool(bound_arguments(bsym)[ord])


def _real_ord(bsym: BoundSymbol, x: str, ord: str) -> bool:
    # Complex inputs keep the decomposition.
    args = bound_arguments(bsym)
    t = args[x]
    dtype = dtype_arg(args.get("dtype")) or getattr(t, "dtype", None)
    p = args[ord]
    return (
        isinstance(t, TensorProxy)
        and not t.dtype.is_complex
        and dtype is not None
        and not dtype.is_complex
        and is_real_number(p)
    )


def _vector_norm_applies(bsym: BoundSymbol) -> bool:
    # ord=0 of a complex input too: its decomposition counts through a comparison, which would
    # leave the result without the requires_grad eager gives it.
    # ``not ord`` rather than ``ord == 0``: a symbolic ord answers a truth value outside any
    # trace (a comparison would record a prim), the decision checked by the prologue
    return _real_ord(bsym, "x", "ord") or not bound_arguments(bsym)["ord"]


@register_vjp(ltorch.vector_norm, applies=_vector_norm_applies)
def _vector_norm(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    args = bound_arguments(bsym)
    if args["ord"] == 0:
        return []  # a count: eager's output requires grad, with an undefined gradient
    x, keepdim = args["x"], args["keepdim"]
    out_dtype = dtype_arg(args["dtype"]) or x.dtype
    # float16/bfloat16 result of the input's dtype: eager's norm_backward runs op by op in it
    compute = x.dtype if out_dtype == x.dtype else _compute_dtype(out_dtype)
    ds = _reduced(x, args["dim"])
    xc = _opmath(x, compute)
    norm = _expand(_opmath(bsym.output, compute), x.shape, ds, keepdim)
    gx = _expand(_opmath(g, compute), x.shape, ds, keepdim)
    return [(x, _norm_grad(xc, _as_float(args["ord"]), norm, gx, ds))]


def _as_float(p: Any) -> Any:
    """A concrete number as a float; a symbolic one kept symbolic."""
    return p if isinstance(p, NumberProxy) else float(p)


def _normalize_applies(bsym: BoundSymbol) -> bool:
    return _real_nonzero_ord(bsym, "a", "p") and bound_arguments(bsym)["out"] is None


@register_vjp(ltorch.normalize, applies=_normalize_applies)
def _normalize(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's graph of a / norm.clamp_min(eps), op by op in a's dtype (float16/bfloat16 round
    # after each, as eager's): div's gradients (-g * ((a / denom) / denom) summed over the dim
    # for the denominator), clamp_min's mask, then norm_backward from the norm op's own value.
    args = bound_arguments(bsym)
    a, p, eps = args["a"], _as_float(args["p"]), args["eps"]
    ds = (canonicalize_dim(a.ndim, args["dim"]),) if a.ndim else ()
    y = _opmath(bsym.output, a.dtype)
    norm = ltorch.vector_norm(a, p, ds, keepdim=True)
    denom = P.where(P.lt(norm, eps), eps, norm)
    direct = ltorch.div(g, denom)
    g_denom = ltorch.sum(ltorch.mul(ltorch.neg(g), ltorch.div(y, denom)), ds, keepdim=True)
    g_norm = P.where(P.ge(norm, eps), g_denom, 0.0)
    through_norm = _norm_grad(
        a, p, _expand(norm, a.shape, ds, True), _expand(g_norm, a.shape, ds, True), ds
    )
    return [(a, ltorch.add(direct, through_norm))]


@register_vjp(ltorch.cosine_similarity)
def _cosine_similarity(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # sum(a / max(|a|, eps) * b / max(|b|, eps)): eager clamps the norms outside autograd, so the
    # gradient reaches the norms unclamped. Written as eager's autograd runs it, op by op in the
    # inputs' dtypes (derivatives.yaml's mul, div and norm formulas): the same rounding in
    # float16 and bfloat16, and the same sign of a zero gradient.
    args = bound_arguments(bsym)
    x1, x2, eps = args["x1"], args["x2"], args["eps"]
    common = result_type(x1, x2)
    # float inputs keep their dtypes (as eager's, and the op's)
    a, b = broadcast(*(x if x.dtype.is_float else to_dtype(x, common) for x in (x1, x2)))
    d = canonicalize_dim(a.ndim, args["dim"])
    ge = to_dtype(g, common)
    if a.ndim:  # a 0-d input's norm and sum keep its shape
        ge = ltorch.expand(ltorch.unsqueeze(ge, d), tuple(a.shape))

    def parts(x: TensorProxy) -> tuple[Any, Any, Any]:
        norm = ltorch.vector_norm(x, 2, (d,), True)
        clamped = ltorch.clamp(norm, eps)
        return norm, clamped, ltorch.div(x, clamped)

    def grad(x: TensorProxy, norm: Any, clamped: Any, other_hat: Any) -> Any:
        # mul: grad * other, which autograd hands on in the quotient's dtype
        g_hat = to_dtype(ltorch.mul(ge, other_hat), x.dtype)
        direct = ltorch.div(g_hat, clamped)  # div: grad / other
        # div: -grad * ((self / other) / other), summed to the norm's shape
        over = ltorch.div(ltorch.div(x, clamped), clamped)
        g_norm = ltorch.sum(ltorch.mul(ltorch.neg(g_hat), over), (d,), True)
        # norm backward (p=2): grad * (self / norm), 0 where the norm is 0
        unit = ltorch.masked_fill(ltorch.div(x, norm), ltorch.eq(norm, 0), 0)
        return ltorch.add(direct, ltorch.mul(g_norm, unit))

    na, ca, ah = parts(a)
    nb, cb, bh = parts(b)
    return [
        (x1, to_dtype(sum_to_shape(grad(a, na, ca, bh), x1.shape), x1.dtype)),
        (x2, to_dtype(sum_to_shape(grad(b, nb, cb, ah), x2.shape), x2.dtype)),
    ]


def _pairwise_applies(bsym: BoundSymbol) -> bool:
    args = bound_arguments(bsym)
    return all(
        isinstance(x, TensorProxy) and not x.dtype.is_complex for x in (args["x1"], args["x2"])
    ) and is_real_number(args["p"])


@register_vjp(ltorch.pairwise_distance, applies=_pairwise_applies)
def _pairwise_distance(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's norm_backward of x1 - x2 + eps over the last dim, op by op in the difference's
    # dtype as eager's (float16/bfloat16 too); p=0 is a count, with no gradient.
    args = bound_arguments(bsym)
    if not args["p"]:
        return []
    x1, x2, keepdim = args["x1"], args["x2"], args["keepdim"]
    diff = nn_base.add(nn_base.sub(x1, x2), args["eps"])
    ds = (diff.ndim - 1,) if diff.ndim else ()
    compute = diff.dtype
    norm = _expand(_opmath(bsym.output, compute), diff.shape, ds, keepdim)
    gd = _norm_grad(
        diff,
        _as_float(args["p"]),
        norm,
        _expand(_opmath(g, compute), diff.shape, ds, keepdim),
        ds,
    )
    return [(x1, sum_to_shape(gd, x1.shape)), (x2, sum_to_shape(P.neg(gd), x2.shape))]


# Standard deviation -------------------------------------------------------------------------------


def _std_args(bsym: BoundSymbol) -> tuple[TensorProxy, tuple[int, ...], Any, bool, bool]:
    """(input, reduced dims, correction, keepdim, whether no dim was given), by torch's
    overloads (``std(a, unbiased)``)."""
    args = bound_arguments(bsym)
    a, dim, unbiased, correction = args["a"], args["dim"], args["unbiased"], args["correction"]
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    if correction is None:
        correction = 0 if unbiased is False else 1
    return a, _reduced(a, dim), correction, bool(args["keepdim"]), dim is None


def _real_input(bsym: BoundSymbol) -> bool:
    a = bound_arguments(bsym)["a"]
    return isinstance(a, TensorProxy) and not a.dtype.is_complex


def _var_backward(
    gv: Any, ac: Any, ds: tuple[int, ...], correction: Any, whole: bool, dtype: Any
) -> Any:
    """Eager's var_backward: ``gv`` (broadcast to the input's shape) times 2 / (n - correction)
    times the centered input. Over the whole tensor (no dim given, or a 0-d input) with no
    degrees of freedom left, eager gives ``gv * inf`` instead (NaN where an element equals the
    mean), not the sign-flipped finite value of a negative ``n - correction``."""
    n = _count(ac.shape, ds)
    mean = expand_reduced(P.div(P.sum(ac, ds), n), ac.shape, ds)
    dof = n - correction
    if whole and isinstance(dof, (int, float)) and dof <= 0:
        return P.mul(gv, _nan_or_inf(ac, mean, dtype))
    scaled = times_var_scale(P.mul(gv, P.sub(ac, mean)), n, correction)
    if whole and isinstance(dof, NumberProxy):  # a count read from data: chosen per call
        no_dof = P.mul(gv, _nan_or_inf(ac, mean, dtype))
        left = P.full(tuple(ac.shape), dof, device=ac.device, dtype=dtypes.float64)
        return P.where(P.le(left, 0.0), no_dof, scaled)
    return scaled


def _nan_or_inf(ac: Any, mean: Any, dtype: Any) -> Any:
    """NaN where an element equals the mean as eager rounds it (to the input's ``dtype``), inf
    elsewhere, in ``ac``'s dtype (a where of two numbers alone would be float32)."""
    if dtype != ac.dtype:
        mean = P.convert_element_type(P.convert_element_type(mean, dtype), ac.dtype)
    return P.convert_element_type(P.where(P.eq(ac, mean), math.nan, math.inf), ac.dtype)


def _std_grad(bsym: BoundSymbol, std: TensorProxy, g: TensorProxy) -> Any:
    # Eager: the variance's gradient g / (2 std), 0 where std is 0 (a constant input).
    a, ds, correction, keepdim, whole = _std_args(bsym)
    compute = _compute_dtype(a.dtype)
    s = _expand(_opmath(std, compute), a.shape, ds, keepdim)
    gs = _expand(_opmath(g, compute), a.shape, ds, keepdim)
    gv = P.where(P.eq(s, 0.0), 0.0, P.div(gs, P.mul(s, 2.0)))
    if not _low_precision_dof(a, ds, correction):
        return _var_backward(gv, _opmath(a, compute), ds, correction, whole or a.ndim == 0, a.dtype)
    std, g = _expand(std, a.shape, ds, keepdim), _expand(g, a.shape, ds, keepdim)
    low = var_grad_low_precision(g, a, ds, _count(a.shape, ds) - correction, std)
    return _unless_no_dof(low, gv, a, ds, correction, whole)


def _low_precision_dof(a: TensorProxy, ds: tuple[int, ...], correction: Any) -> bool:
    """A float16/bfloat16 input with degrees of freedom left (eager's formula op by op), or with a
    symbolic count (``_unless_no_dof`` takes the case of none left)."""
    dof = _count(a.shape, ds) - correction
    if isinstance(dof, NumberProxy):
        return a.dtype.is_low_precision and a.ndim > 0
    return a.dtype.is_low_precision and a.ndim > 0 and isinstance(dof, (int, float)) and dof > 0


def _unless_no_dof(
    low: Any, gv: Any, a: TensorProxy, ds: tuple[int, ...], correction: Any, whole: bool
) -> Any:
    """The low-precision gradient ``low``, or, over the whole tensor where a symbolic count leaves
    no degrees of freedom on a call, eager's ``gv * inf`` of ``_var_backward``."""
    dof = _count(a.shape, ds) - correction
    if not whole or not isinstance(dof, NumberProxy):
        return low
    compute = _compute_dtype(a.dtype)
    generic = _var_backward(gv, _opmath(a, compute), ds, correction, True, a.dtype)
    left = P.full(tuple(a.shape), dof, device=a.device, dtype=dtypes.float64)
    return P.where(P.le(left, 0.0), _opmath(generic, low.dtype), low)


def _var_grad(bsym: BoundSymbol, g: TensorProxy) -> Any:
    a, ds, correction, keepdim, whole = _std_args(bsym)
    compute = _compute_dtype(a.dtype)
    gv = _expand(_opmath(g, compute), a.shape, ds, keepdim)
    if not _low_precision_dof(a, ds, correction):
        return _var_backward(gv, _opmath(a, compute), ds, correction, whole or a.ndim == 0, a.dtype)
    g = _expand(g, a.shape, ds, keepdim)
    low = var_grad_low_precision(g, a, ds, _count(a.shape, ds) - correction, None)
    return _unless_no_dof(low, gv, a, ds, correction, whole)


def _mean_grad(bsym: BoundSymbol, gm: TensorProxy, dtype: Any = None) -> Any:
    # Summed in the computation dtype (or ``dtype``), not rounded twice to a low-precision input's.
    a, ds, _, keepdim, _ = _std_args(bsym)
    compute = _compute_dtype(a.dtype) if dtype is None else dtype
    gm = _expand(_opmath(gm, compute), a.shape, ds, keepdim)
    return P.div(gm, _count(a.shape, ds))


def _with_mean_grad(bsym: BoundSymbol, grad: Any, gm: Any) -> GradPairs:
    if gm is not None:
        # Eager adds the mean's gradient to the std/var one in that one's dtype (a low-precision
        # input's, where ``var_grad_low_precision`` computes it as eager does).
        mean_grad = _mean_grad(bsym, gm, None if grad is None else grad.dtype)
        grad = mean_grad if grad is None else P.add(grad, mean_grad)
    return [(bound_arguments(bsym)["a"], grad)]


@register_vjp(ltorch.var, applies=_real_input)
def _var(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    return [(bound_arguments(bsym)["a"], _var_grad(bsym, g))]


@register_vjp(ltorch.var_mean, applies=_real_input)
def _var_mean(bsym: BoundSymbol, gv: Any, gm: Any) -> GradPairs:
    return _with_mean_grad(bsym, None if gv is None else _var_grad(bsym, gv), gm)


@register_vjp(ltorch.std, applies=_real_input)
def _std(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    return [(bound_arguments(bsym)["a"], _std_grad(bsym, bsym.output, g))]


@register_vjp(ltorch.std_mean, applies=_real_input)
def _std_mean(bsym: BoundSymbol, gs: Any, gm: Any) -> GradPairs:
    grad = None if gs is None else _std_grad(bsym, bsym.output[0], gs)
    return _with_mean_grad(bsym, grad, gm)
