"""Frames as interpreted code sees them: ``sys._getframe``, ``inspect``, ``warnings``, ``logging``.

CPython's frame functions read the real stack, which holds the interpreter's own frames. The
lookasides here read it too, but show each interpreted frame (one ``run_frame`` call on the real
stack) as a :class:`FrameView` and hide the interpreter's other frames; native frames are shown
as they are (as a :class:`NativeFrameView` where interpreted frames lie below them, so that
``f_back`` leads there). So ``collections.namedtuple``, ``enum``, ``typing`` and ``dataclasses``
find the caller's module, ``inspect.stack()`` and ``logging`` the caller's function and line,
and a warning the file and line its ``stacklevel`` points at. A traceback entry's ``tb_frame``
shows the view of the interpreted frame its stub stands for (see ``_tracebacks``).
"""

from __future__ import annotations

import contextlib
import dis
import functools
import operator
import os
import sys
import warnings
import weakref
from collections.abc import Callable, Iterator
from types import BuiltinFunctionType, CodeType, FrameType, FunctionType, TracebackType
from typing import Any

from thunder_interp._frame import Frame
from thunder_interp._locals import frame_f_locals
from thunder_interp._recursion import LIMITS, is_loop_code
from thunder_interp._registry import PY_VERSION
from thunder_interp._runtime import (
    InternalLookaside,
    Runtime,
    _has_handler,
    namespace_with_module,
)
from thunder_interp._slots import register_attribute_view
from thunder_interp._tracebacks import FrameLink

__all__ = [
    "FrameView",
    "NativeFrameView",
    "frame_lookasides",
    "running_in_handler",
    "running_line",
    "warn_from",
    "warning_site",
]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_UNRESOLVED: Any = object()


# Before 3.12 a generator or coroutine that raised has no f_back (3.12+ keeps its caller).
_FINISHED_GENERATORS_UNLINKED = PY_VERSION < (3, 12)
_GENERATOR_FLAGS = 0x20 | 0x80 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR


class FrameView:
    """An interpreted frame with the attributes of a frame object (``f_back``, ``f_code``,
    ``f_globals``, ``f_locals``, ``f_lineno``, ``f_lasti``, ...)."""

    __slots__ = (
        "__weakref__",
        "_back",
        "_frame",
        "_index",
        "_pc",
        "_real",
        "f_trace",
        "f_trace_lines",
        "f_trace_opcodes",
    )

    # ``isinstance(view, types.FrameType)`` holds, as ``inspect.isframe`` and friends check.
    __class__ = property(lambda self: FrameType)  # type: ignore[assignment]

    def __init__(self, frame: Frame) -> None:
        self._frame = frame
        self._real: FrameType | None = None  # the real frame of the run_frame call running it
        self._pc = self._index = frame.pc  # the op run_frame ran, the instruction running
        self._back: Any = _UNRESOLVED
        self.f_trace: Any = None
        self.f_trace_lines = True
        self.f_trace_opcodes = False

    @property
    def f_code(self) -> CodeType:
        return self._frame.code

    @property
    def f_globals(self) -> dict[str, Any]:
        return self._frame.globals

    @property
    def f_builtins(self) -> dict[str, Any]:
        return self._frame.builtins

    @property
    def f_locals(self) -> Any:
        return frame_f_locals(self._frame)

    @property
    def f_lineno(self) -> int:
        lines = self._frame.cc.lines
        index = self._current_index()
        return lines[index] if 0 < index < len(lines) else self._frame.code.co_firstlineno

    @property
    def f_lasti(self) -> int:
        instructions = self._frame.cc.instructions
        index = self._current_index()
        return instructions[index].offset if 0 < index < len(instructions) else -1

    @property
    def f_back(self) -> Any:
        frame = self._frame
        if frame.raised_out:
            # Its real frames are gone: its caller is the frame the exception went to.
            if _FINISHED_GENERATORS_UNLINKED and frame.cc.flags & _GENERATOR_FLAGS:
                return None
            caller = frame.raised_into
            return _frame_view(caller) if caller is not None else None
        if self._back is _UNRESOLVED:
            real = self._real
            below = _user_frames(real.f_back, self._frame) if real is not None else iter(())
            self._back = next(below, (None, 0))[0]
        return self._back

    def _current_index(self) -> int:
        """The instruction running now: the frame may have moved on since it was looked up."""
        interpreted = self._frame
        if interpreted.raised_out:
            # Left by an exception; a re-raise keeps the line of the first raise (RERAISE's lasti).
            return interpreted.lasti or interpreted.pc
        real = self._real
        if real is None:
            return self._index
        above: list[FrameType] = []
        frame: FrameType | None = sys._getframe(1)
        for _ in range(_LOOK_UP_AT_MOST):
            if frame is None:
                break
            if frame is real:
                return _running_index(self._frame, real, above)[1]
            above.append(frame)
            frame = frame.f_back
        pc = real.f_locals.get("pc")
        if isinstance(pc, int) and pc and pc != self._pc:
            return pc  # it has moved on (the start of the op it runs, if that is a block)
        return self._index

    def clear(self) -> None:
        raise RuntimeError("cannot clear an executing frame")

    def __repr__(self) -> str:
        code = self.f_code
        return (
            f"<frame at {hex(id(self))}, file {code.co_filename!r}, line {self.f_lineno}, "
            f"code {code.co_name}>"
        )


class NativeFrameView:
    """A native frame above interpreted ones (code a lookaside runs, say): its own attributes,
    but an ``f_back`` that shows the interpreted frames below rather than the interpreter's."""

    __slots__ = ("__weakref__", "_back", "_real")

    __class__ = property(lambda self: FrameType)  # type: ignore[assignment]

    def __init__(self, real: FrameType) -> None:
        self._real = real
        self._back: Any = _UNRESOLVED

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    @property
    def f_back(self) -> Any:
        if self._back is _UNRESOLVED:
            self._back = next(_user_frames(self._real.f_back), (None, 0))[0]
        return self._back

    def __repr__(self) -> str:
        return repr(self._real)


def _native_view(real: FrameType) -> NativeFrameView:
    view = _NATIVE_VIEWS.get(id(real))
    if view is None or view._real is not real:
        view = _NATIVE_VIEWS[id(real)] = NativeFrameView(real)
    view._back = _UNRESOLVED
    return view


def _interpreter_below(real: FrameType | None) -> bool:
    while real is not None:
        if real.f_code.co_filename.startswith(_PACKAGE_DIR):
            return True
        real = real.f_back
    return False


# Real frames searched for the run_frame call of a frame whose line is asked for.
_LOOK_UP_AT_MOST = 64
_VIEWS: weakref.WeakValueDictionary[int, FrameView] = weakref.WeakValueDictionary()
_NATIVE_VIEWS: weakref.WeakValueDictionary[int, NativeFrameView] = weakref.WeakValueDictionary()


def _running_index(frame: Frame, real: FrameType, above: list[FrameType]) -> tuple[int, int]:
    """``(pc, index)``: the op the run_frame call ``real`` runs for ``frame``, and the
    instruction running; ``above`` are the real frames above ``real`` (innermost first)."""
    pc = real.f_locals.get("pc")
    if not isinstance(pc, int):
        return frame.pc, frame.pc
    entry = frame.cc.enter
    owners = getattr(entry, "block_owners", None)
    if owners is not None and entry.__code__ is real.f_code:
        # The frame's compiled entry (see ``_blocks``) runs its entry block itself: its line
        # tells the instruction.
        index = owners.get(real.f_lineno)
        if index is not None:
            return pc, index
    ops = frame.cc.ops
    op = ops[pc] if 0 < pc < len(ops) else None
    owners = getattr(op, "block_owners", None)
    if owners is not None:
        # A compiled block runs several instructions: the line of its frame tells which one.
        code = getattr(op, "__code__", None)
        for frame_above in reversed(above):
            if frame_above.f_code is code:
                return pc, owners.get(frame_above.f_lineno, pc)
    return pc, pc


def _view(real: FrameType, above: list[FrameType]) -> FrameView | None:
    """The view of the interpreted frame that the real ``run_frame`` frame ``real`` runs."""
    frame = real.f_locals.get("f")
    if not isinstance(frame, Frame):
        return None
    view = _VIEWS.get(id(frame))
    if view is None or view._frame is not frame:
        view = _VIEWS[id(frame)] = FrameView(frame)
    view._real = real
    view._pc, view._index = _running_index(frame, real, above)
    view._back = _UNRESOLVED
    return view


def _user_frames(real: FrameType | None, last: Any = None) -> Iterator[tuple[Any, int]]:
    """``(frame, offset)`` for the frames the user sees from ``real`` down: views of interpreted
    frames and native frames; ``offset`` counts real frames from ``real``. ``last``: the
    interpreted frame shown last (its loop may span two real frames)."""
    offset = 0
    above: list[FrameType] = []  # the interpreter's frames since the last frame shown
    interpreted_below = True  # until a native frame is found with none of them below it
    while real is not None:
        code = real.f_code
        if is_loop_code(code):
            frame = real.f_locals.get("f")
            if frame is not last and isinstance(frame, Frame):
                view = _view(real, above)
                if view is not None:
                    yield view, offset
                last = frame
            above = []
        elif code.co_filename.startswith(_PACKAGE_DIR):
            above.append(real)
        else:
            interpreted_below = interpreted_below and _interpreter_below(real.f_back)
            yield (_native_view(real) if interpreted_below else real), offset
            above = []
        real = real.f_back
        offset += 1


def running_line(skip: Callable[[str], bool]) -> tuple[str, int] | None:
    """``(filename, line)`` of the innermost frame running now whose file name ``skip`` does not
    reject: an interpreted frame at the instruction it runs, or a native frame (one a lookaside
    runs, or the caller of the interpretation); None where ``skip`` rejects them all. For a tool
    that notes where the program is when something happens (the line that recorded an op), with
    less work than ``sys._getframe``'s views: only the frames passed are looked at."""
    real: FrameType | None = sys._getframe(1)
    above: list[FrameType] = []  # the interpreter's frames since the last frame passed
    last: Any = None
    while real is not None:
        code = real.f_code
        if is_loop_code(code):
            frame = real.f_locals.get("f")
            if frame is not last and isinstance(frame, Frame):
                filename = frame.code.co_filename
                if not skip(filename):
                    _, index = _running_index(frame, real, above)
                    lines = frame.cc.lines
                    ok = 0 <= index < len(lines)
                    return filename, lines[index] if ok else frame.code.co_firstlineno
                last = frame
            above = []
        elif code.co_filename.startswith(_PACKAGE_DIR):
            above.append(real)
        else:
            if not skip(code.co_filename):
                return code.co_filename, real.f_lineno
            above = []
        real = real.f_back
    return None


def running_in_handler(skip: Callable[[str], bool]) -> bool:
    """Whether an exception raised now (by the call running in the innermost interpreted frame)
    would enter a handler of the interpreted program that may catch it: an ``except`` clause (or a
    ``finally`` block, which may ``return``) of an interpreted frame on the stack whose file name
    ``skip`` does not reject, or a ``with`` block whose exit may swallow it (``_exit_may_swallow``);
    not another ``with`` block's exit nor the cleanup of an ``except`` clause, which re-raise (the handler around
    those is looked at next). For a binding layer
    that notes which calls the program guards."""
    real: FrameType | None = sys._getframe(1)
    above: list[FrameType] = []
    last: Any = None
    while real is not None:
        code = real.f_code
        if is_loop_code(code):
            frame = real.f_locals.get("f")
            if frame is not last and isinstance(frame, Frame):
                if not skip(frame.code.co_filename):
                    _, index = _running_index(frame, real, above)
                    if _may_catch(frame, index):
                        return True
                last = frame
            above = []
        elif code.co_filename.startswith(_PACKAGE_DIR):
            above.append(real)
        else:
            above = []
        real = real.f_back
    return False


# Context managers whose exit may swallow an exception whatever their code (``_exit_may_swallow``
# looks at the code of the others).
_SUPPRESSING = (contextlib.suppress, contextlib.ExitStack)


def _may_catch(frame: Frame, index: int) -> bool:
    """Whether an exception raised at instruction ``index`` of ``frame`` may be caught there."""
    if PY_VERSION < (3, 11):
        return _has_handler(frame, index)
    handlers = frame.cc.handlers
    instructions = frame.cc.instructions
    seen: set[int] = set()
    while 0 <= index < len(handlers) and index not in seen:
        seen.add(index)
        handler = handlers[index]
        if handler is None:
            return False
        target = handler.target
        names = [ins.opname for ins in instructions[target : target + 3]]
        reraises = names[:1] == ["COPY"] and names[1:] == ["POP_EXCEPT", "RERAISE"]
        exits = names[:2] == ["PUSH_EXC_INFO", "WITH_EXCEPT_START"]
        if not (reraises or exits or _reraising_finally(instructions, target)):
            return True
        if exits and 0 < handler.depth <= len(frame.stack):
            # the block's ``__exit__``, under the handler's stack depth
            manager = getattr(frame.stack[handler.depth - 1], "__self__", None)
            if _exit_may_swallow(manager):
                return True
        index = target  # the handler's own code: the handler around it comes next
    return False


def _exit_may_swallow(manager: Any) -> bool:
    """Whether the ``__exit__`` of ``manager`` may swallow an exception: ``contextlib.suppress``
    and ``ExitStack``, a generator-made manager whose generator has an ``except`` clause, a
    Python ``__exit__`` that may return something other than a false constant. Exits written in
    C and those that only return ``None`` (``torch.no_grad``, ``autocast``) re-raise."""
    if manager is None:
        return False
    if isinstance(manager, _SUPPRESSING):
        return True
    if isinstance(manager, contextlib._GeneratorContextManager):
        code = _generator_code(getattr(manager, "gen", None))
        return code is None or _has_except_clause(code)
    code = getattr(getattr(type(manager), "__exit__", None), "__code__", None)
    return code is not None and _may_return_true(code)


def _generator_code(gen: Any) -> CodeType | None:
    """The code a generator runs: an interpreted one's own, not that of the driver running it."""
    code = getattr(gen, "gi_code", None)
    if code is not None and code.co_filename.startswith(_PACKAGE_DIR):
        frame = getattr(gen, "gi_frame", None)
        interpreted = frame.f_locals.get("f") if frame is not None else None
        return interpreted.code if isinstance(interpreted, Frame) else None
    return code


@functools.lru_cache(maxsize=256)
def _has_except_clause(code: CodeType) -> bool:
    ops = [ins.opname for ins in dis.get_instructions(code)]
    return "CHECK_EXC_MATCH" in ops or any(
        a == "PUSH_EXC_INFO" and b == "POP_TOP"
        for a, b in zip(ops, ops[1:])  # bare ``except:``
    )


@functools.lru_cache(maxsize=256)
def _may_return_true(code: CodeType) -> bool:
    instructions = list(dis.get_instructions(code))
    for k, ins in enumerate(instructions):
        if ins.opname == "RETURN_CONST":
            if ins.argval:
                return True
        elif ins.opname == "RETURN_VALUE":
            before = instructions[k - 1] if k else None
            if before is None or before.opname != "LOAD_CONST" or before.argval:
                return True
    return False


# The end of a ``finally`` block on the exception's path, and what else may leave it.
_ENDS_FINALLY = frozenset({"RERAISE"})
_LEAVES_HANDLER = frozenset(
    {"CHECK_EXC_MATCH", "POP_EXCEPT", "RETURN_VALUE", "RETURN_CONST", "JUMP_BACKWARD",
     "JUMP_BACKWARD_NO_INTERRUPT", "YIELD_VALUE"}
)  # fmt: skip


def _reraising_finally(instructions: Any, target: int) -> bool:
    """Whether the handler at ``target`` is a ``finally`` block that raises the exception again
    (library wrappers' ``try: ... finally: restore()``): it runs to ``RERAISE`` without matching
    the exception, returning, leaving a loop or ending the handler (an ``except`` clause)."""
    if target >= len(instructions) or instructions[target].opname != "PUSH_EXC_INFO":
        return False
    for ins in instructions[target + 1 : target + 400]:
        if ins.opname in _ENDS_FINALLY:
            return True
        if ins.opname in _LEAVES_HANDLER:
            return False
    return False


def _frame_view(frame: Frame) -> FrameView:
    """The view of ``frame``: found on the stack while it runs (its line and caller are read
    there), else made from the frame alone."""
    if not frame.raised_out:
        for candidate, _ in _user_frames(sys._getframe(1)):
            if type(candidate) is FrameView and candidate._frame is frame:
                return candidate
    view = _VIEWS.get(id(frame))
    if view is None or view._frame is not frame:
        view = _VIEWS[id(frame)] = FrameView(frame)
    return view


def _traceback_frame(real: FrameType) -> Any:
    """``tb.tb_frame`` as interpreted code sees it: the view of the interpreted frame a stub
    frame stands for (see ``_tracebacks``), or a native frame as ``sys._getframe`` shows it."""
    link = real.f_trace
    if type(link) is FrameLink:
        return _frame_view(link.frame)
    if real.f_code.co_filename.startswith(_PACKAGE_DIR) or not _interpreter_below(real.f_back):
        return real
    return _native_view(real)


register_attribute_view(TracebackType, "tb_frame", _traceback_frame)


def _depth_argument(value: Any) -> int:
    return value if type(value) is int else operator.index(value)


def _getframe(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if kwargs or len(args) > 1:
        return sys._getframe(*args, **kwargs)  # CPython's TypeError
    depth = _depth_argument(args[0]) if args else 0
    for frame, _ in _user_frames(sys._getframe()):
        if depth <= 0:
            return frame
        depth -= 1
    raise ValueError("call stack is not deep enough")


def _module_name_args(depth: int = 0) -> int:
    return depth


def _getframemodulename(
    rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    native = sys._getframemodulename  # type: ignore[attr-defined]
    try:
        depth = _depth_argument(_module_name_args(*args, **kwargs))
    except TypeError:
        return native(*args, **kwargs)
    here = sys._getframe()
    for frame, offset in _user_frames(here):
        if depth <= 0:
            if type(frame) is FrameView:
                fn = frame._frame.fn
                return fn.__module__ if fn is not None else frame.f_globals.get("__name__")
            return native(offset)  # a native frame: CPython's answer (its function's module)
        depth -= 1
    return None


def _getrecursionlimit(
    rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    if args or kwargs:
        return sys.getrecursionlimit(*args, **kwargs)
    return LIMITS.user_limit()


# 3.10 and 3.11 count the builtin call itself in the depth they report.
_SETRECURSIONLIMIT_EXTRA_DEPTH = 1 if PY_VERSION < (3, 12) else 0


def _setrecursionlimit(
    rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    guard = rt.guard
    if kwargs or len(args) != 1 or guard is None:
        return sys.setrecursionlimit(*args, **kwargs)
    try:
        limit = _depth_argument(args[0])
    except TypeError:
        return sys.setrecursionlimit(args[0])  # CPython's TypeError
    if limit < 1 or limit > 0x7FFFFFFF:
        return sys.setrecursionlimit(limit)  # CPython's ValueError or OverflowError
    depth = guard.user_depth() + _SETRECURSIONLIMIT_EXTRA_DEPTH
    if depth >= limit:
        raise RecursionError(
            f"cannot set the recursion limit to {limit} at the recursion depth {depth}: "
            "the limit is too low"
        )
    LIMITS.set_user_limit(limit)
    guard.limit_changed()
    return None


def _type_new(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return rt.opaque_call(type.__new__, namespace_with_module(f, args, 3), kwargs)


# ------------------------------------------------------------------------------------------------
# warnings.warn: C code that finds the warning's file, line and module in the calling frames.

_NATIVE_WARN = warnings.warn
_WARN_STUB = compile(
    "lambda warn, message, category, source: warn(message, category, 1, source)", "<stub>", "eval"
).co_consts[0]


def warn_args(  # the parameters of warnings.warn, by name
    message: Any,
    category: Any = None,
    stacklevel: Any = 1,
    source: Any = None,
    *,
    skip_file_prefixes: Any = (),
) -> tuple[Any, Any, Any, Any, Any]:
    return message, category, stacklevel, source, skip_file_prefixes


def _is_internal(frame: Any) -> bool:
    filename = frame.f_code.co_filename
    return "importlib" in filename and "_bootstrap" in filename


def _is_skipped(frame: Any, prefixes: tuple[str, ...]) -> bool:
    filename = frame.f_code.co_filename
    return isinstance(filename, str) and any(filename.startswith(p) for p in prefixes)


def _warning_frame(stacklevel: int, prefixes: tuple[str, ...]) -> Any:
    """The frame a warning is attributed to (CPython's ``setup_context``), None past the stack."""
    frame = next(_user_frames(sys._getframe()), (None, 0))[0]
    if stacklevel <= 0 or (frame is not None and _is_internal(frame)):
        while stacklevel > 1 and frame is not None:
            frame = frame.f_back
            stacklevel -= 1
        return frame
    while stacklevel > 1 and frame is not None:
        frame = frame.f_back
        while frame is not None and (_is_internal(frame) or _is_skipped(frame, prefixes)):
            frame = frame.f_back
        stacklevel -= 1
    return frame


@functools.lru_cache(maxsize=256)
def _stub_code(filename: str, lineno: int, name: str) -> CodeType:
    code: CodeType = _WARN_STUB.replace(
        co_filename=filename, co_firstlineno=max(lineno, 1), co_name=name
    )
    return code


def _without_stub(tb: TracebackType | None, code: CodeType) -> TracebackType | None:
    """``tb`` below the stub's entry (what CPython's traceback holds: nothing of ``warn``)."""
    entry = tb
    while entry is not None:
        if entry.tb_frame.f_code is code:
            return entry.tb_next
        entry = entry.tb_next
    return tb


def warn_from(
    filename: str,
    lineno: int,
    name: str,
    module_globals: dict[str, Any],
    message: Any,
    category: Any,
    source: Any = None,
) -> Any:
    """``warnings.warn(message, category, 1, source)`` as called by a function ``name`` of
    ``module_globals`` at ``filename:lineno``: the filters, the module and its
    ``__warningregistry__`` decide, as for a call there."""
    code = _stub_code(filename, lineno or 1, name)
    # Called from a frame with the globals, file and line given, warn's stacklevel=1
    # attributes the warning (and its registry) to that frame, as CPython's C code does.
    stub = FunctionType(code, module_globals)
    try:
        return stub(_NATIVE_WARN, message, category, source)
    except BaseException as e:
        raise e.with_traceback(_without_stub(e.__traceback__, code))  # noqa: B904


def warning_site(stacklevel: int, skip_file_prefixes: tuple[str, ...] = ()) -> tuple[Any, int]:
    """Where ``warnings.warn(..., stacklevel)`` called now by the innermost interpreted frame
    (from a lookaside) attributes its warning: ``(view, 0)``, a view of an interpreted frame, or
    ``(None, k)`` for the ``k``-th frame out of the interpretation (1: the caller of the function
    interpreted)."""
    frame = next((v for v, _ in _user_frames(sys._getframe(1)) if type(v) is FrameView), None)
    if frame is None:
        return None, max(stacklevel, 1)
    while stacklevel > 1:
        back = frame.f_back
        while type(back) is FrameView and _is_skipped(back, skip_file_prefixes):
            back = back.f_back
        if type(back) is not FrameView:
            return None, stacklevel - 1
        frame = back
        stacklevel -= 1
    return frame, 0


def _warn(rt: Runtime, f: Frame | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    try:
        message, category, stacklevel, source, prefixes = warn_args(*args, **kwargs)
        stacklevel = _depth_argument(stacklevel)
    except TypeError:
        return _NATIVE_WARN(*args, **kwargs)  # CPython's TypeError
    if type(prefixes) is not tuple or (PY_VERSION < (3, 12) and "skip_file_prefixes" in kwargs):
        return _NATIVE_WARN(*args, **kwargs)
    if prefixes and stacklevel < 2:
        stacklevel = 2
    frame = _warning_frame(stacklevel, prefixes)
    if frame is None:
        return _NATIVE_WARN(message, category, 1 << 30, source)  # past the stack: "sys", line 1
    code = frame.f_code
    return warn_from(
        code.co_filename, frame.f_lineno, code.co_name, frame.f_globals, message, category, source
    )


def frame_lookasides() -> dict[Any, InternalLookaside]:
    """The default lookasides of this module."""
    table: dict[Any, InternalLookaside] = {
        sys._getframe: InternalLookaside("sys._getframe", _getframe),
        sys.getrecursionlimit: InternalLookaside("sys.getrecursionlimit", _getrecursionlimit),
        sys.setrecursionlimit: InternalLookaside("sys.setrecursionlimit", _setrecursionlimit),
        type.__new__: InternalLookaside("type.__new__", _type_new),
    }
    if hasattr(sys, "_getframemodulename"):
        table[sys._getframemodulename] = InternalLookaside(
            "sys._getframemodulename", _getframemodulename
        )
    if isinstance(
        _NATIVE_WARN, BuiltinFunctionType
    ):  # the C implementation (the Python one is interpreted)
        table[_NATIVE_WARN] = InternalLookaside("warnings.warn", _warn)
    return table
