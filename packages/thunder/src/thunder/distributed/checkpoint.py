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
"""

from __future__ import annotations

import functools
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


def as_dtensor(local: torch.Tensor, state: Any, shape: tuple[int, ...]) -> Any:
    """This rank's padded shard ``local`` of a parameter of ``shape`` as a DTensor (a 0-dim
    parameter, which lives on one rank, as its whole value: it communicates)."""
    from torch.distributed.tensor import DTensor, Shard

    chunk = local.shape[0]
    start = state.rank * chunk
    real = max(0, min(chunk, _rows(shape) - start))
    dt = DTensor.from_local(
        local[:real],
        _mesh(state, local.device),
        [Shard(0)],
        run_check=False,
        shape=torch.Size((_rows(shape), *shape[1:])),
        stride=torch.empty((_rows(shape), *shape[1:]), device="meta").stride(),
    )
    if not shape:
        return dt.full_tensor().reshape(())
    return dt


def to_local_shard(value: Any, state: Any, shape: tuple[int, ...], what: str) -> torch.Tensor:
    """This rank's padded shard of ``value`` (a DTensor of the parameter's global shape, or the
    whole parameter) for a parameter of ``shape``."""
    from torch.distributed.tensor import DTensor, Shard

    from thunder.distributed.fsdp import shard_of

    if isinstance(value, DTensor):
        if tuple(value.shape) != (_rows(shape), *shape[1:]) and tuple(value.shape) != shape:
            raise ValueError(f"{what}: a DTensor of shape {tuple(value.shape)}, not {shape}")
        chunk = -(-_rows(shape) // state.world_size)
        ours = (
            tuple(value.placements) == (Shard(0),)
            and value.device_mesh.size() == state.world_size
            and value.device_mesh.get_local_rank() == state.rank
        )
        if not ours:  # another placement or world size: gathered whole, then sharded
            return shard_of(value.full_tensor().reshape(shape), state.world_size, state.rank)
        local = value.to_local()
        if local.shape[0] < chunk:
            pad = local.new_zeros((chunk - local.shape[0], *local.shape[1:]))
            local = torch.cat([local, pad])
        return local
    if not isinstance(value, torch.Tensor) or tuple(value.shape) != tuple(shape):
        got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
        raise ValueError(
            f"{what}: a model sharded by thunder.distributed.fsdp loads each parameter whole "
            f"(shape {tuple(shape)}) or as a DTensor (what its state_dict() gives); got {got}. "
            "A rank's shard saved as a plain tensor is not the parameter"
        )
    return shard_of(value, state.world_size, state.rank)


def _to_dtensors(
    state: Any, module: torch.nn.Module, sd: dict[str, Any], prefix: str, local_metadata: Any
) -> None:
    for name, p in _sharded(module, state).items():
        key = prefix + name
        if key in sd and sd[key] is not p:  # keep_vars=True hands out the parameters themselves
            sd[key] = as_dtensor(sd[key], state, tuple(state.shapes[id(p)]))


def _to_local_shards(
    state: Any, module: torch.nn.Module, sd: dict[str, Any], prefix: str, *rest: Any
) -> None:
    for name, p in _sharded(module, state).items():
        key = prefix + name
        if key in sd:
            sd[key] = to_local_shard(sd[key], state, tuple(state.shapes[id(p)]), key)


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
            k: as_dtensor(v, state, tuple(state.shapes[id(p)]))
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
        shape = tuple(state.shapes[id(p)])
        converted["state"][name] = {
            k: to_local_shard(v, state, shape, f"{name}.{k}")
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

    split = _tp_split(module, tp)
    if "_thunder_fsdp" in module.__dict__ and any(
        sd.get(prefix + n) is not p for n, p in split.items()
    ):
        raise NotImplementedError(
            "state_dict() of a model both tensor_parallel and fsdp: its parameters are split in "
            "two dimensions, which its checkpoints cannot describe yet (saving it would lose "
            "data); save each group's state with thunder.distributed.full_state_dict on the "
            "tensor-parallel model before fsdp, or train without fsdp to checkpoint"
        )
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
