"""Loss functions. cross_entropy is log_softmax followed by nll_loss (both ops, so an executor may
claim either), plus torch's label-smoothing and class-probability variants."""

from __future__ import annotations

from typing import Any

from thunder_ir import dtypes, prims
from thunder_ir.dtypes import DType
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.ops._helpers import broadcast, to_dtype
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.elementwise_binary import _check_sub_bool, bitwise_and, true_divide
from thunder_ir.ops.nn_activations import log_softmax, logsigmoid
from thunder_ir.ops.nn_base import (
    abs_,
    add,
    apply_reduction,
    clamp,
    div,
    eq,
    exp,
    ge,
    le,
    log,
    log1p,
    lt,
    mul,
    ne,
    neg,
    opmath,
    pow_,
    reduction_arg,
    require_tensor,
    sub,
    sum_,
    unsqueeze_to,
    where,
)
from thunder_ir.ops.reductions import all as all_
from thunder_ir.proxies import TensorProxy
from thunder_ir.tracectx import get_tracectx
from thunder_ir.utils import check, result_type


def _check_class_target(input: TensorProxy, target: TensorProxy) -> None:
    check(input.ndim >= 1, lambda: f"Expected 1 or more dimensions (got {input.ndim})", ValueError)
    check(
        target.dtype in (dtypes.int64, dtypes.uint8),
        lambda: f"expected target dtype to be Long or Byte, but got {_torch_name(target.dtype)}",
    )
    if input.ndim == 1:
        check(
            target.ndim == 0,
            lambda: (
                f"0D or 1D target tensor expected, multi-target not supported (got target of shape {list(target.shape)})"
            ),
        )
        return
    check(
        input.shape[0] == target.shape[0],
        lambda: (
            f"Expected input batch_size ({input.shape[0]}) to match target batch_size ({target.shape[0]})."
        ),
        ValueError,
    )
    expected = (input.shape[0], *input.shape[2:])
    check(
        tuple(target.shape) == expected,
        lambda: f"Expected target size {list(expected)}, got {list(target.shape)}",
    )


_TORCH_NAMES: dict[str, str] = {
    "int32": "Int",
    "int64": "Long",
    "float32": "Float",
    "float64": "Double",
    "bfloat16": "BFloat16",
    "float16": "Half",
    "bool8": "Bool",
    "int16": "Short",
    "int8": "Char",
}


def _torch_name(d: DType) -> str:
    return _TORCH_NAMES.get(d.name, d.name)


def _not_differentiable(kernel: str, name: str, t: Any) -> None:
    """Eager's autograd refuses a weight that requires grad where the loss's kernel has no
    derivative for it (class weights of ``nll_loss``, sample weights of the binary losses), in
    grad mode: the gradient thunder's decomposition would give it is none eager computes."""
    import torch

    # The trace's regions say what the program switched itself; torch's mode is the caller's
    # (part of the cache key; tracing runs under it).
    trace = get_tracectx()
    grad_mode = torch.is_grad_enabled() and (trace is None or trace.grad_enabled)
    check(
        not (grad_mode and isinstance(t, TensorProxy) and t.requires_grad),
        lambda: (
            f"The function '{kernel}' is not differentiable with respect to argument '{name}'. "
            "This input cannot have requires_grad True."
        ),
    )


def _nll_kernel(a: TensorProxy) -> str:
    """The aten kernel eager's class-index losses call: 2-d targets and more go through
    ``nll_loss2d``."""
    return "nll_loss_forward" if a.ndim <= 2 else "nll_loss2d_forward"


def _check_weight(weight: Any, n_classes: Any) -> None:
    if weight is not None:
        require_tensor(weight, "nll_loss", "weight")
        check(
            weight.ndim == 1 and weight.shape[0] == n_classes,
            lambda: (
                f"weight tensor should be defined either for all {n_classes} classes or no classes but got weight tensor of shape: {list(weight.shape)}"
            ),
        )


@torchop("torch.nn.functional.nll_loss")
def nll_loss(
    a: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
) -> Any:
    require_tensor(a, "nll_loss")
    require_tensor(target, "nll_loss", "target")
    reduction = reduction_arg(size_average, reduce, reduction)
    _check_class_target(a, target)
    cd = 0 if a.ndim == 1 else 1
    _check_weight(weight, a.shape[cd])
    _not_differentiable(_nll_kernel(a), "weight", weight)
    check(a.dtype.is_float, lambda: f"\"nll_loss\" not implemented for '{_torch_name(a.dtype)}'")
    compute = opmath(a.dtype)
    t = to_dtype(target, dtypes.int64)
    keep = ne(t, ignore_index)
    safe_t = where(keep, t, 0)
    picked = prims.squeeze(prims.gather(a, cd, prims.unsqueeze(safe_t, cd)), (cd,))
    picked = to_dtype(picked, compute)
    w = (
        to_dtype(keep, compute)
        if weight is None
        else where(keep, prims.take(to_dtype(weight, compute), safe_t), 0.0)
    )
    loss = where(keep, neg(mul(picked, w)), 0.0)
    if reduction == "none":
        return to_dtype(loss, a.dtype)
    total = sum_(loss)
    if reduction == "sum":
        return to_dtype(total, a.dtype)
    return to_dtype(div(total, sum_(w)), a.dtype)


def _class_broadcast(w: TensorProxy, like: TensorProxy, cd: int) -> TensorProxy:
    return unsqueeze_to(w, like.ndim, cd) if like.ndim > 1 else w


@torchop("torch.nn.functional.cross_entropy")
def cross_entropy(
    a: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    ignore_index: int = -100,
    reduce: Any = None,
    reduction: str = "mean",
    label_smoothing: float = 0.0,
) -> Any:
    require_tensor(a, "cross_entropy")
    require_tensor(target, "cross_entropy", "target")
    reduction = reduction_arg(size_average, reduce, reduction)
    check(
        0.0 <= label_smoothing <= 1.0,
        lambda: f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}",
    )
    check(a.ndim >= 1, lambda: f"Expected 1 or more dimensions (got {a.ndim})", ValueError)
    cd = 0 if a.ndim == 1 else 1
    n_classes = a.shape[cd]
    _check_weight(weight, n_classes)
    logp = log_softmax(a, cd)

    if tuple(target.shape) != tuple(a.shape):  # class indices: eager's nll_loss kernel
        _not_differentiable(_nll_kernel(a), "weight", weight)
    if tuple(target.shape) == tuple(a.shape):
        # Class probabilities.
        check(
            target.dtype.is_float,
            lambda: (
                f"Expected floating point type for target with class probabilities, got {_torch_name(target.dtype)}"
            ),
        )
        check(ignore_index < 0, "ignore_index is not supported for floating point target")
        t = target
        if label_smoothing > 0:
            t = add(mul(t, 1 - label_smoothing), label_smoothing / n_classes)
        prod = mul(logp, t)
        if weight is not None:
            prod = mul(prod, _class_broadcast(weight, prod, cd))
        if reduction == "none":
            return neg(sum_(prod, cd))
        total = neg(sum_(prod))
        if reduction == "sum":
            return total
        return div(total, a.numel() // n_classes if n_classes else 0)

    nll = nll_loss(logp, target, weight, None, ignore_index, None, reduction)
    if label_smoothing == 0:
        return nll
    # torch's cross_entropy_loss_label_smoothing.
    keep = ne(target, ignore_index)
    weighted = (
        logp
        if weight is None
        else mul(logp, _class_broadcast(to_dtype(weight, logp.dtype), logp, cd))
    )
    smooth = where(keep, neg(sum_(weighted, cd)), 0.0)
    if reduction == "mean":
        if weight is None:
            smooth = div(sum_(smooth), sum_(to_dtype(keep, dtypes.int64)))
        else:
            safe_t = where(keep, to_dtype(target, dtypes.int64), 0)
            smooth = div(
                sum_(smooth),
                sum_(where(keep, prims.take(to_dtype(weight, logp.dtype), safe_t), 0.0)),
            )
    elif reduction == "sum":
        smooth = sum_(smooth)
    return add(mul(nll, 1 - label_smoothing), mul(smooth, label_smoothing / n_classes))


def _pointwise_loss_inputs(op: str, a: Any, target: Any) -> tuple[TensorProxy, TensorProxy]:
    require_tensor(a, op)
    require_tensor(target, op, "target")
    common = result_type(a, target)
    check(
        common.is_inexact,
        lambda: f"\"{op}\" not implemented for '{_torch_name(common)}'",
        UnsupportedOptionError,
    )
    return broadcast(to_dtype(a, common), to_dtype(target, common))  # type: ignore[return-value]


def _weighted(loss: TensorProxy, weight: Any, a: TensorProxy, reduction: str) -> TensorProxy:
    if weight is None:
        return apply_reduction(loss, reduction)
    require_tensor(weight, "loss", "weight")
    check(
        tuple(weight.shape) == tuple(a.shape),
        "Weights and input must have the same size.",
        ValueError,
    )
    loss = mul(loss, weight)
    if reduction == "mean":
        # the op, whose gradient follows eager's formula (float16/bfloat16: rounded per op)
        return true_divide(sum_(loss), sum_(weight))  # type: ignore[no-any-return]
    return apply_reduction(loss, reduction)


@torchop("torch.nn.functional.mse_loss")
def mse_loss(
    a: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> Any:
    reduction = reduction_arg(size_average, reduce, reduction)
    x, t = _pointwise_loss_inputs("mse_cpu", a, target)
    # pow, as eager's weighted loss: its gradient g * (2 * d) rounds once (the products of d * d
    # each round, their sum then differs at subnormals)
    return _weighted(pow_(sub(x, t), 2), weight, a, reduction)


@torchop("torch.nn.functional.l1_loss")
def l1_loss(
    a: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    weight: Any = None,
) -> Any:
    reduction = reduction_arg(size_average, reduce, reduction)
    _check_sub_bool(a, target)  # eager subtracts the two first
    x, t = _pointwise_loss_inputs("abs_cpu", a, target)
    return _weighted(abs_(sub(x, t)), weight, a, reduction)


@torchop("torch.nn.functional.smooth_l1_loss")
def smooth_l1_loss(
    a: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    beta: float = 1.0,
) -> Any:
    reduction = reduction_arg(size_average, reduce, reduction)
    check(beta >= 0, "smooth_l1_loss does not support negative values for beta.")
    x, t = _pointwise_loss_inputs("smooth_l1_cpu", a, target)
    z = abs_(sub(x, t))
    if beta == 0:
        return apply_reduction(z, reduction)
    loss = where(lt(z, beta), div(mul(mul(z, z), 0.5), beta), sub(z, 0.5 * beta))
    return apply_reduction(loss, reduction)


@torchop("torch.nn.functional.huber_loss")
def huber_loss(
    a: Any, target: Any, reduction: str = "mean", delta: float = 1.0, weight: Any = None
) -> Any:
    reduction = reduction_arg(None, None, reduction)
    check(delta > 0, "huber_loss does not support non-positive values for delta.")
    if weight is not None:
        # eager's Python: the unweighted loss (its kernel) times the weight, a plain mean
        require_tensor(weight, "loss", "weight")
        check(
            tuple(weight.shape) == tuple(a.shape),
            "Weights and input must have the same size.",
            ValueError,
        )
        return apply_reduction(mul(huber_loss(a, target, "none", delta), weight), reduction)
    x, t = _pointwise_loss_inputs("huber_cpu", a, target)
    z = abs_(sub(x, t))
    loss = where(lt(z, delta), mul(mul(z, z), 0.5), mul(sub(z, 0.5 * delta), delta))
    return apply_reduction(loss, reduction)


def _check_in_unit_interval(x: TensorProxy, what: str) -> None:
    inside = bitwise_and(ge(x, 0.0), le(x, 1.0))
    prims.check_values(all_(inside), f"all elements of {what} should be between 0 and 1")


@torchop("torch.nn.functional.binary_cross_entropy")
def binary_cross_entropy(
    a: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
) -> Any:
    require_tensor(a, "binary_cross_entropy")
    require_tensor(target, "binary_cross_entropy", "target")
    reduction = reduction_arg(size_average, reduce, reduction)
    check(
        tuple(target.shape) == tuple(a.shape),
        lambda: (
            f"Using a target size (torch.Size({list(target.shape)})) that is different to the input size (torch.Size({list(a.shape)})) is deprecated. Please ensure they have the same size."
        ),
        ValueError,
    )
    # torch's kernel takes no target of another dtype (it does not promote), then no int input
    check(
        target.dtype == a.dtype,
        lambda: f"Found dtype {_torch_name(target.dtype)} but expected {_torch_name(a.dtype)}",
    )
    check(
        a.dtype.is_float,
        lambda: f"\"binary_cross_entropy\" not implemented for '{_torch_name(a.dtype)}'",
        UnsupportedOptionError,
    )
    _not_differentiable("binary_cross_entropy", "weight", weight)
    # eager's kernel refuses values outside [0, 1] (NaN too): without the check, a NaN loss
    _check_in_unit_interval(a, "input")
    _check_in_unit_interval(target, "target")
    # Eager's kernel, each op in the input's dtype (float16/bfloat16 rounded after each):
    # (t - 1) * max(log1p(-x), -100) - t * max(log(x), -100); the clamp keeps 0 * log(0) finite.
    log_x = clamp(log(a), -100.0)
    log_1mx = clamp(log1p(neg(a)), -100.0)
    loss = sub(mul(sub(target, 1), log_1mx), mul(target, log_x))
    if weight is not None:
        loss = to_dtype(mul(loss, weight), a.dtype)  # in place, as eager's ``loss.mul_(weight)``
    return apply_reduction(loss, reduction)


@torchop("torch.nn.functional.binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(
    a: Any,
    target: Any,
    weight: Any = None,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    pos_weight: Any = None,
) -> Any:
    require_tensor(a, "binary_cross_entropy_with_logits")
    require_tensor(target, "binary_cross_entropy_with_logits", "target")
    reduction = reduction_arg(size_average, reduce, reduction)
    check(
        tuple(target.shape) == tuple(a.shape),
        lambda: (
            f"Target size (torch.Size({list(target.shape)})) must be the same as input size (torch.Size({list(a.shape)}))"
        ),
        ValueError,
    )
    _not_differentiable("binary_cross_entropy_with_logits", "weight", weight)
    _not_differentiable("binary_cross_entropy_with_logits", "pos_weight", pos_weight)
    log_sig = logsigmoid(a)
    if pos_weight is not None:
        log_sig = mul(log_sig, add(mul(sub(pos_weight, 1), target), 1))
    loss = sub(mul(sub(1, target), a), log_sig)
    if weight is not None:
        loss = mul(loss, weight)
    return apply_reduction(loss, reduction)


@torchop("torch.nn.functional.kl_div")
def kl_div(
    a: Any,
    target: Any,
    size_average: Any = None,
    reduce: Any = None,
    reduction: str = "mean",
    log_target: bool = False,
) -> Any:
    require_tensor(a, "kl_div")
    require_tensor(target, "kl_div", "target")
    if reduction != "batchmean" or size_average is not None or reduce is not None:
        reduction = reduction_arg(size_average, reduce, reduction)
    check(not (a.dtype.is_exact or target.dtype.is_exact), "kl_div: Integral inputs not supported.")
    x, t = _pointwise_loss_inputs("kl_div", a, target)
    # the terms of the target alone are computed in its dtype, as eager (rounded in bfloat16)
    common = t.dtype
    if log_target:
        loss = mul(to_dtype(exp(target), common), sub(t, x))
    else:
        # xlogy(t, t) - t * x, with 0 * log(0) = 0.
        xlogy = where(eq(target, 0), 0.0, mul(target, log(target)))
        loss = sub(to_dtype(xlogy, common), mul(t, x))
    if reduction == "batchmean":
        total = sum_(loss)
        return div(total, a.shape[0]) if a.ndim else total
    return apply_reduction(loss, reduction)
