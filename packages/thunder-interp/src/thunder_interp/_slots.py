"""Implicit calls: the special methods CPython's C code calls (``if a:``, ``len(a)``, ``a.x``,
``a + b``, ``for x in a``, ...), run by the interpreter when they are Python code.

Each operation has a fast path: when the operands' types are *plain* (every special method of the
type is C code or opaque code), the native operation runs, as CPython would run it, with no
Python code involved. Otherwise the operation follows CPython's algorithm here, looking special
methods up on the type (never the instance) and calling Python-level ones through
``Runtime.call``, so lookasides and hooks fire inside them. The results, the order of calls and
the error messages are CPython's.

``PLAIN`` is a cache of types found plain. A class that gains a Python special method after it
was found plain keeps running that method natively (still CPython's result, just not
interpreted).
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import operator
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from types import FunctionType, ModuleType
from typing import TYPE_CHECKING, Any

from thunder_interp._frame import NULL
from thunder_interp._opaque import is_opaque_code

if TYPE_CHECKING:
    from thunder_interp._runtime import Runtime

__all__ = ["PLAIN", "is_plain", "type_info"]

_C_CALLABLE_TYPES = frozenset(
    {
        type(object.__init__),  # wrapper_descriptor
        type(str.join),  # method_descriptor
        type(len),  # builtin_function_or_method
        type(dict.__dict__["fromkeys"]),  # classmethod_descriptor
        type(type.__dict__["__dict__"]),  # getset_descriptor
        type(type.__dict__["__weakrefoffset__"]),  # member_descriptor
        type((1).__add__),  # method-wrapper
        type(None),  # a disabled slot (``__hash__ = None``): CPython's error is native
    }
)


def is_python_level(descr: Any) -> bool:
    """Whether calling (or binding) the class attribute ``descr`` runs Python code to interpret."""
    t = type(descr)
    if t in _C_CALLABLE_TYPES:
        return False
    if t is FunctionType:
        return not is_opaque_code(descr.__code__)
    if t is staticmethod or t is classmethod:
        return is_python_level(descr.__func__)
    if t is property:
        for g in (descr.fget, descr.fset, descr.fdel):
            if type(g) is FunctionType and not is_opaque_code(g.__code__):
                return True
        return False
    # Any other object: Python-level when its type's __get__/__call__/__set__ is.
    for name in ("__get__", "__set__", "__delete__", "__call__"):
        d = lookup_type(t, name)
        if d is not NULL and type(d) is FunctionType and not is_opaque_code(d.__code__):
            return True
    return False


# The ``special_lookup`` callback of the interpretation running now in this thread or task
# (a context variable: two threads tracing at once each report to their own binder).
_special_lookup: contextvars.ContextVar[Callable[[type, str, Any], Any] | None] = (
    contextvars.ContextVar("special_lookup", default=None)
)
_IMMUTABLE_TYPE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: builtin and extension types


def set_special_lookup(hook: Callable[[type, str, Any], Any] | None) -> Any:
    """Installs ``hook`` as the ``special_lookup`` callback; returns the token that
    ``reset_special_lookup`` takes to put back the previous one."""
    return _special_lookup.set(hook)


def reset_special_lookup(token: Any) -> None:
    _special_lookup.reset(token)


def lookup_type(cls: type, name: str) -> Any:
    """``_PyType_Lookup``: ``name`` in the MRO's class dicts, no descriptor called; NULL if none."""
    mro = cls.__mro__
    try:
        entry = _MRO_DICTS[cls]
        if entry[0] is not mro:
            entry = _mro_dicts(cls, mro)
    except (KeyError, TypeError):  # (TypeError: a metaclass that makes classes unhashable)
        entry = _mro_dicts(cls, mro)
    for d in entry[1]:
        if name in d:
            found = d[name]
            if entry[2] and (name in _DUNDER or (name not in _NOT_DUNDER and _is_dunder(name))):
                hook = _special_lookup.get()
                if hook is not None:
                    replaced = hook(cls, name, found)
                    if replaced is not None:  # (what a tensor's class holds for a proxy's)
                        return replaced
            return found
    return NULL


# The names looked up, by whether they start with "__" (set membership costs less than the
# test: a lookup on a mutable class reports the names that do).
_DUNDER: set[str] = set()
_NOT_DUNDER: set[str] = set()


def _is_dunder(name: str) -> bool:
    if len(_DUNDER) + len(_NOT_DUNDER) > 65536:
        _DUNDER.clear()
        _NOT_DUNDER.clear()
    dunder = name[:2] == "__"
    (_DUNDER if dunder else _NOT_DUNDER).add(name)
    return dunder


# Per class: its MRO (when it was read), the dicts of the classes of its MRO, and whether the
# class is mutable (its lookups of special names are reported). A class's ``__dict__`` is a new
# read-only proxy each time it is read, which costs as much as the lookup: the dicts under them
# are found once (``_class_dict``). Only read, never changed.
_MRO_DICTS: dict[type, tuple[tuple[type, ...], tuple[Any, ...], bool]] = {}


def _mro_dicts(cls: type, mro: tuple[type, ...]) -> tuple[tuple[type, ...], tuple[Any, ...], bool]:
    if len(_MRO_DICTS) > 8192:  # classes created in a loop: forget, never grow without bound
        _MRO_DICTS.clear()
    entry = (mro, tuple(_class_dict(klass) for klass in mro), not cls.__flags__ & _IMMUTABLE_TYPE)
    with contextlib.suppress(TypeError):  # a metaclass that makes classes unhashable
        if _may_keep(cls):
            _MRO_DICTS[cls] = entry
    return entry


# The tables keyed by class (``_MRO_DICTS``, ``_INFO``, ``PLAIN``, ``PLAIN_READS``, ...) hold
# their classes. A class that lasts (``lasts_with_its_module``) stays in them; one made at run
# time (a factory's local class, a class ``type()`` makes per instance) only while an
# interpretation runs: it is forgotten when none runs any more, so it dies with its last use,
# as in eager (the next interpretation finds it out again, once).
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement or type()
_TRANSIENT: set[type] = set()  # the classes to forget
_RUNNING = [0]  # how many interpretations run, in all threads
_RUNNING_LOCK = threading.Lock()


def lasts_with_its_module(cls: type) -> bool:
    """Whether ``cls`` lives as long as its module: a builtin or extension type, or a class its
    module holds under its qualified name."""
    if not cls.__flags__ & _HEAPTYPE or cls.__flags__ & _IMMUTABLE_TYPE:
        return True
    try:
        found: Any = sys.modules.get(vars(cls).get("__module__"))  # type: ignore[arg-type]
        for name in cls.__qualname__.split("."):
            found = vars(found).get(name) if found is not None else None
    except Exception:  # (an unusual module or class): taken not to last
        return False
    return found is cls


def _may_keep(cls: type) -> bool:
    """Whether the tables may hold ``cls`` now (a class that does not last: while an
    interpretation runs, noted to be forgotten after)."""
    if cls in _TRANSIENT or lasts_with_its_module(cls):
        return True
    with _RUNNING_LOCK:
        if not _RUNNING[0]:
            return False
        _TRANSIENT.add(cls)
    return True


def interpretation_started() -> None:
    with _RUNNING_LOCK:
        _RUNNING[0] += 1


def interpretation_ended() -> None:
    """When no interpretation runs any more, the tables forget the classes that do not last."""
    with _RUNNING_LOCK:
        _RUNNING[0] -= 1
        if _RUNNING[0] or not _TRANSIENT:
            return
        classes = list(_TRANSIENT)
        _TRANSIENT.clear()
        for cls in classes:
            _MRO_DICTS.pop(cls, None)
            _INFO.pop(cls, None)
            ATTR_DESCRIPTORS.pop(cls, None)
        for table in (PLAIN, NOT_PLAIN, PLAIN_VALUES, PLAIN_ATTRS, WITHOUT_DEL):
            table.difference_update(classes)
        for names in (PLAIN_READS, PLAIN_WRITES):
            for found in list(names.values()):
                found.difference_update(classes)


def _class_dict(klass: type) -> Any:
    """The dict under ``klass.__dict__`` (the proxy itself where it is not found)."""
    proxy = klass.__dict__
    referents = gc.get_referents(proxy)
    if len(referents) == 1 and type(referents[0]) is dict:
        return referents[0]
    return proxy


# Special methods whose Python implementations CPython calls from C.
SLOT_NAMES = frozenset(
    {
        "__bool__", "__len__", "__iter__", "__next__", "__reversed__", "__contains__",
        "__getitem__", "__setitem__", "__delitem__", "__missing__", "__length_hint__",
        "__getattribute__", "__getattr__", "__setattr__", "__delattr__",
        "__str__", "__repr__", "__format__", "__hash__", "__index__", "__int__", "__float__",
        "__complex__", "__abs__", "__neg__", "__pos__", "__invert__", "__round__",
        "__lt__", "__le__", "__eq__", "__ne__", "__gt__", "__ge__",
        "__add__", "__radd__", "__iadd__", "__sub__", "__rsub__", "__isub__",
        "__mul__", "__rmul__", "__imul__", "__matmul__", "__rmatmul__", "__imatmul__",
        "__truediv__", "__rtruediv__", "__itruediv__", "__floordiv__", "__rfloordiv__",
        "__ifloordiv__", "__mod__", "__rmod__", "__imod__", "__divmod__", "__rdivmod__",
        "__pow__", "__rpow__", "__ipow__", "__lshift__", "__rlshift__", "__ilshift__",
        "__rshift__", "__rrshift__", "__irshift__", "__and__", "__rand__", "__iand__",
        "__or__", "__ror__", "__ior__", "__xor__", "__rxor__", "__ixor__",
        "__enter__", "__exit__", "__call__",
    }
)  # fmt: skip

_ATTR_HOOKS = ("__getattribute__", "__getattr__", "__setattr__", "__delattr__")


class TypeInfo:
    """What a type's instances need from the slow paths (computed once per type)."""

    __slots__ = ("descriptors", "finalized", "get_hook", "plain", "set_hook")

    def __init__(self, cls: type) -> None:
        found: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            found.update(vars(klass))
        self.plain = cls not in STAND_INS and not any(
            name in found and is_python_level(found[name]) for name in SLOT_NAMES
        )
        # Any Python function here (opaque ones too: a lookaside may replace them).
        hooks = {name: type(found.get(name)) is FunctionType for name in _ATTR_HOOKS}
        self.get_hook = hooks["__getattribute__"] or hooks["__getattr__"]
        # Whether its instances have a ``__del__`` (their creation is then an opaque call).
        self.finalized = "__del__" in found
        self.set_hook = hooks["__setattr__"] or hooks["__delattr__"]
        # Attribute names whose class attribute runs Python code when read or written.
        self.descriptors = frozenset(
            name
            for name, value in found.items()
            if type(value) is not FunctionType and is_python_level(value)
        ) | frozenset(name for klass, name in ATTRIBUTE_VIEWS if klass is cls)


_INFO: dict[type, TypeInfo] = {}
# The same for the classes that do not last (see ``_may_keep``), kept by the class alone: found
# again by the next interpretation, not computed again.
_TRANSIENT_INFO: weakref.WeakKeyDictionary[type, TypeInfo] = weakref.WeakKeyDictionary()
# Classes whose special methods the ``special_lookup`` hook may replace (a proxy standing for a
# class whose methods were replaced): never plain, so their operations look them up.
STAND_INS: set[type] = set()


def set_stand_in(cls: type, on: bool) -> None:
    """Whether ``cls``'s operations look its special methods up (``on``) or may run natively."""
    if (cls in STAND_INS) == on:
        return
    if on:
        STAND_INS.add(cls)
    else:
        STAND_INS.discard(cls)
    _INFO.pop(cls, None)
    _TRANSIENT_INFO.pop(cls, None)
    PLAIN.discard(cls)
    NOT_PLAIN.discard(cls)
    PLAIN_VALUES.discard(cls)
    WITHOUT_DEL.discard(cls)


# Types whose instances need no slow path for special methods (attribute access is separate).
PLAIN: set[type] = set()
# The types found not plain (as ``_INFO`` says; a test that costs no call of ``type_info``).
NOT_PLAIN: set[type] = set()
# The plain types whose equality is their own C code (not Python classes, whose instances may
# compare by identity, which a hooked interpretation reports).
PLAIN_VALUES: set[type] = set()
# Types whose instances need no slow path for attribute access.
PLAIN_ATTRS: set[type] = set()
# Types without a ``__del__`` (``object.__new__`` makes their instances with no opaque call).
WITHOUT_DEL: set[type] = set()
# Types without attribute hooks: the names whose reads run Python code (properties, ...).
ATTR_DESCRIPTORS: dict[type, frozenset[str]] = {}
# Per attribute name, the types (not in PLAIN_ATTRS) whose instances read it, or write it,
# natively: no attribute hook, and the name is none of their descriptors'. Filled as reads and
# writes find it out; generated blocks test them (the sets are only ever changed in place).
PLAIN_READS: dict[str, set[type]] = {}
PLAIN_WRITES: dict[str, set[type]] = {}


def plain_reads(name: str) -> set[type]:
    """The types whose instances read the attribute ``name`` natively (see PLAIN_READS)."""
    types = PLAIN_READS.get(name)
    if types is None:
        types = PLAIN_READS[name] = set()
    return types


def plain_writes(name: str) -> set[type]:
    """The types whose instances write the attribute ``name`` natively (see PLAIN_WRITES)."""
    types = PLAIN_WRITES.get(name)
    if types is None:
        types = PLAIN_WRITES[name] = set()
    return types


def _forget_plain_names(cls: type | None) -> None:
    """Drop ``cls`` (None: every type) from PLAIN_READS and PLAIN_WRITES."""
    for table in (PLAIN_READS, PLAIN_WRITES):
        for types in table.values():
            if cls is None:
                types.clear()
            else:
                types.discard(cls)


# Attributes that interpreted code reads through a view of their value: ``tb.tb_frame`` shows
# the interpreted frame a traceback entry stands for (see ``_frames``).
ATTRIBUTE_VIEWS: dict[tuple[type, str], Callable[[Any], Any]] = {}


def register_attribute_view(cls: type, name: str, view: Callable[[Any], Any]) -> None:
    """Interpreted code reading ``obj.name`` (``obj`` of exactly ``cls``) sees ``view(value)``."""
    ATTRIBUTE_VIEWS[cls, name] = view
    _INFO.pop(cls, None)  # recomputed with ``name`` among its descriptors
    _TRANSIENT_INFO.pop(cls, None)
    PLAIN.discard(cls)
    NOT_PLAIN.discard(cls)
    PLAIN_VALUES.discard(cls)
    PLAIN_ATTRS.discard(cls)
    ATTR_DESCRIPTORS.pop(cls, None)
    _forget_plain_names(cls)


def type_info(cls: type) -> TypeInfo:
    info = _INFO.get(cls)
    if info is None:
        info = _TRANSIENT_INFO.get(cls)
        if info is None:
            info = TypeInfo(cls)
            if not lasts_with_its_module(cls):
                _TRANSIENT_INFO[cls] = info
        if not _may_keep(cls):
            return info
        if len(_INFO) > 8192:  # classes created in a loop: forget, never grow without bound
            _INFO.clear()
            NOT_PLAIN.clear()
            WITHOUT_DEL.clear()
            ATTR_DESCRIPTORS.clear()
            _forget_plain_names(None)
        _INFO[cls] = info
        if not info.finalized:
            WITHOUT_DEL.add(cls)
        if info.plain:
            PLAIN.add(cls)
            if cls.__flags__ & _IMMUTABLE_TYPE and cls is not object:  # (object(): a sentinel)
                PLAIN_VALUES.add(cls)
        else:
            NOT_PLAIN.add(cls)
        if cls is super:
            pass  # its lookup calls descriptors found on the MRO (see _super_attribute)
        elif cls is ModuleType:
            pass  # a name its globals lack may be answered by its Python ``__getattr__``
        elif not info.get_hook and not info.set_hook and not info.descriptors:
            PLAIN_ATTRS.add(cls)
        elif not info.get_hook:
            ATTR_DESCRIPTORS[cls] = info.descriptors
    return info


def is_plain(value: Any) -> bool:
    """Whether ``value``'s special methods all run natively."""
    cls = type(value)
    return cls in PLAIN or (cls not in NOT_PLAIN and type_info(cls).plain)


for _t in (int, float, complex, bool, str, bytes, bytearray, list, tuple, dict, set, frozenset,
           type(None), range, slice, type, FunctionType, type(len), type(...)):  # fmt: skip
    type_info(_t)
# Attributes of class objects may be descriptors with a Python __get__ (see load_attr).
PLAIN_ATTRS.discard(type)


# --------------------------------------------------------------------------------------------------
# calling special methods


_NO_ENTRY: tuple[Any, Any] = (None, None)


def run_special(rt: Runtime, fn: FunctionType, args: list[Any]) -> Any:
    """Call the Python function ``fn`` found as a special method (``args``, the object first,
    is taken over): interpreted, or through its lookaside, or natively as ``native_special``
    says; NULL when ``fn`` is opaque code (then the native operation is the right one)."""
    code = fn.__code__
    entry = rt.code_entries.get(id(code), _NO_ENTRY)
    cc = entry[1]
    if entry[0] is code:
        if len(args) == cc.call_argcount and rt.native_special is None and fn not in rt.lookasides:
            return cc.enter(rt, fn, code, cc, args)  # warm code: the frame directly
        if cc.native:
            return NULL
    elif is_opaque_code(code):
        return NULL
    if fn in rt.lookasides:
        return rt.call(fn, args, None, None)
    if rt.native_special is not None and _native(rt, fn):
        return fn(*args)
    return rt.call_function(fn, args, None)


def call_special(rt: Runtime, descr: Any, obj: Any, *args: Any) -> Any:
    """Call the special method ``descr`` (found on ``type(obj)``) as ``vectorcall_method`` does:
    functions unbound with ``obj`` first, other descriptors bound with their ``__get__``."""
    if type(descr) is FunctionType:
        code = descr.__code__
        entry = rt.code_entries.get(id(code), _NO_ENTRY)
        if (
            entry[0] is code
            and len(args) + 1 == entry[1].call_argcount
            and rt.native_special is None
            and descr not in rt.lookasides
        ):
            return entry[1].enter(rt, descr, code, entry[1], [obj, *args])
        if descr in rt.lookasides:
            return rt.call(descr, (obj, *args), None, None)
        if rt.native_special is not None and _native(rt, descr):
            return descr(obj, *args)
        return rt.call_function(descr, [obj, *args], None)
    get = lookup_type(type(descr), "__get__")
    if get is not NULL:
        descr = descriptor_get(rt, descr, get, obj, type(obj))
    return rt.call(descr, args, None, None)


def _native(rt: Runtime, fn: FunctionType) -> bool:
    """Whether the interpretation's ``native_special`` predicate keeps ``fn`` native."""
    cache = rt.native_special_cache
    answer = cache.get(fn.__code__)
    if answer is None:
        predicate = rt.native_special
        answer = cache[fn.__code__] = bool(predicate is not None and predicate(fn))
    return answer


def descriptor_get(rt: Runtime, descr: Any, get: Any, obj: Any, owner: Any) -> Any:
    """``descr.__get__(obj, owner)``, interpreting a Python getter (a property's ``fget``)."""
    if type(get) is FunctionType:
        return rt.call(get, (descr, obj, owner), None, None)
    if type(descr) is property and obj is not None:
        fget = descr.fget
        if type(fget) is FunctionType and not is_opaque_code(fget.__code__):
            return rt.call(fget, (obj,), None, None)
    return get(descr, obj, owner)


def _special(obj: Any, name: str) -> Any:
    """The Python-level special method ``name`` of ``type(obj)``, or NULL (native is right)."""
    descr = lookup_type(type(obj), name)
    if descr is NULL or not is_python_level(descr):
        return NULL
    return descr


# --------------------------------------------------------------------------------------------------
# truth, length, index, hash


def truth(rt: Runtime, v: Any) -> bool:
    """``PyObject_IsTrue``."""
    if v is True:
        return True
    if v is False or v is None:
        return False
    cls = type(v)
    if cls in PLAIN or (cls not in NOT_PLAIN and type_info(cls).plain):
        return bool(v)
    descr = lookup_type(cls, "__bool__")
    if descr is not NULL:
        if type(descr) is FunctionType:
            result = run_special(rt, descr, [v])
            if result is NULL:
                return bool(v)  # opaque code
        elif not is_python_level(descr):
            return bool(v)
        else:
            result = call_special(rt, descr, v)
        if type(result) is not bool:
            if _stands_for_number(result, bool):
                return truth(rt, result)
            raise TypeError(f"__bool__ should return bool, returned {type(result).__name__}")
        return result
    if _special(v, "__len__") is not NULL:
        return length(rt, v) != 0
    return bool(v)


def length(rt: Runtime, v: Any) -> int:
    """``len(v)``."""
    cls = type(v)
    if cls in PLAIN or (cls not in NOT_PLAIN and type_info(cls).plain):
        return len(v)
    return length_by(rt, v, lookup_type(cls, "__len__"))


def length_by(rt: Runtime, v: Any, descr: Any) -> int:
    """``len(v)`` of a value of a type that is not plain, whose ``__len__`` is ``descr`` (as
    ``lookup_type`` found it)."""
    if type(descr) is FunctionType:
        result = run_special(rt, descr, [v])
        if result is NULL:
            return len(v)  # opaque code
    elif descr is NULL or not is_python_level(descr):
        return len(v)
    else:
        result = call_special(rt, descr, v)
    return length_result(rt, result)


def length_result(rt: Runtime, result: Any) -> int:
    """What ``len`` makes of what ``__len__`` returned."""
    n = result if type(result) is int else as_index(rt, result)
    if n < 0:
        raise ValueError("__len__() should return >= 0")
    if n > _MAX_SIZE:
        raise OverflowError("cannot fit 'int' into an index-sized integer")
    return n


_MAX_SIZE = (1 << 63) - 1


def as_index(rt: Runtime, v: Any) -> int:
    """``PyNumber_Index``: an int from ``v`` (interpreting a Python ``__index__``)."""
    if type(v) is int:
        return v
    descr = _special(v, "__index__")
    if descr is NULL:
        return operator.index(v)
    result = call_special(rt, descr, v)
    if not isinstance(result, int):
        if _stands_for_number(result, int):
            return as_index(rt, result)
        raise TypeError(f"__index__ returned non-int (type {type(result).__name__})")
    return int(result) if type(result) is not int else result


def hash_of(rt: Runtime, v: Any) -> int:
    """``hash(v)``."""
    descr = _special(v, "__hash__")
    if descr is NULL:
        return hash(v)
    result = call_special(rt, descr, v)
    if not isinstance(result, int):
        if _stands_for_number(result, int):
            return hash_of(rt, result)
        raise TypeError("__hash__ method should return an integer")
    return hash(result)


def _stands_for_number(result: Any, kind: type) -> bool:
    """Whether ``result``, returned by a Python special that must return a ``kind``, is a
    library's object standing for one (a symbolic value computed from the program's inputs,
    whose ``python_type`` tells what it stands for): it converts itself, as eager's value
    would be taken as it is."""
    if type(result).__module__ == "builtins":
        return False
    python_type = getattr(result, "python_type", None)
    return isinstance(python_type, type) and issubclass(python_type, kind)


# --------------------------------------------------------------------------------------------------
# str, repr, format


def str_of(rt: Runtime, v: Any) -> str:
    """``str(v)``."""
    if type(v) is str:
        return v
    descr = lookup_type(type(v), "__str__")
    if descr is object.__str__:
        return repr_of(rt, v)
    if descr is NULL or not is_python_level(descr):
        return str(v)
    result = call_special(rt, descr, v)
    if not isinstance(result, str):
        raise TypeError(f"__str__ returned non-string (type {type(result).__name__})")
    return result


def repr_of(rt: Runtime, v: Any) -> str:
    """``repr(v)``."""
    descr = _special(v, "__repr__")
    if descr is NULL:
        return repr(v)
    result = call_special(rt, descr, v)
    if not isinstance(result, str):
        raise TypeError(f"__repr__ returned non-string (type {type(result).__name__})")
    return result


# Builtin values whose ``__format__`` no caller looks aside (checked first: f-strings of numbers
# and text are most of them).
_FORMATTED_NATIVELY = frozenset({int, float, complex, bool, str, bytes, type(None)})


def format_of(rt: Runtime, v: Any, spec: str) -> str:
    """``format(v, spec)``."""
    cls = type(v)
    if cls in _FORMATTED_NATIVELY:
        return format(v, spec)
    descr = lookup_type(cls, "__format__")
    if descr is not NULL and descr in rt.lookasides:  # the caller answers for the value
        result = rt.call(descr, (v, spec), None, None)
    elif descr is object.__format__ and not spec and str in rt.lookasides:
        # format(v, "") is str(v) (``f"{[t]}"``): as a call of str() in the program would be
        result = rt.call(str, (v,), None, None)
    elif cls in PLAIN or (cls not in NOT_PLAIN and type_info(cls).plain):
        return format(v, spec)
    elif descr is object.__format__:
        if spec:
            raise TypeError(f"unsupported format string passed to {cls.__name__}.__format__")
        return str_of(rt, v)
    elif descr is NULL or not is_python_level(descr):
        return format(v, spec)
    else:
        result = call_special(rt, descr, v, spec)
    if not isinstance(result, str):
        raise TypeError(f"__format__ must return a str, not {type(result).__name__}")
    return result


def convert(rt: Runtime, v: Any, conversion: int) -> Any:
    """An f-string conversion: 1 ``!s``, 2 ``!r``, 3 ``!a``."""
    if conversion and type(v) not in _FORMATTED_NATIVELY:
        as_text = str if conversion == 1 else repr
        if as_text in rt.lookasides:  # as a call of str() or repr() in the program would be
            text = rt.call(as_text, (v,), None, None)
            if conversion == 3:
                return text.encode("ascii", "backslashreplace").decode("ascii")
            return text
    if conversion == 1:
        return str_of(rt, v)
    if conversion == 2:
        return repr_of(rt, v)
    if conversion == 3:
        text = repr_of(rt, v)
        return text.encode("ascii", "backslashreplace").decode("ascii")
    return v


# --------------------------------------------------------------------------------------------------
# iteration


def get_iter(rt: Runtime, obj: Any) -> Any:
    """``iter(obj)``."""
    cls = type(obj)
    if cls in PLAIN or (cls not in NOT_PLAIN and type_info(cls).plain):
        return iter(obj)
    descr = lookup_type(cls, "__iter__")
    if descr is NULL:
        getitem = _special(obj, "__getitem__")
        if getitem is not NULL:
            return SequenceIterator(rt, obj, getitem)
        return iter(obj)
    if not is_python_level(descr):
        return iter(obj)
    it = call_special(rt, descr, obj)
    if lookup_type(type(it), "__next__") is NULL:
        raise TypeError(f"iter() returned non-iterator of type '{type(it).__name__}'")
    return it


def next_item(rt: Runtime, it: Any) -> Any:
    """``next(it)``, or NULL when the iterator is exhausted."""
    cls = type(it)
    if cls in PLAIN or (cls not in NOT_PLAIN and type_info(cls).plain):
        return next(it, NULL)
    descr = _special(it, "__next__")
    if descr is NULL:
        return next(it, NULL)
    try:
        return call_special(rt, descr, it)
    except StopIteration:
        return NULL


def next_or_raise(rt: Runtime, it: Any) -> Any:
    """``next(it)`` without a default: the iterator's own StopIteration (its value, args and
    traceback) reaches the caller, as ``tp_iternext``'s does in CPython."""
    descr = _special(it, "__next__")
    if descr is NULL:
        return next(it)
    return call_special(rt, descr, it)


class SequenceIterator:
    """The iterator of an object with a Python ``__getitem__`` and no ``__iter__``."""

    __slots__ = ("getitem", "index", "obj", "rt")

    def __init__(self, rt: Runtime, obj: Any, getitem: Any) -> None:
        self.rt = rt
        self.obj = obj
        self.getitem = getitem
        self.index = 0

    def __iter__(self) -> SequenceIterator:
        return self

    def __next__(self) -> Any:
        if self.obj is None:
            raise StopIteration
        try:
            value = call_special(self.rt, self.getitem, self.obj, self.index)
        except (IndexError, StopIteration):
            self.obj = None
        else:
            self.index += 1
            return value
        # Outside the handler: CPython clears the error and raises a new StopIteration, chained
        # to the exception being handled (if any), not to the one it cleared.
        raise StopIteration


def iterate(rt: Runtime, obj: Any) -> Iterator[Any]:
    """An iterator over ``obj`` whose steps are interpreted (native for plain iterators)."""
    it = get_iter(rt, obj)
    if is_plain(it):
        return it  # type: ignore[no-any-return]
    return InterpretedIterator(rt, it)


class InterpretedIterator:
    """``it`` stepped through the interpreter. An iterator, not a generator: the StopIteration
    that ``it.__next__`` raises (with its value) reaches the native builtin driving it, as it
    would in CPython (``next(map(f, it))`` raises it again)."""

    __slots__ = ("it", "rt")

    def __init__(self, rt: Runtime, it: Any) -> None:
        self.rt = rt
        self.it = it

    def __iter__(self) -> InterpretedIterator:
        return self

    def __next__(self) -> Any:
        return next_or_raise(self.rt, self.it)


class Iterable:
    """An iterable whose ``iter()`` is :func:`iterate` of ``obj``: handed to native builtins so
    that they iterate a Python-level iterable through the interpreter, at the moment they would
    have called ``iter(obj)``."""

    __slots__ = ("obj", "rt")

    def __init__(self, rt: Runtime, obj: Any) -> None:
        self.rt = rt
        self.obj = obj

    def __iter__(self) -> Iterator[Any]:
        return iterate(self.rt, self.obj)

    def __length_hint__(self) -> Any:
        # ``list()`` and ``tuple()`` size their result with ``PyObject_LengthHint(obj)``.
        obj = self.obj
        cls = type(obj)
        if lookup_type(cls, "__len__") is not NULL:
            try:
                return length(self.rt, obj)
            except TypeError:
                pass
        hint = lookup_type(cls, "__length_hint__")
        if hint is NULL or hint is None:
            return NotImplemented
        if is_python_level(hint):
            return call_special(self.rt, hint, obj)
        return hint(obj)


def iterable_arg(rt: Runtime, obj: Any) -> Any:
    """``obj``, or an :class:`Iterable` over it when iterating it runs Python code."""
    return obj if is_plain(obj) else Iterable(rt, obj)


# --------------------------------------------------------------------------------------------------
# attributes


def load_attr(rt: Runtime, obj: Any, name: str) -> Any:
    """``obj.name``."""
    cls = type(obj)
    if cls is type:
        return _class_attribute(rt, obj, name)
    if cls is super:
        return _super_attribute(rt, obj, name)
    if cls is ModuleType and name not in obj.__dict__ and "__getattr__" in obj.__dict__:
        return _module_attribute(rt, obj, name)
    info = _INFO.get(cls) or type_info(cls)
    if not info.get_hook and name not in info.descriptors:
        return getattr(obj, name)
    view = ATTRIBUTE_VIEWS.get((cls, name))
    if view is not None:
        return view(getattr(obj, name))
    getattribute = lookup_type(cls, "__getattribute__")
    if getattribute is object.__getattribute__ and not info.get_hook:
        return generic_getattr(rt, obj, name)  # no __getattr__ to fall back on
    getattr_ = lookup_type(cls, "__getattr__") if info.get_hook else NULL
    custom = getattribute is not object.__getattribute__ and (
        is_python_level(getattribute) or getattribute in rt.lookasides
    )
    native_getattr = not is_python_level(getattr_) and getattr_ not in rt.lookasides
    if getattr_ is not NULL and native_getattr and not custom and name not in info.descriptors:
        return getattr(obj, name)  # a native __getattr__ (marked opaque)
    try:
        if custom:
            return call_special(rt, getattribute, obj, name)
        if getattribute is object.__getattribute__:
            return generic_getattr(rt, obj, name)
        if getattribute is type.__getattribute__:
            found = _metaclass_property(rt, obj, name)
            if found is not NULL:
                return found
        return getattribute(obj, name)
    except AttributeError:
        if getattr_ is NULL:
            raise
    # Outside the handler: CPython clears the AttributeError before calling __getattr__.
    if is_python_level(getattr_) or getattr_ in rt.lookasides:
        return call_special(rt, getattr_, obj, name)
    return getattr_(obj, name)


def _metaclass_property(rt: Runtime, klass: Any, name: str) -> Any:
    """``Cls.name`` answered by a property of its metaclass (a data descriptor comes first in
    ``type.__getattribute__``) whose getter is Python code: interpreted. NULL otherwise."""
    descr = lookup_type(type(klass), name)
    if type(descr) is not property or type(descr.fget) is not FunctionType:
        return NULL
    return run_special(rt, descr.fget, [klass])


def _module_attribute(rt: Runtime, module: ModuleType, name: str) -> Any:
    """``module.name`` (``module_getattro``) for a name its globals lack: its type's, else
    what the module's ``__getattr__`` (PEP 562) answers, a Python one interpreted."""
    try:
        return object.__getattribute__(module, name)
    except AttributeError:
        getattr_ = module.__dict__.get("__getattr__")
        if type(getattr_) is not FunctionType:
            raise
    result = run_special(rt, getattr_, [name])
    return getattr(module, name) if result is NULL else result


def descriptor_attribute(rt: Runtime, obj: Any, cls: type, name: str) -> Any:
    """``obj.name`` (``cls`` its type) where ``name`` is one of the descriptors of a class
    without Python attribute hooks (``ATTR_DESCRIPTORS``): :func:`load_attr`'s path for it."""
    if cls is type or cls is super or (cls, name) in ATTRIBUTE_VIEWS:
        return load_attr(rt, obj, name)
    if lookup_type(cls, "__getattribute__") is object.__getattribute__:
        return generic_getattr(rt, obj, name)
    return load_attr(rt, obj, name)  # a native __getattribute__ (it looks it up again)


def _super_attribute(rt: Runtime, sup: Any, name: str) -> Any:
    """``super().name`` (``super_getattro``): the first class after ``__thisclass__`` in the
    MRO of ``__self_class__`` that defines ``name``; its descriptor bound to the instance (to
    nothing when the super is of a class), a Python ``__get__`` or getter interpreted."""
    start = sup.__self_class__
    if start is None or name == "__class__":
        return getattr(sup, name)
    mro = start.__mro__
    this = sup.__thisclass__
    i = next((k for k, klass in enumerate(mro) if klass is this), len(mro))
    for klass in mro[i + 1 :]:
        d = klass.__dict__
        if name not in d:
            continue
        descr = d[name]
        get = lookup_type(type(descr), "__get__")
        if get is NULL:
            return descr
        obj = sup.__self__
        instance = None if obj is start else obj
        if type(get) is FunctionType and not is_opaque_code(get.__code__):
            return rt.call(get, (descr, instance, start), None, None)
        if type(descr) is property and instance is not None:
            fget = descr.fget
            if type(fget) is FunctionType and not is_opaque_code(fget.__code__):
                return rt.call(fget, (instance,), None, None)
        return get(descr, instance, start)
    return getattr(sup, name)


def _class_attribute(rt: Runtime, klass: type, name: str) -> Any:
    """``Cls.name`` (``type.__getattribute__``), interpreting a Python ``__get__``."""
    own = _INFO.get(klass) or type_info(klass)
    if name not in own.descriptors:
        return getattr(klass, name)
    meta = lookup_type(type, name)
    if meta is not NULL and lookup_type(type(meta), "__set__") is not NULL:
        return getattr(klass, name)  # a data descriptor of the metaclass comes first
    descr = lookup_type(klass, name)
    get = lookup_type(type(descr), "__get__") if descr is not NULL else NULL
    if type(get) is FunctionType and not is_opaque_code(get.__code__):
        return rt.call(get, (descr, None, klass), None, None)
    return getattr(klass, name)


def _instance_dict(obj: Any) -> Any:
    try:
        d = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None
    return d if type(d) is dict else None


def generic_getattr(rt: Runtime, obj: Any, name: str) -> Any:
    """``PyObject_GenericGetAttr`` with Python descriptors interpreted."""
    cls = type(obj)
    descr = lookup_type(cls, name)
    get: Any = NULL
    if descr is not NULL:
        dcls = type(descr)
        if dcls is property and obj is not None:
            # A data descriptor whose getter, when Python code, is interpreted.
            fget = descr.fget
            if type(fget) is FunctionType:
                value = run_special(rt, fget, [obj])
                if value is not NULL:
                    return value
            return property.__get__(descr, obj, cls)
        get = lookup_type(dcls, "__get__")
        if get is not NULL and (
            lookup_type(dcls, "__set__") is not NULL or lookup_type(dcls, "__delete__") is not NULL
        ):
            _report_descriptor(rt, obj, name, descr, get)
            return descriptor_get(rt, descr, get, obj, cls)
    d = _instance_dict(obj)
    if d is not None:
        value = d.get(name, NULL)
        if value is not NULL:
            return value
    if get is not NULL:
        _report_descriptor(rt, obj, name, descr, get)
        return descriptor_get(rt, descr, get, obj, cls)
    if descr is not NULL:
        return descr
    return object.__getattribute__(obj, name)  # raises CPython's AttributeError


def _report_descriptor(rt: Runtime, obj: Any, name: str, descr: Any, get: Any) -> None:
    hook = rt.cb_descriptor_get
    if hook is not None and type(get) is FunctionType:
        hook(obj, name, descr)


def store_attr(rt: Runtime, obj: Any, name: str, value: Any) -> None:
    """``obj.name = value``."""
    cls = type(obj)
    info = _INFO.get(cls) or type_info(cls)
    if not info.set_hook and name not in info.descriptors:
        setattr(obj, name, value)
        if cls in _INFO:  # (not a class the tables may not hold now)
            plain_writes(name).add(cls)
        return
    setter = lookup_type(cls, "__setattr__")
    if setter is object.__setattr__:
        generic_setattr(rt, obj, name, value)
    elif is_python_level(setter) or setter in rt.lookasides:
        call_special(rt, setter, obj, name, value)
    else:
        setattr(obj, name, value)


def generic_setattr(rt: Runtime, obj: Any, name: str, value: Any) -> None:
    """``PyObject_GenericSetAttr`` with a Python ``__set__`` (a property's ``fset``) interpreted."""
    descr = lookup_type(type(obj), name)
    if descr is not NULL and is_python_level(descr):
        dcls = type(descr)
        set_ = lookup_type(dcls, "__set__")
        if type(set_) is FunctionType:
            rt.call(set_, (descr, obj, value), None, None)
            return
        if dcls is property and type(descr.fset) is FunctionType:
            rt.call(descr.fset, (obj, value), None, None)
            return
    object.__setattr__(obj, name, value)


def delete_attr(rt: Runtime, obj: Any, name: str) -> None:
    """``del obj.name``."""
    cls = type(obj)
    info = _INFO.get(cls) or type_info(cls)
    if not info.set_hook and name not in info.descriptors:
        delattr(obj, name)
        return
    deleter = lookup_type(cls, "__delattr__")
    if deleter is object.__delattr__:
        generic_delattr(rt, obj, name)
    elif is_python_level(deleter) or deleter in rt.lookasides:
        call_special(rt, deleter, obj, name)
    else:
        delattr(obj, name)


def generic_delattr(rt: Runtime, obj: Any, name: str) -> None:
    """``PyObject_GenericSetAttr`` deleting, with a Python ``__delete__`` interpreted."""
    descr = lookup_type(type(obj), name)
    if descr is not NULL and is_python_level(descr):
        dcls = type(descr)
        delete = lookup_type(dcls, "__delete__")
        if type(delete) is FunctionType:
            rt.call(delete, (descr, obj), None, None)
            return
        if dcls is property and type(descr.fdel) is FunctionType:
            rt.call(descr.fdel, (obj,), None, None)
            return
    object.__delattr__(obj, name)


# --------------------------------------------------------------------------------------------------
# operators

_BINARY: dict[str, tuple[str, str, Callable[[Any, Any], Any]]] = {
    "+": ("__add__", "__radd__", operator.add),
    "-": ("__sub__", "__rsub__", operator.sub),
    "*": ("__mul__", "__rmul__", operator.mul),
    "@": ("__matmul__", "__rmatmul__", operator.matmul),
    "/": ("__truediv__", "__rtruediv__", operator.truediv),
    "//": ("__floordiv__", "__rfloordiv__", operator.floordiv),
    "%": ("__mod__", "__rmod__", operator.mod),
    "**": ("__pow__", "__rpow__", operator.pow),
    "<<": ("__lshift__", "__rlshift__", operator.lshift),
    ">>": ("__rshift__", "__rrshift__", operator.rshift),
    "&": ("__and__", "__rand__", operator.and_),
    "|": ("__or__", "__ror__", operator.or_),
    "^": ("__xor__", "__rxor__", operator.xor),
}
# The builtin containers whose in-place operators write into them (``l += x``, ``d |= e``).
MUTABLE_CONTAINERS: frozenset[type] = frozenset({list, dict, set, OrderedDict})
_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.iadd,
    "-": operator.isub,
    "*": operator.imul,
    "@": operator.imatmul,
    "/": operator.itruediv,
    "//": operator.ifloordiv,
    "%": operator.imod,
    "**": operator.ipow,
    "<<": operator.ilshift,
    ">>": operator.irshift,
    "&": operator.iand,
    "|": operator.ior,
    "^": operator.ixor,
}
# C sequence types implement + and * as concatenation and repetition, which CPython tries only
# after both operands' numeric slots.
_SEQUENCE_OWNERS = frozenset({list, tuple, str, bytes, bytearray})


_WRAPPER_DESCRIPTOR: Any = type(object.__init__)


def _is_sequence_slot(descr: Any) -> bool:
    return type(descr) is _WRAPPER_DESCRIPTOR and descr.__objclass__ in _SEQUENCE_OWNERS


# Text types whose ``%`` formats its right operand in C (calling its text methods natively).
FORMATTING_TEXT = frozenset({str, bytes, bytearray})


def _formats_text(sym: str, ta: type, tb: type) -> bool:
    """Whether ``a % b`` is ``a.__mod__(b)``'s formatting: a text left operand, whose ``%`` runs
    first unless the right one is of a subclass of its type (which may answer first)."""
    return sym == "%" and ta in FORMATTING_TEXT and not issubclass(tb, ta)


def binary(rt: Runtime, sym: str, a: Any, b: Any) -> Any:
    """``a <sym> b`` (``sym`` as in ``BINARY_OP``; ``"+="`` for in-place)."""
    entry = _BINARY.get(sym)
    if entry is None:
        return inplace(rt, sym[:-1], a, b)
    name, rname, native = entry
    ta, tb = type(a), type(b)
    if sym == "%" and _formats_text(sym, ta, tb):
        # ``"%s" % x`` makes text of ``x`` (or of what a tuple or dict holds) in C: through
        # ``opaque_call``, so that a caller sees what is formatted.
        return rt.opaque_call(a.__mod__, (b,), None)
    if (ta in PLAIN or (ta not in NOT_PLAIN and type_info(ta).plain)) and (
        tb in PLAIN or (tb not in NOT_PLAIN and type_info(tb).plain)
    ):
        return native(a, b)
    slot_a = lookup_type(ta, name)
    if tb is ta and type(slot_a) is FunctionType:
        # Both operands of one class with a Python method (the reflected one is not tried).
        result = run_special(rt, slot_a, [a, b])
        if result is NULL:
            return native(a, b)  # opaque code
        if result is NotImplemented:
            raise TypeError(
                f"unsupported operand type(s) for {sym}: '{ta.__name__}' and '{tb.__name__}'"
            )
        return result
    slot_b = lookup_type(tb, rname) if tb is not ta else NULL
    if not is_python_level(slot_a) and not is_python_level(slot_b):
        return native(a, b)
    result = _binary_slots(rt, a, b, slot_a, slot_b, rname)
    if result is NotImplemented:
        raise TypeError(
            f"unsupported operand type(s) for {sym}: '{ta.__name__}' and '{tb.__name__}'"
        )
    return result


def _binary_slots(rt: Runtime, a: Any, b: Any, slot_a: Any, slot_b: Any, rname: str) -> Any:
    ta, tb = type(a), type(b)
    deferred: list[tuple[Any, Any, Any]] = []
    if _is_sequence_slot(slot_a):
        deferred.append((slot_a, a, b))
        slot_a = NULL
    if _is_sequence_slot(slot_b):
        deferred.append((slot_b, b, a))
        slot_b = NULL
    if slot_b is not NULL and issubclass(tb, ta) and lookup_type(ta, rname) is not slot_b:
        result = _call_binary(rt, slot_b, b, a)
        if result is not NotImplemented:
            return result
        slot_b = NULL
    if slot_a is not NULL:
        result = _call_binary(rt, slot_a, a, b)
        if result is not NotImplemented:
            return result
    if slot_b is not NULL:
        result = _call_binary(rt, slot_b, b, a)
        if result is not NotImplemented:
            return result
    for slot, x, y in deferred:
        result = slot(x, y)
        if result is not NotImplemented:
            return result
    return NotImplemented


def _call_binary(rt: Runtime, slot: Any, x: Any, y: Any) -> Any:
    if slot is None:
        return NotImplemented
    if is_python_level(slot):
        return call_special(rt, slot, x, y)
    return slot(x, y)


def inplace(rt: Runtime, sym: str, a: Any, b: Any) -> Any:
    """``a <sym>= b``."""
    ta, tb = type(a), type(b)
    if _formats_text(sym, ta, tb):
        return rt.opaque_call(a.__mod__, (b,), None)  # (as in ``binary``)
    if ta in MUTABLE_CONTAINERS:
        # A write into the container: its in-place method, through ``opaque_call`` (which a
        # caller tracking container mutations sees); the operator's own error where it has none.
        method = getattr(a, "__i" + _BINARY[sym][0][2:], None)
        if method is not None:
            result = rt.opaque_call(method, (b,), None)
            if result is not NotImplemented:
                return result
        return _INPLACE[sym](a, b)
    if (ta in PLAIN or (ta not in NOT_PLAIN and type_info(ta).plain)) and (
        tb in PLAIN or (tb not in NOT_PLAIN and type_info(tb).plain)
    ):
        return _INPLACE[sym](a, b)
    name, rname, _native = _BINARY[sym]
    iname = "__i" + name[2:]
    islot = lookup_type(ta, iname)
    slot_a = lookup_type(ta, name)
    slot_b = lookup_type(tb, rname) if tb is not ta else NULL
    if not any(is_python_level(s) for s in (islot, slot_a, slot_b)):
        return _INPLACE[sym](a, b)
    if islot is not NULL and islot is not None and not _is_sequence_slot(islot):
        result = _call_binary(rt, islot, a, b)
        if result is not NotImplemented:
            return result
    result = _binary_slots(rt, a, b, slot_a, slot_b, rname)
    if result is NotImplemented and _is_sequence_slot(islot):
        result = islot(a, b)
    if result is NotImplemented:
        raise TypeError(
            f"unsupported operand type(s) for {sym}=: '{ta.__name__}' and '{tb.__name__}'"
        )
    return result


_UNARY: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "-": ("__neg__", operator.neg),
    "+": ("__pos__", operator.pos),
    "~": ("__invert__", operator.invert),
    "abs": ("__abs__", abs),
}


def unary(rt: Runtime, kind: str, v: Any) -> Any:
    """``-v``, ``+v``, ``~v``, ``abs(v)``."""
    name, native = _UNARY[kind]
    descr = _special(v, name)
    if descr is NULL:
        return native(v)
    return call_special(rt, descr, v)


_COMPARE: dict[str, tuple[str, str, Callable[[Any, Any], Any]]] = {
    "<": ("__lt__", "__gt__", operator.lt),
    "<=": ("__le__", "__ge__", operator.le),
    "==": ("__eq__", "__eq__", operator.eq),
    "!=": ("__ne__", "__ne__", operator.ne),
    ">": ("__gt__", "__lt__", operator.gt),
    ">=": ("__ge__", "__le__", operator.ge),
}


def compare(rt: Runtime, sym: str, a: Any, b: Any) -> Any:
    """``a <sym> b`` for the six rich comparisons."""
    name, rname, native = _COMPARE[sym]
    ta, tb = type(a), type(b)
    if (ta in PLAIN or (ta not in NOT_PLAIN and type_info(ta).plain)) and (
        tb in PLAIN or (tb not in NOT_PLAIN and type_info(tb).plain)
    ):
        if sym in _EQUALITY and ta not in PLAIN_VALUES and tb not in PLAIN_VALUES:
            _report_identity(rt, a, b)
        return native(a, b)
    slot_a = lookup_type(ta, name)
    slot_b = lookup_type(tb, rname)
    if not (_compares_in_python(ta, name, slot_a) or _compares_in_python(tb, rname, slot_b)):
        if sym in _EQUALITY:  # (an Enum member: not plain, compared by object.__eq__)
            _report_identity(rt, a, b)
        return native(a, b)
    reflected_first = tb is not ta and issubclass(tb, ta)
    if reflected_first:
        result = _call_compare(rt, slot_b, rname, b, a)
        if result is not NotImplemented:
            return result
    result = _call_compare(rt, slot_a, name, a, b)
    if result is not NotImplemented:
        return result
    if not reflected_first:
        result = _call_compare(rt, slot_b, rname, b, a)
        if result is not NotImplemented:
            return result
    if sym in _EQUALITY:  # both declined: identity decides, as for ``is``
        same = a is b
        if rt.cb_identity is not None and a is not None and b is not None:
            answer = rt.cb_identity(a, b, same)
            if answer is not None:  # (values that stand for others: a binder's proxies)
                same = bool(answer)
        return same if sym == "==" else not same
    raise TypeError(
        f"'{sym}' not supported between instances of '{ta.__name__}' and '{tb.__name__}'"
    )


_EQUALITY = frozenset({"==", "!="})


def _report_identity(rt: Runtime, a: Any, b: Any) -> None:
    """``a == b`` of two instances of Python classes: the lookups of ``__eq__`` are reported
    (one defined later changes the answer), and where both are ``object``'s the answer is
    identity, reported as ``a is b`` is."""
    if lookup_type(type(a), "__eq__") is object.__eq__ and (
        lookup_type(type(b), "__eq__") is object.__eq__
    ):
        hook = rt.cb_identity
        if hook is not None:
            hook(a, b, a is b)


def _compares_in_python(cls: type, name: str, slot: Any) -> bool:
    if is_python_level(slot):
        return True
    # object.__ne__ inverts __eq__, which may be Python code.
    return slot is object.__ne__ and is_python_level(lookup_type(cls, "__eq__"))


def _call_compare(rt: Runtime, slot: Any, name: str, x: Any, y: Any) -> Any:
    if slot is NULL or slot is None:
        return NotImplemented
    if slot is object.__ne__:
        eq = lookup_type(type(x), "__eq__")
        if is_python_level(eq):
            result = call_special(rt, eq, x, y)
            if result is NotImplemented:
                return result
            return not truth(rt, result)
    if is_python_level(slot):
        return call_special(rt, slot, x, y)
    return slot(x, y)


def compares_by_identity(v: Any) -> bool:
    """Whether ``v == other`` is ``v is other`` (a Python class keeping ``object.__eq__``, an
    ``object()`` sentinel): then whether ``v`` is in a container or a key of a dict depends on
    which object it is."""
    t = type(v)
    if t.__flags__ & _IMMUTABLE_TYPE and t is not object:
        return False
    return lookup_type(t, "__eq__") is object.__eq__


def report_identity_used(rt: Runtime, v: Any, container: Any = None) -> None:
    """A native result depended on which object ``v`` is (``v in s``, ``d.get(v)``,
    ``hash(v)``): reported to the ``identity_used`` hook where ``v`` compares by identity, or
    hashes by identity as it is looked for in ``container`` (reported with it)."""
    hook = rt.cb_identity_used
    if hook is None or v is None:
        return
    if compares_by_identity(v):
        hook(v)
    elif container is not None and hashes_by_identity(v):
        hook(v, container)


def hashes_by_identity(v: Any) -> bool:
    """Whether ``hash(v)`` is its id though ``==`` is its own (a proxy standing for an object):
    which one it is decides a dict's or set's answer all the same."""
    return lookup_type(type(v), "__hash__") is object.__hash__


def contains(rt: Runtime, item: Any, container: Any) -> bool:
    """``item in container``."""
    result = _contains(rt, item, container)
    report_identity_used(rt, item, container)
    return result


def _contains(rt: Runtime, item: Any, container: Any) -> bool:
    cls = type(container)
    descr = lookup_type(cls, "__contains__")
    if descr is not NULL:
        if is_python_level(descr):
            return truth(rt, call_special(rt, descr, container, item))
        if cls is list or cls is tuple:
            # Their __contains__ compares items with ==, which may be Python code.
            if is_plain(item) and all(type(x) in PLAIN for x in container):
                return item in container
            return any(x is item or truth(rt, compare(rt, "==", x, item)) for x in container)
        return item in container
    if _special(container, "__iter__") is NULL and _special(container, "__getitem__") is NULL:
        return item in container
    return any(x is item or truth(rt, compare(rt, "==", x, item)) for x in iterate(rt, container))


FAST_CONTAINERS = frozenset({dict, set, frozenset, str, bytes, range})
"""Container types whose ``in`` runs no Python code for a plain item."""


# --------------------------------------------------------------------------------------------------
# items

_INDEXED = frozenset({list, tuple, str, bytes, bytearray, range})


def get_item(rt: Runtime, container: Any, key: Any) -> Any:
    """``container[key]``."""
    cls = type(container)
    descr = lookup_type(cls, "__getitem__")
    if descr is NULL:
        if isinstance(container, type):
            getter = lookup_type(container, "__class_getitem__")
            if type(getter) is classmethod and is_python_level(getter):
                return rt.call(getter.__func__, (container, key), None, None)
        return container[key]
    if is_python_level(descr):
        return call_special(rt, descr, container, key)
    index_like = type(key) is not int and type(key) is not slice
    if cls in _INDEXED and index_like and _special(key, "__index__") is not NULL:
        key = as_index(rt, key)
    return container[key]


def set_item(rt: Runtime, container: Any, key: Any, value: Any) -> None:
    """``container[key] = value``."""
    descr = _special(container, "__setitem__")
    if descr is NULL:
        container[key] = value
        return
    call_special(rt, descr, container, key, value)


def delete_item(rt: Runtime, container: Any, key: Any) -> None:
    """``del container[key]``."""
    descr = _special(container, "__delitem__")
    if descr is NULL:
        del container[key]
        return
    call_special(rt, descr, container, key)
