"""VJP rules whose backward is one op that torch runs as a fused kernel (``layer_norm_backward``,
``gelu_backward`` of ``thunder_ir.ops.nn_backward``): the torch_ops executor calls the aten
kernel, other executors decompose the op into its prims."""

from __future__ import annotations

from thunder_ir import BoundSymbol, TensorProxy, dtypes, prims
from thunder_ir import ops as ltorch
from thunder_transforms.autodiff.registry import GradPairs, bound_arguments, register_vjp

__all__: list[str] = []


@register_vjp(ltorch.native_layer_norm)
def _native_layer_norm(
    bsym: BoundSymbol,
    g: TensorProxy | None,
    g_mean: TensorProxy | None,
    g_rstd: TensorProxy | None,
) -> GradPairs:
    if g_mean is not None or g_rstd is not None:
        raise NotImplementedError("gradients through native_layer_norm's mean and rstd")
    if g is None:
        return []
    a, shape, weight, bias, _eps = bsym.args
    _out, mean, rstd = bsym.output
    grads = ltorch.layer_norm_backward(g, a, shape, mean, rstd, weight, bias)
    pairs = [(a, grads[0])]
    rest = list(grads[1:])
    if weight is not None:
        pairs.append((weight, rest.pop(0)))
    if bias is not None:
        pairs.append((bias, rest.pop(0)))
    return pairs


@register_vjp(ltorch.gelu)
def _gelu(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    args = bound_arguments(bsym)
    a = args["a"]
    if a.dtype in (dtypes.float32, dtypes.float64):
        return [(a, ltorch.gelu_backward(g, a, args["approximate"]))]
    # Low precision: computed in float32 and rounded once, as the forward.
    x = prims.convert_element_type(a, dtypes.float32)
    gx = ltorch.gelu_backward(prims.convert_element_type(g, dtypes.float32), x, args["approximate"])
    return [(a, prims.convert_element_type(gx, a.dtype))]


@register_vjp(ltorch.sdpa_flash)
def _sdpa_flash(bsym: BoundSymbol, g: TensorProxy | None, g_lse: TensorProxy | None) -> GradPairs:
    if g_lse is not None:
        raise NotImplementedError("gradients through sdpa_flash's logsumexp")
    if g is None:
        return []
    q, k, v, is_causal, scale = bsym.args
    out, lse = bsym.output
    gq, gk, gv = ltorch.sdpa_flash_backward(g, q, k, v, out, lse, is_causal, scale)
    return [(q, gq), (k, gk), (v, gv)]


@register_vjp(ltorch.native_dropout)
def _native_dropout(
    bsym: BoundSymbol, g: TensorProxy | None, g_mask: TensorProxy | None
) -> GradPairs:
    # The forward's mask, saved: the backward never draws (torch's derivative of native_dropout).
    if g is None:
        return []
    args = bound_arguments(bsym)
    p, train = args["p"], args["train"]
    scale = 1.0 if train is False or train is None else (0.0 if p == 1 else 1.0 / (1.0 - p))
    return [(args["a"], ltorch.native_dropout_backward(g, bsym.output[1], scale))]
