"""Convolutions (one prim, with torch's argument conveniences: int-or-tuple, 'same'/'valid',
unbatched inputs) and pooling (max and average over strided window slices; max pooling with the
indices torch's kernels return, ``max_pool_with_indices``, and its gradient routed by them,
``max_pool_with_indices_backward``)."""

from __future__ import annotations

import math
from typing import Any

from thunder_ir import dtypes, prims
from thunder_ir.ops._helpers import to_dtype
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.nn_base import add, div, not_implemented, opmath, pair, require_tensor, sum_
from thunder_ir.proxies import TensorProxy
from thunder_ir.utils import check

_NAMES = {1: "conv1d", 2: "conv2d", 3: "conv3d"}


def _batched(op: str, a: TensorProxy, nd: int) -> tuple[TensorProxy, bool]:
    check(
        a.ndim in (nd + 1, nd + 2),
        lambda: (
            f"Expected {nd + 1}D (unbatched) or {nd + 2}D (batched) input to {op}, but got input of size: {list(a.shape)}"
        ),
    )
    if a.ndim == nd + 1:
        return prims.unsqueeze(a, 0), True
    return a, False


def _conv(
    nd: int, a: Any, weight: Any, bias: Any, stride: Any, padding: Any, dilation: Any, groups: int
) -> Any:
    op = _NAMES[nd]
    require_tensor(a, op)
    require_tensor(weight, op, "weight")
    check(
        weight.ndim == nd + 2,
        lambda: (
            f"Expected {nd + 2}-dimensional weight for {op}, but got weight of size {list(weight.shape)}"
        ),
    )
    check(groups > 0, "non-positive groups is not supported")
    x, unbatched = _batched(op, a, nd)
    check(
        x.dtype == weight.dtype,
        lambda: (
            f"Input type ({x.dtype.name}) and weight type ({weight.dtype.name}) should be the same"
        ),
    )
    if bias is not None:
        require_tensor(bias, op, "bias")
        check(
            bias.dtype == x.dtype,
            lambda: (
                f"Input type ({x.dtype.name}) and bias type ({bias.dtype.name}) should be the same"
            ),
        )
    stride_t = pair(stride, nd, "stride")
    dilation_t = pair(dilation, nd, "dilation")
    if isinstance(padding, str):
        check(
            padding in ("same", "valid"),
            lambda: f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}",
            ValueError,
        )
        if padding == "valid":
            padding_t: tuple[Any, ...] = (0,) * nd
        else:
            check(
                all(s == 1 for s in stride_t),
                "padding='same' is not supported for strided convolutions",
                ValueError,
            )
            totals = [dilation_t[i] * (weight.shape[i + 2] - 1) for i in range(nd)]
            if any(t % 2 for t in totals):
                # Asymmetric: pad the input explicitly, the extra element on the right (as torch).
                config = [(0, 0, 0), (0, 0, 0), *((t // 2, t - t // 2, 0) for t in totals)]
                x = prims.pad(x, 0.0 if x.dtype.is_inexact else 0, tuple(config))
                padding_t = (0,) * nd
            else:
                padding_t = tuple(t // 2 for t in totals)
    else:
        padding_t = pair(padding, nd, "padding")
    out = prims.convolution(
        x, weight, bias, stride_t, padding_t, dilation_t, False, (0,) * nd, groups
    )
    return prims.squeeze(out, (0,)) if unbatched else out


@torchop("torch.nn.functional.conv1d", "torch.conv1d")
def conv1d(
    a: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Any:
    return _conv(1, a, weight, bias, stride, padding, dilation, groups)


@torchop("torch.nn.functional.conv2d", "torch.conv2d")
def conv2d(
    a: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Any:
    return _conv(2, a, weight, bias, stride, padding, dilation, groups)


@torchop("torch.nn.functional.conv3d", "torch.conv3d")
def conv3d(
    a: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Any:
    return _conv(3, a, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(
    nd: int,
    a: Any,
    weight: Any,
    bias: Any,
    stride: Any,
    padding: Any,
    output_padding: Any,
    groups: int,
    dilation: Any,
) -> Any:
    op = f"conv_transpose{nd}d"
    require_tensor(a, op)
    require_tensor(weight, op, "weight")
    check(
        weight.ndim == nd + 2,
        lambda: (
            f"Expected {nd + 2}-dimensional weight for {op}, but got weight of size {list(weight.shape)}"
        ),
    )
    x, unbatched = _batched(op, a, nd)
    check(
        x.dtype == weight.dtype,
        lambda: (
            f"Input type ({x.dtype.name}) and weight type ({weight.dtype.name}) should be the same"
        ),
    )
    check(not isinstance(padding, str), lambda: f"{op}: string padding is not supported", TypeError)
    stride_t, padding_t = pair(stride, nd, "stride"), pair(padding, nd, "padding")
    output_padding_t, dilation_t = (
        pair(output_padding, nd, "output_padding"),
        pair(dilation, nd, "dilation"),
    )
    for op_, s, d in zip(output_padding_t, stride_t, dilation_t):
        check(op_ < s or op_ < d, "output padding must be smaller than either stride or dilation")
    out = prims.convolution(
        x, weight, bias, stride_t, padding_t, dilation_t, True, output_padding_t, groups
    )
    return prims.squeeze(out, (0,)) if unbatched else out


@torchop("torch.nn.functional.conv_transpose1d", "torch.conv_transpose1d")
def conv_transpose1d(
    a: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Any:
    return _conv_transpose(1, a, weight, bias, stride, padding, output_padding, groups, dilation)


@torchop("torch.nn.functional.conv_transpose2d", "torch.conv_transpose2d")
def conv_transpose2d(
    a: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Any:
    return _conv_transpose(2, a, weight, bias, stride, padding, output_padding, groups, dilation)


@torchop("torch.nn.functional.conv_transpose3d", "torch.conv_transpose3d")
def conv_transpose3d(
    a: Any,
    weight: Any,
    bias: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Any:
    return _conv_transpose(3, a, weight, bias, stride, padding, output_padding, groups, dilation)


# Pooling --------------------------------------------------------------------------------------------


def _window_slices(
    x: TensorProxy,
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    dilation: tuple[int, ...],
    out: tuple[int, ...],
) -> list[TensorProxy]:
    """One strided slice of ``x`` per kernel offset: element ``o`` of the slice for offset ``k`` is
    element ``o * stride + k * dilation`` of ``x``, over the trailing ``len(kernel)`` dims."""
    nd = len(kernel)
    lead = x.ndim - nd
    slices = []
    for offsets in _product([range(k) for k in kernel]):
        start = [0] * lead + [offsets[i] * dilation[i] for i in range(nd)]
        end = list(x.shape[:lead]) + [
            start[lead + i] + stride[i] * (out[i] - 1) + 1 for i in range(nd)
        ]
        steps = [1] * lead + list(stride)
        slices.append(prims.slice_prim(x, tuple(start), tuple(end), tuple(steps)))
    return slices


def _product(ranges: list[range]) -> list[tuple[int, ...]]:
    import itertools

    return list(itertools.product(*ranges))


def _pool_args(
    op: str,
    a: Any,
    nd: int,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    *,
    ceil_ok: bool = False,
) -> tuple[
    TensorProxy,
    bool,
    tuple[int, ...],
    tuple[int, ...],
    tuple[int, ...],
    tuple[int, ...],
    tuple[int, ...],
]:
    require_tensor(a, op)
    check(
        a.ndim in (nd + 1, nd + 2),
        lambda: (
            f"{op}: Expected {nd + 1}D or {nd + 2}D (batch mode) tensor for input, but got: {list(a.shape)}"
            if nd > 1
            else f"{op}: Expected 2D or 3D input, got {a.ndim}D"
        ),
    )
    if ceil_mode and not ceil_ok:
        raise not_implemented(op, "ceil_mode=True")
    kernel, stride_t, padding_t, dilation_t = pool_params(
        nd, kernel_size, stride, padding, dilation
    )
    for p, k, d in zip(padding_t, kernel, dilation_t):
        check(
            p <= (d * (k - 1) + 1) // 2,
            lambda: (
                f"pad should be at most half of effective kernel size, but got pad={p}, kernel_size={k} and dilation={d}"
            ),
        )
    spatial = a.shape[a.ndim - nd :]
    out = tuple(
        _pool_output_size(
            spatial[i], kernel[i], stride_t[i], padding_t[i], dilation_t[i], bool(ceil_mode)
        )
        for i in range(nd)
    )
    check(
        all(o > 0 for o in out),
        lambda: (
            f"{op}: Given input size {list(a.shape)}, calculated output size {list(out)} is too small"
        ),
    )
    return a, a.ndim == nd + 1, kernel, stride_t, padding_t, dilation_t, out


def pool_params(
    nd: int, kernel_size: Any, stride: Any, padding: Any, dilation: Any
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Kernel size, stride (the kernel size where not given), padding and dilation of an
    ``nd``-dimensional pooling as ``nd``-tuples."""
    kernel = pair(kernel_size, nd, "kernel_size")
    stride_t = (
        kernel
        if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)
        else pair(stride, nd, "stride")
    )
    return kernel, stride_t, pair(padding, nd, "padding"), pair(dilation, nd, "dilation")


def _pool_output_size(size: Any, k: int, s: int, p: int, d: int, ceil_mode: bool) -> Any:
    """torch's ``pooling_output_shape``: with ``ceil_mode`` the last window may run past the
    input on the right, but must start inside the input or the left padding."""
    span = size + 2 * p - d * (k - 1) - 1
    if not ceil_mode:
        return span // s + 1
    out = (span + s - 1) // s + 1
    if (out - 1) * s >= size + p:
        out = out - 1
    return out


def _ceil_extra(
    x: TensorProxy,
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    out: tuple[Any, ...],
) -> tuple[Any, ...]:
    """How far the last window of each spatial dim runs past the padded input (ceil_mode): that
    much more padding on the right, which torch's kernels skip as they skip the padding."""
    nd = len(kernel)
    spatial = x.shape[x.ndim - nd :]
    extra = []
    for i in range(nd):
        past = (out[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1
        past = past - (spatial[i] + 2 * padding[i])
        extra.append(past if past > 0 else 0)
    return tuple(extra)


def _refuse_empty_windows(
    op: str,
    x: TensorProxy,
    kernel: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    out: tuple[Any, ...],
) -> None:
    """A dilated window may miss the input entirely (an input smaller than the dilation): torch's
    kernels then give an index outside the window and route its gradient there. Such calls run as
    torch's own (the torch fallback), where the sizes tell; without dilation no window is empty."""
    nd = len(kernel)
    spatial = x.shape[x.ndim - nd :]
    for size, k, s, p, d, n in zip(spatial, kernel, stride, padding, dilation, out):
        if d == 1 or not isinstance(size, int) or not isinstance(n, int):
            continue
        for o in range(n):
            if not any(0 <= o * s - p + j * d < size for j in range(k)):
                raise not_implemented(op, "a window that holds only padding")


def _pad_spatial(
    x: TensorProxy, padding: tuple[int, ...], value: Any, extra: tuple[Any, ...] = ()
) -> TensorProxy:
    """``x`` padded with ``value`` by ``padding`` on both sides of its trailing dims (and by
    ``extra`` more on the right)."""
    extra = extra or (0,) * len(padding)
    if not any(padding) and not any(extra):
        return x
    lead = x.ndim - len(padding)
    config = [(0, 0, 0)] * lead + [(p, p + e, 0) for p, e in zip(padding, extra)]
    return prims.pad(x, value, tuple(config))  # type: ignore[no-any-return]


def _max_pool(
    nd: int,
    a: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    return_indices: bool,
) -> Any:
    op = f"max_pool{nd}d"
    x, _, kernel, stride_t, padding_t, dilation_t, out = _pool_args(
        op, a, nd, kernel_size, stride, padding, dilation, ceil_mode, ceil_ok=True
    )
    _refuse_empty_windows(op, x, kernel, stride_t, padding_t, dilation_t, out)
    if return_indices:
        return max_pool_with_indices(x, kernel, stride_t, padding_t, dilation_t, bool(ceil_mode))
    # The maximum of the window's slices. Gradients do not flow through this decomposition (its
    # ``maximum`` splits ties): the grad rule of max_pool routes each output's gradient to the
    # input the forward's kernel picks (``max_pool_with_indices``), as eager.
    extra = _ceil_extra(x, kernel, stride_t, padding_t, dilation_t, out) if ceil_mode else ()
    x = _pad_spatial(x, padding_t, _lowest(x), extra)
    slices = _window_slices(x, kernel, stride_t, dilation_t, out)
    result = slices[0]
    for s in slices[1:]:
        result = prims.maximum(result, s)
    return result


def _lowest(x: TensorProxy) -> Any:
    return -math.inf if x.dtype.is_inexact else _int_min(x)


def _int_min(x: TensorProxy) -> int:
    import torch

    from thunder_ir.dtypes import to_torch_dtype

    dt = to_torch_dtype(x.dtype)
    assert dt is not None
    return int(torch.iinfo(dt).min)


@torchop("torch.nn.functional.max_pool1d", "torch.max_pool1d")
def max_pool1d(
    a: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    return _max_pool(1, a, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


@torchop("torch.nn.functional.max_pool2d", "torch.max_pool2d")
def max_pool2d(
    a: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    return _max_pool(2, a, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


@torchop("torch.nn.functional.max_pool3d", "torch.max_pool3d")
def max_pool3d(
    a: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    dilation: Any = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Any:
    return _max_pool(3, a, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


# Max pooling with indices (no torch name: ltorch.max_pool*d with return_indices=True and the grad
# rule of max_pool*d call them; the torch_ops executor runs torch's aten kernels) ----------------


def _check_pool_params(op: str, nd: int, *params: Any) -> None:
    check(
        all(isinstance(p, tuple) and len(p) == nd for p in params),
        lambda: f"{op}: kernel_size, stride, padding and dilation must be {nd}-tuples",
    )


@torchop(name="max_pool_with_indices")
def max_pool_with_indices(
    a: TensorProxy,
    kernel_size: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    ceil_mode: bool,
) -> tuple[TensorProxy, TensorProxy]:
    """Max pooling over the trailing ``len(kernel_size)`` dims of ``a`` returning ``(out,
    indices)``: ``indices`` (int64) is the flat position, within its plane of ``a`` (the pooled
    dims), of the element each output took; torch's kernels' choice: the first maximum in scan
    order, a NaN over any number and the last of several NaNs (``torch.ops.aten.max_pool{1,2,3}
    d_with_indices``). Parameters are ``nd``-tuples."""
    nd = len(kernel_size)
    op = f"max_pool{nd}d"
    _check_pool_params(op, nd, kernel_size, stride, padding, dilation)
    x, _, kernel, stride_t, padding_t, dilation_t, out = _pool_args(
        op, a, nd, kernel_size, stride, padding, dilation, ceil_mode, ceil_ok=True
    )
    _refuse_empty_windows(op, x, kernel, stride_t, padding_t, dilation_t, out)
    extra = _ceil_extra(x, kernel, stride_t, padding_t, dilation_t, out) if ceil_mode else ()
    padded = any(padding_t) or any(extra)
    spatial = tuple(x.shape[x.ndim - nd :])
    plane: Any = 1
    for s in spatial:
        plane = plane * s
    # The flat position of each element of a plane, -1 in the padding.
    pos = prims.reshape(
        prims.iota(plane, start=0, step=1, device=x.device, dtype=dtypes.int64), spatial
    )
    values = _window_slices(
        _pad_spatial(x, padding_t, _lowest(x), extra), kernel, stride_t, dilation_t, out
    )
    positions = _window_slices(
        _pad_spatial(pos, padding_t, -1, extra), kernel, stride_t, dilation_t, out
    )
    shape = tuple(values[0].shape)
    dims = tuple(range(x.ndim - nd, x.ndim))

    def full(p: TensorProxy) -> TensorProxy:
        return prims.broadcast_in_dim(p, shape, dims)  # type: ignore[no-any-return]

    # torch's scan: an element replaces the current one where it is greater or NaN.
    best, index = values[0], full(positions[0])
    for v, p in zip(values[1:], positions[1:]):
        take = prims.gt(v, best)
        if x.dtype.is_inexact:
            take = prims.bitwise_or(take, prims.isnan(v))
        best = prims.where(take, v, best)
        index = prims.where(take, full(p), index)
    if padded:
        # Padding (the lowest value) is never taken over an element, but where every element of
        # a window is the lowest value its padding may come first: torch's index is then the
        # window's first element in the input (computed over the plane only).
        first = positions[-1]
        for p in reversed(positions[:-1]):
            first = prims.where(prims.ge(p, 0), p, first)
        index = prims.where(prims.lt(index, 0), full(first), index)
    return best, index


@torchop(name="max_pool_with_indices_backward")
def max_pool_with_indices_backward(
    grad_out: TensorProxy,
    a: TensorProxy,
    kernel_size: tuple[int, ...],
    stride: tuple[int, ...],
    padding: tuple[int, ...],
    dilation: tuple[int, ...],
    ceil_mode: bool,
    indices: TensorProxy,
) -> TensorProxy:
    """The gradient of ``max_pool_with_indices`` for ``a``: each output's gradient added to the
    element ``indices`` names, in output order, in ``a``'s dtype (``torch.ops.aten.max_pool{2,3}
    d_with_indices_backward``; torch's 1-D pooling is the 2-D one over a unit height)."""
    nd = len(kernel_size)
    _check_pool_params(f"max_pool{nd}d", nd, kernel_size, stride, padding, dilation)
    lead = a.ndim - nd
    planes: Any = 1
    for s in a.shape[:lead]:
        planes = planes * s
    plane: Any = 1
    for s in a.shape[lead:]:
        plane = plane * s
    outs: Any = 1
    for s in grad_out.shape[lead:]:
        outs = outs * s
    cols = prims.reshape(indices, (planes, outs))
    values = prims.reshape(grad_out, (planes, outs))
    if any(d > 1 for d in dilation):
        # A window of padding only (sizes unknown when tracing) has index -1: it adds nothing.
        empty = prims.lt(cols, 0)
        cols = prims.where(empty, 0, cols)
        values = prims.where(empty, 0.0 if a.dtype.is_inexact else 0, values)
    zero: Any = 0.0 if a.dtype.is_inexact else 0
    zeros = prims.full((planes, plane), zero, device=a.device, dtype=a.dtype)
    if a.dtype == dtypes.float32 and a.device.type == "cpu":
        # One plane after the other, each in output order (torch's CPU index_put adds float32
        # from several threads, in no set order).
        grad = prims.scatter_add(zeros, 1, cols, values)
    else:
        # Added in the dtype, in output order, as torch's kernels (scatter_add rounds float16 and
        # bfloat16 otherwise on the CPU, and adds in no set order on CUDA).
        rows = prims.broadcast_in_dim(
            prims.iota(planes, start=0, step=1, device=a.device, dtype=dtypes.int64),
            (planes, outs),
            (0,),
        )
        grad = prims.index_put(zeros, (rows, cols), values, True)
    return prims.reshape(grad, tuple(a.shape))  # type: ignore[no-any-return]


def _avg_pool(
    nd: int,
    a: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    ceil_mode: bool,
    count_include_pad: bool,
    divisor_override: Any,
) -> Any:
    op = f"avg_pool{nd}d"
    x, _, kernel, stride_t, padding_t, dilation_t, out = _pool_args(
        op, a, nd, kernel_size, stride, padding, 1, ceil_mode
    )
    check(divisor_override is None or divisor_override != 0, "divisor must be not zero")
    if not x.dtype.is_inexact:
        raise not_implemented(op, f"an integer input ({x.dtype.name})")
    # Sum and divide in float32 for low-precision inputs, rounding once (as torch's kernel).
    compute = opmath(x.dtype)
    xp = _pad_spatial(to_dtype(x, compute), padding_t, 0.0)
    total = _sum_slices(_window_slices(xp, kernel, stride_t, dilation_t, out))
    if divisor_override is not None:
        return to_dtype(div(total, divisor_override), x.dtype)
    if count_include_pad or not any(padding_t):
        return to_dtype(div(total, math.prod(kernel)), x.dtype)
    # Divide by the number of input (not padding) elements in each window.
    spatial = tuple(x.shape[x.ndim - nd :])
    ones = prims.full(spatial, 1.0, device=x.device, dtype=compute)
    counts = _sum_slices(
        _window_slices(_pad_spatial(ones, padding_t, 0.0), kernel, stride_t, dilation_t, out)
    )
    return to_dtype(div(total, counts), x.dtype)


def _sum_slices(slices: list[TensorProxy]) -> TensorProxy:
    total = slices[0]
    for s in slices[1:]:
        total = add(total, s)
    return total


@torchop("torch.nn.functional.avg_pool1d", "torch.avg_pool1d")
def avg_pool1d(
    a: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Any:
    return _avg_pool(1, a, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


@torchop("torch.nn.functional.avg_pool2d")
def avg_pool2d(
    a: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: Any = None,
) -> Any:
    return _avg_pool(
        2, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


@torchop("torch.nn.functional.avg_pool3d")
def avg_pool3d(
    a: Any,
    kernel_size: Any,
    stride: Any = None,
    padding: Any = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: Any = None,
) -> Any:
    return _avg_pool(
        3, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override
    )


def _adaptive_avg_pool(nd: int, a: Any, output_size: Any) -> Any:
    op = f"adaptive_avg_pool{nd}d"
    require_tensor(a, op)
    check(
        a.ndim in (nd + 1, nd + 2),
        lambda: f"{op}(): Expected {nd + 1}D or {nd + 2}D tensor, but got {list(a.shape)}",
    )
    spatial = tuple(a.shape[a.ndim - nd :])
    sizes = pair(output_size, nd, "output_size")
    sizes = tuple(s if o is None else o for s, o in zip(spatial, sizes))
    for s, o in zip(spatial, sizes):
        if s % o:
            raise not_implemented(
                op, f"an output size ({o}) that does not divide the input size ({s})"
            )
    if all(o == 1 for o in sizes):
        dims = tuple(range(a.ndim - nd, a.ndim))
        total = sum_(to_dtype(a, opmath(a.dtype)), dims, keepdim=True)
        return to_dtype(div(total, math.prod(spatial)), a.dtype)
    kernel = tuple(s // o for s, o in zip(spatial, sizes))
    return _avg_pool(nd, a, kernel, kernel, 0, False, True, None)


@torchop("torch.nn.functional.adaptive_avg_pool1d", "torch.adaptive_avg_pool1d")
def adaptive_avg_pool1d(a: Any, output_size: Any) -> Any:
    return _adaptive_avg_pool(1, a, output_size)


@torchop("torch.nn.functional.adaptive_avg_pool2d")
def adaptive_avg_pool2d(a: Any, output_size: Any) -> Any:
    return _adaptive_avg_pool(2, a, output_size)


@torchop("torch.nn.functional.adaptive_avg_pool3d")
def adaptive_avg_pool3d(a: Any, output_size: Any) -> Any:
    return _adaptive_avg_pool(3, a, output_size)
