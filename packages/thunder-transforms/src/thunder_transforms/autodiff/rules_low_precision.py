"""VJP rules of float16/bfloat16 calls whose eager derivative reads the op's result: eager reads
the result as returned (rounded to the tensor's dtype), not the float32 value inside the
decomposition, and saves that low-precision tensor. Kernel formulas (``tanh_backward``,
``sigmoid_backward``, group norm's backward) upcast what they read to float32 and round once;
formulas eager writes with tensor ops (derivatives.yaml: ``grad * result``) are written here
with the torch-language ops, which round after each op as eager's do. float32 and float64 calls
keep the prims' rules."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

from thunder_ir import BoundSymbol, NumberProxy, TensorProxy, dtypes, prims
from thunder_ir import ops as ltorch
from thunder_ir.ops._helpers import to_dtype
from thunder_ir.ops.nn_conv import pool_params
from thunder_ir.utils import canonicalize_dims
from thunder_transforms.autodiff.registry import (
    GradPairs,
    bound_arguments,
    expand_reduced,
    register_vjp,
    static_eq,
    sum_to_shape,
)

__all__: list[str] = []

P = prims
_F32 = dtypes.float32


def _low_precision_input(bsym: BoundSymbol) -> bool:
    a = bsym.args[0] if bsym.args else None
    return isinstance(a, TensorProxy) and a.dtype.is_low_precision


def _kernel(fn: Callable[[Any, Any], Any]) -> Callable[[BoundSymbol, TensorProxy], GradPairs]:
    """A rule computing ``fn(g, y)`` in float32 from the rounded result, rounded once (eager's
    backward kernel in opmath)."""

    def rule(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
        a, y = bsym.args[0], bsym.output
        return [(a, to_dtype(fn(to_dtype(g, _F32), to_dtype(y, _F32)), a.dtype))]

    return rule


def _formula(fn: Callable[[Any, Any], Any]) -> Callable[[BoundSymbol, TensorProxy], GradPairs]:
    """A rule computing ``fn(g, y)`` with the torch-language ops on the low-precision values."""

    def rule(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
        return [(bsym.args[0], fn(g, bsym.output))]

    return rule


_UNARY: dict[Any, Callable[[BoundSymbol, TensorProxy], GradPairs]] = {
    # tanh_backward(grad, result), sigmoid_backward(grad, result)
    ltorch.tanh: _kernel(lambda g, y: P.mul(g, P.sub(1.0, P.mul(y, y)))),
    # grad * result
    ltorch.exp: _formula(lambda g, y: ltorch.mul(g, y)),
    # grad * result * M_LN2
    ltorch.exp2: _formula(lambda g, y: ltorch.mul(ltorch.mul(g, y), math.log(2.0))),
    # grad * (result + 1)
    ltorch.expm1: _formula(lambda g, y: ltorch.mul(g, ltorch.add(y, 1))),
    # grad / (2 * result)
    ltorch.sqrt: _formula(lambda g, y: ltorch.div(g, ltorch.mul(y, 2))),
    # -0.5 * grad * result.pow(3)
    ltorch.rsqrt: _formula(lambda g, y: ltorch.mul(ltorch.mul(g, -0.5), ltorch.pow(y, 3))),
    # -grad * (result * result)
    ltorch.reciprocal: _formula(lambda g, y: ltorch.mul(ltorch.neg(g), ltorch.mul(y, y))),
    # grad * (1 + result.pow(2))
    ltorch.tan: _formula(lambda g, y: ltorch.mul(g, ltorch.add(ltorch.pow(y, 2), 1))),
}
_sigmoid_kernel = _kernel(lambda g, y: P.mul(P.mul(g, P.sub(1.0, y)), y))
_sigmoid_half_ops = _formula(lambda g, y: ltorch.mul(ltorch.mul(g, ltorch.sub(1, y)), y))


def _sigmoid(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # torch's CPU sigmoid_backward computes float16 in float16 (each op rounded), bfloat16 and
    # other devices in float32
    a = bsym.args[0]
    if a.dtype == dtypes.float16 and a.device.type == "cpu":
        return _sigmoid_half_ops(bsym, g)
    return _sigmoid_kernel(bsym, g)


_UNARY[ltorch.sigmoid] = _sigmoid


def _input_formula(
    fn: Callable[[Any, Any], Any],
) -> Callable[[BoundSymbol, TensorProxy], GradPairs]:
    """A rule computing ``fn(g, x)`` from the input with the torch-language ops."""

    def rule(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
        return [(bsym.args[0], fn(g, bsym.args[0]))]

    return rule


def _rsqrt_one_minus_square(x: Any) -> Any:
    return ltorch.rsqrt(ltorch.add(ltorch.mul(ltorch.neg(x), x), 1))


def _scaled_gaussian(x: Any, sign: float) -> Any:
    return ltorch.mul(ltorch.exp(ltorch.neg(ltorch.pow(x, 2))), sign * 2.0 / math.sqrt(math.pi))


_UNARY.update(
    {
        # grad * self.cos(), grad * -self.sin(): the cos/sin rounded before the product
        ltorch.sin: _input_formula(lambda g, x: ltorch.mul(g, ltorch.cos(x))),
        ltorch.cos: _input_formula(lambda g, x: ltorch.mul(g, ltorch.neg(ltorch.sin(x)))),
        # grad / (self * self + 1)
        ltorch.atan: _input_formula(lambda g, x: ltorch.div(g, ltorch.add(ltorch.mul(x, x), 1))),
        # grad * self.cosh(), grad * self.sinh()
        ltorch.sinh: _input_formula(lambda g, x: ltorch.mul(g, ltorch.cosh(x))),
        ltorch.cosh: _input_formula(lambda g, x: ltorch.mul(g, ltorch.sinh(x))),
        # grad * (-self * self + 1).rsqrt(), grad * -((-self * self + 1).rsqrt())
        ltorch.asin: _input_formula(lambda g, x: ltorch.mul(g, _rsqrt_one_minus_square(x))),
        ltorch.acos: _input_formula(
            lambda g, x: ltorch.mul(g, ltorch.neg(_rsqrt_one_minus_square(x)))
        ),
        # grad * 1 / (1 - self.pow(2))
        ltorch.atanh: _input_formula(
            lambda g, x: ltorch.div(ltorch.mul(g, 1), ltorch.sub(1, ltorch.pow(x, 2)))
        ),
        # grad * (self.pow(2) + 1).rsqrt(), grad * (self.pow(2) - 1).rsqrt()
        ltorch.asinh: _input_formula(
            lambda g, x: ltorch.mul(g, ltorch.rsqrt(ltorch.add(ltorch.pow(x, 2), 1)))
        ),
        ltorch.acosh: _input_formula(
            lambda g, x: ltorch.mul(g, ltorch.rsqrt(ltorch.sub(ltorch.pow(x, 2), 1)))
        ),
        # grad / self, grad / (self * ln 2), grad / (self * ln 10), grad / (self + 1)
        ltorch.log: _input_formula(lambda g, x: ltorch.div(g, x)),
        ltorch.log2: _input_formula(lambda g, x: ltorch.div(g, ltorch.mul(x, 0.6931471805599453))),
        ltorch.log10: _input_formula(lambda g, x: ltorch.div(g, ltorch.mul(x, 2.3025850929940456))),
        ltorch.log1p: _input_formula(lambda g, x: ltorch.div(g, ltorch.add(x, 1))),
        # (+-2 / sqrt(pi)) * exp(-(self.pow(2))) * grad
        ltorch.erf: _input_formula(lambda g, x: ltorch.mul(_scaled_gaussian(x, 1.0), g)),
        ltorch.erfc: _input_formula(lambda g, x: ltorch.mul(_scaled_gaussian(x, -1.0), g)),
        # grad * digamma(self)
        ltorch.lgamma: _input_formula(lambda g, x: ltorch.mul(g, ltorch.digamma(x))),
        # 0.5 * sqrt(pi) * exp(self.erfinv().pow(2)) * grad
        ltorch.erfinv: _formula(
            lambda g, y: ltorch.mul(
                ltorch.mul(ltorch.exp(ltorch.pow(y, 2)), 0.5 * math.sqrt(math.pi)), g
            )
        ),
    }
)
for _op, _rule in _UNARY.items():
    register_vjp(_op, applies=_low_precision_input)(_rule)


def _logsumexp_applies(bsym: BoundSymbol) -> bool:
    a = bsym.args[0] if bsym.args else None
    # every float dtype: the decomposition's max-shifted gradient adds terms, turning eager's
    # -0 (a -0 incoming gradient) into +0
    return isinstance(a, TensorProxy) and a.dtype.is_float and a.ndim > 0


@register_vjp(ltorch.logsumexp, applies=_logsumexp_applies)
def _logsumexp(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # logsumexp_backward: grad * (self - result).exp(), grad and result unsqueezed back
    args = bound_arguments(bsym)
    a, dim, keepdim = args["a"], args["dim"], args["keepdim"]
    y = bsym.output
    if not keepdim:
        if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
            dims: tuple[int, ...] = tuple(range(a.ndim))
        else:
            dims = tuple(canonicalize_dims(a.ndim, dim))
        g, y = expand_reduced(g, a.shape, dims), expand_reduced(y, a.shape, dims)
    return [(a, ltorch.mul(g, ltorch.exp(ltorch.sub(a, y))))]


def _group_norm_applies(bsym: BoundSymbol) -> bool:
    # (on the CPU, group_norm is native_group_norm, whose rule emits eager's backward kernel)
    args = bound_arguments(bsym)
    a = args["a"]
    return (
        isinstance(a, TensorProxy)
        and a.device.type != "cpu"
        and a.dtype in (dtypes.float16, dtypes.bfloat16)
        and all(p is None or p.dtype == a.dtype for p in (args["weight"], args["bias"]))
    )


@register_vjp(ltorch.group_norm, applies=_group_norm_applies)
def _group_norm(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # native_group_norm_backward: in float32, from the statistics the forward returns (rounded
    # to the input's dtype by torch's CPU kernel), recomputed here from the saved input.
    args = bound_arguments(bsym)
    a, groups, weight, bias = args["a"], args["num_groups"], args["weight"], args["bias"]
    n, c = a.shape[0], a.shape[1]
    per_group = c // groups
    hw = a.numel() // (n * c) if n * c else 0
    x = ltorch.reshape(to_dtype(a, _F32), (n, c, hw))
    dy = ltorch.reshape(to_dtype(g, _F32), (n, c, hw))
    var, mean = P.var_mean(ltorch.reshape(x, (n, groups, per_group * hw)), (2,), correction=0)
    rstd = ltorch.rsqrt(ltorch.add(var, args["eps"]))
    stats = a.dtype if a.device.type == "cpu" else _F32
    mean, rstd = (to_dtype(to_dtype(t, stats), _F32) for t in (mean, rstd))

    def per_channel(t: Any) -> Any:  # (n, groups) -> (n, c)
        spread = ltorch.expand(ltorch.unsqueeze(t, 2), (n, groups, per_group))
        return ltorch.reshape(spread, (n, c))

    def per_group_sum(t: Any) -> Any:  # (n, c) -> (n, groups)
        return ltorch.sum(ltorch.reshape(t, (n, groups, per_group)), 2)

    ds = ltorch.sum(ltorch.mul(dy, x), 2)
    db = ltorch.sum(dy, 2)
    gamma = None if weight is None else to_dtype(weight, _F32)
    ds_g = per_group_sum(ds if gamma is None else ltorch.mul(ds, gamma))
    db_g = per_group_sum(db if gamma is None else ltorch.mul(db, gamma))
    s = 1.0 / (per_group * hw) if isinstance(per_group * hw, int) and per_group * hw else None
    scale = s if s is not None else ltorch.reciprocal(to_dtype(per_group * hw, _F32))
    cube = ltorch.mul(ltorch.mul(rstd, rstd), rstd)
    c2 = ltorch.mul(ltorch.mul(ltorch.sub(ltorch.mul(db_g, mean), ds_g), cube), scale)
    c3 = ltorch.sub(ltorch.neg(ltorch.mul(c2, mean)), ltorch.mul(ltorch.mul(db_g, rstd), scale))
    c1 = per_channel(rstd) if gamma is None else ltorch.mul(per_channel(rstd), gamma)
    dx = ltorch.add(
        ltorch.add(
            ltorch.mul(ltorch.unsqueeze(c1, 2), dy),
            ltorch.mul(ltorch.unsqueeze(per_channel(c2), 2), x),
        ),
        ltorch.unsqueeze(per_channel(c3), 2),
    )
    pairs: list[tuple[Any, Any]] = [(a, to_dtype(ltorch.reshape(dx, tuple(a.shape)), a.dtype))]
    if weight is not None:
        centered = ltorch.sub(ds, ltorch.mul(db, per_channel(mean)))
        gw = ltorch.sum(ltorch.mul(centered, per_channel(rstd)), 0)
        pairs.append((weight, to_dtype(gw, weight.dtype)))
    if bias is not None:
        pairs.append((bias, to_dtype(ltorch.sum(db, 0), bias.dtype)))
    return pairs


def var_grad_low_precision(
    gv: TensorProxy, a: TensorProxy, ds: tuple[int, ...], dof: Any, std: TensorProxy | None
) -> Any:
    """The float16/bfloat16 gradient of ``var`` (or of ``std``, given its result), eager's
    formulas op by op: ``(2 / dof) * grad * (a - a.mean(dims, keepdim=True))``, the mean rounded
    to ``a``'s dtype, and for std first ``(grad / (std * 2)).masked_fill(std == 0, 0)``. ``gv``
    and ``std`` come broadcast to ``a``'s shape."""
    if std is not None:
        gv = ltorch.where(ltorch.eq(std, 0), 0.0, ltorch.div(gv, ltorch.mul(std, 2)))
    centered = ltorch.sub(a, ltorch.mean(a, ds, keepdim=True))
    return ltorch.mul(_times_two_over(gv, dof), centered)


def _times_two_over(gv: Any, dof: Any) -> Any:
    """``gv * (2 / dof)``. A symbolic count (sizes, a correction, or read from data) may be 0 on
    some call, where a number's division raises: 2 / dof is taken by the program in float64 (inf
    at 0, as eager's double), the product in float32 as eager's multiply by a scalar."""
    if not isinstance(dof, NumberProxy):
        return ltorch.mul(gv, 2.0 / dof)
    scale = prims.div(2.0, prims.full((), dof, device=gv.device, dtype=dtypes.float64))
    scale = prims.broadcast_in_dim(to_dtype(scale, dtypes.float32), tuple(gv.shape), ())
    return to_dtype(prims.mul(to_dtype(gv, dtypes.float32), scale), gv.dtype)


def scalar_in(value: float, dtype: dtypes.DType) -> float:
    """``value`` rounded to ``dtype``, as a kernel's ``Scalar.to<scalar_t>()`` rounds it."""
    import torch

    return float(torch.tensor(value, dtype=dtypes.to_torch_dtype(dtype)).item())


_AVG_POOLS = {ltorch.avg_pool1d: 1, ltorch.avg_pool2d: 2, ltorch.avg_pool3d: 3}


def _avg_pool_applies(bsym: BoundSymbol) -> bool:
    a = bound_arguments(bsym)["a"]
    return isinstance(a, TensorProxy) and a.dtype.is_low_precision


def _window_divisors(
    a: TensorProxy,
    out: Sequence[Any],
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    count_include_pad: bool,
) -> Any:
    """Each output's divisor as torch's kernel counts it (int64, the output's spatial shape): the
    window's elements inside the padded input, or inside the input only."""
    nd = len(kernel)
    total: Any = None
    for i in range(nd):
        size, n = a.shape[a.ndim - nd + i], out[i]
        begin = P.sub(
            P.mul(P.iota(n, start=0, step=1, device=a.device, dtype=dtypes.int64), stride[i]),
            padding[i],
        )
        stop = P.minimum(
            P.add(begin, kernel[i]),
            P.add(P.full((n,), 0, device=a.device, dtype=dtypes.int64), size + padding[i]),
        )
        if not count_include_pad:
            zeros = P.full((n,), 0, device=a.device, dtype=dtypes.int64)
            stop = P.minimum(stop, P.add(zeros, size))
            begin = P.maximum(begin, zeros)
        count = P.sub(stop, begin)
        shape = tuple(out)
        count = P.broadcast_in_dim(count, shape, (i,))
        total = count if total is None else P.mul(total, count)
    return total


@register_vjp(*_AVG_POOLS, applies=_avg_pool_applies)
def _avg_pool(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    """Eager's CPU avg_pool backward kernel in the dtype: each output's ``grad / divisor``
    (rounded) added into zeros at its window's elements, output after output, each add rounded:
    an element's additions come from the windows over it in output order (kernel offsets in
    reverse order), then the padding is cut off."""
    args = bound_arguments(bsym)
    a, nd = args["a"], _AVG_POOLS[bsym.sym]
    kernel, stride, padding, _ = pool_params(
        nd, args["kernel_size"], args["stride"], args["padding"], 1
    )
    lead = a.ndim - nd
    out = tuple(g.shape[lead:])
    override = args.get("divisor_override")
    if override is not None:
        delta = P.div(g, scalar_in(float(override), a.dtype))  # BFloat16 / int64: the int rounded
    else:
        counts = _window_divisors(a, out, kernel, stride, padding, bool(args["count_include_pad"]))
        counts = P.broadcast_in_dim(
            P.convert_element_type(counts, a.dtype), tuple(g.shape), tuple(range(lead, g.ndim))
        )
        delta = P.div(g, counts)
    # windows (ceil_mode) may run past the padded input: room for them, cut off with the padding
    padded = [*a.shape[:lead]]
    for i in range(nd):
        reach = (out[i] - 1) * stride[i] + kernel[i]
        size = a.shape[lead + i] + 2 * padding[i]
        padded.append(
            reach if isinstance(reach, int) and isinstance(size, int) and reach > size else size
        )
    acc = P.full(tuple(padded), 0.0, device=a.device, dtype=a.dtype)
    for offsets in reversed(list(itertools.product(*(range(k) for k in kernel)))):
        config = [(0, 0, 0)] * lead
        for i, k in enumerate(offsets):
            end = k + (out[i] - 1) * stride[i] + 1
            config.append((k, padded[lead + i] - end, stride[i] - 1))
        acc = P.add(acc, P.pad(delta, 0.0, config))
    start = [0] * lead + list(padding)
    stop = [*a.shape[:lead], *(padding[i] + a.shape[lead + i] for i in range(nd))]
    if all(static_eq(x, y) for x, y in zip(stop, padded)) and not any(padding):
        return [(a, acc)]
    return [(a, P.slice_prim(acc, tuple(start), tuple(stop)))]


def _cumsum_applies(bsym: BoundSymbol) -> bool:
    a = bound_arguments(bsym)["a"]
    return (
        isinstance(a, TensorProxy)
        and a.dtype.is_float
        and a.ndim > 0
        and bsym.output.dtype != a.dtype
    )


@register_vjp(ltorch.cumsum, applies=_cumsum_applies)
def _cumsum(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # A result of another dtype= (bfloat16 summed in float32): eager's cumsum_backward(grad.to(
    # self.scalar_type()), dim) rounds the gradient to the input's dtype before the reversed sum.
    a = bound_arguments(bsym)["a"]
    d = canonicalize_dims(a.ndim, bound_arguments(bsym)["dim"])[0]
    g = to_dtype(g, a.dtype)
    return [(a, ltorch.flip(ltorch.cumsum(ltorch.flip(g, (d,)), d), (d,)))]


def _cumprod_applies(bsym: BoundSymbol) -> bool:
    args = bound_arguments(bsym)
    a = args["a"]
    return (
        isinstance(a, TensorProxy)
        and a.dtype.is_low_precision
        and a.ndim > 0
        and bsym.output.dtype.is_float
    )


@register_vjp(ltorch.cumprod, applies=_cumprod_applies)
def _cumprod(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # cumprod_backward on the rounded result, each op rounded: reversed_cumsum(result * grad)
    # .div(self) before a row's first zero; at it, the sum of grad times the products after it
    # (up to the second zero), times the product before it; 0 after.
    a, y = bsym.args[0], bsym.output
    d = canonicalize_dims(a.ndim, bound_arguments(bsym)["dim"])[0]
    g = to_dtype(g, a.dtype)  # grad.to(self.scalar_type()): a result of another dtype=
    if isinstance(a.shape[d], int) and a.shape[d] == 1:
        return [(a, g)]
    is_zero = ltorch.eq(a, 0)
    zeros_seen = ltorch.cumsum(is_zero, d)
    before, first_run = ltorch.eq(zeros_seen, 0), ltorch.eq(zeros_seen, 1)
    masked = ltorch.where(before, ltorch.mul(y, g), 0)
    reversed_sum = ltorch.flip(ltorch.cumsum(ltorch.flip(masked, (d,)), d), (d,))
    before_grad = ltorch.div(reversed_sum, a)
    after_zero = ltorch.logical_and(first_run, ltorch.logical_not(is_zero))
    products = ltorch.cumprod(ltorch.where(after_zero, a, 1), d)
    summed = ltorch.sum(ltorch.mul(products, ltorch.where(first_run, g, 0)), (d,), True)
    # the product of the elements before the first zero (eager reads it from the result)
    prefix = ltorch.cumprod(ltorch.where(before, a, 1), d, dtype=y.dtype)
    at_zero = to_dtype(ltorch.mul(summed, prefix), a.dtype)
    first_zero = ltorch.logical_and(first_run, is_zero)
    rest = ltorch.where(first_zero, at_zero, 0)
    return [(a, to_dtype(ltorch.where(before, before_grad, rest), a.dtype))]


def _low_precision_operand(operands: Sequence[Any]) -> bool:
    return any(isinstance(x, TensorProxy) and x.dtype.is_low_precision for x in operands)


def _pow_applies(bsym: BoundSymbol) -> bool:
    # also a float32 result of a float16/bfloat16 operand: eager's formulas read the operands
    # as given (``exponent - 1`` rounded in the exponent's dtype)
    y = bsym.output
    operands = bsym.args[:2]
    return (
        isinstance(y, TensorProxy)
        and y.dtype.is_float
        and (y.dtype.is_low_precision or _low_precision_operand(operands))
        and all(
            x.dtype.is_float if isinstance(x, TensorProxy) else type(x) in (int, float)
            for x in operands
        )
    )


@register_vjp(ltorch.pow, applies=_pow_applies)
def _pow(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # pow_backward, pow_backward_self and pow_backward_exponent, op by op
    a, b = bsym.args[:2]
    y = bsym.output
    pairs: list[tuple[Any, Any]] = []
    if isinstance(a, TensorProxy):
        if isinstance(b, TensorProxy):
            d = ltorch.mul(g, ltorch.mul(b, ltorch.pow(a, ltorch.sub(b, 1))))
            pairs.append((a, _summed_to(ltorch.where(ltorch.eq(b, 0), 0.0, d), a)))
        elif b == 0:
            pairs.append((a, ltorch.zeros_like(a)))
        else:
            pairs.append((a, ltorch.mul(g, ltorch.mul(ltorch.pow(a, b - 1), b))))
    if isinstance(b, TensorProxy):
        if isinstance(a, TensorProxy):
            at_zero = ltorch.logical_and(ltorch.eq(a, 0), ltorch.ge(b, 0))
            d = ltorch.where(at_zero, 0.0, ltorch.mul(y, ltorch.log(to_dtype(a, y.dtype))))
        else:
            log_a = math.log(a) if a > 0 else (-math.inf if a == 0 else math.nan)
            d = ltorch.mul(y, log_a)
            if a == 0:
                d = ltorch.where(ltorch.ge(b, 0), 0.0, d)
        pairs.append((b, _summed_to(ltorch.mul(g, d), b)))
    return pairs


def _summed_to(grad: Any, x: TensorProxy) -> Any:
    return sum_to_shape(grad, x.shape)


def _binary_low_precision(bsym: BoundSymbol) -> bool:
    # a float16/bfloat16 operand, whatever the result's dtype (a float32 one's gradient reads
    # the low-precision operand as given)
    args = bound_arguments(bsym)
    return _low_precision_operand((args["a"], args["b"]))


@register_vjp(ltorch.atan2, applies=_binary_low_precision)
def _atan2(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # atan2_backward: recip = (self * self + other * other).reciprocal(), 0 where the sum is;
    # grad * other * recip and grad * -self * recip, each op rounded
    args = bound_arguments(bsym)
    a, b = args["a"], args["b"]
    denom = ltorch.add(ltorch.mul(a, a), ltorch.mul(b, b))
    recip = ltorch.where(ltorch.eq(denom, 0), 0.0, ltorch.reciprocal(denom))
    ga = ltorch.mul(ltorch.mul(g, b), recip)
    gb = ltorch.mul(ltorch.mul(g, ltorch.neg(a)), recip)
    return [(a, _summed_to(ga, a)), (b, _summed_to(gb, b))]


def _rounded_division_applies(bsym: BoundSymbol) -> bool:
    args = bound_arguments(bsym)
    return isinstance(args["a"], TensorProxy) and _binary_low_precision(bsym)


def _rounded_division_rule(mode: str) -> Callable[[BoundSymbol, TensorProxy], GradPairs]:
    """fmod's and remainder's rules: ``grad`` and ``-grad * self.div(other, rounding_mode)``,
    the quotient rounded to the dtype before it is truncated or floored, as eager's kernel."""

    def rule(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
        args = bound_arguments(bsym)
        a, b = args["a"], args["b"]
        pairs: list[tuple[Any, Any]] = [(a, _summed_to(g, a))]
        if isinstance(b, TensorProxy):
            quotient = ltorch.div(a, b, rounding_mode=mode)
            pairs.append((b, _summed_to(ltorch.mul(ltorch.neg(g), quotient), b)))
        return pairs

    return rule


register_vjp(ltorch.fmod, applies=_rounded_division_applies)(_rounded_division_rule("trunc"))
register_vjp(ltorch.remainder, applies=_rounded_division_applies)(_rounded_division_rule("floor"))


@register_vjp(ltorch.tanhshrink, applies=_low_precision_input)
def _tanhshrink(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # eager's ``a - a.tanh()``: grad + tanh_backward(-grad, tanh(a)), tanh rounded, the backward
    # in float32 rounded once, the sum rounded
    a = bsym.args[0]
    t = to_dtype(ltorch.tanh(a), _F32)
    through_tanh = P.mul(to_dtype(ltorch.neg(g), _F32), P.sub(1.0, P.mul(t, t)))
    return [(a, ltorch.add(g, to_dtype(through_tanh, a.dtype)))]


@register_vjp(ltorch.softsign, applies=_low_precision_input)
def _softsign(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # eager's ``a / (a.abs() + 1)``: div's gradients ``grad / d`` and ``-grad * ((a / d) / d)``,
    # abs's ``grad * a.sgn()``, each op rounded, the two added
    a = bsym.args[0]
    d = ltorch.add(ltorch.abs(a), 1)
    through_d = ltorch.mul(ltorch.neg(g), ltorch.div(ltorch.div(a, d), d))
    return [(a, ltorch.add(ltorch.div(g, d), ltorch.mul(through_d, ltorch.sgn(a))))]


def _mixed_precision_operands(bsym: BoundSymbol, operands: tuple[Any, ...]) -> bool:
    """A float16/bfloat16 result with a float tensor operand of another dtype (a 0-dim float32
    parameter): eager's formulas compute that operand's gradient in the result's dtype, summed
    there, then converted; the prims' rules would compute it in float32."""
    y = bsym.output
    return (
        isinstance(y, TensorProxy)
        and y.dtype.is_low_precision
        and any(isinstance(x, TensorProxy) and x.dtype != y.dtype for x in operands)
    )


def _mixed_binary(bsym: BoundSymbol) -> bool:
    args = bound_arguments(bsym)
    return _mixed_precision_operands(bsym, (args["a"], args["b"]))


def _grads_to_shapes(pairs: list[tuple[Any, Any]]) -> GradPairs:
    return [(x, _summed_to(g, x)) for x, g in pairs if isinstance(x, TensorProxy)]


@register_vjp(ltorch.mul, applies=_mixed_binary)
def _mul_mixed(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # mul_tensor_backward: grad * other and grad * self (the scalar second, read as given)
    args = bound_arguments(bsym)
    a, b = args["a"], args["b"]
    return _grads_to_shapes([(a, ltorch.mul(g, b)), (b, ltorch.mul(g, a))])


@register_vjp(ltorch.where, applies=lambda b: _mixed_precision_operands(b, tuple(b.args[1:3])))
def _where_mixed(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # where(cond, grad, 0) and where(cond, 0, grad)
    condition, a, b = bound_arguments(bsym).values()
    if condition.dtype != dtypes.bool8:
        condition = ltorch.ne(condition, 0)
    return _grads_to_shapes(
        [(a, ltorch.where(condition, g, 0.0)), (b, ltorch.where(condition, 0.0, g))]
    )


def _select_mixed(bsym: BoundSymbol, g: TensorProxy, a_loses: Any) -> GradPairs:
    # where(self == other, grad / 2, grad).masked_fill_(self loses, 0), and for other
    args = bound_arguments(bsym)
    a, b = args["a"], args["b"]
    shared = ltorch.where(ltorch.eq(a, b), ltorch.div(g, 2), g)
    return _grads_to_shapes(
        [
            (a, ltorch.where(a_loses(a, b), 0.0, shared)),
            (b, ltorch.where(a_loses(b, a), 0.0, shared)),
        ]
    )


@register_vjp(ltorch.maximum, applies=_mixed_binary)
def _maximum_mixed(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    return _select_mixed(bsym, g, ltorch.lt)


@register_vjp(ltorch.minimum, applies=_mixed_binary)
def _minimum_mixed(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    return _select_mixed(bsym, g, ltorch.gt)


def _batch_statistics_only(bsym: BoundSymbol, uses_batch_stats: str) -> bool:
    args = bound_arguments(bsym)
    a = args["a"]
    return (
        isinstance(a, TensorProxy)
        and a.dtype.is_low_precision
        and bool(args[uses_batch_stats])
        and args["running_mean"] is None
        and args["running_var"] is None
    )


def _evaluation(bsym: BoundSymbol) -> bool:
    # Any dtype: torch's kernel computes x * (invstd * w) + (b - mean * invstd * w) from the
    # running statistics, which the decomposition's (x - mean) * invstd * w + b rounds otherwise.
    return not bool(bound_arguments(bsym)["training"])


def _through_eager(torch_name: str) -> Callable[[BoundSymbol, TensorProxy], GradPairs]:
    """A rule running eager's backward of the op (``torch.autograd.grad`` through it): the
    forward stays torch's one kernel (its float16/bfloat16 result is not the decomposition's
    rounded), the gradients are eager's. Only where the running statistics are not updated
    (none given, or read in evaluation), which the re-run would update again."""

    def rule(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
        args = tuple(bound_arguments(bsym).values())
        grads = ltorch.torch_fallback_vjp(torch_name, args, {}, (g,))
        return [(x, gx) for x, gx in zip(args, grads) if gx is not None]

    return rule


# (on the CPU, training batch_norm is native_batch_norm, whose rule emits eager's backward kernel)
register_vjp(
    ltorch.batch_norm,
    applies=lambda b: (
        _evaluation(b) or (_batch_statistics_only(b, "training") and b.args[0].device.type != "cpu")
    ),
)(_through_eager("torch.nn.functional.batch_norm"))
register_vjp(ltorch.instance_norm, applies=lambda b: _batch_statistics_only(b, "use_input_stats"))(
    _through_eager("torch.nn.functional.instance_norm")
)
