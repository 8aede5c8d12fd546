"""Statistics over observations: covariance, correlation and histograms, decomposed with static
output shapes (torch computes some of their scalars on the host; here they stay tensors).

Where eager's behaviour depends on tensor values it cannot be reproduced by a program compiled
once for all values. cov: negative weights (eager raises; here they are used as given), weights
summing to zero (eager raises; here the result is inf/nan), degrees of freedom <= 0 (the factor
is zeroed as in eager, so the result is eager's inf/nan, without eager's warning). histogram:
a nan or infinite input without ``range`` (eager raises; here the edges are nan/inf, the counts
follow from them), edges given out of order (eager's binary search is not mirrored).
"""

from __future__ import annotations

import math
from typing import Any

from thunder_ir import dtypes, prims
from thunder_ir.ops._helpers import to_dtype
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.conversion import zero_
from thunder_ir.ops.elementwise import clamp, sqrt, torch_dtype_name, trunc
from thunder_ir.ops.elementwise_binary import (
    add,
    eq,
    ge,
    le,
    logical_and,
    lt,
    mul,
    sub,
    true_divide,
    where,
)
from thunder_ir.ops.factories import zeros
from thunder_ir.ops.nn import mm
from thunder_ir.ops.nn_base import not_implemented, require_tensor
from thunder_ir.ops.reductions import sum as sum_
from thunder_ir.ops.shape import (
    diagonal,
    reshape,
    slice_in_dim,
    squeeze,
    transpose,
    unsqueeze,
)
from thunder_ir.proxies import TensorProxy
from thunder_ir.utils import check


def _check_weights(w: Any, n: int, what: str) -> TensorProxy:
    w = require_tensor(w, "cov", what)
    check(
        w.ndim <= 1,
        lambda: (
            f"cov(): expected {what} to have one or fewer dimensions but got {what} with "
            f"{w.ndim} dimensions"
        ),
    )
    integral = what == "fweights"
    check(
        (w.dtype.kind == "int") if integral else w.dtype.is_float,
        lambda: (
            f"cov(): expected {what} to have {'integral' if integral else 'floating point'} "
            f"dtype but got {what} with {w.dtype.name} dtype"
        ),
    )
    check(
        w.numel() == n,
        lambda: (
            f"cov(): expected {what} to have the same numel as there are observations in the "
            f"input but got {w.numel()} != {n}"
        ),
    )
    return w  # type: ignore[no-any-return]


def _norm_factor(w: Any, w_sum: Any, n: int, correction: Any, fw: Any, aw: Any) -> Any:
    """Eager's normalization factor (Correlation.cpp), zeroed where it is <= 0."""
    if w is None:
        factor = n - correction
        return factor if factor > 0 else 0
    if correction == 0:
        factor = w_sum
    elif aw is None:
        factor = sub(w_sum, correction)
    elif fw is None and n == 1 and correction == 1:
        return 0  # eager's corner case (rounding against numpy)
    else:
        factor = sub(w_sum, true_divide(mul(sum_(mul(w, aw)), correction), w_sum))
    return where(le(factor, 0), 0, factor)


@torchop("torch.cov", "torch.Tensor.cov")
def cov(a: Any, *, correction: int = 1, fweights: Any = None, aweights: Any = None) -> Any:
    a = require_tensor(a, "cov")
    check(
        a.ndim <= 2,
        lambda: (
            "cov(): expected input to have two or fewer dimensions but got an input with "
            f"{a.ndim} dimensions"
        ),
    )
    check(a.dtype is not dtypes.bool8, "cov(): bool dtype is not supported for input")
    if a.dtype.is_complex:
        raise not_implemented("cov", "a complex input")
    x = a if a.ndim == 2 else reshape(a, (1, a.numel()))
    n = x.shape[1]
    fw = None if fweights is None else _check_weights(fweights, n, "fweights")
    aw = None if aweights is None else _check_weights(aweights, n, "aweights")
    w = aw if fw is None else (fw if aw is None else mul(fw, aw))
    w_sum = n if w is None else sum_(w)
    avg = true_divide(sum_(x if w is None else mul(x, w), 1), w_sum)
    factor = _norm_factor(w, w_sum, n, correction, fw, aw)
    if n == 1 and (fw is None) != (aw is None):
        # Eager zeroes the input itself here (its centered values alias it), then promotes.
        zero_(a)
        dtype = x.dtype if x.dtype.is_float else dtypes.default_float_dtype()
        centered = zeros(tuple(x.shape), dtype=dtype, device=x.device)
    else:
        centered = sub(x, unsqueeze(avg, 1))
    c = mm(centered, transpose(centered if w is None else mul(centered, w), 0, 1))
    return squeeze(true_divide(c, factor))


@torchop("torch.corrcoef", "torch.Tensor.corrcoef")
def corrcoef(a: Any) -> Any:
    a = require_tensor(a, "corrcoef")
    check(
        a.ndim <= 2,
        lambda: (
            "corrcoef(): expected input to have two or fewer dimensions but got an input "
            f"with {a.ndim} dimensions"
        ),
    )
    c = cov(a)
    if c.ndim == 0:
        return true_divide(c, c)  # nan for nan, inf or 0, else 1
    std = sqrt(diagonal(c))
    c = true_divide(c, unsqueeze(std, 1))
    c = true_divide(c, unsqueeze(std, 0))
    return clamp(c, -1, 1)  # rounding may leave [-1, 1], numpy clips too


def _outer_edges(x: TensorProxy, range_: Any) -> tuple[Any, Any]:
    """The first and last bin edges, as 0-dim tensors of ``x``'s dtype: ``range`` or the input's
    min and max (0 and 1 when it is empty), an empty range widened by 0.5 each side."""
    if range_ is not None:
        lo, hi = float(range_[0]), float(range_[1])
        check(
            math.isfinite(lo) and math.isfinite(hi),
            lambda: f"torch.histogramdd: dimension 0's range [{lo:g}, {hi:g}] is not finite",
        )
        check(
            lo <= hi,
            lambda: (
                f"torch.histogramdd: min should not exceed max, but got min {lo:g} max {hi:g} "
                "for dimension 0"
            ),
        )
        if lo == hi:
            lo, hi = lo - 0.5, hi + 0.5
        return tuple(prims.full((), v, device=x.device, dtype=x.dtype) for v in (lo, hi))
    if x.numel() == 0:
        return tuple(prims.full((), v, device=x.device, dtype=x.dtype) for v in (0.0, 1.0))
    # Eager raises for a non-finite min or max (a value): here the edges are nan/inf then.
    lo, hi = prims.amin(x, (0,)), prims.amax(x, (0,))
    same = eq(lo, hi)
    return where(same, sub(lo, 0.5), lo), where(same, add(hi, 0.5), hi)


def _edges(lo: Any, hi: Any, bins: int) -> TensorProxy:
    """``linspace(lo, hi, bins + 1)`` as torch's CPU kernel computes it: up from ``lo`` for the
    first half, down from ``hi`` for the rest, each edge ``lo + step * i`` rounded once (the
    kernel is compiled to a fused multiply-add; float64 arithmetic does that for float32)."""
    dtype = lo.dtype
    step = true_divide(sub(hi, lo), bins)
    wide = dtypes.float64
    lo, hi, step = (to_dtype(v, wide) for v in (lo, hi, step))
    i = prims.iota(bins + 1, start=0, step=1, device=lo.device, dtype=wide)
    up = add(lo, mul(step, i))
    down = sub(hi, mul(step, sub(bins, i)))
    return to_dtype(where(lt(i, (bins + 1) // 2), up, down), dtype)  # type: ignore[no-any-return]


def _bin_of(x: TensorProxy, edges: TensorProxy, lo: Any, hi: Any, bins: int) -> TensorProxy:
    """Each element's bin as torch's kernel finds it: an estimate by division, corrected by an
    upper bound search among the edges around it; the last bin holds its right edge. Elements
    outside ``[lo, hi]`` (nan too) go to bin ``bins``, which is dropped."""
    inside = logical_and(ge(x, lo), le(x, hi))
    safe = where(inside, x, lo)
    estimate = to_dtype(trunc(true_divide(mul(sub(safe, lo), bins), sub(hi, lo))), dtypes.int64)
    estimate = clamp(estimate, 0, bins)
    pos_min = clamp(sub(estimate, 1), 0)
    pos_max = clamp(add(estimate, 2), None, bins + 1)
    found = zeros(tuple(x.shape), dtype=dtypes.int64, device=x.device)
    for k in range(3):
        at = add(pos_min, k)
        below = le(prims.take(edges, clamp(at, None, bins)), x)
        found = add(found, to_dtype(logical_and(lt(at, pos_max), below), dtypes.int64))
    pos = sub(add(pos_min, found), 1)
    pos = where(eq(pos, bins), bins - 1, pos)
    return where(inside, pos, bins)  # type: ignore[no-any-return]


def _check_edges(a: TensorProxy, bins: TensorProxy) -> None:
    check(
        bins.ndim == 1,
        lambda: (
            "torch.histogramdd: bins tensor should have one dimension, but got "
            f"{bins.ndim} dimensions in the bins tensor for dimension 0"
        ),
    )
    check(
        bins.dtype == a.dtype,
        lambda: (
            "torch.histogramdd: input tensor and bins tensors should have the same dtype, "
            f"but got input with dtype {torch_dtype_name(a.dtype)} and bins for dimension 0 with "
            f"dtype {torch_dtype_name(bins.dtype)}"
        ),
    )
    check(
        bins.numel() > 0,
        "torch.histogramdd: bins tensor should have at least 1 element, but got 0 elements in "
        "the bins tensor for dimension 0",
    )
    check(
        bins.numel() > 1,
        "torch.histogram(): bins must be > 0, but got 0 for dimension 0",
    )


def _edge(edges: TensorProxy, i: int) -> TensorProxy:
    return squeeze(slice_in_dim(edges, 0, i, i + 1), 0)  # type: ignore[no-any-return]


def _bin_by_search(x: TensorProxy, edges: TensorProxy, lo: Any, hi: Any, bins: int) -> TensorProxy:
    """Each element's bin among given edges (torch's upper bound search, as the number of edges
    at or below it, for increasing edges: eager's search over unsorted ones is not mirrored);
    the last bin holds its right edge, elements outside (nan too) go to bin ``bins``."""
    inside = logical_and(ge(x, lo), le(x, hi))
    below = le(unsqueeze(edges, 0), unsqueeze(x, 1))
    pos = sub(sum_(to_dtype(below, dtypes.int64), 1), 1)
    pos = where(eq(pos, bins), bins - 1, pos)
    return where(inside, pos, bins)  # type: ignore[no-any-return]


@torchop("torch.histogram", "torch.Tensor.histogram")
def histogram(
    a: Any, bins: Any = 100, *, range: Any = None, weight: Any = None, density: bool = False
) -> Any:
    """``bins`` equal bins (or the bins between given edges): counts (or summed weights) of
    shape ``(bins,)`` and the ``bins + 1`` edges. Torch defines no derivative: the results
    carry no gradient."""
    a = require_tensor(a, "histogram")
    check(
        a.dtype in (dtypes.float32, dtypes.float64),
        lambda: f"\"histogramdd\" not implemented for '{torch_dtype_name(a.dtype)}'",
        NotImplementedError,
    )
    x = prims.stop_gradient(reshape(a, (a.numel(),)))
    if isinstance(bins, TensorProxy):
        check(range is None, "histogram(): range is given by the bins tensor", TypeError)
        _check_edges(a, bins)
        edges = prims.stop_gradient(prims.clone(bins))
        count = bins.numel() - 1
        lo, hi = _edge(edges, 0), _edge(edges, count)
        positions = _bin_by_search(x, edges, lo, hi, count)
    else:
        count = bins
        check(
            count > 0,
            lambda: f"torch.histogram(): bins must be > 0, but got {count} for dimension 0",
        )
        lo, hi = _outer_edges(x, range)
        edges = _edges(lo, hi, count)
        positions = _bin_of(x, edges, lo, hi, count)
    if weight is not None:
        weight = require_tensor(weight, "histogram", "weight")
        check(
            tuple(weight.shape) == tuple(a.shape),
            lambda: (
                "torch.histogramdd: if weight tensor is provided it should have the same "
                f"shape as the input tensor excluding its innermost dimension, but got input with "
                f"shape {[*x.shape, 1]} and weight with shape {list(weight.shape)}"
            ),
        )
        check(
            weight.dtype == a.dtype,
            lambda: (
                "torch.histogramdd: if weight tensor is provided, input tensor and weight "
                f"tensor should have the same dtype, but got input({torch_dtype_name(a.dtype)}), "
                f"and weight({torch_dtype_name(weight.dtype)})"
            ),
        )
        counted = prims.stop_gradient(reshape(weight, (a.numel(),)))
    else:
        counted = prims.full(tuple(x.shape), 1.0, device=x.device, dtype=x.dtype)
    slots = zeros((count + 1,), dtype=a.dtype, device=a.device)
    hist = slice_in_dim(prims.scatter_add(slots, 0, positions, counted), 0, 0, count)
    if density:
        widths = sub(slice_in_dim(edges, 0, 1, count + 1), slice_in_dim(edges, 0, 0, count))
        hist = true_divide(true_divide(hist, sum_(hist)), widths)
    import torch  # torch.return_types: ``.hist`` and ``.bin_edges``, as torch returns them

    return torch.return_types.histogram((hist, edges))  # type: ignore[arg-type]
