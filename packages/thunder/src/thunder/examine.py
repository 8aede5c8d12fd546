"""``thunder.examine``: which torch operations a program uses: those an op mirrors, those run by
the torch fallback (``thunder_ir.ops.fallback``), and those thunder cannot run (with why); where
it reads tensor data and decides on it, and whether thunder.jit would run the call eagerly."""

from __future__ import annotations

import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

from thunder.binding.fallback import is_torch_function_query
from thunder.errors import JitError, RequestedError, RunsSplit
from thunder.lookasides import AUTOGRAD_HOOKS, data_shaped_functions, is_torch_callable
from thunder.options import JitOptions
from thunder_interp import Callbacks, interpret
from thunder_ir import OpTag, TensorProxy, Trace, TracingError, prims
from thunder_ir.ops import torch_symbol_map
from thunder_ir.ops.fallback import (
    SIZED_SYMBOLS,
    TorchFallbackError,
    fallback_refusal,
    resolve_fallback,
    split_autocast_name,
    torch_callable_name,
)

__all__ = ["ExaminationReport", "describe_data_reads", "examine"]


@dataclass
class ExaminationReport:
    """The torch callables a run of the program called, by qualified name and count: those an op
    mirrors (``supported``), those no op mirrors that the torch fallback runs (``fallback``: one
    opaque op each, run and differentiated by torch), and those thunder.jit refuses
    (``unsupported``, with the reason in ``reasons``)."""

    supported: Counter[str] = field(default_factory=Counter)
    fallback: Counter[str] = field(default_factory=Counter)
    unsupported: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, str] = field(default_factory=dict)
    # Where the traced program reads tensor data and decides on it (``describe_data_reads``).
    data_reads: list[str] = field(default_factory=list)
    # Why thunder.jit would run this call eagerly (with the user's file:line), or None.
    eager_reason: str | None = None
    # Why the call cannot be one program (a function run natively: torch.compiler.disable,
    # thunder.run_natively; a call torch must make; thunder's refusal), at the user's file:line:
    # the call then runs split by torch.compile.
    split_reason: str | None = None

    def __str__(self) -> str:
        lines = [f"{len(self.supported)} supported torch operation(s) used:"]
        lines += [f"  {name} x{n}" for name, n in sorted(self.supported.items())]
        if self.fallback:
            lines.append(
                f"{len(self.fallback)} torch operation(s) without a thunder op, run by the torch "
                "fallback (run by torch, differentiated by torch.autograd):"
            )
            lines += [f"  {name} x{n}" for name, n in sorted(self.fallback.items())]
        if self.unsupported:
            lines.append(
                f"{len(self.unsupported)} UNSUPPORTED torch operation(s) (thunder cannot compile "
                "them; torch runs the call):"
            )
            lines += [
                f"  {name} x{n}: {self.reasons.get(name, '')}"
                for name, n in sorted(self.unsupported.items())
            ]
        else:
            lines.append("every torch operation it calls is supported")
        if self.data_reads:
            lines.append(
                "reads tensor data (compiled: each decision is checked on every call, one "
                "program per outcome):"
            )
            lines += [f"  {line}" for line in self.data_reads]
        if self.eager_reason:
            lines.append(f"thunder.jit runs this call EAGERLY: {self.eager_reason}")
        if self.split_reason:
            lines.append(
                f"thunder.jit runs this call SPLIT: it {self.split_reason}; torch.compile with "
                "thunder's backend runs the call: that part natively, the graphs around it "
                "compiled by thunder"
            )
        return "\n".join(lines)


def describe_data_reads(trace: Trace) -> list[str]:
    """One line per read of tensor data in ``trace`` (``prims.item``, ``nonzero``, the fallback
    of a data-shaped torch callable...) and per decision checked on it, with the user's
    ``file:line``: where the program depends on values a guard cannot know."""
    lines = []
    for b in trace.bound_symbols:
        at = f"{b.location}: " if b.location else ""
        if b.sym is prims.check_data:
            lines.append(f"{at}decides {b.args[1]}")
        elif OpTag.READS_DATA in b.sym.tags:
            outs = ", ".join(p.name for p in b.flat_proxy_outs) or "a value"
            lines.append(f"{at}{outs} read from tensor data ({b.sym.name})")
    return lines


def _traced(
    fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: JitOptions, report: Any
) -> Trace | None:
    """What tracing the call with the jit's ``options`` finds: its reads of data, or why the
    call would run eagerly. Returns the trace, or None where the call cannot be one program.
    Tracing has no effect outside (its writes are undone; it writes no tensor)."""
    from thunder.binding.program import ProgramRaised, trace_program, user_location
    from thunder.compile_entry import parameter_names

    try:
        program = trace_program(fn, args, kwargs, options, parameter_names(fn))
    except ProgramRaised as e:
        if not isinstance(e.error, Exception):
            raise e.error from None  # an interrupt (KeyboardInterrupt, SystemExit) reaches the user
        where = user_location(e.error)
        reason = f"{e.error}" + (f" at {where}" if where and where not in str(e.error) else "")
        if isinstance(e.error, RunsSplit):
            report.split_reason = reason
        else:
            report.eager_reason = reason
    except RequestedError as e:
        report.eager_reason = f"thunder.jit refuses it: {e}"
    except (JitError, TracingError) as e:  # an unsupported operation is listed too
        report.split_reason = f"cannot be compiled by thunder ({e})"
    else:
        report.data_reads = describe_data_reads(program.trace)
        return program.trace
    return None


def _fallback_calls(trace: Trace) -> Counter[str]:
    """The torch callables ``trace`` runs by the torch fallback, by name and count."""
    found: Counter[str] = Counter()

    def visit(bsyms: Any) -> None:
        for b in bsyms:
            is_fallback = OpTag.TORCH_FALLBACK in b.sym.tags or b.sym in SIZED_SYMBOLS
            if is_fallback and b.args and isinstance(b.args[0], str):
                found[split_autocast_name(b.args[0])[0]] += 1
            else:
                visit(b.subsymbols)

    visit(trace.bound_symbols)
    return found


def _as_traced(report: ExaminationReport, trace: Trace) -> None:
    """Lists the torch fallback's calls as the trace records them: an op may hand a call it
    mirrors to the fallback (an option it does not support: ``avg_pool2d(ceil_mode=True)``)."""
    for name, n in _fallback_calls(trace).items():
        if name not in report.fallback:
            try:
                listed = _name(resolve_fallback(name))
            except TorchFallbackError:
                listed = name
            left = report.supported.pop(listed, 0) - n
            if left > 0:
                report.supported[listed] = left
        report.fallback[name] = n


def _name(fn: Any) -> str:
    owner = getattr(fn, "__objclass__", None) or getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", type(fn).__name__)
    if isinstance(owner, torch.Tensor) or (
        isinstance(owner, type) and issubclass(owner, torch._C.TensorBase)
    ):
        return f"torch.Tensor.{name}"
    return f"{getattr(fn, '__module__', None) or 'torch'}.{name}"


def _user_callable(fn: Any) -> Any:
    """What ``thunder.jit`` wrapped, for a jitted callable: the user's code is examined, not
    the jit's own call machinery."""
    from thunder.jit_function import BoundThunderFunction, ThunderFunction
    from thunder.module import ThunderModule

    if isinstance(fn, BoundThunderFunction):
        return fn.__wrapped__  # the method bound to its instance
    if isinstance(fn, ThunderFunction):
        return fn.fn
    if isinstance(fn, ThunderModule):
        return fn.get_model()
    return fn


def _answered_by_proxy(name: str) -> bool:
    """Whether thunder.jit's tensor proxy answers ``Tensor.name`` itself, with no torch fallback:
    metadata it knows (``dim``, ``is_complex``, ``size``) and ``item``, recorded as a read of
    data (``data_reads`` lists it)."""
    if name.startswith("__"):  # operators and protocols: not listed
        return False
    return name == "item" or any(
        name in vars(cls) for cls in TensorProxy.__mro__ if cls is not object
    )


def examine(fn: Any, *args: Any, show: bool = True, **kwargs: Any) -> ExaminationReport:
    """Run ``fn(*args, **kwargs)`` eagerly in the interpreter and report the torch callables it
    calls: those an IR op mirrors, those the torch fallback runs, and those thunder.jit would
    refuse. Operators (``a + b``) run natively and are not listed (they are all supported). A
    jitted ``fn`` is examined as the function it wraps, and so are jitted functions it calls."""
    from thunder.jit_function import ThunderFunction, _native_reason

    options = getattr(fn, "options", None)
    if not isinstance(options, JitOptions):  # a plain function, or a ThunderModule
        compiled = getattr(fn, "_thunder_function", None)
        options = getattr(compiled, "options", None)
    if not isinstance(options, JitOptions):
        options = JitOptions.from_kwargs(None, None, False, {})
    fn = _user_callable(fn)
    report = ExaminationReport()
    native = _native_reason(fn)
    if native is not None:  # (a coroutine or generator function: nothing of it runs in the call)
        report.eager_reason = f"{native}; it runs natively"
        if show:
            print(report)
        return report
    symbols = {**torch_symbol_map(), **data_shaped_functions()}

    def lookaside_for(torch_fn: Any) -> Any:
        def recorded(*a: Any, **k: Any) -> Any:
            report.supported[_name(torch_fn)] += 1
            return torch_fn(*a, **k)

        return recorded

    lookasides = {f: lookaside_for(f) for f in symbols if callable(f) and not isinstance(f, type)}

    def run_by_torch(torch_fn: Any, name: str) -> Any:
        def recorded(*a: Any, **k: Any) -> Any:
            report.fallback[name] += 1
            return torch_fn(*a, **k)

        return recorded

    for hook in AUTOGRAD_HOOKS:  # Python methods: their bodies are torch's bookkeeping
        method = getattr(torch.Tensor, hook)
        lookasides[method] = run_by_torch(method, f"torch.Tensor.{hook}")

    def opaque_call(f: Any, a: tuple[Any, ...], k: dict[str, Any]) -> Any:
        if is_torch_callable(f) and not is_torch_function_query(f):
            method = None
            owner = getattr(f, "__self__", None)
            if isinstance(owner, torch.Tensor) and isinstance(f, types.BuiltinMethodType):
                method = getattr(torch.Tensor, f.__name__, None)
            if (method is not None and method in symbols) or f in symbols:
                report.supported[_name(f)] += 1
            elif (
                method is not None or getattr(f, "__objclass__", None) is torch._C.TensorBase
            ) and _answered_by_proxy(f.__name__):
                report.supported[_name(f)] += 1  # x.item(), torch.Tensor.dim(x)
            elif any(isinstance(x, torch.Tensor) for x in (owner, *a, *k.values())):
                # A bound method (x.exponential_()) is the Tensor method given its tensor.
                unbound, args = (method, (owner, *a)) if method is not None else (f, a)
                name = torch_callable_name(unbound) or _name(f)
                reason = fallback_refusal(unbound, args, k)
                if reason is None:
                    report.fallback[name] += 1
                else:
                    report.unsupported[name] += 1
                    report.reasons[name] = reason
        return f(*a, **k)

    callbacks = Callbacks(opaque_call=opaque_call)

    def call_jitted(jitted: ThunderFunction, *a: Any, **k: Any) -> Any:
        # As the jit traces it: the function it wraps, interpreted (never its cache).
        return interpret(jitted.fn, lookasides=lookasides, callbacks=callbacks)(*a, **k)

    lookasides[ThunderFunction.__call__] = call_jitted
    trace = _traced(fn, args, kwargs, options, report)
    interpret(fn, lookasides=lookasides, callbacks=callbacks)(*args, **kwargs)
    if trace is not None:
        _as_traced(report, trace)
    if show:
        print(report)
    return report
