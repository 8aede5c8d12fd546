"""Running a call split at a function run natively as thunder's own segments
(``THUNDER_OWN_SEGMENTS=0`` switches them off; ``binding/segments.py`` traces the segments).

The first segment is a jitted program of the call up to the native call; it returns the call to
make and the frames' state. The native function runs on those real values, then the
continuation, a jitted program of its own whose arguments are the native call's result and the
state (its prologue runs after the native call). Each segment is its own autograd node: only
tensors cross between them, and gradients flow through torch's autograd as between any two
jitted calls. A call the first segment cannot serve raises ``SegmentRefused`` before anything
ran (torch.compile then runs it split); a continuation that cannot be compiled runs as Python
runs it (the interpreter resumes its frames), never a part twice.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from thunder.binding.segments import (
    DONE,
    Continuation,
    Segmented,
    SegmentHead,
    SegmentRefused,
    Shape,
)
from thunder.errors import JitError, RunsEagerly, RunsSplit
from thunder.jit_function import ThunderFunction

__all__ = ["OwnSegments", "SegmentProgram"]


class _SegmentFunction(ThunderFunction):
    """The jitted program of one segment. Where the first segment cannot be one program (a
    split, an eager run), it refuses before anything ran; a continuation runs natively."""

    def __init__(self, segment: Any, owner: ThunderFunction) -> None:
        super().__init__(segment, owner.options, owner.executors, owner.transforms)
        self._head = isinstance(segment, SegmentHead)
        self._segments_enabled = False  # (a continuation's native calls suspend it again)
        self.split_by_caller = self._head  # a refusal reaches the runner

    def _run_split(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        reason: RunsSplit | None,
        facts: tuple[bool, ...],
        key: Any = None,
    ) -> Any:
        if self._head:
            raise SegmentRefused(str(reason) if reason is not None else "its first segment splits")
        self.stats.split_calls += 1
        return self.fn(*args, **kwargs)  # the frames resumed as Python runs them


@dataclasses.dataclass(eq=False)
class SegmentProgram:
    """One of thunder's own segments of a split call (an item of ``split_graphs``): ``kind`` is
    ``"first segment"`` or ``"continuation"``, ``jitted`` its jitted program (its
    ``compile_stats`` hold its traces)."""

    kind: str
    jitted: ThunderFunction
    runs: str = "thunder"


class OwnSegments:
    """The segments of one jitted function's calls split at native calls."""

    def __init__(self, owner: ThunderFunction) -> None:
        self.segmented = Segmented()
        self.head = _SegmentFunction(SegmentHead(owner.fn, self.segmented), owner)
        self._owner = owner
        self._lock = threading.Lock()
        self._head_listed = False
        self.keys: set[Any] = set()  # the jitted function's cache keys the segments ran

    def _continuation(self, shape: Shape) -> ThunderFunction:
        jitted: ThunderFunction | None = shape.jitted
        if jitted is None:
            with self._lock:
                if shape.jitted is None:
                    shape.jitted = _SegmentFunction(
                        Continuation(shape, self.segmented), self._owner
                    )
                    self._owner.stats.split_graphs.append(
                        SegmentProgram("continuation", shape.jitted)
                    )
                jitted = shape.jitted
        return jitted

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        try:
            out = self.head(*args, **kwargs)
        except (JitError, RunsEagerly) as e:  # raised before the first segment ran
            raise SegmentRefused(f"{type(e).__name__}: {e}") from e
        if not self._head_listed:
            with self._lock:
                if not self._head_listed:
                    self._head_listed = True
                    self._owner.stats.split_graphs.append(
                        SegmentProgram("first segment", self.head)
                    )
        shapes = self.segmented.shapes
        while out[0] != DONE:
            number, native_args, native_kwargs, values = out
            shape = shapes[number]
            raised: BaseException | None = None
            try:
                value = shape.native(*native_args, **native_kwargs)
            except BaseException as error:
                raised = error
            if raised is not None:  # the frames' handlers see it (outside this except clause)
                try:
                    return Continuation(shape, self.segmented).resume_raising(raised, values)
                finally:
                    del raised
            out = (shape.jitted or self._continuation(shape))(value, *values)
        return out[1]
