"""Prologue prims: unpack the inputs a computation reads and check the guards its cache entry
relies on. They are plain Python, so their implementations live here with them."""

from __future__ import annotations

import array
import collections
import keyword
import marshal
import math
import re
import sys
from collections.abc import Callable
from typing import Any

from thunder_ir.codegen import Printer, PythonCode, register_inline
from thunder_ir.prims._common import make_prim
from thunder_ir.proxies import Proxy
from thunder_ir.tags import OpTag

__all__ = ["PROLOGUE_MISSES", "GuardFailure", "SetInOrder", "value_snapshot"]


class GuardFailure(Exception):
    """A prologue check failed: the cached program does not apply to these inputs.
    ``sizes_only``: only tensor sizes differ (the same dimensions, dtypes and devices).
    ``resized``: the names of the checked tensors that differ in their sizes alone."""

    def __init__(self, *args: Any, sizes_only: bool = False, resized: tuple[str, ...] = ()) -> None:
        super().__init__(*args)
        self.sizes_only = sizes_only
        self.resized = resized


# What an inlined read raises when its path is gone (``obj.name``, ``d[key]``): the prologue's
# caller reports these as a GuardFailure.
# (ValueError: a shape unpacked into as many names as the traced tensor had dimensions.)
PROLOGUE_MISSES = (AttributeError, KeyError, IndexError, TypeError, ValueError)


def _no_meta(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("prologue prims are bound directly with Symbol.bind, not traced")


def _fail(what: str) -> Any:
    raise GuardFailure(what)


def _unpack_sequence(x: Any, n: int) -> Any:
    if len(x) != n:
        _fail(f"expected a sequence of length {n}, got {len(x)}")
    return x


def _unpack_key(d: Any, key: Any) -> Any:
    try:
        return d[key]
    except (KeyError, IndexError, TypeError):
        return _fail(f"missing key {key!r}")


def _unpack_attr(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError:
        return _fail(f"missing attribute {name!r}")


def _unpack_global(globs: dict[str, Any], name: str) -> Any:
    try:
        return globs[name]
    except KeyError:
        try:
            return (
                globs["__builtins__"][name]
                if isinstance(globs.get("__builtins__"), dict)
                else getattr(globs["__builtins__"], name)
            )
        except (KeyError, AttributeError):
            return _fail(f"global {name!r} is not defined")


def _unpack_cell(fn: Any, index: int) -> Any:
    try:
        return fn.__closure__[index].cell_contents
    except (TypeError, IndexError, ValueError):
        return _fail(f"closure cell {index} of {fn!r} is not available")


def _is_numpy_scalar(value: Any) -> bool:
    t = type(value)
    return t.__module__ == "numpy" and t.__name__ != "ndarray" and hasattr(value, "tobytes")


def _same_float(x: float, value: float) -> bool:
    # -0.0 == 0.0 but 1 / -0.0 is -inf; a nan equals no value but is the same constant
    if x != x:
        return value != value
    return x == value and math.copysign(1.0, x) == math.copysign(1.0, value)


class SetInOrder(tuple):  # type: ignore[type-arg]
    """A set (or frozenset) a guard compares with, as its items in the order the traced call
    iterated them: a copy of a set may iterate in another order (the copy's hash table is
    built afresh), so the copy cannot stand for the order the program baked in."""

    kind: type

    def __new__(cls, items: Any, kind: type) -> SetInOrder:
        self = super().__new__(cls, items)
        self.kind = kind
        return self

    def __repr__(self) -> str:
        return f"{self.kind.__name__}({{{', '.join(map(repr, self))}}})"


def value_snapshot(value: Any) -> Any:
    """What a value guard compares with: a deep copy, each set in it kept as the items in the
    order ``value`` iterates them (``SetInOrder``)."""
    import copy

    t = type(value)
    if t is set or t is frozenset:
        return SetInOrder(tuple(value_snapshot(v) for v in value), t)
    if (t is list or t is tuple) and any(_holds_set(v) for v in value):
        return t(value_snapshot(v) for v in value)
    if t is dict and any(_holds_set(v) for v in value.values()):
        return {copy.deepcopy(k): value_snapshot(v) for k, v in value.items()}
    return copy.deepcopy(value)


def _holds_set(value: Any) -> bool:
    t = type(value)
    if t is set or t is frozenset:
        return True
    if t is list or t is tuple:
        return any(_holds_set(v) for v in value)
    return t is dict and any(_holds_set(v) for v in value.values())


def same_value(x: Any, value: Any) -> bool:
    """Whether ``x`` is ``value`` as a program that baked ``value`` in sees it: ``==`` and the
    same types all through (``(0, 4)`` is not ``(0, 4.0)``), the same sign of zero, NaN for NaN,
    and the same order of a dict's (a set's) items."""
    t = type(value)
    if t is SetInOrder:
        return (
            type(x) is value.kind
            and len(x) == len(value)
            and all(same_value(a, b) for a, b in zip(x, value))
        )
    if type(x) is not t:
        return False
    if t is float:
        return _same_float(x, value)
    if t is complex:
        return _same_float(x.real, value.real) and _same_float(x.imag, value.imag)
    if _is_numpy_scalar(value):
        # its bytes: numpy's ``==`` takes -0.0 for 0.0 and never a NaN for itself
        return bool(x.dtype == value.dtype and x.tobytes() == value.tobytes())
    if isinstance(value, dict):
        return len(x) == len(value) and all(
            same_value(a, b) and same_value(x[a], value[b]) for a, b in zip(x, value)
        )
    if isinstance(value, (tuple, list, set, frozenset, collections.deque)):
        return len(x) == len(value) and all(same_value(a, b) for a, b in zip(x, value))
    if t is array.array:
        return bool(x.typecode == value.typecode and x.tobytes() == value.tobytes())
    if t is slice:
        return all(same_value(getattr(x, n), getattr(value, n)) for n in ("start", "stop", "step"))
    if t.__name__ == "Decimal" and t.__module__ in ("decimal", "_decimal", "_pydecimal"):
        return bool(x.as_tuple() == value.as_tuple())  # sign, digits and exponent (1.0 vs 1.00)
    return bool(x == value)


def _check_value(x: Any, value: Any) -> None:
    if not same_value(x, value):
        _fail(f"expected {value!r}, got {x!r}")


def _marshals_exactly(value: Any, depth: int = 0) -> bool:
    """Whether equal ``marshal.dumps`` bytes mean ``same_value``: built of the exact types
    marshal tells apart (a bytes could be a bytearray, a subclass is another type)."""
    t = type(value)
    if value is None or value is Ellipsis or t in (bool, int, float, complex, str):
        return True
    if depth > 8:
        return False
    if t in (tuple, list, set, frozenset):
        return all(_marshals_exactly(v, depth + 1) for v in value)
    if t is dict:
        return all(
            _marshals_exactly(k, depth + 1) and _marshals_exactly(v, depth + 1)
            for k, v in value.items()
        )
    return False


def same_value_test(value: Any) -> Callable[[Any], bool]:
    """``same_value(x, value)`` as a test of ``x`` alone: in one C call where ``value`` is a
    container built of types marshal tells apart (``_marshals_exactly``): equal ``marshal``
    bytes (version 2: no references, which would depend on which items are shared objects),
    else ``same_value`` decides, and a value marshal refuses is another value; for a float, its
    type, ``==`` and sign."""
    if type(value) in (tuple, list, dict, set, frozenset) and _marshals_exactly(value):
        dumped, dumps = marshal.dumps(value, 2), marshal.dumps

        def same_bytes(x: Any) -> bool:
            try:
                if dumps(x, 2) == dumped:
                    return True
            except ValueError:  # an item of a type marshal refuses: not of value's types
                return False
            return same_value(x, value)  # (a NaN of another sign or payload is the same)

        return same_bytes
    if type(value) is float and value == value:  # (a zero: its sign; a NaN: same_value's test)
        sign = math.copysign(1.0, value)
        return lambda x: type(x) is float and x == value and math.copysign(1.0, x) == sign
    return lambda x: same_value(x, value)


def _check_type(x: Any, typ: type) -> None:
    if type(x) is not typ:
        _fail(f"expected type {typ.__name__}, got {type(x).__name__}")


def _check_len(x: Any, n: int) -> None:
    if len(x) != n:
        _fail(f"expected length {n}, got {len(x)}")


def _check_keys(x: Any, keys: tuple[Any, ...]) -> None:
    if tuple(x) != keys:
        _fail(f"expected the keys {keys!r} in this order, got {tuple(x)!r}")


def _check_is(x: Any, obj: Any) -> None:
    if x is not obj:
        _fail(f"expected the object {obj!r}")


def _check_constraint(cond: Any, text: str, parts: tuple[str, ...] = ()) -> None:
    if not cond:
        _fail(_failed_constraint(text, parts, sys._getframe(1)))


def _failed_constraint(text: str, parts: tuple[str, ...], frame: Any) -> str:
    """The conjuncts of a constraint that do not hold, with the values of the sizes they name
    (read from the prologue's frame: the check only reads them when it fails)."""
    from thunder_ir.constraints import PYTHON_NAMES

    names = {**frame.f_globals, **PYTHON_NAMES, **frame.f_locals}
    failed = []
    for part in parts:
        try:
            holds = eval(part, names)  # the prologue's own generated text
        except Exception:
            holds = False
        if not holds:
            failed.append(part)
    if not failed:
        return f"constraint {text} does not hold"
    shown = " and ".join(failed)
    named = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", shown))
    values = ", ".join(
        f"{n} = {v!r}"
        for n, v in sorted(frame.f_locals.items())
        if n in named and isinstance(v, (int, float)) and not isinstance(v, bool)
    )
    return f"{shown} does not hold" + (f" ({values})" if values else "")


_P = (OpTag.PROLOGUE, OpTag.DONT_DCE)
unpack_sequence = make_prim(
    "unpack_sequence", _no_meta, tags=(OpTag.PROLOGUE,), impl=_unpack_sequence
)
unpack_key = make_prim("unpack_key", _no_meta, tags=(OpTag.PROLOGUE,), impl=_unpack_key)
unpack_attr = make_prim("unpack_attr", _no_meta, tags=(OpTag.PROLOGUE,), impl=_unpack_attr)
unpack_global = make_prim("unpack_global", _no_meta, tags=(OpTag.PROLOGUE,), impl=_unpack_global)
unpack_cell = make_prim("unpack_cell", _no_meta, tags=(OpTag.PROLOGUE,), impl=_unpack_cell)
check_value = make_prim("check_value", _no_meta, tags=_P, impl=_check_value)
check_type = make_prim("check_type", _no_meta, tags=_P, impl=_check_type)
check_len = make_prim("check_len", _no_meta, tags=_P, impl=_check_len)
check_keys = make_prim("check_keys", _no_meta, tags=_P, impl=_check_keys)
check_is = make_prim("check_is", _no_meta, tags=_P, impl=_check_is)
check_constraint = make_prim("check_constraint", _no_meta, tags=_P, impl=_check_constraint)


# -- inline forms: the prologue runs on every call, and a Python call costs more than the test ----


def _inline_unpack_attr(bsym: Any, p: Printer) -> str | None:
    obj, name = bsym.args
    if not (isinstance(name, str) and name.isidentifier() and not keyword.iskeyword(name)):
        return None
    return f"{bsym.output.name} = {p.value(obj)}.{name}"


def _inline_unpack_key(bsym: Any, p: Printer) -> str | None:
    d, key = bsym.args
    return f"{bsym.output.name} = {p.value(d)}[{p.value(key)}]"


def _inline_unpack_global(bsym: Any, p: Printer) -> str:
    globs, name = bsym.args
    g, n = p.value(globs), p.value(name)
    # The module's own global inline; a builtin (or a miss) through the prim.
    return f"{bsym.output.name} = {g}[{n}] if {n} in {g} else {_failing_call(bsym, p)}"


def _failing_call(bsym: Any, p: Printer) -> str:
    return f"{p.symbol(bsym.sym)}({', '.join(p.value(a) for a in bsym.args)})"


def _inline_check_is(bsym: Any, p: Printer) -> str:
    x, obj = bsym.args
    # (an object as such, never its literal: ``x is not 0.5`` or ``x is not []`` never holds)
    obj_src = p.value(obj) if isinstance(obj, (Proxy, PythonCode)) or obj is None else p.opaque(obj)
    return f"if {p.value(x)} is not {obj_src}: {p.symbol(bsym.sym)}({p.value(x)}, {obj_src})"


def _inline_check_type(bsym: Any, p: Printer) -> str:
    x, typ = bsym.args
    return f"if type({p.value(x)}) is not {p.opaque(typ)}: {_failing_call(bsym, p)}"


def _inline_check_value(bsym: Any, p: Printer) -> str | None:
    x, value = bsym.args
    x_src = p.value(x)
    if value is None or type(value) is bool:
        test = f"{x_src} is not {value!r}"
    elif type(value) in (int, str) or (type(value) is float and value == value and value):
        test = f"type({x_src}) is not {type(value).__name__} or {x_src} != {p.value(value)}"
    elif type(value) is float or _is_numpy_scalar(value):
        return None  # nan, and 0.0 against -0.0: the call tells them apart
    else:  # _check_value's own test, on constants of the program (no literal rebuilt per call)
        v = p.opaque(value)
        if type(value) is SetInOrder:
            test = f"not {p.opaque(same_value)}({x_src}, {v})"
            return f"if {test}: {p.symbol(bsym.sym)}({x_src}, {v})"
        test = f"type({x_src}) is not {p.opaque(type(value))}"
        if type(value) in (tuple, list, dict, set, frozenset) and _marshals_exactly(value):
            # one C call tells the types, signs of zero and order apart (a value marshal
            # refuses raises ValueError: a miss); the call decides when the bytes differ
            dumped = p.opaque(marshal.dumps(value, 2))
            test += f" or {p.opaque(marshal.dumps)}({x_src}, 2) != {dumped}"
        elif isinstance(value, (dict, list, tuple, set, frozenset)) and not value:
            test += f" or {x_src} != {v}"  # (empty, of the same type: nothing to tell apart)
        else:
            test += f" or {x_src} != {v} or not {p.opaque(same_value)}({x_src}, {v})"
        return f"if {test}: {p.symbol(bsym.sym)}({x_src}, {v})"
    return f"if {test}: {_failing_call(bsym, p)}"


register_inline(unpack_attr, _inline_unpack_attr)
register_inline(unpack_key, _inline_unpack_key)
register_inline(unpack_global, _inline_unpack_global)
register_inline(check_is, _inline_check_is)
register_inline(check_type, _inline_check_type)
register_inline(check_value, _inline_check_value)


def _return_meta(value: Any = None) -> None:
    return None


python_return = make_prim("python_return", _return_meta, tags=(OpTag.RETURN, OpTag.DONT_DCE))
