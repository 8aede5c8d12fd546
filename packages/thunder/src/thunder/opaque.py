"""Which opaque (C) callables a jitted function may call while it is traced.

The interpreter cannot see into a C function, so its result becomes a constant of the compiled
program. That is right for pure functions of guarded inputs (``len``, ``math.sqrt``) and wrong for
anything else (``random.random()``, ``time.time()``, ``next`` on an outside iterator): eager would
get a new value on every call. Those are refused with a clear error instead.
"""

from __future__ import annotations

import types
from typing import Any

__all__ = ["impure_reason"]

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


def impure_reason(fn: Any, is_outside: Any) -> str | None:
    """Why calling ``fn`` while tracing could bake a changing result, or None if it cannot.

    ``is_outside(obj)`` says whether ``obj`` is state outside the function (which later calls
    may see changed); objects the program created in this call are its own business."""
    if isinstance(fn, type):
        return None  # constructing an object; its Python code (if any) is interpreted
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
    if isinstance(owner, _IMMUTABLE_TYPES) or not is_outside(owner):
        return None
    if isinstance(owner, (list, dict, set)) and name in _READ_METHODS:
        return None  # reads of an outside container are guarded like other reads
    if isinstance(owner, type):
        return None  # class methods
    if _module_of(type(owner)).split(".")[0] in _PURE_MODULES and type(owner).__hash__ is not None:
        # Objects of pure modules that are hashable, so not changed in place (enum members); a
        # deque, an array or a numpy array is state: its methods read or change it.
        return None
    return f"{type(owner).__module__}.{type(owner).__qualname__}.{name} reads or changes state of an object outside the function"
