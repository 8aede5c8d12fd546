"""Ops whose backward torch runs as one fused kernel: a forward that also returns what the backward
needs (``native_layer_norm``: the output, mean and rstd) and the backward itself
(``layer_norm_backward``, ``gelu_backward``, ``sdpa_flash_backward``). They mirror no torch callable (autodiff's rules
emit them); their decompositions are the math in prims, so every executor can run them, and the
torch_ops executor runs them with torch's aten kernels."""

from __future__ import annotations

import math
from typing import Any

from thunder_ir import prims
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
    """Layer norm of a float32/float64 ``a`` returning ``(out, mean, rstd)``; mean and rstd keep
    the normalized dimensions as size 1 (torch's ``native_layer_norm``)."""
    dims = _norm_dims(a, normalized_shape)
    var, mean = prims.var_mean(a, dims, correction=0)
    mean = keep_dims(a, mean, dims)
    rstd = keep_dims(a, rsqrt(add(var, eps)), dims)
    out = mul(sub(a, mean), rstd)
    if weight is not None:
        out = mul(out, weight)
    if bias is not None:
        out = add(out, bias)
    return out, mean, rstd


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
    they are given (``torch.ops.aten.native_layer_norm_backward``)."""
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
    ga = mul(mul(rstd, 1.0 / n), inner)
    outs: list[TensorProxy] = [ga]
    if weight is not None:
        gw = mul(grad_out, xhat)
        outs.append(sum_(gw, lead) if lead else gw)
    if bias is not None:
        outs.append(sum_(grad_out, lead) if lead else grad_out)
    return tuple(outs)


@torchop(name="gelu_backward")
def gelu_backward(grad_out: TensorProxy, a: TensorProxy, approximate: str = "none") -> TensorProxy:
    """The gradient of ``gelu`` at ``a`` (float32/float64) times ``grad_out``
    (``torch.ops.aten.gelu_backward``)."""
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
    return mul(grad_out, d)  # type: ignore[no-any-return]


def _scores(q: TensorProxy, k: TensorProxy, is_causal: bool, scale: float) -> TensorProxy:
    from thunder_ir.ops.nn import matmul
    from thunder_ir.ops.nn_attention import _causal_mask

    scores = mul(matmul(q, prims.transpose(k, (0, 1, 3, 2))), scale)
    if is_causal:
        scores = where(_causal_mask(q, k), scores, -math.inf)
    return scores  # type: ignore[no-any-return]


@torchop(name="sdpa_flash")
def sdpa_flash(
    q: TensorProxy, k: TensorProxy, v: TensorProxy, is_causal: bool, scale: float
) -> tuple[TensorProxy, TensorProxy]:
    """Attention of 4-D float32/float64 ``q, k, v`` (same heads, no mask, no dropout) returning
    ``(out, logsumexp)``, logsumexp over the keys of the scaled (masked) scores
    (``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu``)."""
    from thunder_ir.ops.nn import matmul

    scores = _scores(q, k, is_causal, scale)
    m = amax_(scores, 3)
    lse = add(log(sum_(exp(sub(scores, keep_dims(scores, m, (3,)))), 3)), m)
    weights = exp(sub(scores, keep_dims(scores, lse, (3,))))
    return matmul(weights, v), lse


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
) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    """The gradients of ``sdpa_flash`` for q, k and v
    (``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward``)."""
    from thunder_ir.ops.nn import matmul

    perm = (0, 1, 3, 2)
    scores = _scores(q, k, is_causal, scale)
    weights = exp(sub(scores, keep_dims(scores, lse, (3,))))
    gv = matmul(prims.transpose(weights, perm), grad_out)
    gw = matmul(grad_out, prims.transpose(v, perm))
    d = sum_(mul(grad_out, out), 3, keepdim=True)
    gs = mul(mul(weights, sub(gw, d)), scale)
    gq = matmul(gs, k)
    gk = matmul(prims.transpose(gs, perm), q)
    return gq, gk, gv


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
        # A transposed convolution is the adjoint of the direct one with the same weight.
        return prims.convolution(  # type: ignore[no-any-return]
            grad_out, w, None, stride, padding, dilation, False, (0,) * nd, groups
        )
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
) -> TensorProxy:
    """The gradient of ``prims.convolution(a, w, ...)`` for ``w``
    (``torch.ops.aten.convolution_backward``'s second output)."""
    kernel = w.shape[2:]
    if transposed:
        return _conv_weight_grad(grad_out, a, kernel, stride, padding, dilation, groups)
    return _conv_weight_grad(a, grad_out, kernel, stride, padding, dilation, groups)


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
