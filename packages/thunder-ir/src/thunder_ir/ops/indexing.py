"""Indexing torch-language ops: ``tensor[key]``, ``tensor[key] = value``, gather/scatter and friends.

Basic indexing (ints, slices, None, Ellipsis) is slicing and squeezing, and returns a view in torch;
advanced indexing (integer tensors or lists) copies: the op ``advanced_index`` (torch's
``aten.index``), written with ``index_select`` on a linearized index. ``getitem`` is tagged
``OpTag.VIEW``: a pass that needs to know whether one call aliases its input asks
``getitem_is_view(key)``. Boolean-mask indexing has a shape that depends on
the mask's values, which a trace cannot know: it raises UnsupportedOptionError (except where the
result's shape does not depend on them, as in ``t[mask] = 0``).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import torch

from thunder_ir import dtypes, prims
from thunder_ir.errors import DataDependentError, UnsupportedOptionError
from thunder_ir.known_numbers import index_value
from thunder_ir.ops._helpers import broadcast_shapes, expand_to, to_dtype
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.elementwise import check_number_fits, check_value_fits, number_overflows
from thunder_ir.ops.shape import (
    check_tensor_arg,
    contiguous,
    movedim,
    reshape_to,
    same_shape,
    shape_str,
    slice_in_dim,
    zero_of,
)
from thunder_ir.proxies import IntegerProxy, NumberProxy, TensorProxy
from thunder_ir.sizes import same_size
from thunder_ir.tags import OpTag
from thunder_ir.tracectx import get_tracectx
from thunder_ir.utils import canonicalize_dim, check

__all__ = ["getitem_is_view"]

_INDEX_DTYPES = (dtypes.int64, dtypes.int32)


def _is_int(x: Any) -> bool:
    return (isinstance(x, int) and not isinstance(x, bool)) or (
        isinstance(x, NumberProxy) and x.python_type is int
    )


def _is_advanced(x: Any) -> bool:
    return isinstance(x, (TensorProxy, list, tuple))


def getitem_is_view(key: Any) -> bool:
    """Whether ``t[key]`` returns a view of ``t`` in torch (basic indexing only)."""
    entries = key if isinstance(key, tuple) else (key,)
    return not any(_is_advanced(e) for e in entries)


# Parsing a key ------------------------------------------------------------------------------------

# One entry of a parsed key, in order: ("none",), ("bool", value), ("int", dim, index),
# ("slice", dim, start, stop, step) and ("adv", dim, index) with ``dim`` a dimension of the input.
Item = tuple[Any, ...]


def _consumed(entry: Any) -> int:
    if entry is None or entry is Ellipsis or isinstance(entry, bool):
        return 0
    if isinstance(entry, TensorProxy) and entry.dtype == dtypes.bool8:
        return entry.ndim
    return 1


def _check_entry(entry: Any) -> None:
    ok = (
        entry is None
        or entry is Ellipsis
        or isinstance(entry, (bool, slice, TensorProxy, list, tuple))
        or _is_int(entry)
    )
    check(
        ok,
        lambda: (
            "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices "
            f"(got {type(entry).__name__})"
        ),
        IndexError,
    )


def parse_key(a: TensorProxy, key: Any) -> list[Item]:
    """The entries of ``key`` with Ellipsis expanded and ints and slices made canonical."""
    entries = key if isinstance(key, tuple) else (key,)
    for e in entries:
        _check_entry(e)
    check(
        sum(1 for e in entries if e is Ellipsis) <= 1,
        "an index can only have a single ellipsis ('...')",
        IndexError,
    )
    used = sum(_consumed(e) for e in entries)
    check(used <= a.ndim, lambda: f"too many indices for tensor of dimension {a.ndim}", IndexError)
    items: list[Item] = []
    dim = 0
    for e in entries:
        if e is None:
            items.append(("none",))
        elif isinstance(e, bool):
            items.append(("bool", e))
        elif e is Ellipsis:
            for _ in range(a.ndim - used):
                items.append(("slice", dim, 0, a.shape[dim], 1))
                dim += 1
        elif isinstance(e, slice):
            items.append(("slice", dim, *_canonical_slice(e, a.shape[dim])))
            dim += 1
        elif isinstance(e, TensorProxy) and e.dtype == dtypes.bool8:
            raise DataDependentError(
                "indexing with a boolean mask gives a result whose shape depends on the mask's "
                "values, which a trace cannot know; torch.where(mask, x, other) or "
                "x.masked_fill(~mask, value) compute with the mask instead"
            )
        elif _is_advanced(e):
            items.append(("adv", dim, e))
            dim += 1
        else:
            size = a.shape[dim]
            check(
                -size <= e < size,
                lambda: f"index {e} is out of bounds for dimension {dim} with size {size}",
                IndexError,
            )
            items.append(("int", dim, e + size if e < 0 else e))
            dim += 1
    return items


def _slice_bound(x: Any) -> Any:
    """A 0-dim integer tensor in a slice as Python reads it (``__index__``): its number."""
    if isinstance(x, TensorProxy) and x.ndim == 0 and x.dtype.is_exact and not x.dtype.is_boolean:
        return index_value(x)
    return x


def _is_slice_index(x: Any) -> bool:
    """What Python accepts in a slice of a tensor: None, an int (or symbolic int), an object with
    ``__index__`` (a float, symbolic or not, is refused)."""
    if x is None or isinstance(x, IntegerProxy):
        return True
    if isinstance(x, (NumberProxy, float)):
        return False
    return hasattr(type(x), "__index__")


def _canonical_slice(s: slice, size: Any) -> tuple[Any, Any, Any]:
    s = slice(*(_slice_bound(x) for x in (s.start, s.stop, s.step)))
    check(
        all(_is_slice_index(x) for x in (s.start, s.stop, s.step)),
        "slice indices must be integers or None or have an __index__ method",
        TypeError,
    )
    step = 1 if s.step is None else s.step
    check(step > 0, "step must be greater than zero", ValueError)

    def bound(x: Any, default: Any) -> Any:
        if x is None:
            return default
        if x < 0:
            x = x + size
            return 0 if x < 0 else x
        return size if x > size else x

    start, stop = bound(s.start, 0), bound(s.stop, size)
    if stop < start:
        stop = start
    return start, stop, step


# Getting ----------------------------------------------------------------------------------------


def _index_tensor(x: Any, device: Any) -> TensorProxy:
    """An int64 index tensor from an index tensor or a (nested) list of ints."""
    if isinstance(x, TensorProxy):
        check(
            x.dtype in _INDEX_DTYPES or x.dtype == dtypes.uint8,
            lambda: (
                f"tensors used as indices must be long, int, byte or bool tensors, got {x.dtype.name}"
            ),
            IndexError,
        )
        check(
            x.dtype != dtypes.uint8,
            "indexing with a uint8 (byte) mask is not supported",
            UnsupportedOptionError,
        )
        return to_dtype(x, dtypes.int64)  # type: ignore[no-any-return]
    shape: list[int] = []
    level: Any = x
    while isinstance(level, (list, tuple)):
        shape.append(len(level))
        level = level[0] if level else 0
    flat: list[Any] = []

    def walk(v: Any, depth: int) -> None:
        if depth == len(shape):
            if isinstance(v, bool) or (isinstance(v, NumberProxy) and v.python_type is bool):
                raise UnsupportedOptionError(
                    "indexing with a list of bools is a mask whose result shape depends on its values"
                )
            check(
                _is_int(v),
                lambda: f"index lists must hold ints, got {type(v).__name__}",
                IndexError,
            )
            flat.append(v)
            return
        check(
            isinstance(v, (list, tuple)) and len(v) == shape[depth],
            "index lists must be rectangular",
            IndexError,
        )
        for w in v:
            walk(w, depth + 1)

    walk(x, 0)
    n = len(flat)
    if n == 0:
        t = prims.full((0,), 0, device=device, dtype=dtypes.int64)
    elif n == 1 or (
        all(isinstance(v, int) for v in flat)
        and len({b - a for a, b in zip(flat, flat[1:])}) == 1
        and flat[1] != flat[0]
    ):
        t = prims.iota(
            n,
            start=flat[0],
            step=(flat[1] - flat[0]) if n > 1 else 1,
            device=device,
            dtype=dtypes.int64,
        )
    else:
        t = prims.cat([prims.full((1,), v, device=device, dtype=dtypes.int64) for v in flat], 0)
    return t if len(shape) == 1 else prims.reshape(t, tuple(shape))  # type: ignore[no-any-return]


def _wrap_negative(index: TensorProxy, size: Any) -> TensorProxy:
    trace = get_tracectx()
    if trace is not None and index.name in trace.nonnegative:
        return index  # the indices of nonzero elements (data_shapes)
    return prims.where(prims.lt(index, 0), prims.add(index, size), index)  # type: ignore[no-any-return]


def _negative_out_of_bounds(index: TensorProxy, size: Any) -> TensorProxy:
    """``index`` for a write that torch refuses a negative index for (scatter, index_add,
    index_copy): each negative one moved below ``-size``, so that the write raises as torch
    does, where a wrapped one would write to the wrong element."""
    trace = get_tracectx()
    if trace is not None and index.name in trace.nonnegative:
        return index
    return prims.where(prims.lt(index, 0), prims.sub(index, size), index)  # type: ignore[no-any-return]


def _advanced(out: TensorProxy, adv: list[tuple[int, Any]]) -> TensorProxy:
    """``out`` indexed at dims ``adv`` (positions in ``out``) by integer tensors, as torch does: the
    broadcast index shape replaces the indexed dims if they are adjacent, else it goes first."""
    positions = [p for p, _ in adv]
    indices = [_index_tensor(x, out.device) for _, x in adv]
    bshape = broadcast_shapes(*(i.shape for i in indices))
    adjacent = positions == list(range(positions[0], positions[0] + len(positions)))
    if not adjacent:
        rest = [d for d in range(out.ndim) if d not in positions]
        out = prims.transpose(out, (*positions, *rest))
        positions = list(range(len(positions)))
    first, last = positions[0], positions[-1]
    linear: Any = None
    for p, index in zip(positions, indices):
        index = expand_to(_wrap_negative(index, out.shape[p]), bshape)
        linear = index if linear is None else prims.add(prims.mul(linear, out.shape[p]), index)
    assert linear is not None
    block: Any = 1
    for p in positions:
        block = block * out.shape[p]
    merged = reshape_to(out, (*out.shape[:first], block, *out.shape[last + 1 :]))
    n: Any = 1
    for s in bshape:
        n = n * s
    picked = prims.index_select(merged, first, reshape_to(linear, (n,)))
    return reshape_to(picked, (*out.shape[:first], *bshape, *out.shape[last + 1 :]))


def _apply_items(a: TensorProxy, items: list[Item]) -> TensorProxy:
    out = a
    d = 0  # the dimension of ``out`` the next item applies to
    shift = 0  # dims of ``out`` minus dims of ``a`` before position d
    adv: list[tuple[int, Any]] = []
    for item in items:
        kind = item[0]
        if kind in ("none", "bool"):
            out = prims.unsqueeze(out, d)
            if kind == "bool" and not item[1]:
                out = slice_in_dim(out, d, 0, 0)
            d += 1
            shift += 1
        elif kind == "int":
            out = prims.squeeze(slice_in_dim(out, d, item[2], item[2] + 1), (d,))
            shift -= 1
        elif kind == "slice":
            _, dim, start, stop, step = item
            size = a.shape[dim]
            full = stop is size or (
                isinstance(stop, int) and isinstance(size, int) and stop == size
            )
            if not (isinstance(start, int) and start == 0 and full and step == 1):
                out = slice_in_dim(out, d, start, stop, step)
            d += 1
        else:
            adv.append((d, item[2]))
            d += 1
    if adv:
        indices: list[Any] = [None] * (adv[-1][0] + 1)
        for p, x in adv:
            indices[p] = _index_tensor(x, out.device)
        return advanced_index(out, tuple(indices))  # type: ignore[no-any-return]
    return out if out is not a else prims.shallow_copy(a)  # type: ignore[no-any-return]


@torchop(name="advanced_index")
def advanced_index(a: Any, indices: Sequence[Any]) -> Any:
    """``a`` indexed by int64 tensors at the dimensions where ``indices`` holds one (None: the
    whole dimension), as ``torch.ops.aten.index``: ``getitem`` after its basic entries. Eager runs
    it as one kernel, and so does the torch_ops executor; decomposed, it is an ``index_select``
    of the linearized index."""
    return _advanced(a, [(d, i) for d, i in enumerate(indices) if i is not None])


@torchop(name="masked_select_at")
def masked_select_at(a: Any, indices: Sequence[Any]) -> Any:
    """``torch.masked_select``'s gather: ``advanced_index`` at a mask's nonzero indices (one
    column per dimension, distinct positions). An op of its own for its gradient: eager's
    masked_scatter into zeros writes the gradient (a -0 stays), where indexing adds it to 0."""
    return advanced_index(a, indices)


@torchop("torch.Tensor.__getitem__", name="getitem", tags=(OpTag.SHAPE_OP, OpTag.VIEW))
def getitem(a: Any, key: Any) -> Any:
    a = check_tensor_arg(a, "__getitem__", "self")
    if a.ndim == 0:
        entries = key if isinstance(key, tuple) else (key,)
        for e in entries:
            check(
                e is None
                or e is Ellipsis
                or isinstance(e, bool)
                or (isinstance(e, slice) and e == slice(None)),
                "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim tensor to a number",
                IndexError,
            )
    return _apply_items(a, parse_key(a, key))


# Setting ----------------------------------------------------------------------------------------


def _check_broadcasts_to(value_shape: Sequence[Any], shape: Sequence[Any]) -> None:
    """Eager's check that assigned values broadcast to the indexing result (one way: ``[3]`` to
    ``[1]`` does not). A symbolic size is compared for equality first, unless it is 1 on this
    call: values with one per selected element (``x[m] = v``) then decide nothing on the count."""
    for v, s in zip(reversed(value_shape), reversed(shape)):
        if same_size(v, s) or (isinstance(v, int) and v == 1):
            continue
        if isinstance(v, int) and isinstance(s, int):
            fits = v == s
        elif getattr(v, "value", None) == 1:
            fits = bool(v == 1)  # the decision a gradient summing over it relies on (was_one)
        else:
            fits = bool(v == s) or bool(v == 1)
        check(
            fits,
            lambda: (
                f"shape mismatch: value tensor of shape {shape_str(value_shape)} cannot be broadcast to indexing result of shape {shape_str(shape)}"
            ),
        )


def _value_tensor(
    a: TensorProxy, value: Any, shape: Sequence[Any], *, casts: bool = True
) -> TensorProxy:
    """``value`` (a tensor or a number) as ``a``'s dtype, broadcast to ``shape``. ``casts``:
    whether eager casts a tensor of another dtype (a ``copy_``; else an ``index_put_``, which
    raises for it)."""
    if isinstance(value, TensorProxy):
        if not casts:
            _check_put_dtype(a, value)
        check(
            value.ndim <= len(shape)
            or all(isinstance(s, int) and s == 1 for s in value.shape[: value.ndim - len(shape)]),
            lambda: (
                f"shape mismatch: value tensor of shape {shape_str(value.shape)} cannot be broadcast to indexing result of shape {shape_str(shape)}"
            ),
        )
        if value.ndim > len(shape):
            value = prims.reshape(value, tuple(value.shape[value.ndim - len(shape) :]))
        _check_broadcasts_to(value.shape, shape)
        v = to_dtype(value, a.dtype)
        if v.device != a.device:
            v = prims.device_put(v, a.device)
        return expand_to(v, tuple(shape))
    check(
        isinstance(value, (bool, int, float, complex, NumberProxy)),
        lambda: f"can't assign a {type(value).__name__} to a tensor",
        TypeError,
    )
    return _written_number(a, value, tuple(shape))


def _written_number(a: TensorProxy, value: Any, shape: tuple[Any, ...]) -> TensorProxy:
    """The number eager's ``t[key] = number`` writes (its ``scalarToTensor``), filling
    ``shape``: converted to ``a``'s dtype with the range checked, except that float16 and
    bfloat16 take any double (one out of their range rounds to an infinity)."""
    low_precision = a.dtype in (dtypes.float16, dtypes.bfloat16)
    if isinstance(value, NumberProxy):
        if low_precision and value.python_type in (int, float):
            # converted when the program runs, as eager converts it (every such number fits a double)
            wide = prims.full(shape, value, device=a.device, dtype=dtypes.float64)
            return prims.convert_element_type(wide, a.dtype)  # type: ignore[no-any-return]
        check_number_fits(value, a.dtype)
        return prims.full(shape, value, device=a.device, dtype=a.dtype)  # type: ignore[no-any-return]
    check_number_fits(value, dtypes.float64 if low_precision else a.dtype)
    if isinstance(value, complex) and not a.dtype.is_complex:
        value = value.real  # what fits has no imaginary part
    if low_precision and number_overflows(value, a.dtype):
        torch_dtype = dtypes.to_torch_dtype(a.dtype)
        value = float(torch.tensor(float(value), dtype=torch.float64).to(torch_dtype))
    number = dtypes.python_type_of(a.dtype)(value)
    return prims.full(shape, number, device=a.device, dtype=a.dtype)  # type: ignore[no-any-return]


def _check_put_dtype(a: TensorProxy, value: TensorProxy) -> None:
    names = [str(torch.empty(0, dtype=dtypes.to_torch_dtype(t.dtype)).type()) for t in (a, value)]
    destination, source = (n.removeprefix("torch.").removesuffix("Tensor") for n in names)
    check(
        value.dtype == a.dtype,
        lambda: (
            f"Index put requires the source and destination dtypes match, got {destination} for "
            f"the destination and {source} for the source."
        ),
    )


def _set_basic(a: TensorProxy, items: list[Item], value: Any) -> TensorProxy:
    """``a`` with the region a basic key selects replaced by ``value``: pad + where."""
    if any(item[0] == "bool" and not item[1] for item in items):
        return a  # t[False] selects nothing (eager records no write)
    region = {item[1]: item for item in items if item[0] in ("int", "slice")}
    view_shape: list[Any] = []
    for item in items:
        if item[0] in ("none", "bool"):
            view_shape.append(1 if item[0] == "none" or item[1] else 0)
        elif item[0] == "slice":
            _, _, start, stop, step = item
            view_shape.append((stop - start + step - 1) // step)
    covered = max(region) + 1 if region else 0
    view_shape += list(a.shape[covered:])
    v = _value_tensor(a, value, view_shape)
    config, lengths = [], []
    for dim, size in enumerate(a.shape):
        entry = region.get(dim)
        if entry is None:
            start, length, step = 0, size, 1
        elif entry[0] == "int":
            start, length, step = entry[2], 1, 1
        else:
            start, length, step = (
                entry[2],
                (entry[3] - entry[2] + entry[4] - 1) // entry[4],
                entry[4],
            )
        lengths.append(length)
        if isinstance(length, int) and length == 0:
            return _unchanged_by_empty_write(a, v, value)
        config.append((start, size - start - ((length - 1) * step + 1), step - 1))
    v = reshape_to(v, lengths)
    padded = prims.pad(v, zero_of(a.dtype), config)
    mask = prims.pad(
        prims.full(tuple(lengths), True, device=a.device, dtype=dtypes.bool8), False, config
    )
    return prims.where(mask, padded, a)  # type: ignore[no-any-return]


def _unchanged_by_empty_write(a: TensorProxy, v: TensorProxy, value: Any) -> TensorProxy:
    """``a`` as it is, computed from the empty ``v`` written into it: eager records the empty
    write, so the result requires grad where ``value`` does (which gets a zero gradient)."""
    if not isinstance(value, TensorProxy):
        return a
    zero = prims.pad(reshape_to(v, (0,)), zero_of(a.dtype), [(0, 1, 0)])
    if a.ndim:
        zeros = prims.broadcast_in_dim(zero, tuple(a.shape), (a.ndim - 1,))
    else:
        zeros = reshape_to(zero, ())
    nowhere = prims.full(tuple(a.shape), False, device=a.device, dtype=dtypes.bool8)
    return prims.where(nowhere, zeros, a)  # type: ignore[no-any-return]


def _set_advanced(a: TensorProxy, key: Any, value: Any) -> TensorProxy:
    """``a`` with the elements an advanced key selects replaced: the key applied to the linear
    positions of ``a`` gives the positions to write."""
    numel = a.numel()
    positions = prims.reshape(
        prims.iota(numel, start=0, step=1, device=a.device, dtype=dtypes.int64), a.shape
    )
    selected = _apply_items(positions, parse_key(positions, key))
    # eager selects at a 0-dim integer tensor as at an int (basic indexing: a copy_, which casts)
    entries = key if isinstance(key, tuple) else (key,)
    casts = all(
        not _is_advanced(e)
        or (
            isinstance(e, TensorProxy)
            and e.ndim == 0
            and e.dtype not in (dtypes.bool8, dtypes.uint8)
        )
        for e in entries
    )
    v = _value_tensor(a, value, selected.shape, casts=casts)
    n = selected.numel()
    flat = reshape_to(a, (numel,))
    written = prims.index_put(flat, [reshape_to(selected, (n,))], reshape_to(v, (n,)), False)
    return reshape_to(written, a.shape)


def _set_mask(a: TensorProxy, mask: TensorProxy, value: Any) -> TensorProxy:
    """``a[mask] = value`` where value does not depend on how many elements the mask selects."""
    k = mask.ndim
    check(
        k <= a.ndim
        and all(
            not (isinstance(m, int) and isinstance(s, int)) or m == s
            for m, s in zip(mask.shape, a.shape)
        ),
        lambda: (
            f"The shape of the mask {shape_str(mask.shape)} does not match the shape of the indexed tensor {shape_str(a.shape)}"
        ),
        IndexError,
    )
    rest = tuple(a.shape[k:])
    if isinstance(value, TensorProxy):
        lead = value.ndim - len(rest)
        if lead > 1 or (
            lead == 1 and not (isinstance(value.shape[0], int) and value.shape[0] == 1)
        ):
            raise UnsupportedOptionError(
                "t[mask] = values with one value per selected element depends on how many elements the mask selects; "
                "use torch.where(mask, values, t) with values of t's shape instead"
            )
    # eager's index_put_ writes one element on the CPU through a mask as masked_fill_ (casting
    # ``value.item()``, checked); any other value must have ``a``'s dtype
    fills = (
        isinstance(value, TensorProxy)
        and k > 0
        and mask.device == a.device
        and value.device.type == "cpu"
        and all(isinstance(s, int) and s == 1 for s in value.shape)
    )
    if fills and value.dtype != a.dtype:
        check_value_fits(value, a.dtype)
    v = _value_tensor(a, value, rest, casts=fills)
    v = expand_to(v, a.shape) if not same_shape(v.shape, a.shape) else v
    m = prims.broadcast_in_dim(mask, a.shape, tuple(range(k))) if k != a.ndim else mask
    return prims.where(m, v, a)  # type: ignore[no-any-return]


@torchop("torch.Tensor.__setitem__", name="setitem_", tags=(OpTag.IN_PLACE,))
def setitem_(a: Any, key: Any, value: Any) -> Any:
    """``a[key] = value``: the written tensor, copied into ``a``; returns ``a``'s new value."""
    a = check_tensor_arg(a, "__setitem__", "self")
    entries = key if isinstance(key, tuple) else (key,)
    masks = [e for e in entries if isinstance(e, TensorProxy) and e.dtype == dtypes.bool8]
    if masks:
        check(
            len(entries) == 1,
            "indexing with a boolean mask together with other indices is not supported",
            UnsupportedOptionError,
        )
        new = _set_mask(a, masks[0], value)
    elif getitem_is_view(key):
        new = _set_basic(a, parse_key(a, key), value)
    else:
        new = _set_advanced(a, key, value)
    return prims.copy_(new, a)


# Gather, scatter, index_* -------------------------------------------------------------------------


def _check_index(
    index: Any, op: str, dtypes_: tuple[dtypes.DType, ...] = _INDEX_DTYPES
) -> TensorProxy:
    index = check_tensor_arg(index, op, "index")
    names = "int32/int64" if len(dtypes_) > 1 else "int64"
    check(index.dtype in dtypes_, lambda: f"{op}(): Expected dtype {names} for index", RuntimeError)
    return index  # type: ignore[no-any-return]


@torchop("torch.index_select", "torch.Tensor.index_select")
def index_select(a: Any, dim: int, index: Any) -> Any:
    a = check_tensor_arg(a, "index_select")
    index = _check_index(index, "index_select")
    check(index.ndim <= 1, "index_select(): Index is supposed to be a vector", IndexError)
    return prims.index_select(a, canonicalize_dim(a.ndim, dim), index)


def _check_gather_shapes(
    a: TensorProxy, d: int, index: TensorProxy, op: str, other: TensorProxy | None = None
) -> None:
    check(
        index.ndim == a.ndim
        or (a.ndim == 0 and index.ndim <= 1)
        or (index.ndim == 0 and a.ndim <= 1),
        f"Index tensor must have the same number of dimensions as {'input' if op == 'gather' else 'self'} tensor",
    )
    for i in range(index.ndim):
        if i == d or a.ndim == 0:
            continue
        check(
            index.shape[i] <= a.shape[i],
            lambda: (
                f"Size does not match at dimension {i} expected index {shape_str(index.shape)} to be no larger than self {shape_str(a.shape)} apart from dimension {d}"
            ),
        )
        if other is not None:
            check(
                index.shape[i] <= other.shape[i],
                lambda: (
                    f"Expected index {shape_str(index.shape)} to be no larger than self {shape_str(a.shape)} apart from dimension {d} and to be no larger size than src {shape_str(other.shape)}"
                ),
            )


@torchop("torch.gather", "torch.Tensor.gather")
def gather(a: Any, dim: int, index: Any, *, sparse_grad: bool = False) -> Any:
    a = check_tensor_arg(a, "gather")
    if sparse_grad:  # (as embedding's sparse=True: torch runs it, for its sparse gradient)
        raise UnsupportedOptionError(
            "gather: sparse_grad=True (sparse gradients) is not supported yet"
        )
    index = to_dtype(_check_index(index, "gather"), dtypes.int64)
    d = canonicalize_dim(a.ndim, dim)
    _check_gather_shapes(a, d, index, "gather")
    return prims.gather(a, d, index)


@torchop("torch.take_along_dim", "torch.Tensor.take_along_dim")
def take_along_dim(a: Any, indices: Any, dim: int | None = None) -> Any:
    a = check_tensor_arg(a, "take_along_dim")
    indices = check_tensor_arg(indices, "take_along_dim", "indices")
    check(
        indices.dtype == dtypes.int64,
        lambda: (
            f"torch.take_along_dim(): dtype of indices should be Long but got {indices.dtype.name}"
        ),
        RuntimeError,
    )
    if dim is None:
        return prims.gather(reshape_to(a, (a.numel(),)), 0, reshape_to(indices, (indices.numel(),)))
    d = canonicalize_dim(a.ndim, dim)
    check(
        a.ndim == indices.ndim,
        lambda: (
            f"torch.take_along_dim(): input and indices should have the same number of dimensions, but got {a.ndim} dimensions for input, and {indices.ndim} dimensions for indices"
        ),
        RuntimeError,
    )
    a_shape, i_shape = list(a.shape), list(indices.shape)
    a_shape[d], i_shape[d] = 1, 1
    common = list(broadcast_shapes(a_shape, i_shape))
    a_target, i_target = list(common), list(common)
    a_target[d], i_target[d] = a.shape[d], indices.shape[d]
    return prims.gather(expand_to(a, a_target), d, expand_to(indices, i_target))


@torchop("torch.take", "torch.Tensor.take")
def take(a: Any, index: Any) -> Any:
    a = check_tensor_arg(a, "take")
    index = _check_index(index, "take", (dtypes.int64,))
    return prims.take(reshape_to(a, (a.numel(),)), index)


@torchop("torch.combinations")
def combinations(a: Any, r: int = 2, with_replacement: bool = False) -> Any:
    """The ``r``-element combinations of a vector's elements, in itertools' order: the positions
    depend only on the static length, so they are a constant index tensor."""
    a = check_tensor_arg(a, "combinations")
    check(a.ndim == 1, lambda: f"Expect a 1D vector, but got shape {shape_str(a.shape)}")
    check(r >= 0, lambda: f"Expect a non-negative number, but got {r}")
    if r == 0:
        return prims.full((0,), 0, device=a.device, dtype=a.dtype)
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    positions = tuple(i for c in choose(range(int(a.shape[0])), r) for i in c)
    index = prims.tensor(positions, (len(positions),), device=a.device, dtype=dtypes.int64)
    return reshape_to(prims.index_select(a, 0, index), (len(positions) // r, r))


def _scatter_add(a: TensorProxy, dim: int, index: Any, src: Any, op: str) -> TensorProxy:
    a = check_tensor_arg(a, op)
    index = to_dtype(_check_index(index, op), dtypes.int64)
    src = check_tensor_arg(src, op, "src")
    check(src.dtype == a.dtype, lambda: f"{op}(): Expected self.dtype to be equal to src.dtype")
    d = canonicalize_dim(a.ndim, dim)
    _check_gather_shapes(a, d, index, op, src)
    return prims.scatter_add(a, d, index, src)  # type: ignore[no-any-return]


@torchop("torch.scatter_add", "torch.Tensor.scatter_add")
def scatter_add(a: Any, dim: int, index: Any, src: Any) -> Any:
    return _scatter_add(a, dim, index, src, "scatter_add")


@torchop("torch.Tensor.scatter_add_", tags=(OpTag.IN_PLACE,))
def scatter_add_(a: Any, dim: int, index: Any, src: Any) -> Any:
    return prims.copy_(_scatter_add(a, dim, index, src, "scatter_add_"), a)


def _grid_indices(index: TensorProxy, d: int) -> list[TensorProxy]:
    """For each dim of ``index``: the coordinate along it (``index`` itself for ``d``)."""
    out = []
    for i in range(index.ndim):
        if i == d:
            out.append(index)
            continue
        coords = prims.iota(
            index.shape[i], start=0, step=1, device=index.device, dtype=dtypes.int64
        )
        out.append(prims.broadcast_in_dim(coords, index.shape, (i,)))
    return out


def _scatter(
    a: Any, dim: int, index: Any, src: Any, value: Any, reduce: Any, op: str
) -> TensorProxy:
    a = check_tensor_arg(a, op)
    index = _check_index(index, op, (dtypes.int64,))
    check(
        reduce is None,
        f"{op}(reduce=...) is not supported; use scatter_add or scatter_reduce",
        UnsupportedOptionError,
    )
    d = canonicalize_dim(a.ndim, dim)
    if src is None:
        src = value
    if isinstance(src, TensorProxy):
        check(src.dtype == a.dtype, lambda: f"{op}(): Expected self.dtype to be equal to src.dtype")
        _check_gather_shapes(a, d, index, op, src)
        if not same_shape(src.shape, index.shape):
            src = prims.slice_prim(src, [0] * src.ndim, list(index.shape), [1] * src.ndim)
    else:
        _check_gather_shapes(a, d, index, op)
        src = prims.full(
            index.shape, dtypes.python_type_of(a.dtype)(src), device=a.device, dtype=a.dtype
        )
    if a.ndim == 0:
        return prims.index_put(a, [], prims.reshape(src, ()), False) if index.numel() else a  # type: ignore[no-any-return]
    checked = _negative_out_of_bounds(index, a.shape[d])
    return prims.index_put(a, _grid_indices(checked, d), src, False)  # type: ignore[no-any-return]


@torchop("torch.scatter", "torch.Tensor.scatter")
def scatter(
    a: Any, dim: int, index: Any, src: Any = None, *, value: Any = None, reduce: Any = None
) -> Any:
    # torch writes into a contiguous copy of the input: its layout, whatever the input's
    return contiguous(_scatter(a, dim, index, src, value, reduce, "scatter"))


@torchop("torch.Tensor.scatter_", tags=(OpTag.IN_PLACE,))
def scatter_(
    a: Any, dim: int, index: Any, src: Any = None, *, value: Any = None, reduce: Any = None
) -> Any:
    return prims.copy_(_scatter(a, dim, index, src, value, reduce, "scatter_"), a)


def _index_put(
    a: Any, indices: Sequence[Any], values: Any, accumulate: bool, op: str
) -> TensorProxy:
    a = check_tensor_arg(a, op)
    values = check_tensor_arg(values, op, "values")
    check(
        isinstance(indices, (tuple, list)),
        lambda: f"{op}(): argument 'indices' must be tuple of Tensors",
        TypeError,
    )
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
    ts = []
    for i in indices:
        check(
            i is not None,
            f"{op}() with None among the indices is not supported",
            UnsupportedOptionError,
        )
        i = check_tensor_arg(i, op, "indices")
        check(
            i.dtype in (*_INDEX_DTYPES, dtypes.bool8),
            lambda: (
                f"tensors used as indices must be long, int or bool tensors, got {i.dtype.name}"
            ),
            IndexError,
        )
        ts.append(i)
    if ts and all(i.dtype != dtypes.bool8 for i in ts):
        shape = (*broadcast_shapes(*(i.shape for i in ts)), *a.shape[len(ts) :])
        values = expand_to(values, broadcast_shapes(values.shape, shape))
    return prims.index_put(a, ts, values, accumulate)  # type: ignore[no-any-return]


@torchop("torch.index_put", "torch.Tensor.index_put")
def index_put(a: Any, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Any:
    return _index_put(a, indices, values, accumulate, "index_put")


@torchop("torch.Tensor.index_put_", tags=(OpTag.IN_PLACE,))
def index_put_(a: Any, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Any:
    return prims.copy_(_index_put(a, indices, values, accumulate, "index_put_"), a)


def _along_dim(
    a: Any, dim: int, index: Any, source: TensorProxy, accumulate: bool, op: str
) -> TensorProxy:
    """``a`` with ``source``'s slices along ``dim`` written (or added) at positions ``index``."""
    check(index.ndim <= 1, lambda: f"{op}(): Index is supposed to be a vector")
    d = canonicalize_dim(a.ndim, dim)
    if a.ndim == 0:
        a1, s1 = prims.reshape(a, (1,)), prims.reshape(source, (1,))
        out = prims.index_put(a1, [prims.reshape(index, (1,))], s1, accumulate)
        return prims.reshape(out, ())  # type: ignore[no-any-return]
    moved_a = movedim(a, d, 0) if d else a
    moved_s = (
        (movedim(source, d, 0) if d else source) if source.ndim else prims.reshape(source, (1,))
    )
    idx = index if index.ndim == 1 else prims.reshape(index, (1,))
    out = prims.index_put(moved_a, [idx], moved_s, accumulate)
    return movedim(out, 0, d) if d else out  # type: ignore[no-any-return]


def _check_index_add(a: Any, dim: int, index: Any, source: Any, op: str) -> None:
    a = check_tensor_arg(a, op)
    index = _check_index(index, op)
    source = check_tensor_arg(source, op, "source")
    check(
        source.dtype == a.dtype,
        lambda: (
            f"{op}(): self ({a.dtype.name}) and source ({source.dtype.name}) must have the same scalar type"
        ),
    )
    d = canonicalize_dim(a.ndim, dim)
    n, src_n = index.numel(), source.shape[d] if source.ndim else 1
    check(
        n == src_n,
        lambda: f"{op}(): Number of indices ({n}) should be equal to source.size(dim) ({src_n})",
        IndexError,
    )


def _index_add(a: Any, dim: int, index: Any, source: Any, alpha: Any, op: str) -> TensorProxy:
    _check_index_add(a, dim, index, source, op)
    d = canonicalize_dim(a.ndim, dim)
    if alpha != 1:
        source = prims.mul(source, dtypes.python_type_of(a.dtype)(alpha))
    return _along_dim(
        a,
        d,
        _negative_out_of_bounds(to_dtype(index, dtypes.int64), a.shape[d] if a.ndim else 1),
        source,
        True,
        op,
    )


@torchop("torch.index_add", "torch.Tensor.index_add")
def index_add(a: Any, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
    return contiguous(_index_add(a, dim, index, source, alpha, "index_add"))  # as scatter


@torchop("torch.Tensor.index_add_", tags=(OpTag.IN_PLACE,))
def index_add_(a: Any, dim: int, index: Any, source: Any, *, alpha: Any = 1) -> Any:
    # The functional op, kept whole where differentiated: eager's kernel adds the rows.
    _check_index_add(a, dim, index, source, "index_add_")
    return prims.copy_(index_add(a, dim, index, source, alpha=alpha), a)


def _index_copy(a: Any, dim: int, index: Any, source: Any, op: str) -> TensorProxy:
    a = check_tensor_arg(a, op)
    index = _check_index(index, op, (dtypes.int64,))
    source = check_tensor_arg(source, op, "source")
    check(
        source.dtype == a.dtype,
        lambda: (
            f"{op}(): self and source expected to have the same dtype, but got (self) {a.dtype.name} and (source) {source.dtype.name}"
        ),
    )
    d = canonicalize_dim(a.ndim, dim)
    checked = _negative_out_of_bounds(index, a.shape[d] if a.ndim else 1)
    return _along_dim(a, d, checked, source, False, op)


@torchop("torch.index_copy", "torch.Tensor.index_copy")
def index_copy(a: Any, dim: int, index: Any, source: Any) -> Any:
    return contiguous(_index_copy(a, dim, index, source, "index_copy"))  # as scatter


@torchop("torch.Tensor.index_copy_", tags=(OpTag.IN_PLACE,))
def index_copy_(a: Any, dim: int, index: Any, source: Any) -> Any:
    return prims.copy_(_index_copy(a, dim, index, source, "index_copy_"), a)


def _index_fill(a: Any, dim: int, index: Any, value: Any, op: str) -> TensorProxy:
    a = check_tensor_arg(a, op)
    index = _check_index(index, op, (dtypes.int64,))
    check(index.ndim <= 1, lambda: f"{op}(): Index has to be a vector/scalar", IndexError)
    d = canonicalize_dim(a.ndim, dim)
    if isinstance(value, TensorProxy):
        check(
            value.ndim == 0,
            lambda: (
                f"{op} only supports a 0-dimensional value tensor, but got tensor with {value.ndim} dimension(s)."
            ),
        )
    value_type = dtypes.python_type_of(value.dtype) if isinstance(value, TensorProxy) else None
    if isinstance(value, NumberProxy):
        value_type = value.python_type
    check(
        a.dtype.is_complex or not (isinstance(value, complex) or value_type is complex),
        "index_fill_(): Converting complex Scalar to non-complex type is not supported",
    )
    # eager fills the number (``value.item()`` of a tensor) converted with its range checked
    if isinstance(value, TensorProxy):
        if value.dtype != a.dtype:
            check_value_fits(value, a.dtype)
        value = to_dtype(value, a.dtype)
    else:
        check_number_fits(value, a.dtype)
    shape = list(a.shape) if a.ndim else [1]
    shape[d] = index.numel()
    if isinstance(value, TensorProxy):
        source = expand_to(value, shape) if a.ndim else prims.reshape(value, ())
    else:
        source = prims.full(
            tuple(shape) if a.ndim else (),
            dtypes.python_type_of(a.dtype)(value),
            device=a.device,
            dtype=a.dtype,
        )
    return _along_dim(a, d, _wrap_negative(index, a.shape[d] if a.ndim else 1), source, False, op)


@torchop("torch.index_fill", "torch.Tensor.index_fill")
def index_fill(a: Any, dim: int, index: Any, value: Any) -> Any:
    return _index_fill(a, dim, index, value, "index_fill")


@torchop("torch.Tensor.index_fill_", tags=(OpTag.IN_PLACE,))
def index_fill_(a: Any, dim: int, index: Any, value: Any) -> Any:
    return prims.copy_(_index_fill(a, dim, index, value, "index_fill_"), a)


@torchop("torch.masked_select", "torch.Tensor.masked_select")
def masked_select(a: Any, mask: Any) -> Any:
    raise UnsupportedOptionError(
        "masked_select returns as many elements as the mask selects, which depends on the mask's values and is not "
        "known while tracing; use torch.where(mask, a, 0) (keeping a's shape) instead"
    )
