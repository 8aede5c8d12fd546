"""The torch.compile executor ("torchcompile"): fusion regions compiled by inductor.

A region becomes a small Python function of torch calls (the torch executor's translation of its
prims, high-level ops such as attention kept whole; printed like any trace) and that function is
compiled by ``torch.compile``. Compiled
regions are cached by their printed source (with names made canonical), so the same region in a
retraced program, or in every layer of a model, reuses one compiled program. Compilation happens on a region's first call; its duration is recorded on the
region (``CompiledRegion.compile_seconds``) and summed by ``ExecutionTrace.compile_seconds()``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from thunder_executors.executor import FusionExecutor, register_executor
from thunder_executors.torch_executor import torch_executor
from thunder_executors.torch_ops_executor import torch_ops_executor
from thunder_ir import BoundSymbol, NumberProxy, Proxy, Symbol, TensorProxy, Trace, prims
from thunder_ir.pytree import tree_map
from thunder_ir.tags import OpTag

__all__ = ["CompiledRegion", "TorchCompileExecutor", "region_trace", "torchcompile_executor"]

# Symbols with effects or ambient state stay outside regions: inductor reorders freely and draws
# random numbers its own way.
_NOT_FUSIBLE = frozenset(
    {OpTag.PROLOGUE, OpTag.RETURN, OpTag.IN_PLACE, OpTag.RANDOM, OpTag.DONT_DCE}
)

_FUSIBLE_FALLBACK = frozenset({OpTag.TORCH_FALLBACK})
_VIEWS = frozenset({OpTag.VIEW, OpTag.MAY_RETURN_VIEW})


def region_trace(
    name: str, region: Sequence[BoundSymbol], inputs: Sequence[Proxy], outputs: Sequence[Proxy]
) -> Trace:
    """The region as a trace of its own: inputs as arguments, outputs returned as a tuple."""
    body = [*region, prims.python_return.bind(tuple(outputs), output=None)]
    return Trace(name, args=inputs, bound_symbols=body)


def _torch_calls(bsyms: Sequence[BoundSymbol]) -> list[BoundSymbol]:
    """The region as torch calls: high-level ops torch runs whole stay whole (inductor has its
    own lowerings and patterns for attention, normalizations...), other composites decompose."""
    out: list[BoundSymbol] = []
    for b in bsyms:
        if b.sym.is_prim or OpTag.TORCH_FALLBACK in b.sym.tags:
            out.append(torch_executor.translate(b))
        elif torch_ops_executor.claims(b):
            out.append(torch_ops_executor.translate(b))
        else:
            out.extend(_torch_calls(b.subsymbols))
    return out


def _canonical(
    region: Sequence[BoundSymbol], inputs: Sequence[Proxy], outputs: Sequence[Proxy]
) -> tuple[list[BoundSymbol], list[Proxy], list[Proxy]]:
    """The region with its proxies renamed in order of appearance (``a0, a1`` for inputs,
    ``t0, t1`` for the rest): equal computations then print equal source and share one compiled
    program, whatever the names in the traces they come from (the same block in every layer)."""
    renamed: dict[str, Proxy] = {}
    counts = {"a": 0, "t": 0}

    def rename(x: Any, prefix: str = "t") -> Any:
        if not isinstance(x, (TensorProxy, NumberProxy)):
            return x
        new = renamed.get(x.name)
        if new is None:
            new = x.replace(name=f"{prefix}{counts[prefix]}")
            counts[prefix] += 1
            renamed[x.name] = new
        return new

    new_inputs = [rename(p, "a") for p in inputs]
    new_region = [
        b.replace(
            args=tree_map(rename, b.args),
            kwargs=tree_map(rename, b.kwargs),
            output=tree_map(rename, b.output),
        )
        for b in region
    ]
    return new_region, new_inputs, [rename(p) for p in outputs]


def _has_symbolic_sizes(inputs: Sequence[Proxy]) -> bool:
    return any(
        isinstance(p, NumberProxy)
        or (isinstance(p, TensorProxy) and not all(isinstance(d, int) for d in p.shape))
        for p in inputs
    )


class CompiledRegion:
    """A region's Python function, compiled by torch.compile on the first call."""

    def __init__(self, source: str, fn: Callable[..., Any], options: dict[str, Any]) -> None:
        self.source = source
        self.fn = fn
        self.options = options
        self.compile_seconds = 0.0
        self.calls = 0
        self._compiled: Callable[..., Any] | None = None
        self._lock = threading.Lock()

    def __call__(self, *args: Any) -> Any:
        compiled = self._compiled
        if compiled is not None:
            return compiled(*args)
        with self._lock:
            if self._compiled is None:
                start = time.perf_counter()
                fn = torch.compile(self.fn, **self.options)
                out = fn(*args)  # compiles now (dynamo is lazy)
                self.compile_seconds += time.perf_counter() - start
                self._compiled = fn
                self.calls += 1
                return out
        return self._compiled(*args)


class TorchCompileExecutor(FusionExecutor):
    """Fuses prims the torch executor can run into regions compiled by inductor."""

    def __init__(self, name: str = "torchcompile", **compile_options: Any) -> None:
        super().__init__(name)
        self.compile_options: dict[str, Any] = {"dynamic": False, **compile_options}
        # Printed region source -> its compiled region (a memo: equal source, equal program).
        self._cache: dict[str, CompiledRegion] = {}
        self._cache_lock = threading.Lock()

    def availability(self) -> tuple[bool, str]:
        if not hasattr(torch, "compile"):
            return False, "this torch has no torch.compile"
        return True, ""

    def can_fuse(self, bsym: BoundSymbol) -> bool:
        """Prims the torch executor runs, without effects; and composite ops whose whole
        decomposition is such prims (decomposed inside the region, kept whole elsewhere)."""
        if bsym.sym.tags & _NOT_FUSIBLE:
            return False
        if bsym.sym.tags >= _FUSIBLE_FALLBACK and not _VIEWS & bsym.sym.tags:
            # A torch callable no op mirrors (thunder_ir.ops.fallback): dynamo traces the call.
            return all(isinstance(o, TensorProxy) for o in bsym.flat_proxy_outs)
        if not bsym.sym.is_prim:
            return bool(bsym.subsymbols) and all(self.can_fuse(s) for s in bsym.subsymbols)
        outs = bsym.flat_proxy_outs
        if not outs or not all(isinstance(o, TensorProxy) for o in outs):
            return False  # number computations stay in Python
        return torch_executor.claims(bsym)

    def min_region_size(self) -> int:
        return 2  # one op gains nothing from fusion and pays the compiled call's overhead

    def fuse(
        self,
        region: Sequence[BoundSymbol],
        inputs: Sequence[Proxy],
        outputs: Sequence[Proxy],
        *,
        index: int,
    ) -> BoundSymbol:
        translated = _torch_calls(region)
        name = f"fusion{index}"
        rtrace = region_trace("fusion", *_canonical(translated, inputs, outputs))
        source = rtrace.python()
        # Symbolic sizes (cache="symbolic values"): compiled once for all of them, with torch's
        # dynamic shapes, instead of once per size.
        options = self.compile_options
        if _has_symbolic_sizes(inputs):
            options = {**options, "dynamic": True}
        key = f"{source}\n# options: {sorted(options.items(), key=str)!r}"
        with self._cache_lock:
            compiled = self._cache.get(key)
            if compiled is None:
                fn = rtrace.python_callable({"torch": torch})
                compiled = CompiledRegion(source, fn, options)
                self._cache[key] = compiled
        sym = Symbol(name, None, module=self.name, impl=compiled, id=f"{self.name}::{name}")
        return BoundSymbol(sym, tuple(inputs), {}, tuple(outputs), subsymbols=tuple(translated))

    def cached_regions(self) -> int:
        return len(self._cache)


torchcompile_executor = TorchCompileExecutor()
register_executor(torchcompile_executor)
