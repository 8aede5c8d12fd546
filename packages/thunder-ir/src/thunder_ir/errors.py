"""Errors of tracing itself (the program does something whose outcome tracing cannot know), and
an op's refusal of an option it does not implement."""

from __future__ import annotations

from typing import Any

__all__ = [
    "DataDependentError",
    "TracingError",
    "UnsupportedInTracingError",
    "UnsupportedOptionError",
]


class TracingError(Exception):
    """What the program does here depends on something tracing cannot know (a tensor's values)
    or on a part of torch the IR does not mirror.

    An interpreter running the program must not route it to the program's own ``except``
    clauses: a program that catches it would silently take a path that eager PyTorch does not
    take. The IR knows nothing of the interpreter; the jit marks the class so
    (``thunder_interp.uncatchable``).
    """


class DataDependentError(TracingError, RuntimeError):
    """A Python value computed from a tensor's data: ``bool(t)``, ``float(t)``, ``t.item()``.
    ``index_of``: the tensor, where an op used it as an index or size (``torch.zeros(n)`` of a
    0-dim tensor ``n``)."""

    index_of: Any = None


class UnsupportedInTracingError(TracingError, NotImplementedError):
    """A construct the IR cannot record with eager's semantics (named in the message)."""


class UnsupportedOptionError(NotImplementedError):
    """An op refusing an argument or option it does not implement (``avg_pool2d(ceil_mode=True)``,
    ``pad(mode='reflect')``, a dtype torch itself refuses): the IR cannot record this call as
    asked. Not a TracingError: the program may catch it as the ``NotImplementedError`` eager
    raises for what torch refuses, and a caller may run the torch callable itself instead (the
    jit's fallback does)."""
