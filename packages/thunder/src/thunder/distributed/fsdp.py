"""Sharded data parallelism: ``thunder.distributed.fsdp`` (ZeRO-2 and ZeRO-3).

``fsdp(model)`` broadcasts the parameters from rank 0, then keeps on each rank only its shard of
every parameter: the first dimension, padded to a multiple of the world size, split in equal
chunks. The ``nn.Parameter`` objects stay (their data is the shard), so an optimizer built on
``model.parameters()`` afterwards holds and steps only its shard (its state is sharded too).

When the jitted program reads a parameter, it sees it whole: the binder records
``fsdp.unshard`` (an ``all_gather`` of the shards, the padding cut off, the original shape),
and the gradient flows back through the all-gather's adjoint, a ``reduce_scatter``, so each
rank receives the gradient of its shard only; ``FSDPTransform`` averages it over the ranks.

- ``"ZERO3"`` (default): the gathered parameter is not kept for the backward; the backward
  gathers it again where it needs it (``OpTag.RECOMPUTE``). Parameters, gradients and optimizer
  state are sharded at rest and in the backward.
- ``"ZERO2"``: the forward's gathered parameters are kept for the backward (no second gather);
  gradients and optimizer state are sharded.

``model.state_dict()`` gives each sharded parameter as a DTensor (its global shape, this rank's
rows) and ``load_state_dict`` takes DTensors or whole parameters (``checkpoint.py``): a
checkpoint is whole or knows it is sharded, never shards passed off as parameters.
``full_state_dict(model)`` gathers the whole parameters (on rank 0; other ranks get an empty
dict) and ``load_full_state_dict(model, state)`` (rank 0's dict) loads and shards them again.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from thunder.distributed.checkpoint import attach_tensor_parallel, install_state_dict_hooks
from thunder.distributed.ddp import (
    finish_layout_check,
    no_sync,
    parameter_gradients,
    require_initialized,
    start_layout_check,
)
from thunder.errors import JitError
from thunder_ir import BoundSymbol, OpTag, Symbol, TensorProxy, Trace, Transform, prims, tracectx
from thunder_ir import ops as ltorch
from thunder_transforms.autodiff.registry import GradPairs, register_vjp
from thunder_transforms.passes import substitute_proxies

__all__ = [
    "FSDPTransform",
    "fsdp",
    "fsdp_state_of",
    "full_state_dict",
    "load_full_state_dict",
]

_STATE = "_thunder_fsdp"
STRATEGIES = ("ZERO2", "ZERO3")


@dataclass
class FSDPState:
    group: Any
    world_size: int
    rank: int
    strategy: str
    bucket_bytes: int
    # Per sharded parameter (by id: tied parameters are one): its whole shape.
    shapes: dict[int, torch.Size] = field(default_factory=dict)
    mesh: Any = None  # the group's DeviceMesh, made on the first state_dict() (checkpoint.py)
    tp: Any = None  # tensor parallelism under it: checkpoint.TwoD (the 2-D mesh)


@dataclass(frozen=True)
class _Shard:
    """How one parameter is sharded (attached to it as ``_thunder_unshard``'s argument)."""

    shape: tuple[int, ...]
    group: Any
    world_size: int
    recompute: bool


def _chunk(shape: Sequence[int], world_size: int) -> int:
    first = shape[0] if shape else 1
    return -(-first // world_size)


def fsdp(
    model: torch.nn.Module,
    *,
    sharding_strategy: str = "ZERO3",
    group: Any = None,
    broadcast_from: int = 0,
    bucket_size_in_mb: float = 25.0,
    device: torch.device | str | None = None,
    param_init_fn: Callable[[torch.nn.Module], None] | None = None,
) -> torch.nn.Module:
    """Shards ``model``'s parameters over the ranks of ``group`` (default: the world) and
    returns it (the same object); see the module docstring for the strategies. Parameters the
    program reads close together are gathered together, in buckets of about
    ``bucket_size_in_mb`` (one all-gather, and one reduce-scatter for their gradients).

    A model built on the meta device (``with torch.device("meta"): model = Net()``) is
    materialized module by module on ``device`` (default: this rank's CUDA device under NCCL,
    else the CPU): each module's own parameters and buffers are made whole, initialized by
    ``param_init_fn(module)`` (default: the module's ``reset_parameters()``; it must initialize
    the module's own tensors, as ``reset_parameters`` does), broadcast from ``broadcast_from``
    and sharded before the next module, so no rank ever holds the whole model. A module with
    tensors on the meta device and no initializer is an error."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            f"thunder.distributed.fsdp expects an nn.Module, got {type(model).__name__}"
        )
    strategy = str(sharding_strategy).upper().removeprefix("SHARDINGSTRATEGY.")
    if strategy not in STRATEGIES:
        raise ValueError(
            f"unknown sharding_strategy {sharding_strategy!r}; expected one of {STRATEGIES}"
        )
    require_initialized("fsdp")
    if _STATE in model.__dict__ or "_thunder_ddp" in model.__dict__:
        raise JitError("thunder.distributed.fsdp: the model is already prepared for distribution")
    world_size, rank = dist.get_world_size(group), dist.get_rank(group)
    src = dist.get_global_rank(group, broadcast_from) if group is not None else broadcast_from
    if bucket_size_in_mb <= 0:
        raise ValueError(f"bucket_size_in_mb must be positive, got {bucket_size_in_mb}")
    state = FSDPState(group, world_size, rank, strategy, int(bucket_size_in_mb * 2**20))
    with torch.no_grad():
        if any(t.is_meta for t in (*model.parameters(), *model.buffers())):
            target = torch.device(device) if device is not None else _default_device(group)
            _materialize_and_shard(model, state, src, target, param_init_fn)
        else:
            for t in (*model.parameters(), *model.buffers()):
                dist.broadcast(t.data, src=src, group=group)
            for p in model.parameters():
                _shard_in_place(p, state)
    attach_tensor_parallel(model, state, _default_device(group))
    object.__setattr__(model, _STATE, state)
    object.__setattr__(model, "no_sync", types.MethodType(no_sync, model))
    install_state_dict_hooks(model, state)
    return model


def _shard_in_place(p: torch.nn.Parameter, state: FSDPState) -> None:
    """Keeps this rank's shard of ``p`` (whole, the same on every rank) as its data."""
    state.shapes[id(p)] = p.shape
    p.data = shard_of(p.data, state.world_size, state.rank)
    shard = _Shard(
        tuple(state.shapes[id(p)]), state.group, state.world_size, state.strategy == "ZERO3"
    )
    p._thunder_unshard = functools.partial(_unshard, shard)  # type: ignore[attr-defined]


def _whole(shard: torch.Tensor, shape: torch.Size, state: FSDPState) -> torch.Tensor:
    """The whole parameter of ``shape`` gathered from every rank's ``shard``."""
    whole = shard.new_empty((shard.shape[0] * state.world_size, *shard.shape[1:]))
    dist.all_gather_into_tensor(whole, shard.contiguous(), group=state.group)
    return whole[: (shape[0] if len(shape) else 1)].reshape(shape).clone()


def _default_device(group: Any) -> torch.device:
    if torch.cuda.is_available() and dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _materialize_and_shard(
    model: torch.nn.Module,
    state: FSDPState,
    src: int,
    device: torch.device,
    param_init_fn: Callable[[torch.nn.Module], None] | None,
) -> None:
    """A meta-device model made real one module at a time (see ``fsdp``): the peak on a rank is
    the shards so far plus one module's own tensors whole. Parameters held by several modules
    (tied weights) are one; a later module that initializes one again (as eager would, in
    module order) re-initializes it whole, and it is sharded again."""
    made: dict[int, torch.nn.Parameter] = {}  # id of a meta parameter -> its real one
    replaced: list[torch.nn.Parameter] = []  # the meta ones, alive: their ids stay theirs
    for name, module in model.named_modules():
        touched: list[torch.nn.Parameter] = []
        tied: list[torch.nn.Parameter] = []
        metas = False
        for pname, p in list(module._parameters.items()):
            if p is None:
                continue
            if id(p) in made:  # tied: a module before made (and sharded) it
                real = made[id(p)]
                module._parameters[pname] = real
                if all(t is not real for t in tied):
                    tied.append(real)
                continue
            if p.is_meta:
                real = torch.nn.Parameter(
                    torch.empty(p.shape, dtype=p.dtype, device=device),
                    requires_grad=p.requires_grad,
                )
                made[id(p)] = made[id(real)] = real
                replaced.append(p)
                module._parameters[pname] = real
                metas = True
            else:  # already real (a model built partly on the meta device)
                made[id(p)] = real = p
            touched.append(real)
        buffers = []
        for bname, b in list(module._buffers.items()):
            if b is None:
                continue
            if b.is_meta:
                module._buffers[bname] = torch.empty(b.shape, dtype=b.dtype, device=device)
                metas = True
            buffers.append(bname)
        reset = getattr(module, "reset_parameters", None)
        init: Callable[[], Any] | None = (
            functools.partial(param_init_fn, module) if param_init_fn is not None else reset
        )
        if init is None and metas:
            raise JitError(
                f"thunder.distributed.fsdp: module {name or 'the model'} "
                f"({type(module).__name__}) has tensors on the meta device and no "
                "reset_parameters(); pass param_init_fn= to initialize them"
            )
        if init is None or not (metas or tied):
            tied = []  # nothing initializes them again: they keep their shards
        else:
            for p in tied:  # whole again, with their values, for this module's init
                p.data = _whole(p.data, state.shapes[id(p)], state)
            init()
        for bname in buffers:
            dist.broadcast(module._buffers[bname], src=src, group=state.group)
        for p in (*touched, *tied):
            if id(p) not in state.shapes or p.shape == state.shapes[id(p)]:
                dist.broadcast(p.data, src=src, group=state.group)
                _shard_in_place(p, state)


def shard_of(whole: torch.Tensor, world_size: int, rank: int) -> torch.Tensor:
    flat = whole.reshape(1) if whole.ndim == 0 else whole
    chunk = _chunk(flat.shape, world_size)
    pad = chunk * world_size - flat.shape[0]
    if pad:
        flat = torch.cat([flat, flat.new_zeros((pad, *flat.shape[1:]))])
    return flat[rank * chunk : (rank + 1) * chunk].clone()


def _numel(shape: Sequence[Any]) -> int:
    n = 1
    for d in shape:
        if not isinstance(d, int):
            raise JitError(
                "thunder.distributed.fsdp: parameters with symbolic sizes are not supported"
            )
        n *= d
    return n


def _gathered(shards: Sequence[_Shard], parts: Sequence[TensorProxy]) -> tuple[TensorProxy, ...]:
    """Whole parameters from their shards with one all-gather: each rank's shards, flattened and
    concatenated, gathered into a (ranks, total) table whose columns are the parameters."""
    ws, group = shards[0].world_size, shards[0].group
    sizes = [_numel(a.shape) for a in parts]
    flats = [ltorch.reshape(a, (-1,)) for a in parts]
    flat = flats[0] if len(flats) == 1 else ltorch.cat(flats)
    table = ltorch.reshape(prims.all_gather(flat, group, ws), (ws, sum(sizes)))
    outs = []
    offset = 0
    for shard, a, n in zip(shards, parts, sizes):
        column = table if len(parts) == 1 else ltorch.narrow(table, 1, offset, n)
        rows = ltorch.reshape(column, (ws * a.shape[0], *a.shape[1:]))
        first = shard.shape[0] if shard.shape else 1
        if rows.shape[0] != first:
            rows = ltorch.narrow(rows, 0, 0, first)
        outs.append(ltorch.reshape(rows, shard.shape) if tuple(rows.shape) != shard.shape else rows)
        offset += n
    return tuple(outs)


def _shard_gradients(
    shards: Sequence[_Shard],
    parts: Sequence[TensorProxy],
    cts: Sequence[TensorProxy | None],
    outs: Sequence[TensorProxy],
) -> GradPairs:
    """The adjoint of ``_gathered``: each gradient padded like its shards and laid out as the
    (ranks, total) table, then one reduce-scatter gives every rank the summed gradients of its
    shards."""
    ws, group = shards[0].world_size, shards[0].group
    columns = []
    for shard, a, g, out in zip(shards, parts, cts, outs):
        if g is None:
            g = prims.full(out.shape, 0.0, device=out.device, dtype=out.dtype)
        g = ltorch.reshape(g, (shard.shape[0] if shard.shape else 1, *a.shape[1:]))
        rows = ws * a.shape[0]
        if g.shape[0] != rows:
            pad = prims.full((rows - g.shape[0], *a.shape[1:]), 0.0, device=g.device, dtype=g.dtype)
            g = ltorch.cat([g, pad])
        columns.append(ltorch.reshape(g, (ws, _numel(a.shape))))
    table = columns[0] if len(columns) == 1 else ltorch.cat(columns, 1)
    mine = prims.reduce_scatter(ltorch.reshape(table, (-1,)), "sum", group, ws)
    grads = []
    offset = 0
    for a in parts:
        n = _numel(a.shape)
        piece = mine if len(parts) == 1 else ltorch.narrow(mine, 0, offset, n)
        grads.append((a, ltorch.reshape(piece, a.shape)))
        offset += n
    return grads


def _unshard_region(shard: _Shard, a: TensorProxy) -> TensorProxy:
    return _gathered((shard,), (a,))[0]


def _bucket_region(shards: tuple[_Shard, ...], *parts: TensorProxy) -> tuple[TensorProxy, ...]:
    return _gathered(shards, parts)


def _symbols(name: str, region: Any) -> dict[bool, Symbol]:
    """The symbol of ``region`` without and with ``OpTag.RECOMPUTE`` (ZeRO-3), by that flag."""
    return {
        recompute: Symbol(
            name,
            region,
            module="fsdp",
            tags=(OpTag.RECOMPUTE,) if recompute else (),
            id=f"fsdp.{name}{'_recompute' if recompute else ''}",
        )
        for recompute in (False, True)
    }


# One parameter gathered (recorded by the binder when the program reads it), and several.
_UNSHARD = _symbols("unshard", _unshard_region)
_BUCKET = _symbols("unshard_bucket", _bucket_region)
_UNSHARD_SYMBOLS = frozenset(_UNSHARD.values())
_BUCKET_SYMBOLS = frozenset(_BUCKET.values())


@register_vjp(*_UNSHARD.values())
def _unshard_vjp(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    shard, a = bsym.args
    return _shard_gradients((shard,), (a,), (g,), (bsym.output,))


@register_vjp(*_BUCKET.values())
def _bucket_vjp(bsym: BoundSymbol, *cts: TensorProxy | None) -> GradPairs:
    shards, *parts = bsym.args
    return _shard_gradients(shards, parts, cts, bsym.flat_outs)


def _unshard(shard: _Shard, proxy: TensorProxy) -> TensorProxy:
    """Records the gathering of a sharded parameter (called by the binder)."""
    return _UNSHARD[shard.recompute](shard, proxy)  # type: ignore[no-any-return]


def _bucketed(computation: Trace, bucket_bytes: int) -> Trace:
    """``computation`` with the gathers of parameters read close together merged into one
    ``fsdp.unshard_bucket`` each, placed where the first of them was."""
    body = computation.bound_symbols
    singles = [k for k, b in enumerate(body) if b.sym in _UNSHARD_SYMBOLS]
    buckets: list[list[int]] = []
    size = 0
    for k in singles:
        shard, a = body[k].args
        nbytes = _numel(a.shape) * a.dtype.bytes
        if buckets:
            first_shard, first = body[buckets[-1][0]].args
            same = (first.dtype, first.device, first_shard.group, first_shard.recompute) == (
                a.dtype,
                a.device,
                shard.group,
                shard.recompute,
            )
            if same and size + nbytes <= bucket_bytes:
                buckets[-1].append(k)
                size += nbytes
                continue
        buckets.append([k])
        size = nbytes
    if all(len(b) == 1 for b in buckets):
        return computation
    starts = {b[0]: b for b in buckets if len(b) > 1}
    merged = {k for b in buckets if len(b) > 1 for k in b}
    renames: dict[str, Any] = {}
    with computation.rerecord("fsdp gather buckets") as out:
        for k, bsym in enumerate(body):
            if k in starts:
                members = [body[i] for i in starts[k]]
                shards = tuple(m.args[0] for m in members)
                outs = _BUCKET[shards[0].recompute](shards, *(m.args[1] for m in members))
                for m, o in zip(members, outs):
                    renames[m.output.name] = o
            if k not in merged:
                out.record(substitute_proxies(bsym, renames))
    return out


def _gathers_checked(computation: Trace) -> Trace:
    """``computation`` checking first that every rank's program gathers the same parameters in
    the same order: a branch on the rank (or on a rank's data) that reads another parameter
    would pair this rank's shard of one with another rank's shard of the other, and compute with
    the mix silently where the sizes agree. One collective of two numbers per call."""
    body = computation.bound_symbols
    gathers = [b for b in body if b.sym in _UNSHARD_SYMBOLS or b.sym in _BUCKET_SYMBOLS]
    if not gathers:
        return computation
    layout = []
    for b in gathers:
        _, *parts = b.args
        layout.append([(a.name, a.shape, str(a.dtype)) for a in parts])
    first_shard = gathers[0].args[0]
    group = (first_shard[0] if isinstance(first_shard, tuple) else first_shard).group
    first = next(k for k, b in enumerate(body) if b is gathers[0])
    with computation.rerecord("fsdp gather check") as out:
        for k, bsym in enumerate(body):
            if k == first:
                started = start_layout_check(layout, gathers[0].args[1].device, group)
                finish_layout_check(
                    started,
                    "thunder.distributed.fsdp: the ranks' programs gather different parameters "
                    "(the forward reads other parameters, or in another order, on another rank: "
                    "control flow that depends on the rank or on the rank's data?). Every rank "
                    "must run the same program",
                )
            out.record(bsym)
    return out


def fsdp_state_of(model: Any) -> FSDPState | None:
    inner = getattr(model, "get_model", None)
    if callable(inner):  # a ThunderModule
        model = inner()
    state = model.__dict__.get(_STATE)
    return state if isinstance(state, FSDPState) else None


def require_state(model: Any, what: str) -> tuple[torch.nn.Module, FSDPState]:
    state = fsdp_state_of(model)
    if state is None:
        raise JitError(f"thunder.distributed.{what}: the model was not prepared with fsdp()")
    inner = getattr(model, "get_model", None)
    return (inner() if callable(inner) else model), state


def full_state_dict(model: Any) -> dict[str, torch.Tensor]:
    """The whole state (parameters gathered from their shards, buffers) on rank 0; an empty dict
    on the other ranks. Every rank must call it (it communicates). Under tensor parallelism
    (a 2-D mesh) the parameters are gathered over both groups, on the rank first in both."""
    module, state = require_state(model, "full_state_dict")
    out: dict[str, torch.Tensor] = {}
    if state.tp is not None:
        from torch.distributed.tensor import DTensor

        first = state.rank == 0 and state.tp.rank == 0
        for name, value in module.state_dict().items():
            if isinstance(value, DTensor):
                value = value.full_tensor()
            if first:
                out[name] = value.detach().clone()
        return out
    for name, value in module.state_dict(keep_vars=True).items():
        shape = state.shapes.get(id(value))
        value = value.detach()
        if shape is not None:
            whole = value.new_empty((value.shape[0] * state.world_size, *value.shape[1:]))
            dist.all_gather_into_tensor(whole, value.contiguous(), group=state.group)
            value = whole[: (shape[0] if len(shape) else 1)].reshape(shape)
        if state.rank == 0:
            out[name] = value.clone()
    return out


def load_full_state_dict(model: Any, full: dict[str, torch.Tensor]) -> None:
    """Loads ``full`` (rank 0's; the other ranks' argument is ignored) into the sharded model.
    Every rank must call it. Under tensor parallelism (a 2-D mesh), the dict of the rank first
    in both groups; each rank keeps its slice's shard."""
    from thunder.distributed.checkpoint import global_shape, to_local_shard

    module, state = require_state(model, "load_full_state_dict")
    src = dist.get_global_rank(state.group, 0) if state.group is not None else 0
    tp = state.tp
    tp_src = 0 if tp is None or tp.group is None else dist.get_global_rank(tp.group, 0)
    first = state.rank == 0 and (tp is None or tp.rank == 0)
    done: set[int] = set()
    with torch.no_grad():
        for name, target in module.state_dict(keep_vars=True).items():
            if id(target) in done:  # a tied parameter, loaded once
                continue
            done.add(id(target))
            sharded = id(target) in state.shapes
            shape = global_shape(state, id(target)) if sharded else tuple(target.shape)
            whole = full[name].clone() if first else target.new_empty(shape)
            if tp is not None and state.rank == 0:  # first along the tensor-parallel group
                dist.broadcast(whole, src=tp_src, group=tp.group)
            dist.broadcast(whole, src=src, group=state.group)
            if sharded:
                target.data.copy_(to_local_shard(whole, state, id(target), name))
            else:
                target.data.copy_(whole)


class FSDPTransform(Transform):
    """Averages the gradients of the sharded parameters over the ranks (each rank's gradient
    is already its shard's sum, from the all-gather's adjoint). ``thunder.jit`` adds it for a
    model ``fsdp`` prepared."""

    def __init__(self, model: torch.nn.Module) -> None:
        _, self.state = require_state(model, "FSDPTransform")
        self.parameters = {id(p) for p in model.parameters()}

    def transform_traces_pre_prologue(
        self, prologue: Trace, computation: Trace, epilogue: Trace | None, **kwargs: Any
    ) -> tuple[Trace, Trace, Trace | None]:
        return prologue, _gathers_checked(_bucketed(computation, self.state.bucket_bytes)), epilogue

    def transform_backward(self, backward: Trace, *, inputs: Sequence[Any], **kwargs: Any) -> Trace:
        grads, chosen = parameter_gradients(backward, inputs, self.parameters, "fsdp")
        if not chosen:
            return backward
        out = backward.derive(backward.bound_symbols[:-1], pass_name="fsdp gradient average")
        with tracectx(out):
            averaged = list(grads)
            for i in chosen:
                averaged[i] = prims.div(grads[i], float(self.state.world_size))
            prims.python_return(tuple(averaged))
        return out
