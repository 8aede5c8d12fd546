"""VJP rules of matmul, linear, convolution and embedding, and of the composite ops whose own rule
is cheaper than differentiating their decomposition (softmax, log_softmax, embedding with
``padding_idx``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder_ir import BoundSymbol, TensorProxy, prims
from thunder_ir import ops as ltorch
from thunder_transforms.autodiff.registry import (
    GradPairs,
    bound_arguments,
    expand_reduced,
    register_vjp,
    sum_to_shape,
)
from thunder_transforms.autodiff.rules_shape import _reshape_to

__all__: list[str] = []

P = prims


def _mT(x: TensorProxy) -> TensorProxy:
    perm = (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2)
    return P.transpose(x, perm)  # type: ignore[no-any-return]


@register_vjp(P.matmul)
def _matmul(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, b = bsym.args
    if a.ndim == 1 and b.ndim == 1:
        return [
            (a, P.mul(P.broadcast_in_dim(g, a.shape, ()), b)),
            (b, P.mul(P.broadcast_in_dim(g, b.shape, ()), a)),
        ]
    a2 = a if a.ndim > 1 else P.unsqueeze(a, 0)
    b2 = b if b.ndim > 1 else P.unsqueeze(b, 1)
    g2 = g
    if a.ndim == 1:
        g2 = P.unsqueeze(g2, g2.ndim - 1)
    if b.ndim == 1:
        g2 = P.unsqueeze(g2, g2.ndim)
    ga = _reshape_to(sum_to_shape(P.matmul(g2, _mT(b2)), a2.shape), a.shape)
    gb = _reshape_to(sum_to_shape(P.matmul(_mT(a2), g2), b2.shape), b.shape)
    return [(a, ga), (b, gb)]


@register_vjp(P.linear)
def _linear(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, w, bias = bsym.args
    pairs: list[tuple[Any, Any]] = []
    if bias is not None:
        pairs.append((bias, sum_to_shape(g, bias.shape)))
    if w.ndim == 1:  # a @ w: the last dimension of a is contracted away
        lead = tuple(range(a.ndim - 1))
        g_full = P.broadcast_in_dim(g, a.shape, lead)
        pairs.append((a, P.mul(g_full, P.broadcast_in_dim(w, a.shape, (a.ndim - 1,)))))
        prod = P.mul(g_full, a)
        pairs.append((w, P.sum(prod, lead) if lead else prod))
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


def _per_dim(x: Sequence[int], nd: int) -> tuple[int, ...]:
    return tuple(x) * nd if len(x) == 1 else tuple(x)


@register_vjp(P.convolution)
def _convolution(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, w, bias, stride, padding, dilation, transposed, output_padding, groups = bsym.args
    nd = w.ndim - 2
    per_dim = tuple(_per_dim(x, nd) for x in (stride, padding, dilation, output_padding))
    stride, padding, dilation, output_padding = per_dim
    pairs: list[tuple[Any, Any]] = []
    if bias is not None:
        pairs.append((bias, P.sum(g, (0, *range(2, g.ndim)))))
    # Two ops, as eager's convolution_backward with an output mask: the gradient of an input
    # that needs none (a model's first layer) is dropped with its op.
    args = (g, a, w, stride, padding, dilation, transposed, output_padding, groups)
    pairs.append((a, ltorch.convolution_backward_input(*args)))
    pairs.append((w, ltorch.convolution_backward_weight(*args)))
    return pairs


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
    d = _softmax_dim(bsym, y.ndim)
    s = expand_reduced(P.sum(P.mul(g, y), (d,)), y.shape, (d,))
    ga = P.mul(y, P.sub(g, s))
    return [(a, ga if ga.dtype == a.dtype else P.convert_element_type(ga, a.dtype))]


@register_vjp(ltorch.log_softmax)
def _log_softmax(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, y = bsym.args[0], bsym.output
    if y.ndim == 0:
        return [(a, P.convert_element_type(P.mul(g, 0.0), a.dtype))]
    d = _softmax_dim(bsym, y.ndim)
    s = expand_reduced(P.sum(g, (d,)), y.shape, (d,))
    ga = P.sub(g, P.mul(P.exp(y), s))
    return [(a, ga if ga.dtype == a.dtype else P.convert_element_type(ga, a.dtype))]
