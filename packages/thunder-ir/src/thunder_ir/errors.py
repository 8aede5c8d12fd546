"""Errors of tracing itself: the program does something whose outcome tracing cannot know."""

from __future__ import annotations

__all__ = [
    "DataDependentError",
    "TracingError",
    "UnsupportedInTracingError",
    "UnsupportedTensorAttributeError",
]


class TracingError(Exception):
    """What the program does here depends on something tracing cannot know (a tensor's values)
    or on a part of torch the IR does not mirror.

    An interpreter running the program must not route it to the program's own ``except``
    clauses (``_interpreter_uncatchable``): a program that catches it would silently take a path
    that eager PyTorch does not take.
    """

    _interpreter_uncatchable = True


class DataDependentError(TracingError, RuntimeError):
    """A Python value computed from a tensor's data: ``bool(t)``, ``float(t)``, ``t.item()``."""


class UnsupportedTensorAttributeError(TracingError, NotImplementedError):
    """A ``torch.Tensor`` attribute or method the IR does not mirror. Not an ``AttributeError``:
    ``hasattr`` and ``getattr(x, name, default)`` would turn it into a silent False or default."""


class UnsupportedInTracingError(TracingError, NotImplementedError):
    """A construct the IR cannot record with eager's semantics (named in the message)."""
