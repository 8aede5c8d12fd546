"""Ops whose backward torch runs as one fused kernel: a forward that also returns what the backward
needs (``native_layer_norm``: the output, mean and rstd) and the backward itself
(``layer_norm_backward``, ``group_norm_backward``, ``gelu_backward``, ``sdpa_flash_backward``,
``softmax_backward_data``, ...). They mirror no torch callable (autodiff's rules
emit them); their decompositions are the math in prims, so every executor can run them, and the
torch_ops executor runs them with torch's aten kernels."""

from __future__ import annotations

import math
from typing import Any

from thunder_ir import prims
from thunder_ir.ops._helpers import opmath, to_dtype
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.nn_base import (
    add,
    amax_,
    erf,
    exp,
    keep_dims,
    log,
    mul,
    rsqrt,
    sub,
    sum_,
    tanh,
    where,
)
from thunder_ir.proxies import TensorProxy

__all__: list[str] = []


def _norm_dims(a: TensorProxy, normalized_shape: Any) -> tuple[int, ...]:
    k = len(tuple(normalized_shape))
    return tuple(range(a.ndim - k, a.ndim))


@torchop(name="native_layer_norm")
def native_layer_norm(
    a: TensorProxy, normalized_shape: Any, weight: Any, bias: Any, eps: float
) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    """Layer norm of ``a`` (weight and bias of its dtype, or float32 with a float16/bfloat16
    ``a`` on the CPU) returning ``(out, mean, rstd)``; mean and rstd keep the normalized
    dimensions as size 1 (torch's ``native_layer_norm``). float16 and bfloat16 compute in
    float32; their mean and rstd are rounded to ``a``'s dtype on the CPU as torch's CPU kernel
    returns them (its backward reads those), float32 elsewhere and with float32 parameters."""
    dims = _norm_dims(a, normalized_shape)
    compute = opmath(a.dtype)
    x = to_dtype(a, compute)
    var, mean = prims.var_mean(x, dims, correction=0)
    mean = keep_dims(x, mean, dims)
    rstd = keep_dims(x, rsqrt(add(var, eps)), dims)
    out = mul(sub(x, mean), rstd)
    if weight is not None:
        out = mul(out, to_dtype(weight, compute))
    if bias is not None:
        out = add(out, to_dtype(bias, compute))
    mixed = any(p is not None and p.dtype != a.dtype for p in (weight, bias))
    stats = a.dtype if a.device.type == "cpu" and not mixed else compute
    return to_dtype(out, a.dtype), to_dtype(mean, stats), to_dtype(rstd, stats)


def _reciprocal_count(n: Any) -> Any:
    """``1 / n`` for a number of elements normalized together, which may be 0 (the gradient it
    scales is then empty): ``n + 1 // (n + 1)`` is ``n``, or 1 for 0, also for a symbolic one."""
    return 1.0 / (n + 1 // (n + 1))


@torchop(name="layer_norm_backward")
def layer_norm_backward(
    grad_out: TensorProxy,
    a: TensorProxy,
    normalized_shape: Any,
    mean: TensorProxy,
    rstd: TensorProxy,
    weight: Any,
    bias: Any,
) -> tuple[TensorProxy, ...]:
    """The gradients of ``native_layer_norm``: of the input, then of weight and of bias where
    they are given (``torch.ops.aten.native_layer_norm_backward``); float16 and bfloat16 in
    float32, each gradient rounded once to its dtype."""
    compute = opmath(a.dtype)
    like = (a, weight, bias)
    grad_out, a, mean, rstd = (to_dtype(t, compute) for t in (grad_out, a, mean, rstd))
    weight = None if weight is None else to_dtype(weight, compute)
    dims = _norm_dims(a, normalized_shape)
    lead = tuple(range(a.ndim - len(dims)))
    n: Any = 1
    for d in dims:
        n = n * a.shape[d]
    xhat = mul(sub(a, mean), rstd)
    gxhat = grad_out if weight is None else mul(grad_out, weight)
    s1 = sum_(gxhat, dims, keepdim=True)
    s2 = sum_(mul(gxhat, xhat), dims, keepdim=True)
    inner = sub(sub(mul(gxhat, n), s1), mul(xhat, s2))
    ga = mul(mul(rstd, _reciprocal_count(n)), inner)
    outs: list[TensorProxy] = [ga]
    if weight is not None:
        gw = mul(grad_out, xhat)
        outs.append(sum_(gw, lead) if lead else gw)
    if bias is not None:
        outs.append(sum_(grad_out, lead) if lead else grad_out)
    dtypes = [t.dtype for t in like if t is not None]
    return tuple(to_dtype(g, d) for g, d in zip(outs, dtypes))


@torchop(name="gelu_backward")
def gelu_backward(grad_out: TensorProxy, a: TensorProxy, approximate: str = "none") -> TensorProxy:
    """The gradient of ``gelu`` at ``a`` times ``grad_out`` (``torch.ops.aten.gelu_backward``):
    float16/bfloat16 computed in float32, rounded once."""
    result_dtype = a.dtype
    grad_out, a = to_dtype(grad_out, opmath(result_dtype)), to_dtype(a, opmath(result_dtype))
    if approximate == "none":
        cdf = mul(add(erf(mul(a, 1.0 / math.sqrt(2.0))), 1.0), 0.5)
        pdf = mul(exp(mul(mul(a, a), -0.5)), 1.0 / math.sqrt(2.0 * math.pi))
        d = add(cdf, mul(a, pdf))
    else:
        k = math.sqrt(2.0 / math.pi)
        a2 = mul(a, a)
        t = tanh(mul(add(a, mul(mul(a2, a), 0.044715)), k))
        dinner = mul(add(mul(a2, 3.0 * 0.044715), 1.0), k)
        d = add(mul(add(t, 1.0), 0.5), mul(mul(mul(a, 0.5), sub(1.0, mul(t, t))), dinner))
    return to_dtype(mul(grad_out, d), result_dtype)  # type: ignore[no-any-return]


@torchop(name="softmax_backward_data")
def softmax_backward_data(
    grad_out: TensorProxy, output: TensorProxy, dim: int, input_dtype: Any
) -> TensorProxy:
    """The gradient of ``softmax`` from its result (``torch._softmax_backward_data``):
    ``y * (g - sum(g * y, dim))``, float16/bfloat16 in float32, rounded once to
    ``input_dtype``. One kernel in eager, whose reduction order thunder's torch executors keep."""
    compute = opmath(output.dtype)
    g, y = to_dtype(grad_out, compute), to_dtype(output, compute)
    s = sum_(mul(g, y), (dim,), keepdim=True)
    return to_dtype(mul(y, sub(g, s)), input_dtype)  # type: ignore[no-any-return]


@torchop(name="log_softmax_backward_data")
def log_softmax_backward_data(
    grad_out: TensorProxy, output: TensorProxy, dim: int, input_dtype: Any
) -> TensorProxy:
    """The gradient of ``log_softmax`` from its result (``torch._log_softmax_backward_data``):
    ``g - exp(y) * sum(g, dim)``, float16/bfloat16 in float32, rounded once to
    ``input_dtype``."""
    compute = opmath(output.dtype)
    g, y = to_dtype(grad_out, compute), to_dtype(output, compute)
    s = sum_(g, (dim,), keepdim=True)
    return to_dtype(sub(g, mul(exp(y), s)), input_dtype)  # type: ignore[no-any-return]


def _scores(
    q: TensorProxy, k: TensorProxy, is_causal: bool, scale: float, attn_mask: Any = None
) -> TensorProxy:
    from thunder_ir.ops.nn import matmul
    from thunder_ir.ops.nn_attention import _causal_mask

    scores = mul(matmul(q, prims.transpose(k, (0, 1, 3, 2))), scale)
    if is_causal:
        scores = where(_causal_mask(q, k), scores, -math.inf)
    if attn_mask is not None:  # a float mask, added to the scaled scores as torch's kernel does
        scores = add(scores, to_dtype(attn_mask, scores.dtype))
    return scores  # type: ignore[no-any-return]


@torchop(name="sdpa_flash")
def sdpa_flash(
    q: TensorProxy,
    k: TensorProxy,
    v: TensorProxy,
    is_causal: bool,
    scale: float,
    attn_mask: Any = None,
) -> tuple[TensorProxy, TensorProxy]:
    """Attention of 4-D ``q, k, v`` (same heads, or key and value heads grouped: ``enable_gqa``; no dropout, an optional float ``attn_mask`` of
    2 or 4 dims; float16/bfloat16 computed in float32, the output rounded, logsumexp float32)
    returning ``(out, logsumexp)``, logsumexp over the keys of the scaled (masked) scores
    (``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu``). A query the mask leaves
    nothing to attend to gets zeros and a logsumexp of 0, as torch's kernel gives."""
    from thunder_ir.ops.nn import matmul

    dtype = q.dtype
    q, k, v = (to_dtype(t, opmath(dtype)) for t in (q, k, v))  # float16/bfloat16: in float32
    k, v = _heads_for_query(q, k), _heads_for_query(q, v)
    scores = _scores(q, k, is_causal, scale, attn_mask)
    m = amax_(scores, 3)
    if attn_mask is not None:
        m = where(prims.eq(m, -math.inf), 0.0, m)
    lse = add(log(sum_(exp(sub(scores, keep_dims(scores, m, (3,)))), 3)), m)
    if attn_mask is not None:
        lse = where(prims.eq(lse, -math.inf), 0.0, lse)
    weights = exp(sub(scores, keep_dims(scores, lse, (3,))))
    return to_dtype(matmul(weights, v), dtype), lse


@torchop(name="sdpa_flash_backward")
def sdpa_flash_backward(
    grad_out: TensorProxy,
    q: TensorProxy,
    k: TensorProxy,
    v: TensorProxy,
    out: TensorProxy,
    lse: TensorProxy,
    is_causal: bool,
    scale: float,
    attn_mask: Any = None,
) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    """The gradients of ``sdpa_flash`` for q, k and v
    (``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward``)."""
    from thunder_ir.ops.nn import matmul

    dtype, compute = q.dtype, opmath(q.dtype)
    grad_out, q, k, v, out = (to_dtype(t, compute) for t in (grad_out, q, k, v, out))
    k_heads = k.shape[1]
    k, v = _heads_for_query(q, k), _heads_for_query(q, v)
    perm = (0, 1, 3, 2)
    scores = _scores(q, k, is_causal, scale, attn_mask)
    weights = exp(sub(scores, keep_dims(scores, lse, (3,))))
    gv = matmul(prims.transpose(weights, perm), grad_out)
    gw = matmul(grad_out, prims.transpose(v, perm))
    d = sum_(mul(grad_out, out), 3, keepdim=True)
    gs = mul(mul(weights, sub(gw, d)), scale)
    gq = matmul(gs, k)
    gk = matmul(prims.transpose(gs, perm), q)
    # grouped heads: each key/value head's gradient summed over its group in float32
    gk, gv = _summed_over_groups(gk, k_heads), _summed_over_groups(gv, k_heads)
    return to_dtype(gq, dtype), to_dtype(gk, dtype), to_dtype(gv, dtype)


def _heads_for_query(q: TensorProxy, kv: TensorProxy) -> TensorProxy:
    """Key or value of fewer heads than the query (``enable_gqa``) with each head repeated for
    its group of query heads."""
    from thunder_ir.ops.nn_attention import _repeat_heads

    return _repeat_heads(kv, q.shape[1] // kv.shape[1])


def _summed_over_groups(g: TensorProxy, heads: Any) -> TensorProxy:
    if g.shape[1] == heads:
        return g
    b, hq, s, e = g.shape
    return sum_(prims.reshape(g, (b, heads, hq // heads, s, e)), 2)  # type: ignore[no-any-return]


# Convolution ---------------------------------------------------------------------------------
# The two gradients of ``prims.convolution`` are separate ops, so that one nobody needs (the
# input's, for a model's first layer) is dropped as eager's autograd drops it. Stride, padding,
# dilation and output_padding are given per spatial dimension.


@torchop(name="convolution_backward_input")
def convolution_backward_input(
    grad_out: TensorProxy,
    a: TensorProxy,
    w: TensorProxy,
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    transposed: bool,
    output_padding: tuple[int, ...],
    groups: int,
) -> TensorProxy:
    """The gradient of ``prims.convolution(a, w, ...)`` for ``a``
    (``torch.ops.aten.convolution_backward``'s first output)."""
    nd = w.ndim - 2
    if transposed:
        # A transposed convolution is the adjoint of the direct one with the same weight. An
        # output_padding of at least the stride (allowed below the dilation) adds rows past the
        # input's: the direct convolution then gives more, which no input element produced.
        grad = prims.convolution(
            grad_out, w, None, stride, padding, dilation, False, (0,) * nd, groups
        )
        if any(not isinstance(s, int) or s != n for s, n in zip(grad.shape, a.shape)):
            grad = prims.slice_prim(grad, [0] * (nd + 2), list(a.shape), [1] * (nd + 2))
        return grad  # type: ignore[no-any-return]
    # The transposed convolution; output_padding restores the rows the forward's stride dropped.
    kernel = w.shape[2:]
    restored = tuple(
        a.shape[i + 2]
        - (
            (grad_out.shape[i + 2] - 1) * stride[i]
            - 2 * padding[i]
            + dilation[i] * (kernel[i] - 1)
            + 1
        )
        for i in range(nd)
    )
    return prims.convolution(  # type: ignore[no-any-return]
        grad_out, w, None, stride, padding, dilation, True, restored, groups
    )


@torchop(name="convolution_backward_weight")
def convolution_backward_weight(
    grad_out: TensorProxy,
    a: TensorProxy,
    w: TensorProxy,
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    transposed: bool,
    output_padding: tuple[int, ...],
    groups: int,
    bias: bool = False,
) -> Any:
    """The gradient of ``prims.convolution(a, w, ...)`` for ``w``
    (``torch.ops.aten.convolution_backward``'s second output), and with ``bias`` the bias's too
    (its third): torch's float32 CPU kernels sum the bias's gradient in their own order, in the
    call that computes the weight's."""
    kernel = w.shape[2:]
    if transposed:
        gw = _conv_weight_grad(grad_out, a, kernel, stride, padding, dilation, groups)
    else:
        gw = _conv_weight_grad(a, grad_out, kernel, stride, padding, dilation, groups)
    if not bias:
        return gw
    return gw, prims.sum(grad_out, (0, *range(2, grad_out.ndim)))


def _conv_weight_grad(
    inp: TensorProxy,
    gout: TensorProxy,
    kernel: tuple[Any, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    groups: int,
) -> TensorProxy:
    """The weight gradient of ``conv(inp, w)`` given the output's gradient ``gout``: itself a
    convolution of the input with the output gradient as kernel (batch as channels, stride and
    dilation swapped), groups folded into the batch dimension."""
    nd = len(kernel)
    n, c_in = inp.shape[0], inp.shape[1]
    c_out = gout.shape[1]
    ci, co = c_in // groups, c_out // groups
    sp = tuple(range(3, 3 + nd))
    x = prims.reshape(inp, (n, groups, ci, *inp.shape[2:]))
    x = prims.reshape(prims.transpose(x, (2, 1, 0, *sp)), (ci, groups * n, *inp.shape[2:]))
    k = prims.reshape(gout, (n, groups, co, *gout.shape[2:]))
    k = prims.reshape(prims.transpose(k, (1, 2, 0, *sp)), (groups * co, n, *gout.shape[2:]))
    out = prims.convolution(x, k, None, dilation, padding, stride, False, (0,) * nd, groups)
    if any(not isinstance(s, int) or s != kk for s, kk in zip(out.shape[2:], kernel)):
        out = prims.slice_prim(out, [0] * (nd + 2), [ci, groups * co, *kernel], [1] * (nd + 2))
    return prims.transpose(out, (1, 0, *range(2, nd + 2)))  # type: ignore[no-any-return]


# Class-index losses ----------------------------------------------------------------------------


@torchop(name="nll_loss_total_weight")
def nll_loss_total_weight(
    a: TensorProxy, target: TensorProxy, weight: TensorProxy, ignore_index: int
) -> TensorProxy:
    """What eager's ``nll_loss`` divides a "mean" by, in ``a``'s dtype: the weights of the
    targets not ignored, summed (``torch.ops.aten.nll_loss_forward``'s second output, whose CPU
    kernel sums them in ``a``'s dtype, block by block; here in float32, rounded once).
    ``a`` is the loss's input, of class dimension 0 when 1-D, else 1."""
    from thunder_ir import dtypes

    t = to_dtype(target, dtypes.int64)
    keep = prims.ne(t, ignore_index)
    picked = prims.take(to_dtype(weight, dtypes.float32), prims.where(keep, t, 0))
    total = prims.sum(prims.where(keep, picked, 0.0), tuple(range(t.ndim)))
    return to_dtype(total, a.dtype)  # type: ignore[no-any-return]


# Embedding -----------------------------------------------------------------------------------


@torchop(name="embedding_backward")
def embedding_backward(
    grad_out: TensorProxy,
    indices: TensorProxy,
    num_weights: Any,
    padding_idx: int,
    scale_grad_by_freq: bool,
) -> TensorProxy:
    """The gradient of an embedding's weight: each row of ``grad_out`` summed into the row its
    index names, none into ``padding_idx`` (-1: none), divided by how often the index occurs
    when ``scale_grad_by_freq`` (``torch.ops.aten.embedding_dense_backward``)."""
    lead = tuple(range(indices.ndim))
    if padding_idx >= 0:
        is_pad = prims.broadcast_in_dim(prims.eq(indices, padding_idx), grad_out.shape, lead)
        grad_out = prims.where(is_pad, 0.0, grad_out)
    if scale_grad_by_freq:
        ones = prims.full(indices.shape, 1.0, device=grad_out.device, dtype=grad_out.dtype)
        counts = _rows_summed(num_weights, (), indices, ones)
        flat = prims.reshape(indices, (indices.numel(),))
        per_position = prims.reshape(prims.index_select(counts, 0, flat), indices.shape)
        grad_out = prims.div(grad_out, prims.broadcast_in_dim(per_position, grad_out.shape, lead))
    return _rows_summed(num_weights, grad_out.shape[indices.ndim :], indices, grad_out)  # type: ignore[no-any-return]


def _rows_summed(n_rows: Any, rest: tuple[Any, ...], index: TensorProxy, g: TensorProxy) -> Any:
    """``g`` (rows of shape ``rest``, one per entry of ``index``) summed into ``n_rows`` rows."""
    z = prims.full((n_rows, *rest), 0.0, device=g.device, dtype=g.dtype)
    flat = prims.reshape(index, (index.numel(),))
    return prims.index_put(z, [flat], prims.reshape(g, (index.numel(), *rest)), True)


# Batch norm in training ----------------------------------------------------------------------


def _channel_dims(a: TensorProxy) -> tuple[int, ...]:
    return tuple(d for d in range(a.ndim) if d != 1)


def _per_channel(t: TensorProxy, a: TensorProxy) -> TensorProxy:
    """A per-channel vector broadcast against ``a`` (channels in dimension 1)."""
    return prims.broadcast_in_dim(t, a.shape, (1,))  # type: ignore[no-any-return]


@torchop(name="native_batch_norm")
def native_batch_norm(
    a: TensorProxy, weight: Any, bias: Any, eps: float
) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    """Training batch norm of ``a`` (weight and bias of its dtype, or float32 with a
    float16/bfloat16 ``a`` on the CPU) with the batch's statistics, returning ``(out, mean,
    invstd)`` per channel; it reads and writes no running statistics
    (``torch.ops.aten._native_batch_norm_legit.no_stats``). float16 and bfloat16 compute in
    float32; mean and invstd have the parameters' dtype as the CPU kernel returns them."""
    return _batch_normalized(a, weight, bias, eps, (weight, bias))


def _batch_normalized(
    a: TensorProxy, weight: Any, bias: Any, eps: float, params: tuple[Any, ...]
) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    """``native_batch_norm``'s results; mean and invstd of ``a``'s dtype, or float32 where one of
    the kernel's ``params`` has another dtype (its mixed-dtype kernel)."""
    compute = opmath(a.dtype)
    x = to_dtype(a, compute)
    var, mean = prims.var_mean(x, _channel_dims(a), correction=0)
    invstd = rsqrt(add(var, eps))
    out = mul(sub(x, _per_channel(mean, x)), _per_channel(invstd, x))
    if weight is not None:
        out = mul(out, _per_channel(to_dtype(weight, compute), x))
    if bias is not None:
        out = add(out, _per_channel(to_dtype(bias, compute), x))
    mixed = any(p is not None and p.dtype != a.dtype for p in params)
    stats = compute if mixed else a.dtype
    return to_dtype(out, a.dtype), to_dtype(mean, stats), to_dtype(invstd, stats)


@torchop(name="native_batch_norm_updating")
def native_batch_norm_updating(
    a: TensorProxy,
    weight: Any,
    bias: Any,
    running_mean: TensorProxy,
    running_var: TensorProxy,
    momentum: float,
    eps: float,
) -> tuple[TensorProxy, ...]:
    """``native_batch_norm`` that also returns the running statistics updated with the batch's
    (``(out, mean, invstd, running_mean, running_var)``, the last two new tensors, which eager's
    kernel writes in place): ``(1 - momentum) * running + momentum * batch statistic``, the
    variance unbiased; under torch_ops eager's one kernel, with its roundings
    (``torch.ops.aten._native_batch_norm_legit_functional``). No gradient flows through the
    updated statistics."""
    params = (weight, bias, running_mean, running_var)
    out, mean, invstd = _batch_normalized(a, weight, bias, eps, params)
    dims = _channel_dims(a)
    n: Any = 1
    for d in dims:
        n = n * a.shape[d]
    x = prims.stop_gradient(to_dtype(a, opmath(a.dtype)))
    var, batch_mean = prims.var_mean(x, dims, correction=0)
    updated = []
    for running, stat in ((running_mean, batch_mean), (running_var, mul(var, n / (n - 1)))):
        compute = opmath(running.dtype)
        new = add(
            mul(to_dtype(running, compute), 1.0 - momentum), mul(to_dtype(stat, compute), momentum)
        )
        updated.append(to_dtype(new, running.dtype))
    return out, mean, invstd, updated[0], updated[1]


@torchop(name="batch_norm_backward")
def batch_norm_backward(
    grad_out: TensorProxy,
    a: TensorProxy,
    weight: Any,
    mean: TensorProxy,
    invstd: TensorProxy,
    has_bias: bool,
) -> tuple[TensorProxy, ...]:
    """The gradients of ``native_batch_norm``: of the input, then of weight and of bias where
    they are given (``torch.ops.aten.native_batch_norm_backward`` in training); float16 and
    bfloat16 in float32, each gradient rounded once to its dtype."""
    compute = opmath(a.dtype)
    # The statistics have the parameters' dtype (float32 for a mixed call), as the gradients.
    like = [a.dtype, mean.dtype, mean.dtype]
    grad_out, a, mean, invstd = (to_dtype(t, compute) for t in (grad_out, a, mean, invstd))
    weight = None if weight is None else to_dtype(weight, compute)
    dims = _channel_dims(a)
    n: Any = 1
    for d in dims:
        n = n * a.shape[d]
    xhat = mul(sub(a, _per_channel(mean, a)), _per_channel(invstd, a))
    gxhat = grad_out if weight is None else mul(grad_out, _per_channel(weight, a))
    s1 = _per_channel(sum_(gxhat, dims), a)
    s2 = _per_channel(sum_(mul(gxhat, xhat), dims), a)
    inner = sub(sub(mul(gxhat, n), s1), mul(xhat, s2))
    outs: list[TensorProxy] = [mul(mul(_per_channel(invstd, a), _reciprocal_count(n)), inner)]
    if weight is not None:
        outs.append(sum_(mul(grad_out, xhat), dims))
    if has_bias:
        outs.append(sum_(grad_out, dims))
    return tuple(to_dtype(g, d) for g, d in zip(outs, like))


# Group norm ----------------------------------------------------------------------------------


def _grouped(x: TensorProxy, num_groups: Any) -> TensorProxy:
    """``x`` as ``(N, num_groups, elements per group)``."""
    n = x.shape[0]
    per_group = x.numel() // (n * num_groups) if n * num_groups else 0
    return prims.reshape(x, (n, num_groups, per_group))  # type: ignore[no-any-return]


def _ungrouped(t: TensorProxy, a: TensorProxy) -> TensorProxy:
    """Per-group ``(N, G)`` values broadcast against ``a`` (in ``a``'s shape)."""
    g = t.shape[1]
    per_group = prims.broadcast_in_dim(t, _grouped(a, g).shape, (0, 1))
    return prims.reshape(per_group, tuple(a.shape))  # type: ignore[no-any-return]


@torchop(name="native_group_norm")
def native_group_norm(
    a: TensorProxy, weight: Any, bias: Any, num_groups: int, eps: float
) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    """Group norm of ``a`` (weight and bias of its dtype, or float32 with a float16/bfloat16
    ``a`` on the CPU) returning ``(out, mean, rstd)``, mean and rstd of shape ``(N, G)``
    (``torch.ops.aten.native_group_norm``). float16 and bfloat16 compute in float32; mean and
    rstd have the parameters' dtype as the CPU kernel returns them."""
    compute = opmath(a.dtype)
    x = to_dtype(a, compute)
    var, mean = prims.var_mean(_grouped(x, num_groups), (2,), correction=0)
    rstd = rsqrt(add(var, eps))
    out = mul(sub(x, _ungrouped(mean, x)), _ungrouped(rstd, x))
    if weight is not None:
        out = mul(out, _per_channel(to_dtype(weight, compute), x))
    if bias is not None:
        out = add(out, _per_channel(to_dtype(bias, compute), x))
    mixed = any(p is not None and p.dtype != a.dtype for p in (weight, bias))
    stats = compute if mixed else a.dtype
    return to_dtype(out, a.dtype), to_dtype(mean, stats), to_dtype(rstd, stats)


@torchop(name="group_norm_backward")
def group_norm_backward(
    grad_out: TensorProxy,
    a: TensorProxy,
    mean: TensorProxy,
    rstd: TensorProxy,
    weight: Any,
    num_groups: int,
    has_bias: bool,
) -> tuple[TensorProxy, ...]:
    """The gradients of ``native_group_norm``: of the input, then of weight and of bias where
    they are given (``torch.ops.aten.native_group_norm_backward``); float16 and bfloat16 in
    float32, each gradient rounded once to its dtype."""
    compute = opmath(a.dtype)
    like = [a.dtype, mean.dtype, mean.dtype]
    grad_out, a, mean, rstd = (to_dtype(t, compute) for t in (grad_out, a, mean, rstd))
    xhat = mul(sub(a, _ungrouped(mean, a)), _ungrouped(rstd, a))
    gxhat = grad_out
    if weight is not None:
        gxhat = mul(grad_out, _per_channel(to_dtype(weight, compute), a))
    grouped_g, grouped_x = _grouped(gxhat, num_groups), _grouped(xhat, num_groups)
    n: Any = grouped_g.shape[2]
    s1 = sum_(grouped_g, (2,), keepdim=True)
    s2 = sum_(mul(grouped_g, grouped_x), (2,), keepdim=True)
    inner = sub(sub(mul(grouped_g, n), s1), mul(grouped_x, s2))
    rstd_g = prims.broadcast_in_dim(rstd, inner.shape, (0, 1))
    ga = prims.reshape(mul(mul(rstd_g, _reciprocal_count(n)), inner), tuple(a.shape))
    outs: list[TensorProxy] = [ga]
    dims = _channel_dims(a)
    if weight is not None:
        outs.append(sum_(mul(grad_out, xhat), dims))
    if has_bias:
        outs.append(sum_(grad_out, dims))
    return tuple(to_dtype(g, d) for g, d in zip(outs, like))


# Activations ---------------------------------------------------------------------------------
# Each takes the output's gradient and the forward's input (and the forward's parameters), as
# torch's ``aten.<name>_backward``; the decompositions compute in float32 for low-precision
# inputs and round once, as the kernels do.


def _activation_grad(grad_out: TensorProxy, a: TensorProxy, derivative: Any) -> TensorProxy:
    """``grad_out`` times the activation's derivative at ``a`` (``derivative(x, g)`` gives the
    product in the computation dtype)."""
    from thunder_ir.ops._helpers import to_dtype
    from thunder_ir.ops.nn_base import opmath

    compute = opmath(a.dtype)
    out = derivative(to_dtype(a, compute), to_dtype(grad_out, compute))
    return to_dtype(out, a.dtype)  # type: ignore[no-any-return]


def _sigmoid_of(x: TensorProxy) -> TensorProxy:
    return prims.reciprocal(add(exp(prims.neg(x)), 1.0))  # type: ignore[no-any-return]


@torchop(name="hardswish_backward")
def hardswish_backward(grad_out: TensorProxy, a: TensorProxy) -> TensorProxy:
    """``aten.hardswish_backward``: 0 up to -3, ``g * (x / 3 + 0.5)`` strictly between -3 and
    3, ``g`` from 3 on."""

    def d(x: Any, g: Any) -> Any:
        middle = mul(g, add(mul(x, 1.0 / 3.0), 0.5))
        return where(prims.le(x, -3.0), 0.0, where(prims.lt(x, 3.0), middle, g))

    return _activation_grad(grad_out, a, d)


@torchop(name="hardsigmoid_backward")
def hardsigmoid_backward(grad_out: TensorProxy, a: TensorProxy) -> TensorProxy:
    """``aten.hardsigmoid_backward``: ``g / 6`` strictly between -3 and 3, else 0."""

    def d(x: Any, g: Any) -> Any:
        inside = prims.bitwise_and(prims.gt(x, -3.0), prims.lt(x, 3.0))
        return where(inside, mul(g, 1.0 / 6.0), 0.0)

    return _activation_grad(grad_out, a, d)


@torchop(name="hardtanh_backward")
def hardtanh_backward(
    grad_out: TensorProxy, a: TensorProxy, min_val: float, max_val: float
) -> TensorProxy:
    """``aten.hardtanh_backward``: ``g`` strictly between the bounds, else 0 (relu6 too)."""

    def d(x: Any, g: Any) -> Any:
        outside = prims.bitwise_or(prims.le(x, min_val), prims.ge(x, max_val))
        return where(outside, 0.0, g)

    return _activation_grad(grad_out, a, d)


@torchop(name="silu_backward")
def silu_backward(grad_out: TensorProxy, a: TensorProxy) -> TensorProxy:
    """``aten.silu_backward``: ``g * s * (1 + x * (1 - s))`` with ``s = sigmoid(x)``."""

    def d(x: Any, g: Any) -> Any:
        s = _sigmoid_of(x)
        return mul(mul(g, s), add(mul(x, sub(1.0, s)), 1.0))

    return _activation_grad(grad_out, a, d)


@torchop(name="leaky_relu_backward")
def leaky_relu_backward(
    grad_out: TensorProxy, a: TensorProxy, negative_slope: float
) -> TensorProxy:
    """``aten.leaky_relu_backward``: ``g`` where ``x > 0``, else ``g * negative_slope``."""

    def d(x: Any, g: Any) -> Any:
        return where(prims.gt(x, 0.0), g, mul(g, negative_slope))

    return _activation_grad(grad_out, a, d)


@torchop(name="elu_backward")
def elu_backward(grad_out: TensorProxy, a: TensorProxy, alpha: float) -> TensorProxy:
    """``aten.elu_backward`` (scale 1, input scale 1, from the input): ``g * alpha * exp(x)``
    where ``x <= 0``, else ``g``."""

    def d(x: Any, g: Any) -> Any:
        return where(prims.le(x, 0.0), mul(mul(g, alpha), exp(x)), g)

    return _activation_grad(grad_out, a, d)


@torchop(name="elu_backward_from_result")
def elu_backward_from_result(
    grad_out: TensorProxy, result: TensorProxy, alpha: float, scale: float, input_scale: float
) -> TensorProxy:
    """``aten.elu_backward`` from the result (of ``elu_written``): ``g * input_scale * (y + alpha
    * scale)`` where ``y <= 0``, else ``g * scale``."""

    def d(y: Any, g: Any) -> Any:
        return where(
            prims.le(y, 0.0), mul(mul(g, input_scale), add(y, alpha * scale)), mul(g, scale)
        )

    return _activation_grad(grad_out, result, d)


@torchop(name="softplus_backward")
def softplus_backward(
    grad_out: TensorProxy, a: TensorProxy, beta: float, threshold: float
) -> TensorProxy:
    """``aten.softplus_backward``: ``g`` where ``x * beta > threshold``, else
    ``g * z / (z + 1)`` with ``z = exp(x * beta)``."""

    def d(x: Any, g: Any) -> Any:
        z = exp(mul(x, beta))
        return where(prims.gt(mul(x, beta), threshold), g, prims.div(mul(g, z), add(z, 1.0)))

    return _activation_grad(grad_out, a, d)


@torchop(name="mish_backward")
def mish_backward(grad_out: TensorProxy, a: TensorProxy) -> TensorProxy:
    """``aten.mish_backward``: ``g * (t + x * s * (1 - t * t))`` with ``s = sigmoid(x)`` and
    ``t = tanh(softplus(x))``."""

    def d(x: Any, g: Any) -> Any:
        s = _sigmoid_of(x)
        t = tanh(prims.log1p(exp(x)))
        return mul(g, add(t, mul(mul(x, s), sub(1.0, mul(t, t)))))

    return _activation_grad(grad_out, a, d)
