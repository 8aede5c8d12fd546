"""Compiling one cache entry: trace the call (``binding.trace_program``), then build the prologue,
the computation (through the transforms and the executors) and the epilogue from what tracing
produced (a ``TracedProgram``), in the named stages of ``_compile_entry``."""

from __future__ import annotations

import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from thunder import progress
from thunder.access import ARG, ATTR, CELL, GLOBAL, KWARG, ROOT
from thunder.binding import ProgramRaised, TracedProgram, trace_program, user_location
from thunder.binding.regions import GradEnabledInside
from thunder.binding.warning_calls import WarningWouldRaise, checking_warning_filters
from thunder.eager_layouts import (
    EagerViewError,
    check_fused_views,
    contiguity_checks,
    stride_checks,
)
from thunder.errors import JitError
from thunder.guard_tree import with_guard_tree
from thunder.options import JitOptions
from thunder.program_locks import holding_locks
from thunder.prologue import (
    WritesBeforeError,
    build_epilogue,
    build_lock_finder,
    build_prologue,
    build_writes_before_error,
    check_late_constraints,
    reporting_misses,
)
from thunder_executors import transform_for_execution
from thunder_executors.channels_last import channels_last_trace
from thunder_executors.torch_random import get_rng_state
from thunder_ir import BoundSymbol, OpTag, Proxy, TensorProxy, Trace, Transform
from thunder_ir.aliasing import alias_info, writes_in_place, written_inputs, written_intermediates
from thunder_ir.codegen import Printer, bound_symbol_lines
from thunder_ir.proxies import GeneratorProxy
from thunder_ir.sizes import SizeFacts, size_facts
from thunder_transforms import dce, recognize_composites, sign_flipped_rotary
from thunder_transforms.autodiff import make_differentiable
from thunder_transforms.functionalize import functionalize

__all__ = [
    "CacheEntry",
    "ProgramRaised",
    "WarningWouldRaise",
    "compile_entry",
    "parameter_names",
    "user_location",
]


@dataclass
class CacheEntry:
    """One compiled program: its guards (the prologue), computation and epilogue."""

    prologue: Callable[..., Any]
    computation: Callable[..., Any]
    epilogue: Callable[..., Any] | None
    prologue_traces: list[Trace]
    computation_traces: list[Trace]
    epilogue_source: str | None
    key: tuple[Any, ...] | None
    timings: dict[str, float] = field(default_factory=dict)
    backward_traces: list[Trace] = field(default_factory=list)
    # The guards on int and float values read from outside state, by what each checks (the
    # header ``prologue.failed_guard`` reports): the paths of the numbers to read as inputs
    # where that guard fails (``ThunderFunction._numbers_changed``).
    number_reads: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    # The tensors of outside state with static sizes the prologue's tensor check covers, by
    # their name there: the paths to give symbolic sizes where their sizes change
    # (``ThunderFunction._state_resized``).
    state_tensors: dict[str, Any] = field(default_factory=dict)
    # Whether the epilogue writes outside state (a Python attribute, a list, a log, a warning),
    # or the program switches grad mode: lost where the computation raises, as eager's writes
    # before the error are not.
    writes_outside: bool = False
    # Those writes, made on the error path where the computation wrote inputs before it raised.
    writes_before_error: WritesBeforeError | None = None
    # Whether the program calls an op that may raise on values inside its ``try``
    # (``Trace.caught_op_outputs``): where the computation raises before any effect, eager's
    # handler decides (the call runs again eagerly).
    catches_op_errors: bool = False
    # Whether the program takes locks (``thunder.program_locks``): its calls hold them.
    takes_locks: bool = False

    def run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Prologue, computation, epilogue (the prologue's GuardFailure propagates)."""
        inputs = self.prologue(args, kwargs)
        out = self.computation(*inputs)
        if self.epilogue is None:
            return out
        return self.epilogue(args, kwargs, out)


def parameter_names(fn: Any) -> tuple[str, ...]:
    """The names of ``fn``'s positional parameters (``forward``'s for a module), for naming."""
    target = fn
    if hasattr(fn, "forward") and not isinstance(fn, types.FunctionType):
        target = fn.forward
    if isinstance(target, types.MethodType):
        code = getattr(target.__func__, "__code__", None)
        return tuple(code.co_varnames[1 : code.co_argcount]) if code else ()
    code = getattr(target, "__code__", None)
    return tuple(code.co_varnames[: code.co_argcount]) if code else ()


def compile_entry(
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: JitOptions,
    executors: Sequence[Any],
    transforms: Sequence[Transform],
    param_names: tuple[str, ...],
    key: tuple[Any, ...] | None,
) -> CacheEntry:
    """Trace ``fn(*args, **kwargs)`` and compile the entry that runs calls like it."""
    with size_facts() as facts:
        try:
            return _compile_entry(
                fn, args, kwargs, options, executors, transforms, param_names, key, facts
            )
        except GradEnabledInside:
            pass
    # Called under no_grad, the program enables grad itself: traced under grad mode, starting
    # in a no-grad region, and run with grad mode on (its results then require grad as eager's).
    import torch

    with size_facts() as facts, torch.enable_grad():
        return _compile_entry(
            fn, args, kwargs, options, executors, transforms, param_names, key, facts, False
        )


def _noting_generator_states(
    computation: Callable[..., Any],
    devices: Sequence[str],
    generators: Sequence[torch.Generator] = (),
    generator_inputs: Sequence[int] = (),
) -> Callable[..., Any]:
    """``computation`` noting on an exception it raises the states of the default generators of
    ``devices``, of the ``generators`` it draws from (read from outside state) and of those
    passed in at the positions ``generator_inputs`` of its inputs as the call found them
    (``GENERATOR_STATES``): the program draws random numbers and may run again eagerly after an
    error (``jit_function._reruns_after_error``), and that eager run
    (``jit_function._rerun_after_error``) draws eager's numbers from them."""

    def run(*args: Any) -> Any:
        states: list[tuple[str | torch.Generator, torch.Tensor]] = [
            (device, get_rng_state(device)) for device in devices
        ]
        states.extend((g, g.get_state()) for g in generators)
        states.extend((args[i], args[i].get_state()) for i in generator_inputs)
        try:
            return computation(*args)
        except Exception as e:
            setattr(e, GENERATOR_STATES, states)
            raise

    run.__wrapped__ = computation  # type: ignore[attr-defined]  # (tools find its runner)
    return run


def _drawn_generators(
    program: TracedProgram,
) -> tuple[list[str], list[torch.Generator], list[int]]:
    """The devices whose default generators the program draws from, the generators read from
    outside state it draws from and the positions of its generator inputs, where an error may
    run the call again eagerly (it writes outside state or an input, or may catch an op's
    error): empty where it draws nothing."""
    trace = program.trace
    if not (
        program.writes
        or program.switches_grad_mode
        or trace.caught_op_outputs
        or _input_writes(trace)
    ):
        return [], [], []
    devices: set[str] = set(trace.caught_after_draws_on)
    generators: dict[int, torch.Generator] = {}

    def visit(bsyms: Sequence[BoundSymbol], random: bool) -> None:
        # (a seed the program sets, eager's run sets again: only draws need their states)
        for b in bsyms:
            drawn = random or b.has_tag(OpTag.RANDOM)
            if drawn:
                devices.update(
                    str(o.device) for o in b.flat_proxy_outs if isinstance(o, TensorProxy)
                )
            for x in b.flat_args:
                if isinstance(x, torch.Generator):
                    generators[id(x)] = x
            visit(b.subsymbols, drawn)

    visit(trace.bound_symbols, False)
    kept = sorted(d for d in devices if torch.device(d).type in ("cpu", "cuda"))
    inputs = [i for i, (p, _) in enumerate(program.inputs) if isinstance(p, GeneratorProxy)]
    return kept, list(generators.values()), inputs


# The attribute of a computation's exception that holds the generators' states at its start.
GENERATOR_STATES = "__thunder_generator_states__"


def _with_grad_enabled(computation: Callable[..., Any]) -> Callable[..., Any]:
    import torch

    def run(*args: Any) -> Any:
        with torch.enable_grad():
            return computation(*args)

    run.__wrapped__ = computation  # type: ignore[attr-defined]
    return run


def _compile_entry(
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: JitOptions,
    executors: Sequence[Any],
    transforms: Sequence[Transform],
    param_names: tuple[str, ...],
    key: tuple[Any, ...] | None,
    facts: SizeFacts,
    grad_at_start: bool = True,
) -> CacheEntry:
    """The stages of compiling one entry, in order; each reads the traced program and the traces
    the stages before it made."""
    clock = _Clock()
    program = trace_program(fn, args, kwargs, options, param_names, grad_at_start)
    clock.lap("interpretation")

    prologue_trace, ctx = build_prologue(program, len(args), program.trace.constraint())
    checked = len(facts.constraints)
    prologue_trace, traces, under_autocast = _prepared_computation(
        program, prologue_trace, options, transforms
    )
    strides_checked = _views_checked(traces[-1], executors, program)
    backward_traces: list[Trace] = []
    contiguous_checked: list[TensorProxy] = []
    computation = _compiled_computation(
        program,
        traces,
        backward_traces,
        options,
        executors,
        transforms,
        under_autocast,
        contiguous_checked,
    )
    clock.lap("transforms")
    devices, generators, generator_inputs = _drawn_generators(program)
    if devices or generators or generator_inputs:
        computation = _noting_generator_states(computation, devices, generators, generator_inputs)
    warning_replays = tuple((w.value[0], w.value[1]) for w in program.writes if w.kind == "warn")
    if warning_replays:  # checked before any effect: eager raises at the call
        computation = checking_warning_filters(computation, warning_replays)
    if not grad_at_start:
        computation = _with_grad_enabled(computation)

    check_late_constraints(prologue_trace, facts.constraints_since(checked), program)
    body = prologue_trace.bound_symbols  # the last one returns
    body[len(body) - 1 : len(body) - 1] = [
        *stride_checks(strides_checked),
        *contiguity_checks(contiguous_checked),
    ]
    python_prologue = reporting_misses(prologue_trace.python_callable(ctx))
    prologue = with_guard_tree(python_prologue, prologue_trace, ctx)
    epilogue_source, epilogue = build_epilogue(program) if program.needs_epilogue else (None, None)
    if program.locks:
        prologue, computation, epilogue = holding_locks(
            prologue,
            computation,
            epilogue,
            program.locks,
            build_lock_finder(program),
            python_prologue,
        )
    clock.lap("codegen")
    return CacheEntry(
        prologue,
        computation,
        epilogue,
        [prologue_trace],
        traces,
        epilogue_source,
        key,
        clock.timings(),
        backward_traces,
        _number_reads(program),
        _state_tensors(program),
        writes_outside=bool(program.writes) or program.switches_grad_mode,
        writes_before_error=build_writes_before_error(program),
        catches_op_errors=bool(program.trace.caught_op_outputs),
        takes_locks=bool(program.locks),
    )


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)  # (bool stays a constant)


# Where the program's own state starts: numbers under these may become symbolic values.
_STATE_ROOTS = (ROOT, GLOBAL, CELL, ARG, KWARG)


def _number_reads(program: TracedProgram) -> dict[str, tuple[Any, ...]]:
    """For each value guard on outside state (not the arguments, which the cache key covers)
    holding int or float numbers (a number, or a dict or list of scalars guarded whole), the
    paths of those numbers, by the guard's description."""
    reads: dict[str, tuple[Any, ...]] = {}
    for access, guard in program.guards.items():
        if guard.kind != "value" or guard.access != access or access.is_argument_leaf():
            continue
        if access.root.kind not in _STATE_ROOTS:  # an answer of torch's state queries, which
            continue  # native calls take as it is (``_get_dispatch_stack_at(n)``)
        value = guard.expected
        if _is_number(value):
            paths: tuple[Any, ...] = (access,)
        elif type(value) is dict:
            paths = tuple(access.item(k) for k, v in value.items() if _is_number(v))
        elif type(value) is list:
            paths = tuple(access.item(i) for i, v in enumerate(value) if _is_number(v))
        else:
            continue
        if paths:
            reads[access.describe(program.param_names)] = paths
    return reads


def _state_tensors(program: TracedProgram) -> dict[str, Any]:
    """The tensors read from outside state (a module's attribute or buffer, a global, a closure
    cell, an attribute of an object that is not an argument) whose sizes are constants of the
    program, by the name the prologue's tensor check gives them; not parameters (the model's
    shapes) nor tensors the caller passes (``cache="symbolic values"`` covers those)."""
    symbolic = set(program.symbolic_shapes)
    tensors: dict[str, Any] = {}
    for access, guard in program.guards.items():
        if guard.kind != "tensor" or guard.access != access or access in symbolic:
            continue
        if isinstance(guard.expected, torch.nn.Parameter) or program.is_inserted(access):
            continue
        if access.root.kind in (ARG, KWARG) and not (
            access.kind == ATTR
            and access.parent is not None
            and isinstance(program.objects.get(access.parent), torch.nn.Module)
        ):
            continue  # passed by the caller: symbolic under the caller's cache option
        tensors[access.describe(program.param_names)] = access
    return tensors


class _Clock:
    """The seconds each stage of a compile took (``CacheEntry.timings``)."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.laps[stage] = now - self.last
        self.last = now
        progress.lap(stage, self.laps[stage])

    def timings(self) -> dict[str, float]:
        return {**self.laps, "total": time.perf_counter() - self.start}


def _prepared_computation(
    program: TracedProgram,
    prologue_trace: Trace,
    options: JitOptions,
    transforms: Sequence[Transform],
) -> tuple[Trace, list[Trace], bool]:
    """The computation before it is differentiated and compiled: autocast applied, the user's
    transforms that run before the prologue is final, then dead code, composite and rotary
    recognition. Returns the prologue (those transforms may change it), the computation's traces
    (the last is current) and whether the program is called under autocast."""
    traced = program.trace
    trace, under_autocast = _apply_autocast(traced, program)
    epilogue_trace = None
    for tr in transforms:
        prologue_trace, trace, epilogue_trace = tr.transform_traces_pre_prologue(
            prologue_trace, trace, epilogue_trace
        )
    traces = [traced] if traced is not trace else []
    traces.append(trace)
    if options.dce:
        traces.append(dce(traces[-1]))
    composed = recognize_composites(traces[-1])
    if composed is not traces[-1]:
        traces.append(composed)
    rotated = sign_flipped_rotary(traces[-1])
    if rotated is not traces[-1]:
        traces.append(dce(rotated))  # the broadcasts of sin that only the old products read
    return prologue_trace, traces, under_autocast


def _views_checked(trace: Trace, executors: Sequence[Any], program: TracedProgram) -> Any:
    """The views whose strides the executors may not reproduce as eager's, checked on this
    call's tensors (``eager_layouts``); what to check on later calls."""
    try:
        return check_fused_views(trace, executors, dict(program.input_tensors))
    except EagerViewError as e:
        raise ProgramRaised(e.error) from e.error


def _compiled_computation(
    program: TracedProgram,
    traces: list[Trace],
    backward_traces: list[Trace],
    options: JitOptions,
    executors: Sequence[Any],
    transforms: Sequence[Transform],
    under_autocast: bool,
    contiguous_checked: list[TensorProxy],
) -> Callable[..., Any]:
    """The computation's callable: through thunder's autodiff when it is differentiated, else
    its execution trace. The traces made on the way are appended to ``traces`` (forward) and
    ``backward_traces``; the inputs whose contiguity the execution trace's layout choice read to
    ``contiguous_checked``."""
    trace = traces[-1]
    if needs_autodiff(trace, options):
        _refuse_writes_to_shared_inputs(trace, program)
        return _differentiable_computation(
            trace,
            executors,
            transforms,
            traces,
            backward_traces,
            under_autocast,
            inputs=[program.input_tensors.get(a.name) for a in trace.args],
        )
    if not torch.is_grad_enabled() and _fuses(executors):
        own = _own_writes_functionalized(trace)
        if own is not trace:
            trace = own
            traces.append(trace)
    grad = torch.is_grad_enabled()
    layouts = (
        None if _fuses(executors) else _LayoutChoice(program.input_tensors, contiguous_checked)
    )
    computation = _execution(
        trace, executors, transforms, traces, under_autocast, recorded=grad, layouts=layouts
    )
    return computation if grad else _below_autograd(computation)


@dataclass
class _LayoutChoice:
    """The call's values for the execution trace's choice of layouts (``channels_last``), and
    the list its prologue checks are added to."""

    values: Any
    checked: list[TensorProxy]


def needs_autodiff(trace: Trace, options: JitOptions) -> bool:
    """Whether the computation goes through thunder's autodiff: grad mode is on, an input requires
    grad and ``disable_torch_autograd`` is off. (Grad mode is part of the cache key.)"""
    import torch

    if options.disable_torch_autograd or not torch.is_grad_enabled():
        return False
    return any(isinstance(a, TensorProxy) and a.requires_grad for a in trace.args)


def _apply_autocast(trace: Trace, program: TracedProgram) -> tuple[Trace, bool]:
    """The computation, and whether the program is called under autocast (its compiled code then
    runs with autocast off: the trace already says which dtype each op computes in, as CPU and
    CUDA autocast were applied while it was recorded, ``binding.regions``). Autocast of other
    devices is refused."""
    import torch

    for device in ("xpu", "mps"):
        try:
            enabled = torch.is_autocast_enabled(device)
        except (RuntimeError, TypeError, ValueError):
            continue
        if enabled:
            raise JitError(
                f"thunder.jit: calling a jitted function under torch.autocast({device!r}) is not "
                "supported (only CPU and CUDA autocast are); call it outside the autocast context"
            )
    return trace, bool(program.autocast_at_start)


def _refuse_writes_to_shared_inputs(trace: Trace, program: TracedProgram) -> None:
    """Autodiff sees each input as its own memory. When the program writes an input in place
    and another input shares its memory (``f(a, a[1:])``), the written values reach the other
    only at run time, unseen by the gradients: refused rather than differentiated wrongly."""
    from thunder.signature import storage_address
    from thunder_ir.aliasing import alias_info

    info = alias_info(trace.bound_symbols)
    by_storage: dict[int, list[str]] = {}
    for name, tensor in program.input_tensors.items():
        by_storage.setdefault(storage_address(tensor), []).append(name)
    for names in by_storage.values():
        if len(names) > 1 and any(info.is_written(n) for n in names):
            raise JitError(
                f"thunder.jit: the program writes in place to inputs that share memory "
                f"({', '.join(sorted(names))}) and is differentiated, which is not supported: "
                "pass distinct tensors (clone one), or call it under torch.no_grad()"
            )


def _without_autocast(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run with CPU and CUDA autocast off (the compiled code of an entry compiled under
    autocast)."""
    import torch

    def run(*args: Any) -> Any:
        with torch.autocast("cpu", enabled=False), torch.autocast("cuda", enabled=False):
            return fn(*args)

    return run


def _below_autograd(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` (a computation compiled with grad mode off, which is part of the cache key) run with
    torch's autograd dispatch keys skipped, as torch's own custom ops run their kernels: with
    grad mode off that layer records nothing, and skipping it saves about a tenth of each small
    op's time. Views stay views (the layer below makes them) and in-place writes still bump
    versions. Not skipped where that layer could do something: grad mode on, a forward-mode AD
    level open (dual tensors carry tangents under no_grad), or a torch.func transform active;
    nor on a torch without the private hooks this relies on."""
    from torch.autograd import forward_ad

    below = getattr(torch._C, "_AutoDispatchBelowAutograd", None)
    functorch = getattr(torch._C, "_functorch", None)
    functorch_active = getattr(functorch, "peek_interpreter_stack", None)
    if below is None or functorch_active is None or not hasattr(forward_ad, "_current_level"):
        return fn
    grad_on = torch.is_grad_enabled

    def run(*args: Any) -> Any:
        if grad_on() or forward_ad._current_level >= 0 or functorch_active() is not None:
            return fn(*args)
        with below():
            return fn(*args)

    run.__wrapped__ = fn  # type: ignore[attr-defined]
    return run


def _execution(
    trace: Trace,
    executors: Sequence[Any],
    transforms: Sequence[Transform],
    record: list[Trace],
    under_autocast: bool = False,
    seen_outputs: Any = None,
    unseen_inputs: Sequence[str] = (),
    recorded: bool = True,
    layouts: _LayoutChoice | None = None,
) -> Callable[..., Any]:
    """The callable of ``trace``'s execution trace; the traces made on the way go to ``record``
    (``seen_outputs``, ``unseen_inputs``: see ``transform_for_execution``). ``recorded``: whether
    torch.autograd may record the program as it runs. ``layouts``: CPU convolutions run on
    channels-last tensors where the call's values say how (``thunder_executors.channels_last``)."""
    extrace: Trace = transform_for_execution(
        trace,
        executors,
        seen_outputs=seen_outputs,
        unseen_inputs=unseen_inputs,
        sums_in_place=not recorded,
    )
    record.append(extrace)
    if layouts is not None:
        chosen = channels_last_trace(extrace, layouts.values)
        if chosen is not None:
            extrace, checked = chosen
            record.append(extrace)
            layouts.checked.extend(checked)
    for tr in transforms:
        extrace = tr.transform_trace_post_optimization(extrace)
        if extrace is not record[-1]:
            record.append(extrace)
    fn = extrace.python_callable()
    # Where it raises at run time: the op that raised, by its line (jit_function).
    fn.__thunder_trace__ = extrace  # type: ignore[attr-defined]
    fn.__thunder_input_writes__ = _input_writes(trace)  # type: ignore[attr-defined]
    return _without_autocast(fn) if under_autocast else fn


def _input_writes(trace: Trace) -> frozenset[str]:
    """The outputs of ``trace``'s writes into its inputs (the executors keep their names)."""
    inputs = [a.name for a in trace.args if isinstance(a, TensorProxy)]
    info = alias_info(trace.bound_symbols, observed=inputs)
    return frozenset(
        p.name
        for b in trace.bound_symbols
        if writes_in_place(b) and any(map(info.is_observed, written_inputs(b)))
        for p in b.flat_proxy_outs
    )


def first_input_write_line(generated: Any) -> int | None:
    """The line of ``generated``, a computation ``_execution`` made, that first writes into
    one of its inputs; None where it writes none, 0 where unknown (not such a computation, or
    the write not found). A computation that raised before that line left the caller's state
    as it found it (``jit_function._reruns_after_error``)."""
    written = getattr(generated, "__thunder_input_writes__", None)
    if written is None:
        return 0
    if not written:
        return None
    for line, b in _lines_of(generated.__thunder_trace__):
        if any(p.name in written for p in b.flat_proxy_outs):
            return line
    return 0


def _lines_of(extrace: Trace) -> Iterator[tuple[int, BoundSymbol]]:
    """Each bound symbol of ``extrace`` with the first line of its code in the callable
    ``python_callable`` makes (as ``Trace.function_lines`` prints it)."""
    line = 1 + bool(extrace.history) + 1 + bool(extrace.docstring) + len(extrace.args)
    printer = Printer()
    for b in extrace.bound_symbols:
        yield line, b
        line += len(bound_symbol_lines(b, 1, 0, printer))


def bound_symbol_at_line(extrace: Trace, lineno: int) -> BoundSymbol | None:
    """The bound symbol of ``extrace`` whose code holds line ``lineno`` of its callable."""
    found = None
    for line, b in _lines_of(extrace):
        if line > lineno:
            break
        found = b
    return found


def _fuses(executors: Sequence[Any]) -> bool:
    """Whether a fusion executor is among ``executors``. Only there is recomputing a forward
    value in the backward free (it joins a fusion region); without one each recomputed op is one
    more kernel and pass over memory, so the backward reads what the forward saved, as eager's
    does (checkpointed regions are recomputed either way)."""
    from thunder_executors import FusionExecutor
    from thunder_executors.assignment import resolve_executors

    return any(isinstance(e, FusionExecutor) for e in resolve_executors(executors))


def _own_writes_functionalized(trace: Trace) -> Trace:
    """``trace`` with its in-place writes into memory only it sees (``y = bn(x); y += r``, an
    inplace ReLU of a computed value) written as new values: a fusion region cannot hold a
    write, so each one split the regions around it. For programs torch.autograd does not record
    (grad mode off): there a write's errors are eager's concern only where autograd sees them.
    The trace itself where functionalization cannot say what eager does (a write through a
    stride-dependent view: ``reshape`` may copy)."""
    own = written_intermediates(trace)
    if not own:
        return trace
    try:
        return functionalize(trace, only=own).trace
    except NotImplementedError:
        return trace


def _differentiable_computation(
    trace: Trace,
    executors: Sequence[Any],
    transforms: Sequence[Transform],
    forward_traces: list[Trace],
    backward_traces: list[Trace],
    under_autocast: bool = False,
    inputs: Sequence[Any] = (),
) -> Callable[..., Any]:
    """The forward/backward split of ``trace`` (with rematerialization), both halves compiled
    through the executors and wired to ``torch.autograd``: ``loss.backward()`` runs the backward
    trace. The forward's traces go to ``forward_traces``, the backward's to ``backward_traces``.
    Transforms see the backward before it is compiled (``Transform.transform_backward``;
    ``inputs``: the values of the trace's inputs)."""
    compiled: list[list[Trace]] = []
    # Values the forward saves for the backward: only the backward reads them, so their memory
    # may be shared or not as fusion likes (the caller sees outputs, inputs and cotangents).
    saved: list[str] = []

    def compile_half(half: Trace) -> Callable[..., Any]:
        record = [half]
        compiled.append(record)
        if len(compiled) % 2 == 0:  # a backward (a program cut in parts compiles a pair each)
            for tr in transforms:
                changed = tr.transform_backward(half, inputs=inputs)
                if changed is not half:
                    half = changed
                    record.append(half)
            return _execution(
                half,
                executors,
                transforms,
                record,
                under_autocast,
                unseen_inputs=saved,
                recorded=False,  # once_differentiable: run without grad mode
            )
        if half.fn_name == trace.fn_name:  # compiled whole (no split), torch.autograd records it
            # (not ``half is trace``: reads under no_grad detached may make it another trace)
            return _execution(half, executors, transforms, record, under_autocast)
        outputs, to_save = half.return_value  # the split's forward
        saved.clear()  # (its backward's; the list was given to the part before, if any)
        saved.extend(p.name for p in to_save if isinstance(p, Proxy))
        seen_inputs = {a.name for a in half.args if isinstance(a, Proxy)}
        saved[:] = [n for n in saved if n not in seen_inputs]  # an input stays the caller's
        return _execution(  # inside torch.autograd.Function.forward: not recorded
            half, executors, transforms, record, under_autocast, outputs, recorded=False
        )

    try:
        fuses = _fuses(executors)
        # Fused, a value the backward reads from memory (a matmul's operand) is saved: recomputing
        # it would cost the step a pass over memory (and GELU's erf twice).
        fn, _fw, _bw = make_differentiable(
            trace, compile=compile_half, rematerialize=fuses, recompute_materialized=not fuses
        )
    except NotImplementedError as e:
        raise JitError(
            f"thunder.jit cannot differentiate this program: {e}. Call it under torch.no_grad(), "
            "or pass disable_torch_autograd=True to let torch's autograd record the torch calls"
        ) from e
    for k, record in enumerate(compiled):
        (backward_traces if k % 2 else forward_traces).extend(record)
    return fn
