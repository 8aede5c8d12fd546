"""The interface of a transform. External transforms depend on thunder-ir alone."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder_ir.trace import Trace

__all__ = ["Transform"]


class Transform:
    """A pass over traces, applied by the jit at fixed points of compilation.

    Override what you need; every hook defaults to doing nothing. Each hook returns a new trace
    (passes are pure: they never mutate their input).

    ``must_follow`` / ``must_precede`` name the transforms (classes, or class names) this one
    must come after / before when both are in one list: composing recipes whose lists violate
    that is an error (``thunder.compile``).
    """

    must_follow: tuple[type | str, ...] = ()
    must_precede: tuple[type | str, ...] = ()

    def transform_module(self, model: Any) -> None:
        """Called once with the ``nn.Module`` being compiled, before tracing."""

    def transform_traces_pre_prologue(
        self, prologue: Trace, computation: Trace, epilogue: Trace | None, **kwargs: Any
    ) -> tuple[Trace, Trace, Trace | None]:
        """Called on the traces as recorded, before they are optimized."""
        return prologue, computation, epilogue

    def transform_backward(self, backward: Trace, *, inputs: Sequence[Any], **kwargs: Any) -> Trace:
        """Called on a backward trace before it is compiled. It returns the gradient of each
        input of the forward (None where there is none); ``inputs`` are the values those inputs
        have in the call being compiled (tensors, parameters), in the forward's order."""
        return backward

    def transform_trace_post_optimization(self, computation: Trace, **kwargs: Any) -> Trace:
        """Called on the computation after the optimization passes and executor assignment."""
        return computation

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
