"""What tracing one call produces: :class:`TracedProgram`, the contract between the binder and
everything after it, and :func:`trace_program`, the stage that makes it.

The binder's state is the bookkeeping of a run in progress; once the program returns, what the
later stages need is copied out into one frozen object. The prologue (inputs and guards), the
epilogue (writes and the return value's template) and ``compile_entry``'s passes (the trace, the
call's tensors, autocast) read that object and nothing of the binder.
"""

from __future__ import annotations

import linecache
import types
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import torch

from thunder.access import Access
from thunder.binding.binder import Binder
from thunder.binding.data_reads import TensorDataReader
from thunder.binding.decisions import check_data_decisions
from thunder.binding.fallback import is_ir_refusal
from thunder.binding.locations import is_library_file
from thunder.binding.regions import GradEnabledInside, LockBusy
from thunder.binding.reshape_writes import install as install_reshape_write_check
from thunder.binding.rng import drawing_from, generators_as_inputs
from thunder.binding.segments import (
    DONE,
    Continuation,
    SegmentHead,
    run_segment,
    suspend_at_native_call,
)
from thunder.binding.state import (
    ExternalRef,
    Guard,
    ProgramLock,
    Rebuilt,
    Write,
    holds_a_container_twice,
    iter_proxies,
    template_leaves,
)
from thunder.errors import (
    JitError,
    RunsEagerly,
    RunsNatively,
    RunsSplit,
    UnsupportedOperationError,
    UnsupportedSideEffectError,
)
from thunder.lookasides import SymbolicSize, native_special
from thunder.options import JitOptions
from thunder_interp import InterpretedFunction, interpret
from thunder_ir import (
    BoundSymbol,
    DataDependentError,
    Proxy,
    TensorProxy,
    Trace,
    TracingError,
    prims,
    tracectx,
)
from thunder_ir.ops.fallback import FALLBACK_SYMBOLS, TorchRunsItEagerlyError, TorchRunsItError

__all__ = ["ProgramRaised", "TracedProgram", "trace_program", "user_location"]

AutocastState = Mapping[str, torch.dtype]  # device type -> dtype; empty: autocast off


@dataclass(frozen=True)
class TracedProgram:
    """One traced call of the program: what it computes, reads, relies on and writes.

    ``trace`` is the computation as recorded: its ``args`` are the inputs, in ``inputs``' order,
    and it ends in its return (the return value, or the ``epilogue_outputs`` when there is an
    epilogue). Every mapping is read-only, and no field refers back to the binder."""

    fn: Any
    param_names: tuple[str, ...]  # the positional parameters' names, for naming and messages
    trace: Trace
    template: Any  # the return value as a template (proxies, ExternalRef, Rebuilt, constants)
    # The computation outputs the epilogue reads, in order; None: the computation's return value
    # is the call's, and there is no epilogue.
    epilogue_outputs: tuple[Proxy, ...] | None
    inputs: tuple[tuple[Proxy, Access], ...]  # each input and the path it is read from
    input_tensors: Mapping[str, torch.Tensor]  # this call's tensor of each tensor input, by name
    symbolic_shapes: tuple[Access, ...]  # tensors whose sizes are inputs (the prologue unpacks)
    guards: Mapping[Access, Guard]
    # Paths through objects the program itself put into outside state: they do not exist when
    # a call starts, so nothing on them is checked.
    inserted: frozenset[Access]
    objects: Mapping[Access, Any]  # the outside object found at each path
    bound_at: Mapping[Access, int]  # how many writes came before the program took each path
    writes: tuple[Write, ...]
    globals_dicts: Mapping[str, dict[str, Any]]  # module name -> its globals
    builtin_reads: Mapping[str, dict[str, Any]]  # module name -> builtins read from it
    lookups: tuple[tuple[Any, str, Any], ...]  # (holder, name, what getattr gave)
    # The autocast state the call was made under (the trace computes in its dtypes, and in
    # those of the blocks the program entered: autocast was applied as it was recorded).
    autocast_at_start: AutocastState
    # For each write, how many top-level bound symbols were recorded before it, and those bound
    # symbols in the order recorded (before decisions were hoisted; kept where the program
    # writes): which writes came before an op that raises at run time
    # (``prologue.WritesBeforeError``).
    write_positions: tuple[int, ...] = ()
    recorded: tuple[BoundSymbol, ...] = ()
    # Whether the program switches grad mode (an effect on the process an error keeps).
    switches_grad_mode: bool = False
    # The locks the program takes, in the order it first took them: the compiled call holds
    # them from its prologue through its epilogue (``thunder.program_locks``).
    locks: tuple[ProgramLock, ...] = ()

    @property
    def needs_epilogue(self) -> bool:
        return self.epilogue_outputs is not None

    def is_inserted(self, access: Access) -> bool:
        """Whether ``access`` goes through an object the program put into outside state."""
        node: Access | None = access
        while node is not None:
            if node in self.inserted:
                return True
            node = node.parent
        return False


class ProgramRaised(Exception):
    """Tracing the program raised ``error`` (not a thunder error): the program's own exception
    (a ``BaseException`` such as ``KeyboardInterrupt`` too), or an op refusing these inputs.
    Nothing of the traced call is visible (its writes are undone); the caller decides how the
    call runs instead."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def trace_program(
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: JitOptions,
    param_names: tuple[str, ...],
    grad_at_start: bool = True,
) -> TracedProgram:
    """Interpret ``fn(*args, **kwargs)`` with proxies and return what it computed, read and
    wrote. Outside state written while tracing is restored before this returns. Raises
    ``ProgramRaised`` for the program's own errors, ``JitError`` (with the user's file:line)
    for what thunder refuses, and ``GradEnabledInside`` (see ``binding.regions``)."""
    for _ in range(_LOCK_TRIES):
        try:
            return _trace_program(fn, args, kwargs, options, param_names, grad_at_start)
        except LockBusy as busy:  # (everything given back): once it is free, again
            busy.wait()
    raise UnsupportedSideEffectError(
        "thunder.jit: other threads kept taking the locks the function takes one after another "
        f"while it was traced ({_LOCK_TRIES} tries)"
    )


# How often tracing starts again where a lock it takes is busy (``regions.LockBusy``).
_LOCK_TRIES = 100


def _trace_program(
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: JitOptions,
    param_names: tuple[str, ...],
    grad_at_start: bool,
) -> TracedProgram:
    trace = Trace("computation")
    # (a first segment reads outside state through the jitted function, as the whole call does)
    binder = Binder(fn.fn if isinstance(fn, SegmentHead) else fn, options, trace, param_names)
    try:
        return _trace_with(binder, fn, args, kwargs, options, grad_at_start)
    finally:
        # Its tables refer to its own methods (the lookasides): a cycle that would keep this
        # call's inputs and what it read alive until a gc pass (eager frees them at once).
        binder.__dict__.clear()


def _trace_with(
    binder: Binder,
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: JitOptions,
    grad_at_start: bool,
) -> TracedProgram:
    trace = binder.trace
    if not grad_at_start:
        binder.start_without_grad()
    install_reshape_write_check(trace, options.reshape_inplace)
    trace.read_data = TensorDataReader(trace, binder.inputs)
    binder.effects.writes = _PositionedWrites(trace.bound_symbols)
    with drawing_from(binder.facts.generators), tracectx(trace):
        pargs, pkwargs = binder.bind_arguments(args, kwargs)
        if binder.autocast_at_start():
            binder.record_under_autocast()
        handled: list[BaseException] = []
        lookasides = binder.lookasides()
        callbacks = replace(binder.callbacks(), exception_handled=handled.append)
        segment = fn if isinstance(fn, (SegmentHead, Continuation)) else None
        interpreted: InterpretedFunction
        if segment is not None:  # one segment of a call split at a native call
            lookasides[torch._C._dynamo.eval_frame.set_eval_frame] = suspend_at_native_call
            interpreted = interpret(
                fn.fn if isinstance(fn, SegmentHead) else fn.shape.frames[0].function,
                lookasides=lookasides,
                callbacks=callbacks,
                native_special=native_special,
                suspendable=True,
            )
        else:
            interpreted = interpret(
                fn, lookasides=lookasides, callbacks=callbacks, native_special=native_special
            )
        try:
            if segment is None:
                result = interpreted(*pargs, **pkwargs)
            else:
                made = binder.paths.made_cells
                result = run_segment(
                    segment,
                    interpreted,
                    callbacks.make_cell,
                    lambda cell: made.get(id(cell)) is cell,
                    pargs,
                    pkwargs,
                )
                if result[0] != DONE and binder.regions.grad_mode_switched:
                    # (the native function would run under the caller's grad mode)
                    raise RunsNatively("switches grad mode before calling a function run natively")
            recorded = list(trace.bound_symbols)
            _check_caught_op_errors(trace, handled)
            binder.check_context_vars()
            template = binder.output_template(result)
            binder.check_stored_cells()
            trace.args = tuple(p for p, _ in binder.inputs.in_order)
            outputs = _epilogue_outputs(binder.effects.writes, template)
            prims.python_return(template if outputs is None else outputs)
            _returned_leaf(trace, binder)
            check_data_decisions(trace, binder.inputs)
            recorded = generators_as_inputs(binder, recorded, template)
        except Exception as e:
            reported = _as_reported(e)
            if reported is e:
                raise
            try:
                raise reported from (e if isinstance(reported, ProgramRaised) else None)
            finally:
                del reported  # (its traceback holds this frame)
        except (GradEnabledInside, LockBusy):
            raise  # thunder's own: traced again (compile_entry, trace_program)
        except BaseException as e:
            # KeyboardInterrupt, SystemExit, a class of the user's: raised by the program as any
            # exception (its writes before the raise are undone here; eager makes them and
            # raises it again), or an interrupt that came while tracing (the caller raises it).
            raise ProgramRaised(e) from e
        finally:
            try:
                binder.undo_effects()
            finally:  # (after: another thread taking them sees the state as it was)
                binder.release_held_locks()
            trace.read_data = None  # it holds this call's tensors
            trace.raised_by_ops.clear()  # their tracebacks hold this call's arguments
            trace.in_handler = None
    return _result(binder, template, outputs, recorded)


class _PositionedWrites(list):  # type: ignore[type-arg]
    """The binder's writes, each with how many top-level bound symbols were recorded before it
    (``positions``)."""

    def __init__(self, recording: list[BoundSymbol]) -> None:
        super().__init__()
        self.recording = recording
        self.positions: list[int] = []

    def append(self, write: Any) -> None:
        self.positions.append(len(self.recording))
        super().append(write)


def _check_caught_op_errors(trace: Trace, handled: list[BaseException]) -> None:
    """Raises ``RunsEagerly`` where the program caught an error a recorded op raised and went
    on: it decided on thunder's check of the op, which eager's kernel may not make (an argument
    form thunder does not take, a fake run torch cannot make), and its other branch would be a
    silent wrong result. Eager decides (the call runs eagerly)."""
    for exc in handled:
        raised = trace.raised_by_ops.get(id(exc))
        if raised is not None and raised[0] is exc:
            eager = RunsEagerly(
                f"catches the {type(exc).__name__} that {raised[1]} raised while thunder recorded "
                f"it ({exc}); eager's op may not raise there"
            )
            eager.__traceback__ = exc.__traceback__
            raise eager


def _returned_leaf(trace: Trace, binder: Binder) -> None:
    """Raises ``TorchRunsItError`` where a leaf of autograd made inside the program
    (``requires_grad_()`` on a computed tensor, a factory's ``requires_grad=True``) reaches the
    caller while inputs require grad: its ``.grad`` is filled by the caller's backward in eager,
    which the compiled program, one autograd node over its inputs, cannot do. Torch makes the
    leaf (the call runs split). A leaf the caller never sees needs nothing: every gradient the
    caller can read is eager's."""
    if not any(p.requires_grad for _, p in binder.inputs.tensors.values()):
        return  # torch's own factory call, run as is, makes the leaf
    leaves = dict(binder.made_leaves)
    for b in trace.bound_symbols:
        if b.sym in FALLBACK_SYMBOLS and b.kwargs.get("requires_grad"):
            leaves.update((o.name, str(b.args[0])) for o in b.flat_proxy_outs)
    if not leaves:
        return
    # A value computed from such a leaf requires grad in eager (``x.detach().requires_grad_()
    # * 2``): here its flag is False where nothing else it reads requires grad.
    from_leaf = dict(leaves)
    for b in trace.bound_symbols[:-1]:
        read = next((from_leaf[p.name] for p in b.flat_proxy_args if p.name in from_leaf), None)
        if read is not None:
            from_leaf.update((o.name, read) for o in b.flat_proxy_outs if o.name not in from_leaf)
    returned = trace.bound_symbols[-1]
    for p in returned.flat_proxy_args:
        if p.name in leaves:
            raise TorchRunsItError(
                leaves[p.name], "it makes a tensor the caller sees a leaf of autograd"
            )
        if (
            p.name in from_leaf
            and isinstance(p, TensorProxy)
            and not p.requires_grad
            and p.dtype.is_inexact
        ):
            raise TorchRunsItError(
                from_leaf[p.name], "the caller sees a tensor computed from a leaf of autograd"
            )


# In-place methods that change their tensor's shape or strides, after which torch.compile
# answers the old shape (checked with backend="eager"; resize_, resize_as_ and set_ it gets right).
_RESHAPES_IN_PLACE = frozenset(
    {"unsqueeze_", "squeeze_", "t_", "transpose_", "swapdims_", "swapaxes_", "as_strided_"}
)


def _as_reported(e: Exception) -> Exception:
    """How an exception raised while tracing reaches ``compile_entry``'s caller."""
    if isinstance(e, DataDependentError):
        # Not a refusal: torch runs it. Until the program is split there, the call runs eagerly,
        # with a warning that names the line (``ThunderFunction._run_eagerly_after_raise``).
        eager = RunsEagerly(f"reads tensor data ({e})")
        eager.__traceback__ = e.__traceback__
        return ProgramRaised(eager)
    if isinstance(e, TorchRunsItEagerlyError):
        # torch.compile would answer it wrong too (a quantized result: dynamo's fake tensors
        # say float32, so q.is_quantized is False there): the call runs eagerly.
        eager = RunsEagerly(f"uses {e.op} ({e.reason})")
        eager.__traceback__ = e.__traceback__
        return ProgramRaised(eager)
    if isinstance(e, TorchRunsItError) and e.op.rpartition(".")[2] in _RESHAPES_IN_PLACE:
        # torch.compile records these with the tensor's old shape (y.unsqueeze_(0); y.dim()
        # answers 2 for a (1, 3) tensor, also with backend="eager"): the call runs eagerly.
        eager = RunsEagerly(f"uses {e.op}, which changes its tensor's shape in place")
        eager.__traceback__ = e.__traceback__
        return ProgramRaised(eager)
    if isinstance(e, TorchRunsItError):
        # Not a refusal: torch runs it. The call runs split there (``RunsSplit``).
        split = RunsSplit(
            f"uses {e.op}, which a trace cannot hold ({e.reason}) but torch runs", torch_op=e.op
        )
        split.__traceback__ = e.__traceback__
        return ProgramRaised(split)
    if isinstance(e, UnsupportedOperationError):
        location = user_location(e)
        if location is None or e.location is not None:
            return e
        return e.with_location(location).with_traceback(e.__traceback__)
    if isinstance(e, (JitError, TracingError)):
        location = user_location(e)
        if location is not None and location not in str(e):
            e.args = (f"{e.args[0]} (at {location})", *e.args[1:])
        return e
    if isinstance(e, NotImplementedError) and is_ir_refusal(e):
        # The IR's own refusal (a boolean mask, a data-dependent shape): a clear error, not an
        # eager run.
        location = user_location(e)
        return UnsupportedOperationError(_source_at(location), str(e), location)
    return ProgramRaised(e)


def _epilogue_outputs(writes: list[Write], template: Any) -> tuple[Proxy, ...] | None:
    """The values the epilogue reads (every proxy its writes and the return value hold, once),
    or None when the return value is the computation's own."""
    if not writes and not _has_external_refs(template):
        return None
    seen: dict[str, Proxy] = {}
    for w in writes:
        for p in iter_proxies(w.value):
            seen.setdefault(p.name, p)
    for p in iter_proxies(template):
        seen.setdefault(p.name, p)
    return tuple(seen.values())


def _has_external_refs(template: Any) -> bool:
    """Whether the return value needs the epilogue: it refers to outside objects, holds objects
    the program built (rebuilt on every call), a shape with symbolic sizes (rebuilt as a
    ``torch.Size``), or a list, dict or tuple twice (built once, as the program had it)."""
    if holds_a_container_twice(template):
        return True

    def walk(x: Any) -> bool:
        if isinstance(x, SymbolicSize) or (isinstance(x, tuple) and hasattr(type(x), "n_fields")):
            return True  # rebuilt as a torch.Size, or as the torch.return_types it is
        if type(x) in (tuple, list):
            return any(walk(v) for v in x)
        if type(x) is dict:
            return any(walk(v) for v in x.values())
        return False

    return walk(template) or any(
        isinstance(x, (ExternalRef, Rebuilt)) for x in template_leaves(template)
    )


def _result(
    binder: Binder,
    template: Any,
    outputs: tuple[Proxy, ...] | None,
    recorded: list[BoundSymbol],
) -> TracedProgram:
    """The binder's final state, copied out into the result (the binder is dropped after)."""
    readonly = types.MappingProxyType
    writes = binder.effects.writes
    positions = tuple(writes.positions) if isinstance(writes, _PositionedWrites) else ()
    return TracedProgram(
        fn=binder.fn,
        param_names=binder.param_names,
        trace=binder.trace,
        template=template,
        epilogue_outputs=outputs,
        inputs=tuple(binder.inputs.in_order),
        input_tensors=readonly({p.name: t for t, p in binder.inputs.tensors.values()}),
        symbolic_shapes=tuple(binder.inputs.symbolic_shapes),
        guards=readonly(dict(binder.facts.guards)),
        inserted=frozenset(binder.effects.inserted),
        objects=readonly({a: o for o, a in binder.paths.access_of.values()}),
        bound_at=readonly(dict(binder.paths.bound_at)),
        writes=tuple(binder.effects.writes),
        globals_dicts=readonly(dict(binder.paths.globals_dicts)),
        builtin_reads=readonly({m: dict(r) for m, r in binder.facts.builtin_reads.items()}),
        lookups=tuple(binder.facts.lookups.values()),
        autocast_at_start=readonly(binder.autocast_at_start()),
        write_positions=positions,
        recorded=tuple(recorded) if writes else (),
        switches_grad_mode=binder.regions.grad_mode_switched,
        locks=binder.program_locks(),
    )


def user_location(exc: BaseException) -> str | None:
    """The innermost ``file:line`` of ``exc``'s traceback outside torch and thunder."""
    found = None
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not is_library_file(filename):
            found = f"{filename}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def _source_at(location: str | None) -> str:
    if location is None:
        return "an operation"
    filename, _, line = location.rpartition(":")
    text = linecache.getline(filename, int(line)).strip()
    return f"`{text}`" if text else "an operation"
