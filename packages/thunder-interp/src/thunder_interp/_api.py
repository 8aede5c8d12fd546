"""The public entry point: :func:`interpret`."""

from __future__ import annotations

import contextvars
import functools
import sys
from collections.abc import Callable, Mapping
from types import CodeType, FunctionType
from typing import Any, Literal, overload

from thunder_interp._callbacks import CALL_HOOKS, Callbacks, hook_profile
from thunder_interp._history import HistoryEntry, format_history
from thunder_interp._implicit_lookasides import unary_slot_builtins
from thunder_interp._lookasides import default_lookasides
from thunder_interp._provenance import Provenance, ProvenanceKind
from thunder_interp._recursion import DepthGuard, depth_below
from thunder_interp._registry import DEFAULT_OPCODE_TABLE, OpcodeTable
from thunder_interp._runtime import CodeCache, Runtime, lookaside_codes, strip_interpreter_frames
from thunder_interp._slots import (
    interpretation_ended,
    interpretation_started,
    reset_special_lookup,
    set_special_lookup,
)
from thunder_interp._suspend import (
    SuspendableRuntime,
    Suspended,
    SuspendSignal,
    Suspension,
    rebuild_frame,
    resume_frames,
)

__all__ = ["InterpretedFunction", "SuspendableFunction", "interpret", "provenance_of"]

_CURRENT_RUNTIME: contextvars.ContextVar[Runtime | None] = contextvars.ContextVar(
    "thunder_interp_runtime", default=None
)


def provenance_of(value: Any) -> Provenance | None:
    """The provenance record of ``value`` in the interpretation running now (hooks, lookasides).

    ``None`` outside an interpretation, when provenance is off, or when ``value`` has no record.
    """
    rt = _CURRENT_RUNTIME.get()
    return rt.provenance_of(value) if rt is not None else None


class InterpretedFunction:
    """``fn`` run by the interpreter; call it like ``fn``.

    After a call, :attr:`history` holds the executed instructions (with ``record_history=True``)
    and :meth:`provenance_of` answers for values of the last call (with ``provenance=True``).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        lookasides: Mapping[Any, Callable[..., Any]] | None,
        callbacks: Callbacks | None,
        provenance: bool,
        record_history: bool,
        opcode_table: OpcodeTable | None,
        native_special: Callable[[FunctionType], bool] | None = None,
    ) -> None:
        self.fn = fn
        self.native_special = native_special
        self.callbacks = callbacks
        self.provenance = provenance
        self.record_history = record_history
        hooks = hook_profile(callbacks, provenance)
        hooked = bool(hooks - CALL_HOOKS)
        if lookasides:
            table: dict[Any, Any] = dict(default_lookasides())
            table.update(lookasides)
            self.lookasides: Mapping[Any, Any] = table  # fixed from here on
            self._lookaside_codes = lookaside_codes(table)
            defaults = default_lookasides()
            # Builtins that may run natively when their one argument is plain (see calls.py).
            self._fast_builtins = frozenset(
                fn for fn in unary_slot_builtins() if table.get(fn) is defaults.get(fn)
            )
        else:  # the defaults: what is derived from them is computed once
            self.lookasides, self._lookaside_codes, self._fast_builtins = _default_table()
        self._codes = CodeCache(
            opcode_table if opcode_table is not None else DEFAULT_OPCODE_TABLE,
            hooked,
            record_history,
            hooks,
        )
        self._last: Runtime | None = None
        functools.update_wrapper(self, fn, updated=())  # type: ignore[arg-type]

    # The runtime an interpretation of this function runs in.
    _runtime_type: type[Runtime] = Runtime

    def _runtime(self) -> Runtime:
        rt = self._runtime_type(
            self._codes,
            self.lookasides,
            self.callbacks,
            self.provenance,
            self.record_history,
            self._lookaside_codes,
        )
        rt.fast_builtins = self._fast_builtins
        rt.native_special = self.native_special
        self._last = rt
        return rt

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        rt = self._runtime()
        if rt.prov is not None:
            names = _parameter_names(self.fn)
            for i, value in enumerate(args):
                name = names[i] if i < len(names) else None
                rt.record(value, Provenance(ProvenanceKind.ARGUMENT, name=name, index=i))
            for key, value in kwargs.items():
                rt.record(value, Provenance(ProvenanceKind.ARGUMENT, name=key, index=None))
        guard = rt.guard = DepthGuard(rt, depth_below(sys._getframe()))
        token = _CURRENT_RUNTIME.set(rt)
        callbacks = self.callbacks
        lookups = set_special_lookup(callbacks.special_lookup if callbacks else None)
        interpretation_started()
        try:
            return _with_stack_room(rt.call, self.fn, args, kwargs, None)
        except BaseException as e:
            raise e.with_traceback(strip_interpreter_frames(e.__traceback__))  # noqa: B904
        finally:
            interpretation_ended()
            reset_special_lookup(lookups)
            guard.close()
            _CURRENT_RUNTIME.reset(token)

    @property
    def history(self) -> list[HistoryEntry]:
        """Instructions executed by the last call (empty unless ``record_history=True``)."""
        return list(self._last.history) if self._last is not None else []

    def format_history(self, instructions: bool = True) -> str:
        """The last call's history as a readable log (see :func:`format_history`)."""
        return format_history(self.history, instructions)

    def provenance_of(self, value: Any) -> Provenance | None:
        """The provenance record of ``value`` in the last call (``None`` if unknown)."""
        return self._last.provenance_of(value) if self._last is not None else None

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self, obj)


class SuspendableFunction(InterpretedFunction):
    """``fn`` run by the interpreter in a mode that can stop at a call and go on later
    (``interpret(fn, suspendable=True)``).

    A lookaside or the ``opaque_call`` hook stops it by calling :func:`suspend`: the call then
    raises :class:`Suspended`, whose ``suspension`` holds the interpreted frames and the call,
    and :meth:`resume` goes on from there. It interprets with ops only (no basic blocks), which
    is slower than :class:`InterpretedFunction`.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        codes = self._codes
        self._codes = CodeCache(codes.table, codes.hooked, codes.history, codes.hooks, False)

    _runtime_type = SuspendableRuntime

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call ``fn``: its value, or :class:`Suspended` where it stopped at a call."""
        rt = self._runtime()
        if rt.prov is not None:
            names = _parameter_names(self.fn)
            for i, value in enumerate(args):
                name = names[i] if i < len(names) else None
                rt.record(value, Provenance(ProvenanceKind.ARGUMENT, name=name, index=i))
            for key, value in kwargs.items():
                rt.record(value, Provenance(ProvenanceKind.ARGUMENT, name=key, index=None))
        return self._run(rt, rt.call, self.fn, args, kwargs, None)

    def resume(
        self, suspension: Suspension, value: Any = None, *, exception: BaseException | None = None
    ) -> Any:
        """Go on with the interpretation ``suspension`` stopped, its call having returned
        ``value`` (or raised ``exception``): the innermost frame goes on after its call, then
        each frame with the value of the one it called, and the outermost frame's value is
        returned; an exception goes through the frames' handlers as in CPython. It may stop at a
        call again (:class:`Suspended`). This function's lookasides, hooks and settings apply;
        its ``fn`` plays no part. A suspension may be resumed several times (objects that its
        frames share with the program, such as a list, are not copied). Resume outside the
        ``except`` clause that caught :class:`Suspended`: as for any call made in one, the
        program's exceptions would have it as their ``__context__``."""
        rt = self._runtime()
        frames = [rebuild_frame(rt, state) for state in suspension.frames]
        if not frames:
            raise ValueError("a suspension has at least one frame")
        return self._run(rt, resume_frames, frames, value, exception)

    def _run(self, rt: Runtime, runner: Callable[..., Any], *args: Any) -> Any:
        """``runner(*args)`` as the interpretation ``rt`` (the entry's bookkeeping)."""
        guard = rt.guard = DepthGuard(rt, depth_below(sys._getframe()))
        token = _CURRENT_RUNTIME.set(rt)
        callbacks = self.callbacks
        lookups = set_special_lookup(callbacks.special_lookup if callbacks else None)
        interpretation_started()
        try:
            return _with_stack_room(runner, *args)
        except SuspendSignal as signal:
            raise Suspended(signal.suspension) from None
        except BaseException as e:
            raise e.with_traceback(strip_interpreter_frames(e.__traceback__))  # noqa: B904
        finally:
            interpretation_ended()
            reset_special_lookup(lookups)
            guard.close()
            _CURRENT_RUNTIME.reset(token)


@functools.lru_cache(maxsize=1)
def _default_table() -> tuple[dict[Any, Any], frozenset[CodeType], frozenset[Any]]:
    """The lookaside table of an interpretation without lookasides of its own (shared: it is
    never changed), the code objects of its Python functions, and the builtins that may run
    natively (all of ``unary_slot_builtins``)."""
    table = dict(default_lookasides())
    return table, lookaside_codes(table), frozenset(unary_slot_builtins())


def _with_stack_room(fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)


if sys.version_info >= (3, 11):
    # CPython 3.11+ keeps Python frames on per-thread "data stack" chunks and frees a chunk as
    # soon as the stack shrinks below it; code whose call depth oscillates around a chunk
    # boundary then allocates and frees a chunk on every call (measured: up to 5x slower). The
    # interpreter uses several Python frames per interpreted call, so this is common. Entering it
    # through a frame that is large (about 1 MiB of value-stack slots, never touched) starts a big
    # chunk with ample room after that frame, where the interpreter's frames then live.
    _with_stack_room.__code__ = _with_stack_room.__code__.replace(co_stacksize=1 << 17)


def _parameter_names(fn: Any) -> tuple[str, ...]:
    code = getattr(fn, "__code__", None)
    if code is None:
        func = getattr(fn, "__func__", None)
        code = getattr(func, "__code__", None)
        if code is not None:
            return tuple(code.co_varnames[1 : code.co_argcount])
        return ()
    return tuple(code.co_varnames[: code.co_argcount])


@overload
def interpret(
    fn: Callable[..., Any],
    *,
    lookasides: Mapping[Any, Callable[..., Any]] | None = None,
    callbacks: Callbacks | None = None,
    provenance: bool = False,
    record_history: bool = False,
    opcode_table: OpcodeTable | None = None,
    native_special: Callable[[FunctionType], bool] | None = None,
    suspendable: Literal[True],
) -> SuspendableFunction: ...


@overload
def interpret(
    fn: Callable[..., Any],
    *,
    lookasides: Mapping[Any, Callable[..., Any]] | None = None,
    callbacks: Callbacks | None = None,
    provenance: bool = False,
    record_history: bool = False,
    opcode_table: OpcodeTable | None = None,
    native_special: Callable[[FunctionType], bool] | None = None,
    suspendable: bool = False,
) -> InterpretedFunction: ...


def interpret(
    fn: Callable[..., Any],
    *,
    lookasides: Mapping[Any, Callable[..., Any]] | None = None,
    callbacks: Callbacks | None = None,
    provenance: bool = False,
    record_history: bool = False,
    opcode_table: OpcodeTable | None = None,
    native_special: Callable[[FunctionType], bool] | None = None,
    suspendable: bool = False,
) -> InterpretedFunction:
    """Return a callable that runs ``fn``'s bytecode in the interpreter.

    Calling the result behaves like calling ``fn`` (CPython semantics: same result, same
    exception). Python functions it calls are interpreted too; C functions are called opaquely.

    Args:
        fn: a Python function, method, ``functools.partial``, class or callable object.
        lookasides: callables to replace (``{original: replacement}``); a replacement runs
            natively and may itself call :func:`interpret`. They override the defaults
            (``super``, ``locals``, ``globals``, ``vars``, ``dir``, ``sys.exc_info``, ...).
        callbacks: hooks on loads, stores and opaque calls (see :class:`Callbacks`).
        provenance: keep a record of where values came from (see :class:`Provenance`).
        record_history: record executed instructions (see :attr:`InterpretedFunction.history`).
        opcode_table: the handler table to use (defaults to :data:`DEFAULT_OPCODE_TABLE`).
        native_special: a predicate on Python special methods (``__getitem__`` of some class,
            say): where CPython would call one implicitly, those it accepts run natively
            (properties and explicit calls are unaffected). Default: all are interpreted.
        suspendable: return a :class:`SuspendableFunction`, which lookasides and hooks may
            stop at a call (:func:`suspend`) and :meth:`~SuspendableFunction.resume` later.
    """
    if suspendable:
        return SuspendableFunction(
            fn, lookasides, callbacks, provenance, record_history, opcode_table, native_special
        )
    return InterpretedFunction(
        fn, lookasides, callbacks, provenance, record_history, opcode_table, native_special
    )
