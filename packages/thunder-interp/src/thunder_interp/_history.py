"""Execution history: what ``interpret(..., record_history=True)`` records."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["HistoryEntry", "format_history"]


@dataclass(frozen=True)
class HistoryEntry:
    """One executed instruction."""

    filename: str
    function: str
    lineno: int
    index: int
    opname: str
    argrepr: str
    depth: int
    """Call depth inside the interpretation (0 for the interpreted function itself)."""

    def __str__(self) -> str:
        arg = f" ({self.argrepr})" if self.argrepr else ""
        return f"{'  ' * self.depth}{self.function}:{self.lineno} {self.opname}{arg}"


def format_history(entries: Iterable[HistoryEntry]) -> str:
    """A readable log: one line per executed instruction, indented by call depth."""
    return "\n".join(str(e) for e in entries)
