"""Opaque code: Python functions the interpreter runs natively instead of interpreting.

The interpreter's own code is opaque. Users mark more with :func:`opaque` (a function, or every
function of a class) or :func:`opaque_package` (every function defined under a directory, e.g.
a library whose internals should never be traced). Marks are process-wide and take effect for
code objects not yet seen by an interpreted function.
"""

from __future__ import annotations

import os
import weakref
from types import CodeType, FunctionType, ModuleType
from typing import Any, TypeVar

__all__ = ["is_opaque_code", "opaque", "opaque_package"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_OPAQUE_DIRS: list[str] = [_PACKAGE_DIR + os.sep]
_OPAQUE_CODES: weakref.WeakSet[CodeType] = weakref.WeakSet()

T = TypeVar("T")


# id(code) -> (code, answer); cleared whenever a mark is added.
_MEMO: dict[int, tuple[CodeType, bool]] = {}


def is_opaque_code(code: CodeType) -> bool:
    """Whether ``code`` runs natively (marked opaque, or defined under an opaque directory)."""
    entry = _MEMO.get(id(code))
    if entry is not None and entry[0] is code:
        return entry[1]
    filename = code.co_filename
    answer = filename.startswith(tuple(_OPAQUE_DIRS)) or code in _OPAQUE_CODES
    if len(_MEMO) > 65536:
        _MEMO.clear()
    _MEMO[id(code)] = (code, answer)
    return answer


def _functions_of(obj: Any) -> list[FunctionType]:
    if isinstance(obj, FunctionType):
        return [obj]
    inner = getattr(obj, "__func__", None)  # staticmethod, classmethod, bound method
    if isinstance(inner, FunctionType):
        return [inner]
    if isinstance(obj, property):
        return [g for g in (obj.fget, obj.fset, obj.fdel) if isinstance(g, FunctionType)]
    wrapped = getattr(obj, "__wrapped__", None)
    if isinstance(wrapped, FunctionType):
        return [wrapped]
    return []


def is_opaque(fn: Any) -> bool:
    """Whether interpreted code calls the Python function ``fn`` natively (marked opaque, or
    defined under an opaque package): no hook fires inside it."""
    code = getattr(fn, "__code__", None)
    return type(code) is CodeType and is_opaque_code(code)


def opaque(obj: T) -> T:
    """Mark a function (or every function, method and property accessor of a class) opaque:
    interpreted code calls it natively, so hooks and lookasides do not fire inside it.

    Usable as a decorator; returns ``obj``. Raises ``TypeError`` for anything else.
    """
    if isinstance(obj, type):
        for value in vars(obj).values():
            for fn in _functions_of(value):
                _OPAQUE_CODES.add(fn.__code__)
        _MEMO.clear()
        return obj
    functions = _functions_of(obj)
    if not functions:
        raise TypeError(f"opaque() takes a Python function or class, not {type(obj).__name__!r}")
    for fn in functions:
        _OPAQUE_CODES.add(fn.__code__)
    _MEMO.clear()
    return obj


def opaque_package(package: ModuleType | str) -> None:
    """Mark every function defined under a package's directory (or a directory path) opaque."""
    if isinstance(package, ModuleType):
        paths = list(getattr(package, "__path__", ()))
        if not paths and getattr(package, "__file__", None):
            paths = [os.path.dirname(os.path.abspath(package.__file__ or ""))]
        if not paths:
            raise TypeError(f"opaque_package(): {package.__name__!r} has no directory")
    elif isinstance(package, str):
        paths = [package]
    else:
        raise TypeError(
            f"opaque_package() takes a module or a directory, not {type(package).__name__!r}"
        )
    for path in paths:
        directory = os.path.join(os.path.abspath(path), "")
        if directory not in _OPAQUE_DIRS:
            _OPAQUE_DIRS.append(directory)
    _MEMO.clear()
