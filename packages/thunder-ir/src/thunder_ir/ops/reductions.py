"""Reduction torch-language ops: dim/keepdim/dtype handling on top of reduction prims.

Low-precision floats accumulate in float32 and convert back, as torch does; integer sums and
products accumulate in int64."""

from __future__ import annotations

import builtins
import functools
import math
import operator
from collections.abc import Sequence
from typing import Any

from thunder_ir import dtypes, prims
from thunder_ir.dtypes import DType
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.ops._helpers import dtype_arg, expand_to, is_int, is_real, to_dtype
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.elementwise import inplace, torch_dtype_name, zero_of
from thunder_ir.ops.elementwise_binary import maximum, minimum
from thunder_ir.proxies import NumberProxy, TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import canonicalize_dim, canonicalize_dims, check

_RED = (OpTag.REDUCTION,)

DimArg = int | Sequence[int] | None


def _check_input(op: str, a: Any) -> TensorProxy:
    check(
        isinstance(a, TensorProxy),
        lambda: f"{op}(): argument 'input' (position 1) must be Tensor, not {type(a).__name__}",
        TypeError,
    )
    return a  # type: ignore[no-any-return]


def _dims(a: TensorProxy, dim: DimArg) -> tuple[int, ...]:
    """The reduced dims: all of them for None or an empty sequence; () for a 0-d tensor."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(a.ndim))
    dims = canonicalize_dims(a.ndim, dim)
    return () if a.ndim == 0 else dims


def _keep(a: TensorProxy, out: TensorProxy, dims: tuple[int, ...], keepdim: bool) -> TensorProxy:
    if not keepdim or a.ndim == 0:
        return out
    shape = [1 if i in dims else s for i, s in enumerate(a.shape)]
    kept = [i for i in range(a.ndim) if i not in dims]
    return prims.broadcast_in_dim(out, tuple(shape), tuple(kept))  # type: ignore[no-any-return]


def _accumulation(d: DType) -> DType:
    return dtypes.float32 if d.is_low_precision else d


def _numel(a: TensorProxy, dims: tuple[int, ...]) -> Any:
    """The number of elements reduced (a traced product when sizes are symbolic)."""
    sizes = [a.shape[d] for d in dims]
    return functools.reduce(operator.mul, sizes) if sizes else 1


def _check_nonempty(op: str, a: TensorProxy) -> None:
    # (a size read from data is decided here, so an empty input raises eager's error: the
    # executor's full reduction would raise torch's with a dim given, or none)
    check(
        not builtins.any(s == 0 for s in a.shape),
        lambda: (
            f"{op}(): Expected reduction dim to be specified for input.numel() == 0. Specify "
            "the reduction dim with the 'dim' argument."
        ),
    )


# Sums and products ------------------------------------------------------------------------


def _as_accumulated(a: TensorProxy, out_dtype: DType) -> TensorProxy:
    """A sum's, product's or scan's input as it accumulates: converted to the result's dtype
    first, as eager does (a bool sum is then an any); integers accumulate in int64, which wraps as
    the narrower dtype would once truncated at the end (an int8 accumulator is not compiled
    faithfully by every fusion executor)."""
    computation = dtypes.int64 if out_dtype.is_exact else _accumulation(out_dtype)
    return to_dtype(to_dtype(a, out_dtype), computation)  # type: ignore[no-any-return]


def _sum_like(op: str, prim: Any, a: Any, dim: DimArg, keepdim: bool, dtype: Any) -> Any:
    a = _check_input(op, a)
    out_dtype = dtype_arg(dtype)
    if out_dtype is None:
        out_dtype = dtypes.int64 if a.dtype.is_exact else a.dtype
    dims = _dims(a, dim)
    out = prim(_as_accumulated(a, out_dtype), dims)
    return _keep(a, to_dtype(out, out_dtype), dims, keepdim)


@torchop("torch.sum", "torch.Tensor.sum", tags=_RED)
def sum(a: Any, dim: DimArg = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    return _sum_like("sum", prims.sum, a, dim, keepdim, dtype)


@torchop("torch.nansum", "torch.Tensor.nansum", tags=_RED)
def nansum(a: Any, dim: DimArg = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    a = _check_input("nansum", a)
    check(not a.dtype.is_complex, "nansum does not support complex inputs")
    if a.dtype.is_float:
        a = prims.where(prims.isnan(a), 0.0, a)
    return _sum_like("nansum", prims.sum, a, dim, keepdim, dtype)


@torchop("torch.prod", "torch.Tensor.prod", tags=_RED)
def prod(a: Any, dim: DimArg = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    return _sum_like("prod", prims.prod, a, dim, keepdim, dtype)


@torchop("torch.mean", "torch.Tensor.mean", tags=_RED)
def mean(a: Any, dim: DimArg = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    a = _check_input("mean", a)
    out_dtype = dtype_arg(dtype)
    if out_dtype is None:
        check(
            a.dtype.is_inexact,
            lambda: (
                "mean(): could not infer output dtype. Input dtype must be either a floating "
                f"point or complex dtype. Got: {torch_dtype_name(a.dtype)}"
            ),
        )
        out_dtype = a.dtype
    check(
        out_dtype.is_inexact,
        lambda: (
            "mean(): could not infer output dtype. Optional dtype must be either a floating "
            f"point or complex dtype. Got: {torch_dtype_name(out_dtype)}"
        ),
    )
    dims = _dims(a, dim)
    s = prims.sum(to_dtype(a, _accumulation(out_dtype)), dims)
    out = prims.div(s, float(n)) if isinstance(n := _numel(a, dims), int) else prims.div(s, n)
    return _keep(a, to_dtype(out, out_dtype), dims, keepdim)


# Extrema ----------------------------------------------------------------------------------


def _extremum(op: str, prim: Any, a: Any, dim: DimArg, keepdim: bool) -> Any:
    a = _check_input(op, a)
    check(not a.dtype.is_complex, lambda: f"{op}(): does not support complex input", RuntimeError)
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        _check_nonempty(op, a)
    dims = _dims(a, dim)
    for d in dims:
        if isinstance(a.shape[d], NumberProxy):  # decided here, as _check_nonempty
            check(
                a.shape[d] != 0,
                lambda: f"{op}(): Expected reduction dim {d} to have non-zero size.",
                IndexError,
            )
    return _keep(a, prim(a, dims), dims, keepdim)


@torchop("torch.amax", "torch.Tensor.amax", tags=_RED)
def amax(a: Any, dim: DimArg = (), keepdim: bool = False) -> Any:
    return _extremum("amax", prims.amax, a, dim, keepdim)


@torchop("torch.amin", "torch.Tensor.amin", tags=_RED)
def amin(a: Any, dim: DimArg = (), keepdim: bool = False) -> Any:
    return _extremum("amin", prims.amin, a, dim, keepdim)


def _arg_input(op: str, a: TensorProxy) -> TensorProxy:
    check(not a.dtype.is_complex, lambda: f"{op}(): does not support complex input")
    return a


def _arg_reduction(op: str, prim: Any, a: Any, dim: int | None, keepdim: bool) -> Any:
    a = _arg_input(op, _check_input(op, a))
    check(not a.dtype.is_boolean, lambda: f"{op}(): does not support bool input")
    if dim is None:
        _check_nonempty(op, a)
        out = prim(a, None)
        if keepdim and a.ndim:
            out = prims.broadcast_in_dim(out, (1,) * a.ndim, ())
        return out
    d = canonicalize_dim(a.ndim, dim)
    return _keep(a, prim(a, d), (d,), keepdim)


@torchop("torch.argmax", "torch.Tensor.argmax", tags=_RED)
def argmax(a: Any, dim: int | None = None, keepdim: bool = False) -> Any:
    return _arg_reduction("argmax", prims.argmax, a, dim, keepdim)


@torchop("torch.argmin", "torch.Tensor.argmin", tags=_RED)
def argmin(a: Any, dim: int | None = None, keepdim: bool = False) -> Any:
    return _arg_reduction("argmin", prims.argmin, a, dim, keepdim)


def _max_min(op: str, value_prim: Any, index_prim: Any, a: Any, dim: Any, keepdim: bool) -> Any:
    a = _check_input(op, a)
    if dim is None:
        check(not keepdim, lambda: f"{op}(): keepdim needs a dim", TypeError)
        return _extremum(op, value_prim, a, None, False)
    check(
        is_int(dim),
        lambda: f"{op}(): argument 'dim' must be int, not {type(dim).__name__}",
        TypeError,
    )
    check(not a.dtype.is_complex, lambda: f"{op}(): does not support complex input")
    d = canonicalize_dim(a.ndim, dim)
    dims = () if a.ndim == 0 else (d,)
    values = _keep(a, value_prim(a, dims), dims, keepdim)
    # The index prims do not take bool tensors; max of a bool tensor is the max of its 0/1 values.
    b = prims.convert_element_type(a, dtypes.uint8) if a.dtype.is_boolean else a
    indices = _keep(a, index_prim(b, d), dims, keepdim)
    import torch  # torch.return_types: ``.values`` and ``.indices``, as torch returns them

    return getattr(torch.return_types, op)((values, indices))


@torchop("torch.max", "torch.Tensor.max", tags=_RED)
def max(a: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """``max(a)``; ``max(a, dim, keepdim)`` -> ``(values, indices)``; ``max(a, other)`` is
    ``maximum``."""
    if isinstance(dim, TensorProxy):
        return maximum(a, dim)
    return _max_min("max", prims.amax, prims.argmax, a, dim, keepdim)


@torchop("torch.min", "torch.Tensor.min", tags=_RED)
def min(a: Any, dim: Any = None, keepdim: bool = False) -> Any:
    """``min(a)``; ``min(a, dim, keepdim)`` -> ``(values, indices)``; ``min(a, other)`` is
    ``minimum``."""
    if isinstance(dim, TensorProxy):
        return minimum(a, dim)
    return _max_min("min", prims.amin, prims.argmin, a, dim, keepdim)


# Variance and standard deviation ------------------------------------------------------------


def _correction(dim: Any, unbiased: bool | None, correction: float | None) -> tuple[Any, float]:
    """torch's overloads: ``var(a, unbiased)``, ``var(a, dim, unbiased, keepdim)``,
    ``var(a, dim, *, correction, keepdim)``; returns (dim, correction)."""
    if isinstance(dim, bool):
        dim, unbiased = None, dim
    check(
        unbiased is None or correction is None,
        "Cannot specify both unbiased and correction",
    )
    if correction is None:
        correction = 0 if unbiased is False else 1
    return dim, correction


def _complex_variance(
    x: TensorProxy, dims: tuple[int, ...], correction: float, with_mean: bool
) -> tuple[Any, Any]:
    """The variance of a complex tensor as the sum of its real and imaginary parts' (the mean
    squared ``|x - mean|``): real ops, whose gradients are eager's (the variance prim's rule
    is written for real inputs); the mean, where asked, is the complex one."""
    v = prims.add(
        prims.var(prims.real(x), dims, correction=correction),
        prims.var(prims.imag(x), dims, correction=correction),
    )
    if not with_mean:
        return v, None
    count = 1
    for d in dims:
        count = count * x.shape[d]
    return v, prims.div(prims.sum(x, dims), count)


def _variance(
    op: str,
    a: Any,
    dim: Any,
    unbiased: bool | None,
    keepdim: bool,
    correction: float | None,
    *,
    root: bool,
    with_mean: bool,
) -> Any:
    a = _check_input(op, a)
    check(a.dtype.is_inexact, "std and var only support floating point and complex dtypes")
    dim, c = _correction(dim, unbiased, correction)
    dims = _dims(a, dim)
    x = to_dtype(a, _accumulation(a.dtype))
    if x.dtype.is_complex:
        v, m = _complex_variance(x, dims, c, with_mean)
    elif with_mean:
        v, m = prims.var_mean(x, dims, correction=c)
    else:
        v, m = prims.var(x, dims, correction=c), None
    if root:
        v = prims.sqrt(v)
    v = _keep(a, to_dtype(v, dtypes.corresponding_real_dtype(a.dtype)), dims, keepdim)
    if m is None:
        return v
    return v, _keep(a, to_dtype(m, a.dtype), dims, keepdim)


@torchop("torch.var", "torch.Tensor.var", tags=_RED)
def var(
    a: Any,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> Any:
    return _variance("var", a, dim, unbiased, keepdim, correction, root=False, with_mean=False)


@torchop("torch.std", "torch.Tensor.std", tags=_RED)
def std(
    a: Any,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> Any:
    return _variance("std", a, dim, unbiased, keepdim, correction, root=True, with_mean=False)


@torchop("torch.var_mean", tags=_RED)
def var_mean(
    a: Any,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> Any:
    return _variance("var_mean", a, dim, unbiased, keepdim, correction, root=False, with_mean=True)


@torchop("torch.std_mean", tags=_RED)
def std_mean(
    a: Any,
    dim: Any = None,
    unbiased: bool | None = None,
    keepdim: bool = False,
    *,
    correction: float | None = None,
) -> Any:
    return _variance("std_mean", a, dim, unbiased, keepdim, correction, root=True, with_mean=True)


# Logical reductions -------------------------------------------------------------------------


def _count(a: TensorProxy, nonzero: bool, dims: tuple[int, ...]) -> TensorProxy:
    """How many elements along ``dims`` are (non)zero, as int64."""
    if a.dtype.is_boolean and nonzero:
        flags = a
    else:
        flags = (prims.ne if nonzero else prims.eq)(a, zero_of(a.dtype))
    return prims.sum(prims.convert_element_type(flags, dtypes.int64), dims)  # type: ignore[no-any-return]


def _all_any(op: str, a: Any, dim: DimArg, keepdim: bool) -> Any:
    a = _check_input(op, a)
    dims = _dims(a, dim)
    # all: no element is zero; any: some element is nonzero.
    counted = _count(a, op == "any", dims)
    out = prims.ne(counted, 0) if op == "any" else prims.eq(counted, 0)
    if a.dtype == dtypes.uint8:
        out = prims.convert_element_type(out, dtypes.uint8)
    return _keep(a, out, dims, keepdim)


@torchop("torch.all", "torch.Tensor.all", tags=_RED)
def all(a: Any, dim: DimArg = None, keepdim: bool = False) -> Any:
    return _all_any("all", a, dim, keepdim)


@torchop("torch.any", "torch.Tensor.any", tags=_RED)
def any(a: Any, dim: DimArg = None, keepdim: bool = False) -> Any:
    return _all_any("any", a, dim, keepdim)


@torchop("torch.count_nonzero", "torch.Tensor.count_nonzero", tags=_RED)
def count_nonzero(a: Any, dim: DimArg = None) -> Any:
    a = _check_input("count_nonzero", a)
    return _count(a, True, _dims(a, dim))


# Norms ------------------------------------------------------------------------------------


@torchop("torch.linalg.vector_norm", tags=_RED)
def vector_norm(
    x: Any, ord: float = 2, dim: DimArg = None, keepdim: bool = False, *, dtype: Any = None
) -> Any:
    x = _check_input("linalg.vector_norm", x)
    check(
        x.dtype.is_inexact,
        lambda: (
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got "
            f"{torch_dtype_name(x.dtype)}"
        ),
    )
    check(
        is_real(ord),
        lambda: f"linalg.vector_norm: ord must be a number, got {ord!r}",
        TypeError,
    )
    in_dtype = dtype_arg(dtype) or x.dtype
    out_dtype = dtypes.corresponding_real_dtype(in_dtype)
    computation = _accumulation(out_dtype)
    dims = _dims(x, dim)
    if ord in (math.inf, -math.inf) and (dim is None or dim == () or dim == []):
        _check_nonempty("linalg.vector_norm", x)
    if in_dtype.is_complex:
        mag = to_dtype(prims.abs(to_dtype(x, in_dtype)), computation)
    elif ord == 2:
        mag = to_dtype(x, computation)
    else:
        mag = prims.abs(to_dtype(x, computation))
    if ord == math.inf:
        out = prims.amax(mag, dims)
    elif ord == -math.inf:
        out = prims.amin(mag, dims)
    elif ord == 0:
        out = prims.sum(prims.convert_element_type(prims.ne(mag, 0.0), computation), dims)
    elif ord == 1:
        out = prims.sum(mag, dims)
    elif ord == 2:
        out = prims.sqrt(prims.sum(prims.mul(mag, mag), dims))
    else:
        out = prims.pow(prims.sum(prims.pow(mag, float(ord)), dims), 1.0 / float(ord))
    return _keep(x, to_dtype(out, out_dtype), dims, keepdim)


@torchop("torch.norm", "torch.Tensor.norm", tags=_RED)
def norm(
    a: Any, p: Any = "fro", dim: DimArg = None, keepdim: bool = False, dtype: Any = None
) -> Any:
    a = _check_input("norm", a)
    if isinstance(p, str):
        if p != "fro":
            raise UnsupportedOptionError(f"norm: p={p!r} is not supported (only 'fro' and numbers)")
        ndims = len(_dims(a, dim))
        check(
            dim is None or ndims <= 2,
            lambda: f"norm: p='fro' supports at most 2 dims, got {dim}",
        )
        p = 2
    return vector_norm(a, p, dim, keepdim, dtype=dtype)


@torchop("torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.logsumexp", tags=_RED)
def logsumexp(a: Any, dim: DimArg, keepdim: bool = False) -> Any:
    a = _check_input("logsumexp", a)
    check(
        not a.dtype.is_complex,
        "logsumexp(): complex inputs are not supported",
        UnsupportedOptionError,
    )
    dims = _dims(a, dim)
    out_dtype = a.dtype if a.dtype.is_float else dtypes.default_float_dtype()
    x = to_dtype(a, _accumulation(out_dtype))
    if 0 in [a.shape[d] for d in dims if isinstance(a.shape[d], int)]:
        # Nothing to shift by: log of an empty sum, -inf as eager
        out = prims.log(prims.sum(prims.exp(x), dims))
        return _keep(a, to_dtype(out, out_dtype), dims, keepdim)
    m = prims.amax(x, dims)
    # An infinite max would give inf - inf = nan; shifting by 0 instead keeps the right limit.
    m = prims.where(prims.isinf(m), 0.0, m)
    shifted = prims.sub(x, expand_to(_keep(a, m, dims, True), x.shape))
    out = prims.add(prims.log(prims.sum(prims.exp(shifted), dims)), m)
    return _keep(a, to_dtype(out, out_dtype), dims, keepdim)


# Scans ------------------------------------------------------------------------------------


def _scan(op: str, prim: Any, a: Any, dim: int, dtype: Any) -> Any:
    a = _check_input(op, a)
    out_dtype = dtype_arg(dtype)
    if out_dtype is None:
        out_dtype = dtypes.int64 if a.dtype.is_exact else a.dtype
    d = canonicalize_dim(a.ndim, dim)
    # (a bool scan stays one: eager's kernels refuse it)
    x = to_dtype(a, out_dtype) if out_dtype.is_boolean else _as_accumulated(a, out_dtype)
    out = prim(x, d)
    return to_dtype(out, out_dtype)


@torchop("torch.cumsum", "torch.Tensor.cumsum", tags=_RED)
def cumsum(a: Any, dim: int, *, dtype: Any = None) -> Any:
    return _scan("cumsum", prims.cumsum, a, dim, dtype)


@torchop("torch.cumprod", "torch.Tensor.cumprod", tags=_RED)
def cumprod(a: Any, dim: int, *, dtype: Any = None) -> Any:
    return _scan("cumprod", prims.cumprod, a, dim, dtype)


cumsum_ = inplace(cumsum, "torch.Tensor.cumsum_")
cumprod_ = inplace(cumprod, "torch.Tensor.cumprod_")
