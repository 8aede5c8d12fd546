"""Building blocks the neural-network ops share: elementwise arithmetic and reductions written
directly on prims, argument checks and legacy-argument handling. Nothing here is an op: the ops in
``nn*.py`` record these prims as their subsymbols.

The arithmetic is the torch-language ops' own, without recording the op: ``add(a, b)`` records
what ``ltorch.add(a, b)`` decomposes into (``compute`` of ``ops/elementwise.py``: torch's
broadcasting, promotion and CPU scalar rules; ``elementwise_unary`` for the unary ops), less the
argument checks torch makes of a user's call. ``tests/thunder_ir/test_nn_base.py`` holds them to
the ops."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder_ir import prims
from thunder_ir.dtypes import DType
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.ops._helpers import Promotion, elementwise_unary, opmath, to_dtype
from thunder_ir.ops.elementwise import compute
from thunder_ir.proxies import NumberProxy, TensorProxy
from thunder_ir.utils import canonicalize_dims, check

__all__ = [
    "abs_",
    "add",
    "amax_",
    "apply_reduction",
    "clamp",
    "div",
    "eq",
    "erf",
    "exp",
    "expand_reduced",
    "ge",
    "gt",
    "keep_dims",
    "le",
    "log",
    "log1p",
    "lt",
    "maximum",
    "mean_",
    "minimum",
    "mul",
    "ne",
    "neg",
    "not_implemented",
    "opmath",
    "pair",
    "pow_",
    "reduction_arg",
    "require_float",
    "require_tensor",
    "rsqrt",
    "sigmoid",
    "sqrt",
    "sub",
    "sum_",
    "tanh",
    "unsqueeze_to",
    "where",
]


def require_tensor(x: Any, op: str, what: str = "input") -> TensorProxy:
    check(
        isinstance(x, TensorProxy),
        lambda: f"{op}(): argument '{what}' must be Tensor, not {type(x).__name__}",
        TypeError,
    )
    return x  # type: ignore[no-any-return]


def require_float(x: TensorProxy, op: str) -> None:
    check(
        x.dtype.is_inexact,
        lambda: f"{op}: expected a floating point tensor, got {x.dtype.name}",
        RuntimeError,
    )


def not_implemented(op: str, what: str) -> UnsupportedOptionError:
    return UnsupportedOptionError(f"{op}: {what} is not supported yet")


# Elementwise, with torch's broadcasting and promotion --------------------------------------------


def add(a: Any, b: Any) -> Any:
    return compute("add", Promotion.DEFAULT, prims.add, a, b, casts_cpu_scalars=True)


def sub(a: Any, b: Any) -> Any:
    return compute("sub", Promotion.DEFAULT, prims.sub, a, b, casts_cpu_scalars=True)


def mul(a: Any, b: Any) -> Any:
    return compute("mul", Promotion.DEFAULT, prims.mul, a, b)


def div(a: Any, b: Any) -> Any:
    return compute("div", Promotion.INT_TO_FLOAT, prims.div, a, b)


def pow_(a: Any, b: Any) -> Any:
    return compute("pow", Promotion.DEFAULT, prims.pow, a, b, casts_cpu_scalars=True)


def maximum(a: Any, b: Any) -> Any:
    return compute("maximum", Promotion.DEFAULT, prims.maximum, a, b)


def minimum(a: Any, b: Any) -> Any:
    return compute("minimum", Promotion.DEFAULT, prims.minimum, a, b)


def eq(a: Any, b: Any) -> Any:
    return compute("eq", Promotion.ALWAYS_BOOL, prims.eq, a, b, casts_cpu_scalars=True)


def ne(a: Any, b: Any) -> Any:
    return compute("ne", Promotion.ALWAYS_BOOL, prims.ne, a, b, casts_cpu_scalars=True)


def lt(a: Any, b: Any) -> Any:
    return compute("lt", Promotion.ALWAYS_BOOL, prims.lt, a, b, casts_cpu_scalars=True)


def le(a: Any, b: Any) -> Any:
    return compute("le", Promotion.ALWAYS_BOOL, prims.le, a, b, casts_cpu_scalars=True)


def gt(a: Any, b: Any) -> Any:
    return compute("gt", Promotion.ALWAYS_BOOL, prims.gt, a, b, casts_cpu_scalars=True)


def ge(a: Any, b: Any) -> Any:
    return compute("ge", Promotion.ALWAYS_BOOL, prims.ge, a, b, casts_cpu_scalars=True)


def neg(a: Any) -> Any:
    return elementwise_unary(prims.neg, a)


def abs_(a: Any) -> Any:
    return elementwise_unary(prims.abs, a)


def exp(a: Any) -> Any:
    return elementwise_unary(prims.exp, a, Promotion.INT_TO_FLOAT)


def log(a: Any) -> Any:
    return elementwise_unary(prims.log, a, Promotion.INT_TO_FLOAT)


def log1p(a: Any) -> Any:
    return elementwise_unary(prims.log1p, a, Promotion.INT_TO_FLOAT)


def sqrt(a: Any) -> Any:
    return elementwise_unary(prims.sqrt, a, Promotion.INT_TO_FLOAT)


def rsqrt(a: Any) -> Any:
    return elementwise_unary(prims.rsqrt, a, Promotion.INT_TO_FLOAT)


def tanh(a: Any) -> Any:
    return elementwise_unary(prims.tanh, a, Promotion.INT_TO_FLOAT)


def erf(a: Any) -> Any:
    return elementwise_unary(prims.erf, a, Promotion.INT_TO_FLOAT)


def sigmoid(a: Any) -> Any:
    return elementwise_unary(prims.sigmoid, a, Promotion.INT_TO_FLOAT)


def where(pred: Any, a: Any, b: Any) -> Any:
    """torch.where: broadcasts the three, promotes ``a`` and ``b`` (numbers are weak)."""
    from thunder_ir.ops._helpers import broadcast, promote

    if isinstance(a, TensorProxy) or isinstance(b, TensorProxy):
        _, dtype = promote(a, b, kind=Promotion.NO_OPMATH)
        a, b = to_dtype(a, dtype), to_dtype(b, dtype)
        a, b = (_number_as(x, dtype) for x in (a, b))
    pred, a, b = broadcast(pred, a, b)
    return prims.where(pred, a, b)


def _number_as(x: Any, dtype: DType) -> Any:
    if isinstance(x, (TensorProxy, NumberProxy)):
        return x
    if dtype.is_float:
        return float(x)
    if dtype.is_boolean:
        return bool(x)
    if dtype.is_complex:
        return complex(x)
    return int(x)


def clamp(a: Any, lo: Any = None, hi: Any = None) -> Any:
    """torch.clamp for number bounds (NaN propagates, as torch's)."""
    out = a
    if lo is not None:
        out = where(lt(out, lo), lo, out)
    if hi is not None:
        out = where(gt(out, hi), hi, out)
    return out


# Reductions ---------------------------------------------------------------------------------------


def keep_dims(a: TensorProxy, out: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    """``out`` (``a`` reduced over ``dims``) with the reduced dims put back as size 1."""
    if a.ndim == 0:
        return out
    shape = [1 if i in dims else s for i, s in enumerate(a.shape)]
    kept = [i for i in range(a.ndim) if i not in dims]
    return prims.broadcast_in_dim(out, tuple(shape), tuple(kept))  # type: ignore[no-any-return]


def expand_reduced(a: TensorProxy, out: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    """``out`` (``a`` reduced over ``dims``) broadcast back to ``a``'s shape, in one prim."""
    # (ndim first: comparing tuples of other lengths compares their symbolic sizes, a decision)
    if out.ndim == a.ndim and tuple(out.shape) == tuple(a.shape):
        return out
    kept = tuple(i for i in range(a.ndim) if i not in dims)
    return prims.broadcast_in_dim(out, tuple(a.shape), kept)  # type: ignore[no-any-return]


def _dims(a: TensorProxy, dims: int | Sequence[int] | None) -> tuple[int, ...]:
    if dims is None:
        return tuple(range(a.ndim))
    return canonicalize_dims(a.ndim, dims) if a.ndim else ()


def sum_(
    a: TensorProxy, dims: int | Sequence[int] | None = None, keepdim: bool = False
) -> TensorProxy:
    """A sum in ``a``'s dtype (callers upcast first when they want opmath)."""
    ds = _dims(a, dims)
    out = prims.sum(a, ds)
    return keep_dims(a, out, ds) if keepdim else out


def mean_(
    a: TensorProxy, dims: int | Sequence[int] | None = None, keepdim: bool = False
) -> TensorProxy:
    ds = _dims(a, dims)
    n: Any = 1
    for d in ds:
        n = n * a.shape[d]
    return div(sum_(a, ds, keepdim), n)  # type: ignore[no-any-return]


def amax_(
    a: TensorProxy, dims: int | Sequence[int] | None = None, keepdim: bool = False
) -> TensorProxy:
    ds = _dims(a, dims)
    out = prims.amax(a, ds)
    return keep_dims(a, out, ds) if keepdim else out


def unsqueeze_to(a: TensorProxy, ndim: int, dim: int) -> TensorProxy:
    """A 1-D ``a`` shaped to broadcast along ``dim`` of a rank-``ndim`` tensor ((1, C, 1, 1) for
    per-channel parameters)."""
    shape: list[Any] = [1] * ndim
    shape[dim] = a.shape[0]
    return prims.broadcast_in_dim(a, tuple(shape), (dim,))  # type: ignore[no-any-return]


# Loss reductions ----------------------------------------------------------------------------------

_REDUCTIONS = ("none", "mean", "sum")


def reduction_arg(size_average: Any, reduce: Any, reduction: str) -> str:
    """torch's legacy ``size_average``/``reduce`` arguments folded into ``reduction``."""
    if size_average is not None or reduce is not None:
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        if size_average and reduce:
            return "mean"
        return "sum" if reduce else "none"
    check(
        reduction in _REDUCTIONS,
        lambda: f"{reduction} is not a valid value for reduction",
        ValueError,
    )
    return reduction


def apply_reduction(loss: TensorProxy, reduction: str) -> TensorProxy:
    if reduction == "mean":
        # torch's mean: float16/bfloat16 summed and divided in float32, rounded once
        return to_dtype(mean_(to_dtype(loss, opmath(loss.dtype))), loss.dtype)  # type: ignore[no-any-return]
    if reduction == "sum":
        return sum_(loss)
    return loss


def pair(x: Any, n: int, what: str) -> tuple[Any, ...]:
    """An int or a sequence as an ``n``-tuple (torch's _single/_pair/_triple)."""
    if isinstance(x, (list, tuple)):
        if len(x) == 1:
            return tuple(x) * n
        check(
            len(x) == n,
            lambda: (
                f"expected {what} to be a single integer value or a list of {n} values to match the convolution dimensions, but got {what}={list(x)}"
            ),
        )
        return tuple(x)
    return (x,) * n
