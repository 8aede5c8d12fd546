"""Lookasides for builtins that call Python code from C: ``len``, ``bool``, ``iter``, ``next``,
``any``, ``sorted(key=...)``, ``functools.reduce``, ... They run the same algorithm with the
special methods and callables interpreted (see :mod:`thunder_interp._slots`); with plain
arguments they call the builtin itself.
"""

from __future__ import annotations

import builtins
import functools
import itertools
import math
import operator
from collections.abc import Callable
from types import FunctionType
from typing import TYPE_CHECKING, Any

from thunder_interp import _slots as slots
from thunder_interp._frame import NULL
from thunder_interp._recursion import register_c_callbacks
from thunder_interp._slots import is_plain, iterable_arg

if TYPE_CHECKING:
    from thunder_interp._frame import Frame
    from thunder_interp._runtime import Runtime

__all__ = [
    "CONVERSIONS",
    "converting",
    "implicit_lookasides",
    "is_interpreting",
    "unary_slot_builtins",
]

Impl = Callable[["Runtime", "Frame | None", tuple[Any, ...], dict[str, Any]], Any]


def is_interpreting() -> bool:
    """True when called from code the interpreter is running, False in native code.

    Library code can use it to tell whether it is being traced; the interpreter replaces this
    function by one that returns True.
    """
    return False


def _interpreting(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if args or kw:
        return rt.opaque_call(is_interpreting, args, kw)
    return True


class _Interpreted:
    """A callable handed to a native builtin (a sort key, a reduce function) that interprets the
    Python callable it wraps."""

    __slots__ = ("fn", "rt")

    def __init__(self, rt: Runtime, fn: Any) -> None:
        self.rt = rt
        self.fn = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.rt.call(self.fn, args, kwargs or None, None)


def _callable_arg(rt: Runtime, fn: Any) -> Any:
    # Builtins and types too (``map(torch.relu, xs)``, ``map(type, xs)``): called through the
    # runtime, as a direct call of them is (its lookasides answer for the values it stands for).
    if fn is None:
        return fn
    return _Interpreted(rt, fn)


class _Ordered:
    """A sort key whose comparisons are interpreted (``__lt__`` of a Python class)."""

    __slots__ = ("rt", "value")

    def __init__(self, rt: Runtime, value: Any) -> None:
        self.rt = rt
        self.value = value

    def __lt__(self, other: Any) -> bool:
        right = other.value if type(other) is _Ordered else other
        return slots.truth(self.rt, slots.compare(self.rt, "<", self.value, right))

    def __gt__(self, other: Any) -> bool:
        right = other.value if type(other) is _Ordered else other
        return slots.truth(self.rt, slots.compare(self.rt, ">", self.value, right))


def _all_plain(values: Any) -> bool:
    return all(type(v) in slots.PLAIN or is_plain(v) for v in values)


def _one(native: Callable[[Any], Any], slow: Callable[[Runtime, Any], Any], *names: str) -> Impl:
    """A builtin of one argument that calls the special methods ``names`` of it."""

    def impl(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if kw or len(args) != 1:
            return rt.opaque_call(native, args, kw)
        if rt.plain_opaque:
            return slow(rt, args[0])  # which calls ``native`` where no Python code runs
        if not _runs_python(args[0], names):
            return rt.opaque_call(native, args, kw)
        return slow(rt, args[0])

    return impl


def _runs_python(v: Any, names: tuple[str, ...]) -> bool:
    cls = type(v)
    if cls in slots.PLAIN or is_plain(v):
        return False
    return any(slots.is_python_level(slots.lookup_type(cls, name)) for name in names)


def _len(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``len``: ``_one(len, slots.length, "__len__")``, looking ``__len__`` up once."""
    if kw or len(args) != 1:
        return rt.opaque_call(len, args, kw)
    return _len_of(rt, args[0])


def _len_of(rt: Runtime, v: Any) -> Any:
    """``len(v)`` (``_len`` of one argument: what a call site with one argument calls)."""
    if rt.plain_opaque:
        return slots.length(rt, v)  # which calls ``len`` where no Python code runs
    cls = type(v)
    if cls in slots.PLAIN or (cls not in slots.NOT_PLAIN and is_plain(v)):
        return rt.opaque_call(len, (v,), {})
    descr = slots.lookup_type(cls, "__len__")
    if type(descr) is FunctionType:
        result = slots.run_special(rt, descr, [v])
        if result is NULL:  # opaque code: the native call
            return rt.opaque_call(len, (v,), {})
        return slots.length_result(rt, result)
    if not slots.is_python_level(descr):
        return rt.opaque_call(len, (v,), {})
    return slots.length_by(rt, v, descr)


_len.unary = _len_of  # type: ignore[attr-defined]


def _bool(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if kw or len(args) != 1 or not _runs_python(args[0], ("__bool__", "__len__")):
        return rt.opaque_call(bool, args, kw)
    return slots.truth(rt, args[0])


def _str(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if kw or len(args) != 1 or not _runs_python(args[0], ("__str__", "__repr__")):
        return rt.opaque_call(str, args, kw)
    return slots.str_of(rt, args[0])


def _format(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if (
        kw
        or not 1 <= len(args) <= 2
        or (len(args) == 2 and type(args[1]) is not str)
        or not _runs_python(args[0], ("__format__", "__str__", "__repr__"))
    ):
        return rt.opaque_call(format, args, kw)
    return slots.format_of(rt, args[0], args[1] if len(args) == 2 else "")


def _next(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if kw or not 1 <= len(args) <= 2:
        return rt.opaque_call(next, args, kw)
    it = args[0]
    if not _runs_python(it, ("__next__",)):
        return rt.opaque_call(next, args, kw)
    if len(args) == 1:
        return slots.next_or_raise(rt, it)
    value = slots.next_item(rt, it)
    return args[1] if value is NULL else value


def _iter(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if kw or len(args) != 1 or not _runs_python(args[0], ("__iter__", "__getitem__")):
        return rt.opaque_call(iter, args, kw)
    return slots.get_iter(rt, args[0])


def _any(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if kw or len(args) != 1:
        return rt.opaque_call(any, args, kw)
    return any(slots.truth(rt, v) for v in slots.iterate(rt, args[0]))


def _all(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if kw or len(args) != 1:
        return rt.opaque_call(all, args, kw)
    return all(slots.truth(rt, v) for v in slots.iterate(rt, args[0]))


def _consumer(native: Callable[..., Any]) -> Impl:
    """A builtin taking iterables as positional arguments (list, tuple, enumerate, zip, sum...):
    each Python-level iterable is handed over as an :class:`~thunder_interp._slots.Iterable`."""

    def impl(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if not args or _all_plain(args):
            return rt.opaque_call(native, args, kw)
        return rt.opaque_call(native, tuple(iterable_arg(rt, a) for a in args), kw)

    return impl


def _first_iterable(native: Callable[..., Any]) -> Impl:
    """A builtin whose first argument is an iterable (enumerate, sum, set, frozenset)."""

    def impl(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if not args or is_plain(args[0]):
            return rt.opaque_call(native, args, kw)
        return rt.opaque_call(native, (iterable_arg(rt, args[0]), *args[1:]), kw)

    return impl


def _filter(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if kw or len(args) != 2:
        return rt.opaque_call(filter, args, kw)
    fn, iterable = args
    if fn is None or fn is bool:
        return filter(_Interpreted(rt, _truth_of(rt)), iterable_arg(rt, iterable))
    return filter(_callable_arg(rt, fn), iterable_arg(rt, iterable))


def _truth_of(rt: Runtime) -> Callable[[Any], bool]:
    return functools.partial(slots.truth, rt)


def _map(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if kw or len(args) < 2:
        return rt.opaque_call(map, args, kw)
    return map(_callable_arg(rt, args[0]), *(iterable_arg(rt, a) for a in args[1:]))


def _ordered_key(rt: Runtime, key: Any) -> Callable[[Any], Any]:
    def wrapped(x: Any) -> Any:
        k = rt.call(key, (x,), None, None) if key is not None else x
        return k if is_plain(k) else _Ordered(rt, k)

    return wrapped


def _sorted(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if len(args) != 1 or set(kw) - {"key", "reverse"}:
        return rt.opaque_call(sorted, args, kw)
    items = list(iterable_arg(rt, args[0]))
    key = kw.get("key")
    if key is None and _all_plain(items):
        return rt.opaque_call(sorted, (items,), kw)
    return sorted(items, key=_ordered_key(rt, key), reverse=kw.get("reverse", False))


def _list_sort(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if len(args) != 1 or type(args[0]) is not list or set(kw) - {"key", "reverse"}:
        return rt.opaque_call(list.sort, args, kw)
    lst = args[0]
    key = kw.get("key")
    # Through ``opaque_call`` both ways: the sort writes into the list, which a caller may track.
    if key is None and _all_plain(lst):
        return rt.opaque_call(list.sort, args, kw)
    options = {"key": _ordered_key(rt, key), "reverse": kw.get("reverse", False)}
    return rt.opaque_call(list.sort, (lst,), options)


def _extremum(native: Callable[..., Any]) -> Impl:
    def impl(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if not args or set(kw) - {"key", "default"}:
            return rt.opaque_call(native, args, kw)
        single = len(args) == 1
        items = list(iterable_arg(rt, args[0])) if single else list(args)
        key = kw.get("key")
        if key is None and _all_plain(items):
            return rt.opaque_call(native, (items,) if single else tuple(items), kw)
        options = {**kw, "key": _ordered_key(rt, key)}
        return rt.opaque_call(native, (items,) if single else tuple(items), options)

    return impl


def _sum(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if not 1 <= len(args) <= 2 or set(kw) - {"start"} or (len(args) == 2 and kw):
        return rt.opaque_call(sum, args, kw)
    iterable = args[0]
    start = args[1] if len(args) == 2 else kw.get("start", 0)
    if isinstance(start, (str, bytes, bytearray)):
        return rt.opaque_call(sum, args, kw)  # CPython's error
    if type(iterable) in (list, tuple, range) and is_plain(start) and _all_plain(iterable):
        return rt.opaque_call(sum, args, kw)
    total = start
    plain = slots.PLAIN
    for x in iterable_arg(rt, iterable):
        if type(total) in plain and type(x) in plain:
            total = total + x
        else:
            total = slots.binary(rt, "+", total, x)
    return total


def _reduce(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if kw or not 2 <= len(args) <= 3:
        return rt.opaque_call(functools.reduce, args, kw)
    return functools.reduce(_callable_arg(rt, args[0]), iterable_arg(rt, args[1]), *args[2:])


def _accumulate(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    # itertools.accumulate(xs, func, initial=...): ``func`` called from C, interpreted.
    if not 1 <= len(args) <= 2 or set(kw) - {"func", "initial"}:
        return rt.opaque_call(itertools.accumulate, args, kw)
    func = args[1] if len(args) == 2 else kw.get("func")
    step = functools.partial(slots.binary, rt, "+") if func is None else _callable_arg(rt, func)
    return itertools.accumulate(iterable_arg(rt, args[0]), step, initial=kw.get("initial"))


def _starmap(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if kw or len(args) != 2:
        return rt.opaque_call(itertools.starmap, args, kw)
    return itertools.starmap(_callable_arg(rt, args[0]), iterable_arg(rt, args[1]))


def _reversed(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if kw or len(args) != 1:
        return rt.opaque_call(reversed, args, kw)
    seq = args[0]
    descr = slots.lookup_type(type(seq), "__reversed__")
    if descr is not NULL and slots.is_python_level(descr):
        return slots.call_special(rt, descr, seq)
    if descr is NULL:
        getitem = slots.lookup_type(type(seq), "__getitem__")
        if slots.is_python_level(getitem) or slots.is_python_level(
            slots.lookup_type(type(seq), "__len__")
        ):
            return _ReversedSequence(rt, seq, slots.length(rt, seq))
    return reversed(seq)


class _ReversedSequence:
    """``reversed(seq)`` of a sequence with a Python ``__getitem__`` or ``__len__``: CPython's
    ``reversed`` object, stepping through the interpreter."""

    __slots__ = ("index", "rt", "seq")

    def __init__(self, rt: Runtime, seq: Any, n: int) -> None:
        self.rt = rt
        self.seq = seq
        self.index = n - 1

    def __iter__(self) -> _ReversedSequence:
        return self

    def __next__(self) -> Any:
        if self.index >= 0 and self.seq is not None:
            try:
                item = slots.get_item(self.rt, self.seq, self.index)
            except (IndexError, StopIteration):
                pass
            else:
                self.index -= 1
                return item
        self.index = -1
        self.seq = None
        raise StopIteration

    def __length_hint__(self) -> int:
        if self.seq is None:
            return 0
        size = slots.length(self.rt, self.seq)
        position = self.index + 1
        return 0 if size < position else position


def _abs(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    if kw or len(args) != 1 or not _runs_python(args[0], ("__abs__",)):
        return rt.opaque_call(abs, args, kw)
    return slots.unary(rt, "abs", args[0])


# What each conversion special must return (as CPython checks it).
_RETURNS = {"__float__": float, "__int__": int, "__index__": int, "__complex__": complex}
_AS_FLOAT = ("__float__", "__index__")
_AS_INDEX = ("__index__",)


def _number_value(rt: Runtime, v: Any, names: tuple[str, ...]) -> Any:
    """``v``, or the result of the first of the specials ``names`` its type has when that one
    is Python code: run interpreted (what it reads is seen), where the builtin would call it
    from C."""
    cls = type(v)
    if cls in slots.PLAIN or is_plain(v):
        return v
    for name in names:
        descr = slots.lookup_type(cls, name)
        if descr is NULL:
            continue
        if not slots.is_python_level(descr):
            return v
        result = slots.call_special(rt, descr, v)
        expected = _RETURNS.get(name)  # (``__trunc__``: anything ``int`` takes)
        # (an object of a library's may stand for a number: a symbolic value)
        if (
            expected is not None
            and not isinstance(result, expected)
            and type(result).__module__ == "builtins"
        ):
            raise TypeError(
                f"{cls.__name__}.{name} returned non-{expected.__name__} "
                f"(type {type(result).__name__})"
            )
        return result
    return v


def converting(
    native: Callable[..., Any], names: tuple[str, ...], first: Callable[..., Any] | None = None
) -> Impl:
    """A builtin that converts its arguments with ``names`` (``float(x)``, ``math.sqrt(x)``,
    ``range(n)``): the Python specials are run interpreted first, the builtin then gets their
    results. ``first(*args, **kw)``, where given, answers (for the arguments and again for the
    converted ones) unless it returns NotImplemented."""

    def impl(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if first is not None and (answer := first(*args, **kw)) is not NotImplemented:
            return answer
        if not rt.plain_opaque and _all_plain(args):
            return rt.opaque_call(native, args, kw)
        converted = tuple(_number_value(rt, a, names) for a in args)
        if first is not None and (answer := first(*converted, **kw)) is not NotImplemented:
            return answer
        return rt.opaque_call(native, converted, kw)

    return impl


def _rounding(native: Callable[..., Any], name: str, fallback: tuple[str, ...]) -> Impl:
    """``round(x)``, ``math.floor(x)``...: a Python ``name`` special of ``x`` is the answer (run
    interpreted); without one, ``x`` is converted by ``fallback``."""

    def impl(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if not args or _all_plain(args[:1]):
            return rt.opaque_call(native, args, kw)
        descr = slots.lookup_type(type(args[0]), name)
        if descr is NULL:
            converted = (_number_value(rt, args[0], fallback), *args[1:])
            return rt.opaque_call(native, converted, kw)
        if not slots.is_python_level(descr) or kw:
            return rt.opaque_call(native, args, kw)
        return slots.call_special(rt, descr, *args)

    return impl


# The specials each number type's constructor converts by, in CPython's order.
CONVERSIONS: dict[Any, tuple[str, ...]] = {
    float: _AS_FLOAT,
    int: ("__int__", "__index__", "__trunc__"),
    complex: ("__complex__", *_AS_FLOAT),
}


def _number_lookasides() -> dict[Any, Impl]:
    table: dict[Any, Impl] = {
        **{t: converting(t, names) for t, names in CONVERSIONS.items()},
        range: converting(range, _AS_INDEX),
        round: _rounding(round, "__round__", ()),
        math.floor: _rounding(math.floor, "__floor__", _AS_FLOAT),
        math.ceil: _rounding(math.ceil, "__ceil__", _AS_FLOAT),
        math.trunc: _rounding(math.trunc, "__trunc__", ()),
    }
    by_index = {"factorial", "isqrt", "comb", "perm", "gcd", "lcm"}
    iterables = {"fsum", "prod", "dist", "sumprod"}
    for name in dir(math):
        fn = getattr(math, name)
        if type(fn) is type(len) and fn not in table and name not in iterables:
            table[fn] = converting(fn, _AS_INDEX if name in by_index else _AS_FLOAT)
    return table


def _register_callbacks() -> None:
    wrapped = _ordered_key(None, None)  # type: ignore[arg-type]
    register_c_callbacks(
        _Interpreted.__call__.__code__,
        wrapped.__code__,
        _Ordered.__lt__.__code__,
        _Ordered.__gt__.__code__,
        _ReversedSequence.__next__.__code__,
        _ReversedSequence.__length_hint__.__code__,
        slots.truth.__code__,
        slots.Iterable.__iter__.__code__,
        slots.Iterable.__length_hint__.__code__,
        slots.SequenceIterator.__next__.__code__,
        slots.next_item.__code__,
        slots.InterpretedIterator.__next__.__code__,
    )


_register_callbacks()


def _class_check(native: Callable[[Any, Any], bool], name: str) -> Impl:
    """``isinstance``/``issubclass``: a metaclass's Python ``__instancecheck__`` or
    ``__subclasscheck__`` is interpreted (typing protocols, Python ABCs)."""

    def impl(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
        if kw or len(args) != 2:
            return rt.opaque_call(native, args, kw)
        obj, cls = args
        if type(cls) is type or type(cls) is tuple:
            return rt.opaque_call(native, args, kw)
        if name == "__instancecheck__" and type(obj) is cls:
            return True  # CPython's shortcut: the hook is not called
        descr = slots.lookup_type(type(cls), name)
        if descr is NULL or not slots.is_python_level(descr):
            return rt.opaque_call(native, args, kw)
        return slots.truth(rt, slots.call_special(rt, descr, cls, obj))

    return impl


def implicit_lookasides() -> dict[Any, Any]:
    """The builtins above, as internal lookasides (built by the caller's lookaside class)."""
    return {
        is_interpreting: _interpreting,
        bool: _bool,
        len: _len,
        hash: _one(hash, slots.hash_of, "__hash__"),
        repr: _one(repr, slots.repr_of, "__repr__"),
        str: _str,
        format: _format,
        abs: _abs,
        operator.index: _one(operator.index, slots.as_index, "__index__"),
        iter: _iter,
        next: _next,
        any: _any,
        all: _all,
        list: _first_iterable(list),
        tuple: _first_iterable(tuple),
        set: _first_iterable(set),
        frozenset: _first_iterable(frozenset),
        enumerate: _first_iterable(enumerate),
        sum: _sum,
        zip: _consumer(zip),
        map: _map,
        filter: _filter,
        sorted: _sorted,
        list.sort: _list_sort,
        min: _extremum(min),
        max: _extremum(max),
        functools.reduce: _reduce,
        itertools.accumulate: _accumulate,
        itertools.starmap: _starmap,
        reversed: _reversed,
        isinstance: _class_check(isinstance, "__instancecheck__"),
        issubclass: _class_check(issubclass, "__subclasscheck__"),
        **_number_lookasides(),
    }


def unary_slot_builtins() -> frozenset[Any]:
    """Builtins whose native call is exact when their single argument is plain."""
    return frozenset({len, hash, repr, str, abs, operator.index, iter, next, bool, format})


_ = builtins
