"""``ThunderCompiler``: thunder as a ``torch.compile`` backend.

Dynamo reads the program's Python, splits it where it cannot hold it (a ``print``, a
``torch.compiler.disable`` function, a branch on data: "graph breaks", which it runs natively
between the graphs), guards each graph, and hands each graph to the backend as an FX
``GraphModule``. Here each graph is jitted: its generated ``forward`` is plain Python calling
torch, which thunder's interpreter traces into a thunder trace like any program (the ops
without an IR op take ``thunder.jit``'s torch fallback), then autodiff, rematerialization and
fusion run as for ``thunder.jit``. A graph whose program thunder refuses runs eagerly or through
inductor (``fallback=``), and says so.
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import weakref
from collections.abc import Sequence
from typing import Any

import torch

from thunder import logs
from thunder.dynamo import python_comparisons
from thunder.errors import JitError, RunsEagerly, UnsupportedOperationError
from thunder.jit_function import ThunderFunction
from thunder.options import CACHE_OPTIONS, JitOptions
from thunder_ir import Transform
from thunder_ir.errors import TracingError

__all__ = ["FALLBACKS", "Subgraph", "ThunderCompiler"]

# How a graph thunder refuses runs: its FX program as torch runs it, or inductor's compilation.
FALLBACKS = ("eager", "inductor")

_log = logging.getLogger("thunder.dynamo")


@dataclasses.dataclass(eq=False)
class Subgraph:
    """One graph dynamo handed to the backend, and what runs it."""

    graph_module: torch.fx.GraphModule
    function: ThunderFunction  # thunder's program (``thunder.compile_stats(s.function)``)
    dynamic: bool  # its inputs have symbolic sizes (``dynamic=True``): cache="symbolic values"
    # Who runs it: "thunder", the fallback with thunder's refusal ("eager: ..."), or thunder
    # in parts around the nodes it refused ("thunder in N parts, eager: ...").
    runs: str = "thunder"
    fallback: str = "eager"  # what runs it if thunder refuses it (one of FALLBACKS)
    fallback_reason: str | None = None
    # The graphs thunder runs when this one was split around the nodes it refused.
    parts: list[Subgraph] = dataclasses.field(default_factory=list)
    _fallback: Any = None
    # Why thunder refuses the graph before tracing it (nodes only torch runs), or None.
    refused_before_tracing: Exception | None = None

    def __call__(self, *args: Any) -> Any:
        if self._fallback is not None:
            return self._fallback(*args)
        if self.refused_before_tracing is not None:
            return self._fall_back(self.refused_before_tracing, args)(*args)
        try:
            return self.function(*args)
        except (UnsupportedOperationError, JitError, TracingError, RunsEagerly) as e:
            # A refusal (or a call torch must run) is raised while tracing, before anything of
            # the graph ran (the IR's own: an input of a layout it does not trace, the result
            # of a call torch ran split off, such as a sparse or mkldnn tensor).
            return self._fall_back(e, args)(*args)

    def _fall_back(self, error: Exception, args: tuple[Any, ...]) -> Any:
        kind = self.fallback
        self.fallback_reason = f"{type(error).__name__}: {error}"
        torch_op = getattr(error, "torch_op", None)
        must_run = frozenset({torch_op}) if torch_op else frozenset()
        split = split_at_refused(self.graph_module, must_run) if kind == "eager" else None
        if split is not None:
            split_gm, refused, part_names = split
            for name in part_names:
                f = self.function
                part = compile_graph(
                    getattr(split_gm, name), f.options, f.executors, f.transforms, self.fallback
                )
                delattr(split_gm, name)  # a child module: replaced by a plain attribute
                setattr(split_gm, name, part)
                self.parts.append(part)
            self._fallback = split_gm
            self.runs = (
                f"thunder in {len(part_names)} part(s), eager: {', '.join(refused)} "
                f"({self.fallback_reason})"
            )
        elif kind == "inductor":
            from torch._inductor.compile_fx import compile_fx

            self._fallback = compile_fx(self.graph_module, list(args))
            self.runs = f"{kind}: {self.fallback_reason}"
        else:
            self._fallback = _with_eager_checkpoints(self.graph_module)
            self.runs = f"{kind}: {self.fallback_reason}"
        logs.log_eager(
            f"torch.compile graph {self.graph_module.__class__.__name__}",
            f"thunder refused it ({self.fallback_reason}); it runs as {self.runs}",
        )
        return self._fallback


def _with_eager_checkpoints(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """``gm`` with its ``tag_activation_checkpoint`` calls run as eager's checkpoint runs them
    (``_checkpoint_as_eager``), not as torch's implementation of the operator runs them."""
    for module in gm.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        changed = False
        for node in module.graph.nodes:
            if node.op == "call_function" and node.target is _tag_activation_checkpoint():
                node.target = _checkpoint_as_eager
                changed = True
        if changed:
            module.recompile()
    return gm


def _tag_activation_checkpoint() -> Any:
    from torch._higher_order_ops.wrap import tag_activation_checkpoint

    return tag_activation_checkpoint


def _checkpoint_as_eager(body: torch.fx.GraphModule, *args: Any, **kwargs: Any) -> Any:
    """``torch.utils.checkpoint.checkpoint`` of ``body`` as the program called it. Dynamo
    passes the module state the function reads (parameters, buffers) as arguments; eager's
    checkpoint saves only the function's own arguments, whose writes after the forward raise
    in the backward. torch's implementation of the operator saves them all (a buffer the
    function writes, BatchNorm's ``num_batches_tracked``, then raises), recomputes without
    the forward's random state and ignores ``use_reentrant``: here the arguments the function
    writes are read as the function reads state, at its recompute too."""
    from torch._higher_order_ops.wrap import TagActivationCheckpoint
    from torch.utils.checkpoint import checkpoint

    checkpoint_kwargs, body_kwargs = TagActivationCheckpoint.divide_kwargs(kwargs)  # type: ignore[no-untyped-call]
    context_fn = body.meta.get("_checkpoint_context_fn")
    if context_fn is not None:
        checkpoint_kwargs.setdefault("context_fn", context_fn)
    written = _arguments_written(body, args, body_kwargs)
    saved = [i for i in range(len(args)) if i not in written]

    def function(*saved_args: Any) -> Any:
        full = list(args)
        for i, a in zip(saved, saved_args):
            full[i] = a
        return body(*full, **body_kwargs)

    return checkpoint(function, *[args[i] for i in saved], **checkpoint_kwargs)


def _arguments_written(
    body: torch.fx.GraphModule, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> frozenset[int]:
    """The positions of the tensor arguments ``body`` writes in place (their version counters
    move), from a run on fake tensors; none where that run fails (torch's own behavior)."""
    key = tuple(
        (tuple(a.shape), a.dtype, a.device, a.requires_grad)
        if isinstance(a, torch.Tensor)
        else None
        for a in args
    )
    known = _WRITTEN.setdefault(body, {})
    if key not in known:
        from torch._subclasses.fake_tensor import FakeTensorMode

        try:
            with FakeTensorMode(allow_non_fake_inputs=True) as mode:
                fakes = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
                before = [f._version if isinstance(f, torch.Tensor) else None for f in fakes]
                with torch.no_grad():
                    body(*fakes, **kwargs)
            known[key] = frozenset(
                i
                for i, (f, v) in enumerate(zip(fakes, before))
                if isinstance(f, torch.Tensor) and f._version != v
            )
        except Exception:
            known[key] = frozenset()
    return known[key]


_WRITTEN: weakref.WeakKeyDictionary[torch.fx.GraphModule, dict[Any, frozenset[int]]] = (
    weakref.WeakKeyDictionary()
)


def compile_graph(
    gm: torch.fx.GraphModule,
    options: JitOptions,
    executors: Sequence[Any],
    transforms: Sequence[Transform],
    fallback: str,
) -> Subgraph:
    """``gm`` as a ``Subgraph`` compiled with these jit arguments (``cache="symbolic values"``
    where dynamo traced symbolic sizes)."""
    dynamic = _has_symbolic_inputs(gm)
    if dynamic and options.cache is CACHE_OPTIONS.CONSTANT_VALUES:
        options = dataclasses.replace(options, cache=CACHE_OPTIONS.SYMBOLIC_VALUES)
    recompile = getattr(gm, "real_recompile", None)
    if recompile is not None:  # a lazy GraphModule: its forward made now, once
        recompile()
    # Its generated forward, not the module's __call__ (FX's call wrapper has nothing to trace)
    function = ThunderFunction(gm.forward, options, executors, transforms)
    function.split_by_caller = True  # a call torch must run splits this graph (Subgraph)
    sub = Subgraph(gm, function, dynamic, fallback=fallback)
    numpy_calls = [n for n in gm.graph.nodes if _runs_numpy(n)]
    if numpy_calls:
        sub.refused_before_tracing = UnsupportedOperationError(
            getattr(numpy_calls[0].target, "__name__", "numpy"),
            "dynamo's NumPy calls (on arrays outside the program) run as the FX graph runs them",
        )
    return sub


def _runs_numpy(node: torch.fx.Node) -> bool:
    """Whether ``node`` calls one of dynamo's wrappers of NumPy code (``np.add(a, 1, out=a)``
    on an outside array, traced through ``torch._numpy``): torch runs it as it is, writes into
    the arrays included; thunder does not trace it."""
    from torch._dynamo import utils

    wrappers = (
        utils.numpy_to_tensor_wrapper,
        utils.numpy_method_wrapper,
        utils.numpy_operator_wrapper,
    )
    return node.op == "call_function" and isinstance(node.target, wrappers)


# Higher-order operators of FX graphs that thunder records (binding/regions.py); a graph
# holding another (autograd_function_apply: a torch.autograd.Function) is split around it.
_TAKEN_HIGHER_ORDER = frozenset({"tag_activation_checkpoint", "wrap"})


def _calls_one_of(node: torch.fx.Node, torch_ops: frozenset[str]) -> bool:
    """Whether ``node`` calls a torch callable named in ``torch_ops`` (``torch.rrelu_``, or
    ``torch.Tensor.t_`` for a method call)."""
    from thunder_ir.ops.fallback import torch_callable_name

    if not torch_ops:
        return False
    if node.op == "call_method":
        return f"torch.Tensor.{node.target}" in torch_ops
    return node.op == "call_function" and torch_callable_name(node.target) in torch_ops


def split_at_refused(
    gm: torch.fx.GraphModule, must_run: frozenset[str] = frozenset()
) -> tuple[torch.fx.GraphModule, list[str], list[str]] | None:
    """``gm`` split into consecutive runs of nodes thunder takes and nodes it does not (the
    higher-order operators it has no lookaside for, with the ``getitem``s and body attributes
    that belong to them, and calls of the torch callables named in ``must_run``, which a trace
    cannot hold but torch runs): (the split module, the refused ops, the names of thunder's
    parts), or None when no node is refused or nothing would be left to thunder."""
    from torch._ops import HigherOrderOperator
    from torch.fx.passes.split_module import split_module

    refused: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        target = node.target
        if (
            (
                node.op == "call_function"
                and isinstance(target, HigherOrderOperator)
                and target.name() not in _TAKEN_HIGHER_ORDER  # type: ignore[no-untyped-call]
            )
            or _calls_one_of(node, must_run)
            or _runs_numpy(node)
        ):
            refused.add(node)
        elif node.target is operator.getitem and node.args and node.args[0] in refused:
            refused.add(node)  # one of a refused op's results
    for node in gm.graph.nodes:
        if node.op == "get_attr" and node.users and all(u in refused for u in node.users):
            refused.add(node)
    if not refused:
        return None
    partition: dict[torch.fx.Node, int] = {}
    eager_ids: set[int] = set()
    current, last = -1, None
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        kind = node in refused
        if kind != last:
            current, last = current + 1, kind
        partition[node] = current
        if kind:
            eager_ids.add(current)
    thunder_ids = sorted(set(partition.values()) - eager_ids)
    if not thunder_ids:
        return None
    split = split_module(gm, gm, lambda node: partition[node], keep_original_order=True)
    ops = sorted(
        {str(n.target.name()) for n in refused if isinstance(n.target, HigherOrderOperator)}  # type: ignore[no-untyped-call]
        | {op for n in refused for op in must_run if _calls_one_of(n, frozenset({op}))}
        | {getattr(n.target, "__name__", "numpy") for n in refused if _runs_numpy(n)}
    )
    names = [f"submod_{i}" for i in thunder_ids if hasattr(split, f"submod_{i}")]
    return split, ops, names


class ThunderCompiler:
    """A ``torch.compile`` backend that compiles each of dynamo's graphs with thunder:
    ``torch.compile(model, backend=ThunderCompiler(**options))``, or ``backend="thunder"`` (with
    ``options={...}`` for thunder's options) once the package is installed.

    Args:
        fallback: how a graph thunder refuses runs: ``"eager"`` (default; its FX program as
            torch runs it) or ``"inductor"`` (torch.compile's default backend). Either way the
            ``fallbacks`` log channel says which graph and why, and so does ``subgraphs``.
        thunder_options: ``thunder.jit``'s keyword arguments (``executors``, ``transforms``,
            ``cache``, ``recompile_limit``, ...). Under ``torch.compile(..., dynamic=True)`` (or
            when dynamo marks sizes dynamic after a recompile) a graph's inputs have symbolic
            sizes and thunder compiles it with ``cache="symbolic values"``: one program for all
            of them.

    ``subgraphs`` lists the graphs compiled so far (:class:`Subgraph`: the FX graph, thunder's
    jitted program for ``thunder.compile_stats``/``last_traces``, and who runs it).
    """

    def __init__(self, *, fallback: str = "eager", **thunder_options: Any) -> None:
        if fallback not in FALLBACKS:
            raise ValueError(
                f"ThunderCompiler: fallback must be one of {', '.join(FALLBACKS)}, got {fallback!r}"
            )
        from thunder import jit_arguments

        python_comparisons.install()
        known = ("executors", "transforms", "lookasides", "cache", "sharp_edges")
        named = {k: thunder_options.pop(k) for k in known if k in thunder_options}
        disable_autograd = thunder_options.pop("disable_torch_autograd", False)  # (checked there)
        options, executors, transforms = jit_arguments(
            **named, disable_torch_autograd=disable_autograd, compile_options=thunder_options
        )
        self.fallback = fallback
        self.subgraphs: list[Subgraph] = []
        self._options = options
        self._executors = executors
        self._transforms = transforms

    @classmethod
    def of_jit(
        cls, options: JitOptions, executors: Sequence[Any], transforms: Sequence[Transform]
    ) -> ThunderCompiler:
        """The backend that compiles graphs as a ``thunder.jit`` with these resolved arguments
        would (``ThunderFunction``'s split programs)."""
        python_comparisons.install()
        compiler = cls.__new__(cls)
        compiler.fallback = "eager"
        compiler.subgraphs = []
        compiler._options = options
        compiler._executors = tuple(executors)
        compiler._transforms = tuple(transforms)
        return compiler

    def __call__(
        self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any
    ) -> Any:
        mode = kwargs.pop("mode", None)
        if mode not in (None, "default"):
            raise ValueError(
                f"the thunder backend has no mode {mode!r}; choose its executors with "
                "options={'executors': [...]} (thunder_executors.recommended_executors())"
            )
        extra = kwargs.pop("options", None)
        if kwargs:
            raise TypeError(f"the thunder backend got unknown arguments {sorted(kwargs)}")
        compiler = ThunderCompiler(fallback=self.fallback, **extra) if extra else self
        return compiler._compile(gm)

    def _compile(self, gm: torch.fx.GraphModule) -> Subgraph:
        _guard_global_module_hooks()
        sub = compile_graph(gm, self._options, self._executors, self._transforms, self.fallback)
        dynamic = sub.dynamic
        self.subgraphs.append(sub)
        _log.debug(
            "graph %d: %d nodes, dynamic=%s", len(self.subgraphs), len(gm.graph.nodes), dynamic
        )
        return sub


# The hooks ``register_module_forward_hook`` and its siblings register for every module.
_GLOBAL_HOOK_DICTS = (
    "_global_forward_pre_hooks",
    "_global_forward_hooks",
    "_global_backward_pre_hooks",
    "_global_backward_hooks",
)


def _guard_global_module_hooks() -> None:
    """Adds to the guards of the frame dynamo is compiling that the global module hooks are
    those it traced with: dynamo inlines ``Module.__call__``, which reads them, without
    guarding them, so a hook registered after the first calls would never run (or a removed
    one keep running). A frame whose guards fail is traced again."""
    from torch._dynamo.guards import GuardBuilder, install_guard
    from torch._dynamo.source import AttrSource, ImportSource
    from torch._guards import TracingContext

    if TracingContext.try_get() is None:
        return  # called outside dynamo (a graph compiled directly): no frame to guard
    for name in _GLOBAL_HOOK_DICTS:
        source: Any = ImportSource("torch")
        for part in ("nn", "modules", "module", name):
            source = AttrSource(source, part)
        install_guard(source.make_guard(GuardBuilder.DICT_KEYS_MATCH))


def _has_symbolic_inputs(gm: torch.fx.GraphModule) -> bool:
    """Whether dynamo traced any input of ``gm`` with symbolic sizes or values."""
    from torch.fx.experimental.symbolic_shapes import free_symbols

    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value", node.meta.get("val"))
        if value is not None and free_symbols(value):
            return True
    return False


def thunder_backend(gm: torch.fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Any:
    """``torch.compile(model, backend="thunder", options={...})``: the entry point torch finds
    through the ``torch_dynamo_backends`` entry point group (no ``import thunder`` needed)."""
    return ThunderCompiler()(gm, example_inputs, **kwargs)
