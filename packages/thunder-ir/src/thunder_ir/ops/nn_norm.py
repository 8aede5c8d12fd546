"""Normalization: layer, RMS, group and batch norm, and vector normalization (F.normalize,
cosine similarity). Statistics are computed in float32 for low-precision inputs; the result has the
input's dtype, as torch's kernels give it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from thunder_ir import dtypes, prims
from thunder_ir.ops import reductions
from thunder_ir.ops._helpers import broadcast, to_dtype
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.nn_backward import (
    native_batch_norm,
    native_batch_norm_updating,
    native_group_norm,
    native_layer_norm,
)
from thunder_ir.ops.nn_base import (
    abs_,
    add,
    amax_,
    clamp,
    div,
    expand_reduced,
    keep_dims,
    mean_,
    mul,
    ne,
    not_implemented,
    opmath,
    pow_,
    require_tensor,
    rsqrt,
    sqrt,
    sub,
    sum_,
    unsqueeze_to,
)
from thunder_ir.ops.shape import contiguous, repeat
from thunder_ir.proxies import TensorProxy
from thunder_ir.utils import canonicalize_dim, check, result_type


def _normalized_shape(op: str, a: TensorProxy, normalized_shape: Any) -> tuple[Any, ...]:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k = len(shape)
    check(
        k >= 1,
        "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got normalized_shape = []",
    )
    check(
        a.ndim >= k and tuple(a.shape[a.ndim - k :]) == shape,
        lambda: (
            f"Given normalized_shape={list(shape)}, expected input with shape [*, {', '.join(map(str, shape))}], but got input of size{list(a.shape)}"
        ),
    )
    return shape


def _check_param(p: Any, shape: tuple[Any, ...], what: str) -> None:
    if p is None:
        return
    require_tensor(p, "layer_norm", what)
    check(
        tuple(p.shape) == shape,
        lambda: (
            f"Expected {what} to be of same shape as normalized_shape, but got {what} of shape {list(p.shape)} and normalized_shape = {list(shape)}"
        ),
    )


_C10_NAMES = {
    dtypes.float16: "Half",
    dtypes.bfloat16: "BFloat16",
    dtypes.float32: "Float",
    dtypes.float64: "Double",
}


def _check_cpu_param_dtypes(a: TensorProxy, *params: Any) -> None:
    """Eager's CPU kernels take parameters (weight, bias, running statistics) of the input's
    dtype, or all float32 with a bfloat16/float16 input ("mixed dtype"); the first parameter
    given decides which is meant. Other combinations raise there."""
    if a.device.type != "cpu":
        return
    given = [p for p in params if isinstance(p, TensorProxy)]
    if not given:
        return
    if given[0].dtype == a.dtype:
        for p in given:
            check(
                p.dtype == a.dtype,
                lambda: (
                    f"expected scalar type {_C10_NAMES.get(a.dtype, a.dtype.name)} but found "
                    f"{_C10_NAMES.get(p.dtype, p.dtype.name)}"
                ),
            )
        return
    for p in given:
        check(
            p.dtype == dtypes.float32,
            "mixed dtype (CPU): expect parameter to have scalar type of Float",
        )
    check(
        a.dtype in (dtypes.float16, dtypes.bfloat16),
        "mixed dtype (CPU): all inputs must share same datatype.",
    )


def _affine(x: TensorProxy, weight: Any, bias: Any, compute: Any) -> TensorProxy:
    if weight is not None:
        x = mul(x, to_dtype(weight, compute))
    if bias is not None:
        x = add(x, to_dtype(bias, compute))
    return x


@torchop("torch.nn.functional.layer_norm", "torch.layer_norm")
def layer_norm(
    a: Any,
    normalized_shape: Any,
    weight: Any = None,
    bias: Any = None,
    eps: float = 1e-5,
    cudnn_enable: bool = True,
) -> Any:
    require_tensor(a, "layer_norm")
    _check_cpu_param_dtypes(a, weight, bias)
    shape = _normalized_shape("layer_norm", a, normalized_shape)
    _check_param(weight, shape, "weight")
    _check_param(bias, shape, "bias")
    check(
        a.dtype.is_inexact, lambda: f"\"LayerNormKernelImpl\" not implemented for '{a.dtype.name}'"
    )
    if a.dtype in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64) and (
        a.device.type == "cpu" or all(p is None or p.dtype == a.dtype for p in (weight, bias))
    ):
        # One op that also returns mean and rstd: autodiff differentiates it with torch's fused
        # backward kernel (``layer_norm_backward``) instead of this decomposition. On the CPU
        # this includes the mixed dtypes checked above (float32 affine with a low-precision
        # input, as autocast gives): eager's mixed kernels round their sums their own way.
        return native_layer_norm(a, shape, weight, bias, eps)[0]
    compute = opmath(a.dtype)
    x = to_dtype(a, compute)
    dims = tuple(range(a.ndim - len(shape), a.ndim))
    var, mean = prims.var_mean(x, dims, correction=0)
    rstd = expand_reduced(x, rsqrt(add(var, eps)), dims)
    out = mul(sub(x, expand_reduced(x, mean, dims)), rstd)
    return to_dtype(_affine(out, weight, bias, compute), a.dtype)


@torchop("torch.nn.functional.rms_norm", "torch.rms_norm")
def rms_norm(a: Any, normalized_shape: Any, weight: Any = None, eps: Any = None) -> Any:
    require_tensor(a, "rms_norm")
    shape = _normalized_shape("rms_norm", a, normalized_shape)
    _check_param(weight, shape, "weight")
    check(a.dtype.is_inexact, lambda: f"\"rms_norm\" not implemented for '{a.dtype.name}'")
    compute = opmath(a.dtype)
    if eps is None:  # the machine epsilon of the computation dtype, as torch
        eps = {dtypes.float32: 2.0**-23, dtypes.float64: 2.0**-52}.get(compute, 2.0**-23)
    x = to_dtype(a, compute)
    dims = tuple(range(a.ndim - len(shape), a.ndim))
    rstd = expand_reduced(x, rsqrt(add(mean_(mul(x, x), dims), eps)), dims)
    return to_dtype(_affine(mul(x, rstd), weight, None, compute), a.dtype)


@torchop("torch.nn.functional.group_norm", "torch.group_norm")
def group_norm(
    a: Any,
    num_groups: int,
    weight: Any = None,
    bias: Any = None,
    eps: float = 1e-5,
    cudnn_enabled: bool = True,
) -> Any:
    _check_group_norm(a, num_groups, weight, bias)
    if _fused_group_norm(a, weight, bias):
        # One op that also returns mean and rstd: autodiff differentiates it with torch's fused
        # backward kernel (``group_norm_backward``) instead of this decomposition.
        return native_group_norm(a, weight, bias, num_groups, eps)[0]
    return _group_norm_decomposed(a, num_groups, weight, bias, eps)


def _check_group_norm(a: Any, num_groups: int, weight: Any, bias: Any) -> None:
    require_tensor(a, "group_norm")
    check(
        a.ndim >= 2,
        lambda: f"Expected at least 2 dimensions for input tensor but received {a.ndim}",
    )
    c = a.shape[1]
    check(
        c % num_groups == 0,
        lambda: (
            f"Expected number of channels in input to be divisible by num_groups, but got input of shape {list(a.shape)} and num_groups={num_groups}"
        ),
    )
    for p, what in ((weight, "weight"), (bias, "bias")):
        if p is not None:
            require_tensor(p, "group_norm", what)
            check(
                p.ndim == 1 and p.shape[0] == c,
                lambda: (
                    f"Expected {what} to be a vector of size equal to the number of channels in input, but got {what} of shape {list(p.shape)} and input of shape {list(a.shape)}"
                ),
            )
    _check_cpu_param_dtypes(a, weight, bias)
    check(
        a.dtype.is_inexact, lambda: f"\"GroupNormKernelImpl\" not implemented for '{a.dtype.name}'"
    )


def _fused_group_norm(a: TensorProxy, weight: Any, bias: Any) -> bool:
    """Whether group norm runs as ``native_group_norm``: float32/float64, or float16/bfloat16 on
    the CPU (its parameters of its dtype or, checked before, float32). A bias without a weight
    too: eager's kernel, whose backward raises where the bias's gradient is asked for."""
    if a.dtype in (dtypes.float32, dtypes.float64):
        return all(p is None or p.dtype == a.dtype for p in (weight, bias))
    return a.device.type == "cpu" and a.dtype in (dtypes.float16, dtypes.bfloat16)


def _group_norm_decomposed(
    a: TensorProxy, num_groups: int, weight: Any, bias: Any, eps: float
) -> Any:
    n = a.shape[0]
    compute = opmath(a.dtype)
    x = to_dtype(a, compute)
    grouped = prims.reshape(
        x, (n, num_groups, a.numel() // (n * num_groups) if n * num_groups else 0)
    )
    var, mean = prims.var_mean(grouped, (2,), correction=0)
    normed = mul(
        sub(grouped, expand_reduced(grouped, mean, (2,))),
        expand_reduced(grouped, rsqrt(add(var, eps)), (2,)),
    )
    out = prims.reshape(normed, tuple(a.shape))
    if weight is not None:
        out = mul(out, unsqueeze_to(to_dtype(weight, compute), a.ndim, 1))
    if bias is not None:
        out = add(out, unsqueeze_to(to_dtype(bias, compute), a.ndim, 1))
    return to_dtype(out, a.dtype)


def _check_per_channel(
    op: str, c: Any, running_mean: Any, running_var: Any, weight: Any, bias: Any
) -> None:
    """Eager's checks of a norm's per-channel tensors: tensors of ``c`` elements where given."""
    for p, what in (
        (running_mean, "running_mean"),
        (running_var, "running_var"),
        (weight, "weight"),
        (bias, "bias"),
    ):
        if p is not None:
            require_tensor(p, op, what)
            check(p.numel() == c, lambda: f"{what} should contain {c} elements not {p.numel()}")


@torchop("torch.nn.functional.batch_norm")
def batch_norm(
    a: Any,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Any:
    """Inference with running statistics, or training with batch statistics. In training, given
    running statistics are updated in place (``prims.copy_``) exactly as torch does."""
    return _batch_norm(
        a, running_mean, running_var, weight, bias, training, momentum, eps, check_dtypes=True
    )


def _batch_norm(
    a: Any,
    running_mean: Any,
    running_var: Any,
    weight: Any,
    bias: Any,
    training: bool,
    momentum: float,
    eps: float,
    check_dtypes: bool,
) -> Any:
    require_tensor(a, "batch_norm")
    check(
        not training or (running_mean is None) == (running_var is None),
        "running_mean and running_var must either both be None or neither be None",
        ValueError,
    )
    check(a.ndim >= 2, lambda: f"batch_norm: expected a 2D or higher input, got {a.ndim}D")
    c = a.shape[1]
    _check_per_channel("batch_norm", c, running_mean, running_var, weight, bias)
    check(a.dtype.is_inexact, lambda: f"\"batch_norm\" not implemented for '{a.dtype.name}'")
    if a.numel() == 0:
        return _batch_norm_of_empty(a, weight, bias)
    if check_dtypes:
        _check_cpu_param_dtypes(a, weight, bias, running_mean, running_var)
    compute = opmath(a.dtype)
    x = to_dtype(a, compute)
    if training:
        per_channel = a.numel() // c if c else 0
        check(
            per_channel != 1,
            lambda: (
                f"Expected more than 1 value per channel when training, got input size {list(a.shape)}"
            ),
            ValueError,
        )
        if _fused_training(a, running_mean, running_var, weight, bias, momentum):
            if running_mean is None:
                return native_batch_norm(a, weight, bias, eps)[0]
            out, *updated = _native_batch_norm_updating(
                a, weight, bias, running_mean, running_var, momentum, eps
            )
            for new, running in zip(updated, (running_mean, running_var)):
                # as the kernel writes them: its version counters left as they were
                prims.copy_(new, running, bumps_version=False)
            return out
        dims = tuple(d for d in range(a.ndim) if d != 1)
        var, mean = prims.var_mean(x, dims, correction=0)
        if running_mean is not None or running_var is not None:
            if momentum is None:
                raise not_implemented("batch_norm", "momentum=None (cumulative moving average)")
            _update_running_stat(running_mean, mean, momentum)
            # torch keeps the unbiased variance in the running estimate.
            _update_running_stat(running_var, mul(var, per_channel / (per_channel - 1)), momentum)
    else:
        check(running_mean is not None, "running_mean must be defined in evaluation mode")
        check(running_var is not None, "running_var must be defined in evaluation mode")
        return _batch_norm_evaluation(a, running_mean, running_var, weight, bias, eps)
    mean_b = unsqueeze_to(mean, a.ndim, 1)
    rstd_b = unsqueeze_to(rsqrt(add(var, eps)), a.ndim, 1)
    out = mul(sub(x, mean_b), rstd_b)
    if weight is not None:
        out = mul(out, unsqueeze_to(to_dtype(weight, compute), a.ndim, 1))
    if bias is not None:
        out = add(out, unsqueeze_to(to_dtype(bias, compute), a.ndim, 1))
    return to_dtype(out, a.dtype)


def _batch_norm_evaluation(
    a: TensorProxy, running_mean: Any, running_var: Any, weight: Any, bias: Any, eps: float
) -> TensorProxy:
    """As eager's kernel: ``x * alpha + beta`` per channel, ``alpha = invstd * weight``,
    ``beta = bias - mean * alpha`` and ``invstd = 1 / sqrt(var + eps)``, in float32 for
    float16/bfloat16 (the order of its roundings, not those of ``(x - mean) * invstd``)."""
    compute = opmath(a.dtype)
    mean, var = to_dtype(running_mean, compute), to_dtype(running_var, compute)
    alpha = div(1.0, sqrt(add(var, eps)))
    if weight is not None:
        alpha = mul(alpha, to_dtype(weight, compute))
    beta = sub(0.0 if bias is None else to_dtype(bias, compute), mul(mean, alpha))
    x = to_dtype(a, compute)
    out = add(mul(x, unsqueeze_to(alpha, a.ndim, 1)), unsqueeze_to(beta, a.ndim, 1))
    return to_dtype(out, a.dtype)  # type: ignore[no-any-return]


def _native_batch_norm_updating(
    a: TensorProxy,
    weight: Any,
    bias: Any,
    running_mean: TensorProxy,
    running_var: TensorProxy,
    momentum: float,
    eps: float,
) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    """Training batch norm's output and its updated running statistics, by eager's one kernel.
    It reads copies of the statistics and they are written from behind ``stop_gradient``: what
    gradients flow through reads and writes no memory the program writes (else torch.autograd
    would have to record the whole program)."""
    copies = (prims.clone(running_mean), prims.clone(running_var))
    out, _, _, new_mean, new_var = native_batch_norm_updating(
        a, weight, bias, *copies, momentum, eps
    )
    return out, prims.stop_gradient(new_mean), prims.stop_gradient(new_var)


def _batch_norm_of_empty(a: TensorProxy, weight: Any, bias: Any) -> TensorProxy:
    """Eager's batch norm of an empty input: a copy of it, times ``weight[0]`` and plus
    ``bias[0]`` (so they get zero gradients); the running statistics stay as they are."""
    out: TensorProxy = prims.clone(a)
    for p, op in ((weight, mul), (bias, add)):
        if p is not None:
            size = p.shape[0]
            check(
                p.numel() > 0,
                lambda size=size: (
                    f"select(): index 0 out of range for tensor of size [{size}] at dimension 0"
                ),
                IndexError,
            )
            first = prims.reshape(prims.slice_prim(p, (0,), (1,), (1,)), ())
            out = op(out, to_dtype(first, a.dtype))
    return out


def _fused_training(a: Any, *params: Any) -> bool:
    """Whether training batch norm runs as ``native_batch_norm`` (one kernel forward and one
    backward under torch_ops): float32/float64 input, or float16/bfloat16 on the CPU; both
    running statistics or neither, all of its dtype or (on the CPU, a low-precision input) all
    float32 as autocast leaves them; a momentum where they are given. Other cases keep the
    decomposition."""
    *tensors, momentum = params
    running = tensors[:2]
    if (running[0] is None) != (running[1] is None):
        return False
    given = [t for t in tensors if t is not None]
    on_cpu_low = a.device.type == "cpu" and a.dtype in (dtypes.float16, dtypes.bfloat16)
    same = all(t.dtype == a.dtype for t in given)
    mixed = on_cpu_low and all(t.dtype == dtypes.float32 for t in given)
    return (
        (momentum is not None or running[0] is None)
        and (a.dtype in (dtypes.float32, dtypes.float64) or on_cpu_low)
        and (same or mixed)
    )


def _update_running_stat(
    running: Any, batch_stat: Any, momentum: float, bumps_version: bool = False
) -> None:
    if running is None:
        return
    # torch updates the running statistics outside autograd: they never carry a gradient, and
    # batch_norm's kernel leaves their version counter as it was (a node that saved them, as
    # batch_norm's own does, still runs); instance_norm's copy_ back bumps it.
    # computed in float32 for low-precision statistics and rounded once, as torch's kernels
    compute = opmath(running.dtype)
    stat = to_dtype(prims.stop_gradient(batch_stat), compute)
    updated = add(mul(to_dtype(running, compute), 1.0 - momentum), mul(stat, momentum))
    prims.copy_(to_dtype(updated, running.dtype), running, bumps_version=bumps_version)


@torchop("torch.nn.functional.instance_norm")
def instance_norm(
    a: Any,
    running_mean: Any = None,
    running_var: Any = None,
    weight: Any = None,
    bias: Any = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: float = 1e-5,
) -> Any:
    """Per-sample, per-channel statistics (group_norm with a group per channel), or the running
    statistics when ``use_input_stats=False``. Given running statistics are updated in place
    (``prims.copy_``) with the batch average of the per-instance statistics, as torch does (it
    runs batch_norm on the input viewed as one sample of N*C channels)."""
    require_tensor(a, "instance_norm")
    # eager reads the batch and channel sizes; a 2-D input has no spatial elements, which only
    # the running statistics normalize
    check(
        a.ndim >= 2,
        lambda: f"instance_norm: expected a 2D or higher input, got {a.ndim}D",
        IndexError,
    )
    if not use_input_stats:
        # Eager checks the weight's and bias's dtypes here, not the running statistics'.
        _check_cpu_param_dtypes(a, weight, bias)
        check(
            running_mean is not None and running_var is not None,
            "Expected running_mean and running_var to be defined when use_input_stats is false",
        )
        return _instance_norm_evaluation(a, running_mean, running_var, weight, bias, momentum, eps)
    spatial: Any = 1
    for s in a.shape[2:]:
        spatial = spatial * s  # (also where N or C is 0)
    check(
        spatial != 1,
        lambda: (
            f"Expected more than 1 spatial element when training, got input size {list(a.shape)}"
        ),
        ValueError,
    )
    if a.numel() == 0:
        # eager's batch norm of the input as (1, N*C, ...), weight and bias repeated N times
        if running_mean is not None or running_var is not None:
            raise not_implemented("instance_norm", "running statistics with an empty input")
        weight, bias = (
            p if p is None or a.shape[0] else prims.slice_prim(p, (0,), (0,), (1,))
            for p in (weight, bias)
        )
        return _batch_norm_of_empty(a, weight, bias)
    stats = running_mean is not None or running_var is not None
    if stats:
        _check_instance_stats(a, running_mean, running_var, momentum)
    # As eager: batch norm of the input made dense and viewed as one sample of N*C channels
    # (its kernel's numbers, a dense result), the weight and bias repeated per sample.
    _check_group_norm(a, a.shape[1], weight, bias)
    n, c = a.shape[0], a.shape[1]
    dense = prims.reshape(contiguous(a), (1, n * c, *a.shape[2:]))
    weight, bias = (None if p is None else repeat(p, n) for p in (weight, bias))
    if stats:
        mean, var = (repeat(p, n) for p in (running_mean, running_var))
        if _fused_training(dense, mean, var, weight, bias, momentum):
            # eager's kernel updates the repeated statistics; their mean over the batch is
            # copied back
            out, *updated = _native_batch_norm_updating(
                dense, weight, bias, mean, var, momentum, eps
            )
            for new, running in zip(updated, (running_mean, running_var)):
                batch_mean = reductions.mean(prims.reshape(new, (n, c)), 0)
                prims.copy_(batch_mean, running, bumps_version=True)
            return prims.reshape(out, tuple(a.shape))
        _update_instance_stats(a, running_mean, running_var, momentum, spatial)
    out = _batch_norm(dense, None, None, weight, bias, True, momentum, eps, check_dtypes=False)
    return prims.reshape(out, tuple(a.shape))


def _instance_norm_evaluation(
    a: TensorProxy,
    running_mean: Any,
    running_var: Any,
    weight: Any,
    bias: Any,
    momentum: Any,
    eps: float,
) -> Any:
    """As eager: evaluation batch norm of the input made dense and viewed as one sample of N*C
    channels, the statistics, weight and bias repeated per sample. Where batch_norm takes their
    dtypes, as the op (eager's kernel forward and backward); else its decomposition."""
    n, c = a.shape[0], a.shape[1]
    _check_per_channel("instance_norm", c, running_mean, running_var, weight, bias)
    dense = prims.reshape(contiguous(a), (1, n * c, *a.shape[2:]))
    mean, var, weight, bias = (
        None if p is None else repeat(p, n) for p in (running_mean, running_var, weight, bias)
    )
    if _batch_norm_takes_dtypes(a, mean, var, weight, bias):
        out = batch_norm(dense, mean, var, weight, bias, False, momentum, eps)
    else:
        out = _batch_norm(dense, mean, var, weight, bias, False, momentum, eps, check_dtypes=False)
    return prims.reshape(out, tuple(a.shape))


def _batch_norm_takes_dtypes(a: TensorProxy, *params: Any) -> bool:
    """Whether ``batch_norm`` takes these parameters with ``a`` (``_check_cpu_param_dtypes``)."""
    given = [p for p in params if p is not None]
    if a.device.type != "cpu" or all(p.dtype == a.dtype for p in given):
        return True
    low = a.dtype in (dtypes.float16, dtypes.bfloat16)
    return low and all(p.dtype == dtypes.float32 for p in given)


def _check_instance_stats(
    a: TensorProxy, running_mean: Any, running_var: Any, momentum: Any
) -> None:
    check(
        running_mean is not None and running_var is not None,
        "running_mean and running_var must either both be None or neither be None",
        ValueError,
    )
    c = a.shape[1]
    for p, what in ((running_mean, "running_mean"), (running_var, "running_var")):
        require_tensor(p, "instance_norm", what)
        check(p.numel() == c, lambda: f"{what} should contain {c} elements not {p.numel()}")
    if momentum is None:
        raise not_implemented("instance_norm", "momentum=None (cumulative moving average)")


def _update_instance_stats(
    a: TensorProxy, running_mean: Any, running_var: Any, momentum: Any, spatial: int
) -> None:
    dims = tuple(range(2, a.ndim))
    var, mean = prims.var_mean(to_dtype(a, opmath(a.dtype)), dims, correction=0)
    # torch keeps the unbiased variance; each running value is the mean over the batch.
    unbiased = mul(var, spatial / (spatial - 1))
    _update_running_stat(running_mean, mean_(mean, (0,)), momentum, bumps_version=True)
    _update_running_stat(running_var, mean_(unbiased, (0,)), momentum, bumps_version=True)


# Vector norms -------------------------------------------------------------------------------------


def vector_norm(x: TensorProxy, p: float, dims: Sequence[int], keepdim: bool) -> TensorProxy:
    """torch.linalg.vector_norm in ``x``'s dtype, computed in its opmath dtype."""
    compute = opmath(x.dtype)
    y = to_dtype(x, compute)
    if p == 2:
        out = sqrt(sum_(mul(y, y), dims, keepdim))
    elif p == 1:
        out = sum_(abs_(y), dims, keepdim)
    elif p == math.inf:
        out = amax_(abs_(y), dims, keepdim)
    elif p == -math.inf:
        out = neg_amax(abs_(y), dims, keepdim)
    elif p == 0:
        out = sum_(to_dtype(ne(y, 0), compute), dims, keepdim)
    else:
        out = pow_(sum_(pow_(abs_(y), float(p)), dims, keepdim), 1.0 / p)
    return to_dtype(out, x.dtype)  # type: ignore[no-any-return]


def neg_amax(x: TensorProxy, dims: Sequence[int], keepdim: bool) -> TensorProxy:
    ds = tuple(dims)
    out = prims.amin(x, ds)
    return keep_dims(x, out, ds) if keepdim else out


@torchop("torch.nn.functional.normalize")
def normalize(a: Any, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None) -> Any:
    require_tensor(a, "normalize")
    if out is not None:
        raise not_implemented("normalize", "out=")
    check(
        a.dtype.is_inexact,
        "linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
        + a.dtype.name,
    )
    d = canonicalize_dim(a.ndim, dim)
    norm = vector_norm(a, p, (d,) if a.ndim else (), keepdim=True)
    return div(a, clamp(norm, eps))


@torchop("torch.nn.functional.cosine_similarity", "torch.cosine_similarity")
def cosine_similarity(x1: Any, x2: Any, dim: int = 1, eps: float = 1e-8) -> Any:
    require_tensor(x1, "cosine_similarity", "x1")
    require_tensor(x2, "cosine_similarity", "x2")
    common = result_type(x1, x2)
    check(
        common.is_float,
        lambda: f"expected common dtype to be floating point, yet common dtype is {common.name}",
    )
    # as eager: only integer inputs take the common dtype; the norms and quotients of float
    # inputs are computed in their own dtypes, the product promotes
    a, b = broadcast(*(x if x.dtype.is_float else to_dtype(x, common) for x in (x1, x2)))
    d = canonicalize_dim(a.ndim, dim)
    na = clamp(vector_norm(a, 2, (d,), keepdim=True), eps)
    nb = clamp(vector_norm(b, 2, (d,), keepdim=True), eps)
    return sum_(mul(div(a, na), div(b, nb)), (d,))


@torchop("torch.nn.functional.pairwise_distance", "torch.pairwise_distance")
def pairwise_distance(
    x1: Any, x2: Any, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Any:
    require_tensor(x1, "pairwise_distance", "x1")
    require_tensor(x2, "pairwise_distance", "x2")
    # As eager: the norm op of x1 - x2 + eps over the last dim (its kernel's sums, and a count
    # for p=0 that requires grad as eager's does)
    diff = add(sub(x1, x2), eps)
    return reductions.vector_norm(diff, p, -1, keepdim)
