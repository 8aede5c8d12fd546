"""``exec`` and ``eval`` called from interpreted code: the code they run is interpreted too.

The code runs with the globals and locals CPython gives it: the caller's globals and what
``locals()`` returns there when none are passed; the globals as locals when only they are
passed. Strings are compiled as CPython compiles them (``<string>``, the caller's ``__future__``
flags; ``eval`` strips leading blanks). Anything unusual (globals that are not exactly a dict,
locals that are not mappings, ``closure=``, code with free variables, other source types) goes
to the builtin itself, which runs it natively or raises CPython's error.
"""

from __future__ import annotations
import __future__

import builtins
from types import CodeType, FunctionType
from typing import Any

from thunder_interp._frame import Frame
from thunder_interp._locals import frame_locals
from thunder_interp._registry import PY_VERSION
from thunder_interp._runtime import InternalLookaside, Runtime

__all__ = ["exec_lookaside"]

# The compiler flags a caller's code passes on to the code it compiles (CPython's PyCF_MASK).
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag

_NO_ARGUMENT: Any = object()


def exec_lookaside(mode: str) -> InternalLookaside:
    """The lookaside for ``exec`` (``mode="exec"``) or ``eval`` (``mode="eval"``)."""
    native = getattr(builtins, mode)

    def impl(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        bound = _bind(args, kwargs)
        if f is None or bound is None:
            return native(*args, **kwargs)
        source, globals_, locals_ = bound
        if globals_ is None:
            globals_ = f.globals
            if locals_ is None:
                locals_ = frame_locals(f)
        elif locals_ is None:
            locals_ = globals_
        if type(globals_) is not dict or not _is_mapping(locals_):
            return native(*args, **kwargs)
        code = _compile(source, mode, f)
        if code is None or code.co_freevars:
            return native(*args, **kwargs)
        if "__builtins__" not in globals_:
            globals_["__builtins__"] = f.builtins
        result = rt.run_class_body(FunctionType(code, globals_), locals_)
        return None if mode == "exec" else result

    return InternalLookaside(mode, impl)


def _bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any] | None:
    """``(source, globals, locals)``, or None when the builtin must check the call itself."""
    if not 1 <= len(args) <= 3:
        return None
    values = [*args, None, None][:3]
    if kwargs:
        # 3.13 accepts globals/locals as keywords; closure= is left to the builtin.
        if PY_VERSION < (3, 13) or not set(kwargs) <= {"globals", "locals"}:
            return None
        for position, name in ((1, "globals"), (2, "locals")):
            value = kwargs.get(name, _NO_ARGUMENT)
            if value is not _NO_ARGUMENT:
                if position < len(args):
                    return None
                values[position] = value
    return values[0], values[1], values[2]


def _is_mapping(value: Any) -> bool:
    return isinstance(value, dict) or hasattr(type(value), "__getitem__")


def _compile(source: Any, mode: str, f: Frame) -> CodeType | None:
    if isinstance(source, CodeType):
        return source
    if mode == "eval":
        if isinstance(source, str):
            source = source.lstrip(" \t")
        elif isinstance(source, (bytes, bytearray)):
            source = bytes(source).lstrip(b" \t")
    if not isinstance(source, (str, bytes, bytearray)):
        return None
    flags = f.code.co_flags & _FUTURE_FLAGS
    code: CodeType = compile(source, "<string>", mode, flags=flags, dont_inherit=True)
    return code
