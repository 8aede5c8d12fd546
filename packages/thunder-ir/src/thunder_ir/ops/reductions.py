"""Reduction torch-language ops: dim/keepdim/dtype handling on top of reduction prims."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder_ir import dtypes, prims
from thunder_ir.ops._helpers import dtype_arg, to_dtype
from thunder_ir.ops._registry import torchop
from thunder_ir.proxies import TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import canonicalize_dims, check

_RED = (OpTag.REDUCTION,)


def _dims(a: TensorProxy, dim: int | Sequence[int] | None) -> tuple[int, ...]:
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(a.ndim))
    return canonicalize_dims(a.ndim, dim)


def _keep(a: TensorProxy, out: TensorProxy, dims: tuple[int, ...], keepdim: bool) -> TensorProxy:
    if not keepdim or a.ndim == 0:
        return out
    shape = [1 if i in dims else s for i, s in enumerate(a.shape)]
    kept = [i for i in range(a.ndim) if i not in dims]
    return prims.broadcast_in_dim(out, tuple(shape), tuple(kept))  # type: ignore[no-any-return]


@torchop("torch.sum", "torch.Tensor.sum", tags=_RED)
def sum(a: Any, dim: int | Sequence[int] | None = None, keepdim: bool = False, *, dtype: Any = None) -> Any:
    check(isinstance(a, TensorProxy), lambda: f"sum(): argument 'input' must be Tensor, not {type(a).__name__}", TypeError)
    out_dtype = dtype_arg(dtype)
    if out_dtype is None:
        out_dtype = dtypes.int64 if a.dtype.is_exact else a.dtype
    computation = dtypes.float32 if out_dtype.is_low_precision else out_dtype
    dims = _dims(a, dim)
    out = prims.sum(to_dtype(a, computation), dims)
    return _keep(a, to_dtype(out, out_dtype), dims, keepdim)
