"""Errors raised by the interpreter itself (never by the code it interprets)."""

from __future__ import annotations

from typing import TypeVar

__all__ = ["InterpreterError", "UnsupportedOpcodeError", "is_uncatchable", "uncatchable"]

E = TypeVar("E", bound=type[BaseException])

# The exception classes whose instances (and subclasses' instances) the interpreted program cannot
# catch; filled at import time by the modules that define them.
_UNCATCHABLE: tuple[type[BaseException], ...] = ()


def uncatchable(cls: E) -> E:
    """Marks the exception class ``cls`` (and its subclasses) as one the interpreted program
    cannot catch: raised inside an interpretation, it reaches none of the program's exception
    handlers (``except`` clauses and the like) and leaves the interpreted call as raised. For the
    errors of tools built on the interpreter (a refusal, a signal to their own caller), whose
    program must not swallow them. A decorator, or a call for a class defined elsewhere::

        @uncatchable
        class CompileError(Exception): ...

        uncatchable(SomeLibraryError)
    """
    global _UNCATCHABLE
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        raise TypeError(f"uncatchable() takes an exception class, not {cls!r}")
    if cls not in _UNCATCHABLE:
        _UNCATCHABLE = (*_UNCATCHABLE, cls)
    return cls


def is_uncatchable(exc: BaseException) -> bool:
    """Whether ``exc`` bypasses the interpreted program's ``except`` clauses (its class, or a
    base of it, is marked with :func:`uncatchable`)."""
    return isinstance(exc, _UNCATCHABLE)


@uncatchable
class InterpreterError(Exception):
    """The interpreter cannot honour CPython semantics for this program.

    Such errors are never routed to the interpreted program's own ``except`` clauses: they
    always propagate to the caller of the interpreted function.
    """


class UnsupportedOpcodeError(InterpreterError):
    """An opcode (or construct) the interpreter does not support was reached."""

    def __init__(self, opname: str, filename: str, lineno: int, detail: str = "") -> None:
        self.opname = opname
        self.filename = filename
        self.lineno = lineno
        extra = f": {detail}" if detail else ""
        super().__init__(f"unsupported opcode {opname} at {filename}:{lineno}{extra}")
