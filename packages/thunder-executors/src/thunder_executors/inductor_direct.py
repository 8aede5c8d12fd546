"""Fusion regions compiled by inductor without dynamo, checked by two C++ guards per call.

A region is straight-line torch calls. Where its inputs are tensors of static shapes, thunder's
prologue has already guarded the program they come from, so dynamo's frame evaluation and its
guards over every input buy nothing there and cost much: about 150 us per call on a BERT
region of 40 inputs on a CPU, more than the fused kernels gain. ``compile_direct`` traces the
region to an FX graph with ``make_fx`` on fake tensors (a Python decision on tensor data raises
there, and the region keeps dynamo) and compiles it with ``torch._inductor.compile``, inductor's
entry for graphs captured without dynamo.

The compiled code assumes what the example inputs were: each tensor's sizes, strides, dtype,
device and requires_grad, and the thread's torch state (grad mode, autocast). Thunder's prologue
checks sizes, dtypes and devices, not strides. So each call checks all of it again, in two C++
calls built from the first call that matches the examples (torch's ``TensorGuards`` and
``GlobalStateGuard``, what dynamo itself checks); a call that fails them runs the region's torch
calls, never the compiled code.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from thunder_executors.background_compile import Ambient, import_compile_stack

__all__ = [
    "EAGER_NUMERICS",
    "DirectProgram",
    "compile_direct",
    "keep_mutation_order_in_inductor",
    "without_view_bits",
]

log = logging.getLogger(__name__)

# Inductor's settings for thunder's regions, applied while it compiles one (not globally, so a
# user's own torch.compile keeps its settings). Eager rounds every fp16/bf16 result (and an
# explicit ``x.half().float()``); inductor computes fused low-precision ops in fp32 unless told
# to round as eager does.
EAGER_NUMERICS: Mapping[str, Any] = {"emulate_precision_casts": True}


def _has_view_bit(t: torch.Tensor) -> bool:
    return t.is_neg() or t.is_conj()


def without_view_bits(args: Sequence[Any]) -> list[Any]:
    """``args`` with every lazily negated or conjugated tensor (``z.conj().imag``, ``z.conj()``)
    resolved into a plain one. Compiled code (inductor's, with or without dynamo; nvFuser's;
    triton's) reads a tensor's storage and ignores these bits: it would compute with the values
    not negated (torch.compile of ``lambda x: x * 2`` does so too)."""
    out = list(args)
    for i, a in enumerate(out):
        if isinstance(a, torch.Tensor) and _has_view_bit(a):
            out[i] = a.resolve_neg().resolve_conj()
    return out


def _layout(t: torch.Tensor) -> tuple[Any, ...]:
    # The view bits: a compiled program is only ever built for (and armed by) plain tensors.
    return (tuple(t.shape), t.stride(), t.dtype, t.device, t.requires_grad, _has_view_bit(t))


_ARM_ATTEMPTS = 8


class DirectProgram:
    """A region compiled by inductor, run where a call's inputs and torch state are the
    compiled ones, and ``otherwise`` (the region's torch calls) elsewhere."""

    def __init__(
        self,
        compiled: Callable[..., Any],
        examples: Sequence[torch.Tensor],
        ambient: Ambient,
        otherwise: Callable[..., Any],
    ) -> None:
        self._compiled = compiled
        self._layouts = [_layout(t) for t in examples]
        self._ambient = ambient
        self._otherwise = otherwise
        self._tensors: Any = None  # the C++ guards, made on the first call that matches
        self._state: Any = None
        self.fallback_calls = 0  # calls that ran the torch calls (their inputs differed)

    def __call__(self, *args: Any) -> Any:
        if self._runs(args):
            return tuple(self._compiled(*args))
        # A negated or conjugated view fails the guards (a dispatch key of its own): resolved,
        # it may pass them.
        plain = without_view_bits(args)
        if any(p is not a for p, a in zip(plain, args)) and self._runs(plain):
            return tuple(self._compiled(*plain))
        self.fallback_calls += 1
        return self._otherwise(*args)

    def run_unguarded(self, *args: Any) -> tuple[Any, ...]:
        """The compiled program's outputs on ``args``, which must be the examples it was compiled
        for (no guard checks them)."""
        return tuple(self._compiled(*without_view_bits(args)))

    def _runs(self, args: Sequence[Any]) -> bool:
        """Whether the compiled program may run on ``args``."""
        state = self._state
        if state is None:
            # Calls whose inputs keep another layout than the examples' would repeat the Python
            # check forever: after a few, they go straight to the torch calls.
            return self.fallback_calls < _ARM_ATTEMPTS and self._arm(args)
        return bool(state.check() and self._tensors.check(*args))

    def _arm(self, args: Sequence[Any]) -> bool:
        """Makes the guards from ``args`` when they and this thread's torch state are the
        compiled ones (checked in Python, once)."""
        if len(args) != len(self._layouts):
            return False
        if Ambient.of_this_thread(compiler_settings=False) != self._ambient:
            return False
        if not all(
            isinstance(a, torch.Tensor) and type(a) in (torch.Tensor, torch.nn.Parameter)
            for a in args
        ):
            return False
        if [_layout(a) for a in args] != self._layouts:
            return False
        from torch._C._dynamo import guards

        make: Any = guards.TensorGuards  # its stub types the per-tensor lists as flat
        self._tensors = make(
            *args,
            dynamic_dims_sizes=[list(a.shape) for a in args],
            dynamic_dims_strides=[list(a.stride()) for a in args],
        )
        self._state = guards.GlobalStateGuard()
        return True


_CACHE_TAG = "thunder:inductor-mutation-order"


def keep_mutation_order_in_inductor() -> None:
    """Makes inductor's CPU scheduler keep a read of a buffer written in place after that write.

    Inductor lowers a scatter or an index_put (``scatter_add``, ``index_add``, the backward of a
    max pool, of ``unfold``, of an embedding) as a write into a fresh buffer, and names a later
    read of the buffer after the write (``mutation_renames``). Fusing nodes of other loop ranges,
    its CPU backend recomputes a node's body and dependencies (``recompute_size_and_body``) and,
    in torch up to 2.13, renames them only where the node has ordering-only dependencies: the
    reader then runs before the write and reads the zeros (pytorch#185509, a silently wrong
    gradient of max_pool2d next to a reflection pad's). Backports pytorch#185873 (rename always);
    renaming twice changes nothing, so a torch with the fix is unaffected. Idempotent."""
    try:
        from torch._inductor import scheduler
    except ImportError:
        return
    node = getattr(scheduler, "SchedulerNode", None)
    original = getattr(node, "recompute_size_and_body", None)
    if original is None or getattr(original, "_keeps_mutation_renames", False):
        return

    @functools.wraps(original)
    def recompute_size_and_body(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        renames = getattr(self, "mutation_renames", None)
        if renames:
            self.set_read_writes(self.read_writes.rename(renames))

    recompute_size_and_body._keeps_mutation_renames = True  # type: ignore[attr-defined]
    node.recompute_size_and_body = recompute_size_and_body  # type: ignore[union-attr]
    # Programs compiled before, and cached on disk, may hold the misordered kernels: compiles
    # from now on are cached under other keys.
    tag = torch.compiler.config.cache_key_tag
    if _CACHE_TAG not in tag:
        torch.compiler.config.cache_key_tag = f"{tag};{_CACHE_TAG}" if tag else _CACHE_TAG


def compile_direct(
    fn: Callable[..., Any],
    examples: Sequence[Any],
    otherwise: Callable[..., Any],
    inductor_config: Mapping[str, Any] = EAGER_NUMERICS,
) -> DirectProgram | None:
    """``fn`` compiled by inductor without dynamo for CPU tensors of ``examples``' layouts, or
    None where it does not apply (an argument that is not a plain CPU tensor, a torch without
    the guards, or ``fn`` not traceable on fake tensors): then dynamo compiles it.
    ``inductor_config`` is patched in while tracing (``make_fx`` reads
    ``emulate_precision_casts``) and compiling."""
    if not examples or not all(
        isinstance(e, torch.Tensor)
        and type(e) in (torch.Tensor, torch.nn.Parameter)
        and e.device.type == "cpu"
        for e in examples
    ):
        return None
    examples = without_view_bits(examples)
    try:
        import_compile_stack()  # the caller's thread may compile while the compile thread imports
        keep_mutation_order_in_inductor()
        from torch._C._dynamo.guards import GlobalStateGuard, TensorGuards  # noqa: F401
        from torch._guards import TracingContext, tracing
        from torch._inductor import config
        from torch._inductor.compile_fx import compile_fx
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.proxy_tensor import make_fx
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        # Inductor's on-disk caches (FX graph, AOTAutograd) serve only compiles whose fake mode
        # has a shape env, which a compile without dynamo lacks unless given one: without it
        # every process compiled every region anew. The shapes stay static
        # (``ignore_shape_env``), as the guards above assume.
        fake_mode = FakeTensorMode(
            allow_non_fake_inputs=True, shape_env=ShapeEnv(), static_shapes=True
        )
        with config.patch(dict(inductor_config)):
            # Constant tensors the region reads from its globals are real tensors, not inputs.
            graph = make_fx(fn, tracing_mode="fake", _allow_non_fake_inputs=True)(*examples)
            with tracing(TracingContext(fake_mode)):
                # (a callable for a graph's compile; the other types are ahead-of-time's)
                compiled: Any = compile_fx(graph, list(examples), ignore_shape_env=True)
    except Exception as e:  # untraceable without dynamo (a decision on data), or no such API
        log.debug("fusion region compiled through dynamo: %s: %s", type(e).__name__, e)
        return None
    ambient = Ambient.of_this_thread(compiler_settings=False)
    return DirectProgram(compiled, examples, ambient, otherwise)
