"""VJP rules whose backward is one op that torch runs as a fused kernel (``layer_norm_backward``,
``gelu_backward`` of ``thunder_ir.ops.nn_backward``, ``max_pool_with_indices_backward`` of
``thunder_ir.ops.nn_conv``): the torch_ops executor calls the aten kernel, other executors
decompose the op into its prims."""

from __future__ import annotations

from typing import Any

from thunder_ir import BoundSymbol, TensorProxy, dtypes, prims
from thunder_ir import ops as ltorch
from thunder_ir.ops.nn_conv import pool_params
from thunder_transforms.autodiff.registry import GradPairs, bound_arguments, register_vjp

__all__: list[str] = []


def _affine_pairs(grads: Any, a: TensorProxy, weight: Any, bias: Any) -> GradPairs:
    """A normalization's gradients (the input's, then weight's and bias's where given) paired
    with what they are the gradients of."""
    pairs = [(a, grads[0])]
    rest = list(grads[1:])
    if weight is not None:
        pairs.append((weight, rest.pop(0)))
    if bias is not None:
        pairs.append((bias, rest.pop(0)))
    return pairs


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
    return _affine_pairs(grads, a, weight, bias)


@register_vjp(ltorch.native_group_norm)
def _native_group_norm(
    bsym: BoundSymbol, g: TensorProxy | None, *stats: TensorProxy | None
) -> GradPairs:
    if any(s is not None for s in stats):
        raise NotImplementedError("gradients through native_group_norm's mean and rstd")
    if g is None:
        return []
    a, weight, bias, num_groups, _eps = bsym.args
    _out, mean, rstd = bsym.output
    if weight is None and bias is not None and not bias.requires_grad:
        # Eager's kernel raises for a bias's gradient without a weight: asked only where the
        # bias requires grad (its raise then eager's, in the backward).
        bias = None
    grads = ltorch.group_norm_backward(g, a, mean, rstd, weight, num_groups, bias is not None)
    return _affine_pairs(grads, a, weight, bias)


@register_vjp(ltorch.gelu)
def _gelu(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    args = bound_arguments(bsym)
    a = args["a"]
    if a.dtype in (dtypes.float32, dtypes.float64) or g.dtype == a.dtype:
        # eager's kernel on eager's dtypes: torch's CPU float16 kernel is not its float32 one
        # rounded (the sign of an underflowed zero), its decomposition computes in float32
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
    args = bound_arguments(bsym)
    q, k, v, mask = args["q"], args["k"], args["v"], args["attn_mask"]
    out, lse = bsym.output
    rest = (args["is_causal"], args["scale"], *(() if mask is None else (mask,)))
    gq, gk, gv = ltorch.sdpa_flash_backward(g, q, k, v, out, lse, *rest)
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


_MAX_POOL_DIMS = {ltorch.max_pool1d: 1, ltorch.max_pool2d: 2, ltorch.max_pool3d: 3}


@register_vjp(ltorch.max_pool1d, ltorch.max_pool2d, ltorch.max_pool3d)
def _max_pool(
    bsym: BoundSymbol, g: TensorProxy | None, g_indices: TensorProxy | None = None
) -> GradPairs:
    # Each output's gradient goes to the one input torch's kernel picks (the first maximum of its
    # window, a NaN over numbers), never split among ties as the decomposition's ``maximum``
    # would. The forward stays the plain pooling; the indices are computed again here from the
    # saved input (torch's ``max_pool*d_with_indices`` under torch_ops), unless it returned them.
    if g is None:
        return []
    args = bound_arguments(bsym)
    a, ceil_mode = args["a"], bool(args["ceil_mode"])
    params = pool_params(
        _MAX_POOL_DIMS[bsym.sym],
        args["kernel_size"],
        args["stride"],
        args["padding"],
        args["dilation"],
    )
    if args["return_indices"]:
        indices = bsym.output[1]
    else:
        indices = ltorch.max_pool_with_indices(a, *params, ceil_mode)[1]
    return [(a, ltorch.max_pool_with_indices_backward(g, a, *params, ceil_mode, indices))]


@register_vjp(ltorch.max_pool_with_indices)
def _max_pool_with_indices(
    bsym: BoundSymbol, g: TensorProxy | None, g_indices: TensorProxy | None
) -> GradPairs:
    if g is None:
        return []
    a, kernel_size, stride, padding, dilation, ceil_mode = bsym.args
    grad = ltorch.max_pool_with_indices_backward(
        g, a, kernel_size, stride, padding, dilation, ceil_mode, bsym.output[1]
    )
    return [(a, grad)]


@register_vjp(ltorch.native_batch_norm, ltorch.native_batch_norm_updating)
def _native_batch_norm(
    bsym: BoundSymbol, g: TensorProxy | None, *stats: TensorProxy | None
) -> GradPairs:
    if any(s is not None for s in stats):
        raise NotImplementedError("gradients through native_batch_norm's statistics")
    if g is None:
        return []
    a, weight, bias = bsym.args[:3]
    _out, mean, invstd = bsym.output[:3]
    grads = ltorch.batch_norm_backward(g, a, weight, mean, invstd, bias is not None)
    return _affine_pairs(grads, a, weight, bias)


# Activations kept whole in the forward, their gradients one op each (eager's backward kernel
# under torch_ops). A call given ``inplace=True`` writes its input inside the op: it is
# differentiated through its decomposition instead, the op out of place (or ``elu_written``)
# then a write.


def _not_in_place(bsym: BoundSymbol) -> bool:
    return not bound_arguments(bsym).get("inplace", False)


def _activation(backward: Any, *params: str) -> Any:
    def rule(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
        args = bound_arguments(bsym)
        a = args["a"]
        return [(a, backward(g, a, *(args[p] for p in params)))]

    return rule


_ACTIVATIONS = (
    (ltorch.hardswish, ltorch.hardswish_backward, ()),
    (ltorch.hardsigmoid, ltorch.hardsigmoid_backward, ()),
    (ltorch.hardtanh, ltorch.hardtanh_backward, ("min_val", "max_val")),
    (ltorch.silu, ltorch.silu_backward, ()),
    (ltorch.leaky_relu, ltorch.leaky_relu_backward, ("negative_slope",)),
    (ltorch.elu, ltorch.elu_backward, ("alpha",)),
    (ltorch.softplus, ltorch.softplus_backward, ("beta", "threshold")),
    (ltorch.mish, ltorch.mish_backward, ()),
)
for _op, _backward, _params in _ACTIVATIONS:
    register_vjp(_op, applies=_not_in_place)(_activation(_backward, *_params))


@register_vjp(ltorch.elu_written)
def _elu_written(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # An inplace=True call of elu, celu or selu: eager's gradient is from the result it wrote.
    a, alpha, scale, input_scale = bsym.args
    return [(a, ltorch.elu_backward_from_result(g, bsym.output, alpha, scale, input_scale))]


@register_vjp(ltorch.relu6, applies=_not_in_place)
def _relu6(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a = bound_arguments(bsym)["a"]
    return [(a, ltorch.hardtanh_backward(g, a, 0.0, 6.0))]
