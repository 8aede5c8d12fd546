"""Execution history: what ``interpret(..., record_history=True)`` records.

A readable log of what ran: each interpreted call, the source lines it executed, its instructions
and its return (with the returned value's type), indented by call depth.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["HistoryEntry", "format_history"]


@dataclass(frozen=True)
class HistoryEntry:
    """One event of an interpretation.

    ``kind`` is ``"call"`` (a function starts running; ``lineno`` is its first line),
    ``"line"`` (execution reaches a new source line; ``text`` is the line),
    ``"instruction"`` (one bytecode instruction: ``opname``, ``argrepr``, ``index``),
    ``"return"`` (the function returns; ``text`` is the type name of the value) or ``"yield"``.
    """

    filename: str
    function: str
    lineno: int
    index: int
    opname: str
    argrepr: str
    depth: int
    """Call depth inside the interpretation (0 for the interpreted function itself)."""
    kind: str = "instruction"
    text: str = ""

    def __str__(self) -> str:
        indent = "  " * self.depth
        if self.kind == "call":
            return f"{indent}call {self.function} ({self.filename}:{self.lineno})"
        if self.kind == "line":
            return f"{indent}{self.lineno}: {self.text}"
        if self.kind in ("return", "yield"):
            return f"{indent}{self.kind} {self.text} from {self.function}"
        arg = f" ({self.argrepr})" if self.argrepr else ""
        return f"{indent}  {self.opname}{arg}"


def format_history(entries: Iterable[HistoryEntry], instructions: bool = True) -> str:
    """A readable log, one event per line, indented by call depth (``instructions=False``
    leaves out the bytecode: calls, source lines and returns only)."""
    return "\n".join(str(e) for e in entries if instructions or e.kind != "instruction")
