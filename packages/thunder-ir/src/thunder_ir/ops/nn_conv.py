"""Convolutions (one prim, with torch's argument conveniences: int-or-tuple, 'same'/'valid',
unbatched inputs) and pooling (max and average over strided window slices)."""

from __future__ import annotations

import math
from typing import Any

from thunder_ir import prims
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
    if ceil_mode:
        raise not_implemented(op, "ceil_mode=True")
    kernel = pair(kernel_size, nd, "kernel_size")
    stride_t = (
        kernel
        if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0)
        else pair(stride, nd, "stride")
    )
    padding_t, dilation_t = pair(padding, nd, "padding"), pair(dilation, nd, "dilation")
    for p, k, d in zip(padding_t, kernel, dilation_t):
        check(
            p <= (d * (k - 1) + 1) // 2,
            lambda: (
                f"pad should be at most half of effective kernel size, but got pad={p}, kernel_size={k} and dilation={d}"
            ),
        )
    spatial = a.shape[a.ndim - nd :]
    out = tuple(
        (spatial[i] + 2 * padding_t[i] - dilation_t[i] * (kernel[i] - 1) - 1) // stride_t[i] + 1
        for i in range(nd)
    )
    check(
        all(o > 0 for o in out),
        lambda: (
            f"{op}: Given input size {list(a.shape)}, calculated output size {list(out)} is too small"
        ),
    )
    return a, a.ndim == nd + 1, kernel, stride_t, padding_t, dilation_t, out


def _pad_spatial(x: TensorProxy, padding: tuple[int, ...], value: Any) -> TensorProxy:
    if not any(padding):
        return x
    lead = x.ndim - len(padding)
    config = [(0, 0, 0)] * lead + [(p, p, 0) for p in padding]
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
    if return_indices:
        raise not_implemented(op, "return_indices=True")
    x, _, kernel, stride_t, padding_t, dilation_t, out = _pool_args(
        op, a, nd, kernel_size, stride, padding, dilation, ceil_mode
    )
    low: Any = -math.inf if x.dtype.is_inexact else _int_min(x)
    x = _pad_spatial(x, padding_t, low)
    slices = _window_slices(x, kernel, stride_t, dilation_t, out)
    result = slices[0]
    for s in slices[1:]:
        result = prims.maximum(result, s)
    return result


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
