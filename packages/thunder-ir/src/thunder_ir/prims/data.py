"""Python numbers read from tensor data: ``t.item()``, and the checks of what a trace assumed
about them.

Tracing does not know a tensor's values. Where the recording program supplies a reader
(``Trace.read_data``: the jit runs the part of the trace recorded so far on the call's inputs),
``prims.item(t)`` records ``n = prims.item(t)``: a ``NumberProxy`` with this call's value, whose
expression is a variable of its own (``Trace.data_values``). Arithmetic on it stays symbolic;
where Python decides on it (a branch, ``int()`` of it), the constraint is not a guard the prologue
can check before the computation runs: it is recorded as ``prims.check_data`` right where the
program decided, and the computation raises ``DataChanged`` on a call where it does not hold (the
caller then runs, or compiles, the program for the new outcome).
"""

from __future__ import annotations

from typing import Any

import torch

from thunder_ir import constraints as C
from thunder_ir import dtypes
from thunder_ir.codegen import PythonCode
from thunder_ir.dtypes import python_type_of
from thunder_ir.errors import DataDependentError
from thunder_ir.prims._common import check_tensor, make_prim
from thunder_ir.proxies import ComplexProxy, FloatProxy, IntegerProxy, NumberProxy, TensorProxy
from thunder_ir.symbol import BoundSymbol
from thunder_ir.tags import OpTag
from thunder_ir.tracectx import get_tracectx

__all__ = [
    "DataChanged",
    "check_data",
    "check_values",
    "data_check",
    "data_checks_of",
    "holds_for_sizes",
    "item",
    "nonzero",
    "tolist",
]


class DataChanged(Exception):
    """A value the computation read from tensor data breaks what its trace assumed about it
    (``prims.check_data``): this program does not compute this call."""


def _reader(t: TensorProxy, what: str) -> Any:
    """The trace's reader of tensor data, where a read can be recorded here (at the top level:
    a value defined inside an op's decomposition is not a value of the trace)."""
    trace = get_tracectx()
    reader = trace.read_data if trace is not None else None
    if reader is None or not trace.at_top_level():  # type: ignore[union-attr]
        raise DataDependentError(
            f"{what} of tensor {t.name} depends on its data, which is not known while "
            "tracing; compute it with tensor ops (torch.where) or pass it in as a Python value"
        )
    return reader


def _item_meta(t: Any) -> NumberProxy:
    check_tensor(t, "item")
    trace = get_tracectx()
    reader = _reader(t, "Tensor.item()")
    if any(not isinstance(s, int) for s in t.shape) or _numel(t.shape) != 1:
        raise DataDependentError(
            f"Tensor.item() of tensor {t.name} of shape {tuple(t.shape)}: only a tensor of one "
            "element (of a static shape) has a value to read"
        )
    out = _number(reader(t).item(), t)
    trace.data_values[out.name] = out  # type: ignore[union-attr]
    return out


def _number(value: Any, t: TensorProxy) -> NumberProxy:
    """A number read from ``t``'s data, of the Python type its dtype converts to."""
    python_type = python_type_of(t.dtype)
    if python_type is bool:
        return IntegerProxy(value=bool(value), python_type=bool)
    if python_type is int:
        return IntegerProxy(value=int(value))
    if python_type is complex:
        return ComplexProxy(value=complex(value))
    return FloatProxy(value=float(value))


def _numel(shape: Any) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _item(t: Any) -> Any:
    return t.item()


# Not fusible (its output is a number) and never merged away: a read of the device's data.
item = make_prim("item", _item_meta, tags=(OpTag.READS_DATA,), impl=_item)


def _nonzero_meta(t: Any) -> tuple[TensorProxy, IntegerProxy]:
    check_tensor(t, "nonzero")
    reader = _reader(t, "torch.nonzero")
    count = IntegerProxy(value=int(reader(t).count_nonzero()))
    trace = get_tracectx()
    trace.data_values[count.name] = count  # type: ignore[union-attr]
    trace.data_sizes.add(count.name)  # type: ignore[union-attr]
    return TensorProxy(shape=(count, t.ndim), dtype=dtypes.int64, device=t.device), count


def _nonzero(t: Any) -> tuple[Any, int]:
    out = torch.nonzero(t)
    return out, out.shape[0]


# The indices of the nonzero elements and how many there are: the count is a value read from
# tensor data (``Trace.data_values``), the size of the result's first dimension, defined here so
# that later ops (and checks of decisions on it) read it.
nonzero = make_prim("nonzero", _nonzero_meta, tags=(OpTag.READS_DATA,), impl=_nonzero)


# Past this many elements ``tolist`` stays a tracing limit: every element is a value of the trace.
_TOLIST_LIMIT = 4096


def _tolist_meta(t: Any) -> tuple[NumberProxy, ...]:
    check_tensor(t, "tolist")
    reader = _reader(t, "Tensor.tolist()")
    # A symbolic size (an input's, or a count read from data: ``labels.unique()``) becomes this
    # call's value: the list's length is a decision, checked as any other (a guard, or a check
    # on data in the computation), and another length gets a program of its own.
    shape = tuple(s if isinstance(s, int) else int(s) for s in t.shape)
    if _numel(shape) > _TOLIST_LIMIT:
        raise DataDependentError(
            f"Tensor.tolist() of tensor {t.name} of {_numel(shape)} elements: only a tensor of "
            f"at most {_TOLIST_LIMIT} elements is read while tracing"
        )
    trace = get_tracectx()
    outs = tuple(_number(v, t) for v in reader(t).reshape(-1).tolist())
    for out in outs:
        trace.data_values[out.name] = out  # type: ignore[union-attr]
    return outs


def _tolist(t: Any) -> tuple[Any, ...]:
    return tuple(t.reshape(-1).tolist())


# Every element of a tensor as a value read from data (``Tensor.tolist``, flattened).
tolist = make_prim("tolist", _tolist_meta, tags=(OpTag.READS_DATA,), impl=_tolist)


def _no_output(*args: Any, **kwargs: Any) -> None:
    return None


def _check_data(cond: Any, text: str, *reads: Any, restore: Any = ()) -> None:
    if not cond:
        for state, device in restore:  # the generators as the computation found them
            if device == "cpu":
                torch.random.set_rng_state(state)
            else:
                torch.cuda.set_rng_state(state, device)
        raise DataChanged(f"{text} does not hold for the values read from tensor data")


check_data = make_prim("check_data", _no_output, tags=(OpTag.DONT_DCE,), impl=_check_data)


def _check_values_meta(cond: Any, message: str) -> None:
    check_tensor(cond, "check_values")
    return None


def _check_values(cond: Any, message: str) -> None:
    if cond.device.type == "cpu":
        if not bool(cond):
            raise RuntimeError(message)
    else:  # as eager's CUDA kernels check values: a device-side assert, no synchronization
        torch._assert_async(cond, message)


# A check of tensor values eager's kernels make (binary_cross_entropy's inputs in [0, 1],
# ``torch._assert_async``): raises ``RuntimeError(message)`` where ``cond``, a tensor of one
# element, is zero. Not a decision (no other program serves the call): the program's own error.
check_values = make_prim(
    "check_values", _check_values_meta, tags=(OpTag.DONT_DCE,), impl=_check_values
)


def data_check(expr: C.Expr, values: dict[str, NumberProxy], location: str | None = None) -> Any:
    """The bound symbol checking ``expr``, a constraint on values read from tensor data
    (``values``: those values by name, and the symbolic numbers of the inputs it may compare
    them with): the expression inline, the values as arguments, so that passes see what it
    reads."""
    unknown = expr.variables() - set(values)
    if unknown:
        raise DataDependentError(
            "a decision on a value read from tensor data together with symbolic values the "
            f"computation does not have ({', '.join(sorted(unknown))}) is not supported"
        )
    text = expr.python()
    reads = tuple(values[name] for name in sorted(expr.variables()))
    traced = ", ".join(f"{p.name} = {p.value!r}" for p in reads)
    shown = f"{text} ({traced} while tracing{f', decided at {location}' if location else ''})"
    args = (PythonCode(text, C.PYTHON_NAMES), shown, *reads)
    return BoundSymbol(check_data, args, {}, None, location=location)


def data_checks_of(bsyms: Any) -> set[str]:
    """The texts of the decisions on data values that ``bsyms`` check (``prims.check_data``)."""
    return {
        b.args[0].text for b in bsyms if b.sym is check_data and isinstance(b.args[0], PythonCode)
    }


# ``size op c`` that holds for every size (a count is never negative), by the comparison.
_TRUE_FOR_SIZES = {">=": lambda c: c <= 0, ">": lambda c: c < 0, "!=": lambda c: c < 0}
_NEGATED = {"<": ">=", "<=": ">", "==": "!="}


def holds_for_sizes(expr: C.Expr, sizes: set[str]) -> bool:
    """Whether ``expr`` compares one size read from data with a constant in a way every size
    satisfies (``not (i0 < 0)``, which slicing records), or is true of any integers (``i0 == i0``,
    index_add's count of indices against its source's rows): nothing to check."""
    if expr.variables() <= sizes and C.simplify(expr) == C.Const(True):
        return True
    op = None
    if isinstance(expr, C.Not) and isinstance(expr.operand, C.Compare):
        op, cmp = _NEGATED.get(expr.operand.op), expr.operand
    elif isinstance(expr, C.Compare):
        op, cmp = expr.op, expr
    if op not in _TRUE_FOR_SIZES:
        return False
    lhs, rhs = cmp.lhs, cmp.rhs
    if not (isinstance(lhs, C.Var) and lhs.name in sizes and isinstance(rhs, C.Const)):
        return False
    return type(rhs.value) is int and _TRUE_FOR_SIZES[op](rhs.value)
