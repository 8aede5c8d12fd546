"""Errors raised by the interpreter itself (never by the code it interprets)."""

from __future__ import annotations

__all__ = ["InterpreterError", "UnsupportedOpcodeError", "is_uncatchable"]


class InterpreterError(Exception):
    """The interpreter cannot honour CPython semantics for this program.

    Such errors are never routed to the interpreted program's own ``except`` clauses: they
    always propagate to the caller of the interpreted function.
    """


def is_uncatchable(exc: BaseException) -> bool:
    """Whether ``exc`` bypasses the interpreted program's ``except`` clauses: the interpreter's
    own errors, and those of a class that sets ``_interpreter_uncatchable = True`` (a library
    built on the interpreter marks its errors so without importing it)."""
    return isinstance(exc, InterpreterError) or getattr(
        type(exc), "_interpreter_uncatchable", False
    )


class UnsupportedOpcodeError(InterpreterError):
    """An opcode (or construct) the interpreter does not support was reached."""

    def __init__(self, opname: str, filename: str, lineno: int, detail: str = "") -> None:
        self.opname = opname
        self.filename = filename
        self.lineno = lineno
        extra = f": {detail}" if detail else ""
        super().__init__(f"unsupported opcode {opname} at {filename}:{lineno}{extra}")
