"""Shape prims: each states exactly what it does; torch's conveniences live in the ops layer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder_ir.prims._common import (
    check_same_device,
    check_same_dtype,
    check_shape,
    check_tensor,
    make_prim,
)
from thunder_ir.proxies import TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import canonicalize_dim, check


def _same_int(a: Any, b: Any) -> bool:
    return bool(a == b) if isinstance(a, int) and isinstance(b, int) else True


def _out(a: TensorProxy, shape: Sequence[Any]) -> TensorProxy:
    return TensorProxy(
        shape=tuple(shape), dtype=a.dtype, device=a.device, requires_grad=a.requires_grad
    )


def _broadcast_in_dim_meta(
    a: Any, shape: Sequence[Any], broadcast_dimensions: Sequence[int]
) -> TensorProxy:
    a = check_tensor(a, "prims.broadcast_in_dim")
    shape = check_shape(shape, "prims.broadcast_in_dim")
    bd = tuple(broadcast_dimensions)
    check(
        len(bd) == a.ndim,
        lambda: f"prims.broadcast_in_dim: {a.ndim} broadcast dimensions expected, got {bd}",
    )
    check(
        all(0 <= d < len(shape) for d in bd),
        lambda: f"prims.broadcast_in_dim: broadcast dimensions {bd} out of range for shape {shape}",
    )
    check(
        all(x < y for x, y in zip(bd, bd[1:])),
        lambda: f"prims.broadcast_in_dim: broadcast dimensions {bd} must be increasing",
    )
    for i, d in enumerate(bd):
        s = a.shape[i]
        check(
            not isinstance(s, int) or s == 1 or _same_int(s, shape[d]),
            lambda: (
                f"prims.broadcast_in_dim: dimension {i} of size {s} cannot be broadcast to size {shape[d]}"
            ),
        )
    return _out(a, shape)


broadcast_in_dim = make_prim("broadcast_in_dim", _broadcast_in_dim_meta, tags=(OpTag.SHAPE_OP,))


def _reshape_meta(a: Any, shape: Sequence[Any]) -> TensorProxy:
    a = check_tensor(a, "prims.reshape")
    shape = check_shape(shape, "prims.reshape")
    n_in, n_out = 1, 1
    for s in a.shape:
        n_in = n_in * s
    for s in shape:
        n_out = n_out * s
    if isinstance(n_in, int) and isinstance(n_out, int):
        check(n_in == n_out, lambda: f"shape '{list(shape)}' is invalid for input of size {n_in}")
    return _out(a, shape)


reshape = make_prim("reshape", _reshape_meta, tags=(OpTag.SHAPE_OP,))


def _slice_meta(
    a: Any,
    start_indices: Sequence[int],
    end_indices: Sequence[int],
    strides: Sequence[int] | None = None,
) -> TensorProxy:
    a = check_tensor(a, "prims.slice")
    strides = tuple(strides) if strides is not None else (1,) * a.ndim
    check(
        len(start_indices) == len(end_indices) == len(strides) == a.ndim,
        "prims.slice: one start, end and stride per dimension expected",
    )
    shape = []
    for size, lo, hi, st in zip(a.shape, start_indices, end_indices, strides):
        check(st >= 1, lambda: f"prims.slice: strides must be positive, got {strides}")
        if isinstance(size, int) and isinstance(lo, int) and isinstance(hi, int):
            check(
                0 <= lo <= hi <= size,
                lambda: (
                    f"prims.slice: bounds [{lo}, {hi}) out of range for a dimension of size {size}"
                ),
            )
        shape.append((hi - lo + st - 1) // st)
    return _out(a, shape)


slice_prim = make_prim("slice", _slice_meta, tags=(OpTag.SHAPE_OP,))


def _squeeze_meta(a: Any, dims: Sequence[int]) -> TensorProxy:
    a = check_tensor(a, "prims.squeeze")
    dims = tuple(canonicalize_dim(a.ndim, d) for d in dims)
    for d in dims:
        check(
            not isinstance(a.shape[d], int) or a.shape[d] == 1,
            lambda: f"prims.squeeze: dimension {d} has size {a.shape[d]}, not 1",
        )
    return _out(a, [s for i, s in enumerate(a.shape) if i not in dims])


squeeze = make_prim("squeeze", _squeeze_meta, tags=(OpTag.SHAPE_OP,))


def _unsqueeze_meta(a: Any, dim: int) -> TensorProxy:
    a = check_tensor(a, "prims.unsqueeze")
    dim = canonicalize_dim(a.ndim + 1, dim)
    shape = list(a.shape)
    shape.insert(dim, 1)
    return _out(a, shape)


unsqueeze = make_prim("unsqueeze", _unsqueeze_meta, tags=(OpTag.SHAPE_OP,))


def _transpose_meta(a: Any, permutation: Sequence[int]) -> TensorProxy:
    a = check_tensor(a, "prims.transpose")
    perm = tuple(permutation)
    check(
        sorted(perm) == list(range(a.ndim)),
        lambda: f"prims.transpose: {perm} is not a permutation of the {a.ndim} dimensions",
    )
    return _out(a, [a.shape[p] for p in perm])


transpose = make_prim("transpose", _transpose_meta, tags=(OpTag.SHAPE_OP,))


def _cat_meta(tensors: Sequence[Any], dim: int) -> TensorProxy:
    check(
        isinstance(tensors, (list, tuple)) and len(tensors) > 0,
        "prims.cat: expected a non-empty list of tensors",
        TypeError,
    )
    ts = [check_tensor(t, "prims.cat") for t in tensors]
    check_same_dtype(ts, "prims.cat")
    check_same_device(ts, "prims.cat")
    nd = ts[0].ndim
    dim = canonicalize_dim(nd, dim)
    total: Any = 0
    for t in ts:
        check(
            t.ndim == nd,
            lambda: f"prims.cat: tensors must have the same rank, got {nd} and {t.ndim}",
        )
        for i in range(nd):
            if i != dim:
                check(
                    _same_int(t.shape[i], ts[0].shape[i]),
                    lambda: (
                        f"prims.cat: sizes of tensors must match except in dimension {dim}; got {ts[0].shape} and {t.shape}"
                    ),
                )
        total = total + t.shape[dim]
    shape = list(ts[0].shape)
    shape[dim] = total
    return TensorProxy(
        shape=shape,
        dtype=ts[0].dtype,
        device=ts[0].device,
        requires_grad=any(t.requires_grad for t in ts),
    )


cat = make_prim("cat", _cat_meta, tags=(OpTag.SHAPE_OP,))


def _pad_meta(
    a: Any, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]
) -> TensorProxy:
    a = check_tensor(a, "prims.pad")
    check(
        len(padding_config) == a.ndim,
        lambda: (
            f"prims.pad: one (low, high, interior) per dimension expected, got {len(padding_config)} for rank {a.ndim}"
        ),
    )
    shape = []
    for size, (lo, hi, interior) in zip(a.shape, padding_config):
        check(interior >= 0, "prims.pad: interior padding must be non-negative")
        if isinstance(size, int):
            n = lo + hi + size + max(size - 1, 0) * interior
        else:
            # max(size - 1, 0) of a symbolic size >= 0, as integer arithmetic the trace records:
            # 1 - 1 // (size + 1) is min(size, 1).
            n = (
                lo + hi + size + (size - (1 - 1 // (size + 1))) * interior
                if interior
                else lo + hi + size
            )
        check(
            not isinstance(n, int) or n >= 0,
            lambda: f"prims.pad: padding {padding_config} gives a negative size",
        )
        shape.append(n)
    return _out(a, shape)


pad = make_prim("pad", _pad_meta, tags=(OpTag.SHAPE_OP,))


def _flip_meta(a: Any, dims: Sequence[int]) -> TensorProxy:
    a = check_tensor(a, "prims.flip")
    for d in dims:
        canonicalize_dim(a.ndim, d)
    return _out(a, a.shape)


flip = make_prim("flip", _flip_meta, tags=(OpTag.SHAPE_OP,))


def _shallow_copy_meta(a: Any) -> TensorProxy:
    a = check_tensor(a, "prims.shallow_copy")
    return _out(a, a.shape)


# The same tensor under a new name: an op that returns its input unchanged (contiguous, a no-op
# reshape) records this, so each op output is a fresh proxy. Executors run it as the identity.
shallow_copy = make_prim("shallow_copy", _shallow_copy_meta, tags=(OpTag.SHAPE_OP,))


def _clone_meta(a: Any) -> TensorProxy:
    a = check_tensor(a, "prims.clone")
    return _out(a, a.shape)


# A copy of a tensor in new memory (torch.clone): never aliases its input when executed.
clone = make_prim("clone", _clone_meta)


def _clone_layout_meta(a: Any) -> TensorProxy:
    a = check_tensor(a, "prims.clone_layout")
    return _out(a, a.shape)


# A copy in new memory with its input's strides exactly, also non-dense ones (a stepped slice):
# a program that writes into it instead of a caller's tensor computes what eager computes on
# that tensor (view or copy by ``reshape``, the layout of results).
clone_layout = make_prim("clone_layout", _clone_layout_meta)


def _stop_gradient_meta(a: Any) -> TensorProxy:
    a = check_tensor(a, "prims.stop_gradient")
    return TensorProxy(shape=a.shape, dtype=a.dtype, device=a.device, requires_grad=False)


# The same values with no gradient flowing back (Tensor.detach).
stop_gradient = make_prim("stop_gradient", _stop_gradient_meta, tags=(OpTag.STOPS_GRADIENT,))


def _written_without_grad_meta(target: Any, value: Any, gradient: bool = True) -> TensorProxy:
    target = check_tensor(target, "prims.written_without_grad")
    value = check_tensor(value, "prims.written_without_grad")
    return TensorProxy(
        shape=value.shape,
        dtype=value.dtype,
        device=value.device,
        requires_grad=target.requires_grad,
    )


# ``value`` written into ``target`` under no_grad (``p.mul_(0.9)`` in ``torch.no_grad()``): the
# values of ``value``; the gradient flows to ``target``, which keeps its place in the autograd
# graph (a leaf, or what computed it) as a tensor written in place without grad does in eager.
# With ``gradient=False`` (a random fill, ``h.uniform_()``), ``target`` receives zeros, as
# torch's derivative of the fill gives it.
written_without_grad = make_prim(
    "written_without_grad", _written_without_grad_meta, tags=(OpTag.STOPS_GRADIENT,)
)
