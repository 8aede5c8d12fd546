"""Reduction prims: reduce the given dims (no keepdim, no dtype argument: the ops layer adds them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from thunder_ir import dtypes
from thunder_ir.prims._common import check_tensor, make_prim
from thunder_ir.proxies import TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import canonicalize_dim, canonicalize_dims, check


def _reduced(a: TensorProxy, dims: Sequence[int], dtype: Any = None) -> TensorProxy:
    shape = [s for i, s in enumerate(a.shape) if i not in dims]
    dtype = dtype if dtype is not None else a.dtype
    return TensorProxy(
        shape=shape,
        dtype=dtype,
        device=a.device,
        requires_grad=a.requires_grad and dtype.is_inexact,
    )


def _reduction_meta(name: str, nonempty: bool) -> Callable[..., TensorProxy]:
    def meta(a: Any, dims: Sequence[int]) -> TensorProxy:
        a = check_tensor(a, f"prims.{name}")
        ds = canonicalize_dims(a.ndim, tuple(dims))
        if nonempty:
            for d in ds:
                check(
                    a.ndim == 0 or not isinstance(a.shape[d], int) or a.shape[d] > 0,
                    lambda: f"{name}(): Expected reduction dim {d} to have non-zero size.",
                    IndexError,
                )
        return _reduced(a, ds)

    return meta


sum = make_prim("sum", _reduction_meta("sum", False), tags=(OpTag.REDUCTION,))
prod = make_prim("prod", _reduction_meta("prod", False), tags=(OpTag.REDUCTION,))
amax = make_prim("amax", _reduction_meta("amax", True), tags=(OpTag.REDUCTION,))
amin = make_prim("amin", _reduction_meta("amin", True), tags=(OpTag.REDUCTION,))


def _var_meta(a: Any, dims: Sequence[int], *, correction: float) -> TensorProxy:
    a = check_tensor(a, "prims.var")
    check(
        a.dtype.is_inexact,
        lambda: f"var: expected a floating point or complex tensor, got {a.dtype.name}",
        TypeError,
    )
    ds = canonicalize_dims(a.ndim, tuple(dims))
    return _reduced(a, ds, dtypes.corresponding_real_dtype(a.dtype))


var = make_prim("var", _var_meta, tags=(OpTag.REDUCTION,))


def _var_mean_meta(
    a: Any, dims: Sequence[int], *, correction: float
) -> tuple[TensorProxy, TensorProxy]:
    v = _var_meta(a, dims, correction=correction)
    ds = canonicalize_dims(a.ndim, tuple(dims))
    return v, _reduced(a, ds)


var_mean = make_prim("var_mean", _var_mean_meta, tags=(OpTag.REDUCTION,))


def _arg_reduction_meta(name: str) -> Callable[..., TensorProxy]:
    def meta(a: Any, dim: int | None) -> TensorProxy:
        a = check_tensor(a, f"prims.{name}")
        check(
            not a.dtype.is_complex,
            lambda: f"{name}(): complex tensors are not supported",
            TypeError,
        )
        if dim is None:
            check(
                a.ndim == 0 or all(not isinstance(s, int) or s > 0 for s in a.shape),
                lambda: f"{name}(): Expected reduction dim to be specified for input.numel() == 0.",
                IndexError,
            )
            return TensorProxy(shape=(), dtype=dtypes.int64, device=a.device)
        d = canonicalize_dim(a.ndim, dim)
        check(
            a.ndim == 0 or not isinstance(a.shape[d], int) or a.shape[d] > 0,
            lambda: f"{name}(): Expected reduction dim {d} to have non-zero size.",
            IndexError,
        )
        shape = [s for i, s in enumerate(a.shape) if i != d]
        return TensorProxy(shape=shape, dtype=dtypes.int64, device=a.device)

    return meta


argmax = make_prim("argmax", _arg_reduction_meta("argmax"), tags=(OpTag.REDUCTION,))
argmin = make_prim("argmin", _arg_reduction_meta("argmin"), tags=(OpTag.REDUCTION,))


def _cumulative_meta(name: str) -> Callable[..., TensorProxy]:
    def meta(a: Any, dim: int) -> TensorProxy:
        a = check_tensor(a, f"prims.{name}")
        canonicalize_dim(a.ndim, dim)
        return TensorProxy(
            shape=a.shape, dtype=a.dtype, device=a.device, requires_grad=a.requires_grad
        )

    return meta


cumsum = make_prim("cumsum", _cumulative_meta("cumsum"))
cumprod = make_prim("cumprod", _cumulative_meta("cumprod"))
