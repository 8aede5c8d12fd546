"""Tensor parallelism: ``thunder.distributed.tensor_parallel(model, plan)``.

Each rank of the group keeps a slice of the layers the plan names (Megatron's layout):

- ``"colwise"`` ``nn.Linear``: the output features split (weight rows, bias); its input is the
  whole activation and its output the rank's slice of features. ``"colwise_gather"``: the same,
  the output gathered whole (an LM head).
- ``"rowwise"`` ``nn.Linear``: the input features split (weight columns); it takes the slice a
  colwise layer made, and the partial products are summed over the ranks (the bias once).
- ``"rowwise"`` ``nn.Embedding``: the vocabulary split; each rank looks up the ids it holds
  (zeros for the others) and the rows are summed over the ranks. ``"colwise"``: the embedding
  dimension split, the slices gathered.

The collectives are ops of the trace (``tp.copy``: the identity forward, its gradient summed
over the ranks; ``tp.reduce``: a sum over the ranks, its gradient passed through;
``tp.gather``: slices gathered on the last dimension, the gradient's slice kept), so the
backward communicates where eager's Megatron layers do, and the same functions run eagerly
(``torch.autograd.Function``) outside ``thunder.jit``. The loss is replicated on the ranks of
the group (each computes it whole), which is what these gradients assume.

With ``fsdp`` on another group of the same ranks (a 2-D mesh: ``tensor_parallel(model, plan,
group=tp)``, then ``fsdp(model, group=dp)``), each rank shards its slices over the data-parallel
group. ``state_dict()`` of a tensor-parallel model gives each split parameter as a ``DTensor``
over the group's mesh (``Shard(0)`` or ``Shard(1)``, the whole shape); composed with ``fsdp``,
saving is refused with a clear error (two-dimensional placements are not built yet).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F

from thunder.distributed.ddp import require_initialized
from thunder.errors import JitError
from thunder.lookasides import register_lookaside
from thunder_ir import BoundSymbol, Symbol, TensorProxy, prims
from thunder_ir import ops as ltorch
from thunder_transforms.autodiff.registry import GradPairs, register_vjp

__all__ = ["STYLES", "tensor_parallel", "tp_copy", "tp_gather", "tp_reduce"]

STYLES = ("colwise", "colwise_gather", "rowwise")
_STATE = "_thunder_tp"


@dataclass
class TPState:
    group: Any
    world_size: int
    rank: int
    # id of each split parameter -> (its whole shape, the dimension split)
    splits: dict[int, tuple[torch.Size, int]] = field(default_factory=dict)
    mesh: Any = None
    fsdp: Any = None  # the FSDPState of fsdp applied on top (its state dict hooks take over)


# -- the collectives: eager (autograd.Function) and in the trace (Symbols with their vjps) ------


class _Copy(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        g = g.clone()
        dist.all_reduce(g, group=ctx.group)
        return g, None


class _Reduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any) -> torch.Tensor:
        y = x.clone()
        dist.all_reduce(y, group=group)
        return y

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        return g, None


class _Gather(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Any, world_size: int, rank: int) -> torch.Tensor:
        ctx.world_size, ctx.rank = world_size, rank
        parts = [torch.empty_like(x) for _ in range(world_size)]
        dist.all_gather(parts, x.contiguous(), group=group)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        return g.chunk(ctx.world_size, dim=-1)[ctx.rank].contiguous(), None, None, None


def tp_copy(x: torch.Tensor, group: Any) -> torch.Tensor:
    """The identity; its gradient is summed over the group's ranks (the input of a colwise
    layer: each rank's slice of the output sends back its part of the gradient)."""
    return _Copy.apply(x, group)  # type: ignore[no-untyped-call,no-any-return]


def tp_reduce(x: torch.Tensor, group: Any) -> torch.Tensor:
    """The sum over the group's ranks; its gradient passes through (the loss is replicated)."""
    return _Reduce.apply(x, group)  # type: ignore[no-untyped-call,no-any-return]


def tp_gather(x: torch.Tensor, group: Any, world_size: int, rank: int) -> torch.Tensor:
    """The ranks' slices concatenated on the last dimension; the gradient's slice is kept."""
    return _Gather.apply(x, group, world_size, rank)  # type: ignore[no-untyped-call,no-any-return]


def _copy_region(x: TensorProxy, group: Any) -> TensorProxy:
    return prims.shallow_copy(x)  # type: ignore[no-any-return]


def _reduce_region(x: TensorProxy, group: Any) -> TensorProxy:
    return prims.all_reduce(x, "sum", group)  # type: ignore[no-any-return]


def _gather_region(x: TensorProxy, group: Any, world_size: int, rank: int) -> TensorProxy:
    last = x.ndim - 1
    first = ltorch.movedim(x, last, 0)  # the slices stacked on the first dimension
    whole = prims.all_gather(ltorch.contiguous(first), group, world_size)
    return ltorch.contiguous(ltorch.movedim(whole, 0, last))  # type: ignore[no-any-return]


_COPY = Symbol("copy", _copy_region, module="tp", id="tp.copy")
_REDUCE = Symbol("reduce", _reduce_region, module="tp", id="tp.reduce")
_GATHER = Symbol("gather", _gather_region, module="tp", id="tp.gather")


@register_vjp(_COPY)
def _copy_vjp(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    x, group = bsym.args
    return [(x, prims.all_reduce(g, "sum", group))]


@register_vjp(_REDUCE)
def _reduce_vjp(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    return [(bsym.args[0], g)]


@register_vjp(_GATHER)
def _gather_vjp(bsym: BoundSymbol, g: TensorProxy) -> GradPairs:
    x, _, _, rank = bsym.args
    width = x.shape[-1]
    return [(x, ltorch.narrow(g, g.ndim - 1, rank * width, width))]


register_lookaside(tp_copy, _COPY)
register_lookaside(tp_reduce, _REDUCE)
register_lookaside(tp_gather, _GATHER)


# -- the layers ----------------------------------------------------------------------------------


def _colwise_linear(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    state: TPState = self._thunder_tp_state  # type: ignore[assignment]
    return F.linear(tp_copy(x, state.group), self.weight, self.bias)


def _colwise_linear_gathered(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    state: TPState = self._thunder_tp_state  # type: ignore[assignment]
    y = F.linear(tp_copy(x, state.group), self.weight, self.bias)
    return tp_gather(y, state.group, state.world_size, state.rank)


def _rowwise_linear(self: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    state: TPState = self._thunder_tp_state  # type: ignore[assignment]
    y = tp_reduce(F.linear(x, self.weight), state.group)
    return y if self.bias is None else y + self.bias


def _rowwise_embedding(self: torch.nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
    state: TPState = self._thunder_tp_state  # type: ignore[assignment]
    rows = self.weight.shape[0]
    local = ids - state.rank * rows
    outside = (local < 0) | (local >= rows)
    out = F.embedding(local.masked_fill(outside, 0), self.weight)
    return tp_reduce(out.masked_fill(outside.unsqueeze(-1), 0.0), state.group)


def _colwise_embedding(self: torch.nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
    state: TPState = self._thunder_tp_state  # type: ignore[assignment]
    out = F.embedding(ids, self.weight)
    return tp_gather(out, state.group, state.world_size, state.rank)


def _split(p: torch.Tensor, dim: int, state: TPState, what: str) -> None:
    size = p.shape[dim]
    if size % state.world_size:
        raise JitError(
            f"thunder.distributed.tensor_parallel: {what} has {size} along dimension {dim}, "
            f"which {state.world_size} ranks do not divide"
        )
    state.splits[id(p)] = (p.shape, dim)
    p.data = p.data.chunk(state.world_size, dim)[state.rank].clone()


def tensor_parallel(
    model: torch.nn.Module, plan: Mapping[str, str], *, group: Any = None
) -> torch.nn.Module:
    """Splits the layers ``plan`` names (``{"mlp.fc1": "colwise", "mlp.fc2": "rowwise"}``; see
    the module docstring) over the ranks of ``group`` (default: the world) and returns ``model``
    (the same object). Parameters and buffers are broadcast from the group's first rank
    first. Layers must be ``nn.Linear`` or ``nn.Embedding`` without options (``padding_idx``,
    ``max_norm``)."""
    require_initialized("tensor_parallel")
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"tensor_parallel expects an nn.Module, got {type(model).__name__}")
    if _STATE in model.__dict__ or "_thunder_fsdp" in model.__dict__:
        raise JitError("thunder.distributed.tensor_parallel: apply it before fsdp, once per model")
    modules = dict(model.named_modules())
    for name, style in plan.items():
        if name not in modules:
            raise ValueError(f"tensor_parallel: the model has no module {name!r}")
        if style not in STYLES:
            raise ValueError(f"tensor_parallel: {name}: style {style!r} is not one of {STYLES}")
    state = TPState(group, dist.get_world_size(group), dist.get_rank(group))
    src = dist.get_global_rank(group, 0) if group is not None else 0
    with torch.no_grad():
        for t in (*model.parameters(), *model.buffers()):
            dist.broadcast(t.data, src=src, group=group)
        for name, style in plan.items():
            _apply(modules[name], name, style, state)
    object.__setattr__(model, _STATE, state)
    from thunder.distributed.checkpoint import install_tp_state_dict_hooks

    install_tp_state_dict_hooks(model, state)
    return model


def _apply(module: torch.nn.Module, name: str, style: str, state: TPState) -> None:
    if isinstance(module, torch.nn.Linear):
        if style == "rowwise":
            _split(module.weight, 1, state, f"{name}.weight")
            forward: Any = _rowwise_linear
        else:
            _split(module.weight, 0, state, f"{name}.weight")
            if module.bias is not None:
                _split(module.bias, 0, state, f"{name}.bias")
            forward = _colwise_linear_gathered if style == "colwise_gather" else _colwise_linear
    elif isinstance(module, torch.nn.Embedding) and style != "colwise_gather":
        if module.padding_idx is not None or module.max_norm is not None:
            raise JitError(
                f"thunder.distributed.tensor_parallel: {name} is an Embedding with "
                "padding_idx or max_norm, which splitting does not keep"
            )
        if style == "rowwise":
            _split(module.weight, 0, state, f"{name}.weight")
            forward = _rowwise_embedding
        else:
            _split(module.weight, 1, state, f"{name}.weight")
            forward = _colwise_embedding
    else:
        raise JitError(
            f"thunder.distributed.tensor_parallel: {name} is a {type(module).__name__}; "
            f"style {style!r} applies to nn.Linear (colwise, colwise_gather, rowwise) and "
            "nn.Embedding (colwise, rowwise)"
        )
    object.__setattr__(module, "_thunder_tp_state", state)
    module.forward = types.MethodType(forward, module)  # type: ignore[method-assign]


def tp_state_of(model: Any) -> TPState | None:
    inner = getattr(model, "get_model", None)
    if callable(inner):  # a ThunderModule
        model = inner()
    state = model.__dict__.get(_STATE)
    return state if isinstance(state, TPState) else None
