"""The trace being recorded, scoped to one compilation by a context variable."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from thunder_ir.trace import Trace

__all__ = ["get_tracectx", "require_tracectx", "tracectx"]

_current_trace: ContextVar[Trace | None] = ContextVar("thunder_ir_current_trace", default=None)


def get_tracectx() -> Trace | None:
    """The trace that symbols called now are recorded into, or None outside tracing."""
    return _current_trace.get()


def require_tracectx(what: str) -> Trace:
    trace = _current_trace.get()
    if trace is None:
        raise RuntimeError(
            f"{what} needs a trace being recorded; wrap the call in `with tracectx(trace):`"
        )
    return trace


@contextmanager
def tracectx(trace: Trace) -> Iterator[Trace]:
    """Records symbols called inside the block into ``trace``."""
    token = _current_trace.set(trace)
    try:
        yield trace
    finally:
        _current_trace.reset(token)
