"""Torch callables whose result's shape depends on tensor data: ``nonzero``, ``argwhere``,
one-argument ``where``, ``masked_select`` and indexing with a boolean mask.

Each is ``prims.nonzero`` (``thunder_ir/prims/data.py``) and static-shape ops on its result: the
number of selected elements is a value read from tensor data, a symbolic size of the trace,
defined by the prim at the top level of the trace. These are plain functions, not ops: an op's
decomposition is recorded inside its bound symbol, where a size it defined would not be a value of
the trace. Where tracing cannot read data (no reader, or inside an op), they raise
``DataDependentError`` as before.
"""

from __future__ import annotations

from typing import Any

from thunder_ir import dtypes, prims
from thunder_ir.ops import indexing
from thunder_ir.ops.elementwise_binary import where as _where3
from thunder_ir.ops.shape import broadcast_tensors
from thunder_ir.proxies import TensorProxy, register_tensor_method
from thunder_ir.tracectx import get_tracectx
from thunder_ir.utils import check

__all__ = ["argwhere", "getitem", "masked_select", "nonzero", "where"]


def nonzero(a: Any, *, as_tuple: bool = False) -> Any:
    """``torch.nonzero(a)``: the indices of ``a``'s nonzero elements, one row each."""
    check(isinstance(a, TensorProxy), lambda: f"nonzero(): expected a tensor, got {type(a)}")
    if as_tuple and a.ndim == 0:
        a = prims.reshape(a, (1,))  # torch answers as for one element: (indices of it,)
    indices, _ = prims.nonzero(a)
    if as_tuple:
        return tuple(_column(indices, j) for j in range(a.ndim))
    return indices


def argwhere(a: Any) -> Any:
    return nonzero(a)


def where(condition: Any, a: Any = None, b: Any = None) -> Any:
    """``torch.where``: with one argument, ``nonzero(condition, as_tuple=True)``."""
    if a is None and b is None:
        return nonzero(condition, as_tuple=True)
    return _where3(condition, a, b)


def masked_select(a: Any, mask: Any) -> Any:
    """``torch.masked_select``: the elements of ``a`` where ``mask`` (broadcast together), in
    order, as one dimension."""
    check(
        isinstance(mask, TensorProxy) and mask.dtype == dtypes.bool8,
        "masked_select: expected BoolTensor for mask",
    )
    a, mask = broadcast_tensors(a, mask)
    return getitem(a, mask)


def _column(indices: TensorProxy, j: int) -> Any:
    column = indexing.getitem(indices, (slice(None), j))
    trace = get_tracectx()
    if trace is not None:  # indices of nonzero elements: never negative
        trace.nonnegative.add(column.name)
    return column


def _is_mask(e: Any) -> bool:
    return isinstance(e, TensorProxy) and e.dtype in (dtypes.bool8, dtypes.uint8) and e.ndim > 0


def getitem(a: Any, key: Any) -> Any:
    """``a[key]``: a boolean mask among the indices selects its nonzero positions (the mask's
    ``k`` dimensions become one, indexed by the ``k`` columns of ``nonzero(mask)``)."""
    entries = key if isinstance(key, tuple) else (key,)
    if not any(_is_mask(e) for e in entries):
        return indexing.getitem(a, key)
    new: list[Any] = []
    dim: int | None = 0  # the dimension of ``a`` the next entry indexes (None after an Ellipsis)
    for e in entries:
        if _is_mask(e):
            if dim is not None:
                _check_mask_shape(a, e, dim)
                dim += e.ndim
            indices, _ = prims.nonzero(e)
            new.extend(_column(indices, j) for j in range(e.ndim))
            continue
        new.append(e)
        if e is Ellipsis:
            dim = None
        elif e is not None and not isinstance(e, bool) and dim is not None:
            dim += 1
    return indexing.getitem(a, tuple(new))


def _check_mask_shape(a: TensorProxy, mask: TensorProxy, dim: int) -> None:
    sizes = tuple(a.shape[dim : dim + mask.ndim])
    check(
        len(sizes) == mask.ndim,
        lambda: f"too many indices for tensor of dimension {a.ndim}",
        IndexError,
    )
    for i, (m, s) in enumerate(zip(mask.shape, sizes)):
        check(
            m == s,
            lambda i=i: (
                f"The shape of the mask {list(mask.shape)} at index {i} does not match the shape "
                f"of the indexed tensor {list(a.shape)} at index {dim + i}"
            ),
            IndexError,
        )


# Tensor methods: ``mask.nonzero()``, ``x.masked_select(m)``, ``x[mask]``.
register_tensor_method("nonzero", nonzero)
register_tensor_method("argwhere", argwhere)
register_tensor_method("masked_select", masked_select)
register_tensor_method("__getitem__", getitem)  # after indexing's (imported above)
