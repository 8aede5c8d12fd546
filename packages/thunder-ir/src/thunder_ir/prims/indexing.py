"""Indexing, matmul, linear, convolution and embedding prims."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder_ir import dtypes
from thunder_ir.prims._common import check_same_device, check_tensor, make_prim
from thunder_ir.proxies import TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import canonicalize_dim, check

# Ops taking index tensors: eager's kernels raise on an index out of range.
_VALUE_ERRORS = (OpTag.VALUE_ERRORS,)


def _check_index(index: TensorProxy, what: str) -> None:
    check(
        index.dtype in (dtypes.int64, dtypes.int32),
        lambda: f"{what}: index must be int64 or int32, got {index.dtype.name}",
        TypeError,
    )


def _take_meta(a: Any, index: Any) -> TensorProxy:
    a, index = check_tensor(a, "prims.take"), check_tensor(index, "prims.take")
    _check_index(index, "prims.take")
    return TensorProxy(
        shape=index.shape, dtype=a.dtype, device=a.device, requires_grad=a.requires_grad
    )


take = make_prim("take", _take_meta, tags=_VALUE_ERRORS)


def _index_select_meta(a: Any, dim: int, index: Any) -> TensorProxy:
    a, index = check_tensor(a, "prims.index_select"), check_tensor(index, "prims.index_select")
    _check_index(index, "prims.index_select")
    check(
        index.ndim <= 1,
        lambda: f"index_select(): Index is supposed to be a vector, got rank {index.ndim}",
        IndexError,
    )
    d = canonicalize_dim(a.ndim, dim)
    shape = list(a.shape)
    if a.ndim:
        shape[d] = index.shape[0] if index.ndim else 1
    return TensorProxy(shape=shape, dtype=a.dtype, device=a.device, requires_grad=a.requires_grad)


index_select = make_prim("index_select", _index_select_meta, tags=_VALUE_ERRORS)


def _gather_meta(a: Any, dim: int, index: Any) -> TensorProxy:
    a, index = check_tensor(a, "prims.gather"), check_tensor(index, "prims.gather")
    check(
        index.dtype == dtypes.int64,
        lambda: f"gather(): Expected dtype int64 for index, got {index.dtype.name}",
        RuntimeError,
    )
    check(
        index.ndim == a.ndim or (a.ndim == 0 and index.ndim <= 1),
        "Index tensor must have the same number of dimensions as input tensor",
    )
    canonicalize_dim(a.ndim, dim)
    return TensorProxy(
        shape=index.shape, dtype=a.dtype, device=a.device, requires_grad=a.requires_grad
    )


gather = make_prim("gather", _gather_meta, tags=_VALUE_ERRORS)


def _scatter_add_meta(a: Any, dim: int, index: Any, src: Any) -> TensorProxy:
    a, index, src = (check_tensor(x, "prims.scatter_add") for x in (a, index, src))
    check(
        index.dtype == dtypes.int64,
        lambda: f"scatter_add(): Expected dtype int64 for index, got {index.dtype.name}",
        RuntimeError,
    )
    check(
        src.dtype == a.dtype,
        lambda: (
            f"scatter_add(): Expected self.dtype to be equal to src.dtype, got {a.dtype.name} and {src.dtype.name}"
        ),
    )
    check(
        index.ndim == a.ndim == src.ndim,
        "Index tensor must have the same number of dimensions as self tensor",
    )
    canonicalize_dim(a.ndim, dim)
    return TensorProxy(
        shape=a.shape,
        dtype=a.dtype,
        device=a.device,
        requires_grad=a.requires_grad or src.requires_grad,
    )


scatter_add = make_prim("scatter_add", _scatter_add_meta, tags=_VALUE_ERRORS)


def _index_put_meta(a: Any, indices: Sequence[Any], values: Any, accumulate: bool) -> TensorProxy:
    a, values = check_tensor(a, "prims.index_put"), check_tensor(values, "prims.index_put")
    check(
        values.dtype == a.dtype,
        lambda: (
            f"Index put requires the source and destination dtypes match, got {a.dtype.name} for the destination and {values.dtype.name} for the source."
        ),
    )
    check(
        len(indices) <= a.ndim,
        lambda: f"too many indices for tensor of dimension {a.ndim} (got {len(indices)})",
        IndexError,
    )
    for i in indices:
        i = check_tensor(i, "prims.index_put")
        check(
            i.dtype in (dtypes.int64, dtypes.int32, dtypes.bool8),
            lambda: (
                f"tensors used as indices must be long, int or bool tensors, got {i.dtype.name}"
            ),
            IndexError,
        )
    return TensorProxy(
        shape=a.shape,
        dtype=a.dtype,
        device=a.device,
        requires_grad=a.requires_grad or values.requires_grad,
    )


index_put = make_prim("index_put", _index_put_meta, tags=_VALUE_ERRORS)


def _matmul_meta(a: Any, b: Any) -> TensorProxy:
    a, b = check_tensor(a, "prims.matmul"), check_tensor(b, "prims.matmul")
    check(
        a.ndim >= 1 and b.ndim >= 1,
        lambda: (
            f"both arguments to matmul need to be at least 1D, but they are {a.ndim}D and {b.ndim}D"
        ),
    )
    check(
        a.dtype == b.dtype,
        lambda: (
            f"expected m1 and m2 to have the same dtype, but got: {a.dtype.name} != {b.dtype.name}"
        ),
    )
    check_same_device([a, b], "prims.matmul")
    rg = a.requires_grad or b.requires_grad
    if a.ndim == 1 and b.ndim == 1:
        check(
            a.shape[0] == b.shape[0],
            lambda: (
                f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to have the same number of elements, but got {a.shape[0]} and {b.shape[0]} elements respectively"
            ),
        )
        return TensorProxy(shape=(), dtype=a.dtype, device=a.device, requires_grad=rg)
    a_shape = (1, *a.shape) if a.ndim == 1 else a.shape
    b_shape = (*b.shape, 1) if b.ndim == 1 else b.shape
    check(
        a_shape[-1] == b_shape[-2],
        lambda: (
            f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, a_shape[-2:]))} and {'x'.join(map(str, b_shape[-2:]))})"
        ),
    )
    batch_a, batch_b = a_shape[:-2], b_shape[:-2]
    batch = []
    n = max(len(batch_a), len(batch_b))
    pa, pb = (1,) * (n - len(batch_a)) + tuple(batch_a), (1,) * (n - len(batch_b)) + tuple(batch_b)
    for x, y in zip(pa, pb):
        check(
            x == y or x == 1 or y == 1,
            lambda: (
                f"The size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton dimension"
            ),
        )
        batch.append(y if x == 1 else x)
    shape = [*batch]
    if a.ndim > 1:
        shape.append(a_shape[-2])
    if b.ndim > 1:
        shape.append(b_shape[-1])
    return TensorProxy(shape=shape, dtype=a.dtype, device=a.device, requires_grad=rg)


matmul = make_prim("matmul", _matmul_meta, tags=(OpTag.MATMUL,))


def _linear_meta(a: Any, w: Any, bias: Any) -> TensorProxy:
    a, w = check_tensor(a, "prims.linear"), check_tensor(w, "prims.linear")
    check(w.ndim in (1, 2), lambda: f"linear: weight must be 1D or 2D, got {w.ndim}D")
    check(a.ndim >= 1, "linear: input must be at least 1D")
    check(
        a.dtype == w.dtype,
        lambda: (
            f"expected m1 and m2 to have the same dtype, but got: {a.dtype.name} != {w.dtype.name}"
        ),
    )
    in_features = w.shape[-1]
    check(
        a.shape[-1] == in_features,
        lambda: (
            f"mat1 and mat2 shapes cannot be multiplied ({'x'.join(map(str, a.shape[-2:] if a.ndim > 1 else (1, *a.shape)))} and {in_features}x{w.shape[0] if w.ndim == 2 else 1})"
        ),
    )
    out_shape = list(a.shape[:-1]) + ([w.shape[0]] if w.ndim == 2 else [])
    rg = a.requires_grad or w.requires_grad
    if bias is not None:
        bias = check_tensor(bias, "prims.linear")
        check(
            bias.dtype == a.dtype,
            lambda: (
                f"linear: bias dtype {bias.dtype.name} does not match input dtype {a.dtype.name}"
            ),
        )
        rg = rg or bias.requires_grad
    check_same_device([t for t in (a, w, bias) if t is not None], "prims.linear")
    return TensorProxy(shape=out_shape, dtype=a.dtype, device=a.device, requires_grad=rg)


linear = make_prim("linear", _linear_meta, tags=(OpTag.MATMUL,))


def _convolution_meta(
    a: Any,
    weight: Any,
    bias: Any,
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    transposed: bool,
    output_padding: Sequence[int],
    groups: int,
) -> TensorProxy:
    a, weight = check_tensor(a, "prims.convolution"), check_tensor(weight, "prims.convolution")
    nd = weight.ndim - 2
    check(nd >= 1, "convolution: weight must have at least 3 dimensions")
    check(
        a.ndim == nd + 2,
        lambda: f"Expected {nd + 2}D input to convolution, but got input of size: {list(a.shape)}",
    )
    check(
        a.dtype == weight.dtype,
        lambda: (
            f"Input type ({a.dtype.name}) and weight type ({weight.dtype.name}) should be the same"
        ),
    )
    stride, padding, dilation, output_padding = (
        tuple(x) * (nd if len(x) == 1 else 1) for x in (stride, padding, dilation, output_padding)
    )
    check(groups >= 1, "non-positive groups is not supported")
    batch, c_in = a.shape[0], a.shape[1]
    if not transposed:
        check(
            c_in == weight.shape[1] * groups,
            lambda: (
                f"Given groups={groups}, weight of size {list(weight.shape)}, expected input{list(a.shape)} to have {weight.shape[1] * groups} channels, but got {c_in} channels instead"
            ),
        )
        c_out = weight.shape[0]
        spatial = []
        for i in range(nd):
            k = dilation[i] * (weight.shape[i + 2] - 1) + 1
            size = (a.shape[i + 2] + 2 * padding[i] - k) // stride[i] + 1
            check(
                size > 0,
                lambda: (
                    f"Calculated output size is too small for input {list(a.shape)} and kernel {list(weight.shape)}"
                ),
            )
            spatial.append(size)
    else:
        check(
            c_in == weight.shape[0],
            lambda: f"expected input to have {weight.shape[0]} channels, got {c_in}",
        )
        c_out = weight.shape[1] * groups
        spatial = [
            (a.shape[i + 2] - 1) * stride[i]
            - 2 * padding[i]
            + dilation[i] * (weight.shape[i + 2] - 1)
            + output_padding[i]
            + 1
            for i in range(nd)
        ]
    rg = a.requires_grad or weight.requires_grad
    if bias is not None:
        bias = check_tensor(bias, "prims.convolution")
        check(
            bias.shape == (c_out,),
            lambda: f"convolution: bias must have shape ({c_out},), got {bias.shape}",
        )
        rg = rg or bias.requires_grad
    return TensorProxy(
        shape=(batch, c_out, *spatial), dtype=a.dtype, device=a.device, requires_grad=rg
    )


convolution = make_prim("convolution", _convolution_meta)


def _embedding_meta(indices: Any, weight: Any) -> TensorProxy:
    indices, weight = (
        check_tensor(indices, "prims.embedding"),
        check_tensor(weight, "prims.embedding"),
    )
    check(weight.ndim == 2, lambda: f"'weight' must be 2-D, got {weight.ndim}-D")
    check(
        indices.dtype in (dtypes.int64, dtypes.int32),
        lambda: (
            f"Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got {indices.dtype.name} instead"
        ),
        RuntimeError,
    )
    return TensorProxy(
        shape=(*indices.shape, weight.shape[1]),
        dtype=weight.dtype,
        device=weight.device,
        requires_grad=weight.requires_grad,
    )


embedding = make_prim("embedding", _embedding_meta, tags=_VALUE_ERRORS)
