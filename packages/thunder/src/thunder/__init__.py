"""thunder: a source-to-source compiler for PyTorch programs.

``thunder.jit(fn_or_module)`` runs the program through Thunder's bytecode interpreter, records its
torch operations into a trace (readable, executable Python), hands the trace to executors, and
caches the result behind a prologue of guards::

    import thunder, torch

    jfn = thunder.jit(lambda a, b: a + b)
    jfn(torch.randn(2), torch.randn(2))
    print(thunder.last_traces(jfn)[-1])          # the execution trace
    print(thunder.last_prologue_traces(jfn)[-1]) # what is checked before reusing it
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import pkgutil
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import torch

from thunder.__about__ import __version__
from thunder.errors import (
    HigherOrderOperatorError,
    ImpureCallError,
    JitError,
    SharpEdgeError,
    UnsupportedOperationError,
    UnsupportedSideEffectError,
)
from thunder.examine import ExaminationReport, examine
from thunder.jit_function import CompileStats, ThunderFunction
from thunder.logs import set_logs
from thunder.lookasides import Lookaside
from thunder.module import ThunderModule
from thunder.module_calls import lightning_module_advice
from thunder.options import CACHE_OPTIONS, SHARP_EDGES_OPTIONS, JitOptions
from thunder_executors.executor import Executor, get_executor
from thunder_ir import Trace, Transform
from thunder_ir.prims.prologue import GuardFailure

# Eager torch for everything: high-level ops (linear, sdpa, layer_norm) whole, the rest as prims.
DEFAULT_EXECUTORS: tuple[str, ...] = ("torch_ops", "torch")

__all__ = [
    "CACHE_OPTIONS",
    "DEFAULT_EXECUTORS",
    "SHARP_EDGES_OPTIONS",
    "CompileStats",
    "ExaminationReport",
    "GuardFailure",
    "HigherOrderOperatorError",
    "ImpureCallError",
    "JitError",
    "Lookaside",
    "Recipe",
    "SharpEdgeError",
    "ThunderFunction",
    "ThunderModule",
    "Transform",
    "UnsupportedOperationError",
    "UnsupportedSideEffectError",
    "__version__",
    "cache_hits",
    "cache_misses",
    "compile",
    "compile_stats",
    "examine",
    "jit",
    "last_backward_traces",
    "last_prologue_traces",
    "last_traces",
    "recipes",
    "run_natively",
    "set_logs",
    "write_report",
    "write_reproducer",
]


def jit(
    fn: Callable[..., Any] | torch.nn.Module,
    /,
    *,
    executors: Sequence[Any] | None = None,
    transforms: Sequence[Transform] | None = None,
    lookasides: Sequence[Lookaside] | None = None,
    cache: CACHE_OPTIONS | str | None = None,
    sharp_edges: SHARP_EDGES_OPTIONS | str | None = None,
    disable_torch_autograd: bool = False,
    **compile_options: Any,
) -> Any:
    """Compile ``fn`` (a function or an ``nn.Module``); the result is called like ``fn``.

    Args:
        executors: executor names or objects, in priority order (default
            ``DEFAULT_EXECUTORS``: ``("torch_ops", "torch")``, high-level ops kept whole and the
            rest as prims, all run by eager torch; the torch executor is always appended as the
            last resort). ``thunder_executors.recommended_executors()`` adds fusion.
        transforms: ``thunder.Transform`` objects applied to every compiled program.
        lookasides: ``thunder.Lookaside(fn, replace_with)`` values: while this program is
            traced, calls of ``fn`` call ``replace_with`` instead (interpreted; an IR symbol is
            recorded as that op). They belong to this program only.
        cache: a ``thunder.CACHE_OPTIONS`` or its string (``"constant values"`` (default),
            ``"symbolic values"``, ``"no caching"``, ``"same input"``).
        sharp_edges: ``"allow"`` (default), ``"warn"`` or ``"error"`` when the function reads
            globals or closure variables (always guarded either way).
        disable_torch_autograd: by default, when grad mode is on and an input (a parameter,
            an argument) requires grad, the program is compiled through thunder's autodiff: a
            forward and a backward trace (rematerialized, run by the executors) wired to
            ``torch.autograd``, so ``loss.backward()`` runs the backward trace
            (``thunder.last_backward_traces``). With ``True`` the program is compiled without
            autodiff; the execution trace calls torch on the real tensors and torch's own
            autograd records those calls.
        compile_options: ``recompile_limit`` (default 8 programs per function, then new inputs
            run eagerly with a warning that says what changed; None: no limit),
            ``warn_on_recompile`` (default True: that warning), ``dce`` (default True: drop
            unused computations), ``reshape_inplace`` (default ``"warn"``: an in-place write
            into what ``reshape``/``reshape_as``/``flatten``/``ravel`` returned warns, since
            eager returns a view or a copy depending on strides, and does what eager does for
            these inputs; ``"error"``: an error). Any other name is an error listing the known ones
            (``thunder.options.KNOWN_COMPILE_OPTIONS``).

    Returns:
        a :class:`ThunderModule` for a module, else a :class:`ThunderFunction`.
    """
    options, resolved, transforms = jit_arguments(
        executors,
        transforms,
        lookasides,
        cache,
        sharp_edges,
        disable_torch_autograd,
        compile_options,
    )
    if isinstance(fn, torch.nn.Module):
        if "_thunder_ddp" in fn.__dict__ or "_thunder_fsdp" in fn.__dict__:  # thunder.distributed
            from thunder.distributed import transforms_for

            transforms = (*transforms, *transforms_for(fn, transforms))
        advice = lightning_module_advice(fn)
        if advice is not None:
            warnings.warn(advice, stacklevel=2)
        for t in transforms:
            t.transform_module(fn)
        return ThunderModule(fn, ThunderFunction(fn, options, resolved, transforms))
    if not callable(fn):
        raise TypeError(f"thunder.jit expects a function or an nn.Module, got {type(fn).__name__}")
    return ThunderFunction(fn, options, resolved, transforms)


def jit_arguments(
    executors: Sequence[Any] | None = None,
    transforms: Sequence[Transform] | None = None,
    lookasides: Sequence[Lookaside] | None = None,
    cache: CACHE_OPTIONS | str | None = None,
    sharp_edges: SHARP_EDGES_OPTIONS | str | None = None,
    disable_torch_autograd: bool = False,
    compile_options: dict[str, Any] | None = None,
) -> tuple[JitOptions, tuple[Any, ...], tuple[Transform, ...]]:
    """``thunder.jit``'s keyword arguments checked and resolved: (options, executors,
    transforms). Wrong values raise here, before anything is compiled."""
    options = JitOptions.from_kwargs(
        cache, sharp_edges, disable_torch_autograd, compile_options or {}
    )
    user_lookasides = _sequence_option("lookasides", lookasides, "thunder.Lookaside values")
    for la in user_lookasides:
        if not isinstance(la, Lookaside):
            raise TypeError(f"thunder.jit: lookasides must be thunder.Lookaside values, got {la!r}")
    if user_lookasides:
        options = dataclasses.replace(options, lookasides=user_lookasides)
    transforms = _sequence_option("transforms", transforms, "thunder.Transform objects")
    for t in transforms:
        if not isinstance(t, Transform):
            raise TypeError(f"thunder.jit: transforms must be thunder.Transform objects, got {t!r}")
    if isinstance(executors, (str, Executor)):
        executors = (executors,)  # one executor, not a sequence of one-letter names
    what = "executor names or Executor objects (or one of them)"
    executors = (
        _sequence_option("executors", executors, what)
        if executors is not None
        else DEFAULT_EXECUTORS
    )
    from thunder_executors.assignment import resolve_executors

    for e in executors:
        if isinstance(e, str):
            try:
                get_executor(e)
            except KeyError as unknown:  # (RuntimeError: known, but unavailable here)
                raise ValueError(f"thunder.jit: {unknown.args[0]}") from None
        elif not isinstance(e, Executor):
            raise TypeError(
                f"thunder.jit: executors must be executor names (str) or Executor objects, "
                f"got {e!r} ({type(e).__name__})"
            )
    resolved = resolve_executors(executors)  # an unavailable executor is an error now, not later
    return options, tuple(resolved), transforms


def _sequence_option(name: str, value: Any, what: str) -> tuple[Any, ...]:
    """The option ``name``, a sequence (ordered: a set, a dict or a string is a mistake)."""
    if value is None:
        return ()
    if not isinstance(value, Iterable) or isinstance(value, (str, bytes, Mapping, AbstractSet)):
        raise TypeError(
            f"thunder.jit: the option {name} must be a list or tuple of {what}, got "
            f"{value!r} ({type(value).__name__})"
        )
    return tuple(value)


def run_natively(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: ``fn`` runs natively (as Python and torch run it, never traced) when a jitted
    program calls it; thunder compiles the code around the call. A call that reaches it runs
    through ``torch.compile`` with thunder's backend (``thunder.dynamo``), which splits the
    program there, runs ``fn`` natively, and guards what follows against the state ``fn`` left,
    so its effects on outside state are seen by the compiled parts. The same as
    ``torch.compiler.disable(fn)``, which thunder treats alike (so does ``torch.compile``)."""
    if not callable(fn):
        raise TypeError(f"thunder.run_natively expects a function, got {type(fn).__name__}")
    native: Callable[..., Any] = torch.compiler.disable(fn)  # type: ignore[no-untyped-call]
    return native


def _function_of(j: Any) -> ThunderFunction:
    if isinstance(j, ThunderFunction):
        return j
    if isinstance(j, ThunderModule):
        function: ThunderFunction = j._thunder_function
        return function
    raise TypeError(f"expected the result of thunder.jit, got {type(j).__name__}")


def compile_stats(j: Any) -> CompileStats:
    """Counters and traces of a jitted function or module."""
    return _function_of(j).stats


def last_traces(j: Any) -> list[Trace]:
    """The computation traces of the last compilation: as recorded, after each pass, and last the
    execution trace (what runs)."""
    return _function_of(j).stats.last_traces


def last_prologue_traces(j: Any) -> list[Trace]:
    """The prologue traces of the last compilation (the guards of its cache entry)."""
    return _function_of(j).stats.last_prologue_traces


def last_backward_traces(j: Any) -> list[Trace]:
    """The backward traces of the last compilation: as split off by autodiff (after
    rematerialization), then the execution trace that ``loss.backward()`` runs. Empty when the
    last compiled program was not differentiated (no input required grad, grad mode was off, or
    ``disable_torch_autograd=True``)."""
    return _function_of(j).stats.last_backward_traces


def cache_hits(j: Any) -> int:
    """Calls that reused a compiled program."""
    return _function_of(j).stats.cache_hits


def cache_misses(j: Any) -> int:
    """Calls that found no compiled program (they compiled one, or ran eagerly past the limit)."""
    return _function_of(j).stats.cache_misses


def write_report(j: Any, path: Any, **options: Any) -> Any:
    """Writes one self-contained HTML page about ``j`` (a jitted function or module that ran):
    its recompiles and why, the time of each stage, the traces after each pass with their
    diffs, the fusion regions, the guards, where it ran eagerly, live memory, the execution
    trace as a graph. Returns the path. Options: see ``thunder.report.write_report``."""
    from thunder.report import write_report as write

    return write(j, path, **options)


def write_reproducer(j: Any, folder: Any, **options: Any) -> Any:
    """Writes a folder that reproduces ``j``'s last compiled program on its own (its traces,
    standalone execution traces, and ``run.py``, which runs and times them against eager
    torch), to attach to a bug report. Returns the path. Options: see
    ``thunder.reproducer.write_reproducer``."""
    from thunder.reproducer import write_reproducer as write

    return write(j, folder, **options)


_ = JitOptions


def __getattr__(name: str) -> Any:
    # Every submodule is an attribute of the package (``thunder.distributed.ddp(model)`` after a
    # bare ``import thunder``), imported on first use: ``import thunder`` stays as fast as it is,
    # and what a submodule needs (its optional dependencies) is imported only when it is used.
    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *(m.name for m in pkgutil.iter_modules(__path__))})


# The high-level entry point (imported last: recipes build on jit).
from thunder import recipes  # noqa: E402
from thunder.recipes import compile  # noqa: E402
from thunder.recipes.base import BaseRecipe as Recipe  # noqa: E402
