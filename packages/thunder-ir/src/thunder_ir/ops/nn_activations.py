"""Activation functions and softmax. Low-precision inputs compute in float32 and round once at the
end, as torch's kernels do; ``inplace=True`` computes out of place and copies into the input."""

from __future__ import annotations

import math
from typing import Any

from thunder_ir import dtypes, prims
from thunder_ir.ops._helpers import dtype_arg, to_dtype
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.elementwise import check_number_fits
from thunder_ir.ops.nn_base import (
    abs_,
    add,
    amax_,
    clamp,
    div,
    erf,
    exp,
    expand_reduced,
    gt,
    le,
    log,
    log1p,
    lt,
    mul,
    neg,
    opmath,
    require_tensor,
    sigmoid,
    sub,
    sum_,
    tanh,
    where,
)
from thunder_ir.ops.shape import contiguous
from thunder_ir.proxies import TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import canonicalize_dim, check

_EW = (OpTag.ELEMENTWISE,)


def _float_input(a: Any, op: str) -> tuple[TensorProxy, Any]:
    """``a`` checked to be a floating tensor, converted to its computation dtype, and that dtype's
    original (the result dtype)."""
    require_tensor(a, op)
    check(a.dtype.is_float, lambda: f"\"{op}\" not implemented for '{a.dtype.name}'")
    return to_dtype(a, opmath(a.dtype)), a.dtype


def _written(a: Any, out: TensorProxy) -> TensorProxy:
    """``inplace=True``: the op's result written into its input. The op is recorded whole inside,
    so autodiff takes its rule (eager's backward kernel) and the write stays a ``copy_``."""
    require_tensor(a, "inplace activation")
    return prims.copy_(out, a)  # type: ignore[no-any-return]


def _finish(
    a: TensorProxy, out: TensorProxy, result_dtype: Any, inplace: bool = False
) -> TensorProxy:
    out = to_dtype(out, result_dtype)
    if inplace:
        return prims.copy_(out, a)  # type: ignore[no-any-return]
    return out


@torchop("torch.nn.functional.gelu", tags=_EW)
def gelu(a: Any, *, approximate: str = "none") -> Any:
    check(approximate in ("none", "tanh"), "approximate argument must be either none or tanh.")
    x, rd = _float_input(a, "gelu")
    if approximate == "none":
        inner = add(erf(mul(x, 1.0 / math.sqrt(2.0))), 1.0)
    else:
        cube = mul(mul(x, x), x)
        inner = add(tanh(mul(add(x, mul(cube, 0.044715)), math.sqrt(2.0 / math.pi))), 1.0)
    return _finish(a, mul(mul(x, 0.5), inner), rd)


@torchop("torch.nn.functional.silu", tags=_EW)
def silu(a: Any, inplace: bool = False) -> Any:
    if inplace:
        return _written(a, silu(a))
    x, rd = _float_input(a, "silu")
    return _finish(a, mul(x, sigmoid(x)), rd, inplace)


@torchop("torch.relu", "torch.Tensor.relu", "torch.nn.functional.relu", tags=_EW)
def relu(a: Any, inplace: bool = False) -> Any:
    if inplace:
        return _written(a, relu(a))
    require_tensor(a, "relu")
    check(not a.dtype.is_boolean, "\"clamp_min_scalar_cpu\" not implemented for 'Bool'")
    # where(a < 0, 0, a) rather than a > 0: NaN stays NaN and -0.0 stays -0.0, as in torch.
    return _finish(a, where(lt(a, 0), 0, a), a.dtype)


@torchop("torch.nn.functional.hardtanh", tags=_EW)
def hardtanh(a: Any, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Any:
    if inplace:
        return _written(a, hardtanh(a, min_val, max_val))
    require_tensor(a, "hardtanh")
    check(min_val <= max_val, "min_val cannot be greater than max_val", ValueError)
    check(not a.dtype.is_boolean, "Bool inputs not supported for hardtanh")
    if a.dtype.is_exact:
        for v in (min_val, max_val):
            if isinstance(v, float) and not math.isfinite(v):
                check_number_fits(v, a.dtype)  # torch's error, not int()'s
        min_val, max_val = int(min_val), int(max_val)
    for v in (min_val, max_val):
        check_number_fits(v, a.dtype)  # torch converts the bounds to the dtype, checked
    return _finish(a, clamp(a, min_val, max_val), a.dtype, inplace)


@torchop("torch.nn.functional.relu6", tags=_EW)
def relu6(a: Any, inplace: bool = False) -> Any:
    return hardtanh(a, 0.0, 6.0, inplace)


@torchop("torch.nn.functional.leaky_relu", tags=_EW)
def leaky_relu(a: Any, negative_slope: float = 0.01, inplace: bool = False) -> Any:
    if inplace:
        return _written(a, leaky_relu(a, negative_slope))
    x, rd = _float_input(a, "leaky_relu")
    return _finish(a, where(gt(x, 0), x, mul(x, negative_slope)), rd, inplace)


def _elu(x: TensorProxy, alpha: float, scale: float, input_scale: float) -> TensorProxy:
    neg_part = mul(prims.expm1(mul(x, input_scale)), alpha * scale)
    pos_part = x if scale == 1.0 else mul(x, scale)
    return where(gt(x, 0), pos_part, neg_part)  # type: ignore[no-any-return]


@torchop(name="elu_written", tags=_EW)
def elu_written(a: Any, alpha: float, scale: float, input_scale: float) -> Any:
    """``aten.elu`` for an ``inplace=True`` call of elu, celu or selu, whose result the caller
    writes into ``a``: eager differentiates that one from its result (autodiff's rule for this
    op), the out-of-place op from its input."""
    x, rd = _float_input(a, "elu")
    return _finish(a, _elu(x, alpha, scale, input_scale), rd)


@torchop("torch.nn.functional.elu", tags=_EW)
def elu(a: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    if inplace:
        return _written(a, elu_written(a, alpha, 1.0, 1.0))
    x, rd = _float_input(a, "elu")
    return _finish(a, _elu(x, alpha, 1.0, 1.0), rd)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@torchop("torch.nn.functional.selu", "torch.selu", tags=_EW)
def selu(a: Any, inplace: bool = False) -> Any:
    if inplace:
        return _written(a, elu_written(a, _SELU_ALPHA, _SELU_SCALE, 1.0))
    x, rd = _float_input(a, "selu")
    return _finish(a, _elu(x, _SELU_ALPHA, _SELU_SCALE, 1.0), rd)


@torchop("torch.nn.functional.celu", "torch.celu", tags=_EW)
def celu(a: Any, alpha: float = 1.0, inplace: bool = False) -> Any:
    check(alpha != 0, "ZeroDivisionError: alpha cannot be 0 for CELU")
    if inplace:
        return _written(a, elu_written(a, alpha, 1.0, 1.0 / alpha))
    x, rd = _float_input(a, "celu")
    return _finish(a, _elu(x, alpha, 1.0, 1.0 / alpha), rd)


def _softplus(x: TensorProxy, beta: float, threshold: float) -> TensorProxy:
    scaled = x if beta == 1 else mul(x, beta)
    soft = log1p(exp(scaled))
    if beta != 1:
        soft = div(soft, beta)
    return where(gt(scaled, threshold), x, soft)  # type: ignore[no-any-return]


@torchop("torch.nn.functional.softplus", tags=_EW)
def softplus(a: Any, beta: float = 1.0, threshold: float = 20.0) -> Any:
    x, rd = _float_input(a, "softplus")
    return _finish(a, _softplus(x, beta, threshold), rd)


@torchop("torch.nn.functional.mish", tags=_EW)
def mish(a: Any, inplace: bool = False) -> Any:
    if inplace:
        return _written(a, mish(a))
    x, rd = _float_input(a, "mish")
    return _finish(a, mul(x, tanh(_softplus(x, 1.0, 20.0))), rd, inplace)


@torchop("torch.nn.functional.hardsigmoid", tags=_EW)
def hardsigmoid(a: Any, inplace: bool = False) -> Any:
    if inplace:
        return _written(a, hardsigmoid(a))
    x, rd = _float_input(a, "hardsigmoid")
    return _finish(a, div(clamp(add(x, 3.0), 0.0, 6.0), 6.0), rd, inplace)


@torchop("torch.nn.functional.hardswish", tags=_EW)
def hardswish(a: Any, inplace: bool = False) -> Any:
    if inplace:
        return _written(a, hardswish(a))
    x, rd = _float_input(a, "hardswish")
    return _finish(a, mul(x, div(clamp(add(x, 3.0), 0.0, 6.0), 6.0)), rd, inplace)


@torchop("torch.nn.functional.logsigmoid", tags=_EW)
def logsigmoid(a: Any) -> Any:
    x, rd = _float_input(a, "log_sigmoid_forward")
    # min(x, 0) - log1p(exp(-|x|)): stable for large |x|; torch's result is contiguous,
    # whatever the input's layout.
    return contiguous(_finish(a, sub(clamp(x, hi=0.0), log1p(exp(neg(abs_(x))))), rd))


@torchop("torch.nn.functional.softsign", tags=_EW)
def softsign(a: Any) -> Any:
    require_tensor(a, "softsign")
    return div(a, add(abs_(a), 1))


@torchop("torch.nn.functional.tanhshrink", tags=_EW)
def tanhshrink(a: Any) -> Any:
    require_tensor(a, "tanhshrink")
    return sub(a, tanh(a))


@torchop("torch.nn.functional.threshold", "torch.threshold", tags=_EW)
def threshold(a: Any, threshold: float, value: float, inplace: bool = False) -> Any:
    require_tensor(a, "threshold")
    # torch converts both numbers, checked: the threshold to the dtype it compares in (float32
    # for float16 and bfloat16 on CPU), the value to the tensor's
    check_number_fits(threshold, dtypes.float32 if a.dtype.is_low_precision else a.dtype)
    check_number_fits(value, a.dtype)
    return _finish(a, where(le(a, threshold), value, a), a.dtype, inplace)


@torchop("torch.nn.functional.prelu", "torch.prelu")
def prelu(a: Any, weight: Any) -> Any:
    require_tensor(a, "prelu")
    require_tensor(weight, "prelu", "weight")
    check(
        a.dtype.is_float,
        "prelu: Type promoting not supported. Got Long and Float"
        if a.dtype.is_exact
        else "prelu: expected a floating point input",
    )
    n = weight.numel()
    check(
        weight.ndim <= 1,
        "prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = " + str(weight.ndim),
    )
    channels = a.shape[1] if a.ndim >= 2 else 1
    check(
        n == 1 or n == channels,
        lambda: (
            f"Mismatch of parameter numbers and input channel size. Found parameter numbers = {n} and channel size = {channels}."
        ),
    )
    if weight.ndim == 1 and n != 1:
        shape = [1] * a.ndim
        shape[1] = n
        w = prims.broadcast_in_dim(weight, tuple(shape), (1,))
    else:
        w = prims.reshape(weight, ())
    return where(gt(a, 0), a, mul(w, a))


@torchop("torch.nn.functional.glu")
def glu(a: Any, dim: int = -1) -> Any:
    require_tensor(a, "glu")
    check(a.ndim > 0, "glu does not support scalars because halving size must be even")
    d = canonicalize_dim(a.ndim, dim)
    n = a.shape[d]
    check(n % 2 == 0, lambda: f"Halving dimension must be even, but dimension {d} is size {n}")
    half = n // 2
    start = [0] * a.ndim
    end = list(a.shape)
    end[d] = half
    first = prims.slice_prim(a, tuple(start), tuple(end))
    start[d], end[d] = half, n
    second = prims.slice_prim(a, tuple(start), tuple(end))
    return mul(first, sigmoid(second))


# Softmax ------------------------------------------------------------------------------------------


def _implicit_softmax_dim(ndim: int) -> int:
    # torch.nn.functional._get_softmax_dim (deprecated implicit choice).
    return 0 if ndim in (0, 1, 3) else 1


def softmax_dtype(stacklevel_or_dtype: Any, dtype: Any) -> Any:
    """The dtype a softmax call asks for: torch.softmax(x, dim, dtype) takes it third, where
    F.softmax has ``_stacklevel`` (so the torch_ops executor passes it by keyword)."""
    if (
        dtype is None
        and stacklevel_or_dtype is not None
        and not isinstance(stacklevel_or_dtype, int)
    ):
        return stacklevel_or_dtype
    return dtype


def _softmax_args(
    op: str, a: Any, dim: Any, stacklevel_or_dtype: Any, dtype: Any
) -> tuple[TensorProxy, int, Any]:
    require_tensor(a, op)
    dtype = softmax_dtype(stacklevel_or_dtype, dtype)
    if dim is None:
        dim = _implicit_softmax_dim(a.ndim)
    d = canonicalize_dim(a.ndim, dim)
    out_dtype = dtype_arg(dtype)
    x = a if out_dtype is None else to_dtype(a, out_dtype)
    check(
        x.dtype.is_float,
        lambda: f"\"{op}_lastdim_kernel_impl\" not implemented for '{x.dtype.name}'",
    )
    return x, d, x.dtype


def _is_zero(size: Any) -> bool:
    return isinstance(size, int) and size == 0


def _log_softmax_core(x: TensorProxy, d: int) -> TensorProxy:
    """log_softmax in ``x``'s (computation) dtype."""
    if x.ndim == 0 or _is_zero(x.shape[d]):  # (an empty dim: an empty result, as eager)
        return sub(x, x)  # type: ignore[no-any-return]
    shifted = sub(x, expand_reduced(x, amax_(x, d), (d,)))
    return sub(shifted, expand_reduced(x, log(sum_(exp(shifted), d)), (d,)))  # type: ignore[no-any-return]


def _softmax_core(x: TensorProxy, d: int) -> TensorProxy:
    if x.ndim == 0 or _is_zero(x.shape[d]):  # (an empty dim: an empty result, as eager)
        return exp(sub(x, x))  # type: ignore[no-any-return]
    e = exp(sub(x, expand_reduced(x, amax_(x, d), (d,))))
    return div(e, expand_reduced(x, sum_(e, d), (d,)))  # type: ignore[no-any-return]


@torchop(
    "torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax", "torch.special.softmax"
)
def softmax(a: Any, dim: Any = None, _stacklevel: Any = 3, dtype: Any = None) -> Any:
    x, d, rd = _softmax_args("softmax", a, dim, _stacklevel, dtype)
    return to_dtype(_softmax_core(to_dtype(x, opmath(rd)), d), rd)


@torchop(
    "torch.log_softmax",
    "torch.Tensor.log_softmax",
    "torch.nn.functional.log_softmax",
    "torch.special.log_softmax",
)
def log_softmax(a: Any, dim: Any = None, _stacklevel: Any = 3, dtype: Any = None) -> Any:
    x, d, rd = _softmax_args("log_softmax", a, dim, _stacklevel, dtype)
    return to_dtype(_log_softmax_core(to_dtype(x, opmath(rd)), d), rd)


@torchop("torch.nn.functional.softmin")
def softmin(a: Any, dim: Any = None, _stacklevel: Any = 3, dtype: Any = None) -> Any:
    x, d, rd = _softmax_args("softmin", a, dim, _stacklevel, dtype)
    return to_dtype(_softmax_core(neg(to_dtype(x, opmath(rd))), d), rd)
