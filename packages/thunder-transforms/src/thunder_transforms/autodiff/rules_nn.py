"""VJP rules of matmul, linear, convolution and embedding, of the composite ops whose own rule
is cheaper than differentiating their decomposition (softmax, log_softmax, embedding with
``padding_idx``), and of activations and losses whose decomposition differentiates to another
gradient than eager's at edge points (relu, selu, celu, logsigmoid, binary_cross_entropy,
huber_loss, smooth_l1_loss)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from thunder_ir import BoundSymbol, TensorProxy, dtypes, prims
from thunder_ir import ops as ltorch
from thunder_ir.ops._helpers import broadcast, to_dtype
from thunder_ir.ops.nn_base import opmath, reduction_arg
from thunder_ir.utils import canonicalize_dim, result_type
from thunder_transforms.autodiff.registry import (
    GradPairs,
    bound_arguments,
    register_vjp,
    static_eq,
    sum_to_shape,
    was_one,
)
from thunder_transforms.autodiff.rules_elementwise import _conj
from thunder_transforms.autodiff.rules_fused import _not_in_place
from thunder_transforms.autodiff.rules_low_precision import scalar_in
from thunder_transforms.autodiff.rules_shape import _reshape_to

__all__: list[str] = []

P = prims


def _mT(x: TensorProxy) -> TensorProxy:
    perm = (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2)
    return P.transpose(x, perm)  # type: ignore[no-any-return]


@register_vjp(P.bernoulli_like)
def _bernoulli_like(bsym: BoundSymbol, g: Any) -> GradPairs:
    return []  # reads only the layout of its tensor, not its values


@register_vjp(P.matmul)
def _matmul(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    # Complex operands: eager's gradients take the conjugates (g @ b^H, a^H @ g).
    ca, cb = _conj(a), _conj(b)
    if a.ndim == 1 and b.ndim == 1:
        return [
            (a, P.mul(P.broadcast_in_dim(g, a.shape, ()), cb)),
            (b, P.mul(P.broadcast_in_dim(g, b.shape, ()), ca)),
        ]
    if a.ndim == 3 and b.ndim == 3 and not static_eq(a.shape[0], b.shape[0]):
        # Eager's matmul drops a batch of 1 that requires grad, then folds the other's batch.
        for one, other, first in ((a, b, True), (b, a, False)):
            if was_one(one.shape[0]) and one.requires_grad:
                sq = _reshape_to(_conj(one), one.shape[1:])
                a2, b2 = (sq, b) if first else (a, sq)
                ca2, cb2 = (sq, cb) if first else (ca, sq)
                ga2, gb2 = (gr for _, gr in _folded_matmul_grads(a2, b2, ca2, cb2, g))
                g_one = _reshape_to(ga2 if first else gb2, one.shape)
                return [(one, g_one), (other, gb2 if first else ga2)]
    if _eager_folds(a, b):
        return _folded_matmul_grads(a, b, ca, cb, g)
    a2 = ca if a.ndim > 1 else P.unsqueeze(ca, 0)
    b2 = cb if b.ndim > 1 else P.unsqueeze(cb, 1)
    g2 = g
    if a.ndim == 1:
        g2 = P.unsqueeze(g2, g2.ndim - 1)
    if b.ndim == 1:
        g2 = P.unsqueeze(g2, g2.ndim)
    ga = _reshape_to(sum_to_shape(P.matmul(g2, _mT(b2)), a2.shape), a.shape)
    gb = _reshape_to(sum_to_shape(P.matmul(_mT(a2), g2), b2.shape), b.shape)
    return [(a, ga), (b, gb)]


def _outer(u: TensorProxy, v: TensorProxy) -> TensorProxy:
    shape = (u.shape[0], v.shape[0])
    return P.mul(P.broadcast_in_dim(u, shape, (0,)), P.broadcast_in_dim(v, shape, (1,)))  # type: ignore[no-any-return]


def _eager_folds(a: TensorProxy, b: TensorProxy) -> bool:
    """Whether eager's matmul folds the batch dimensions of the operand with more of them into
    one ``mm``/``mv`` (aten's ``should_fold``, the larger operand taken as contiguous)."""
    big, small = (a, b) if a.ndim >= b.ndim else (b, a)
    if not (big.ndim >= 3 and small.ndim <= 2):
        return False
    return bool(small.requires_grad) or big is a  # b^T of a contiguous b does not fold


def _folded_matmul_grads(
    a: TensorProxy, b: TensorProxy, ca: Any, cb: Any, g: TensorProxy
) -> GradPairs:
    """Gradients of a batched operand times a matrix or vector as eager's matmul takes them: it
    folds the batch dimensions into one ``mm``/``mv`` (``should_fold``), so the weight's gradient
    is one product over all rows, not a product per batch summed in low precision after."""
    if a.ndim >= 3:  # a [..., K] @ b [K, N] or [K]: a folded to [rows, K]
        rows: Any = 1
        for s in a.shape[:-1]:
            rows = rows * s
        a_f = _reshape_to(ca, (rows, a.shape[-1]))
        if b.ndim == 2:
            g_f = _reshape_to(g, (rows, b.shape[1]))
            return [(a, _reshape_to(P.matmul(g_f, _mT(cb)), a.shape)), (b, P.matmul(_mT(a_f), g_f))]
        g_f = _reshape_to(g, (rows,))
        return [(a, _reshape_to(_outer(g_f, cb), a.shape)), (b, P.matmul(_mT(a_f), g_f))]
    # a [M, K] or [K] @ b [..., K, N]: eager folds b^T, [..., N, K], to [rows, K]
    rows = b.shape[-1]
    for s in b.shape[:-2]:
        rows = rows * s
    bT = _mT(cb)
    bT_shape = bT.shape
    b_f = _reshape_to(bT, (rows, b.shape[-2]))
    if a.ndim == 2:  # out^T = b_f @ a^T
        g_f = _reshape_to(_mT(g), (rows, a.shape[0]))
        gb = _mT(_reshape_to(P.matmul(g_f, ca), bT_shape))
        return [(a, P.matmul(_mT(g_f), b_f)), (b, gb)]
    g_f = _reshape_to(g, (rows,))
    return [(a, P.matmul(_mT(b_f), g_f)), (b, _mT(_reshape_to(_outer(g_f, ca), bT_shape)))]


@register_vjp(P.linear)
def _linear(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, w, bias = bsym.args
    pairs: list[tuple[Any, Any]] = []
    if bias is not None:
        pairs.append((bias, sum_to_shape(g, bias.shape)))
    if w.ndim == 1:  # a @ w: eager's matmul, one mv over a's rows (the products unrounded)
        lead = tuple(range(a.ndim - 1))
        g_full = P.broadcast_in_dim(g, a.shape, lead)
        pairs.append((a, P.mul(g_full, P.broadcast_in_dim(w, a.shape, (a.ndim - 1,)))))
        if not lead:
            pairs.append((w, P.mul(g_full, a)))
            return pairs
        n_rows: Any = 1
        for s in a.shape[:-1]:
            n_rows = n_rows * s
        a_f = _reshape_to(a, (n_rows, a.shape[-1]))
        pairs.append((w, P.matmul(_mT(a_f), _reshape_to(g, (n_rows,)))))
        return pairs
    out_f, in_f = w.shape
    pairs.append((a, P.matmul(g, w)))
    rows: Any = 1
    for s in a.shape[:-1]:
        rows = rows * s
    g2 = _reshape_to(g, (rows, out_f))
    a2 = _reshape_to(a, (rows, in_f))
    pairs.append((w, P.matmul(_mT(g2), a2)))
    return pairs


def _times(x: Any, s: Any) -> Any:
    """Eager's ``maybe_multiply``: ``x * s`` (one rounding) unless ``s`` is 1."""
    s = _conj(s)
    return x if (not isinstance(s, TensorProxy) and s == 1) else ltorch.mul(x, s)


@register_vjp(ltorch.addmm, ltorch.baddbmm)
def _addmm(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Kept whole (one rounding of the product plus the input, as eager's kernels) and
    # differentiated as eager's AddmmBackward/BaddbmmBackward: grad @ second^H and first^H @ grad,
    # each times alpha, and the input's grad times beta (zeros for beta=0, not none) summed to
    # its shape.
    args = bound_arguments(bsym)
    names = ("mat1", "mat2") if bsym.sym is ltorch.addmm else ("batch1", "batch2")
    a, first, second = args["a"], args[names[0]], args[names[1]]
    beta, alpha = args["beta"], args["alpha"]
    return [
        (a, sum_to_shape(_times(g, beta), a.shape)),
        (first, _times(P.matmul(g, _mT(_conj(second))), alpha)),
        (second, _times(P.matmul(_mT(_conj(first)), g), alpha)),
    ]


def _per_dim(x: Sequence[int], nd: int) -> tuple[int, ...]:
    return tuple(x) * nd if len(x) == 1 else tuple(x)


@register_vjp(P.convolution)
def _convolution(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, w, bias, stride, padding, dilation, transposed, output_padding, groups = bsym.args
    nd = w.ndim - 2
    per_dim = tuple(_per_dim(x, nd) for x in (stride, padding, dilation, output_padding))
    stride, padding, dilation, output_padding = per_dim
    # Two ops, as eager's convolution_backward with an output mask: the gradient of an input
    # that needs none (a model's first layer) is dropped with its op. The bias's comes with the
    # weight's, from the kernel that sums it as eager's does.
    args = (g, a, w, stride, padding, dilation, transposed, output_padding, groups)
    pairs: list[tuple[Any, Any]] = [(a, ltorch.convolution_backward_input(*args))]
    if bias is None:
        pairs.append((w, ltorch.convolution_backward_weight(*args)))
        return pairs
    gw, gb = ltorch.convolution_backward_weight(*args, bias=True)
    return [*pairs, (w, gw), (bias, gb)]


@register_vjp(P.embedding)
def _embedding(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    indices, weight = bsym.args
    return [(weight, ltorch.embedding_backward(g, indices, weight.shape[0], -1, False))]


@register_vjp(ltorch.embedding)
def _ltorch_embedding(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    args = bound_arguments(bsym)
    indices, weight = args["a"], args["weight"]
    n, padding_idx = weight.shape[0], args["padding_idx"]
    if padding_idx is None:
        padding_idx = -1
    elif padding_idx < 0:
        padding_idx = padding_idx + n  # checked against -n by the op; as torch normalizes it
    grad = ltorch.embedding_backward(g, indices, n, padding_idx, bool(args["scale_grad_by_freq"]))
    return [(weight, grad)]


def _softmax_dim(bsym: BoundSymbol, ndim: int) -> int:
    dim = bound_arguments(bsym)["dim"]
    if dim is None:  # torch's legacy implicit dimension
        dim = 0 if ndim in (0, 1, 3) else 1
    return int(dim) % ndim if ndim else 0


@register_vjp(ltorch.softmax)
def _softmax(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, y = bsym.args[0], bsym.output
    if y.ndim == 0:
        return [(a, P.convert_element_type(P.mul(g, 0.0), a.dtype))]
    # eager's kernel (one reduction order; float16/bfloat16 in float32, rounded once)
    ga = ltorch.softmax_backward_data(g, y, _softmax_dim(bsym, y.ndim), y.dtype)
    return [(a, ga if ga.dtype == a.dtype else P.convert_element_type(ga, a.dtype))]


@register_vjp(ltorch.log_softmax)
def _log_softmax(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, y = bsym.args[0], bsym.output
    if y.ndim == 0:
        return [(a, P.convert_element_type(P.mul(g, 0.0), a.dtype))]
    ga = ltorch.log_softmax_backward_data(g, y, _softmax_dim(bsym, y.ndim), y.dtype)
    return [(a, ga if ga.dtype == a.dtype else P.convert_element_type(ga, a.dtype))]


@register_vjp(ltorch.softmin)
def _softmin(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's softmin is softmax(-a): the softmax kernel's gradient, negated.
    return [(a, P.neg(ga)) for a, ga in _softmax(bsym, g)]


# Activations and losses whose decomposition differentiates to another gradient than eager's at
# edge points (exactly 0, overflowing exp in a branch ``where`` did not select, a perfect
# prediction): eager's backward formula, computed in the forward's computation dtype and
# rounded once. The op is then kept whole in the forward too (torch's own kernel).


def _in_compute_dtype(g: TensorProxy, a: TensorProxy, grad: Any) -> Any:
    """``grad(x, g)`` with ``a`` and ``g`` in ``a``'s computation dtype, rounded to ``a``'s."""
    compute = opmath(a.dtype)
    return to_dtype(grad(to_dtype(a, compute), to_dtype(g, compute)), a.dtype)


@register_vjp(ltorch.relu, applies=_not_in_place)
def _relu(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's threshold_backward on the result: 0 where it is <= 0 (NaN passes the gradient).
    a = bound_arguments(bsym)["a"]
    return [(a, P.where(P.le(bsym.output, 0), 0.0, g))]


def _elu_grad(
    g: TensorProxy, a: TensorProxy, alpha: float, scale: float, input_scale: float
) -> Any:
    """Eager's elu_backward from the input: ``g * input_scale * alpha * scale * exp(x *
    input_scale)`` where ``x <= 0``, else ``g * scale``. Both sides are computed, selected here:
    an exp that overflows where ``x > 0`` never reaches the result (differentiating the
    forward's ``where`` would give ``0 * inf``)."""

    def grad(x: Any, gc: Any) -> Any:
        neg_side = P.mul(P.mul(P.mul(gc, input_scale), alpha * scale), P.exp(P.mul(x, input_scale)))
        return P.where(P.le(x, 0.0), neg_side, P.mul(gc, scale))

    return _in_compute_dtype(g, a, grad)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@register_vjp(ltorch.selu, applies=_not_in_place)
def _selu(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a = bound_arguments(bsym)["a"]
    return [(a, _elu_grad(g, a, _SELU_ALPHA, _SELU_SCALE, 1.0))]


@register_vjp(ltorch.celu, applies=_not_in_place)
def _celu(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    args = bound_arguments(bsym)
    a, alpha = args["a"], float(args["alpha"])
    return [(a, _elu_grad(g, a, alpha, 1.0, 1.0 / alpha))]


@register_vjp(ltorch.logsigmoid)
def _logsigmoid(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's log_sigmoid_backward: with s = z / (1 + z), z = exp(-|x|), the gradient is
    # g * (1 - s) where x < 0 and g * s elsewhere (0.5 at x == 0, where min(x, 0) has a kink).
    # torch's CPU kernel reads z from the buffer its forward saved (rounded to a float16/bfloat16
    # input's dtype).
    a = bsym.args[0]
    rounded = a.dtype.is_low_precision and a.device.type == "cpu"

    def grad(x: Any, gc: Any) -> Any:
        z = P.exp(P.neg(P.abs(x)))
        if rounded:
            z = to_dtype(to_dtype(z, a.dtype), x.dtype)
        s = P.div(z, P.add(z, 1.0))
        return P.mul(gc, P.where(P.lt(x, 0.0), P.sub(1.0, s), s))

    return [(a, _in_compute_dtype(g, a, grad))]


def _loss_weight_fixed(bsym: BoundSymbol) -> bool:
    # Eager refuses a weight that requires grad; that call keeps the decomposition.
    weight = bound_arguments(bsym)["weight"]
    return not (isinstance(weight, TensorProxy) and weight.requires_grad)


@register_vjp(ltorch.nll_loss, applies=_loss_weight_fixed)
def _nll_loss(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's nll_loss_backward writes -w * grad at each row's target class into zeros (where
    # the decomposition's gather adds it to a zero: -0.0 would become +0.0), in the input's
    # dtype: for "mean" grad = -(grad / total_weight) first, total_weight its forward's (a
    # float16/bfloat16 count of rows rounded to the dtype), then times w; a 1-D input's "mean"
    # is -grad whatever its weight.
    args = bound_arguments(bsym)
    a, weight, ignore_index = args["a"], args["weight"], args["ignore_index"]
    reduction = reduction_arg(args["size_average"], args["reduce"], args["reduction"])
    cd = 0 if a.ndim == 1 else 1
    t = to_dtype(args["target"], dtypes.int64)
    keep = ltorch.ne(t, ignore_index)
    safe_t = ltorch.where(keep, t, 0)
    gd = to_dtype(g, a.dtype)
    w = None if weight is None else P.take(to_dtype(weight, a.dtype), safe_t)
    if reduction == "none":
        value = ltorch.neg(gd) if w is None else ltorch.mul(ltorch.neg(w), gd)
    else:
        if reduction == "mean" and a.ndim > 1:
            if weight is None:
                total = to_dtype(ltorch.sum(to_dtype(keep, dtypes.int64)), a.dtype)
            else:
                total = ltorch.nll_loss_total_weight(a, args["target"], weight, ignore_index)
            gd = ltorch.div(gd, total)
        if w is None or (reduction == "mean" and a.ndim == 1):
            value = ltorch.neg(gd)
        else:
            value = ltorch.mul(w, ltorch.neg(gd))
    shape = [1] * a.ndim
    shape[cd] = a.shape[cd]
    classes = ltorch.reshape(ltorch.arange(a.shape[cd], device=a.device), shape)
    hit = ltorch.logical_and(
        ltorch.eq(ltorch.unsqueeze(safe_t, cd), classes), ltorch.unsqueeze(keep, cd)
    )
    grad = ltorch.where(hit, ltorch.unsqueeze(value, cd) if value.ndim else value, 0.0)
    return [(a, to_dtype(grad, a.dtype))]


def _kl_div_applies(bsym: BoundSymbol) -> bool:
    args = bound_arguments(bsym)
    a, target = args["a"], args["target"]
    if not all(isinstance(x, TensorProxy) and x.dtype.is_float for x in (a, target)):
        return False
    # a log target of another dtype: exp(target) rounded in its own (the decomposition's)
    return not args["log_target"] or a.dtype == target.dtype


@register_vjp(ltorch.kl_div, applies=_kl_div_applies)
def _kl_div(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager differentiates xlogy(t, t) - t * x by derivatives.yaml's xlogy rule: where the
    # gradient is 0 its target gradient is 0 at a negative target (the decomposition's
    # where(t == 0, 0, t * log(t)) differentiates to 0 * NaN there). A log target's
    # exp(t) * (t - x) follows eager's autograd op by op.
    args = bound_arguments(bsym)
    a, target, reduction = args["a"], args["target"], args["reduction"]
    if reduction != "batchmean" or args["size_average"] is not None or args["reduce"] is not None:
        reduction = reduction_arg(args["size_average"], args["reduce"], reduction)
    common = result_type(a, target)
    x, t = broadcast(to_dtype(a, common), to_dtype(target, common))
    if reduction == "batchmean" and x.ndim:
        g = ltorch.div(g, x.shape[0])
    elif reduction == "mean":
        g = ltorch.div(g, _numel(x))
    gl = ltorch.expand(g, tuple(x.shape)) if reduction != "none" else g
    if args["log_target"]:
        # exp(t) * (t - x): the product's gradient times exp(t) for the difference, and times
        # the difference then exp(t) (exp's result, rounded) for the exp; the target's two
        # terms added after (float16/bfloat16 rounded after each op, as eager's autograd).
        e = ltorch.exp(t)
        grad_d = ltorch.mul(gl, e)
        grad_t = ltorch.add(grad_d, ltorch.mul(ltorch.mul(gl, ltorch.sub(t, x)), e))
        return [
            (a, to_dtype(sum_to_shape(ltorch.neg(grad_d), a.shape), a.dtype)),
            (target, to_dtype(sum_to_shape(grad_t, target.shape), target.dtype)),
        ]
    neg_g = ltorch.neg(gl)  # sub: -grad
    grad_x = ltorch.mul(neg_g, t)  # mul: grad * other
    # xlogy: self: xlogy(grad, other), 0 where self == 0 and other <= 0; other: grad * self / other.
    # torch's xlogy kernel rounds log(other) to the dtype before the product (float16/bfloat16).
    log_t = ltorch.log(t)
    xlogy = ltorch.where(ltorch.eq(gl, 0), 0.0, ltorch.mul(gl, log_t))
    xlogy = ltorch.where(ltorch.isnan(t), t, xlogy)
    self_part = ltorch.masked_fill(xlogy, ltorch.eq(t, 0), 0)
    other_part = ltorch.div(ltorch.mul(gl, t), t)
    grad_t = ltorch.add(ltorch.add(self_part, other_part), ltorch.mul(neg_g, x))
    return [
        (a, to_dtype(sum_to_shape(grad_x, a.shape), a.dtype)),
        (target, to_dtype(sum_to_shape(grad_t, target.shape), target.dtype)),
    ]


_BCE_EPSILON = 1e-12


@register_vjp(ltorch.binary_cross_entropy, applies=_loss_weight_fixed)
def _binary_cross_entropy(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's kernels, each op in the input's dtype (float16/bfloat16 rounded after each):
    # g * (x - y) / max((1 - x) * x, 1e-12) for the input (0 at a perfect prediction, not 0 / 0)
    # and -logit(x) * g for the target (torch's logit, log(x / (1 - x)), rounds after each op
    # too); times the weight, divided by numel for "mean".
    args = bound_arguments(bsym)
    a, target, weight = args["a"], args["target"], args["weight"]
    reduction = reduction_arg(args["size_average"], args["reduce"], args["reduction"])
    if reduction != "none":
        g = P.broadcast_in_dim(g, tuple(a.shape), ())

    def finish(grad: Any, like: TensorProxy) -> Any:
        if weight is not None:
            grad = to_dtype(ltorch.mul(grad, weight), a.dtype)  # in place: eager's mul_
        if reduction == "mean":
            grad = ltorch.div(grad, _numel(a))
        return to_dtype(grad, like.dtype)

    # the epsilon in the input's dtype: float16 rounds it to 0
    eps = scalar_in(_BCE_EPSILON, a.dtype)
    spread = P.mul(P.sub(1.0, a), a)
    spread = P.where(P.lt(spread, eps), eps, spread)
    ga = P.div(P.mul(g, P.sub(a, target)), spread)
    gt = P.mul(P.neg(P.log(P.div(a, P.sub(1.0, a)))), g)
    return [(a, finish(ga, a)), (target, finish(gt, target))]


def _numel(a: TensorProxy) -> Any:
    n: Any = 1
    for s in a.shape:
        n = n * s
    return n


def _pointwise_loss_grads(bsym: BoundSymbol, g: TensorProxy, slope: Any) -> GradPairs:
    """The gradients of a pointwise loss of ``a - target`` by eager's backward kernel:
    ``slope(d, g)`` at ``d = a - target`` for the input and at ``target - a`` for the target
    (eager's backward with the operands swapped), ``g`` scaled by 1 / numel for "mean". Each
    branch is selected here: an infinite difference never meets the quadratic branch."""
    args = bound_arguments(bsym)
    a, target = args["a"], args["target"]
    reduction = reduction_arg(args.get("size_average"), args.get("reduce"), args["reduction"])
    common = result_type(a, target)
    compute = opmath(common)
    x, t = broadcast(to_dtype(a, compute), to_dtype(target, compute))
    gc = to_dtype(g, compute)
    if reduction != "none":
        gc = P.broadcast_in_dim(gc, tuple(x.shape), ())
    if reduction == "mean":
        n = _numel(x)
        # an empty input has an empty gradient: no 1 / 0 to take
        gc = P.mul(gc, 1.0 / n) if isinstance(n, int) and n else P.div(gc, n)

    def grad(d: Any, like: TensorProxy) -> Any:
        return sum_to_shape(to_dtype(slope(d, gc), common), like.shape)

    return [(a, grad(P.sub(x, t), a)), (target, grad(P.sub(t, x), target))]


def _kernel_norm(reduction: str, x: TensorProxy, dtype: dtypes.DType) -> Any:
    """The ``norm`` of eager's pointwise-loss backward kernels, rounded to ``dtype`` (their
    ``Scalar.to<scalar_t>()``): 1 / numel for "mean", else 1. A tensor of ``x``'s shape where the
    numel is known only when the program runs."""
    if reduction != "mean":
        return 1.0
    n = _numel(x)
    if isinstance(n, int):
        return scalar_in(1.0 / n if n else math.inf, dtype)
    one = P.full((), 1.0, device=x.device, dtype=dtypes.float64)
    norm = P.convert_element_type(P.div(one, n), dtype)
    return P.broadcast_in_dim(norm, tuple(x.shape), ())


def _kernel_loss_grads(
    bsym: BoundSymbol, g: TensorProxy, compute: dtypes.DType, slope: Any
) -> GradPairs:
    """The gradients of a pointwise loss of ``a - target`` as eager's backward kernel computes
    them (its vectorized loop): ``norm * slope(d) * g`` in ``compute``, rounded after each op,
    at ``d = a - target`` for the input and at ``target - a`` for the target (eager's backward
    with the operands swapped). Each branch of ``slope`` is selected: an infinite difference
    never meets the quadratic branch."""
    args = bound_arguments(bsym)
    a, target = args["a"], args["target"]
    reduction = reduction_arg(args.get("size_average"), args.get("reduce"), args["reduction"])
    common = result_type(a, target)
    x, t = broadcast(to_dtype(a, compute), to_dtype(target, compute))
    gc = to_dtype(g, compute)
    if reduction != "none":
        gc = P.broadcast_in_dim(gc, tuple(x.shape), ())
    norm = _kernel_norm(reduction, x, compute)

    def grad(d: Any, like: TensorProxy) -> Any:
        scaled = slope(d)
        if not (isinstance(norm, float) and norm == 1.0):
            scaled = P.mul(norm, scaled)
        return sum_to_shape(to_dtype(P.mul(scaled, gc), common), like.shape)

    return [(a, grad(P.sub(x, t), a)), (target, grad(P.sub(t, x), target))]


def _huber_applies(bsym: BoundSymbol) -> bool:
    return bound_arguments(bsym).get("weight") is None  # eager computes a weighted one in Python


@register_vjp(ltorch.huber_loss, applies=_huber_applies)
def _huber_loss(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's huber_loss_backward: norm * delta * sign(d) where |d| >= delta, norm * d between,
    # times g; each op in the inputs' dtype (float16/bfloat16 rounded after each, delta too).
    args = bound_arguments(bsym)
    a, target, delta = args["a"], args["target"], float(args["delta"])
    if not (a.dtype == target.dtype == g.dtype and a.dtype.is_float):
        # (eager's kernel refuses other dtypes: computed in the common one)

        def slope_mixed(d: Any, gc: Any) -> Any:
            outer = P.mul(gc, delta)
            inner = P.where(P.ge(d, delta), outer, P.mul(d, gc))
            return P.where(P.le(d, -delta), P.neg(outer), inner)

        return _pointwise_loss_grads(bsym, g, slope_mixed)
    delta_in = scalar_in(delta, a.dtype)

    def slope(d: Any) -> Any:
        return P.where(P.ge(P.abs(d), delta_in), P.mul(P.sign(d), delta_in), d)

    return _kernel_loss_grads(bsym, g, a.dtype, slope)


def _smooth_l1_applies(bsym: BoundSymbol) -> bool:
    # beta == 0 is l1_loss (its decomposition). The forward refused a negative beta, so this
    # is beta != 0: a truth value, which a symbolic beta answers outside any trace as well (a
    # comparison would record a prim), the decision checked by the prologue.
    return bool(bound_arguments(bsym)["beta"])


@register_vjp(ltorch.smooth_l1_loss, applies=_smooth_l1_applies)
def _smooth_l1_loss(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's smooth_l1_loss_backward: norm * sign(d) where |d| >= beta, norm * d / beta between,
    # times g; float16/bfloat16 computed in float32, rounded once.
    args = bound_arguments(bsym)
    compute = opmath(result_type(args["a"], args["target"]))
    beta = scalar_in(float(args["beta"]), compute)

    def slope(d: Any) -> Any:
        return P.where(P.ge(P.abs(d), beta), P.sign(d), P.div(d, beta))

    return _kernel_loss_grads(bsym, g, compute, slope)


# Single-kernel eager ops whose decomposition adds gradient pieces (a slice's zero padding, a
# ``where``'s zero branch, ``start + w * (end - start)``): the sum turns a -0 of eager's formula
# into +0, which copysign, atan2 or a division by the gradient tells apart. These rules follow
# eager's formulas (derivatives.yaml) term by term.


@register_vjp(ltorch.glu)
def _glu(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's glu_backward writes both halves in place: (sig(b) * g, (1 - sig(b)) * sig(b) * a * g),
    # on the CPU sig(b) first written into the gradient's buffer (rounded to float16/bfloat16)
    args = bound_arguments(bsym)
    x = args["a"]
    d = canonicalize_dim(x.ndim, args["dim"])
    half = x.shape[d] // 2
    first, second = ltorch.narrow(x, d, 0, half), ltorch.narrow(x, d, half, half)

    def grads(xs: Any, gc: Any) -> Any:
        a, b = xs
        sig = P.sigmoid(b)
        if x.device.type == "cpu":
            sig = to_dtype(to_dtype(sig, x.dtype), compute)
        ga = P.mul(sig, gc)
        gb = P.mul(P.mul(P.mul(P.sub(1.0, sig), sig), a), gc)
        return ga, gb

    compute = opmath(x.dtype)
    ga, gb = grads((to_dtype(first, compute), to_dtype(second, compute)), to_dtype(g, compute))
    return [(x, to_dtype(ltorch.cat([ga, gb], d), x.dtype))]


@register_vjp(ltorch.lerp)
def _lerp(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # start: g * (1 - weight); end: g * weight; weight: g * (end - start)
    args = bound_arguments(bsym)
    start, end, weight = args["start"], args["end"], args["weight"]
    pairs: list[tuple[Any, Any]] = []

    def reduced(grad: Any, like: TensorProxy) -> Any:
        return to_dtype(sum_to_shape(grad, like.shape), like.dtype)

    if isinstance(weight, TensorProxy):
        pairs.append((start, reduced(ltorch.mul(g, ltorch.sub(1, weight)), start)))
        pairs.append((weight, reduced(ltorch.mul(g, ltorch.sub(end, start)), weight)))
    else:
        pairs.append((start, reduced(ltorch.mul(g, 1 - weight), start)))
    if isinstance(end, TensorProxy):
        pairs.append((end, reduced(ltorch.mul(g, weight), end)))
    return pairs


@register_vjp(ltorch.prelu)
def _prelu(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's _prelu_kernel_backward: (x > 0 ? g : w * g, x > 0 ? 0 : x * g), the weight's
    # summed over the dims it was broadcast along.
    args = bound_arguments(bsym)
    a, weight = args["a"], args["weight"]
    n = weight.numel()
    if weight.ndim == 1 and n != 1:
        shape = [1] * a.ndim
        shape[1] = n
        w = P.broadcast_in_dim(weight, tuple(shape), (1,))
    else:
        w = P.reshape(weight, ())
    positive = ltorch.gt(a, 0)
    ga = ltorch.where(positive, g, ltorch.mul(w, g))
    gw = ltorch.where(positive, 0.0, ltorch.mul(a, g))
    if weight.ndim == 1 and n != 1:
        gw = ltorch.sum(gw, [i for i in range(a.ndim) if i != 1])
    else:
        gw = ltorch.sum(gw)
    return [(a, ga), (weight, to_dtype(P.reshape(gw, tuple(weight.shape)), weight.dtype))]


def _mse_applies(bsym: BoundSymbol) -> bool:
    return bound_arguments(bsym).get("weight") is None  # eager computes a weighted one in Python


@register_vjp(ltorch.mse_loss, applies=_mse_applies)
def _mse_loss(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's mse_loss_backward kernel: norm * (input - target) * grad, each op in the inputs'
    # dtype (float16/bfloat16 round after each), norm = 2 (2 / numel for "mean") rounded to it;
    # the target's at d = target - input (not -(norm * d * g)).
    args = bound_arguments(bsym)
    a, target = args["a"], args["target"]
    reduction = reduction_arg(args.get("size_average"), args.get("reduce"), args["reduction"])
    same_dtype = a.dtype == target.dtype == g.dtype and a.dtype.is_float
    x, t = broadcast(a, target) if same_dtype else (a, target)
    n = _numel(x)
    if not same_dtype:
        return _pointwise_loss_grads(bsym, g, lambda d, gc: P.mul(P.mul(d, 2.0), gc))
    norm: Any
    if reduction == "mean" and not isinstance(n, int):  # 2 / n rounded when the program runs
        two = P.full((), 2.0, device=a.device, dtype=dtypes.float64)
        norm = P.convert_element_type(P.div(two, n), a.dtype)
        norm = P.broadcast_in_dim(norm, tuple(x.shape), ())
    else:
        norm = scalar_in(2.0 / n if reduction == "mean" and n else 2.0, a.dtype)
    gb = P.broadcast_in_dim(g, tuple(x.shape), ()) if reduction != "none" else g

    def grad(d: Any, like: TensorProxy) -> Any:
        return sum_to_shape(P.mul(P.mul(d, norm), gb), like.shape)

    return [(a, grad(P.sub(x, t), a)), (target, grad(P.sub(t, x), target))]


@register_vjp(ltorch.binary_cross_entropy_with_logits)
def _binary_cross_entropy_with_logits(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's binary_cross_entropy_with_logits_backward and its target_backward, op by op:
    # (sigmoid(x) - y) * g, or ((pw * y + 1 - y) * sigmoid(x) - pw * y) * g; the target's
    # -x * g, or (logsigmoid(-x) - logsigmoid(x) * pw) * g; times the weight, over numel.
    args = bound_arguments(bsym)
    a, target = args["a"], args["target"]
    weight, pos_weight = args["weight"], args["pos_weight"]
    reduction = reduction_arg(args["size_average"], args["reduce"], args["reduction"])
    if reduction != "none":
        g = ltorch.expand(g, tuple(a.shape))
    sig = ltorch.sigmoid(a)
    if pos_weight is not None:
        t = ltorch.mul(pos_weight, target)
        ga = ltorch.sub(ltorch.mul(ltorch.sub(ltorch.add(t, 1), target), sig), t)
        log_sig = ltorch.mul(ltorch.logsigmoid(a), pos_weight)
        gt = ltorch.mul(ltorch.sub(ltorch.logsigmoid(ltorch.neg(a)), log_sig), g)
    else:
        ga = ltorch.sub(sig, target)
        gt = ltorch.mul(a, ltorch.neg(g))
    ga = ltorch.mul(ga, g)
    pairs = []
    for x, grad in ((a, ga), (target, gt)):
        if weight is not None:
            grad = ltorch.mul(grad, weight)
        if reduction == "mean":
            grad = ltorch.div(grad, _numel(a))
        pairs.append((x, to_dtype(sum_to_shape(grad, x.shape), x.dtype)))
    return pairs


@register_vjp(ltorch.roll)
def _roll(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's: the gradient rolled back (the decomposition's slices would add zero padding)
    args = bound_arguments(bsym)
    shifts, dims = args["shifts"], args["dims"]
    back = tuple(-s for s in shifts) if isinstance(shifts, (tuple, list)) else -shifts
    if isinstance(dims, (tuple, list)):
        dims = tuple(reversed(dims))
        back = tuple(reversed(back)) if isinstance(back, tuple) else back
    return [(args["a"], ltorch.roll(g, back, dims))]
