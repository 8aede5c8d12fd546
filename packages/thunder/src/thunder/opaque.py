"""Which opaque (C) callables a jitted function may call while it is traced.

The interpreter cannot see into a C function, so its result becomes a constant of the compiled
program. That is right for pure functions of guarded inputs (``len``, ``math.sqrt``) and wrong for
anything else (``random.random()``, ``time.time()``, ``next`` on an outside iterator): eager would
get a new value on every call. Those are refused with a clear error instead.
"""

from __future__ import annotations

import _random
import types
import weakref
from typing import Any

__all__ = ["advances_natively", "entropy_reason", "impure_reason"]

_PURE_BUILTINS = frozenset(
    {
        "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr",
        "complex", "dict", "dir", "divmod", "enumerate", "filter", "float", "format", "frozenset",
        "getattr", "hasattr", "hash", "hex", "id", "int", "isinstance", "issubclass", "iter",
        "len", "list", "map", "max", "min", "object", "oct", "ord", "pow", "print", "range",
        "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "type",
        "zip", "super", "property", "staticmethod", "classmethod", "setattr", "delattr", "vars",
        "locals", "globals", "__build_class__",
    }
)  # fmt: skip
# Modules whose functions are pure functions of their arguments.
_PURE_MODULES = frozenset(
    {"math", "cmath", "operator", "_operator", "itertools", "functools", "_functools", "string",
     "re", "_sre", "copy", "dataclasses", "collections", "_collections", "enum", "typing",
     "numbers", "builtins", "abc", "_abc", "inspect", "warnings", "_warnings", "contextlib",
     "numpy", "einops", "types", "keyword", "weakref", "_weakref"}
)  # fmt: skip
_IMPURE_SUBMODULES = ("numpy.random",)
# Methods of these types never change their object or read changing state.
_IMMUTABLE_TYPES = (str, bytes, int, float, complex, bool, tuple, frozenset, range, slice)
_READ_METHODS = frozenset(
    {"get", "keys", "values", "items", "index", "count", "copy", "__contains__", "__getitem__",
     "__len__", "__iter__", "issubset", "issuperset", "union", "intersection", "difference",
     "symmetric_difference", "isdisjoint", "__eq__", "__ne__", "__repr__", "__hash__"}
)  # fmt: skip


def _module_of(fn: Any) -> str:
    mod = getattr(fn, "__module__", None)
    if not isinstance(mod, str):
        mod = type(fn).__module__
    return mod or ""


def assumed_constant(fn: Any) -> bool:
    """Whether ``fn`` (or a function it wraps: ``functools.lru_cache``, ``functools.wraps``)
    carries the marker of ``torch._dynamo.assume_constant_result``: its library promises the
    result is fixed for the life of the process (an install probe, a version check), so calling
    it while tracing and keeping the result as a constant is what eager computes on every call."""
    for _ in range(8):  # a chain of wrappers, bounded
        try:
            if getattr(fn, "_dynamo_marked_constant", False) is True:
                return True
            fn = getattr(fn, "__wrapped__", None)
        except Exception:  # an object whose attribute lookup raises
            return False
        if fn is None:
            return False
    return False


# Modules of C types whose constructors are deterministic functions of their arguments (beside
# _PURE_MODULES; torch's tensors and generators are checked apart).
_PURE_TYPE_MODULES = frozenset(
    {"torch", "datetime", "_datetime", "decimal", "_decimal", "io", "_io", "struct", "_struct", "array",
     "contextvars", "_contextvars", "_thread", "threading", "zoneinfo", "pathlib", "fractions"}
)  # fmt: skip
# Class methods (C ones; Python ones are interpreted) that compute from their arguments alone.
# Others (``datetime.now``, ``date.today``) may read the clock or other process state.
_PURE_CLASS_METHODS = frozenset(
    {"__new__", "__init_subclass__", "__subclasshook__", "__instancecheck__",
     "__subclasscheck__", "__prepare__", "__class_getitem__", "__subclasses__", "mro",
     "fromkeys", "from_bytes", "fromhex", "maketrans", "from_iterable", "from_float",
     "from_decimal", "fromtimestamp", "utcfromtimestamp", "fromordinal", "fromisoformat",
     "fromisocalendar", "combine", "strptime"}
)  # fmt: skip
# Strings that make numpy's date and time constructors read the clock.
_CLOCK_WORDS = frozenset({"now", "today"})
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement


def _pure_type_module(module: str) -> bool:
    root = module.split(".")[0]
    if module.startswith(_IMPURE_SUBMODULES):
        return False
    return root in _PURE_MODULES or root in _PURE_TYPE_MODULES


def _constructor_reason(cls: type) -> str | None:
    """Why constructing a ``cls`` could give another object on each call, or None: a C type's
    constructor is known deterministic where its module's are (``_random.Random`` is not: it
    may read the operating system's entropy); a Python class's ``__init__`` is interpreted,
    its opaque calls checked one by one."""
    for klass in cls.__mro__:
        if klass.__flags__ & _HEAPTYPE:
            continue  # (a Python class: its C base decides what construction does natively)
        if klass is object or _pure_type_module(_module_of(klass)):
            return None
        return f"constructing {_module_of(klass)}.{klass.__qualname__} is not known to be pure"
    return None


def entropy_reason(fn: Any, args: tuple[Any, ...]) -> str | None:
    """Why calling ``fn`` reads the clock or the operating system's entropy where torch.compile
    too would keep the result as a constant (it folds ``np.datetime64('now')`` and seeds an
    unseeded ``random.Random()`` once), or None: such a call must run eagerly."""
    if isinstance(fn, type):
        word = next((a for a in args if type(a) is str and a.lower() in _CLOCK_WORDS), None)
        if word is not None and _module_of(fn) == "numpy":
            return f"numpy.{fn.__name__}({word!r}) reads the clock"
        if issubclass(fn, _random.Random) and not fn.__flags__ & _HEAPTYPE and not args:
            return "an unseeded random.Random() is seeded from the operating system's entropy"
        return None
    owner = getattr(fn, "__self__", None)
    if (
        getattr(fn, "__name__", "") == "seed"
        and isinstance(owner, _random.Random)
        and (not args or args[0] is None)
    ):
        return "an unseeded random.Random() is seeded from the operating system's entropy"
    return None


def advances_natively(t: type) -> bool:
    """Whether objects of type ``t`` are iterators whose ``__next__`` is C code (a generator, a
    list iterator, ``itertools.cycle``): advancing one (``for``, ``next``, ``islice``, ``in``,
    ``min``) is a write no hook sees. (A Python ``__next__`` is interpreted: its writes are.)"""
    if t in weakref.ProxyTypes:
        return False  # (it has every slot, forwarded to its object)
    advance = getattr(t, "__next__", None)
    return advance is not None and not isinstance(advance, types.FunctionType)


def impure_reason(fn: Any, is_outside: Any) -> str | None:
    """Why calling ``fn`` while tracing could bake a changing result, or None if it cannot.

    ``is_outside(obj)`` says whether ``obj`` is state outside the function (which later calls
    may see changed); objects the program created in this call are its own business."""
    if isinstance(fn, type):
        return _constructor_reason(fn)
    if assumed_constant(fn):
        return None
    owner = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", "")
    if owner is None or isinstance(owner, types.ModuleType):
        module = owner.__name__ if isinstance(owner, types.ModuleType) else _module_of(fn)
        if module == "builtins":
            return None if name in _PURE_BUILTINS else f"builtins.{name} is not known to be pure"
        root = module.split(".")[0]
        if root in _PURE_MODULES and not module.startswith(_IMPURE_SUBMODULES):
            return None
        return f"{module}.{name} is not known to be a pure function of its arguments"
    if isinstance(owner, type):  # a class method
        if name in _PURE_CLASS_METHODS:
            return None
        module = _module_of(owner)
        root = module.split(".")[0]
        if root == "torch" or (root in _PURE_MODULES and not module.startswith(_IMPURE_SUBMODULES)):
            return None  # (torch's own, ``Tensor._make_subclass``: its state is checked apart)
        return f"{module}.{owner.__qualname__}.{name} is not known to be a pure class method"
    if isinstance(owner, _IMMUTABLE_TYPES) or not is_outside(owner):
        return None
    if isinstance(owner, (list, dict, set)) and name in _READ_METHODS:
        return None  # reads of an outside container are guarded like other reads
    t = type(owner)
    if (
        _module_of(t).split(".")[0] in _PURE_MODULES
        and t.__hash__ is not None
        and not advances_natively(t)
    ):
        # Hashable objects of pure modules, not changed in place (enum members, ufuncs); a
        # deque, an array, a numpy array or an itertools iterator is state: its methods read or
        # change it.
        return None
    return f"{t.__module__}.{t.__qualname__}.{name} reads or changes state of an object outside the function"
