"""The torch.compile executors: fusion regions compiled by inductor.

A region becomes a small Python function of torch calls (the torch executor's translation of its
prims, high-level ops such as attention kept whole; printed like any trace) and that function is
compiled by ``torch.compile``. Compiled regions are cached by their printed source (with names
made canonical), so the same region in a retraced program, or in every layer of a model, reuses
one compiled program.

- ``torchcompile`` compiles a region on its first call, which waits for it.
- ``torchcompile_background`` (``thunder.compile``'s choice without nvFuser) queues the compile
  on a background thread on the first call and runs the region's torch calls until the
  compiled program is ready: a CPU model's first call takes seconds, not the tens of seconds
  inductor needs; ``background_compile.wait_for_background_compiles()`` waits for them.

Compile time is recorded on the region (``CompiledRegion.compile_seconds``) and summed by
``ExecutionTrace.compile_seconds()``.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from thunder_executors import background_compile
from thunder_executors.executor import FusionExecutor, register_executor
from thunder_executors.inductor_direct import (
    EAGER_NUMERICS,
    compile_direct,
    keep_mutation_order_in_inductor,
    without_view_bits,
)
from thunder_executors.onednn_matmul import left_to_onednn
from thunder_executors.torch_executor import torch_executor
from thunder_executors.torch_ops_executor import torch_ops_executor
from thunder_ir import BoundSymbol, NumberProxy, Proxy, Symbol, TensorProxy, Trace, dtypes, prims
from thunder_ir import ops as ltorch
from thunder_ir.ops.elementwise import number_overflows
from thunder_ir.ops.fallback import runs_under_state
from thunder_ir.pytree import tree_map
from thunder_ir.symbol import leaf_prims, raises_on_values
from thunder_ir.tags import OpTag

__all__ = [
    "CompiledRegion",
    "RegionOutputMismatch",
    "TorchCompileExecutor",
    "output_mismatch",
    "region_trace",
    "torch_calls",
    "torchcompile_background_executor",
    "torchcompile_executor",
]

log = logging.getLogger(__name__)

# Symbols with effects or ambient state stay outside regions: inductor reorders freely and draws
# random numbers its own way.
_NOT_FUSIBLE = frozenset(
    {OpTag.PROLOGUE, OpTag.RETURN, OpTag.IN_PLACE, OpTag.RANDOM, OpTag.DONT_DCE}
)

_FUSIBLE_FALLBACK = frozenset({OpTag.TORCH_FALLBACK})
_VIEWS = frozenset({OpTag.VIEW, OpTag.MAY_RETURN_VIEW})

# Prims inductor computes otherwise than eager's kernels, which stay with the torch executor:
# - taking index tensors: eager raises on an index out of range (a negative one too, except
#   ``take`` and ``index_put``); inductor wraps negatives and fails otherwise (a device assert on
#   CUDA). They join a region where their ranges are static (``_index_ranges``): the region then
#   checks its indices before its compiled program runs (``_index_check``);
# - integer division and remainder: a zero divisor traps the process (SIGFPE) where eager raises
#   ZeroDivisionError, and so does INT_MIN / -1 where eager gives INT_MIN;
# - float floor division and remainder: ``floor(a / b)`` and ``a - floor(a / b) * b`` there,
#   eager's come from fmod (``1.0 // 0.1`` is 9, ``remainder(x, inf)`` is x for x >= 0).
_INDEXING = frozenset(
    {
        prims.take,
        prims.index_select,
        prims.gather,
        prims.scatter_add,
        prims.index_put,
        prims.embedding,
    }
)
_DIVISIONS = frozenset(
    {prims.div, prims.floor_divide, prims.trunc_divide, prims.remainder, prims.fmod}
)
_FLOAT_DIVISIONS_UNLIKE_EAGER = frozenset({prims.floor_divide, prims.remainder})
# Inductor's C++ (CPU) lowerings that are not eager's numbers (tests/thunder/
# test_region_edge_numerics.py): its vectorized expm1 is exp(x) - 1 (0 below ~6e-8, 5% off at
# 1e-6), atanh is 0.5 * log((1 + x) / (1 - x)) and erf a polynomial (both 0 for tiny x, 1% off at
# 1e-5), acosh overflows to inf above ~1e19, float fmod of a huge quotient is nan; eager's kernels
# call a math library there. Elsewhere they differ from eager's by a few ulps at most.
_CPU_LOWERINGS_UNLIKE_EAGER = frozenset(
    {prims.expm1, prims.erf, prims.atanh, prims.acosh, prims.fmod}
)
# Composites computed with such a lowering whose results stay within a few ulps of their input's
# magnitude: GELU's x * cdf(x) (and its backward's cdf + x * pdf) moves by ulps of 1 in cdf, so by
# ulps of x (gelu(-2.0) is 40 of its own ulps off, the far tail's tiny results far below an ulp
# of x). Fused in float32/float64: splitting regions at every GELU cost a GPT training step ~10%.
_ACCURATE_COMPOSITES = frozenset({"gelu", "gelu_backward"})
# Torch fallbacks whose inductor decomposition is not eager's kernel: softshrink maps nan to 0;
# on the CPU, those computed with the lowerings above (ndtr(-2) is 4e-6 off through erf).
_FALLBACKS_UNLIKE_EAGER = frozenset({"softshrink"})
_CPU_FALLBACKS_UNLIKE_EAGER = frozenset(
    {"erf", "expm1", "atanh", "acosh", "fmod", "ndtr", "log_ndtr", "elu", "selu", "celu"}
)
# Ops inductor lowers to maximum/minimum, which give +0.0 for a -0.0 input at a zero bound (eager
# keeps -0.0): in a region they run as their decomposition (where(x >= lo, x, lo) keeps it).
_CLAMPS = frozenset({"clamp", "clamp_min", "clamp_max", "hardtanh", "relu6"})
# Dtypes inductor's CPU sums and products get wrong when they accumulate in them: int8 and uint8
# sums give other values (of ones, 3x their count), a bool sum fails to compile or writes out of
# bounds (and eager refuses a bool scan). Such prims stay out of regions.
_NARROW_ACCUMULATIONS = frozenset({dtypes.int8, dtypes.uint8, dtypes.bool8})
_ACCUMULATING_PRIMS = frozenset({prims.sum, prims.prod, prims.cumsum, prims.cumprod})
# Reductions given a result dtype run in a region as their decomposition (which converts and
# accumulates as eager does): inductor's lowerings accumulate in a narrow result dtype as above,
# and round a float16/bfloat16 mean's steps (100 ulps off).
_WHOLE_REDUCTIONS_WITH_DTYPE = frozenset({ltorch.sum, ltorch.nansum, ltorch.prod, ltorch.mean})
# Ops whose inductor lowering returns the second of two equal zeros where eager returns the first.
_WHOLE_OPS_UNLIKE_EAGER = frozenset({"fmax", "fmin"})
# Ops on float16/bfloat16 that inductor computes in float32 and rounds once, where eager's kernel
# rounds its steps (nextafter's step, xlogy's log) or overflows otherwise (gelu of inf is nan).
_LOW_PRECISION_UNLIKE_EAGER = frozenset({"nextafter", "xlogy", "logit", "gelu", "gelu_backward"})
# On the CPU: rsqrt, whose kernel's scalar loop (a tail, a strided input) rounds the root before
# dividing, and bfloat16's pow by -0.5, which torch runs with that kernel.
_CPU_LOW_PRECISION_UNLIKE_EAGER = frozenset({"rsqrt"})
_LOW_PRECISION = frozenset({dtypes.float16, dtypes.bfloat16})


def _touches_complex(bsym: BoundSymbol) -> bool:
    return any(
        isinstance(p, TensorProxy) and p.dtype.is_complex
        for p in (*bsym.flat_proxy_args, *bsym.flat_proxy_outs)
    )


# An index argument's place in a prim's arguments, and the range eager accepts there.
_IndexRange = tuple[tuple[int, ...], int, int]


def _static_size(t: TensorProxy, dim: int) -> int | None:
    if t.ndim == 0:
        return 1  # a 0-d tensor indexes as one of one element
    size = t.shape[dim % t.ndim]
    return size if isinstance(size, int) else None


def _index_ranges(bsym: BoundSymbol) -> list[_IndexRange] | None:
    """Where an index prim reads indices and the range eager accepts for each (negatives wrap for
    ``take`` and advanced indexing, not for index_select, gather, scatter_add, embedding); None
    where the range is not static (symbolic sizes) or an index is a boolean mask."""
    sym, args = bsym.sym, bsym.args
    if sym is prims.take:
        sizes = [_static_size(args[0], d) for d in range(args[0].ndim)]
        if None in sizes:
            return None
        n = 1
        for size in sizes:
            n *= size  # type: ignore[operator]
        return [((1,), -n, n)]
    if sym in (prims.index_select, prims.gather, prims.scatter_add):
        size = _static_size(args[0], args[1])
        return None if size is None else [((2,), 0, size)]
    if sym is prims.embedding:
        size = _static_size(args[1], 0)
        return None if size is None else [((0,), 0, size)]
    if sym is prims.index_put:
        ranges: list[_IndexRange] = []
        for i, index in enumerate(args[1]):
            size = _static_size(args[0], i)
            if size is None or index.dtype.is_boolean:
                return None
            ranges.append(((1, i), -size, size))
        return ranges
    return None


def _on_cpu(bsym: BoundSymbol) -> bool:
    return any(
        isinstance(p, TensorProxy) and p.device.type == "cpu"
        for p in (*bsym.flat_proxy_args, *bsym.flat_proxy_outs)
    )


def _low_precision_unlike_eager(bsym: BoundSymbol) -> bool:
    tensors = [
        p
        for p in (*bsym.flat_proxy_args, *bsym.flat_proxy_outs)
        if isinstance(p, TensorProxy) and p.dtype in _LOW_PRECISION
    ]
    if not tensors:
        return False
    name = bsym.sym.name
    if name in _LOW_PRECISION_UNLIKE_EAGER:
        return True
    if not _on_cpu(bsym):
        return False
    rsqrt_power = (
        name == "pow"
        and tensors[0].dtype == dtypes.bfloat16
        and len(bsym.args) > 1
        and type(bsym.args[1]) in (int, float)
        and bsym.args[1] == -0.5
    )
    return name in _CPU_LOW_PRECISION_UNLIKE_EAGER or rsqrt_power


def _fallback_unlike_eager(name: str, bsym: BoundSymbol) -> bool:
    """A torch fallback (``torch.nn.functional.softshrink``, ``torch.Tensor.xlogy``) whose
    inductor decomposition is not eager's kernel."""
    short = name.rsplit(".", 1)[-1]
    if short in _FALLBACKS_UNLIKE_EAGER:
        return True
    if short in _CPU_FALLBACKS_UNLIKE_EAGER and _on_cpu(bsym):
        return True
    return short in _LOW_PRECISION_UNLIKE_EAGER and any(
        isinstance(p, TensorProxy) and p.dtype in _LOW_PRECISION
        for p in (*bsym.flat_proxy_args, *bsym.flat_proxy_outs)
    )


def _unlike_eager_in_inductor(bsym: BoundSymbol) -> bool:
    """Whether inductor would compute this prim otherwise than eager (see ``_INDEXING`` and
    ``_CPU_LOWERINGS_UNLIKE_EAGER``), or it handles complex tensors (inductor has no complex
    kernels and its views of them fail)."""
    if _touches_complex(bsym) or _low_precision_unlike_eager(bsym):
        return True
    if bsym.sym in _CPU_LOWERINGS_UNLIKE_EAGER and _on_cpu(bsym):
        out = bsym.flat_proxy_outs[0]
        if isinstance(out, TensorProxy) and out.dtype.is_inexact:
            return True
    if bsym.sym in _INDEXING:
        return _index_ranges(bsym) is None
    if bsym.sym in _ACCUMULATING_PRIMS:
        return _narrow_accumulation(bsym)
    if bsym.sym not in _DIVISIONS:
        return False
    out = bsym.flat_proxy_outs[0]
    if isinstance(out, TensorProxy) and out.dtype.is_inexact:
        return bsym.sym in _FLOAT_DIVISIONS_UNLIKE_EAGER
    divisor = bsym.args[1] if len(bsym.args) > 1 else None
    # A constant divisor other than 0 and -1 never traps.
    return isinstance(divisor, Proxy) or not isinstance(divisor, int) or divisor in (0, -1)


def _narrow_accumulation(bsym: BoundSymbol) -> bool:
    return any(
        isinstance(o, TensorProxy) and o.dtype in _NARROW_ACCUMULATIONS
        for o in bsym.flat_proxy_outs
    )


def _converting_reduction(bsym: BoundSymbol) -> bool:
    """A sum, product or mean whose result dtype is not its input's (``sum(dtype=torch.int8)``,
    an integer's sum in int64) or that accumulates in a narrow dtype."""
    if bsym.sym not in _WHOLE_REDUCTIONS_WITH_DTYPE:
        return False
    a, out = bsym.args[0] if bsym.args else None, bsym.flat_proxy_outs[0]
    converts = isinstance(a, TensorProxy) and isinstance(out, TensorProxy) and a.dtype != out.dtype
    return converts or _narrow_accumulation(bsym)


_WIDEST = frozenset({dtypes.float64, dtypes.int64, dtypes.complex128, dtypes.bool8})


def _symbolic_sizes(bsym: BoundSymbol) -> bool:
    """A torch callable no op mirrors, on a tensor of symbolic sizes: dynamo traces it with the
    region's size inputs as symbols and may tie those of equal values (adaptive_max_pool2d
    next to a max pool's decomposition gave an output of another size, then wrong values)."""
    return any(
        isinstance(x, TensorProxy) and any(isinstance(n, Proxy) for n in x.shape)
        for x in bsym.flat_args
    )


def _number_may_not_fit(bsym: BoundSymbol) -> bool:
    """A torch op the IR does not model, given a number that a tensor argument's dtype may not
    hold: eager's kernel converts it, checked, and raises; inductor's lowering wraps or
    overflows it silently (hardshrink(half, 1e6)). A symbolic number may take any value."""
    args = bsym.flat_args
    tensor_dtypes = {x.dtype.strong() for x in args if isinstance(x, TensorProxy)}
    for x in args:
        if isinstance(x, NumberProxy):
            if x.python_type in (int, float) and tensor_dtypes - _WIDEST:
                return True
        elif type(x) in (int, float) and any(number_overflows(x, d) for d in tensor_dtypes):
            return True
    return False


def region_trace(
    name: str, region: Sequence[BoundSymbol], inputs: Sequence[Proxy], outputs: Sequence[Proxy]
) -> Trace:
    """The region as a trace of its own: inputs as arguments, outputs returned as a tuple."""
    body = [*region, prims.python_return.bind(tuple(outputs), output=None)]
    return Trace(name, args=inputs, bound_symbols=body)


def torch_calls(bsyms: Sequence[BoundSymbol]) -> list[BoundSymbol]:
    """The region as torch calls: high-level ops torch runs whole stay whole (inductor has its
    own lowerings and patterns for attention, normalizations...), other composites decompose."""
    return [t for t, _ in _torch_calls_with_ranges(bsyms, whole_index_ops=True)]


def _torch_calls_with_ranges(
    bsyms: Sequence[BoundSymbol], *, whole_index_ops: bool = False
) -> list[tuple[BoundSymbol, list[_IndexRange]]]:
    """``torch_calls``, each with the index ranges it must be checked for (``_index_ranges``).
    Ops reading indices decompose unless ``whole_index_ops``: their index prims are what the
    region checks."""
    out: list[tuple[BoundSymbol, list[_IndexRange]]] = []
    for b in bsyms:
        if b.sym.is_prim or OpTag.TORCH_FALLBACK in b.sym.tags:
            ranges = _index_ranges(b) if b.sym in _INDEXING else None
            out.append((torch_executor.translate(b), ranges or []))
        elif (
            torch_ops_executor.claims(b)
            and not (b.sym.name in _CLAMPS and _number_bounds(b))
            and not _converting_reduction(b)
            and (whole_index_ops or not any(s.sym in _INDEXING for s in leaf_prims(b)))
        ):
            out.append((torch_ops_executor.translate(b), []))
        else:
            out.extend(_torch_calls_with_ranges(b.subsymbols, whole_index_ops=whole_index_ops))
    return out


def _number_bounds(bsym: BoundSymbol) -> bool:
    """A clamp whose bounds are numbers (a tensor bound's ties give the bound, in eager too)."""
    return not any(isinstance(x, TensorProxy) for x in bsym.flat_args[1:])


def _arg_at(bsym: BoundSymbol, path: tuple[int, ...]) -> Any:
    x: Any = bsym.args
    for i in path:
        x = x[i]
    return x


def _indices_in_range(indices: Sequence[torch.Tensor], ranges: Sequence[tuple[int, int]]) -> bool:
    """Whether every index is in its range: a CPU tensor's are read (min and max), a device's
    are asserted on the device, as eager's kernels do (no synchronization)."""
    for index, (low, high) in zip(indices, ranges, strict=True):
        if index.numel() == 0:
            continue
        if index.device.type == "cpu":
            smallest, largest = torch.aminmax(index)
            if int(smallest) < low or int(largest) >= high:
                return False
        else:
            inside = ((index >= low) & (index < high)).all()
            torch._assert_async(inside, "index out of bounds")
    return True


def _index_check(
    calls: Sequence[tuple[BoundSymbol, list[_IndexRange]]], inputs: Sequence[Proxy]
) -> Callable[..., bool] | None:
    """For a region of ``calls`` taking ``inputs``: a function of the region's arguments that says
    whether all its indices are in the ranges eager accepts (the calls computing them run first,
    as torch runs them: they are few, on small integer tensors); None without index calls."""
    targets: list[Proxy] = []
    bounds: list[tuple[int, int]] = []
    for call, ranges in calls:
        for path, low, high in ranges:
            targets.append(_arg_at(call, path))
            bounds.append((low, high))
    if not targets:
        return None
    needed = {p.name for p in targets}
    computing: list[BoundSymbol] = []
    for call, _ in reversed(calls):
        if any(p.name in needed for p in call.flat_proxy_outs):
            computing.append(call)
            needed.update(p.name for p in call.flat_proxy_args)
    trace = region_trace("indices", computing[::-1], inputs, targets)
    compute_indices = trace.python_callable({"torch": torch})

    def check(*args: Any) -> bool:
        return _indices_in_range(compute_indices(*args), bounds)

    return check


def _sizes_read(translated: Sequence[BoundSymbol], inputs: Sequence[Proxy]) -> list[Proxy]:
    """Numbers the region's decomposed calls read that the region neither takes nor makes: sizes
    of its tensors (symbolic, or read from data), defined outside and passed in."""
    known = {p.name for p in inputs} | {p.name for b in translated for p in b.flat_proxy_outs}
    extra: dict[str, Proxy] = {}
    for b in translated:
        for p in b.flat_proxy_args:
            if isinstance(p, NumberProxy) and p.name not in known:
                extra.setdefault(p.name, p)
    return list(extra.values())


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


# The operator executors thunder.jit runs a program on (thunder.recipes' default list without
# its fusion executors).
_OPERATOR_EXECUTORS = ("torch_ops", "torch")


def _operator_calls(
    region: Sequence[BoundSymbol], inputs: Sequence[Proxy], outputs: Sequence[Proxy]
) -> tuple[str, Callable[..., Any]] | None:
    """The region as thunder.jit runs it, without fusion (the operator executors' calls, as
    eager calls the ops that it keeps whole: ``chunk``, ``view``, ``linear``...; its deletes,
    its peepholes): its canonical source and the function. What a region that keeps its torch
    calls runs, so that it costs what the same ops cost without ``thunder.compile``. None where
    the region's symbols cannot be translated so (then its decomposition's torch calls run)."""
    from thunder_executors.assignment import transform_for_execution

    try:
        ex = transform_for_execution(
            region_trace("fusion", region, inputs, outputs), _OPERATOR_EXECUTORS
        )
        fn = ex.python_callable({"torch": torch})
    except Exception:  # (a symbol only a fusion executor runs)
        log.debug("fusion region: its operator calls could not be built", exc_info=True)
        return None
    body = [b for b in ex.bound_symbols if not b.has_tag(OpTag.RETURN)]
    defined = {p.name for p in inputs}
    for b in ex.bound_symbols:
        if any(p.name not in defined for p in b.flat_proxy_args):
            return None  # it reads a number the region is not given (a size it computes)
        defined.update(p.name for p in b.flat_proxy_outs)
    # Translated under the trace's names (the sizes in its tensors' shapes are named there);
    # compared under canonical ones.
    return region_trace("fusion", *_canonical(body, inputs, outputs)).python(), fn


def _has_symbolic_sizes(inputs: Sequence[Proxy]) -> bool:
    return any(
        isinstance(p, NumberProxy)
        or (isinstance(p, TensorProxy) and not all(isinstance(d, int) for d in p.shape))
        for p in inputs
    )


def _runner_ids(*ops: Symbol) -> frozenset[str]:
    return frozenset(f"torch_ops::{op.name}" for op in ops)


# Normalizations whose inductor decompositions return the statistics (mean, rstd) in the input's
# dtype on a CPU, where eager's kernels for a low-precision input with float32 parameters (as CPU
# autocast leaves a BatchNorm, a GroupNorm) return float32: running statistics updated from them,
# and the backward's kernel given them (it refuses bf16 statistics with float32 weights), would
# differ from eager's.
_NORMS_WITH_STATS = _runner_ids(
    ltorch.native_batch_norm, ltorch.native_layer_norm, ltorch.native_group_norm
)
# Their backwards: inductor's decomposition of group norm's gives a float32 input gradient for a
# bf16 input where eager rounds it to bf16.
_NORM_BACKWARDS = _runner_ids(
    ltorch.batch_norm_backward, ltorch.layer_norm_backward, ltorch.group_norm_backward
)


def _norm_with_float_stats(call: BoundSymbol, stats_dtype: torch.dtype) -> BoundSymbol:
    """``call`` (a normalization returning its statistics in ``stats_dtype``, wider than its
    input's) taking its input in that dtype, its output rounded to the input's dtype: what eager's
    mixed-dtype kernel computes, and inductor then keeps the statistics' dtype."""
    run = call.sym.impl
    assert run is not None

    def norm(a: torch.Tensor, *args: Any) -> tuple[Any, ...]:
        out, *stats = run(a.to(stats_dtype), *args)
        return (out.to(a.dtype), *stats)

    name = f"{call.sym.name}_stats_in_{str(stats_dtype).removeprefix('torch.')}"
    sym = Symbol(name, None, module="inductor_region", impl=norm, id=f"inductor_region::{name}")
    return call.replace(sym=sym)


def _outputs_as_recorded(call: BoundSymbol) -> BoundSymbol:
    """``call`` with each tensor output converted to the dtype the trace records for it (eager's;
    a no-op where inductor already gives it)."""
    run = call.sym.impl
    assert run is not None
    recorded = [
        dtypes.to_torch_dtype(o.dtype) if isinstance(o, TensorProxy) else None
        for o in (call.output if isinstance(call.output, (tuple, list)) else (call.output,))
    ]

    def as_recorded(*args: Any) -> Any:
        outs = run(*args)
        single = not isinstance(outs, (tuple, list))
        converted = tuple(
            o.to(d) if d is not None and isinstance(o, torch.Tensor) else o
            for o, d in zip((outs,) if single else outs, recorded, strict=True)
        )
        return converted[0] if single else converted

    name = f"{call.sym.name}_as_recorded"
    sym = Symbol(
        name, None, module="inductor_region", impl=as_recorded, id=f"inductor_region::{name}"
    )
    return call.replace(sym=sym)


def _for_inductor(calls: Sequence[BoundSymbol]) -> list[BoundSymbol]:
    """The region's torch calls as inductor is given them: ops whose inductor decompositions
    return other dtypes than eager's kernels (``_NORMS_WITH_STATS``, ``_NORM_BACKWARDS``) rewritten
    to return eager's. Its torch calls as they are still run where the compiled program does not."""
    out: list[BoundSymbol] = []
    for call in calls:
        outs = call.output if isinstance(call.output, (tuple, list)) else (call.output,)
        a = call.args[0] if call.args else None
        if not isinstance(a, TensorProxy) or a.device.type != "cpu":
            out.append(call)
            continue
        if call.sym.id in _NORMS_WITH_STATS and len(outs) == 3:
            stats = outs[1]
            stats_dtype = (
                dtypes.to_torch_dtype(stats.dtype) if isinstance(stats, TensorProxy) else None
            )
            if stats_dtype is not None and stats.dtype != a.dtype:
                call = _norm_with_float_stats(call, stats_dtype)
        elif call.sym.id in _NORM_BACKWARDS:
            call = _outputs_as_recorded(call)
        out.append(call)
    return out


def _significant_strides(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(s for n, s in zip(t.shape, t.stride()) if n > 1)


def _dense(t: torch.Tensor) -> bool:
    """Whether ``t`` covers its memory without gaps or overlaps (a layout the compiled program
    must then keep: the program, or its caller, may view it, or ask whether it is contiguous)."""
    if t.numel() == 0:
        return False
    expected = 1
    for stride, size in sorted((s, n) for n, s in zip(t.shape, t.stride()) if n > 1):
        if stride != expected:
            return False
        expected *= size
    return True


def output_mismatch(compiled: Any, torch_calls: Any) -> str | None:
    """How the outputs of a region's compiled program differ from those of its torch calls in
    dtype, shape, device or (where the torch calls' is dense) layout; None where they do not."""
    fc = compiled if isinstance(compiled, (tuple, list)) else (compiled,)
    ft = torch_calls if isinstance(torch_calls, (tuple, list)) else (torch_calls,)
    if len(fc) != len(ft):
        return f"{len(fc)} outputs, its torch calls {len(ft)}"
    for i, (c, t) in enumerate(zip(fc, ft)):
        if not isinstance(t, torch.Tensor):
            continue
        if not isinstance(c, torch.Tensor):
            return f"output {i} is a {type(c).__name__}, its torch calls' a tensor"
        for what, got, want in (
            ("dtype", c.dtype, t.dtype),
            ("shape", tuple(c.shape), tuple(t.shape)),
            ("device", c.device, t.device),
        ):
            if got != want:
                return f"output {i} has {what} {got}, its torch calls' {want}"
        if _dense(t) and _significant_strides(c) != _significant_strides(t):
            return f"output {i} has strides {c.stride()}, its torch calls' {t.stride()}"
    return None


def _dim_orders_to_restore(compiled: Any, torch_calls: Any) -> dict[int, list[int]]:
    """Output index -> the dims of the torch calls' output, outermost first, for each dense
    output the compiled program lays out otherwise (of the same dtype and shape)."""
    if not isinstance(compiled, (tuple, list)) or not isinstance(torch_calls, (tuple, list)):
        return {}
    orders: dict[int, list[int]] = {}
    for i, (c, t) in enumerate(zip(compiled, torch_calls)):
        if (
            isinstance(c, torch.Tensor)
            and isinstance(t, torch.Tensor)
            and c.dtype == t.dtype
            and c.shape == t.shape
            and _dense(t)
            and _significant_strides(c) != _significant_strides(t)
        ):
            strides = t.stride()
            orders[i] = sorted(range(t.dim()), key=lambda d: (-strides[d], d))
    return orders


def _in_dim_orders(outs: Sequence[Any], orders: dict[int, list[int]]) -> tuple[Any, ...]:
    """``outs`` with each output of ``orders`` dense in that order of dims (a no-op where it is)."""
    fixed = list(outs)
    for i, order in orders.items():
        inverse = sorted(range(len(order)), key=order.__getitem__)
        fixed[i] = fixed[i].permute(order).contiguous().permute(inverse)
    return tuple(fixed)


def _restrided(program: Callable[..., Any], orders: dict[int, list[int]]) -> Callable[..., Any]:
    def run(*args: Any) -> tuple[Any, ...]:
        return _in_dim_orders(program(*args), orders)

    return run


class RegionOutputMismatch(RuntimeError):
    """The compiled program of a region gives outputs of other dtypes, shapes or layouts than
    its torch calls: it is not used."""


_NOT_RUN = object()  # no result: compiling did not run the region


class CompiledRegion:
    """A region's Python function, compiled by torch.compile on the first call.

    With ``background=True`` the first call queues the compile on the background thread
    (``background_compile``) and every call runs the region's torch calls as they are until
    the compiled program is ready. A compile that fails there leaves the region running its
    torch calls, with a warning that says why. Once compiled, a region of CPU tensors measures
    which pays on this machine: its next calls made while no other compile runs alternate
    between the compiled program and its torch calls, timed; from then on the compiled program
    runs where the median over ``MEASURED_CALLS`` pairs of consecutive calls of its time over
    the torch calls' is below ``MARGIN``, else they do (``runs_compiled``; logged; ``settled``
    once chosen). A ratio per pair, not a ratio of two medians: on a shared machine the load
    changes between calls, and the two calls of a pair see nearly the same load. Compiled
    programs pay a fixed cost per call (the guards over every input), which small regions do
    not earn back.

    Regions of CPU tensors of static shapes compile without dynamo (``inductor_direct``);
    the others through ``torch.compile``.

    A region reading indices checks them before its compiled program runs (``index_check``;
    the measurement counts the check as the compiled program's time): where one is out of the
    range eager accepts, its ops run as eager calls them (``on_bad_indices``) and raise eager's
    error (inductor would wrap a negative index or raise its own error). Its torch calls need no
    check: they raise eager's errors themselves.
    """

    MEASURED_CALLS = 15
    MARGIN = 0.95  # the compiled program runs where it is 5% faster: a tie keeps eager's kernels

    def __init__(
        self,
        source: str,
        fn: Callable[..., Any],
        options: dict[str, Any],
        *,
        background: bool,
        index_check: Callable[..., bool] | None = None,
        on_bad_indices: Callable[..., Any] | None = None,
        compile_fn: Callable[..., Any] | None = None,
        torch_calls: Callable[..., Any] | None = None,
    ) -> None:
        self.source = source
        self.fn = fn
        # What inductor compiles: ``fn`` with ops rewritten to give eager's dtypes there
        # (``_for_inductor``).
        self.compile_fn = compile_fn or fn
        self.index_check = index_check
        self.on_bad_indices = on_bad_indices or fn
        # What runs while no compiled program does: the region's ops as thunder.jit runs them
        # (``_operator_calls``), else as eager calls them.
        self.torch_calls = torch_calls or self.on_bad_indices
        self.options = options
        self.background = background
        self.compile_seconds = 0.0
        self.calls = 0
        self.error: BaseException | None = None  # why a background compile failed
        self._compiled: Callable[..., Any] | None = None  # what runs from now on
        self._candidate: Callable[..., Any] | None = None  # compiled in the background, measured
        self._times: tuple[list[float], list[float]] = ([], [])  # compiled, torch calls
        self.runs_compiled: bool | None = None  # after the measurement, which one runs
        self._submitted = False
        self._lock = threading.Lock()

    @property
    def status(self) -> str:
        """``compiled``, ``pending`` (running its torch calls until compiled), ``not called`` or
        ``failed: <why>``."""
        if self.runs_compiled is False:
            return "compiled; its torch calls measured faster here and run"
        if self.error is not None:
            return f"failed: {type(self.error).__name__}: {self.error}"
        if self._compiled is not None or self._candidate is not None:
            return "compiled"
        return "pending" if self._submitted else "not called"

    @property
    def settled(self) -> bool:
        """Whether the region runs what it will keep running: its compiled program, or its torch
        calls after the measurement or a failed compile (not yet while it compiles or measures)."""
        return self._compiled is not None or self.error is not None

    def __thunder_standalone__(self) -> tuple[Callable[..., Any], str]:
        """For a program printed on its own (``thunder_ir.standalone``): the region's function
        (a compiled trace, printed from its source) and how it is compiled."""
        options = ", ".join(f"{k}={v!r}" for k, v in self._dynamo_options().items())
        options = options.replace("{", "{{").replace("}", "}}")  # a format template
        # The torch calls as they are: ``compile_fn``'s rewrites are closures, not importable.
        return self.fn, f"torch.compile({{fn}}{', ' if options else ''}{options})"

    def _dynamo_options(self) -> dict[str, Any]:
        """``torch.compile``'s arguments: inductor's settings as ``options``, which it patches in
        for each (re)compile of this function only."""
        return {**self.options, "options": {**EAGER_NUMERICS, **self.options.get("options", {})}}

    def __call__(self, *args: Any) -> Any:
        compiled = self._compiled
        if compiled is not None:
            return self._run_checked(compiled, args)
        if self.background:
            candidate = self._candidate
            if candidate is not None:
                return self._measured_call(candidate, args)
            if not self._submitted:
                with self._lock:
                    if not self._submitted:
                        self._submitted = True
                        background_compile.submit(self._compile_in_background, args)
            return self.torch_calls(*args)  # they raise eager's errors themselves
        if self.index_check is not None and not self.index_check(*args):
            return self.on_bad_indices(*args)
        with self._lock:
            if self._compiled is None:
                start = time.perf_counter()
                try:
                    fn, out = self._compile(list(args))
                except Exception as e:  # any compiler failure: the torch calls run instead
                    self._compile_failed(e)
                    fn, out = self.torch_calls, _NOT_RUN
                finally:
                    self.compile_seconds += time.perf_counter() - start
                self._compiled = fn
                self.calls += 1
                # The torch calls raise eager's error where the inputs hold one.
                return fn(*args) if out is _NOT_RUN else out
        return self._compiled(*args)

    def _run_checked(self, program: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        """``program`` on ``args`` where their indices are in the range eager accepts, else the
        ops as eager calls them (eager's kernels raise eager's error)."""
        check = self.index_check
        if check is not None and not check(*args):
            return self.on_bad_indices(*args)
        return program(*args)

    def _measured_call(self, candidate: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        if any(isinstance(a, torch.Tensor) and a.device.type != "cpu" for a in args):
            # Timing device kernels needs a synchronization per call; fused, they pay.
            self._choose(candidate, True)
            return self._run_checked(candidate, args)
        if background_compile.compiling():
            # Another region compiles on the other thread: timings now would measure the
            # contention, not the region (the compiled program runs meanwhile).
            return self._run_checked(candidate, args)
        compiled_times, torch_times = self._times
        use_compiled = len(compiled_times) <= len(torch_times)
        # The compiled side's time includes its index check, which the torch calls do not need.
        start = time.perf_counter()
        out = self._run_checked(candidate, args) if use_compiled else self.torch_calls(*args)
        elapsed = time.perf_counter() - start
        with self._lock:
            (compiled_times if use_compiled else torch_times).append(elapsed)
            n = self.MEASURED_CALLS + 1  # each side's first call is a warm-up, not counted
            if self._compiled is None and len(compiled_times) >= n and len(torch_times) >= n:
                self._choose(candidate, self._paired_ratio() < self.MARGIN)
        return out

    def _paired_ratio(self) -> float:
        """The median over the measured pairs of calls (a compiled call, then a torch calls'
        one) of the compiled call's time over the other's."""
        compiled_times, torch_times = self._times
        pairs = zip(compiled_times[1:], torch_times[1:])
        return statistics.median(c / t if t > 0 else float("inf") for c, t in pairs)

    def _choose(self, candidate: Callable[..., Any], compiled: bool) -> None:
        self.runs_compiled = compiled
        if compiled:
            self._compiled = candidate
        else:
            self._keep_torch_calls()
        if len(self._times[0]) > 1 and len(self._times[1]) > 1:
            log.info(
                "fusion region: compiled %.1f us, torch calls %.1f us per call (medians), "
                "compiled/torch calls %.3f (median of pairs): runs %s",
                statistics.median(self._times[0][1:]) * 1e6,
                statistics.median(self._times[1][1:]) * 1e6,
                self._paired_ratio(),
                "compiled" if compiled else "its torch calls",
            )

    def _compile(self, examples: list[Any]) -> tuple[Callable[..., Any], Any]:
        """The compiled program: inductor's without dynamo where the region's inputs are CPU
        tensors of static shapes (``inductor_direct``), else ``torch.compile``'s; and its result
        on ``examples``. Raises ``RegionOutputMismatch`` where that result has other dtypes, shapes
        or layouts than the torch calls give on ``examples`` (``output_mismatch``)."""
        if self.options == {"dynamic": False}:
            direct = compile_direct(self.compile_fn, examples, self.fn, EAGER_NUMERICS)
            if direct is not None:
                # Unguarded: arming the guards here would take this thread's state.
                run = getattr(direct, "run_unguarded", direct)
                return self._checked(direct, run, examples)
        background_compile.import_compile_stack()  # never alongside another thread's import
        keep_mutation_order_in_inductor()  # a scatter's readers after it (see there)
        dynamo_fn = torch.compile(self.compile_fn, **self._dynamo_options())

        def fn(*args: Any) -> Any:
            # Dynamo's programs read a negated view's storage as if it were not negated.
            return dynamo_fn(*without_view_bits(args))

        return self._checked(fn, fn, examples)  # compiles now: dynamo is lazy

    def _checked(
        self, program: Callable[..., Any], run: Callable[..., Any], examples: list[Any]
    ) -> tuple[Callable[..., Any], Any]:
        """``program`` and its result on ``examples`` (computed by ``run``), where its outputs
        have the dtypes and shapes of the torch calls' (a safety net under the rewrites of
        ``_for_inductor``: a program that differs is refused, and the region keeps its torch
        calls). A dense output laid out otherwise than the torch calls lay it out (inductor's
        gradient of a channels-last input can be contiguous) is copied into their layout."""
        if self.index_check is not None and not self.index_check(*examples):
            raise RegionOutputMismatch(
                "its example inputs hold indices out of range: its outputs could not be checked"
            )
        out = run(*examples)
        expected = self.fn(*examples)
        orders = _dim_orders_to_restore(out, expected)
        if orders:
            program = _restrided(program, orders)
            out = _in_dim_orders(out, orders)
        mismatch = output_mismatch(out, expected)
        if mismatch is not None:
            raise RegionOutputMismatch(f"its compiled program's {mismatch}")
        return program, out

    def _keep_torch_calls(self) -> None:
        """From now on the region runs ``torch_calls``: they raise eager's errors themselves, so
        their indices need no check first."""
        self._compiled = self.torch_calls
        self.index_check = None

    def _compile_failed(self, e: Exception) -> None:
        self.error = e
        warnings.warn(
            f"torch.compile could not compile a fusion region ({type(e).__name__}: "
            f"{str(e).strip().splitlines()[0] if str(e).strip() else ''}); it keeps running "
            "its torch calls one by one",
            RuntimeWarning,
            stacklevel=1,
        )

    def _compile_in_background(self, examples: list[Any]) -> None:
        start = time.perf_counter()
        try:
            fn, _ = self._compile(examples)
        except Exception as e:  # any compiler failure: the torch calls stay
            self._compile_failed(e)
            self._keep_torch_calls()
            return
        finally:
            self.compile_seconds += time.perf_counter() - start
        self._candidate = fn
        log.debug("fusion region compiled in %.2f s in the background", self.compile_seconds)


class TorchCompileExecutor(FusionExecutor):
    """Fuses prims the torch executor can run into regions compiled by inductor; with
    ``background=True`` regions compile on a background thread and run their torch calls until
    then (see ``CompiledRegion``)."""

    def __init__(
        self, name: str = "torchcompile", *, background: bool = False, **compile_options: Any
    ) -> None:
        super().__init__(name)
        self.background = background
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
        if bsym.sym.tags & _NOT_FUSIBLE or bsym.sym is prims.written_without_grad:
            # A value written under no_grad carries that mark in its grad_fn, which the copy
            # into the written tensor reads (torch_impls.copy_); a region's outputs lose it.
            return False
        if left_to_onednn(bsym):  # faster there than inductor's call of eager's kernel
            return False
        if bsym.sym.tags >= _FUSIBLE_FALLBACK and not _VIEWS & bsym.sym.tags:
            # A torch callable no op mirrors (thunder_ir.ops.fallback): dynamo traces the call.
            # Not one run under autocast: torch.compile does not cast inside a composite as
            # eager's dispatcher does (bilinear's matmuls), so it would give other values; nor
            # one run under backend flags, which it would not set.
            name = bsym.args[0] if bsym.args else None
            if isinstance(name, str) and runs_under_state(name):
                return False
            if isinstance(name, str) and _fallback_unlike_eager(name, bsym):
                return False
            # One that checks its inputs' values raises in eager with its result unused, where
            # inductor drops it (a factorization's check of its info).
            if raises_on_values(bsym) or _number_may_not_fit(bsym) or _symbolic_sizes(bsym):
                return False
            outs = bsym.flat_proxy_outs
            return all(isinstance(o, TensorProxy) for o in outs) and not _touches_complex(bsym)
        if not bsym.sym.is_prim:
            if bsym.sym.name in _WHOLE_OPS_UNLIKE_EAGER or _low_precision_unlike_eager(bsym):
                return False
            if bsym.sym.name in _ACCURATE_COMPOSITES:
                prims_ = leaf_prims(bsym)
                return bool(prims_) and all(
                    s.sym in _CPU_LOWERINGS_UNLIKE_EAGER or self.can_fuse(s) for s in prims_
                )
            return bool(bsym.subsymbols) and all(self.can_fuse(s) for s in bsym.subsymbols)
        outs = bsym.flat_proxy_outs
        if not outs or not all(isinstance(o, TensorProxy) for o in outs):
            return False  # number computations stay in Python
        return torch_executor.claims(bsym) and not _unlike_eager_in_inductor(bsym)

    def claim_of(self, sym: Symbol) -> str:
        if sym.tags & _NOT_FUSIBLE or sym is prims.written_without_grad:
            return ""
        if sym.tags >= _FUSIBLE_FALLBACK and not _VIEWS & sym.tags:
            return "fuses"
        if not sym.is_prim:
            return "fuses its decomposition"
        return "fuses" if sym in torch_executor.implementations else ""

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
        calls = _torch_calls_with_ranges(region)
        translated = [t for t, _ in calls]
        # Where an index is out of range, the torch calls of the ops as eager calls them raise
        # eager's error (nll_loss's "Target 10 is out of bounds.", not its gather's).
        as_eager = torch_calls(region) if any(r for _, r in calls) else translated
        inputs = [*inputs, *_sizes_read([*translated, *as_eager], inputs)]
        name = f"fusion{index}"
        canonical, canonical_inputs, canonical_outputs = _canonical(translated, inputs, outputs)
        rtrace = region_trace("fusion", canonical, canonical_inputs, canonical_outputs)
        source = rtrace.python()
        # Symbolic sizes (cache="symbolic values"): compiled once for all of them, with torch's
        # dynamic shapes, instead of once per size.
        options = self.compile_options
        if _has_symbolic_sizes(inputs):
            options = {**options, "dynamic": True}
        # (Regions compiled on the first call run their torch calls only where that fails.)
        unfused = _operator_calls(region, inputs, outputs) if self.background else None
        key = f"{source}\n# options: {sorted(options.items(), key=str)!r}"
        if unfused is not None:  # (regions of other ops with one decomposition differ here)
            key += f"\n# without fusion:\n{unfused[0]}"
        with self._cache_lock:
            compiled = self._cache.get(key)
            if compiled is None:
                fn = rtrace.python_callable({"torch": torch})
                ranges = [r for _, r in calls]
                check = _index_check(list(zip(canonical, ranges, strict=True)), canonical_inputs)
                eager_fn = fn
                if as_eager is not translated:
                    eager_trace = region_trace("fusion", *_canonical(as_eager, inputs, outputs))
                    eager_fn = eager_trace.python_callable({"torch": torch})
                rewritten = _for_inductor(canonical)
                compile_fn = fn
                if any(r is not c for r, c in zip(rewritten, canonical, strict=True)):
                    compile_trace = region_trace(
                        "fusion", rewritten, canonical_inputs, canonical_outputs
                    )
                    compile_fn = compile_trace.python_callable({"torch": torch})
                compiled = CompiledRegion(
                    source,
                    fn,
                    options,
                    background=self.background,
                    index_check=check,
                    on_bad_indices=eager_fn,
                    compile_fn=compile_fn,
                    torch_calls=unfused[1] if unfused is not None else None,
                )
                self._cache[key] = compiled
        sym = Symbol(name, None, module=self.name, impl=compiled, id=f"{self.name}::{name}")
        return BoundSymbol(sym, tuple(inputs), {}, tuple(outputs), subsymbols=tuple(translated))

    def cached_regions(self) -> int:
        return len(self._cache)


torchcompile_executor = TorchCompileExecutor()
register_executor(torchcompile_executor)
# What thunder.compile picks on machines without nvFuser: first calls cost what tracing costs.
torchcompile_background_executor = TorchCompileExecutor("torchcompile_background", background=True)
register_executor(torchcompile_background_executor)
