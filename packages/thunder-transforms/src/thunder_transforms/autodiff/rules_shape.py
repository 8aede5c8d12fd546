"""VJP rules of the shape, copy and indexing prims: each is the adjoint data movement (a slice is
undone by a pad, a gather by a scatter-add)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder_ir import BoundSymbol, TensorProxy, dtypes, prims
from thunder_ir import ops as ltorch
from thunder_ir.ops.shape import sizes_arg
from thunder_transforms.autodiff.registry import (
    GradPairs,
    bound_arguments,
    register_vjp,
    static_eq,
    sum_to_shape,
    was_one,
    zeros_like,
)

__all__: list[str] = []

P = prims


def _reshape_to(g: TensorProxy, shape: Sequence[Any]) -> TensorProxy:
    same = len(g.shape) == len(shape) and all(static_eq(x, y) for x, y in zip(g.shape, shape))
    return g if same else P.reshape(g, tuple(shape))  # type: ignore[no-any-return]


def _inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


@register_vjp(P.broadcast_in_dim)
def _broadcast_in_dim(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, shape, bdims = bsym.args
    dims = {d for d in range(len(shape)) if d not in bdims}
    for i, d in enumerate(bdims):
        if was_one(a.shape[i]) and not static_eq(shape[d], a.shape[i]):
            dims.add(d)
    summed = P.sum(g, tuple(sorted(dims))) if dims else g
    return [(a, _reshape_to(summed, a.shape))]


@register_vjp(P.reshape, P.squeeze, P.unsqueeze)
def _reshape(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a = bsym.args[0]
    return [(a, _reshape_to(g, a.shape))]


@register_vjp(P.transpose)
def _transpose(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, perm = bsym.args
    return [(a, P.transpose(g, _inverse(perm)))]


@register_vjp(P.slice_prim)
def _slice(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, starts, _ends, *rest = bsym.args
    strides = rest[0] if rest else bsym.kwargs.get("strides")
    strides = tuple(strides) if strides is not None else (1,) * a.ndim
    config = []
    for size, lo, st, n in zip(a.shape, starts, strides, g.shape):
        if isinstance(n, int) and n == 0:
            config.append((lo, size - lo, 0))
        elif isinstance(n, int):
            config.append((lo, size - lo - (n - 1) * st - 1, st - 1))
        else:
            # A symbolic length may be 0 on a later call (w[4::2] of 4 elements): the span the
            # slice covers is (n - 1) * st + 1, or 0; 1 - 1 // (n + 1) is min(n, 1).
            some = 1 - 1 // (n + 1)
            config.append((lo, size - lo - (n - some) * st - some, st - 1))
    return [(a, P.pad(g, 0.0, config))]


@register_vjp(P.pad)
def _pad(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, _value, config = bsym.args
    # Where the forward cropped (negative padding), pad the gradient back with zeros first.
    undo = [(max(-lo, 0), max(-hi, 0), 0) for lo, hi, _ in config]
    if any(lo or hi for lo, hi, _ in undo):
        g = P.pad(g, 0.0, undo)
    starts, ends, steps = [], [], []
    for size, (lo, _hi, interior) in zip(a.shape, config):
        start = max(lo, 0)
        starts.append(start)
        steps.append(interior + 1)
        ends.append(start + (size - 1) * (interior + 1) + 1 if not static_eq(size, 0) else start)
    return [(a, P.slice_prim(g, starts, ends, steps))]


@register_vjp(P.cat)
def _cat(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    tensors, dim = bsym.args
    dim = dim % g.ndim
    offset: Any = 0
    pairs = []
    for t in tensors:
        starts = [0] * g.ndim
        ends = list(g.shape)
        starts[dim] = offset
        offset = offset + t.shape[dim]
        ends[dim] = offset
        pairs.append((t, P.slice_prim(g, starts, ends, [1] * g.ndim)))
    return pairs


@register_vjp(P.flip)
def _flip(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, dims = bsym.args
    return [(a, P.flip(g, dims))]


@register_vjp(P.shallow_copy, P.clone, P.clone_layout)
def _identity(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    return [(bsym.args[0], g)]


# Ops that may set a layout (``contiguous()``, a ``memory_format``) keep their torch-language
# bound symbol in the forward: the executors run them as torch does, and the elementwise ops after
# them take eager's layout. Their gradient is their decomposition's.
@register_vjp(ltorch.contiguous, ltorch.clone)
def _layout(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    return [(bsym.args[0], g)]


@register_vjp(ltorch.to)
def _to(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a = bsym.args[0]
    if not a.dtype.is_inexact:
        return []
    if g.device != a.device:
        g = P.device_put(g, a.device)
    return [(a, g if g.dtype == a.dtype else P.convert_element_type(g, a.dtype))]


@register_vjp(P.device_put)
def _device_put(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a = bsym.args[0]
    return [(a, g if g.device == a.device else P.device_put(g, a.device))]


@register_vjp(P.copy_)
def _copy_(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # The destination's old value is overwritten: only the source receives the gradient.
    src, _dst = bsym.args
    return [(src, g)]


@register_vjp(P.written_without_grad)
def _written_without_grad(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # The written values carry no gradient; the tensor written into keeps receiving it.
    target, _value, *gradient = bsym.args
    return [(target, g if not gradient or gradient[0] else zeros_like(target))]


# Indexing -------------------------------------------------------------------------------------


def _flat(t: TensorProxy) -> TensorProxy:
    return _reshape_to(t, (t.numel(),))


def _as_int64(t: TensorProxy) -> TensorProxy:
    return t if t.dtype == dtypes.int64 else P.convert_element_type(t, dtypes.int64)  # type: ignore[no-any-return]


def _rows_accumulated(n_rows: Any, rest: Sequence[Any], index: TensorProxy, g: TensorProxy) -> Any:
    """``g`` (rows of shape ``rest``, one per entry of ``index``) summed into ``n_rows`` rows."""
    z = P.full((n_rows, *rest), 0.0, device=g.device, dtype=g.dtype)
    return P.index_put(z, [_flat(index)], _reshape_to(g, (index.numel(), *rest)), True)


@register_vjp(P.take)
def _take(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, index = bsym.args
    return [(a, _reshape_to(_rows_accumulated(a.numel(), (), index, g), a.shape))]


@register_vjp(P.index_select)
def _index_select(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    # Eager's index_select_backward: zeros.index_add_(dim, index, grad), one kernel that adds
    # repeated rows in eager's order and rounding (index_put's accumulation adds otherwise).
    a, dim, index = bsym.args
    if a.ndim == 0:
        return [(a, _reshape_to(g, ()))]
    z = P.full(tuple(a.shape), 0.0, device=g.device, dtype=g.dtype)
    return [(a, ltorch.index_add(z, dim % a.ndim, index, g))]


def _index_add_applies(bsym: BoundSymbol) -> bool:
    args = bound_arguments(bsym)
    a, source, alpha = args["a"], args["source"], args["alpha"]
    return (
        isinstance(a, TensorProxy)
        and isinstance(source, TensorProxy)
        and a.ndim >= 1
        and source.ndim == a.ndim
        and not a.dtype.is_complex
        and not isinstance(alpha, complex)
    )


@register_vjp(ltorch.index_add, applies=_index_add_applies)
def _index_add(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    """Kept whole, so the forward runs eager's kernel (index_put's accumulation adds repeated
    rows in another order and rounding); eager's gradients: ``grad`` for the input,
    ``grad.index_select(dim, index) * alpha`` for the source."""
    args = bound_arguments(bsym)
    a, index, source, alpha = args["a"], args["index"], args["source"], args["alpha"]
    idx = index if index.ndim == 1 else P.reshape(index, (1,))
    gs = P.index_select(g, args["dim"] % a.ndim, idx)
    if not (isinstance(alpha, (int, float)) and alpha == 1):
        gs = P.mul(gs, alpha)
    return [(a, g), (source, gs)]


@register_vjp(P.gather)
def _gather(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, dim, index = bsym.args
    if a.ndim == 0:
        return [(a, _reshape_to(P.sum(g, tuple(range(g.ndim))) if g.ndim else g, ()))]
    return [(a, P.scatter_add(zeros_like(a), dim, index, g))]


@register_vjp(P.scatter_add)
def _scatter_add(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, dim, index, src = bsym.args
    gsrc = P.gather(g, dim, index)
    if not all(static_eq(x, y) for x, y in zip(index.shape, src.shape)):
        # Elements of src beyond the index's extent are not read: zero gradient.
        gsrc = P.pad(gsrc, 0.0, [(0, s - i, 0) for s, i in zip(src.shape, index.shape)])
    return [(a, g), (src, gsrc)]


@register_vjp(ltorch.advanced_index)
def _advanced_index(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    """Eager's: the gradient added into zeros at the indexed positions, one ``index_put``
    (the indexed dimensions first; torch's result has adjacent ones where they were)."""
    a, indices = bsym.args
    pos = [d for d, i in enumerate(indices) if i is not None]
    k, first = len(pos), pos[0]
    n_index = g.ndim - (a.ndim - k)  # dimensions of the broadcast index shape
    if first and pos == list(range(first, first + k)):
        lead = range(first, first + n_index)
        g = P.transpose(g, (*lead, *range(first), *range(first + n_index, g.ndim)))
    perm = (*pos, *(d for d in range(a.ndim) if d not in pos))
    z = P.full(tuple(a.shape[d] for d in perm), 0.0, device=g.device, dtype=g.dtype)
    acc = P.index_put(z, [indices[d] for d in pos], g, True)
    return [(a, acc if perm == tuple(range(a.ndim)) else P.transpose(acc, _inverse(perm)))]


@register_vjp(ltorch.masked_select_at)
def _masked_select_at(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    """Eager's masked_select_backward: the gradient written into zeros (masked_scatter)."""
    a, indices = bsym.args
    z = P.full(tuple(a.shape), 0.0, device=g.device, dtype=g.dtype)
    return [(a, P.index_put(z, list(indices), g, False))]


@register_vjp(P.index_put)
def _index_put(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    a, indices, values, accumulate = bsym.args
    if any(i.dtype == dtypes.bool8 for i in indices):
        raise NotImplementedError("the gradient of index_put with boolean masks is not supported")
    ga = g if accumulate else P.index_put(g, list(indices), zeros_like(values), False)
    idx = tuple(_as_int64(i) for i in indices)
    gathered = ltorch.advanced_index(g, idx) if idx else g  # (no index: a 0-dim write)
    return [(a, ga), (values, sum_to_shape(gathered, values.shape))]


# Views kept whole ------------------------------------------------------------------------------


@register_vjp(ltorch.unfold)
def _unfold(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    """unfold gathers windows (a view in torch, kept whole so that it runs as one): every window
    element's gradient is added back where it came from."""
    args = bound_arguments(bsym)
    a, size, step = args["a"], args["size"], args["step"]
    src_shape = tuple(a.shape) if a.ndim else (1,)
    nd = len(src_shape)
    d = args["dimension"] % nd
    n = src_shape[d]
    windows = (n - size) // step + 1
    shape = (*src_shape[:d], windows, size, *src_shape[d + 1 :])
    perm = (*range(d + 1), *range(d + 2, nd + 1), d + 1)  # the forward's: window elements last
    g = _reshape_to(g, [shape[p] for p in perm])
    g = _reshape_to(
        P.transpose(g, _inverse(perm)), (*src_shape[:d], windows * size, *src_shape[d + 1 :])
    )
    starts = P.broadcast_in_dim(
        P.iota(windows, start=0, step=step, device=a.device, dtype=dtypes.int64),
        (windows, size),
        (0,),
    )
    offsets = P.broadcast_in_dim(
        P.iota(size, start=0, step=1, device=a.device, dtype=dtypes.int64), (windows, size), (1,)
    )
    index = P.reshape(P.add(starts, offsets), (windows * size,))
    moved_perm = (d, *(i for i in range(nd) if i != d))
    moved = P.transpose(g, moved_perm) if d else g
    rest = [src_shape[i] for i in moved_perm[1:]]
    acc = _rows_accumulated(n, rest, index, moved)
    grad = P.transpose(acc, _inverse(moved_perm)) if d else acc
    return [(a, _reshape_to(grad, a.shape))]


# Copies kept whole: their decomposition into a broadcast and a reshape may be a view of the input
# (all repeats 1, a 0-d input), where torch's op always returns new memory.


@register_vjp(ltorch.repeat)
def _repeat(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    """Each copy's gradient added back to the element it copied."""
    a, *sizes = bsym.args
    reps = sizes_arg(tuple(sizes), dict(bsym.kwargs), "repeats", "repeat")
    shape = (1,) * (len(reps) - a.ndim) + tuple(a.shape)
    interleaved: list[Any] = []
    for r, s in zip(reps, shape):
        interleaved += [r, s]
    g = _reshape_to(g, interleaved)
    summed = P.sum(g, tuple(range(0, len(interleaved), 2))) if interleaved else g
    return [(a, _reshape_to(summed, a.shape))]


@register_vjp(ltorch.repeat_interleave)
def _repeat_interleave(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    """Each element's repeats summed back into it."""
    args = bound_arguments(bsym)
    a, repeats, dim = args["a"], args["repeats"], args["dim"]
    shape = (a.numel(),) if dim is None else tuple(a.shape)
    d = 0 if dim is None else dim % a.ndim
    g = _reshape_to(g, (*shape[: d + 1], repeats, *shape[d + 1 :]))
    return [(a, _reshape_to(P.sum(g, (d + 1,)), a.shape))]


# Splitting a tensor into pieces that tile one dimension: the gradient is the pieces' gradients
# joined again (zeros for a piece nobody differentiated), one ``cat`` as eager's split backward,
# where differentiating each piece's slice separately pads and adds the whole tensor per piece.


def _joined(bsym: BoundSymbol, cts: Sequence[TensorProxy | None], join: Any) -> GradPairs:
    a = bsym.args[0]
    if all(g is None for g in cts) or not isinstance(a, TensorProxy):
        return []
    dim = bound_arguments(bsym)["dim"]
    pieces = [o for o in bsym.flat_outs if isinstance(o, TensorProxy)]
    grads = [zeros_like(o) if g is None else g for o, g in zip(pieces, cts, strict=True)]
    return [(a, join(grads, dim))]


@register_vjp(ltorch.split, ltorch.split_with_sizes, ltorch.chunk, ltorch.tensor_split)
def _split(bsym: BoundSymbol, *cts: TensorProxy | None) -> GradPairs:
    return _joined(bsym, cts, ltorch.cat)


@register_vjp(ltorch.unbind)
def _unbind(bsym: BoundSymbol, *cts: TensorProxy | None) -> GradPairs:
    return _joined(bsym, cts, ltorch.stack)
