"""State dicts of a sharded (``fsdp``) model that are correct by construction.

A rank holds each parameter as its shard: the first dimension split in chunks of
``ceil(rows / world_size)`` rows, padded to a whole chunk. Handed out as plain tensors under the
parameters' names, shards would look like a whole checkpoint and not be one. So ``state_dict()``
(of the model and of the ``ThunderModule`` around it) gives each sharded parameter as a
``DTensor``: this rank's rows (no padding), sharded on dimension 0 over the group's mesh, with
the parameter's global shape. ``torch.save`` keeps that, ``torch.distributed.checkpoint`` saves
and loads it sharded from every rank (and reshards it for another world size), and
``torch.distributed.checkpoint.state_dict.get_model_state_dict(..., full_state_dict=True)``
gathers it whole. ``load_state_dict()`` takes a DTensor (any placement) or the whole parameter,
and keeps this rank's shard; a plain tensor of another shape (a shard saved as if it were the
parameter) is an error, never loaded.

The optimizer's state follows the parameters (``optimizer_state_dict`` /
``load_optimizer_state_dict``, on ``torch.distributed.checkpoint.state_dict``'s helpers: keys
are parameter names, sharded state as DTensors).

A model ``tensor_parallel`` on one group, then ``fsdp`` on another group of the same ranks (a
2-D mesh), holds per rank fsdp's shard of its tensor-parallel slice. Its sharded parameters
(and their optimizer state) are DTensors on the 2-D mesh ``("tp", "dp")`` with the whole
parameter's shape: ``(Shard(dim), Shard(0))`` for a split one, ``(Replicate(), Shard(0))`` for
the others (``TwoD``); they load from such DTensors, from any other layout (gathered, then
sliced and sharded) or from whole parameters.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["install_state_dict_hooks", "load_optimizer_state_dict", "optimizer_state_dict"]


def install_state_dict_hooks(model: torch.nn.Module, state: Any) -> None:
    """Makes ``model.state_dict()`` hand out DTensors for its sharded parameters and
    ``model.load_state_dict()`` take them (or whole parameters) back (``fsdp`` calls it)."""
    model.register_state_dict_post_hook(functools.partial(_to_dtensors, state))  # type: ignore[no-untyped-call]
    model.register_load_state_dict_pre_hook(functools.partial(_to_local_shards, state))  # type: ignore[no-untyped-call]


def _sharded(module: torch.nn.Module, state: Any) -> dict[str, torch.nn.Parameter]:
    return {
        name: p
        for name, p in module.named_parameters(remove_duplicate=False)
        if id(p) in state.shapes
    }


def _mesh(state: Any, device: torch.device) -> Any:
    from torch.distributed.device_mesh import DeviceMesh

    if state.mesh is None:
        group: Any = state.group if state.group is not None else dist.group.WORLD
        state.mesh = DeviceMesh.from_group(group, device.type)
    return state.mesh


def _rows(shape: tuple[int, ...]) -> int:
    return shape[0] if shape else 1


def as_dtensor(local: torch.Tensor, state: Any, pid: int) -> Any:
    """This rank's padded shard ``local`` of the parameter whose id is ``pid`` as a DTensor (a
    0-dim parameter, which lives on one rank, as its whole value: it communicates). Under
    tensor parallelism (``state.tp``) the DTensor is on the 2-D mesh (see ``TwoD``)."""
    from torch.distributed.tensor import DTensor, Shard

    shape = tuple(state.shapes[pid])  # what fsdp sharded (under tensor parallelism: a slice)
    chunk = local.shape[0]
    start = state.rank * chunk
    real = max(0, min(chunk, _rows(shape) - start))
    rows_shape = torch.Size((_rows(shape), *shape[1:]))
    if state.tp is None:
        mesh, placements, whole = _mesh(state, local.device), [Shard(0)], rows_shape
    else:
        mesh, placements, whole = _on_mesh_2d(state, pid, local.device, rows_shape)
    dt = DTensor.from_local(
        local[:real],
        mesh,
        placements,
        run_check=False,
        shape=whole,
        stride=torch.empty(whole, device="meta").stride(),
    )
    if not shape:
        return dt.full_tensor().reshape(())
    return dt


def global_shape(state: Any, pid: int) -> tuple[int, ...]:
    """The whole shape of the parameter whose id is ``pid`` (before any slicing)."""
    split = state.tp.splits.get(pid) if state.tp is not None else None
    return tuple(split[0]) if split is not None else tuple(state.shapes[pid])


def to_local_shard(value: Any, state: Any, pid: int, what: str) -> torch.Tensor:
    """This rank's padded shard of ``value`` (a DTensor of the parameter's global shape, or the
    whole parameter) for the parameter whose id is ``pid``."""
    from torch.distributed.tensor import DTensor, Shard

    from thunder.distributed.fsdp import shard_of

    shape = tuple(state.shapes[pid])
    whole = global_shape(state, pid)
    rows_whole = (_rows(whole), *whole[1:])
    if isinstance(value, DTensor):
        if tuple(value.shape) != rows_whole and tuple(value.shape) != whole:
            raise ValueError(f"{what}: a DTensor of shape {tuple(value.shape)}, not {whole}")
        chunk = -(-_rows(shape) // state.world_size)
        if state.tp is None:
            ours = (
                tuple(value.placements) == (Shard(0),)
                and value.device_mesh.size() == state.world_size
                and value.device_mesh.get_local_rank() == state.rank
            )
        else:
            ours = (
                state.tp.ranks is not None
                and tuple(value.placements) == _placements_2d(state, pid)
                and value.device_mesh.mesh.tolist() == state.tp.ranks
            )
        if ours:
            local = value.to_local()
            if local.shape[0] < chunk:
                pad = local.new_zeros((chunk - local.shape[0], *local.shape[1:]))
                local = torch.cat([local, pad])
            return local
        value = value.full_tensor().reshape(whole)  # another layout: gathered, then sharded
    elif not isinstance(value, torch.Tensor) or tuple(value.shape) != whole:
        got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise ValueError(
            f"{what}: a model sharded by thunder.distributed.fsdp loads each parameter whole "
            f"(shape {whole}) or as a DTensor (what its state_dict() gives); got {got}. "
            "A rank's shard saved as a plain tensor is not the parameter"
        )
    split = state.tp.splits.get(pid) if state.tp is not None else None
    if split is not None:  # this rank's tensor-parallel slice first
        value = value.chunk(state.tp.world_size, split[1])[state.tp.rank]
    return shard_of(value.reshape(shape), state.world_size, state.rank)


def _to_dtensors(
    state: Any, module: torch.nn.Module, sd: dict[str, Any], prefix: str, local_metadata: Any
) -> None:
    for name, p in _sharded(module, state).items():
        key = prefix + name
        if key in sd and sd[key] is not p:  # keep_vars=True hands out the parameters themselves
            sd[key] = as_dtensor(sd[key], state, id(p))


def _to_local_shards(
    state: Any, module: torch.nn.Module, sd: dict[str, Any], prefix: str, *rest: Any
) -> None:
    for name, p in _sharded(module, state).items():
        key = prefix + name
        if key in sd:
            sd[key] = to_local_shard(sd[key], state, id(p), key)


def _unwrapped(model: Any) -> torch.nn.Module:
    inner = getattr(model, "get_model", None)
    return inner() if callable(inner) else model  # type: ignore[no-any-return]


def _sharded_state(model: Any) -> tuple[torch.nn.Module, Any, dict[str, torch.nn.Parameter]]:
    from thunder.distributed.fsdp import require_state

    module, state = require_state(model, "optimizer_state_dict")
    return module, state, _sharded(module, state)


def optimizer_state_dict(model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's state keyed by parameter names (``get_optimizer_state_dict``), the state
    of each sharded parameter (its moments: tensors of the shard's shape) as DTensors, for
    ``torch.save`` or ``torch.distributed.checkpoint``. Every rank must call it."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    module, state, sharded = _sharded_state(model)
    osd: Any = get_optimizer_state_dict(module, optimizer)
    out: dict[str, Any] = {**osd, "state": {}}
    for name, entry in osd.get("state", {}).items():
        p = sharded.get(name)
        # New dicts: the entries are the optimizer's own, which keeps its local shards.
        out["state"][name] = {
            k: as_dtensor(v, state, id(p))
            if p is not None and isinstance(v, torch.Tensor) and v.ndim and v.shape == p.shape
            else v
            for k, v in entry.items()
        }
    return out


def load_optimizer_state_dict(
    model: Any, optimizer: torch.optim.Optimizer, osd: dict[str, Any]
) -> None:
    """Loads ``optimizer_state_dict``'s result (from any world size: DTensors are resharded)
    into ``optimizer``. Every rank must call it."""
    from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict
    from torch.distributed.tensor import DTensor

    module, state, sharded = _sharded_state(model)
    converted: dict[str, Any] = {**osd, "state": {}}
    for name, entry in osd.get("state", {}).items():
        p = sharded.get(name)
        if p is None:
            converted["state"][name] = entry
            continue
        shape = global_shape(state, id(p))
        converted["state"][name] = {
            k: to_local_shard(v, state, id(p), f"{name}.{k}")
            if isinstance(v, DTensor)
            or (isinstance(v, torch.Tensor) and tuple(v.shape) == shape and v.ndim)
            else v
            for k, v in entry.items()
        }
    set_optimizer_state_dict(module, optimizer, converted)


# -- tensor parallelism ------------------------------------------------------------------------


def install_tp_state_dict_hooks(model: torch.nn.Module, tp: Any) -> None:
    """``state_dict()`` of a tensor-parallel model gives each split parameter as a DTensor over
    the group's mesh (``Shard`` of the split dimension, the whole shape); ``load_state_dict()``
    takes DTensors or whole parameters (``tensor_parallel`` calls it)."""
    model.register_state_dict_post_hook(functools.partial(_tp_to_dtensors, tp))  # type: ignore[no-untyped-call]
    model.register_load_state_dict_pre_hook(functools.partial(_tp_to_local, tp))  # type: ignore[no-untyped-call]


def _tp_split(module: torch.nn.Module, tp: Any) -> dict[str, torch.nn.Parameter]:
    return {
        name: p for name, p in module.named_parameters(remove_duplicate=False) if id(p) in tp.splits
    }


def _tp_to_dtensors(
    tp: Any, module: torch.nn.Module, sd: dict[str, Any], prefix: str, local_metadata: Any
) -> None:
    from torch.distributed.tensor import DTensor, Shard

    if tp.fsdp is not None:  # fsdp shards the slices: its hook gives 2-D DTensors
        return
    split = _tp_split(module, tp)
    for name, p in split.items():
        key = prefix + name
        if key in sd and sd[key] is not p:
            shape, dim = tp.splits[id(p)]
            sd[key] = DTensor.from_local(
                sd[key],
                _mesh(tp, sd[key].device),
                [Shard(dim)],
                run_check=False,
                shape=shape,
                stride=torch.empty(shape, device="meta").stride(),
            )


def _tp_to_local(
    tp: Any, module: torch.nn.Module, sd: dict[str, Any], prefix: str, *rest: Any
) -> None:
    from torch.distributed.tensor import DTensor, Shard

    if tp.fsdp is not None:  # fsdp's hook takes them (2-D DTensors or whole parameters)
        return
    for name, p in _tp_split(module, tp).items():
        key = prefix + name
        if key not in sd:
            continue
        shape, dim = tp.splits[id(p)]
        value = sd[key]
        if isinstance(value, DTensor):
            if (
                tuple(value.placements) == (Shard(dim),)
                and value.device_mesh.size() == tp.world_size
            ):
                sd[key] = value.to_local()
                continue
            value = value.full_tensor()
        if not isinstance(value, torch.Tensor) or value.shape != shape:
            got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise ValueError(
                f"{key}: a tensor-parallel model loads each split parameter whole (shape "
                f"{tuple(shape)}) or as a DTensor; got {got}"
            )
        sd[key] = value.chunk(tp.world_size, dim)[tp.rank].clone()


# -- tensor parallelism and fsdp: a 2-D mesh ---------------------------------------------------


@dataclass
class TwoD:
    """A model ``tensor_parallel`` on one group and ``fsdp`` on another of the same ranks: each
    split parameter is the tensor-parallel slice (``Shard(dim)`` of the whole shape over the TP
    group), sharded by fsdp on its first dimension over the data-parallel group. As a DTensor
    it lives on the 2-D mesh ``("tp", "dp")`` (the TP dimension first: slicing happened first,
    so ``(Shard(dim), Shard(0))`` describes a rank's rows in that order even when ``dim`` is
    0), ``Replicate()`` on the TP dimension for parameters tensor parallelism does not split."""

    group: Any  # the tensor-parallel group
    world_size: int
    rank: int
    splits: dict[int, tuple[torch.Size, int]]  # id of a split parameter -> (whole shape, dim)
    ranks: list[list[int]] | None  # the mesh: global rank of [tp rank][dp rank]
    problem: str = ""  # why the groups are not a 2-D mesh (then ``ranks`` is None)
    mesh: Any = None


def attach_tensor_parallel(model: torch.nn.Module, state: Any, device: torch.device) -> None:
    """Called by ``fsdp`` (every rank): when tensor parallelism split some of ``model``'s
    layers, records it in ``state.tp`` and the 2-D mesh the two groups make (small collectives
    over the two groups, now rather than in a later ``state_dict()``), and hands the state dict
    hooks of the split layers to fsdp's."""
    from thunder.distributed.tensor_parallel import TPState

    tps = [
        m.__dict__["_thunder_tp"]
        for m in model.modules()
        if isinstance(m.__dict__.get("_thunder_tp"), TPState)
    ]
    if not tps:
        return
    world = dist.group.WORLD
    tp_ranks = dist.get_process_group_ranks(tps[0].group or world)
    splits: dict[int, tuple[torch.Size, int]] = {}
    for tp in tps:
        if dist.get_process_group_ranks(tp.group or world) != tp_ranks:
            raise NotImplementedError(
                "thunder.distributed.fsdp: parts of the model are tensor parallel over "
                "different groups"
            )
        splits.update(tp.splits)
        tp.fsdp = state
    dp_group = state.group or world
    dp_ranks = dist.get_process_group_ranks(dp_group)
    tp_rank, tp_size, dp_size = tps[0].rank, len(tp_ranks), len(dp_ranks)
    sizes = torch.empty(dp_size, dtype=torch.int64, device=device)
    mine = torch.tensor([tp_size], dtype=torch.int64, device=device)
    dist.all_gather_into_tensor(sizes, mine, group=dp_group)
    ranks: list[list[int]] | None = None
    problem = ""
    if any(int(n) != tp_size for n in sizes.tolist()):
        problem = "the data-parallel ranks' tensor-parallel groups differ in size"
    else:
        table = torch.empty(dp_size * tp_size, dtype=torch.int64, device=device)
        dist.all_gather_into_tensor(
            table, torch.tensor(tp_ranks, dtype=torch.int64, device=device), group=dp_group
        )
        ranks = table.view(dp_size, tp_size).t().tolist()  # [tp rank][dp rank]
        flat = [r for row in ranks for r in row]
        if (
            len(set(flat)) != len(flat)
            or ranks[tp_rank] != dp_ranks
            or [row[state.rank] for row in ranks] != tp_ranks
        ):
            ranks = None
        # Every rank of the mesh agrees (a rank alone refusing to save would hang the others).
        ok = torch.tensor([int(ranks is not None)], dtype=torch.int64, device=device)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=dp_group)
        dist.all_reduce(ok, op=dist.ReduceOp.MIN, group=tps[0].group or world)
        if not int(ok.item()):
            problem = (
                f"the tensor-parallel group {tp_ranks} and the data-parallel group {dp_ranks} "
                "are not the two dimensions of a mesh"
            )
            ranks = None
    state.tp = TwoD(tps[0].group, tp_size, tp_rank, splits, ranks, problem)


def _placements_2d(state: Any, pid: int) -> tuple[Any, ...]:
    """The placements on the 2-D mesh ``("tp", "dp")`` of the parameter whose id is ``pid``."""
    from torch.distributed.tensor import Replicate, Shard

    split = state.tp.splits.get(pid)
    return (Replicate() if split is None else Shard(split[1]), Shard(0))


def _on_mesh_2d(
    state: Any, pid: int, device: torch.device, rows_shape: torch.Size
) -> tuple[Any, list[Any], torch.Size]:
    """The 2-D mesh (made on first use), the placements and the global shape of the parameter
    whose id is ``pid`` in a tensor-parallel and fsdp model (``rows_shape``: fsdp's view of
    what it sharded, for a parameter tensor parallelism did not split)."""
    from torch.distributed.device_mesh import DeviceMesh

    two: TwoD = state.tp
    if two.ranks is None:
        raise NotImplementedError(
            f"state_dict() of a model both tensor_parallel and fsdp: {two.problem}, so its "
            "parameters have no DTensor placement"
        )
    if two.mesh is None:
        world: Any = dist.group.WORLD
        groups: list[Any] = [two.group or world, state.group or world]
        two.mesh = DeviceMesh.from_group(
            groups, device.type, mesh=two.ranks, mesh_dim_names=("tp", "dp")
        )
    split = two.splits.get(pid)
    return two.mesh, list(_placements_2d(state, pid)), rows_shape if split is None else split[0]
