"""Suspending an interpretation at a call and resuming it later.

A suspendable interpretation (``interpret(fn, suspendable=True)``) runs ops only, never basic
blocks, so each interpreted frame's value stack is in its :class:`Frame` (the CALL ops pop the
callable and the arguments before calling). A lookaside or an ``opaque_call`` hook that calls
:func:`suspend` captures, from the real Python stack, every interpreted frame of the
interpretation (code, the CALL it waits at, its local slots, its stack) and raises a signal that
no handler of the program sees (it is :func:`uncatchable`): the frames stop without unwinding.
:meth:`SuspendableFunction.resume` rebuilds the frames in a new runtime, pushes the call's result
on the innermost one's stack and runs each frame from the instruction after its call, innermost
first, each frame's return value being the result of its caller's call.

A frame can be captured only when the chain from it to the frame it called is plain call
machinery (a CALL op, ``Runtime.call`` and friends), which the walk checks frame by frame; a
generator, a lookaside or C code between two frames, an ``except`` clause running, and the like,
make :func:`suspend` raise :class:`SuspensionRefused` instead (never a wrong resume).
"""

from __future__ import annotations

import sys
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import CodeType, FrameType, FunctionType
from typing import Any, NoReturn

from thunder_interp._errors import InterpreterError, uncatchable
from thunder_interp._frame import NULL, Frame, new_frame
from thunder_interp._recursion import is_loop_code, register_loop_codes
from thunder_interp._registry import next_index
from thunder_interp._runtime import (
    CO_ASYNC_GENERATOR,
    CO_COROUTINE,
    CO_GENERATOR,
    CO_OPTIMIZED,
    Runtime,
    _local_names,
    _traced,
    enter_frame,
    resume_after_exception,
    run_frame,
)
from thunder_interp.ops.calls import CALL_OP_CODES, CALL_OPNAMES

__all__ = [
    "UNBOUND",
    "SuspendSignal",
    "SuspendableRuntime",
    "Suspended",
    "SuspendedFrame",
    "Suspension",
    "SuspensionRefused",
    "rebuild_frame",
    "resume_frames",
    "suspend",
]

UNBOUND: Any = NULL
"""An unbound local slot, or the C ``NULL`` a value stack may hold below a call (3.11+ pushes
one before some callables): the value :attr:`SuspendedFrame.locals` and
:attr:`SuspendedFrame.stack` show there, and that a resume accepts there."""

_GENERATOR_FLAGS = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR


@dataclass(frozen=True, eq=False)
class SuspendedFrame:
    """One interpreted frame of a :class:`Suspension`, waiting at a call.

    Replace fields with :func:`dataclasses.replace` to resume with other values (the same
    number of slots; other objects in them).
    """

    function: FunctionType
    """The Python function the frame runs (its code, globals and builtins)."""
    offset: int
    """The bytecode offset (as :mod:`dis` numbers it) of the call instruction the frame waits
    at: the CALL family or ``CALL_FUNCTION_EX``."""
    locals: tuple[Any, ...]
    """The frame's local slots, named by :attr:`local_names`: the fast locals, then the cells
    and the free variables as cell objects (the program reads their ``cell_contents``);
    :data:`UNBOUND` where unbound."""
    stack: tuple[Any, ...]
    """The value stack below the call, bottom first (:data:`UNBOUND` for a C ``NULL``)."""
    blocks: tuple[tuple[int, int, int], ...] = field(default=())
    """3.10 only: the frame's block stack (``try`` and ``with`` blocks around the call), in the
    interpreter's terms; keep it as captured."""

    @property
    def code(self) -> CodeType:
        """The code object the frame runs."""
        return self.function.__code__

    @property
    def local_names(self) -> tuple[str, ...]:
        """The names of :attr:`locals`' slots."""
        return _local_names(self.code)


@dataclass(frozen=True, eq=False)
class Suspension:
    """An interpretation stopped at a call: its frames, outermost first, and the call."""

    frames: tuple[SuspendedFrame, ...]
    """The interpreted frames, outermost (the interpreted function's) first; the last one made
    the call."""
    callable: Any
    """What was called (as :func:`suspend` was told)."""
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


class Suspended(Exception):
    """Raised by a call of a suspendable interpreted function (or by a resume) that stopped at a
    call: :attr:`suspension` holds its state, for :meth:`SuspendableFunction.resume`."""

    def __init__(self, suspension: Suspension) -> None:
        super().__init__(f"interpretation suspended at a call of {suspension.callable!r}")
        self.suspension = suspension


@uncatchable
class SuspensionRefused(InterpreterError):
    """:func:`suspend` cannot suspend the interpretation here; :attr:`reason` says why.

    Raised by :func:`suspend` itself, in the lookaside or hook that called it, which may catch it
    and make the call instead; the interpreted program's handlers never see it.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"cannot suspend the interpretation here: {reason}")
        self.reason = reason


@uncatchable
class SuspendSignal(BaseException):
    """Carries a captured :class:`Suspension` out of the interpretation, past the program's
    handlers (the frames stop where they are; none of their ``finally`` or ``except`` runs)."""

    def __init__(self, suspension: Suspension) -> None:
        super().__init__()
        self.suspension = suspension


class SuspendableRuntime(Runtime):
    """The runtime of a suspendable interpretation."""

    __slots__ = ("exc_at_start",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The handled exception outside the interpretation: another one at a suspension means an
        # ``except`` clause (or the exceptional path of a ``finally`` or ``with``) is running.
        self.exc_at_start = self.exc_item.value


def suspend(fn: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None) -> NoReturn:
    """Suspend the interpretation running now at the call being made of ``fn(*args, **kwargs)``.

    For a lookaside (called by ``Runtime.call``) or an ``opaque_call`` hook of a suspendable
    interpretation. It never returns: it raises the signal that stops the interpretation, whose
    caller gets :class:`Suspended`; or it raises :class:`SuspensionRefused` where the frames
    cannot be resumed (the caller may catch that and make the call itself). Do not catch other
    exceptions around it.
    """
    suspension = _capture(sys._getframe(1), fn, tuple(args), dict(kwargs) if kwargs else {})
    raise SuspendSignal(suspension)


# ----------------------------------------------------------------------------------------------
# Capture: the real stack from the caller of ``suspend`` down to the interpretation's entry.

_PACKAGE_FILE_PREFIX = run_frame.__code__.co_filename.rsplit("_runtime.py", 1)[0]

# The first of the interpreter's frames below the lookaside or hook: what calls them.
_CALLERS_OF_LOOKASIDES = frozenset({Runtime.call.__code__, Runtime.opaque_call.__code__})
# Between a CALL op and the frame (or lookaside) it calls: what passes the callee's result back
# unchanged as the call's result.
_DISPATCH = frozenset(
    {
        Runtime.call.__code__,
        Runtime.opaque_call.__code__,
        Runtime.counted_c_call.__code__,
        Runtime.instantiate.__code__,  # only its paths to ``call`` and ``opaque_call`` pass
        Runtime.call_function.__code__,
        Runtime._call_function_general.__code__,
    }
)
# What runs an op for its frame's loop: the history's recording wrapper.
_OP_WRAPPERS = frozenset(c for c in _traced.__code__.co_consts if isinstance(c, CodeType))
_RUN_LOOPS = frozenset({run_frame.__code__, enter_frame.__code__, resume_after_exception.__code__})


def _refuse(reason: str) -> NoReturn:
    raise SuspensionRefused(reason)


def _where(real: FrameType) -> str:
    code = real.f_code
    return (
        f"{code.co_qualname if sys.version_info >= (3, 11) else code.co_name} ({code.co_filename})"
    )


def _called_by(frames: list[SuspendedFrame], real: FrameType) -> str:
    return f"{frames[-1].code.co_name} was called by {_where(real)}, not by a call instruction"


def _capture(
    real: FrameType | None, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Suspension:
    # The lookaside's or hook's own frames (outside the package).
    while real is not None and not real.f_code.co_filename.startswith(_PACKAGE_FILE_PREFIX):
        real = real.f_back
    if real is None:
        _refuse("suspend() was called outside an interpretation")
    if real.f_code not in _CALLERS_OF_LOOKASIDES:
        _refuse(f"the call is not made through a lookaside or the opaque_call hook: {_where(real)}")
    rt = real.f_locals.get("self")
    if not isinstance(rt, SuspendableRuntime):
        _refuse("the interpretation is not suspendable (interpret(..., suspendable=True))")
    from thunder_interp._api import _with_stack_room

    entry = _with_stack_room.__code__  # the frame the walk ends at
    frames: list[SuspendedFrame] = []
    last: Frame | None = None
    # "callee": between a call op and what it called; "op": a call op seen, its frame's loop
    # next; "frame": a frame just captured.
    state = "callee"
    while True:
        real = real.f_back
        if real is None:  # pragma: no cover - every interpretation has an entry
            _refuse("the interpretation's entry was not found")
        code = real.f_code
        if code is entry and state != "op":
            if not frames:
                _refuse("the call is not made by interpreted code")
            break
        if state == "callee":
            if code in CALL_OP_CODES:
                state = "op"
            elif code not in _DISPATCH:
                if frames:
                    _refuse(_called_by(frames, real))
                _refuse(f"the call is not made by a call instruction: {_where(real)} made it")
        elif state == "op":
            if code in _RUN_LOOPS:
                last = _capture_frame(rt, real, frames)
                state = "frame"
            elif code not in _OP_WRAPPERS:
                f = real.f_locals.get("f") if is_loop_code(code) else None
                if isinstance(f, Frame) and f.cc.flags & _GENERATOR_FLAGS:
                    _refuse(f"{f.code.co_name} is a generator or coroutine frame")
                _refuse(f"a call op runs in {_where(real)}")
        else:  # "frame"
            if (code in _RUN_LOOPS or code is _PENDING) and real.f_locals.get("f") is last:
                pass  # another loop of the same frame (``enter_frame`` below its exception path)
            elif code is _PENDING:
                last = _capture_frame(rt, real, frames)
            elif code in _DISPATCH:
                state = "callee"
            elif code not in _RESUME_PLUMBING:
                _refuse(_called_by(frames, real))
    if rt.exc_item.previous is not None or rt.exc_item.value is not rt.exc_at_start:
        _refuse(
            "an interpreted frame is running an except clause (or the exceptional path of a"
            " finally or with block)"
        )
    frames.reverse()
    return Suspension(tuple(frames), fn, args, kwargs)


def _capture_frame(rt: Runtime, real: FrameType, frames: list[SuspendedFrame]) -> Frame:
    """Capture the interpreted frame whose loop the real frame ``real`` runs."""
    local = real.f_locals
    f = local.get("f")
    pc = local.get("pc")
    if not isinstance(f, Frame) or not isinstance(pc, int):  # pragma: no cover - defensive
        _refuse(f"no interpreted frame in {_where(real)}")
    name = f.code.co_name
    if f.rt is not rt:
        _refuse(f"{name} belongs to another interpretation")
    if f.cc.flags & _GENERATOR_FLAGS:
        _refuse(f"{name} is a generator or coroutine frame")
    if f.names is not None or type(f.fn) is not FunctionType:
        _refuse(f"{name} is not a function's frame (module or class body code)")
    instructions = f.cc.instructions
    if not 0 < pc < len(instructions) or instructions[pc].opname not in CALL_OPNAMES:
        _refuse(f"{name} is not at a call instruction")  # pragma: no cover - defensive
    frames.append(
        SuspendedFrame(f.fn, instructions[pc].offset, tuple(f.lv), tuple(f.stack), tuple(f.blocks))
    )
    return f


# ----------------------------------------------------------------------------------------------
# Resume


_OFFSET_INDEX: weakref.WeakKeyDictionary[CodeType, dict[int, int]] = weakref.WeakKeyDictionary()


def rebuild_frame(rt: Runtime, state: SuspendedFrame) -> Frame:
    """A frame of ``rt`` in ``state``, waiting at its call (``pc`` is the call's index)."""
    fn = state.function
    if type(fn) is not FunctionType:
        raise TypeError(f"a suspended frame runs a Python function, not {fn!r}")
    code = fn.__code__
    cc = rt.codes.get(code)
    if cc.native or cc.flags & _GENERATOR_FLAGS or not code.co_flags & CO_OPTIMIZED:
        raise ValueError(f"a frame of {code.co_name} cannot be resumed")
    offsets = _OFFSET_INDEX.get(code)
    if offsets is None:
        offsets = _OFFSET_INDEX[code] = {ins.offset: ins.index for ins in cc.instructions[1:]}
    index = offsets.get(state.offset, 0)
    if not index or cc.instructions[index].opname not in CALL_OPNAMES:
        raise ValueError(f"offset {state.offset} of {code.co_name} is not a call instruction")
    if len(state.locals) != cc.nslots:
        raise ValueError(
            f"{code.co_name} has {cc.nslots} local slots, the state {len(state.locals)}"
        )
    f = new_frame(rt, cc, code, list(state.locals), fn.__globals__, fn)
    f.stack = list(state.stack)
    if state.blocks:
        f.blocks = list(state.blocks)
    f.pc = index
    return f


def resume_frames(frames: Sequence[Frame], value: Any, exc: BaseException | None) -> Any:
    """Run ``frames`` (outermost first, each waiting at its call) to the end: the innermost
    call's result is ``value`` (or it raised ``exc``); returns the outermost frame's value."""
    if len(frames) > 1:
        return _resume_pending(frames, 0, value, exc)
    return _continue(frames[0], value, exc)


def _continue(f: Frame, value: Any, exc: BaseException | None) -> Any:
    """Run ``f`` on from its call, whose result is ``value`` (or which raised ``exc``)."""
    if exc is None:
        f.stack.append(value)
        f.pc = next_index(f.cc, f.cc.instructions[f.pc])
    run_frame(f, exc)
    return f.retval


def _resume_pending(frames: Sequence[Frame], i: int, value: Any, exc: BaseException | None) -> Any:
    """Resume the frames inside ``frames[i]``, then ``frames[i]`` with their result. While they
    run, this real frame stands for ``frames[i]`` (a loop code: ``f`` at ``pc``, its call), so
    frame views, recursion depth and a later suspension see it where CPython has it."""
    f = frames[i]
    pc = f.pc
    rt = f.rt
    depth = rt.depth
    if depth >= rt.depth_limit:
        guard = rt.guard
        assert guard is not None
        guard.deeper(depth, sys._getframe())
    rt.depth = depth + 1
    try:
        if i + 2 < len(frames):
            value = _resume_pending(frames, i + 1, value, exc)
        else:
            inner = frames[i + 1]
            if exc is None:
                inner.stack.append(value)
                inner.pc = next_index(inner.cc, inner.cc.instructions[inner.pc])
            run_frame(inner, exc)
            value = inner.retval
    except BaseException as e:
        exc = e  # raised into ``f`` at its call, below (outside this handler: no chaining)
    else:
        exc = None
    finally:
        rt.depth = depth
        if depth < rt.depth_floor:
            rt._shallower(depth)
    if type(exc) is SuspendSignal:
        raise exc
    return _continue(f, value, exc) if exc is None else _rethrow(f, pc, exc)


def _rethrow(f: Frame, pc: int, exc: BaseException) -> Any:
    f.pc = pc
    run_frame(f, exc)
    return f.retval


register_loop_codes(_resume_pending.__code__)

_PENDING = _resume_pending.__code__
# What runs a resumed frame's loop on behalf of the resume (none of it between two frames).
_RESUME_PLUMBING = frozenset({resume_frames.__code__, _continue.__code__, _rethrow.__code__})
