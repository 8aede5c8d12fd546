"""Torch callables whose result's shape depends on tensor data: ``nonzero``, ``argwhere``,
one-argument ``where``, ``masked_select`` and indexing with a boolean mask (reading and
writing).

Each is ``prims.nonzero`` (``thunder_ir/prims/data.py``) and static-shape ops on its result: the
number of selected elements is a value read from tensor data, a symbolic size of the trace,
defined by the prim at the top level of the trace. These are plain functions, not ops: an op's
decomposition is recorded inside its bound symbol, where a size it defined would not be a value of
the trace. Where tracing cannot read data (no reader, or inside an op), they raise
``DataDependentError`` as before.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch

from thunder_ir import dtypes, prims
from thunder_ir.aliasing import alias_info, writes_in_place, written_inputs
from thunder_ir.ops import indexing
from thunder_ir.ops._helpers import to_dtype
from thunder_ir.ops.elementwise_binary import where as _where3
from thunder_ir.ops.shape import broadcast_tensors
from thunder_ir.proxies import IntegerProxy, TensorProxy, register_tensor_method
from thunder_ir.symbol import BoundSymbol
from thunder_ir.trace import Trace
from thunder_ir.tracectx import get_tracectx
from thunder_ir.utils import check

__all__ = ["argwhere", "getitem", "mask_of_column", "masked_select", "nonzero", "setitem", "where"]


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
    if not _is_mask(mask):
        return getitem(a, mask)
    indices = _indices_of_mask(mask)
    return indexing.masked_select_at(
        a, tuple(_mask_column(mask, indices, j) for j in range(mask.ndim))
    )


def _column(indices: TensorProxy, j: int) -> Any:
    column = indexing.getitem(indices, (slice(None), j))
    trace = get_tracectx()
    if trace is not None:  # indices of nonzero elements: never negative
        trace.nonnegative.add(column.name)
    return column


# The columns of a mask's nonzero indices made to index with the mask (``x[m]``,
# ``masked_select``, ``x[m] = v``), by id, with the mask: eager indexes with the mask itself and
# its backward saves it (a write into the mask after the call raises there), where
# ``torch.nonzero``/``torch.where(m)`` the program calls itself are what eager saves.
_MASK_COLUMNS: dict[int, tuple[weakref.ref[TensorProxy], TensorProxy]] = {}


def _mask_column(mask: TensorProxy, indices: TensorProxy, j: int) -> Any:
    column = _column(indices, j)
    key = id(column)

    def forget(_: object) -> None:
        _MASK_COLUMNS.pop(key, None)

    _MASK_COLUMNS[key] = (weakref.ref(column, forget), mask)
    return column


def mask_of_column(p: TensorProxy) -> TensorProxy | None:
    """The mask that ``p``, a column of its nonzero indices, stands for where the program
    indexed with the mask (see ``_MASK_COLUMNS``); None for any other tensor."""
    found = _MASK_COLUMNS.get(id(p))
    return found[1] if found is not None and found[0]() is p else None


# Per trace: a mask's nonzero indices, by the mask's name, with the number of bound symbols then.
_MASK_INDICES: weakref.WeakKeyDictionary[Trace, dict[str, tuple[TensorProxy, int]]] = (
    weakref.WeakKeyDictionary()
)


def _indices_of_mask(mask: TensorProxy) -> TensorProxy:
    """``prims.nonzero(mask)``'s indices, once per mask while nothing writes into it: every
    selection by one mask then has the same count (one symbolic size), and the ops between them
    (``y[m] += o[m]``, ``y[y < 0] *= 3``) decide nothing on it. The indices are never the
    caller's (``torch.nonzero`` makes its own), so nothing else writes them."""
    trace = get_tracectx()
    if trace is None:
        return prims.nonzero(mask)[0]  # type: ignore[no-any-return]
    known = _MASK_INDICES.setdefault(trace, {})
    found = known.get(mask.name)
    bsyms = trace.bound_symbols
    if (
        found is not None
        and _recorded_at(bsyms, found)
        and not _written_since(bsyms, mask, found[1])
    ):
        return found[0]
    indices, _ = prims.nonzero(mask)
    known[mask.name] = (indices, len(bsyms))
    return indices  # type: ignore[no-any-return]


def _recorded_at(bsyms: list[BoundSymbol], found: tuple[TensorProxy, int]) -> bool:
    """Whether the nonzero that made ``found``'s indices is still the bound symbol before its
    position (not one recorded in a scope the trace dropped)."""
    indices, end = found
    return 0 < end <= len(bsyms) and any(
        getattr(o, "name", None) == indices.name for o in bsyms[end - 1].flat_outs
    )


def _written_since(bsyms: list[BoundSymbol], t: TensorProxy, start: int) -> bool:
    """Whether a bound symbol from ``start`` on writes into ``t`` (or memory it shares)."""
    later = [b for b in bsyms[start:] if writes_in_place(b)]
    if not later:
        return False
    info = alias_info(bsyms)
    root = info.root(t.name)
    return any(info.root(n) == root for b in later for n in written_inputs(b))


def _is_mask(e: Any) -> bool:
    return isinstance(e, TensorProxy) and e.dtype in (dtypes.bool8, dtypes.uint8) and e.ndim > 0


def getitem(a: Any, key: Any) -> Any:
    """``a[key]``: a boolean mask among the indices selects its nonzero positions (the mask's
    ``k`` dimensions become one, indexed by the ``k`` columns of ``nonzero(mask)``)."""
    entries = key if isinstance(key, tuple) else (key,)
    if not any(_is_mask(e) for e in entries):
        return indexing.getitem(a, key)
    return indexing.getitem(a, _masks_as_indices(a, entries))


def setitem(a: Any, key: Any, value: Any) -> Any:
    """``a[key] = value``. A boolean mask alone with one value for every selected element is a
    ``where`` (no read of data); with one value per selected element (``x[m] = v[m]``, ``y[y <
    0] *= 3``) or among other indices, the mask is the columns of its nonzero indices, as in
    ``getitem``: the written positions and the values' shape check are then eager's."""
    entries = key if isinstance(key, tuple) else (key,)
    masks = [e for e in entries if _is_mask(e)]
    if not isinstance(a, TensorProxy) or not masks or not _can_read_data():
        return indexing.setitem_(a, key, value)  # (refusing the rest as before)
    if len(entries) == 1 and not _one_value_per_element(a, masks[0], value):
        return indexing.setitem_(a, key, value)
    if (
        isinstance(value, TensorProxy)
        and value.dtype != a.dtype
        and _eager_fills(a, entries, value)
    ):
        if not all(isinstance(s, int) for s in value.shape):
            _check_one_element(a, value)  # one per selected element: eager's other counts raise
        value = to_dtype(value, a.dtype)  # as eager's masked_fill_ (the cast cannot overflow)
        if value.device != a.device:
            value = prims.device_put(value, a.device)
    if not MASKED_WRITES_COMPILE or _eager_may_cast(a, value):
        return indexing.setitem_(a, key, value)  # refused: the call runs split
    return indexing.setitem_(a, _masks_as_indices(a, entries), value)


# Writes of one value per selected element compile as an ``index_put`` at the mask's indices
# when on (off: they run split). Their count's check may come after a write into an input,
# deferred past it onto a copy with the input's strides (``binding/decisions.py``).
MASKED_WRITES_COMPILE = True


def _eager_may_cast(a: TensorProxy, value: Any) -> bool:
    """Whether eager's write may differ from an ``index_put`` at the mask's indices: eager
    writes a one-element value through a mask as ``masked_fill_`` (it casts, and takes a value on
    the CPU), and any other count as ``index_put_`` (it raises for another dtype or device)."""
    if not isinstance(value, TensorProxy):
        return False  # a number: eager makes it a tensor of ``a``'s dtype
    return value.dtype != a.dtype or (value.device != a.device and value.ndim > 0)


def _eager_fills(a: TensorProxy, entries: tuple[Any, ...], value: TensorProxy) -> bool:
    """Whether eager writes ``value`` as ``masked_fill_`` (one element on the CPU, the mask on
    ``a``'s device the only index tensor), and its cast to ``a``'s dtype never overflows (where
    ``masked_fill_`` would raise)."""
    tensors = [e for e in entries if not isinstance(e, (slice, int, IntegerProxy, type(None)))]
    tensors = [e for e in tensors if e is not Ellipsis]
    return (
        len(tensors) == 1
        and _is_mask(tensors[0])
        and tensors[0].device == a.device
        and value.device.type == "cpu"
        and all(not isinstance(s, int) or s == 1 for s in value.shape)
        and _casts_without_overflow(value.dtype, a.dtype)
    )


def _check_one_element(a: TensorProxy, value: TensorProxy) -> None:
    """``index_put_``'s dtype error where ``value``, sized by a count read from data, has not one
    element (eager's ``masked_fill_`` casts only one)."""
    count: Any = 1
    for s in value.shape:
        count = count * s
    one = prims.eq(prims.full((), count, device=value.device, dtype=dtypes.int64), 1)
    names = [str(torch.empty(0, dtype=dtypes.to_torch_dtype(t.dtype)).type()) for t in (a, value)]
    destination, source = (n.removeprefix("torch.").removesuffix("Tensor") for n in names)
    prims.check_values(
        one,
        f"Index put requires the source and destination dtypes match, got {destination} for the "
        f"destination and {source} for the source.",
    )


def _casts_without_overflow(source: dtypes.DType, target: dtypes.DType) -> bool:
    if source.is_boolean:
        return True
    if source.is_complex or target.is_complex or target.is_boolean:
        return False
    if source.is_inexact and not target.is_inexact:
        return False
    source_t, target_t = dtypes.to_torch_dtype(source), dtypes.to_torch_dtype(target)
    assert source_t is not None and target_t is not None
    info = torch.finfo if source.is_inexact else torch.iinfo
    target_info = torch.finfo if target.is_inexact else torch.iinfo
    return bool(
        target_info(target_t).min <= info(source_t).min
        and info(source_t).max <= target_info(target_t).max
    )


def _can_read_data() -> bool:
    trace = get_tracectx()
    return trace is not None and trace.read_data is not None and trace.at_top_level()


def _one_value_per_element(a: TensorProxy, mask: TensorProxy, value: Any) -> bool:
    """Whether ``value`` has a dimension for the selected elements: more dimensions than what
    each selected element is (``a``'s past the mask's), not only leading ones of size 1."""
    if not isinstance(value, TensorProxy):
        return False
    lead = value.ndim - (a.ndim - mask.ndim)
    return lead >= 1 and not all(isinstance(s, int) and s == 1 for s in value.shape[:lead])


def _masks_as_indices(a: TensorProxy, entries: tuple[Any, ...]) -> tuple[Any, ...]:
    """``entries`` with each boolean mask replaced by the columns of its nonzero indices."""
    new: list[Any] = []
    used = sum(_dims_indexed(e) for e in entries)
    dim = 0  # the dimension of ``a`` the next entry indexes
    for e in entries:
        if _is_mask(e):
            _check_mask_shape(a, e, dim)
            dim += e.ndim
            indices = _indices_of_mask(e)
            new.extend(_mask_column(e, indices, j) for j in range(e.ndim))
            continue
        new.append(e)
        # an Ellipsis spans the dimensions the other entries leave
        dim += max(a.ndim - used, 0) if e is Ellipsis else _dims_indexed(e)
    return tuple(new)


def _dims_indexed(e: Any) -> int:
    if e is None or e is Ellipsis or isinstance(e, bool):
        return 0
    if isinstance(e, TensorProxy) and e.dtype in (dtypes.bool8, dtypes.uint8):
        return e.ndim  # a mask (a 0-dim one indexes none, as None)
    return 1


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
register_tensor_method("__setitem__", setitem)
