"""``ThunderFunction``: a jitted callable and its cache.

The cached path is: the generated signature of the arguments, one dict lookup, the prologues of
that bucket (usually one; the entry that served the last call first, so an entry whose state is
gone for good, a method patched since, costs nothing), the computation. Buckets hold the entries whose arguments share a key;
entries in one bucket differ only in what the prologue checks beyond the key (a global's value, a
symbolic-value constraint). Finding the bucket costs the same with 1 or 64 entries.
"""

from __future__ import annotations

import collections.abc
import contextlib
import copy
import dataclasses
import functools
import inspect
import itertools
import os
import sys
import threading
import time
import traceback
import types
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import thunder_interp
from thunder import jit_copies, logs, progress
from thunder.binding.segments import SegmentRefused
from thunder.compile_entry import (
    GENERATOR_STATES,
    CacheEntry,
    ProgramRaised,
    WarningWouldRaise,
    bound_symbol_at_line,
    compile_entry,
    first_input_write_line,
    parameter_names,
    user_location,
)
from thunder.errors import (
    HigherOrderOperatorError,
    InternalErrorWarning,
    JitError,
    RequestedError,
    RunsEagerly,
    RunsNatively,
    RunsSplit,
)
from thunder.guards import PatchedByFxTracer, RewrappedByTorch
from thunder.options import CACHE_OPTIONS, JitOptions
from thunder.prologue import GuardFailure, WritesBeforeError, describe_guard_failure, failed_guard
from thunder.signature import (
    Signature,
    WeakSame,
    attributes_without_torch_function,
    make_signature,
    same_objects,
)
from thunder.tensor_patches import patch_token
from thunder.torch_func import eager_reason, forward_ad, transforms_active
from thunder.torch_modes import (
    dispatch_modes_active,
    function_modes_active,
    user_dispatch_mode,
    user_function_mode,
)
from thunder_executors.background_compile import import_compile_stack, wait_while_fx_tracer_patches
from thunder_executors.torch_random import set_rng_state
from thunder_ir import Trace, Transform
from thunder_ir.errors import TracingError
from thunder_ir.prims import DataChanged
from thunder_transforms.autodiff.runner import hide_from_dynamo

__all__ = ["BoundThunderFunction", "CompileRecord", "CompileStats", "ThunderFunction"]

# After tracing failed where eager ran, the same inputs run eagerly this many calls before
# tracing is tried again; each further failure doubles the wait, up to the maximum.
_FIRST_EAGER_WAIT = 8
_MAX_EAGER_WAIT = 4096
# Stands for "compiling raised inside thunder" where the slow path holds the exception to run after.
_INTERNAL: Exception = RuntimeError("thunder failed compiling the traced program")

# A miss waits for the thread compiling for the same function (``_take_compile_turn``) unless
# that thread used less than this CPU time in the last window of the wait: it waits for
# something, which may be this thread (a lock this thread holds that the traced code takes).
_STALL_WINDOW = 1.0
_STALL_CPU = 0.005
# Where the platform has no per-thread CPU clock, the longest wait.
_LONGEST_BLIND_WAIT = 10.0
# How many compile turns (of any jitted function) this thread holds: a thread holding one never
# waits for another's, so no two threads wait for each other.
_turns_held = threading.local()


def _next_eager_wait(structure: _Structure | None, key: tuple[Any, ...] | None) -> int | None:
    """How many calls with ``key``'s inputs run eagerly after this one (tracing them failed
    where eager ran), or None where nothing is cached."""
    if structure is None or key is None:
        return None
    last = structure.eager.get(key, (0, _FIRST_EAGER_WAIT // 2))[1]
    return min(2 * last, _MAX_EAGER_WAIT)


def _eager_wait_note(wait: int | None) -> str:
    if not wait:
        return ""
    return f", as do the next {wait} calls with inputs like these before tracing is tried again"


@dataclass(frozen=True)
class CompileRecord:
    """One compilation: its number, how long it took (and per stage), why it happened (None for
    the first) and the user's ``file:line`` of the call."""

    number: int
    seconds: float
    timings: dict[str, float]
    reason: str | None
    call_site: str | None


@dataclass(repr=False)
class CompileStats:
    """Counters and the traces of the last compilation of a jitted function."""

    cache_hits: int = 0
    cache_misses: int = 0
    compilations: int = 0
    eager_fallbacks: int = 0
    last_traces: list[Trace] = field(default_factory=list)
    last_prologue_traces: list[Trace] = field(default_factory=list)
    last_backward_traces: list[Trace] = field(default_factory=list)
    last_epilogue_source: str | None = None
    last_compile_seconds: float = 0.0
    last_timings: dict[str, float] = field(default_factory=dict)
    last_recompile_reason: str | None = None
    # Why the last call that ran eagerly did (what tracing met, at the user's file:line).
    last_eager_reason: str | None = None
    # The last compiled program: ``prologue(args, kwargs)`` returns the computation's inputs,
    # ``computation(*inputs)`` what runs (``./dev bench models`` times it alone).
    last_program: CacheEntry | None = None
    # Every compilation, in order (``thunder.write_report`` shows it).
    history: list[CompileRecord] = field(default_factory=list)
    # Calls that reached a function run natively (torch.compiler.disable, thunder.run_natively)
    # ran through torch.compile with thunder's backend: how many, why (the user's file:line),
    # and the graphs around the native calls that thunder compiled (``thunder.dynamo.Subgraph``).
    split_calls: int = 0
    last_split_reason: str | None = None
    split_graphs: list[Any] = field(default_factory=list)

    @property
    def last_data_reads(self) -> list[str]:
        """Where the last compiled program reads tensor data and decides on it (the user's
        ``file:line`` of each read and each decision checked on every call)."""
        from thunder.examine import describe_data_reads

        return describe_data_reads(self.last_traces[0]) if self.last_traces else []

    @property
    def fusion_compile_seconds(self) -> float:
        """Time the last program's fusion regions (torch.compile, nvFuser) spent compiling so
        far: they compile on their first call, or in the background (``thunder.compile``), so
        ``last_compile_seconds`` does not count it."""
        finals = [t[-1] for t in (self.last_traces, self.last_backward_traces) if t]
        return sum(float(getattr(t, "compile_seconds", lambda: 0.0)()) for t in finals)

    def __repr__(self) -> str:
        # A summary: the traces (thousands of lines for a model) are its attributes.
        counts = (
            f"compilations={self.compilations}, cache_hits={self.cache_hits}, "
            f"cache_misses={self.cache_misses}, eager_fallbacks={self.eager_fallbacks}"
        )
        lines = [f"CompileStats({counts})"]
        if self.compilations:
            stages = ", ".join(
                f"{k} {v:.3f} s" for k, v in self.last_timings.items() if k != "total"
            )
            fusion = self.fusion_compile_seconds
            if fusion:
                stages += f"; fusion regions {fusion:.3f} s so far"
            lines.append(f"  last compile: {self.last_compile_seconds:.3f} s ({stages})")
        if self.split_calls:
            lines.append(
                f"  split calls: {self.split_calls} ({len(self.split_graphs)} graphs compiled "
                "around the functions run natively)"
            )
        for label, value in (
            ("last recompile reason", self.last_recompile_reason),
            ("last eager reason", self.last_eager_reason),
            ("last split reason", self.last_split_reason),
        ):
            if value:
                lines.append(f"  {label}: {value}")
        traces = [
            f".{name} ({len(getattr(self, name))})"
            for name in ("last_traces", "last_prologue_traces", "last_backward_traces")
        ]
        lines.append(f"  traces: {', '.join(traces)}")
        return "\n".join(lines)


# Set in ThunderFunction.__init__ (never looked up on the wrapped function).
_OWN_ATTRIBUTES = frozenset({"fn", "options", "executors", "transforms", "stats"})


class _SymbolicRefused(Exception):
    """A program compiled with symbolic values automatically could not be: the call compiles
    with constant values."""


class _Structure:
    """A signature and its buckets: key -> entries; the keys whose tracing failed where eager
    ran: key -> (calls left to run eagerly before tracing again, the next such wait); and the
    keys whose program calls a function run natively (they run split, ``_run_split``)."""

    __slots__ = ("buckets", "eager", "signature", "split", "symbolic", "watchers")

    def __init__(self, signature: Signature, symbolic: bool = False) -> None:
        self.signature = signature
        self.symbolic = symbolic  # keyed (and compiled) with symbolic values
        self.buckets: dict[tuple[Any, ...], list[CacheEntry]] = {}
        self.eager: dict[tuple[Any, ...], tuple[int, int]] = {}
        self.split: set[tuple[tuple[Any, ...], tuple[bool, ...]]] = set()  # (key, split facts)
        # Weak references whose objects' death drops their keys' entries (_drop_when_key_dies).
        self.watchers: set[weakref.ref[Any]] = set()


# Reads of these make a call run split with its tensors' facts including the tensors modules hold.
_AUTOGRAD_FACT_OPS = frozenset(
    f"torch.Tensor.{name}" for name in ("is_leaf", "_is_view", "_base", "grad_fn")
)


def _plain_leaves() -> frozenset[type]:
    import torch

    return frozenset(
        {torch.Tensor, torch.nn.Parameter, int, float, bool, str, type(None), types.FunctionType}
    )


_PLAIN_LEAVES = _plain_leaves()


def _mutable_arguments(tree: Any, into: list[Any], depth: int = 0) -> list[Any]:
    """``into`` with the lists, dicts, sets and plain objects among the arguments (and inside
    their tuples, lists and dicts, a few levels down)."""
    t = type(tree)
    if t in (list, dict, set) or (
        t.__flags__ & _HEAPTYPE and hasattr(tree, "__dict__") and not callable(tree)
    ):
        into.append(tree)
    if depth < 3 and t in (tuple, list, dict):
        for v in tree.values() if t is dict else tree:
            _mutable_arguments(v, into, depth + 1)
    return into


_HEAPTYPE = 1 << 9


def _split_facts(
    fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], held: bool
) -> tuple[Any, ...]:
    """Whether each tensor of the call (in the arguments' containers; with ``held``, also a
    parameter, buffer or tensor attribute of a module there or of the jitted module) is a leaf
    and whether a view: facts dynamo does not guard, so a split program read them natively
    (``x.is_leaf``, ``x._base``) is chosen by them (a stale program otherwise). The modules'
    tensors are walked only for functions split at such a read: a walk costs about 1 ms a call
    for 300 modules."""
    import torch

    facts: list[bool] = []
    for leaf in _leaves((fn, args, kwargs), []):
        if isinstance(leaf, torch.Tensor):
            tensors: Any = (leaf,)
        elif held and isinstance(leaf, torch.nn.Module):
            tensors = itertools.chain.from_iterable(
                (*m._parameters.values(), *m._buffers.values(), *vars(m).values())
                for m in leaf.modules()
            )
        else:
            continue
        for t in tensors:
            if isinstance(t, torch.Tensor):
                facts += (t.is_leaf, t._is_view())
    # Which container arguments are one object (``f(d, d)``): the split program written
    # through one and read through the other differs (dynamo's guards do not tell).
    shared = same_objects(*_mutable_arguments((args, kwargs), []))
    return tuple(facts) if shared is None else (*facts, shared)


def _leaves(tree: Any, into: list[Any]) -> list[Any]:
    """``into`` with the leaves of ``tree`` appended in pytree's order: plain tuples, lists and
    dicts and the common leaves walked here (a pytree walk costs a few us a call), anything
    else by pytree."""
    kind = type(tree)
    if kind is tuple or kind is list:
        for item in tree:
            _leaves(item, into)
    elif kind is dict:
        for item in tree.values():
            _leaves(item, into)
    elif kind in _PLAIN_LEAVES:
        into.append(tree)
    else:
        from torch.utils._pytree import tree_leaves

        into += tree_leaves(tree)
    return into


# Code flags of a function whose call only makes a generator, coroutine or async generator.
_SUSPENDABLE_KINDS = (
    (inspect.CO_ASYNC_GENERATOR, "an async generator function"),
    (inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE, "a coroutine function"),
    (inspect.CO_GENERATOR, "a generator function"),
)


def _native_reason(fn: Any) -> str | None:
    """Why every call of ``fn`` runs natively, or None: a generator, coroutine or async
    generator function only makes that object; its code runs when the caller resumes it,
    after the call, which no compiled program holds (torch.compile runs a coroutine's frame
    in the call or crashes on it)."""
    target = fn
    while isinstance(target, functools.partial):
        target = target.func
    target = getattr(target, "__func__", target)  # a bound method's function
    code = getattr(target, "__code__", None)
    if code is None and not isinstance(target, type):  # a callable object: its __call__
        call = next(
            (vars(c)["__call__"] for c in type(target).__mro__ if "__call__" in vars(c)), None
        )
        code = getattr(getattr(call, "__func__", call), "__code__", None)
    flags = getattr(code, "co_flags", 0)
    if not isinstance(flags, int):
        return None
    for flag, kind in _SUSPENDABLE_KINDS:
        if flags & flag:
            return (
                f"is {kind}: its call only makes the object whose code runs when it is "
                "resumed, after the call, so there is nothing to compile"
            )
    return None


def _refused(error: Exception) -> RunsSplit:
    """Thunder's refusal of a program as the reason its calls run split (torch runs them)."""
    message = str(error).removeprefix("thunder.jit: ")
    split = RunsSplit(f"cannot be compiled by thunder ({message}); torch runs it")
    split.__traceback__ = error.__traceback__
    return split


def _drop_when_key_dies(fn: ThunderFunction, structure: _Structure, key: tuple[Any, ...]) -> None:
    """Drops the entries of ``key`` when an object it holds weakly dies (a callback made per
    call): no call can match them again, and their programs hold that object (its defaults, its
    code). The bucket is replaced by an empty one, not removed: the callback may run while the
    buckets are iterated; nor changed in place: calls on other threads may iterate it. It takes
    no lock: it may run on any thread, one that holds a lock of another jitted function too."""
    objects = [obj for k in key if type(k) is WeakSame and (obj := k.ref()) is not None]
    if not objects:
        return
    owner = weakref.ref(fn)

    def died(_ref: Any) -> None:
        bucket = structure.buckets.get(key)
        if bucket:
            structure.buckets[key] = []
            jf = owner()
            if jf is not None and (last := jf._last_call) is not None and last[1] in bucket:
                jf._last_call = None
        structure.watchers.difference_update(watchers)

    watchers = {weakref.ref(obj, died) for obj in objects}
    structure.watchers.update(watchers)


def _nearest_key(structure: _Structure, key: tuple[Any, ...]) -> tuple[Any, ...]:
    """The compiled key that differs from ``key`` in the fewest entries (the most recent of
    those): what changed is told against it (a size, not the grad mode of the call before)."""
    keys = list(reversed(structure.buckets))
    return min(keys, key=lambda k: len(structure.signature.changes(k, key)))


def _fingerprint(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    # (with the methods replaced on torch.Tensor, which the cache key holds too)
    return (patch_token(), *map(id, args), *kwargs, *map(id, kwargs.values()))


def _reruns_after_error(
    entry: CacheEntry, error: BaseException, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> bool:
    """Whether the call runs eagerly after ``entry``'s computation raised ``error`` (an index
    out of range, a value check): eager makes the program's writes before the error, which the
    compiled call loses (its epilogue writes outside state after the computation; it writes
    inputs in place last, past decisions on data). Only where the computation raised before
    its first write into an input (the line ``compile_entry.first_input_write_line`` finds),
    so that the eager run starts from the state the call found: never a write made twice.
    A program that may catch an op's error (``CacheEntry.catches_op_errors``: a ``try`` around
    a linalg factorization, an index) runs again eagerly there too, so that its handler decides
    as in eager (tracing never raised there; ``decisions.check_data_decisions`` put every
    effect after such ops). A warning the filters may turn into an error
    (``WarningWouldRaise``) stopped it before it ran: eager raises it at the user's line."""
    if isinstance(error, WarningWouldRaise):
        return True
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_filename.startswith("<thunder trace "):
            generated = tb.tb_frame.f_globals.get(code.co_name)
            _note_program_line(error, generated, tb.tb_lineno)
            first_write = first_input_write_line(generated)
            if first_write != 0:
                if first_write is None:
                    return entry.writes_outside or entry.catches_op_errors
                if tb.tb_lineno < first_write:
                    return True
                if entry.writes_before_error is not None:
                    try:
                        _write_before_error(entry.writes_before_error, tb, generated, args, kwargs)
                    except Exception as bug:  # the program's own error is what the caller gets
                        warnings.warn(
                            f"thunder.jit: replaying the writes made before the error failed "
                            f"({type(bug).__name__}: {bug})",
                            InternalErrorWarning,
                            stacklevel=logs.user_stacklevel(),
                        )
                return False
        tb = tb.tb_next
    return False


def _broken_program(error: BaseException) -> bool:
    """Whether ``error`` is the generated program's own failure, never an op's (a name read
    before the line defining it: ``UnboundLocalError``), which no handler of the program is
    meant to catch."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return (
        isinstance(error, NameError)
        and tb is not None
        and tb.tb_frame.f_code.co_filename.startswith("<thunder trace ")
    )


def _note_program_line(error: BaseException, generated: Any, lineno: int) -> None:
    """Names on ``error`` the user's ``file:line`` of the op that raised at ``lineno`` of the
    generated computation: its traceback shows the computation's frames, not the program's."""
    trace = getattr(generated, "__thunder_trace__", None)
    op = bound_symbol_at_line(trace, lineno) if trace is not None else None
    if op is None:
        return
    location = op.location
    if location:
        note = f"thunder: raised by the compiled program's {op.sym.name} at {location}"
        source = _source_line(location)
        if source:
            note += f"\n    {source}"
    else:  # a fusion region: the user's lines of the ops it computes
        locations = list(dict.fromkeys(s.location for s in op.subsymbols if s.location))
        if not locations:
            return
        shown = ", ".join(locations[:5]) + (", ..." if len(locations) > 5 else "")
        note = f"thunder: raised by the compiled program's {op.sym.name}, computing {shown}"
    if note not in getattr(error, "__notes__", ()):
        error.add_note(note)


def _source_line(location: str) -> str:
    import linecache

    filename, _, line = location.rpartition(":")
    return linecache.getline(filename, int(line)).strip() if line.isdigit() else ""


def _write_before_error(
    writes: WritesBeforeError,
    tb: Any,
    generated: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    """The epilogue's writes recorded before the op that raised (at ``tb``'s line of the
    generated computation), with the values the computation had computed; inputs it wrote in
    place before the error keep their writes, as in eager."""
    op = bound_symbol_at_line(generated.__thunder_trace__, tb.tb_lineno)
    if op is None:
        return
    defined: list[str] = []

    def note(b: Any) -> None:
        defined.extend(p.name for p in b.flat_proxy_outs)
        for sub in b.subsymbols:
            note(sub)

    note(op)
    # The caller gets the program's error: these writes are what eager made before it.
    writes.apply(
        args,
        kwargs,
        defined,
        [p.name for p in op.flat_proxy_args],
        tb.tb_frame.f_locals,
    )


def _has_key(jf: ThunderFunction, args: tuple[Any, ...], kwargs: dict[str, Any], key: Any) -> bool:
    """Whether the call's key is ``key`` (another structure raises in the signature)."""
    try:
        return key is not None and jf._lookup[0](args, kwargs) == key
    except Exception:
        return False


def _same_objects(
    fingerprint: tuple[Any, ...], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> bool:
    """Whether the call's arguments are (probably) the objects of the fingerprinted call. A
    reused id only means that program's prologue is tried first: it checks everything."""
    return fingerprint == _fingerprint(args, kwargs)


class _CompileTurn:
    """A miss's turn to compile (``ThunderFunction._take_compile_turn``), or a compile beside
    the turn (``held`` False). The turn ends once the program is in the cache, before it runs,
    or once the call's failure to compile is recorded (after its eager run)."""

    __slots__ = ("fn", "held")

    def __init__(self, fn: ThunderFunction, held: bool) -> None:
        self.fn, self.held = fn, held

    def end(self) -> None:
        if self.held:
            self.held = False
            self.fn._end_compile_turn()


class _Stall:
    """Whether a thread that holds a compile turn is stalled: it used less than
    ``_STALL_CPU`` seconds of CPU time in the last ``_STALL_WINDOW`` seconds of a wait for it
    (it waits itself, on a lock the waiting thread may hold: traced code takes locks)."""

    __slots__ = ("cpu", "read", "since")

    def __init__(self, thread_id: int) -> None:
        self.read: Any = None
        self.cpu = 0.0
        try:
            self.read = functools.partial(time.clock_gettime, time.pthread_getcpuclockid(thread_id))
            self.cpu = self.read()
        except (AttributeError, OSError):  # no per-thread CPU clock here: the wait is bounded
            self.read = None
        self.since = time.monotonic()

    def stalled(self) -> bool:
        now = time.monotonic()
        if self.read is None:
            return now - self.since >= _LONGEST_BLIND_WAIT
        if now - self.since < _STALL_WINDOW:
            return False
        try:
            cpu = self.read()
        except OSError:  # it ended (and its turn with it)
            return False
        if cpu - self.cpu < _STALL_CPU:
            return True
        self.since, self.cpu = now, cpu
        return False


class ThunderFunction:
    """What ``thunder.jit(fn)`` returns for a function: call it like ``fn``."""

    def __init__(
        self,
        fn: Any,
        options: JitOptions,
        executors: Sequence[Any],
        transforms: Sequence[Transform],
    ) -> None:
        self.fn = fn
        self.options = options
        self.executors = tuple(executors)
        self.transforms = tuple(transforms)
        self.stats = CompileStats()
        self._param_names = parameter_names(fn)
        # Calls on several threads share the cache. The lists (of structures, of a bucket's
        # entries) are replaced, never changed in place: a call iterates the one it read
        # without a lock. Changes are made under ``_cache_lock``; a miss compiles in its turn
        # (``_take_compile_turn``): concurrent misses of the same inputs compile once.
        self._structures: list[_Structure] = []
        # The fast path's signature, buckets and split keys (of the first structure), replaced
        # together: a call never pairs a signature with another structure's buckets.
        self._lookup: tuple[Any, dict[tuple[Any, ...], list[CacheEntry]], set[Any]] = (
            _no_signature,
            {},
            set(),
        )
        self._cache_lock = threading.RLock()
        self._compile_done = threading.Condition(self._cache_lock)
        self._compiling: tuple[int, int] | None = None  # (process, thread) compiling now
        self._cache_version = 0  # counts the entries added and the turns ended
        self._last_failure = ""
        # The default cache compiles with symbolic values once sizes changed for a third program
        # (_goes_symbolic); False again for good where such a program could not be compiled.
        self._auto_symbolic = False
        self._auto_symbolic_allowed = (
            options.sizes_become_symbolic and options.cache is CACHE_OPTIONS.CONSTANT_VALUES
        )
        # Numbers read from outside state (``self.step``) whose value guard failed: inputs of the
        # programs compiled from then on, not constants (``_numbers_changed``).
        self._numbers_become_symbolic = options.sizes_become_symbolic or (
            options.cache is CACHE_OPTIONS.SYMBOLIC_VALUES
        )
        self._symbolic_reads: frozenset[Any] = frozenset()
        # Tensors of outside state (a KV cache on a module) whose sizes changed: symbolic sizes
        # in the programs compiled from then on (``_state_resized``); False for good where such
        # a program could not be compiled.
        self._symbolic_state: frozenset[Any] = frozenset()
        self._symbolic_state_allowed = self._numbers_become_symbolic
        self._warned = False
        self._warned_torch_func = False
        self._warned_modes: set[type] = set()  # torch function/dispatch mode classes warned about
        # cache="same input": (ids of the last call's arguments, the entry that served it).
        self._same_input = options.cache is CACHE_OPTIONS.SAME_INPUT
        self._last_call: tuple[tuple[Any, ...], CacheEntry, Any] | None = None
        # torch.compile of fn with thunder's backend, one per split facts (``_split_facts``)
        self._split_programs: dict[tuple[bool, ...], Any] = {}
        self._split_facts_held = False  # whether they include the tensors modules hold
        # Set by thunder's torch.compile backend for its graphs: a RunsEagerly or RunsSplit
        # reaches it (it runs the nodes torch must run by torch, thunder's program around them).
        self.split_by_caller = False
        self._warned_split = False
        # Thunder's own segments around a native call (THUNDER_OWN_SEGMENTS=0 switches them
        # off), and the keys they refused (torch.compile runs those calls).
        self._segments_enabled = os.environ.get("THUNDER_OWN_SEGMENTS", "1") != "0"
        self._own_segments: Any = None
        self._segments_refused: set[Any] = set()
        self._native_reason = _native_reason(fn)  # every call runs natively
        self._warned_native = False
        with contextlib.suppress(AttributeError, TypeError):  # objects without a name
            # Its name and docstring, not its __dict__: an attribute of the wrapped object named
            # like one of this object's (``fn``, ``stats``, ``options``) would replace it.
            functools.update_wrapper(self, fn, updated=())

    @thunder_interp.opaque  # run natively by an enclosing jit: it makes no program state
    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        """As the wrapped function's: ``@thunder.jit`` on a method binds ``self`` (a
        ``BoundThunderFunction``); read through the class, it is this object itself."""
        get = getattr(type(self.fn), "__get__", None)
        if instance is None or get is None:
            return self  # (a wrapped class or callable object does not bind either)
        bound = get(self.fn, instance, owner)
        if (
            getattr(bound, "__func__", None) is self.fn
            and getattr(bound, "__self__", None) is instance
        ):
            return BoundThunderFunction(self, bound)  # a function: a method of instance
        if bound is self.fn:
            return self
        # Another binding (a classmethod's, to the class): jitted as it binds, for this access
        return ThunderFunction(bound, self.options, self.executors, self.transforms)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # torch.func (vmap, nested transforms) and forward-mode AD levels run eagerly
        if transforms_active() is not None or forward_ad._current_level >= 0:
            reason = eager_reason(self.options.disable_torch_autograd)
            if reason is not None:
                return self._run_eagerly_under_transforms(args, kwargs, reason)
        if function_modes_active() and (mode := user_function_mode()) is not None:
            return self._run_eagerly_under_mode(args, kwargs, mode)
        if dispatch_modes_active() and (mode := user_dispatch_mode()) is not None:
            return self._run_eagerly_under_mode(args, kwargs, mode, dispatch=True)
        last = self._last_call
        if last is not None and _same_objects(last[0], args, kwargs):
            # cache="same input": the previous call's program, when the call has its key (the
            # same objects may hold other items: a list that grew) and its guards hold
            entry = last[1]
            try:
                if not _has_key(self, args, kwargs, last[2]):
                    raise GuardFailure("another key")
                inputs = entry.prologue(args, kwargs)
            except GuardFailure:
                pass
            else:
                try:
                    out = entry.computation(*inputs)
                except DataChanged:
                    pass
                except Exception as e:
                    if not _reruns_after_error(entry, e, args, kwargs):
                        raise
                    return self._rerun_after_error(args, kwargs, e, entry.catches_op_errors)
                else:
                    self.stats.cache_hits += 1
                    return out if entry.epilogue is None else entry.epilogue(args, kwargs, out)
        signature, buckets, split_keys = self._lookup
        try:
            key = signature(args, kwargs)
            bucket = buckets.get(key)
        except Exception:  # another structure (or nothing compiled yet): the slow path
            key = bucket = None
        if bucket is None and split_keys:
            segments = self._own_segments
            if segments is not None and key in segments.keys:  # thunder's own segments run it
                return self._run_segments(args, kwargs, key)
            facts = _split_facts(self.fn, args, kwargs, self._split_facts_held)
            if (key, facts) in split_keys:  # it runs split: no program to try
                return self._run_split(args, kwargs, None, facts, key)
        if bucket is not None:
            for i, entry in enumerate(bucket):
                try:
                    inputs = entry.prologue(args, kwargs)
                except GuardFailure:
                    continue
                try:
                    out = entry.computation(*inputs)
                except DataChanged:
                    # It decided on values read from tensor data, and this call's decision
                    # differs: raised before any effect (binding/data_reads.py).
                    continue
                except Exception as e:
                    if not _reruns_after_error(entry, e, args, kwargs):
                        raise
                    return self._rerun_after_error(args, kwargs, e, entry.catches_op_errors)
                if i:  # the entry that served this call is tried first next time
                    self._try_first(buckets, key, bucket, i)
                self.stats.cache_hits += 1
                if self._same_input:
                    self._last_call = (_fingerprint(args, kwargs), entry, key)
                if entry.epilogue is None:
                    return out
                return entry.epilogue(args, kwargs, out)
        return self._slow_call(args, kwargs)

    # -- the slow path ------------------------------------------------------------------------

    def _slow_call(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self._native_reason is not None:
            return self._run_natively(args, kwargs, self._native_reason)
        # A compile on another thread may have nn.Module's methods replaced by torch.fx's
        # tracer for a moment: the programs' guards would fail and tracing would record them.
        wait_while_fx_tracer_patches()
        eager_argument = _eager_argument(args, kwargs, self._param_names)
        if eager_argument is not None:
            return self._run_eagerly_after_raise(args, kwargs, RunsEagerly(eager_argument))
        caching = self.options.cache is not CACHE_OPTIONS.NO_CACHING
        while True:  # again where another thread added to the cache meanwhile
            version = self._cache_version
            structure, key = self._find_structure(args, kwargs) if caching else (None, None)
            sizes_failed = False  # a program failed these inputs on tensor sizes only
            if structure is not None and key is not None:
                for entry in structure.buckets.get(key, ()):
                    try:
                        inputs = entry.prologue(args, kwargs)
                    except GuardFailure as e:
                        resized_state = self._state_resized(entry, e)
                        sizes_failed |= e.sizes_only and not resized_state
                        self._numbers_changed(entry, e)
                        self._last_failure = describe_guard_failure(e)
                        logs.log_guard_failure(self._name, self._last_failure)
                        continue
                    try:
                        out = entry.computation(*inputs)
                    except DataChanged as e:
                        self._last_failure = str(e)
                        logs.log_guard_failure(self._name, f"a decision on data differs: {e}")
                        continue
                    except Exception as e:
                        if not _reruns_after_error(entry, e, args, kwargs):
                            raise
                        return self._rerun_after_error(args, kwargs, e, entry.catches_op_errors)
                    self.stats.cache_hits += 1
                    if self._same_input:
                        self._last_call = (_fingerprint(args, kwargs), entry, key)
                    return out if entry.epilogue is None else entry.epilogue(args, kwargs, out)
            if structure is not None and key is not None and structure.split:
                facts = _split_facts(self.fn, args, kwargs, self._split_facts_held)
                if (key, facts) in structure.split:
                    return self._run_split(args, kwargs, None, facts, key)
            if structure is not None and key is not None and key in structure.eager:
                left, wait = structure.eager[key]
                if left:  # tracing these inputs failed where eager ran: no retrace on every call
                    self._refuse_eager_if_distributed(
                        self.stats.last_eager_reason or "failed to trace"
                    )
                    structure.eager[key] = (left - 1, wait)
                    self.stats.eager_fallbacks += 1
                    logs.log_eager(
                        self._name,
                        f"tracing these inputs failed before ({self.stats.last_eager_reason}); "
                        f"it is tried again after {left - 1} more such calls",
                    )
                    return self.fn(*args, **kwargs)
            # (without caching, every call compiles its own program: nothing to share)
            turn = self._take_compile_turn(version) if caching else _CompileTurn(self, False)
            if turn is not None:
                break
        try:
            return self._compile_miss(args, kwargs, structure, key, sizes_failed, turn)
        finally:
            turn.end()

    def _compile_miss(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        structure: _Structure | None,
        key: tuple[Any, ...] | None,
        sizes_failed: bool,
        turn: _CompileTurn,
    ) -> Any:
        """A call no program serves, in its turn to compile (``_take_compile_turn``)."""
        self.stats.cache_misses += 1
        caching = self.options.cache is not CACHE_OPTIONS.NO_CACHING
        limit = self.options.recompile_limit
        if caching and limit is not None and self._entry_count() >= limit:
            turn.end()
            self._refuse_eager_if_distributed(f"reached the recompile limit ({limit})")
            self._warn_recompile_limit(structure, key)
            self.stats.eager_fallbacks += 1
            self.stats.last_eager_reason = f"reached the recompile limit ({limit})"
            logs.log_eager(self._name, f"the recompile limit ({limit}) is reached")
            return self.fn(*args, **kwargs)
        if caching and structure is None:
            with self._cache_lock:
                # (a thread compiling without the turn may have made it meanwhile)
                structure, key = self._find_structure(args, kwargs)
                if structure is None:
                    signature = make_signature(args, kwargs, self._symbolic, self._param_names)
                    structure = _Structure(signature, self._symbolic)
                    self._structures = [*self._structures, structure]
                    key = signature.fn(args, kwargs)
                    if len(self._structures) == 1:
                        self._lookup = (signature.fn, structure.buckets, structure.split)
        reason = self._change_reason(structure, key)
        if self._goes_symbolic(structure, key, sizes_failed):
            structure, key = self._compile_symbolic_from_now(args, kwargs, reason)
        with progress.compiling(self._name):  # (one compilation, whichever try makes it)
            while True:  # each refusal turns symbolic values off for good: at most three tries
                try:
                    return self._compile_and_run(args, kwargs, structure, key, reason, turn)
                except _SymbolicRefused:  # compiled with constant values from now on
                    structure, key = self._find_structure(args, kwargs)

    def _take_compile_turn(self, version: int | None) -> _CompileTurn | None:
        """This thread's turn to compile a miss; None where the cache changed since the lookup
        that missed (made at ``version``): look again. While another thread compiles, the miss
        waits for it, then looks again (it compiled these inputs, most likely). A thread that
        holds a turn (a call made while compiling or in an eager run: recursion, another jitted
        function) never waits, nor one whose compiling thread is stalled (``_Stall``): it
        compiles without the turn."""
        me = (os.getpid(), threading.get_ident())
        stall: _Stall | None = None
        with self._cache_lock:
            while True:
                if version is not None and version != self._cache_version:
                    return None
                owner = self._compiling
                # (a turn taken before a fork, in the parent: its thread is not in this process)
                if owner is None or owner[0] != me[0]:
                    self._compiling = me
                    _turns_held.count = getattr(_turns_held, "count", 0) + 1
                    return _CompileTurn(self, True)
                if owner == me or getattr(_turns_held, "count", 0) > 0:
                    return _CompileTurn(self, False)
                if stall is None:
                    stall = _Stall(owner[1])  # (while it holds the turn: a live thread)
                elif stall.stalled():
                    return _CompileTurn(self, False)
                self._compile_done.wait(_STALL_WINDOW / 4)

    def _end_compile_turn(self) -> None:
        with self._cache_lock:
            self._compiling = None
            self._cache_version += 1
            _turns_held.count -= 1
            self._compile_done.notify_all()

    def _try_first(
        self,
        buckets: dict[tuple[Any, ...], list[CacheEntry]],
        key: tuple[Any, ...],
        bucket: list[CacheEntry],
        i: int,
    ) -> None:
        """The entry at ``i`` first in its bucket from now on: it served the last call. Skipped
        where another thread changes the cache meanwhile: it is an order only."""
        if not self._cache_lock.acquire(blocking=False):
            return
        try:
            if buckets.get(key) is bucket:
                reordered = bucket.copy()
                reordered.insert(0, reordered.pop(i))
                buckets[key] = reordered
        finally:
            self._cache_lock.release()

    def _entry_count(self) -> int:
        return sum(len(b) for s in self._structures for b in list(s.buckets.values()))

    def _numbers_changed(self, entry: CacheEntry, failure: GuardFailure) -> None:
        """Where ``entry``'s guard on a number read from outside state failed (a counter
        ``self.step += 1``, a global, a dict's item), that number is read as an input of the
        programs compiled from now on, as a symbolic value, so one program serves its every
        value (a branch on it still specializes, by a constraint)."""
        if not self._numbers_become_symbolic or not entry.number_reads:
            return
        paths = entry.number_reads.get(failed_guard(failure))
        if paths and not self._symbolic_reads.issuperset(paths):
            with self._cache_lock:  # (calls on other threads may add theirs)
                self._symbolic_reads = self._symbolic_reads.union(paths)
            logs.log_cache_mode(
                self._name,
                f"a number read from outside state changed ({describe_guard_failure(failure)}): "
                "it is a symbolic value from now on",
            )

    def _state_resized(self, entry: CacheEntry, failure: GuardFailure) -> bool:
        """Whether the tensors whose sizes alone failed ``entry``'s check are all tensors of
        outside state (a KV cache grown on a module, a global buffer; not parameters): their
        sizes are symbolic in the programs compiled from now on, so one program serves every
        size (sizes 0 and 1 stay constants), where each size compiled a program of its own."""
        if not failure.resized or not self._symbolic_state_allowed:
            return False
        paths = [entry.state_tensors.get(name) for name in failure.resized]
        if any(p is None for p in paths):
            return False  # also a tensor of the arguments: the arguments' rule (_goes_symbolic)
        if not self._symbolic_state.issuperset(paths):
            with self._cache_lock:
                self._symbolic_state = self._symbolic_state.union(paths)
            logs.log_cache_mode(
                self._name,
                f"a tensor of outside state changed sizes ({describe_guard_failure(failure)}): "
                "its sizes are symbolic from now on",
            )
        return True

    def _goes_symbolic(
        self, structure: _Structure | None, key: tuple[Any, ...] | None, sizes_failed: bool
    ) -> bool:
        """Whether the default cache compiles this call with symbolic values: sizes changed
        (of tensors in the arguments or read through them, a KV cache's; ``sizes_failed``: a
        program of the key failed on sizes alone) where two programs serve other sizes
        already. One program then serves every size (``cache="symbolic values"``), where each
        new length (a decoding step, a batch of another length) compiled a program of its own
        up to the recompile limit."""
        # Per structure: a call of another structure (an eval call without targets, interleaved
        # with training calls) goes symbolic on its own sizes.
        if not self._auto_symbolic_allowed or structure is None or structure.symbolic:
            return False
        if key is None or self._entry_count() < 2:
            return False
        if key in structure.buckets:
            return sizes_failed
        return self._symbolic_would_help(structure, key)

    def _compile_symbolic_from_now(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], reason: str | None
    ) -> tuple[_Structure, tuple[Any, ...]]:
        """A structure keyed with symbolic values, first in the lookup from now on."""
        self._auto_symbolic = True
        signature = make_signature(args, kwargs, True, self._param_names)
        structure = _Structure(signature, symbolic=True)
        with self._cache_lock:
            self._structures = [structure, *self._structures]
            self._lookup = (signature.fn, structure.buckets, structure.split)
        logs.log_cache_mode(
            self._name,
            f"sizes changed again ({reason}): compiling with cache='symbolic values' from now on",
        )
        return structure, signature.fn(args, kwargs)

    def _symbolic_refused(self, dropped: _Structure) -> None:
        """A program with symbolic values could not be compiled: back to constant values for
        good (the structure keyed symbolically is dropped, its entries with it)."""
        self._auto_symbolic, self._auto_symbolic_allowed = False, False
        with self._cache_lock:
            self._structures = [s for s in self._structures if s is not dropped]
            if self._structures:
                first = self._structures[0]
                self._lookup = (first.signature.fn, first.buckets, first.split)
            else:
                self._lookup = (_no_signature, {}, set())
        raise _SymbolicRefused

    def _compile_and_run(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        structure: _Structure | None,
        key: tuple[Any, ...] | None,
        reason: str | None,
        turn: _CompileTurn,
        retraces: int = 8,
    ) -> Any:
        """Compiles a program for these inputs (stored in ``structure``'s bucket ``key`` when
        caching) and runs it; the call runs eagerly where tracing cannot hold it. ``turn`` ends
        once the program is stored, before it runs (or once the failure is recorded)."""
        start = time.perf_counter()
        raised: BaseException | None = None
        options = self.options
        # Compiled with symbolic values where the default cache keyed this structure so.
        auto_symbolic = self._auto_symbolic_allowed and structure is not None and structure.symbolic
        if auto_symbolic:
            options = dataclasses.replace(options, cache=CACHE_OPTIONS.SYMBOLIC_VALUES)
        if self._symbolic_reads:
            options = dataclasses.replace(options, symbolic_reads=self._symbolic_reads)
        symbolic_state = self._symbolic_state
        if symbolic_state:
            options = dataclasses.replace(options, symbolic_state_tensors=symbolic_state)
        modules = len(sys.modules)
        try:
            entry = compile_entry(
                self.fn,
                args,
                kwargs,
                options,
                self.executors,
                self.transforms,
                self._param_names,
                key,
            )
        except Exception as e:
            if symbolic_state:  # (refused first: the newer, narrower rule)
                logs.log_cache_mode(
                    self._name,
                    f"symbolic sizes of outside state refused ({type(e).__name__}: {e}): "
                    "constant sizes again",
                )
                self._symbolic_state, self._symbolic_state_allowed = frozenset(), False
                raise _SymbolicRefused from None
            if auto_symbolic and structure is not None:  # compiled with constant values instead
                logs.log_cache_mode(
                    self._name,
                    f"symbolic values refused ({type(e).__name__}: {e}): constant values again",
                )
                self._symbolic_refused(structure)
            if isinstance(e, ProgramRaised):
                raised = e.error
            elif isinstance(e, (JitError, TracingError)):
                if not self._runs_split_when_refused(e):
                    raise
                raised = _refused(e)  # torch runs what thunder cannot compile: split, visibly
            else:  # after tracing: thunder's own failure, never the program's
                self._refuse_eager_if_distributed(
                    f"failed inside thunder with {type(e).__name__}: {e}", e
                )
                self._warn_internal_error(e, _next_eager_wait(structure, key))
                raised = _INTERNAL
        if raised is not None:  # outside the handler: eager's traceback is not chained to it
            try:
                if isinstance(raised, RunsEagerly) and self.split_by_caller:
                    # A graph of thunder's torch.compile backend: the backend splits the graph
                    # around what torch must run, or runs it as FX does, and says so.
                    raise raised
                if isinstance(raised, RunsSplit) and self._can_split():
                    if raised.torch_op in _AUTOGRAD_FACT_OPS:  # (earlier split keys then miss once)
                        self._split_facts_held = True
                    facts = _split_facts(self.fn, args, kwargs, self._split_facts_held)
                    if structure is not None and key is not None:
                        structure.split.add((key, facts))
                    turn.end()
                    return self._run_split(args, kwargs, raised, facts, key)
                progress.running("running eagerly")
                wait = _next_eager_wait(structure, key)
                if raised is _INTERNAL:
                    self.stats.eager_fallbacks += 1
                    logs.log_eager(self._name, self.stats.last_eager_reason or "an internal error")
                    result = self.fn(*args, **kwargs)
                else:
                    result = self._run_eagerly_after_raise(args, kwargs, raised, wait)
                if structure is not None and key is not None and wait is not None:
                    # Eager ran: the same inputs run eagerly for a while before tracing is tried
                    # again, each wait twice the last (state the trace read may change); the
                    # warning says so.
                    structure.eager[key] = (wait, wait)
                return result
            finally:
                # The error's traceback holds the frames it went through, and theirs this one
                # (and the call's inputs): a cycle a gc pass would free, where eager frees
                # them once the caller drops them.
                del raised
        progress.compiled()
        imported_while_compiling = len(sys.modules) != modules
        stats = self.stats
        stats.compilations += 1
        stats.last_compile_seconds = time.perf_counter() - start
        stats.last_timings = entry.timings
        stats.last_traces = entry.computation_traces
        stats.last_prologue_traces = entry.prologue_traces
        stats.last_backward_traces = entry.backward_traces
        stats.last_epilogue_source = entry.epilogue_source
        stats.last_recompile_reason = reason
        stats.last_program = entry
        stats.history.append(
            CompileRecord(
                stats.compilations,
                stats.last_compile_seconds,
                entry.timings,
                reason,
                logs.user_call_site(),
            )
        )
        logs.log_compile(
            self._name, stats.compilations, stats.last_compile_seconds, entry.timings, reason
        )
        logs.log_program(
            self._name,
            {
                "prologue trace": entry.prologue_traces[-1] if entry.prologue_traces else None,
                "execution trace": entry.computation_traces[-1],
                **({"backward trace": entry.backward_traces[-1]} if entry.backward_traces else {}),
            },
            lambda: stats.last_data_reads,
        )
        if structure is not None and key is not None:
            with self._cache_lock:
                buckets = structure.buckets
                buckets[key] = [entry, *buckets.get(key, ())]  # it serves the state now
                self._cache_version += 1
            _drop_when_key_dies(self, structure, key)
        if self._same_input:
            self._last_call = (_fingerprint(args, kwargs), entry, key)
        turn.end()  # (waiting calls find the entry; this one runs it)
        try:
            return entry.run(args, kwargs)
        except DataChanged as e:
            # Tracing read other values than the program computes (ops it reads through run
            # differently inside the program, an autocast region entered in it, nondeterministic
            # kernels). The check stopped the computation before any effect: eager runs the call.
            differs = RunsEagerly(
                f"read other values from tensor data while tracing than its compiled program "
                f"computes ({e})"
            )
            return self._run_eagerly_after_raise(args, kwargs, differs)
        except (PatchedByFxTracer, RewrappedByTorch) as e:
            # Traced or checked while a compile on another thread had nn.Module's methods
            # replaced by torch.fx's tracer, or while torch wrapped one of its functions (once
            # per process): dropped before it ran, traced again after.
            if not retraces:
                raise JitError(f"thunder.jit: {describe_guard_failure(e)}") from e
            wait_while_fx_tracer_patches()
            return self._compile_again(args, kwargs, structure, key, reason, entry, turn, retraces)
        except GuardFailure as e:
            if entry.takes_locks:
                # Another thread changed what tracing read between tracing and this run (the
                # program's locks are free in between): the call goes through the cache again.
                return self._slow_call(args, kwargs)
            if imported_while_compiling and retraces:
                # A module imported lazily while compiling changed state tracing had read (a
                # first fake run imports torch._dynamo, which adds DTensor to torch's
                # ``_foreach_supported_types``): compiled again, the imports done.
                return self._compile_again(
                    args, kwargs, structure, key, reason, entry, turn, retraces
                )
            raise JitError(
                "thunder.jit: the program compiled for these inputs rejects them "
                f"({describe_guard_failure(e)}). The function changed state it also reads in a "
                "way thunder does not track; please report this"
            ) from e
        except Exception as e:
            if not _reruns_after_error(entry, e, args, kwargs):
                raise
            return self._rerun_after_error(args, kwargs, e, entry.catches_op_errors)

    def _compile_again(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        structure: _Structure | None,
        key: tuple[Any, ...] | None,
        reason: str | None,
        entry: CacheEntry,
        turn: _CompileTurn,
        retraces: int,
    ) -> Any:
        """The call compiled and run again after ``entry``, just compiled for it, rejected it
        before running for a reason outside the program: ``entry`` is dropped."""
        if structure is not None and key is not None:
            with self._cache_lock:
                bucket = structure.buckets.get(key, [])
                structure.buckets[key] = [other for other in bucket if other is not entry]
        if self._last_call is not None and self._last_call[1] is entry:
            self._last_call = None
        turn = self._take_compile_turn(None) or turn
        try:
            return self._compile_and_run(args, kwargs, structure, key, reason, turn, retraces - 1)
        finally:
            turn.end()

    def _rerun_after_error(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        error: Exception,
        may_be_caught: bool = False,
    ) -> Any:
        """The call run eagerly after its computation raised before writing any outside
        state (``_reruns_after_error``): eager makes the writes before its error and raises it
        (with its own traceback); where eager does not raise, its result, with an
        ``InternalErrorWarning``: the compiled program raised where eager does not, unless the
        program may catch an op's error (``may_be_caught``: its handler ran in eager)."""
        self._refuse_eager_if_distributed(
            f"its compiled program raised {type(error).__name__}: {error}", error
        )
        logs.log_eager(
            self._name,
            f"the compiled program raised {type(error).__name__} ({error}); the call runs "
            "eagerly, for eager's writes before the error",
        )
        for where, state in getattr(error, GENERATOR_STATES, ()):
            # the program drew before it raised: eager draws again
            if isinstance(where, str):  # a device's default generator
                set_rng_state(state, where)
            else:
                where.set_state(state)
        try:
            result = self.fn(*args, **kwargs)
        except BaseException as eager_error:
            eager_error.__suppress_context__ = True  # the compiled program's: not the user's
            raise
        broken = _broken_program(error)
        self.stats.last_eager_reason = (
            f"its compiled program raised {type(error).__name__}: {error}"
        )
        if (may_be_caught or isinstance(error, WarningWouldRaise)) and not broken:
            self.stats.eager_fallbacks += 1
            return result
        self.stats.eager_fallbacks += 1
        what = (
            "failed: a bug in thunder's generated code" if broken else "raised where eager does not"
        )
        warnings.warn(
            f"thunder.jit: the compiled program of {self._name} {what} "
            f"({type(error).__name__}: {error}); the call ran eagerly (please report this)",
            InternalErrorWarning,
            stacklevel=logs.user_stacklevel(),
        )
        return result

    def _runs_split_when_refused(self, error: Exception) -> bool:
        """Whether thunder's refusal of this program (``JitError``, a ``TracingError`` of the
        IR) runs the call split instead: always, but where the user asked for the error
        (``RequestedError``: ``sharp_edges="error"``, ``reshape_inplace="error"``), where the
        program breaks a torch higher-order operator's contract (eager raises too), in a graph of thunder's backend (the backend runs it by
        torch) and for a distributed-prepared module (its collectives need thunder's program)."""
        return (
            not isinstance(error, (RequestedError, HigherOrderOperatorError))
            and not self.split_by_caller
            and self._can_split()
        )

    def _can_split(self) -> bool:
        """Whether a call may run split by torch.compile (not a distributed-prepared module,
        whose collectives thunder's transforms insert into its whole program)."""
        state = getattr(self.fn, "__dict__", {})
        return "_thunder_ddp" not in state and "_thunder_fsdp" not in state

    def _distributed_kind(self) -> str | None:
        """``"ddp"`` or ``"fsdp"`` for a module ``thunder.distributed`` prepared, else None."""
        state = getattr(self.fn, "__dict__", {})
        if "_thunder_fsdp" in state:
            return "fsdp"
        return "ddp" if "_thunder_ddp" in state else None

    def _refuse_eager_if_distributed(self, why: str, error: BaseException | None = None) -> None:
        """A module ``thunder.distributed`` prepared cannot run eagerly where its collectives
        matter: an eager ``fsdp`` call computes on each rank's parameter shards, an eager
        ``ddp`` call with gradients leaves them unaveraged. Such a call raises, naming why it
        would have run eagerly (eager ``ddp`` calls without gradient, or inside ``no_sync``,
        are what a compiled one would compute, and run)."""
        kind = self._distributed_kind()
        if kind is None:
            return
        if kind == "ddp":
            import torch

            state = self.fn.__dict__["_thunder_ddp"]
            training = torch.is_grad_enabled() and any(
                p.requires_grad for p in self.fn.parameters()
            )
            if not training or not getattr(state, "sync", True):
                return
            would = "its gradients would not be averaged over the ranks"
        else:
            would = "it would compute with each rank's shards of the parameters"
        raise JitError(
            f"thunder.jit: {self._name} is prepared by thunder.distributed.{kind}(), whose calls "
            f"need thunder's compiled program for their collectives; this call cannot be "
            f"compiled ({why}) and cannot run eagerly ({would}). Change that code so thunder "
            "can trace it, or call it outside thunder.jit"
        ) from error

    def _run_split(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        reason: RunsSplit | None,
        facts: tuple[bool, ...],
        key: Any = None,
    ) -> Any:
        """A call that cannot be one program (``RunsSplit``: it reaches a function run natively,
        or reads data where tracing cannot). At a function run natively, thunder's own segments
        run it (``own_segments.py``); where they refuse, and for other splits,
        ``torch.compile`` with thunder's backend (``thunder.dynamo``) runs it. Dynamo splits the program there, runs the function (or the
        Python deciding on data) natively, guards what follows against the state it left (its
        effects are seen), and hands the graphs around it to thunder, compiled with this jit's
        options. Dynamo's own failures run their frame eagerly (``suppress_errors``), never
        twice. Each set of the tensors' split facts has its own program: dynamo guards neither
        ``is_leaf`` nor ``_base`` (``_split_facts``)."""
        import torch

        # Dynamo's first torch.compile switches torch.distributions' argument validation off for
        # the whole process (its TorchPatcher): the split call and eager code after it keep the
        # caller's (eager raises for an invalid parameter; dynamo runs that check natively).
        distribution = torch.distributions.Distribution
        validating = distribution._validate_args
        if reason is not None:
            where = user_location(reason)
            at = f" at {where}" if where and where not in str(reason) else ""
            self.stats.last_split_reason = f"{reason}{at}"
        self.stats.split_calls += 1
        if self._segments_enabled and self._own_segments is None:
            from thunder.own_segments import OwnSegments

            self._own_segments = OwnSegments(self)
        refused: str | None = None
        if reason is not None and not isinstance(reason, RunsNatively):
            self._segments_refused.add(key)  # (a split the first segment would make too)
        if self._own_segments is not None and key not in self._segments_refused:
            how = "as thunder's own segments"
            progress.running(f"running split {how}", split=how)
            try:
                result = self._own_segments(args, kwargs)
            except SegmentRefused as e:  # nothing ran: torch.compile runs the call
                self._segments_refused.add(key)
                refused = f"thunder's own segments refused it: {e.reason}"
            else:
                if key is not None:  # later calls of the key go to the segments directly
                    self._own_segments.keys.add(key)
                if reason is not None:
                    self._said_split(segments=True)
                return result
        if reason is not None:
            self._said_split(refused)
        elif refused is not None:
            logs.log_split(self._name, refused)
        progress.running("running split by torch.compile", split="by torch.compile")
        split_program = self._split_programs.get(facts)
        if split_program is None:
            split_program = self._split_program(facts)
        distribution._validate_args = validating
        try:
            return split_program(*args, **kwargs)
        finally:
            distribution._validate_args = validating

    def _said_split(self, refused: str | None = None, segments: bool = False) -> None:
        """The split's log message and its warning (once), with ``last_split_reason``."""
        said = self.stats.last_split_reason or ""
        logs.log_split(self._name, f"{said} ({refused})" if refused else said, segments)
        if not self._warned_split:
            self._warned_split = True
            how = (
                "as thunder's own segments: that part runs natively and thunder compiles the "
                "programs before and after it (shown once; thunder.compile_stats(fn)"
                ".split_graphs lists them)"
                if segments
                else "split by torch.compile with thunder's backend: that part runs natively "
                "and thunder compiles the graphs around it (shown once; "
                "thunder.compile_stats(fn).split_graphs lists them)"
            )
            warnings.warn(
                f"thunder.jit: {self._name} {said}; such calls run {how}",
                stacklevel=logs.user_stacklevel(),
            )

    def _run_segments(self, args: tuple[Any, ...], kwargs: dict[str, Any], key: Any) -> Any:
        """A call of a key that ran as thunder's own segments before: they run it (their
        programs guard what the call's split facts would); torch.compile where they refuse."""
        self.stats.split_calls += 1
        try:
            return self._own_segments(args, kwargs)
        except SegmentRefused as refused:
            self._own_segments.keys.discard(key)
            self._segments_refused.add(key)
            logs.log_split(self._name, f"thunder's own segments refused it: {refused.reason}")
        self.stats.split_calls -= 1  # (counted again by the split)
        facts = _split_facts(self.fn, args, kwargs, self._split_facts_held)
        return self._run_split(args, kwargs, None, facts, key)

    def _split_program(self, facts: tuple[bool, ...]) -> Any:
        """``torch.compile`` of the function with thunder's backend, for calls with ``facts``."""
        import torch

        import_compile_stack("torch._dynamo")  # never alongside the compile thread
        from thunder.dynamo import ThunderCompiler
        from thunder.dynamo.split_program import compile_split

        # A backend of its own: dynamo's cache entries are kept apart per backend.
        compiler = ThunderCompiler.of_jit(self.options, self.executors, self.transforms)
        compiler.subgraphs = self.stats.split_graphs
        # A module's own _call_impl, not the module: torch.compile's OptimizedModule wrapper
        # would fire global module hooks once more.
        target = self.fn._call_impl if isinstance(self.fn, torch.nn.Module) else self.fn
        # (the first one made serves every thread: dynamo compiles it once)
        return self._split_programs.setdefault(facts, compile_split(target, compiler))

    def _warn_internal_error(self, error: Exception, eager_wait: int | None = None) -> None:
        """Compiling the traced program raised inside thunder: the call runs eagerly (its result
        is torch's, never a half-compiled one) and the warning says what to report."""
        name = getattr(self.fn, "__qualname__", None) or type(self.fn).__name__
        frames = traceback.extract_tb(error.__traceback__)
        last = frames[-1] if frames else None
        where = f" at {last.filename}:{last.lineno} ({last.name})" if last else ""
        self.stats.last_eager_reason = f"internal error {type(error).__name__}: {error}{where}"
        try:
            warnings.warn(
                f"thunder.jit: compiling {name} failed inside thunder with "
                f"{type(error).__name__}: {error}{where}; the call runs eagerly"
                f"{_eager_wait_note(eager_wait)} (please report this)",
                InternalErrorWarning,
                stacklevel=logs.user_stacklevel(),
            )
        except InternalErrorWarning as w:  # warnings as errors: keep thunder's traceback
            raise w from error

    def _run_natively(self, args: tuple[Any, ...], kwargs: dict[str, Any], reason: str) -> Any:
        """A function thunder cannot compile at all (``_native_reason``): it runs as Python
        runs it, never traced nor handed to torch.compile; the warning is shown once."""
        self._refuse_eager_if_distributed(reason)
        self.stats.eager_fallbacks += 1
        self.stats.last_eager_reason = reason
        logs.log_eager(self._name, reason)
        if not self._warned_native:
            self._warned_native = True
            warnings.warn(
                f"thunder.jit: {self._name} {reason}; it runs natively (shown once)",
                stacklevel=logs.user_stacklevel(),
            )
        return self.fn(*args, **kwargs)

    def _run_eagerly_under_transforms(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], reason: str
    ) -> Any:
        """A call under torch.func transforms the compiled program cannot serve (see
        ``thunder.torch_func``): the function runs eagerly, so its results are eager's."""
        self._refuse_eager_if_distributed(reason)
        self.stats.eager_fallbacks += 1
        name = getattr(self.fn, "__qualname__", None) or type(self.fn).__name__
        self.stats.last_eager_reason = reason
        logs.log_eager(self._name, reason)
        if not self._warned_torch_func:
            self._warned_torch_func = True
            warnings.warn(
                f"thunder.jit: {name} {reason}, so it runs eagerly there (shown once)",
                stacklevel=logs.user_stacklevel(),
            )
        return self.fn(*args, **kwargs)

    def _run_eagerly_under_mode(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], mode: Any, dispatch: bool = False
    ) -> Any:
        """A call under a user's torch function or dispatch mode (``thunder.torch_modes``): it
        runs eagerly, so the mode sees the torch (or aten) calls eager makes."""
        self.stats.eager_fallbacks += 1
        cls = type(mode)
        name = f"{cls.__module__}.{cls.__qualname__}"
        kind, calls = ("dispatch", "aten") if dispatch else ("function", "torch")
        reason = (
            f"is called under the torch {kind} mode {name}, which would see other {calls} calls "
            "in the compiled program than in eager"
        )
        self._refuse_eager_if_distributed(reason)
        self.stats.last_eager_reason = reason
        logs.log_eager(self._name, reason)
        if cls not in self._warned_modes:
            self._warned_modes.add(cls)
            warnings.warn(
                f"thunder.jit: {self._name} {reason}, so it runs eagerly there (shown once)",
                stacklevel=logs.user_stacklevel(),
            )
        return self.fn(*args, **kwargs)

    def _run_eagerly_after_raise(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        error: BaseException,
        eager_wait: int | None = None,
    ) -> Any:
        """Tracing this call raised. It runs as Python runs it: the writes made before the raise
        happen and the exception is eager's own, with its traceback. Were eager not to raise,
        tracing went wrong where eager does not: the result is eager's, and a warning says so.
        A ``BaseException`` that is no ``Exception`` (``KeyboardInterrupt``) eager does not
        raise again came from outside the program (an interrupt while tracing): once the call
        ran, it is raised, never lost."""
        if isinstance(error, Exception):
            where = user_location(error)
            self._refuse_eager_if_distributed(f"{error}{f' at {where}' if where else ''}", error)
        elif self._distributed_kind() is not None:
            raise error
        self.stats.eager_fallbacks += 1
        result = self.fn(*args, **kwargs)
        if not isinstance(error, Exception):
            raise error
        name = getattr(self.fn, "__qualname__", None) or type(self.fn).__name__
        where = user_location(error)
        at = f" at {where}" if where else ""
        self.stats.last_eager_reason = f"{error}{at}"
        logs.log_eager(name, self.stats.last_eager_reason)
        if isinstance(error, RunsEagerly):  # a known limit, not a failure to report
            warnings.warn(
                f"thunder.jit: {name} {error}{at}; the call ran eagerly"
                f"{_eager_wait_note(eager_wait)}",
                stacklevel=logs.user_stacklevel(),
            )
            return result
        warnings.warn(
            f"thunder.jit: tracing {name} raised {type(error).__name__}: {error}{at}; the call "
            f"ran eagerly instead{_eager_wait_note(eager_wait)} (please report this). Libraries take their torch.compile "
            "paths while thunder traces (torch.compiler.is_compiling() is True), so the line "
            "may be on such a path",
            stacklevel=logs.user_stacklevel(),
        )
        return result

    @property
    def _buckets(self) -> dict[tuple[Any, ...], list[CacheEntry]]:
        """The buckets the cached path looks in."""
        return self._lookup[1]

    @property
    def _name(self) -> str:
        return getattr(self.fn, "__qualname__", None) or type(self.fn).__name__

    @property
    def _symbolic(self) -> bool:
        return self.options.cache is CACHE_OPTIONS.SYMBOLIC_VALUES or self._auto_symbolic

    def _find_structure(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[_Structure | None, tuple[Any, ...] | None]:
        for structure in self._structures:
            try:
                key = structure.signature.fn(args, kwargs)
                hash(key)
            except Exception:
                continue
            return structure, key
        return None, None

    def _change_reason(
        self, structure: _Structure | None, key: tuple[Any, ...] | None
    ) -> str | None:
        """What differs from the most recent compiled entry (None for the first compilation)."""
        if self._entry_count() == 0:
            return None
        if structure is None or key is None:
            return "the arguments have a new structure (count, keywords, nesting or types)"
        if key in structure.buckets and self._last_failure:
            return f"a guard failed: {self._last_failure}"
        if not structure.buckets:
            return "the arguments have a new structure (count, keywords, nesting or types)"
        changes = structure.signature.describe_change(_nearest_key(structure, key), key)
        return "; ".join(changes) if changes else "a guard failed"

    def _warn_recompile_limit(
        self, structure: _Structure | None, key: tuple[Any, ...] | None
    ) -> None:
        if not self.options.warn_on_recompile or self._warned:
            return
        self._warned = True
        reason = self._change_reason(structure, key) or "new inputs"
        name = getattr(self.fn, "__qualname__", None) or type(self.fn).__name__
        advice = "Raise the limit with thunder.jit(..., recompile_limit=N)"
        if not self._symbolic and self._symbolic_would_help(structure, key):
            advice += (
                ", or pass cache='symbolic values': one program then serves changing sizes "
                "and numbers"
            )
        elif self._symbolic and "guard failed" in reason:
            advice += (
                "; the program branched on the values that changed (a comparison, a size of "
                "1, or a number turned into a constant), which symbolic values cannot cover"
            )
        warnings.warn(
            f"thunder.jit: {name} hit the recompile limit ({self.options.recompile_limit} "
            f"compiled programs); running it eagerly for these inputs. What changed: {reason}. "
            f"{advice}.",
            stacklevel=logs.user_stacklevel(),
        )

    def _symbolic_would_help(
        self, structure: _Structure | None, key: tuple[Any, ...] | None
    ) -> bool:
        if structure is None or key is None or not structure.buckets:
            return False
        # Against each compiled key, not the last only: training calls interleaved with no_grad
        # evaluation calls change sizes per grad mode.
        would_help = structure.signature.symbolic_values_would_help
        return any(would_help(k, key) for k in list(structure.buckets))

    def __getattr__(self, name: str) -> Any:
        """The wrapped function's own attributes (``jf.some_flag`` set by a decorator), as a
        wrapper made by ``functools.wraps`` shows them."""
        if name.startswith("__") or name in _OWN_ATTRIBUTES:
            raise AttributeError(name)
        fn = self.__dict__.get("fn")
        if fn is None or not isinstance(getattr(fn, "__dict__", None), dict):
            raise AttributeError(name)
        try:
            return fn.__dict__[name]
        except KeyError:
            raise AttributeError(
                f"'{type(self).__name__}' object has no attribute '{name}'"
            ) from None

    def _thunder_inner_function(self) -> Any:
        """The jitted callable (how an enclosing jit reads through this one)."""
        return self.fn

    def __repr__(self) -> str:
        return f"<thunder.jit of {self.fn!r}>"

    # -- copies: what was given to jit, never the compiled programs (thunder.jit_copies) --------

    def __copy__(self) -> ThunderFunction:
        """The same function, options, executors and transforms; an empty cache."""
        return ThunderFunction(self.fn, self.options, self.executors, self.transforms)

    def __deepcopy__(self, memo: dict[int, Any]) -> ThunderFunction:
        """A copy of the function (a module: its own parameters) and of the transforms; the
        options and executors (immutable) are shared; an empty cache."""
        jit_copies.check_not_distributed(self.fn)
        fn = copy.deepcopy(self.fn, memo)
        return ThunderFunction(
            fn, self.options, self.executors, jit_copies.copy_transforms(self.transforms, memo)
        )

    def __reduce__(self) -> Any:
        by_name = jit_copies.pickled_by_name(self, self.fn)
        if by_name is not None:  # @thunder.jit on a module-level function: by reference
            return by_name
        jit_copies.check_not_distributed(self.fn)
        jit_copies.check_function_picklable(self.fn)
        for t in self.transforms:
            jit_copies.check_picklable(t, f"transform {t!r}")
        for la in self.options.lookasides:
            jit_copies.check_picklable(la, f"lookaside {la!r}")
        state = (self.fn, self.options, jit_copies.executors_state(self.executors), self.transforms)
        return (_restore, state)


# torch.compile of code that calls a jitted function runs thunder's program as it is, where
# dynamo would trace thunder's compiler and caches frame by frame (a minute for one module, as
# many graph breaks) and compile what thunder compiled already.
hide_from_dynamo(ThunderFunction.__call__, "thunder.jit runs its own compiled program")


class BoundThunderFunction(ThunderFunction):
    """``@thunder.jit`` on a method, read through an instance: calls pass the instance as
    ``self``. As a bound method shares its function's code, it shares the method's cache and
    ``compile_stats`` with every instance (their programs differ in what their prologues check:
    modules of one structure share one program), and its attributes are the method's."""

    def __init__(self, method: ThunderFunction, bound: Any) -> None:
        # ThunderFunction.__init__ is not run: the method holds the cache and the statistics.
        # ``bound``: the wrapped function bound to the instance (inspect.signature reads it).
        self.__func__, self.__self__, self.__wrapped__ = method, bound.__self__, bound
        self.__doc__, self.__module__ = method.__doc__, method.__module__  # (the class has its own)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        return self  # bound already, as a bound method is

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.__func__(self.__self__, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name in ("__func__", "__self__", "__wrapped__"):
            raise AttributeError(name)
        return getattr(self.__func__, name)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, BoundThunderFunction)
            and self.__func__ is other.__func__
            and self.__self__ is other.__self__
        )

    def __hash__(self) -> int:
        return hash((id(self.__func__), id(self.__self__)))

    def __repr__(self) -> str:
        return f"<bound thunder.jit of {self.__func__.fn!r} of {self.__self__!r}>"

    def __copy__(self) -> BoundThunderFunction:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return _bind(self.__func__, copy.deepcopy(self.__self__, memo))

    def __reduce__(self) -> Any:
        return (_bind, (self.__func__, self.__self__))


def _bind(method: ThunderFunction, instance: Any) -> Any:
    """``method`` read through ``instance`` (a copied or unpickled bound method)."""
    return method.__get__(instance, type(instance))


def _restore(
    fn: Any, options: JitOptions, executors: Sequence[Any], transforms: Sequence[Transform]
) -> ThunderFunction:
    """A pickled ``ThunderFunction``, to compile again on its first call."""
    return ThunderFunction(fn, options, jit_copies.executors_from_state(executors), transforms)


def _eager_argument(
    args: tuple[Any, ...], kwargs: dict[str, Any], param_names: tuple[str, ...]
) -> str | None:
    """Why the call runs eagerly for its arguments, or None: the first argument that is, or
    holds in tuples, lists and dicts, an iterator (a generator, ``map``, ``iter(list)``,
    ``model.parameters()``: tracing would consume it before the call runs) or a nested tensor
    (``torch.nested.nested_tensor``: thunder has no proxy for one)."""
    import torch

    def find(x: Any, label: str, depth: int) -> str | None:
        if isinstance(x, collections.abc.Iterator):
            return (
                f"takes an iterator ({label}, a {type(x).__name__}), which tracing would consume "
                "before the call runs; pass a list or tuple to compile it"
            )
        if isinstance(x, torch.Tensor) and attributes_without_torch_function(x, ("is_nested",))[0]:
            return f"takes a nested tensor ({label}), which thunder does not compile"
        if depth < 8 and type(x) in (tuple, list):
            return next(
                (f for i, v in enumerate(x) if (f := find(v, f"{label}[{i}]", depth + 1))), None
            )
        if depth < 8 and type(x) is dict:
            return next(
                (f for k, v in x.items() if (f := find(v, f"{label}[{k!r}]", depth + 1))), None
            )
        return None

    for i, a in enumerate(args):
        found = find(a, param_names[i] if i < len(param_names) else f"args[{i}]", 0)
        if found is not None:
            return found
    for k, v in kwargs.items():
        found = find(v, k, 0)
        if found is not None:
            return found
    return None


def _no_signature(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    raise LookupError("nothing compiled yet")
