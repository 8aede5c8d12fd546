"""0-dim tensors whose value is a known number: ``torch.div(x.shape[1], 2, rounding_mode="floor")``
is a tensor in eager, and code uses it as a size (``x[:, :h]``). Such a tensor's value is made
from numbers the trace knows (constants, or symbolic numbers of the inputs) by elementwise prims,
so Python's questions about it (``int(h)``, ``h.item()``, ``if h > 0``) are answered with that
number rather than a read of the tensor's data.

``Trace.known_numbers`` maps the tensor's name to its value: a number, or a recipe
``(prim, args)`` over other entries that is computed (recording number arithmetic) when first
asked for, at the top level where the program asks. An entry is dropped when the tensor may be
written (an in-place op on it, or a view of it that could be)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thunder_ir import dtypes
from thunder_ir.proxies import NumberProxy, TensorProxy
from thunder_ir.pytree import tree_iter
from thunder_ir.tags import OpTag
from thunder_ir.tracectx import get_tracectx

__all__ = ["forget_written", "index_value", "known_number", "note_prim_output", "settle"]


class _Recipe:
    """``prim(*args)`` on numbers, where an argument may be another recipe: computed on demand."""

    __slots__ = ("args", "dtype", "prim")

    def __init__(self, prim: Any, args: tuple[Any, ...], dtype: dtypes.DType) -> None:
        self.prim, self.args, self.dtype = prim, args, dtype


# Prims whose value on 0-dim tensors is their value on the numbers, where the result fits the
# tensor's dtype exactly (``_as_dtype``).
_VALUE_PRIMS = frozenset(
    {
        "add", "sub", "mul", "div", "floor_divide", "trunc_divide", "remainder", "neg", "abs",
        "eq", "ne", "lt", "le", "gt", "ge", "maximum", "minimum", "bitwise_and", "bitwise_or",
        "bitwise_xor", "bitwise_not", "logical_not", "convert_element_type",
    }
)  # fmt: skip

_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}


def _as_dtype(value: Any, dtype: dtypes.DType) -> Any:
    """``value`` as a tensor of ``dtype`` holds it, or None where that is not exactly known."""
    if isinstance(value, NumberProxy):
        # Symbolic: only exact kinds (a float would be rounded to the dtype, unknown here).
        if dtype.kind == "bool" and value.python_type is bool:
            return value
        if dtype.name == "int64" and value.python_type is int:
            return value
        return None
    if dtype.kind == "bool":
        return value if isinstance(value, bool) else None
    if dtype.kind == "int":
        if isinstance(value, bool):
            value = int(value)
        bounds = _INT_RANGES.get(dtype.name)
        if type(value) is not int or bounds is None or not bounds[0] <= value <= bounds[1]:
            return None
        return value
    if dtype.kind == "float" and isinstance(value, (bool, int, float)):
        import torch

        torch_dtype = dtypes.to_torch_dtype(dtype)
        return float(torch.tensor(float(value), dtype=torch_dtype).item())  # rounded as eager
    return None


# Whose float results torch computes by its own algorithm (Python's float ``%`` and ``//`` may
# differ from it in the last place).
_INEXACT_ON_FLOATS = frozenset({"floor_divide", "trunc_divide", "remainder"})


def _fits(x: Any, dtype: dtypes.DType) -> bool:
    """Whether a tensor of ``dtype`` holds the number ``x`` exactly."""
    if isinstance(x, NumberProxy):
        return (x.python_type is int and dtype.name == "int64") or x.python_type is bool
    held = _as_dtype(x, dtype)
    return held is not None and held == x


def _is_symbolic(x: Any) -> bool:
    return isinstance(x, (NumberProxy, _Recipe))


def note_prim_output(prim: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
    """Remembers the value of ``out``, a prim's 0-dim result, where its inputs' values are known."""
    trace = get_tracectx()
    if trace is None or not isinstance(out, TensorProxy) or out.shape != ():
        return
    table = trace.known_numbers
    if prim.name == "tensor":
        values = args[0] if args else kwargs.get("values")
        if isinstance(values, tuple) and len(values) == 1:
            value = _as_dtype(values[0], out.dtype)
            if value is not None:
                table[out.name] = value
        return
    if prim.name not in _VALUE_PRIMS or OpTag.ELEMENTWISE not in prim.tags:
        return
    operands = []
    dtype = out.dtype
    for a in (*args, *kwargs.values()):
        if isinstance(a, TensorProxy):
            if a.name not in table:
                return
            operands.append(table[a.name])
            dtype = a.dtype
        else:
            operands.append(a)
    if prim.name != "convert_element_type":
        # torch converts a number operand to the tensors' dtype (or a wider one where it
        # computes): only a number that dtype holds exactly gives one known value.
        if any(not _fits(a, dtype) for a in args if not isinstance(a, TensorProxy)):
            return
        if dtype.kind == "float" and prim.name in _INEXACT_ON_FLOATS:
            return
    if any(map(_is_symbolic, operands)):
        table[out.name] = _Recipe(prim, tuple(operands), out.dtype)
        return
    try:
        value = prim.meta(*operands)  # numbers only: computes the number, records nothing
    except Exception:
        return  # (division by zero, ...): the tensor's value is left to its data
    value = _as_dtype(value, out.dtype)
    if value is not None:
        table[out.name] = value


def forget_written(prim: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Drops the known values of tensors ``prim`` writes or makes a view of (a view's writes are
    the tensor's)."""
    trace = get_tracectx()
    if trace is None or not trace.known_numbers:
        return
    writes = bool(prim.tags & {OpTag.WRITE, OpTag.IN_PLACE})
    if not writes and not prim.tags & {OpTag.VIEW, OpTag.MAY_RETURN_VIEW}:
        return
    views_first = not writes and bool(args) and isinstance(args[0], TensorProxy)
    for i, a in enumerate((*args, *kwargs.values())):
        for t in tree_iter(a):
            # A view's 0-dim integer arguments after the viewed tensor are sizes and slice
            # bounds (``x.reshape(n, h)``, ``x[:, :h]``), not what it views.
            if isinstance(t, TensorProxy) and not (views_first and i > 0 and _is_index(t)):
                trace.known_numbers.pop(t.name, None)


def _is_index(t: TensorProxy) -> bool:
    return t.ndim == 0 and t.dtype.is_exact and not t.dtype.is_boolean


def _is_int(x: Any) -> bool:
    return (isinstance(x, NumberProxy) and x.python_type is int) or type(x) is int


def _int_trunc_divide(a: Any, b: Any) -> Any:
    """``a`` divided by ``b`` rounded toward zero, in the arithmetic symbolic numbers have (the
    prim has no symbolic form): the signs are decided, not the values."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _int_maximum(a: Any, b: Any) -> Any:
    return a if a >= b else b


def _int_minimum(a: Any, b: Any) -> Any:
    return a if a <= b else b


# Int prims without a symbolic form, in the arithmetic symbolic numbers have.
_INT_FORMS: dict[str, Callable[[Any, Any], Any]] = {
    "trunc_divide": _int_trunc_divide,
    "maximum": _int_maximum,
    "minimum": _int_minimum,
}


def _resolve(entry: Any) -> Any:
    if not isinstance(entry, _Recipe):
        return entry
    operands = [_resolve(a) for a in entry.args]
    if any(x is None for x in operands):
        return None
    try:
        by_decisions = _INT_FORMS.get(entry.prim.name)
        if by_decisions is not None and all(_is_int(x) for x in operands):
            value = by_decisions(*operands)
        else:
            value = entry.prim(*operands)  # symbolic arithmetic, recorded where the program asks
    except Exception:
        return None
    return _as_dtype(value, entry.dtype)


def known_number(t: TensorProxy) -> Any:
    """The number ``t`` holds, where the trace knows it (a symbolic one only at the top level,
    where its arithmetic is recorded); None otherwise."""
    trace = get_tracectx()
    if trace is None:
        return None
    entry = trace.known_numbers.get(t.name)
    if entry is None:
        return None
    if isinstance(entry, _Recipe):
        if not trace.at_top_level():
            return None
        entry = _resolve(entry)
        if entry is None:
            return None
        trace.known_numbers[t.name] = entry  # computed once
    return entry


def settle(out: Any) -> None:
    """Computes the value of ``out``, a result of an op the program called, where it is a recipe:
    its symbolic arithmetic is recorded here, at the top level, so that ops asking for it later
    (a size inside ``new_zeros``) find the number."""
    if isinstance(out, TensorProxy) and out.shape == ():
        known_number(out)


def index_value(t: TensorProxy) -> Any:
    """``t.__index__()`` for a 0-dim integer tensor, but a symbolic number the trace knows it holds
    stays symbolic (``__index__`` would fix its value)."""
    known = known_number(t)
    if isinstance(known, NumberProxy) and known.python_type is int:
        return known
    return t.__index__()
