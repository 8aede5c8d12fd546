"""Torch callables that no op mirrors, recorded as one opaque op that names the callable.

``call_torch_fallback(fn, args, kwargs)`` records ``ltorch.torch_fallback("torch.special.polygamma",
1, t0)``: the torch callable by its qualified name, then its arguments. The outputs are inferred
by running the callable on fake tensors (``torch._subclasses.FakeTensorMode``: shapes, dtypes,
devices and whether an output requires grad, without data); executors run the callable itself
(``torch.special.polygamma(1, t0)`` in an execution trace), and the autodiff grad rule runs
``torch.autograd.grad`` through it (``torch_fallback_vjp``).

What the fake run shows decides the variant recorded, or a clear refusal:

- an output whose shape depends on the input's values (``nonzero``, ``unique``, ``masked_select``,
  ``bincount``) or a Python number computed from the data (``item``, ``equal``):
  ``DataDependentFallbackError``; where tracing can read the call's values,
  ``torch_fallback_sized`` runs it on them, its sizes and numbers values read from data;
- a write into an argument (``out=``): ``TorchRunsItError`` (the program runs split there, torch
  making the write); the IR's writes go through ``prims.copy_`` so
  that aliasing and functionalization see them. An in-place Tensor method (``exponential_``), or
  a function that writes its first argument alone (``torch.relu_``, ``F.elu_``), is
  ``torch_fallback_inplace``: its aten functional variant, then ``copy_`` into the tensor
  (``fallback_inplace``); one without a functional variant (``t_``) runs split too. Any other
  write the fake run shows (an aten op's schema marks the argument ``Tensor(a!)``, seen by a
  dispatch mode, since list writes such as ``torch._fused_adam_`` move no version counter) is
  the callable run on copies of what it writes (``fallback_mutating.WRITING``), then a
  ``copy_`` into each (``_call_writing``);
- an output that shares memory with an input (``diagonal``-like views): ``torch_fallback_view``,
  tagged ``VIEW`` (the aliasing analysis groups it with its inputs) and ``STRIDE_DEPENDENT``
  (functionalization refuses writes through it: it cannot replay an opaque view on values);
- an op drawing random numbers (an aten op tagged ``nondeterministic_seeded``):
  ``torch_fallback_random``, tagged ``RANDOM`` (never merged by CSE, kept in program order);
  where gradients may flow through it, ``torch_fallback_random_replay`` after
  ``ltorch.get_rng_state``, so that its backward re-runs it on the forward's numbers;
- a ``torch.Generator`` argument other than the default one: refused (it would be baked in).

Symbolic sizes of the tensor arguments, and symbolic ints among the arguments, stay symbolic: the
fake run uses torch's symbolic shapes (``fallback_sizes``), the outputs' sizes are expressions of
them, and the guards torch's shape code made on the way are constraints of the trace. Where that
run shows what the IR cannot state, and for other numbers, writes and runs on data, they are
specialized (a constraint that they equal this call's value).

A call recorded inside a ``torch.autocast`` region runs under that autocast, as eager's does (its
name says so: ``autocast_name``): its fake run, the executors and the backward's re-run enter it.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from thunder_ir.constraints import Compare, Const
from thunder_ir.devices import to_torch_device
from thunder_ir.dtypes import all_dtypes, from_torch_dtype, to_torch_dtype
from thunder_ir.errors import DataDependentError, UnsupportedInTracingError
from thunder_ir.ops._registry import resolve_torch_name, torchop
from thunder_ir.ops.backend_flags import flags_for, flags_name, run_under_flags, split_flags_name
from thunder_ir.ops.fallback_foreach import check_foreach_arguments
from thunder_ir.ops.fallback_sizes import SymbolicSizes, has_symbolic_sizes
from thunder_ir.ops.random_state import draws_from_own_generator
from thunder_ir.prims._common import make_prim
from thunder_ir.proxies import IntegerProxy, NumberProxy, TensorProxy, can_read_data
from thunder_ir.pytree import tree_flatten, tree_iter, tree_map, tree_unflatten
from thunder_ir.tags import OpTag
from thunder_ir.tracectx import get_tracectx, require_tracectx

if TYPE_CHECKING:
    from thunder_ir.ops.fallback_mutating import KernelWrites

__all__ = [
    "FALLBACK_SYMBOLS",
    "SIZED_SYMBOLS",
    "DataDependentFallbackError",
    "FallbackAutocast",
    "TorchFallbackError",
    "TorchRunsItEagerlyError",
    "TorchRunsItError",
    "autocast_name",
    "call_torch_fallback",
    "checks_values",
    "converted_only",
    "fallback_refusal",
    "fallback_under_autocast",
    "resolve_fallback",
    "runs_under_state",
    "split_autocast_name",
    "torch_callable_name",
    "torch_fallback",
    "torch_fallback_inplace",
    "torch_fallback_random",
    "torch_fallback_random_replay",
    "torch_fallback_view",
    "torch_fallback_vjp",
]


class TorchFallbackError(UnsupportedInTracingError):
    """A torch callable without an op that the fallback cannot record with eager's semantics.
    ``op`` is its qualified name."""

    def __init__(self, op: str, reason: str) -> None:
        self.op = op
        self.reason = reason
        super().__init__(f"{op} cannot be traced: {reason}")


class DataDependentFallbackError(TorchFallbackError, DataDependentError):
    """A torch callable whose output shape or Python result depends on its inputs' values
    (``nonzero``, ``masked_select``, ``equal``): tracing cannot know it. ``written``: the flat
    positions of the arguments its fake run wrote into before it stopped."""

    def __init__(self, op: str, reason: str, written: tuple[int, ...] = ()) -> None:
        super().__init__(op, reason)
        self.written = written


class TorchRunsItError(TorchFallbackError):
    """A call the trace cannot hold whose result torch computes on its own (a layout or
    bookkeeping query such as ``x.stride()`` or ``x.is_contiguous()``, a write into ``out=``): not
    a refusal; the front end runs the program through torch there."""


class TorchRunsItEagerlyError(TorchRunsItError):
    """A ``TorchRunsItError`` that torch.compile would record wrong as well (a quantized result,
    which its fake kernels answer as float32): the call runs eagerly, not split."""


# Modules searched for a readable name of a torch callable, most readable first.
_NAMESPACES = (
    "torch",
    "torch.special",
    "torch.linalg",
    "torch.fft",
    "torch.nn.functional",
    "torch.sparse",
    "torch._C._nn",
    "torch._C._linalg",
    "torch._C._special",
    "torch._C._fft",
    "torch._C._sparse",
    "torch._C._VariableFunctions",
)

# Methods whose result is layout, memory or autograd bookkeeping the trace does not model.
_REFUSED_METHODS = frozenset(
    {
        "stride", "is_contiguous", "data_ptr", "storage_offset", "untyped_storage", "storage",
        "is_set_to", "is_non_overlapping_and_dense", "register_hook", "retain_grad",
        "register_post_accumulate_grad_hook", "share_memory_", "record_stream", "backward",
        "pin_memory", "is_pinned", "_version", "set_", "resize_", "resize_as_", "numpy", "tolist",
        "item", "__setstate__", "__reduce_ex__", "_is_view", "_base", "is_shared",
        "_tensor_version",
    }
)  # fmt: skip


# Of those, the queries of layout and bookkeeping whose answer torch computes from the tensor
# alone (not data reads, hooks, or writes): a program asking them runs through torch there.
_LAYOUT_QUERIES = frozenset(
    {
        "stride", "is_contiguous", "data_ptr", "storage_offset", "untyped_storage", "storage",
        "is_set_to", "is_non_overlapping_and_dense", "is_pinned", "_version", "_is_view", "_base",
        "is_shared", "_tensor_version",
    }
)  # fmt: skip
assert _LAYOUT_QUERIES <= _REFUSED_METHODS

# ... and the writes into a tensor's storage or shape, which torch makes: the program runs
# through torch there too.
_STORAGE_WRITES = frozenset({"resize_", "resize_as_", "set_", "share_memory_"})
# ... and the autograd hooks, which torch's backward runs.
_AUTOGRAD_HOOKS = frozenset({"register_hook", "retain_grad", "register_post_accumulate_grad_hook"})
assert _STORAGE_WRITES | _AUTOGRAD_HOOKS <= _REFUSED_METHODS
_RUN_BY_TORCH = _LAYOUT_QUERIES | _STORAGE_WRITES | _AUTOGRAD_HOOKS


@functools.cache
def _name_index() -> dict[int, str]:
    index: dict[int, str] = {}
    for module_name in _NAMESPACES:
        module = resolve_torch_name(module_name)
        if module is None:  # pragma: no cover - every listed namespace exists in supported torch
            continue
        prefix = module_name
        for attr in dir(module):
            if attr.startswith("__"):
                continue
            obj = getattr(module, attr, None)
            if callable(obj) and not isinstance(obj, type):
                index.setdefault(id(obj), f"{prefix}.{attr}")
    return index


def torch_callable_name(fn: Any) -> str | None:
    """The qualified name that denotes ``fn`` (``torch.special.polygamma``,
    ``torch.Tensor.cumprod``, ``torch.ops.aten.mv.default``), or None when no name does."""
    if isinstance(fn, torch._ops.OpOverload):
        return f"torch.ops.{fn.namespace}.{fn._opname}.{fn._overloadname}"
    if isinstance(fn, torch._ops.OpOverloadPacket):
        return f"torch.ops.{fn._qualified_op_name.replace('::', '.')}"
    name = getattr(fn, "__name__", None)
    owner = getattr(fn, "__objclass__", None)
    if isinstance(owner, type) and issubclass(owner, torch._C.TensorBase) and name:
        candidate = f"torch.Tensor.{name}"
        return candidate if getattr(torch.Tensor, name, None) is fn else None
    found = _name_index().get(id(fn))
    if found is not None:
        return found
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if isinstance(module, str) and module.startswith("torch") and qualname:
        candidate = f"{module}.{qualname}"
        if resolve_torch_name(candidate) is fn:
            return candidate
    return None


@functools.cache
def _resolve(name: str) -> Any:
    plain, flags = split_flags_name(name)
    if flags is not None:
        return run_under_flags(_resolve(plain), flags)
    plain, state = split_autocast_name(name)
    fn = resolve_torch_name(plain)
    if fn is None:
        raise TorchFallbackError(name, "no torch callable has that name")
    return fn if state is None else _under_autocast(fn, state)


def resolve_fallback(name: str) -> Any:
    """The callable a fallback op's name denotes (a torch callable, or one run under
    ``torch.autocast``: ``autocast_name``, or under backend flags: ``backend_flags.flags_name``)."""
    return _resolve(name)


# -- torch callables run under torch.autocast ------------------------------------------------------
#
# Eager autocast applies inside a composite torch callable (``F.bilinear``, ``affine_grid``,
# ``nn.RNN``'s ``rnn_tanh``, ``torch.fft.rfft``): each aten op it runs is cast by the autocast
# lists. A fallback recorded inside an autocast region (on tensors of a device autocast is on
# for) therefore runs under the same ``torch.autocast``: its name says so,
# ``"torch.rnn_tanh under autocast(cpu=bfloat16, cached=(2, 3))"``, and every consumer of the
# name (the fake run, the executors, the backward's re-run through ``torch.autograd.grad``) runs
# the callable resolved from it, which enters ``torch.autocast`` around the call. Its backward
# is eager's: the backward of autocast's conversions converts the gradients back.

_AUTOCAST_NAME = re.compile(
    r"^(?P<name>\S+) under autocast\((?P<settings>[^()]*(?:\([^()]*\))?)\)$"
)


@dataclass(frozen=True)
class FallbackAutocast:
    """The ``torch.autocast`` state a fallback runs under: the dtype of each device type it is on
    for, and (with its weight cache on) the flat positions of the arguments the cache holds
    (those eager's are leaves requiring grad: converted once however often the callable uses
    them; the others are converted at each use, as in eager)."""

    dtypes: tuple[tuple[str, torch.dtype], ...]
    cached: tuple[int, ...] = ()


def autocast_name(name: str, state: FallbackAutocast) -> str:
    """The name of the torch callable ``name`` run under ``state``."""
    settings = [f"{d}={str(t).removeprefix('torch.')}" for d, t in state.dtypes]
    if state.cached:
        settings.append(f"cached={state.cached}")
    return f"{name} under autocast({', '.join(settings)})"


def split_autocast_name(name: str) -> tuple[str, FallbackAutocast | None]:
    """The torch callable's name and the autocast state it runs under (None: as it is)."""
    found = _AUTOCAST_NAME.match(name)
    if found is None:
        return name, None
    dtypes: list[tuple[str, torch.dtype]] = []
    cached: tuple[int, ...] = ()
    settings = found["settings"]
    if "cached=" in settings:
        settings, _, positions = settings.partition("cached=")
        cached = tuple(int(p) for p in positions.strip("(), ").split(",") if p.strip())
    for item in filter(None, (s.strip() for s in settings.split(","))):
        device, _, dtype = item.partition("=")
        dtypes.append((device, getattr(torch, dtype)))
    return found["name"], FallbackAutocast(tuple(dtypes), cached)


def runs_under_state(name: str) -> bool:
    """Whether the fallback ``name`` runs its callable under state of its own (autocast, backend
    flags) rather than as it is."""
    return split_autocast_name(name)[1] is not None or split_flags_name(name)[1] is not None


def _under_autocast(fn: Any, state: FallbackAutocast) -> Any:
    on = dict(state.dtypes)
    cached = frozenset(state.cached)

    def run_under_autocast(*args: Any, **kwargs: Any) -> Any:
        leaves, spec = tree_flatten((args, kwargs))
        # Autocast's cache holds leaves requiring grad: an argument eager's is not a leaf of
        # (the backward's re-run makes every argument one) is given as a view, never cached.
        leaves = [
            x.view_as(x)
            if i not in cached and isinstance(x, torch.Tensor) and x.requires_grad
            else x
            for i, x in enumerate(leaves)
        ]
        call_args, call_kwargs = tree_unflatten(leaves, spec)
        # (plain with-blocks: torch.compile, which may compile the call, follows those)
        with _autocast_block("cuda", on.get("cuda")), _autocast_block("cpu", on.get("cpu")):
            return fn(*call_args, **call_kwargs)

    return run_under_autocast


def _autocast_block(device: str, dtype: torch.dtype | None) -> Any:
    """``torch.autocast(device, dtype)`` (off where ``dtype`` is None), its cache on. Without a
    GPU, CUDA autocast is set directly (``torch.autocast`` would switch it off): the fake run of
    a call on fake CUDA tensors gives them the dtypes CUDA autocast gives."""
    if dtype is None:
        return torch.autocast(device, enabled=False)
    if device == "cuda" and not torch.cuda.is_available():
        return _cuda_autocast_without_gpu(dtype)
    return torch.autocast(device, dtype=dtype, cache_enabled=True)


@contextlib.contextmanager
def _cuda_autocast_without_gpu(dtype: torch.dtype) -> Any:
    enabled, saved, cache = (
        torch.is_autocast_enabled("cuda"),
        torch.get_autocast_dtype("cuda"),
        torch.is_autocast_cache_enabled(),
    )
    try:
        torch.set_autocast_enabled("cuda", True)
        torch.set_autocast_dtype("cuda", dtype)
        torch.set_autocast_cache_enabled(True)
        yield
    finally:
        torch.set_autocast_enabled("cuda", enabled)
        torch.set_autocast_dtype("cuda", saved)
        torch.set_autocast_cache_enabled(cache)


class _Uses(torch.utils._python_dispatch.TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Notes, for the tensors watched (by id: their flat position), whether an op other than a
    conversion to ``to[position]`` computes a tensor from them."""

    def __init__(self, watched: dict[int, int], to: dict[int, torch.dtype]) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.watched, self.to = watched, to
        self.used_otherwise: set[int] = set()

    def __torch_dispatch__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not any(isinstance(o, torch.Tensor) for o in tree_iter(out)):
            return out  # a query (device, sizes): not a use of the values
        for x in tree_iter((args, kwargs)):
            i = self.watched.get(id(x))
            if i is None:
                continue
            converts = func is torch.ops.aten._to_copy.default and kwargs.get("dtype") == self.to[i]
            if not (converts and args and args[0] is x):
                self.used_otherwise.add(i)
        return out


def converted_only(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[int, ...]:
    """Of the arguments the autocast cache holds for the fallback ``name`` (run under autocast),
    those it uses only by autocast's conversion to the autocast dtype: giving it that
    conversion instead computes the same, and shares the conversion with the program's other
    uses of the tensor, as eager's cache does. Found by running it on fake tensors (with
    symbolic sizes where it has any, as ``_fake_run``)."""
    plain, state = split_autocast_name(name)
    if state is None or not state.cached:
        return ()
    if has_symbolic_sizes(args, kwargs):
        sizes = SymbolicSizes()
        try:
            found = _converted_only(plain, state, args, kwargs, sizes)
            sizes.accept(None)
        except Exception:  # (on this call's sizes instead)
            pass
        else:
            return found
    try:
        return _converted_only(plain, state, args, kwargs, None)
    except Exception:  # (the call itself is checked where it is recorded)
        return ()


def _converted_only(
    plain: str,
    state: FallbackAutocast,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    sizes: SymbolicSizes | None,
) -> tuple[int, ...]:
    from torch._subclasses.fake_tensor import FakeTensorMode

    on = dict(state.dtypes)
    leaves, spec = tree_flatten((tuple(args), dict(kwargs)))
    watched: dict[int, int] = {}
    to: dict[int, torch.dtype] = {}
    mode = FakeTensorMode(
        allow_fallback_kernels=False, shape_env=sizes.shape_env if sizes else None
    )
    with torch.inference_mode(False), mode:
        fakes: list[Any] = []
        for i, x in enumerate(leaves):
            if isinstance(x, TensorProxy):
                t = torch.empty(
                    tuple(
                        sizes.size(n, _specialize) if sizes else int(_specialize(n))
                        for n in x.shape
                    ),
                    dtype=to_torch_dtype(x.dtype),
                    device=to_torch_device(x.device),
                )
                if i in state.cached and x.device.type in on:
                    watched[id(t)], to[i] = i, on[x.device.type]
                x = t
            elif isinstance(x, torch.Tensor):
                x = mode.from_tensor(x, static_shapes=True)
            elif isinstance(x, NumberProxy) and sizes:
                x = sizes.number(x, _specialize)
            fakes.append(x)
        call_args, call_kwargs = tree_unflatten(fakes, spec)
        uses = _Uses(watched, to)
        run = _resolve(autocast_name(plain, FallbackAutocast(state.dtypes)))
        with torch.no_grad(), uses:  # nothing requires grad: no cache, each use shows
            run(*call_args, **call_kwargs)
    return tuple(i for i in state.cached if i in to and i not in uses.used_otherwise)


def _recording_autocast(args: Sequence[Any], kwargs: dict[str, Any]) -> FallbackAutocast | None:
    """The autocast state a top-level call being recorded now runs under (None: off), as the
    trace's intercept (the autocast recorder, ``thunder_transforms.autocast``) answers it for
    these arguments."""
    trace = get_tracectx()
    if trace is None or trace.intercept is None or len(trace.scopes) != trace.intercept_depth:
        return None
    query = getattr(trace.intercept, "fallback_autocast", None)
    return query(tuple(args), dict(kwargs)) if query is not None else None


def fallback_under_autocast(name: str, state: FallbackAutocast) -> str:
    """The name of the fallback ``name`` recorded in an autocast region: run under ``state``.
    Always so where its tensors are on a device autocast is on for: a fake run cannot tell
    whether autocast changes a callable (a kernel such as ``bilinear``'s ``_trilinear`` casts
    inside, where fake tensors run a meta kernel), torch's own autocast then decides."""
    return name if split_autocast_name(name)[1] is not None else autocast_name(name, state)


def _specialize(x: Any) -> Any:
    """A symbolic number as this call's value, with the constraint that it stays so."""
    if isinstance(x, NumberProxy):
        x._constrain(Compare("==", x.expr, Const(x.value)))
        return x.value
    return x


def _specialize_shape(t: TensorProxy) -> None:
    for s in t.shape:
        _specialize(s)


def _specialized(args: Sequence[Any], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], Any]:
    """The arguments with symbolic numbers as this call's values, and the sizes of their
    tensors specialized too: for a call recorded otherwise than by its outputs' shapes (a write
    through a functional variant, a run on data)."""
    args = tuple(tree_map(_specialize, tuple(args)))
    kwargs = tree_map(_specialize, dict(kwargs))
    for p in tree_iter((args, kwargs)):
        if isinstance(p, TensorProxy):
            _specialize_shape(p)
    return args, kwargs


class _Recorder(torch.utils._python_dispatch.TorchDispatchMode):  # type: ignore[no-untyped-call]
    """Notes whether any aten op of the fake run draws random numbers, and the tensors the aten
    ops write into by their schemas (``Tensor(a!)``, ``Tensor(a!)[]``): fake kernels of list
    writes (``_foreach_add_``, ``_fused_adam_``) move no version counter. Noted before the op
    runs, so a write shows where its fake kernel is missing too."""

    def __init__(self) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.random = False
        self.written: list[torch.Tensor] = []
        # The writes autograd records: not one the callable makes under its own no_grad or
        # into a detached alias (F.embedding's max_norm renorm writes ``weight.detach()``).
        self.written_with_grad: list[torch.Tensor] = []
        self.arguments: set[int] = set()  # ids of the fakes standing for the arguments

    def __torch_dispatch__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
            self.random = True
        schema = getattr(func, "_schema", None)
        for i, a in enumerate(schema.arguments if schema is not None else ()):
            if a.alias_info is not None and a.alias_info.is_write:
                value = args[i] if i < len(args) else kwargs.get(a.name)
                values = value if isinstance(value, (list, tuple)) else (value,)
                tensors = [t for t in values if isinstance(t, torch.Tensor)]
                self.written.extend(tensors)
                if torch.is_grad_enabled() and any(
                    isinstance(x, torch.Tensor) and x.requires_grad
                    for x in tree_iter((tuple(args), dict(kwargs)))
                ):
                    self.written_with_grad.extend(
                        t for t in tensors if id(t) in self.arguments or t._is_view()
                    )
        return func(*args, **kwargs)


class _FakeRun:
    """The callable run once on fake tensors standing for the proxies among the arguments."""

    def __init__(
        self,
        name: str,
        fn: Any,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        writes: bool = False,
        sizes: SymbolicSizes | None = None,
    ) -> None:
        """``writes``: a write into an argument is noted (``written``, ``returns_written``) for
        the caller to record; otherwise it raises ``TorchRunsItError``. ``sizes``: the symbols
        of a symbolic run (``_fake_run``); without, symbolic sizes and numbers are specialized."""
        from torch._subclasses.fake_tensor import (
            DataDependentOutputException,
            DynamicOutputShapeException,
            FakeTensorMode,
            UnsupportedOperatorException,
        )

        from thunder_ir.ops.fallback_inplace import fake_tensor_log_quiet

        self.name = name
        self.sizes = sizes
        mode = FakeTensorMode(
            allow_fallback_kernels=False, shape_env=sizes.shape_env if sizes else None
        )
        recorder = _Recorder()
        # Outside inference mode: an inference tensor has no version counter, which is how the
        # run tells a write into an argument (the callable's values do not depend on the mode).
        with torch.inference_mode(False), mode:
            fakes: list[Any] = []
            # One fake per proxy: a write through one occurrence shows in the others, as in eager.
            fake_of: dict[int, Any] = {}

            def fake(x: Any) -> Any:
                if isinstance(x, TensorProxy) and id(x) in fake_of:
                    return fake_of[id(x)]
                if isinstance(x, TensorProxy):
                    t = torch.empty(
                        tuple(
                            sizes.size(s, _specialize) if sizes else int(_specialize(s))
                            for s in x.shape
                        ),
                        dtype=to_torch_dtype(x.dtype),
                        device=to_torch_device(x.device),
                    )
                    if x.requires_grad and (t.is_floating_point() or t.is_complex()):
                        # Not a leaf: an in-place call on a leaf requiring grad raises, and a
                        # proxy is a leaf of the user's program only where the binder says so.
                        with torch.enable_grad():
                            t = t.requires_grad_(True).clone()
                    fakes.append(t)
                    fake_of[id(x)] = t
                    return t
                if isinstance(x, torch.Tensor):
                    t = (
                        torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
                        if x.is_inference()
                        else mode.from_tensor(x, static_shapes=True)
                    )
                    fakes.append(t)
                    return t
                if isinstance(x, torch.Generator):
                    # It changes no metadata, and torch's meta kernels of refs refuse one
                    # (``aten.exponential``): the program passes it when it runs.
                    return None
                if isinstance(x, NumberProxy):
                    return sizes.number(x, _specialize) if sizes else _specialize(x)
                return x

            leaves, spec = tree_flatten((tuple(args), dict(kwargs)))
            fleaves = [fake(x) for x in leaves]
            fargs, fkwargs = tree_unflatten(fleaves, spec)
            versions = [t._version for t in fakes]
            recorder.arguments = {id(t) for t in fakes}
            metadata = [(t.shape, t.stride(), t.dtype) for t in fakes]

            def written() -> tuple[int, ...]:
                changed = {id(t) for t, v in zip(fakes, versions) if t._version != v}
                return tuple(
                    i
                    for i, f in enumerate(fleaves)
                    if isinstance(f, torch.Tensor)
                    and (
                        id(f) in changed
                        or any(w is f or _is_alias_of(w, f) for w in recorder.written)
                    )
                )

            try:
                # Without autocast, as every op is recorded: the autocast transform converts the
                # inputs autocast converts after tracing (which may run inside torch.autocast).
                with (
                    torch.enable_grad(),
                    torch.autocast("cpu", enabled=False),
                    torch.autocast("cuda", enabled=False),
                    recorder,
                    fake_tensor_log_quiet(),
                ):
                    out = fn(*fargs, **fkwargs)
            except (DynamicOutputShapeException, DataDependentOutputException) as e:
                raise DataDependentFallbackError(
                    name,
                    "its result depends on the values in its input tensors (shape or Python "
                    f"value: {e}), which tracing does not know; compute it outside the jitted "
                    "function or with ops whose output shape is static",
                    written(),
                ) from None
            except UnsupportedOperatorException as e:
                # No meta kernel: run on the call's values, its sizes read from them.
                raise DataDependentFallbackError(
                    name, f"torch has no shape inference (meta kernel) for {e}", written()
                ) from None
            except RuntimeError as e:
                if "no fake impl registered" in str(e):  # a custom op without register_fake
                    raise DataDependentFallbackError(
                        name,
                        "it has no fake implementation (register_fake) to infer its shapes",
                        written(),
                    ) from None
                if "data is not allocated" not in str(e):
                    raise
                raise DataDependentFallbackError(  # it read the values of a tensor standing for an input
                    name,
                    "its result depends on the values in its input tensors, which tracing does "
                    "not know; compute it outside the jitted function",
                    written(),
                ) from None
        self.written = written()
        # Flat positions every write into which autograd does not record (a write only the
        # version counter shows counts as one it records).
        self.written_without_grad = frozenset(
            i
            for i in self.written
            if any(w is fleaves[i] or _is_alias_of(w, fleaves[i]) for w in recorder.written)
            and not any(
                w is fleaves[i] or _is_alias_of(w, fleaves[i]) for w in recorder.written_with_grad
            )
        )
        self.random = recorder.random
        self.out = out
        if self.written and not writes:
            raise TorchRunsItError(
                name,
                "it writes into an argument in place, and no functional variant of it records "
                "the write",
            )
        for i in self.written:
            if not isinstance(leaves[i], TensorProxy):
                raise TorchRunsItError(
                    name, "it writes into a tensor the program holds as a constant"
                )
        if any((t.shape, t.stride(), t.dtype) != m for t, m in zip(fakes, metadata)):
            # A resize or restride: copying new values back cannot record it.
            raise TorchRunsItError(name, "it changes the shape of an argument in place")
        written_fakes = {id(fleaves[i]): i for i in self.written}
        # Each output that is a written argument itself (``_amp_update_scale_`` returns its
        # scale), by the argument's flat position; a call that writes and returns another alias
        # of an argument is not recorded.
        self.returns_written: list[int | None] = []
        for o in tree_iter(_as_tree(out)):
            at = written_fakes.get(id(o))
            if (
                self.written
                and at is None
                and isinstance(o, torch.Tensor)
                and any(_is_alias_of(o, t) for t in fakes)
            ):
                raise TorchRunsItError(name, "it writes into an argument and returns a view")
            self.returns_written.append(at)
        self.view = any(
            isinstance(o, torch.Tensor) and any(_is_alias_of(o, t) for t in fakes)
            for o in tree_iter(_as_tree(out))
        )


def _fake_run(
    name: str, fn: Any, args: Sequence[Any], kwargs: dict[str, Any], writes: bool = False
) -> _FakeRun:
    """``_FakeRun`` with symbolic sizes where the call has any (``fallback_sizes``) and what
    the run shows can be stated in the IR (its guards then constraints of the trace); otherwise
    (or where the symbolic run fails in any way) on this call's sizes, specialized to them."""
    if has_symbolic_sizes(args, kwargs):
        sizes = SymbolicSizes()
        try:
            run = _FakeRun(name, fn, args, kwargs, writes, sizes)
            sizes.accept(run.out)
        except Exception:  # (the run on this call's sizes raises what eager's call would)
            pass
        else:
            return run
    return _FakeRun(name, fn, args, kwargs, writes)


def _is_alias_of(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch._C._is_alias_of(a, b))  # type: ignore[attr-defined]


def _as_tree(out: Any) -> Any:
    """torch.return_types results (structseqs) as tuples."""
    if isinstance(out, tuple) and type(out) is not tuple and hasattr(type(out), "n_fields"):
        return tuple(out)
    return out


def _meta(torch_name: str, /, *args: Any, **kwargs: Any) -> Any:
    run = _fake_run(torch_name, _resolve(torch_name), args, kwargs)
    out = _as_tree(run.out)
    sizes = run.sizes
    if sizes is None and any(
        isinstance(x, torch.Tensor) and x.numel() == 0 for x in tree_iter(out)
    ):
        out = _kernel_structure(torch_name, args, kwargs, out)

    def proxy(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            return TensorProxy(
                shape=sizes.shape(x) if sizes else tuple(x.shape),
                dtype=from_torch_dtype(x.dtype),
                device=x.device,
                requires_grad=x.requires_grad,
            )
        return x

    return tree_map(proxy, out)


def _kernel_structure(
    torch_name: str, args: Sequence[Any], kwargs: dict[str, Any], out: Any
) -> Any:
    """The fake run's result ``out`` with None where torch's kernel returns None. A meta kernel
    may stand an empty tensor for an output its kernel leaves undefined
    (``_native_multi_head_attention`` with ``need_weights=False``: its schema says ``Tensor``,
    its CPU kernel gives None), and the program may decide on ``w is None``. Where the fake run
    gives an empty tensor, the
    kernel runs once on zeros of the arguments' shapes (the structure of a result depends on
    sizes and options, not on values; data-dependent results are ``torch_fallback_sized``). A
    structure that differs otherwise (another length) is refused: torch.compile's fake tensors
    would answer the same wrong structure, so the call runs eagerly."""

    def real(x: Any) -> Any:
        if not isinstance(x, TensorProxy):
            return x
        t = torch.zeros(
            tuple(int(_specialize(s)) for s in x.shape),
            dtype=to_torch_dtype(x.dtype),
            device=to_torch_device(x.device),
        )
        return t.requires_grad_(x.requires_grad and (t.is_floating_point() or t.is_complex()))

    try:
        with (
            torch.inference_mode(False),
            torch.enable_grad(),
            torch.autocast("cpu", enabled=False),
            torch.autocast("cuda", enabled=False),
            _generators_kept(args, kwargs),
        ):
            found = _as_tree(_resolve(torch_name)(*tree_map(real, args), **tree_map(real, kwargs)))
    except Exception as e:
        raise TorchRunsItEagerlyError(
            torch_name,
            f"its kernel's result may differ in structure from its shape inference's, and "
            f"running it to see raised {type(e).__name__}: {e}",
        ) from None
    leaves, spec = tree_flatten(out)
    found_leaves, found_spec = tree_flatten(found)
    if found_spec == spec and all(map(_same_kind, leaves, found_leaves)):
        return tree_unflatten(
            [None if f is None else x for x, f in zip(leaves, found_leaves)], spec
        )
    raise TorchRunsItEagerlyError(
        torch_name,
        f"its kernel returns {_structure(found)} where its shape inference (fake kernel) says "
        f"{_structure(out)}",
    )


def _same_kind(fake: Any, found: Any) -> bool:
    """Whether the kernel's leaf ``found`` agrees with the fake run's ``fake``: both tensors, or
    None (the kernel's undefined tensor), or both other values."""
    if found is None:
        return True
    return isinstance(fake, torch.Tensor) == isinstance(found, torch.Tensor)


def _structure(out: Any) -> str:
    leaves, spec = tree_flatten(out)
    shown = tree_unflatten(
        ["Tensor" if isinstance(x, torch.Tensor) else type(x).__name__ for x in leaves], spec
    )
    return str(shown).replace("'", "")


torch_fallback = torchop(name="torch_fallback", tags=(OpTag.TORCH_FALLBACK,))(_meta)
torch_fallback_view = torchop(
    name="torch_fallback_view",
    tags=(OpTag.TORCH_FALLBACK, OpTag.VIEW, OpTag.STRIDE_DEPENDENT),
)(_meta)
torch_fallback_random = torchop(
    name="torch_fallback_random", tags=(OpTag.TORCH_FALLBACK, OpTag.RANDOM)
)(_meta)


def _replay_meta(
    torch_name: str, rng_state: Any, rng_device: Any, /, *args: Any, **kwargs: Any
) -> Any:
    return _meta(torch_name, *args, **kwargs)


# A random op whose inputs require grad, after the generator's state it draws from
# (``ltorch.get_rng_state``): its backward re-runs it from that state, drawing the same numbers.
torch_fallback_random_replay = torchop(
    name="torch_fallback_random_replay", tags=(OpTag.TORCH_FALLBACK, OpTag.RANDOM)
)(_replay_meta)


def _sized_meta(torch_name: str, /, *args: Any, **kwargs: Any) -> tuple[Any, tuple[Any, ...]]:
    """The callable run on this call's values (``Trace.read_data``), its outputs' sizes values
    read from data: what it returns, and those sizes in order (defined by the call). Run with
    gradients where an input requires them: which outputs require grad is torch's answer."""
    trace = require_tracectx("torch_fallback_sized")
    reader = trace.read_data
    assert reader is not None

    def real(x: Any) -> Any:
        if isinstance(x, NumberProxy):  # (a size of another tensor read from data)
            return x.value
        if not isinstance(x, TensorProxy):
            return x
        value = reader(x).clone()  # the callable may write
        return value.requires_grad_(x.requires_grad and value.is_floating_point())

    grad = any(isinstance(x, TensorProxy) and x.requires_grad for x in tree_iter((args, kwargs)))
    # The run only shows the sizes: a random draw here would be one eager does not make (the
    # program draws when it runs), so the generators are put back.
    with torch.set_grad_enabled(grad), _generators_kept(args, kwargs):
        result = _resolve(torch_name)(*tree_map(real, args), **tree_map(real, kwargs))
    _check_result_dtypes(torch_name, result)
    _SIZED_RESULT_TYPE.set(type(result))
    out = _as_tree(result)
    sizes: list[IntegerProxy] = []

    def proxy(x: Any) -> Any:
        if type(x) in (bool, int, float, complex):  # computed from data: a value of the trace
            number = _data_number(x)
            trace.data_values[number.name] = number
            return number
        if x is not None and not isinstance(x, torch.Tensor):
            raise DataDependentError(
                f"{torch_name} returns a {type(x).__name__} computed from tensor data, which "
                "the trace cannot hold"
            )
        if x is None:
            return x
        shape = [IntegerProxy(value=int(n)) for n in x.shape]
        for n in shape:
            trace.data_values[n.name] = n
            trace.data_sizes.add(n.name)
        sizes.extend(shape)
        return TensorProxy(
            shape=shape,
            dtype=from_torch_dtype(x.dtype),
            device=x.device,
            requires_grad=x.requires_grad,
        )

    return tree_map(proxy, out), tuple(sizes)


@contextlib.contextmanager
def _generators_kept(args: Any, kwargs: Any) -> Any:
    """The default CPU generator's state, that of the CUDA devices among the tensors and that of
    each generator passed in (``generator=g``), put back afterwards."""
    leaves = list(tree_iter((args, kwargs)))
    cuda = sorted(
        {
            x.device.index or 0
            for x in leaves
            if isinstance(x, TensorProxy) and x.device.type == "cuda"
        }
    )
    given = [x for x in leaves if isinstance(x, torch.Generator)]
    states = [g.get_state() for g in given]
    try:
        with torch.random.fork_rng(devices=cuda):
            yield
    finally:
        for g, state in zip(given, states):
            g.set_state(state)


# The type of the result of the last ``torch_fallback_sized`` recorded in this context: the trace
# holds a torch.return_types result as a tuple, which ``_call_sized`` gives its type back.
_SIZED_RESULT_TYPE: contextvars.ContextVar[type] = contextvars.ContextVar("sized_result_type")


def _call_sized(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """Records ``torch_fallback_sized`` of the callable ``name`` (``torch_fallback_sized_random``
    where it draws random numbers); returns its result as torch does (a torch.return_types
    result keeps its type: ``lstsq(A, B).solution``)."""
    sym = torch_fallback_sized_random if _draws_random(name, args, kwargs) else torch_fallback_sized
    token = _SIZED_RESULT_TYPE.set(tuple)
    try:
        out, _ = sym(name, *args, **kwargs)
        kind = _SIZED_RESULT_TYPE.get()
    finally:
        _SIZED_RESULT_TYPE.reset(token)
    if kind is not tuple and isinstance(out, tuple) and hasattr(kind, "n_fields"):
        return kind(out)
    return out


def _data_number(x: Any) -> NumberProxy:
    from thunder_ir.proxies import ComplexProxy, FloatProxy

    if type(x) is bool:
        return IntegerProxy(value=x, python_type=bool)
    if type(x) is int:
        return IntegerProxy(value=x)
    return ComplexProxy(value=x) if type(x) is complex else FloatProxy(value=x)


def _reads_data_sizes(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    trace = get_tracectx()
    sizes = trace.data_sizes if trace is not None else set()
    return any(
        isinstance(s, IntegerProxy) and s.name in sizes
        for x in tree_iter((tuple(args), kwargs))
        if isinstance(x, TensorProxy)
        for s in x.shape
    )


def run_sized(torch_name: str, /, *args: Any, **kwargs: Any) -> tuple[Any, tuple[int, ...]]:
    """``torch_fallback_sized`` on tensors: the callable's result (structseqs as tuples) and the
    sizes of its tensors, in order."""
    out = _as_tree(_resolve(torch_name)(*args, **kwargs))
    return out, tuple(n for t in tree_iter(out) if isinstance(t, torch.Tensor) for n in t.shape)


# A torch callable whose result's shape depends on data (``unique``, ``bincount``): every size of
# its tensor outputs is a value read from data, defined by this call at the top level of the trace.
# Differentiated like ``torch_fallback``: the backward re-runs it (``torch_fallback_vjp``).
torch_fallback_sized = make_prim(
    "torch_fallback_sized", _sized_meta, tags=(OpTag.READS_DATA,), impl=run_sized
)


# The same for a callable that draws random numbers (``torch.binomial``, ``_sample_dirichlet``,
# which have no meta kernel): never removed or merged, kept in program order, as other draws.
torch_fallback_sized_random = make_prim(
    "torch_fallback_sized_random",
    _sized_meta,
    tags=(OpTag.READS_DATA, OpTag.RANDOM),
    impl=run_sized,
)
SIZED_SYMBOLS = frozenset({torch_fallback_sized, torch_fallback_sized_random})


def _draws_random(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Whether the callable reaches an aten op that draws random numbers, run on fake tensors
    as far as they go (up to an op without a meta kernel, which the recorder sees first)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    recorder = _Recorder()
    mode = FakeTensorMode(allow_fallback_kernels=False, allow_non_fake_inputs=True)

    def fake(x: Any) -> Any:
        if isinstance(x, TensorProxy):
            shape = tuple(int(s.value) if isinstance(s, NumberProxy) else int(s) for s in x.shape)
            return torch.empty(
                shape, dtype=to_torch_dtype(x.dtype), device=to_torch_device(x.device)
            )
        return x.value if isinstance(x, NumberProxy) else x

    try:
        with torch.inference_mode(False), mode, recorder:
            _resolve(name)(*tree_map(fake, tuple(args)), **tree_map(fake, dict(kwargs)))
    except Exception:  # only what it reached before failing matters
        pass
    return recorder.random


# The ops that call a torch callable named by their first argument (not torch_fallback_inplace,
# whose decomposition is such a call).
FALLBACK_SYMBOLS = frozenset(
    {torch_fallback, torch_fallback_view, torch_fallback_random, torch_fallback_random_replay}
)


def _differentiable(x: Any) -> bool:
    return isinstance(x, TensorProxy) and (x.dtype.is_inexact)


@torchop(name="torch_fallback_vjp", tags=(OpTag.TORCH_FALLBACK,))
def torch_fallback_vjp(
    torch_name: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    cotangents: tuple[Any, ...],
    rng_state: Any = None,
    rng_device: Any = None,
) -> tuple[Any, ...]:
    """The gradients of ``torch_fallback(torch_name, *args, **kwargs)`` given one cotangent per
    tensor output (None where none flows): one per leaf of ``(args, kwargs)``, a tensor for each
    floating-point tensor, None for the rest. Runs as ``torch.autograd.grad`` through the
    callable re-run on the saved arguments; a random one from ``rng_state``, the state of
    ``rng_device``'s generator before the forward drew (and that generator is left unchanged)."""
    return tuple(
        x.replace(requires_grad=False) if _differentiable(x) else None
        for x in tree_iter((args, kwargs))
    )


def _is_in_place_name(name: str) -> bool:
    """An in-place variant by torch's naming: ``torch.Tensor.relu_``, ``torch.relu_``,
    ``torch._C._nn.elu_`` (the callable behind ``F.elu_``)."""
    method = name.rpartition(".")[2]
    return method.endswith("_") and not method.endswith("__") and method not in _REFUSED_METHODS


def _is_in_place_method(name: str) -> bool:
    return name.startswith("torch.Tensor.") and _is_in_place_name(name)


def _writes_first_argument_by_name(name: str, fn: Any, args: Sequence[Any]) -> bool:
    """Whether ``fn`` is, by its name, an in-place function of its first argument
    (``torch.relu_``), not a custom op whose schema says what it writes."""
    from thunder_ir.ops.fallback_mutating import written_arguments

    return (
        _is_in_place_name(name)
        and bool(args)
        and isinstance(args[0], (TensorProxy, torch.Tensor))
        and not written_arguments(fn)
    )


def _through_functional_variant(
    name: str, fn: Any, args: Sequence[Any], kwargs: dict[str, Any]
) -> Any:
    """``x.<method>_(...)``: recorded as ``torch_fallback_inplace``, or refused where torch has
    no functional variant of it."""
    from thunder_ir.ops.fallback_inplace import functional_variant_call

    if functional_variant_call(name.rpartition(".")[2], fn, args, kwargs) is None:
        raise TorchRunsItError(
            name,
            "it writes into its tensor in place, and torch has no functional variant of it",
        )
    return torch_fallback_inplace(name, *args, **kwargs)


def _in_place_meta(torch_name: str, /, *args: Any, **kwargs: Any) -> Any:
    """The in-place method's aten functional variant, recorded as a fallback op, then copied into
    the tensor (``fallback_inplace``); the tensor is the result, as in eager. Executors run the
    method itself where they keep the op whole."""
    from thunder_ir.ops.conversion import copy_
    from thunder_ir.ops.fallback_inplace import functional_variant_call

    method = torch_name.rpartition(".")[2]
    found = functional_variant_call(method, _resolve(torch_name), args, kwargs)
    assert found is not None, torch_name  # checked when the call was recorded
    op, call_args, call_kwargs = found
    if torch.Tag.nondeterministic_seeded in getattr(op, "tags", ()):
        # A random fill (normal_, bernoulli_): its values do not depend on the tensors' values,
        # and torch's derivative of it is zero (its functional variant has none).
        from thunder_ir import prims

        def detached(x: Any) -> Any:
            return prims.stop_gradient(x) if isinstance(x, TensorProxy) and x.requires_grad else x

        call_args = tuple(tree_map(detached, tuple(call_args)))
        call_kwargs = tree_map(detached, dict(call_kwargs))
        if isinstance(args[0], TensorProxy) and args[0].requires_grad:
            # Eager refuses a leaf (or a view of one) before it draws; the copy_ below would
            # raise only after the draw.
            check_in_place_allowed(args[0])
        filled = call_torch_fallback(op, call_args, call_kwargs)
        if isinstance(args[0], TensorProxy) and args[0].requires_grad:
            # The tensor still requires grad afterwards, and receives zeros (torch's derivative).
            filled = prims.written_without_grad(args[0], filled, False)
        return copy_(args[0], filled)
    return copy_(args[0], call_torch_fallback(op, call_args, call_kwargs))


torch_fallback_inplace = torchop(
    name="torch_fallback_inplace", tags=(OpTag.TORCH_FALLBACK, OpTag.IN_PLACE)
)(_in_place_meta)


def _check_in_place_meta(target: Any) -> None:
    return None


def _check_in_place_allowed(target: torch.Tensor) -> None:
    if not (torch.is_grad_enabled() and target.requires_grad):
        return
    base = target._base
    if base is not None and base.is_leaf and base.requires_grad:
        raise RuntimeError(
            "a view of a leaf Variable that requires grad is being used in an in-place operation."
        )
    if target.is_leaf:
        raise RuntimeError(
            "a leaf Variable that requires grad is being used in an in-place operation."
        )


# Eager's check of an in-place op's tensor (not a leaf requiring grad, nor a view of one) where
# the op itself is recorded as a random draw and a copy: raises before the draw, as eager does.
# In program order with the draws (and, as a random op, undone with them by a failing decision).
check_in_place_allowed = make_prim(
    "check_in_place_allowed",
    _check_in_place_meta,
    tags=(OpTag.RANDOM, OpTag.DONT_DCE),
    impl=_check_in_place_allowed,
)


def _method_name(name: str) -> str:
    """``x.stride`` of ``torch.Tensor.stride``; of an operator overload
    (``torch.ops.prims._tensor_version.default``), its operator's name."""
    parts = name.split(".")
    if name.startswith("torch.ops.") and len(parts) == 5:
        return parts[3]
    return parts[-1]


# Torch callables whose kernels check the values of their tensor inputs and raise, by their
# last name: linear algebra that fails on singular or not positive-definite matrices (or does
# not converge), indexing with indices out of range, losses with targets out of range.
_CHECKING_VALUES = frozenset(
    {
        "cholesky", "inverse", "svd", "pinverse", "matrix_power", "lu", "lstsq",
        "put", "take", "take_along_dim", "gather", "scatter", "scatter_add", "scatter_reduce",
        "index_select", "index_add", "index_copy", "index_fill", "index_put", "index_reduce",
        "embedding", "embedding_bag", "one_hot", "bincount", "histc", "histogram",
        "histogramdd", "searchsorted", "repeat_interleave", "segment_reduce", "max_unpool1d",
        "max_unpool2d", "max_unpool3d", "nll_loss", "nll_loss_nd", "nll_loss2d",
        "cross_entropy", "multi_margin_loss", "multilabel_margin_loss", "ctc_loss",
        "binary_cross_entropy", "multinomial", "_assert_async",
    }
)  # fmt: skip
# ``torch.linalg`` callables that never raise on values.
_LINALG_UNCHECKED = frozenset(
    {
        "vector_norm", "cross", "vecdot", "matmul", "diagonal", "multi_dot",
        "householder_product", "matrix_exp", "det", "slogdet", "vander", "solve_triangular",
    }
)  # fmt: skip


def checks_values(name: str, kwargs: Mapping[str, Any]) -> bool:
    """Whether the torch callable ``name`` (a fallback's, ``thunder_ir.symbol.raises_on_values``)
    may raise for some values of its tensor inputs. The ``_ex`` variants of ``torch.linalg``
    raise only with ``check_errors=True``."""
    name = split_autocast_name(split_flags_name(name)[0])[0]
    last = _method_name(name)
    if name.startswith("torch.linalg."):
        if last.endswith("_ex"):
            return bool(kwargs.get("check_errors", False))
        return last not in _LINALG_UNCHECKED
    return last in _CHECKING_VALUES or last.rstrip("_") in _CHECKING_VALUES


# Callables whose result is a quantized tensor, which their fake and meta kernels do not show
# (they answer float32): torch runs them.
_QUANTIZED_RESULTS = frozenset(
    {
        "quantize_per_tensor", "quantize_per_channel", "quantize_per_tensor_dynamic",
        "_make_per_tensor_quantized_tensor", "_make_per_channel_quantized_tensor",
        "_empty_affine_quantized", "_empty_per_channel_affine_quantized", "empty_quantized",
    }
)  # fmt: skip
_QUANTIZED_REASON = "its result is a quantized tensor, which thunder does not support"


def _refusal_by_name(name: str) -> str | None:
    method = _method_name(name)
    if method in _STORAGE_WRITES:
        return "it changes its tensor's storage or shape in place, which the trace does not model"
    if method == "numpy":
        return "it hands the tensor's data to NumPy, which the trace does not model"
    if method in _AUTOGRAD_HOOKS:
        return "it gives torch's backward a hook to run, which the trace does not model"
    if method in _REFUSED_METHODS:
        return "its result is memory layout or autograd bookkeeping, which the trace does not model"
    if name.startswith("torch.Tensor.") and method.endswith("_") and not method.endswith("__"):
        return (
            "it writes into its tensor in place, which thunder records only for ops it mirrors; "
            "use the out-of-place form"
        )
    return None


def fallback_refusal(fn: Any, args: Sequence[Any], kwargs: dict[str, Any]) -> str | None:
    """Why the fallback would refuse calling ``fn`` (on real tensors or proxies), or None. For
    ``thunder.examine``: runs the callable on fake tensors only."""
    name = torch_callable_name(fn)
    if name is None:
        return "no qualified name denotes this callable"
    if _method_name(name) in _RUN_BY_TORCH | _QUANTIZED_RESULTS or kwargs.get("out") is not None:
        return None  # torch runs it (TorchRunsItError): the program runs split there
    if _is_in_place_method(name) or _writes_first_argument_by_name(name, fn, args):
        # Its functional variant and a copy, or (without one) torch runs it, split.
        return None
    reason = _refusal_by_name(name)
    if reason is not None:
        return reason
    try:
        _FakeRun(name, fn, args, kwargs)
    except DataDependentFallbackError:
        return None  # run on the call's values while tracing (torch_fallback_sized)
    except TorchRunsItError:
        return None  # the program runs split there
    except TorchFallbackError as e:
        return e.reason
    except Exception:  # eager raises too: not a refusal of the fallback
        return None
    return None


def _replay_device(run: _FakeRun, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """For a random op that gradients may flow through, the device whose generator it draws
    from (its outputs'); None otherwise."""
    if not run.random or not any(
        isinstance(p, TensorProxy) and p.requires_grad for p in tree_iter((args, kwargs))
    ):
        return None
    for o in tree_iter(_as_tree(run.out)):
        if isinstance(o, torch.Tensor) and o.device.type in ("cpu", "cuda"):
            return str(o.device) if o.device.type == "cpu" or o.device.index is not None else "cuda"
    return None


def _is_foreach_in_place(name: str, args: Sequence[Any]) -> bool:
    """``torch._foreach_mul_(tensors, ...)`` and its kind, on a list of proxies. Its writes do
    not show on fake tensors (no version counter moves), so its fake run looks like a view."""
    base = name.rpartition(".")[2]
    return (
        base.startswith("_foreach_")
        and base.endswith("_")
        and bool(args)
        and isinstance(args[0], (list, tuple))
        and bool(args[0])
        and all(isinstance(t, TensorProxy) for t in args[0])
    )


# Foreach ops whose scalar list is the keyword ``value`` of the per-tensor method.
_VALUE_KEYWORD = frozenset({"addcmul_", "addcdiv_", "addcmul", "addcdiv"})

# The foreach ops' argument names after the tensor list, in their schemas' order: a keyword
# argument becomes the positional one it names (the per-tensor methods name them otherwise:
# ``mul_(other)`` for ``_foreach_mul_(self, scalar)``).
_FOREACH_ARGUMENTS = (
    "other",
    "tensor1",
    "tensor2",
    "tensors1",
    "scalar",
    "scalars",
    "exponent",
    "weight",
)

# In-place foreach ops whose CPU kernel casts a number scalar to each tensor's dtype first, by
# the aten operator its per-tensor loop calls: ``mul_.Scalar`` reads the scalar cast, where the
# Tensor method computes with it in float32 (``_foreach_mul_(bf16 tensors, 0.99)`` multiplies
# by 0.98828125). Their backward multiplies by the scalar as given.
_CASTS_NUMBER_SCALAR = {"mul_": "torch.ops.aten.mul_.Scalar"}


def _foreach_positional(
    args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The foreach call's arguments with those given by keyword (``scalar=``, ``tensor2=``)
    placed at their positions."""
    if kwargs.keys().isdisjoint(_FOREACH_ARGUMENTS):
        return list(args), kwargs
    kw = dict(kwargs)
    named = [kw.pop(k) for k in _FOREACH_ARGUMENTS if k in kw]
    return [*args, *named], kw


def _scalar_of(scalars: TensorProxy, i: int, n: int) -> Any:
    """Element ``i`` of the scalars of a foreach op given as a tensor (torch.optim's Adam under
    compile: ``_stack_if_compiling``), as a 0-dim tensor: torch reads each as a number."""
    from thunder_ir.proxies import tensor_method
    from thunder_ir.utils import check

    check(
        scalars.device.type == "cpu",
        lambda: f"Expected scalars to be on CPU, got {scalars.device} instead.",
    )
    check(
        scalars.ndim == 1,
        lambda: f"Expected packed scalar Tensor to be of dimension 1. Got {scalars.ndim} instead.",
    )
    check(
        scalars.shape[0] == n,
        lambda: (
            "Expected length of scalars to match input of length "
            f"{n} but got {scalars.shape[0]} instead."
        ),
    )
    return tensor_method("__getitem__")(scalars, i)


def _listed_scalar(scalar: TensorProxy) -> TensorProxy:
    """A scalar given as a tensor in a list of scalars (torch.optim's Adamax under compile:
    ``step_size`` from step tensors): one element, read as a number as in the packed form."""
    from thunder_ir.utils import check

    check(
        scalar.numel() == 1,
        lambda: f"Expected a scalar tensor in the list of scalars, got shape {scalar.shape}.",
    )
    return scalar if scalar.ndim == 0 else scalar.reshape(())


def _casts_number_scalar(scalar: Any, t: TensorProxy) -> bool:
    """Whether a CPU ``_CASTS_NUMBER_SCALAR`` kernel reads ``scalar`` otherwise for ``t`` than
    the Tensor method does: a real number, and a dtype narrower than the float32 it computes in."""
    if isinstance(scalar, NumberProxy):
        number = scalar.python_type in (int, float)
    else:
        number = isinstance(scalar, (int, float)) and not isinstance(scalar, bool)
    return number and t.device.type == "cpu" and t.dtype.is_low_precision


def _number_scalar_cast(scalar: Any, t: TensorProxy) -> Any:
    """``scalar`` cast to ``t``'s dtype (``_casts_number_scalar``)."""
    if isinstance(scalar, NumberProxy):
        from thunder_ir.ops.factories import full

        return full((), scalar, dtype=t.dtype, device=t.device)
    return torch.tensor(scalar, dtype=to_torch_dtype(t.dtype)).item()


def _gradient_flows_into(t: TensorProxy) -> bool:
    trace = get_tracectx()
    return torch.is_grad_enabled() and (trace is None or trace.grad_enabled) and t.requires_grad


def _per_tensor_calls(
    method: str, args: Sequence[Any], kwargs: dict[str, Any]
) -> list[tuple[list[Any], dict[str, Any]]] | None:
    """The arguments of ``tensors[i].<method>(...)`` for each ``i`` (foreach ops are defined as
    that loop); None where an argument does not split so (a tensor of scalars)."""
    args, kwargs = _foreach_positional(args, kwargs)
    tensors = args[0]
    n = len(tensors)
    calls = []
    for i in range(n):
        elem: list[Any] = []
        for a in args[1:]:
            if isinstance(a, (list, tuple)):
                if len(a) != n:
                    return None
                elem.append(a[i])
            else:
                elem.append(a)
        kw = dict(kwargs)
        if method in _VALUE_KEYWORD and len(elem) == 3:
            scalar = elem.pop()
            if isinstance(scalar, TensorProxy):
                listed = isinstance(args[3], (list, tuple))
                scalar = _listed_scalar(scalar) if listed else _scalar_of(scalar, i, n)
            kw["value"] = scalar
        calls.append((elem, kw))
    return calls


def _foreach_in_place(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    """A foreach write as the per-tensor in-place ops it is defined as (``mul_`` on each), or,
    where no op mirrors that method, its functional variant (one fallback op computing every new
    value) and a ``copy_`` into each tensor: writes the alias analysis sees, as eager's."""
    from thunder_ir.ops.elementwise import check_in_place_result
    from thunder_ir.proxies import _TENSOR_METHODS, tensor_method

    tensors = args[0]
    base = name.rpartition(".")[2]
    method = base[len("_foreach_") :]
    calls = _per_tensor_calls(method, args, kwargs) if method in _TENSOR_METHODS else None
    if calls is not None:
        for t, (elem, kw) in zip(tensors, calls):
            aten = _CASTS_NUMBER_SCALAR.get(method)
            if aten is not None and len(elem) == 1 and _casts_number_scalar(elem[0], t):
                if _gradient_flows_into(t):  # torch's operator: its forward and its backward
                    call_torch_fallback(_resolve(aten), (t, *elem), kw, name=aten)
                    continue
                elem = [_number_scalar_cast(elem[0], t)]
            tensor_method(method)(t, *elem, **kw)
        # torch._foreach_add_ returns its list argument itself; the aten operator, nothing.
        return None if name.startswith("torch.ops.") else tensors
    new = call_torch_fallback(getattr(torch, base[:-1]), args, kwargs)
    for t, value in zip(tensors, new):
        check_in_place_result(value, t)  # (copy_ would cast and broadcast silently)
        tensor_method("copy_")(t, value)
    return None if name.startswith("torch.ops.") else tensors


def _is_foreach_with_tensor_scalars(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """``torch._foreach_addcdiv(tensors, t1, t2, scalars)`` with the scalars as a tensor, or as
    a list of tensors (torch.optim's Adamax under compile): its fake kernel refuses them (it
    reads them as numbers), so it is recorded per tensor."""
    if name.rpartition(".")[2] not in ("_foreach_addcdiv", "_foreach_addcmul"):
        return False
    args, _ = _foreach_positional(args, kwargs)
    scalars = args[3] if len(args) == 4 else None
    if isinstance(scalars, (list, tuple)):
        scalars = next((s for s in scalars if isinstance(s, TensorProxy)), None)
    return (
        isinstance(scalars, TensorProxy)
        and isinstance(args[0], (list, tuple))
        and all(isinstance(t, TensorProxy) for t in args[0])
    )


def _foreach_per_tensor(name: str, args: Sequence[Any], kwargs: dict[str, Any]) -> Any:
    from thunder_ir.proxies import tensor_method

    method = name.rpartition(".")[2][len("_foreach_") :]
    calls = _per_tensor_calls(method, args, kwargs)
    if calls is None:
        raise TorchFallbackError(name, "its lists of tensors differ in length")
    return [tensor_method(method)(t, *elem, **kw) for t, (elem, kw) in zip(args[0], calls)]


def _call_writing(
    name: str,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    written: tuple[int, ...],
    run: _FakeRun | None,
) -> Any:
    """Records a call that writes into the tensors at the flat positions ``written`` of
    ``(args, kwargs)`` (its fake run says so, ``run``; None where it has no fake kernel): its
    functional variant (``fallback_mutating.WRITING``) as a fallback op, then a ``copy_`` into
    each written tensor, writes the alias analysis sees. Returns what the callable returns."""
    from thunder_ir.ops.conversion import copy_
    from thunder_ir.ops.fallback_mutating import writing_variant_name

    if split_autocast_name(name)[1] is not None:
        raise TorchRunsItError(name, "it writes into an argument in place under torch.autocast")
    if run is not None and run.random:
        raise TorchRunsItError(name, "it writes into an argument in place and draws random numbers")
    leaves = tree_flatten((tuple(args), dict(kwargs)))[0]
    groups: dict[int, list[int]] = {}
    for i in written:
        groups.setdefault(id(leaves[i]), [])
    for i, x in enumerate(leaves):
        if id(x) in groups:
            groups[id(x)].append(i)
    variant = writing_variant_name(name, list(groups.values()))
    if run is None:
        try:  # (an operator that only writes needs no fake kernel: ``WRITING``)
            out, *new = torch_fallback(variant, *args, **kwargs)
        except DataDependentFallbackError:
            (out, *new), _ = torch_fallback_sized(variant, *args, **kwargs)
        if any(isinstance(o, TensorProxy) for o in tree_iter(out)):
            # Which result is a written argument itself shows only on a fake run.
            raise TorchRunsItError(
                name, "it writes into an argument, returns a tensor, and has no fake kernel"
            )
    else:
        _check_result_dtypes(name, run.out)
        out, *new = torch_fallback(variant, *args, **kwargs)
    trace = get_tracectx()
    for group, value in zip(groups.values(), new):
        if run is not None and trace is not None and set(group) <= run.written_without_grad:
            # Eager's write is one autograd does not see (no_grad, a detached alias): as eager,
            # new values and no differentiable in-place op (one on a leaf would raise).
            old_mode, trace.grad_enabled = trace.grad_enabled, False
            try:
                copy_(leaves[group[0]], value)
            finally:
                trace.grad_enabled = old_mode
        else:
            copy_(leaves[group[0]], value)
    if run is None:
        return out
    # A result that is a written argument is that argument, as in eager.
    out_leaves, spec = tree_flatten(out)
    out = tree_unflatten(
        [o if at is None else leaves[at] for o, at in zip(out_leaves, run.returns_written)], spec
    )
    kind = type(run.out)
    if kind is not tuple and isinstance(run.out, tuple) and hasattr(kind, "n_fields"):
        return kind(out)
    return out


def _check_result_dtypes(name: str, out: Any) -> None:
    """A call whose result has a dtype the IR has none for (complex32), or is not a dense
    strided tensor (nested, sparse, mkldnn, quantized: a proxy would answer ``is_sparse``,
    ``layout``, ``dtype`` otherwise and ops would treat it as dense): torch runs it."""
    for o in tree_iter(_as_tree(out)):
        if isinstance(o, torch.Tensor) and o.is_nested:
            raise TorchRunsItError(
                name, "its result is a nested tensor, which thunder does not support"
            )
        if isinstance(o, torch.Tensor) and o.is_quantized:
            raise TorchRunsItEagerlyError(name, _QUANTIZED_REASON)
        if isinstance(o, torch.Tensor) and o.layout != torch.strided:
            raise TorchRunsItError(
                name,
                f"its result is a {o.layout} tensor (not dense), which thunder does not support",
            )
        if isinstance(o, torch.Tensor) and o.dtype not in _KNOWN_DTYPES:
            raise TorchRunsItError(
                name, f"its result has dtype {o.dtype}, which thunder does not support"
            )


_KNOWN_DTYPES = frozenset(filter(None, map(to_torch_dtype, all_dtypes)))


def _kernel_written(
    fn: Any, args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[KernelWrites, list[tuple[int, str]]] | None:
    """What an aten callable writes in its kernel (``kernel_writes``) and the arguments it
    writes on this call; None where it writes none."""
    from thunder_ir.ops.fallback_mutating import kernel_writes, written_by_call

    writes = kernel_writes(fn)
    if writes is None:
        return None
    if writes.training is not None:  # the flag is part of what this program assumes
        i, arg_name, _ = writes.training
        if i < len(args):
            _specialize(args[i])
        elif arg_name in kwargs:
            _specialize(kwargs[arg_name])
    args = tuple(tree_map(_specialize_number, tuple(args)))
    kwargs = tree_map(_specialize_number, dict(kwargs))
    written = written_by_call(writes, args, kwargs, lambda x: isinstance(x, TensorProxy))
    return (writes, written) if written else None


def _specialize_number(x: Any) -> Any:
    return x.value if isinstance(x, NumberProxy) else x


def _call_on_copies(
    name: str,
    written: tuple[KernelWrites, list[tuple[int, str]]],
    args: Sequence[Any],
    kwargs: dict[str, Any],
) -> Any:
    """A call of an aten callable that writes arguments in its kernel (``kernel_writes``):
    recorded as the callable run on copies of them (``fallback_mutating.ON_COPIES``), then a
    ``copy_`` into each, a write the trace sees. The backward's re-run writes copies only."""
    from thunder_ir import prims

    functional = f"thunder_ir.ops.fallback_mutating.ON_COPIES.{name}"
    out, *new = call_torch_fallback(_resolve(functional), args, kwargs, name=functional)
    writes, positions = written
    for (i, arg_name), value in zip(positions, new):
        target = args[i] if i < len(args) else kwargs[arg_name]
        prims.copy_(value, target, bumps_version=writes.bumps_version)
    if writes.result_type is not None and isinstance(out, tuple):
        return writes.result_type(out)
    return out


def _subclass_target(args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    cls = args[1] if len(args) > 1 else kwargs.get("cls")
    return isinstance(cls, type) and cls is not torch.Tensor


def call_torch_fallback(
    fn: Any, args: Sequence[Any], kwargs: dict[str, Any], *, name: str | None = None
) -> Any:
    """Records a call of the torch callable ``fn`` (which no op mirrors; ``name`` its qualified
    name where ``torch_callable_name`` finds none) in the current trace and returns its outputs
    (proxies; a torch.return_types result keeps its type). Raises ``TorchFallbackError`` where
    the call cannot be recorded with eager's semantics."""
    from thunder_ir.ops.fallback_mutating import call_mutating_custom_op, written_arguments

    name = name or torch_callable_name(fn)
    if name is None:
        raise TorchFallbackError(
            getattr(fn, "__qualname__", repr(fn)),
            "it is TorchScript (torch.jit.script), which thunder does not trace"
            if isinstance(fn, torch.ScriptMethod | torch.jit.ScriptFunction)
            else "no qualified name denotes this callable",
        )
    reason = _refusal_by_name(name)
    if reason is not None and _method_name(name) in _RUN_BY_TORCH:
        raise TorchRunsItError(name, reason)
    if _method_name(name) in _QUANTIZED_RESULTS:
        raise TorchRunsItEagerlyError(name, _QUANTIZED_REASON)
    if fn is torch.Tensor.as_subclass and _subclass_target(args, kwargs):
        # A tensor of the subclass (whose __torch_function__ may decide what later calls
        # return) has no proxy; its fake run cannot make one either.
        raise TorchRunsItEagerlyError(name, "it makes a tensor of a subclass of torch.Tensor")
    if reason is None and kwargs.get("out") is not None:
        raise TorchRunsItError(name, "it writes into its out= argument")
    if reason is None and draws_from_own_generator(tree_iter((tuple(args), dict(kwargs)))):
        reason = (
            "a torch.Generator made inside the function would become a constant of the compiled "
            "program; pass it in, draw from the default generator (seeded with "
            "torch.manual_seed), or make the call outside the jitted function"
        )
    in_place = reason is not None and _is_in_place_method(name)
    if reason is not None and not (in_place and args and isinstance(args[0], TensorProxy)):
        raise TorchFallbackError(name, reason)
    if reason is None and _is_foreach_in_place(name, args):
        check_foreach_arguments(name, fn, args, kwargs)
        return _foreach_in_place(name, args, kwargs)
    if reason is None and _is_foreach_with_tensor_scalars(name, args, kwargs):
        return _foreach_per_tensor(name, args, kwargs)
    if not in_place:
        written = _kernel_written(fn, args, kwargs)
        if written is not None:
            return _call_on_copies(name, written, args, kwargs)
    autocast = None if in_place else _recording_autocast(args, kwargs)
    flags = () if in_place else flags_for(args, kwargs)
    if not in_place and can_read_data() and _reads_data_sizes(args, kwargs):
        # Sizes read from data: run on this call's values, not specialized to them.
        if autocast is not None:
            name = fallback_under_autocast(name, autocast)
        return _call_sized(flags_name(name, flags) if flags else name, args, kwargs)
    writes_first = _writes_first_argument_by_name(name, fn, args)
    if in_place or writes_first:
        args, kwargs = _specialized(args, kwargs)
    if in_place:
        return _through_functional_variant(name, fn, args, kwargs)
    if writes_first:
        from thunder_ir.ops.fallback_inplace import functional_variant_call

        # torch.relu_(t), F.elu_(t): recorded as the in-place Tensor methods are, where torch
        # has a functional variant (else the fake run below says what it writes).
        if functional_variant_call(name.rpartition(".")[2], fn, args, kwargs) is not None:
            return torch_fallback_inplace(name, *args, **kwargs)
    run_fn = fn
    if autocast is not None:  # the fake run's dtypes are then eager's
        name = fallback_under_autocast(name, autocast)
        run_fn = _resolve(name)
    written_name = name
    if flags:  # (a call that writes into its arguments runs as they are)
        name = flags_name(name, flags)
        run_fn = _resolve(name)
    try:
        run = _fake_run(name, run_fn, args, kwargs, writes=True)
    except DataDependentFallbackError as e:
        args, kwargs = _specialized(args, kwargs)
        if written_arguments(fn):  # no fake implementation: its functional variant runs
            return call_mutating_custom_op(fn, args, kwargs)
        if not can_read_data():
            raise
        if e.written:  # no meta kernel (``_fused_sgd_``): run on the call's values
            return _call_writing(written_name, args, kwargs, e.written, None)
        return _call_sized(name, args, kwargs)
    except TorchFallbackError:
        if not written_arguments(fn):
            raise
        args, kwargs = _specialized(args, kwargs)
        return call_mutating_custom_op(fn, args, kwargs)  # it writes the arguments it declares
    if run.written:
        args, kwargs = _specialized(args, kwargs)
        if written_arguments(fn):
            return call_mutating_custom_op(fn, args, kwargs)  # it writes the arguments it declares
        return _call_writing(written_name, args, kwargs, run.written, run)
    _check_result_dtypes(name, run.out)
    has_tensor_out = any(isinstance(o, torch.Tensor) for o in tree_iter(_as_tree(run.out)))
    if not has_tensor_out and not run.random:
        # A value computed from metadata only (dtype, shape): the same for every call the
        # compiled program serves, which guards those.
        return run.out
    replay_device = _replay_device(run, args, kwargs)
    if replay_device is not None and any(
        isinstance(x, torch.Generator) for x in tree_iter((args, kwargs))
    ):
        raise TorchFallbackError(
            name,
            "gradients flow through it and it draws from a torch.Generator of its own, which "
            "its backward cannot draw from again; draw from the default generator",
        )
    if replay_device is not None:
        from thunder_ir.ops.random_state import get_rng_state

        state = get_rng_state(replay_device)
        out = torch_fallback_random_replay(name, state, replay_device, *args, **kwargs)
    else:
        sym = (
            torch_fallback_random
            if run.random
            else torch_fallback_view
            if run.view
            else torch_fallback
        )
        out = sym(name, *args, **kwargs)
    kind = type(run.out)
    if kind is not tuple and isinstance(run.out, tuple) and hasattr(kind, "n_fields"):
        return kind(out)
    return out
