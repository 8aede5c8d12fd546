"""Data-parallel training: ``thunder.distributed.ddp``.

``ddp(model)`` (before ``thunder.jit``) broadcasts the parameters and buffers from rank 0 and
marks the model: ``thunder.jit`` then adds a ``DDPTransform``, which places the gradient
synchronization in the backward trace. Gradients of parameters are averaged over the ranks in
buckets: each bucket's asynchronous ``prims.all_reduce`` starts as soon as its last gradient is
computed, so communication overlaps the rest of the backward, and the trace waits for them all
just before it returns. Each backward also checks that every rank averages the same gradients in
the same order (``start_layout_check``): a program whose parameters depend on the rank raises.

``no_sync(model)`` (also ``model.no_sync()``) is for gradient accumulation: backward passes
inside it communicate nothing and the gradients accumulate locally in ``.grad``; leaving it
averages what accumulated over the ranks once, so the next (synchronized) backward leaves
``.grad`` equal to the average of the whole accumulated batch, as one large batch would.
Programs compiled inside and outside ``no_sync`` are separate cache entries (the prologue
checks which applies).
"""

from __future__ import annotations

import contextlib
import types
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from thunder.errors import JitError
from thunder_ir import PythonCode, TensorProxy, Trace, Transform, dtypes, prims, tracectx
from thunder_ir import ops as ltorch
from thunder_ir.proxies import Proxy

__all__ = [
    "DDPState",
    "DDPTransform",
    "ddp",
    "no_sync",
    "parameter_gradients",
    "require_initialized",
    "state_of",
]

_STATE = "_thunder_ddp"


@dataclass
class DDPState:
    """What ``ddp`` attached to a model."""

    group: Any
    world_size: int
    bucket_bytes: int
    sync: bool = True


def require_initialized(what: str) -> None:
    if not (dist.is_available() and dist.is_initialized()):
        raise JitError(
            f"thunder.distributed.{what}: torch.distributed is not initialized; call "
            "torch.distributed.init_process_group first"
        )


def ddp(
    model: torch.nn.Module,
    *,
    bucket_size_in_mb: float = 25.0,
    group: Any = None,
    broadcast_from: int = 0,
) -> torch.nn.Module:
    """Prepares ``model`` for data-parallel training and returns it (the same object): its
    parameters and buffers are broadcast from rank ``broadcast_from`` of ``group`` (default:
    the whole world), and ``thunder.jit(model)`` averages the parameters' gradients over the
    ranks in the backward, in buckets of about ``bucket_size_in_mb``."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"thunder.distributed.ddp expects an nn.Module, got {type(model).__name__}")
    if bucket_size_in_mb <= 0:
        raise ValueError(f"bucket_size_in_mb must be positive, got {bucket_size_in_mb}")
    require_initialized("ddp")
    world_size = dist.get_world_size(group)
    src = dist.get_global_rank(group, broadcast_from) if group is not None else broadcast_from
    with torch.no_grad():
        for t in (*model.parameters(), *model.buffers()):
            dist.broadcast(t.data, src=src, group=group)
    state = DDPState(group, world_size, int(bucket_size_in_mb * 2**20))
    object.__setattr__(model, _STATE, state)
    object.__setattr__(model, "no_sync", types.MethodType(no_sync, model))
    return model


@contextlib.contextmanager
def no_sync(model: torch.nn.Module) -> Iterator[None]:
    """Backward passes inside communicate nothing (gradients accumulate locally); on leaving,
    the accumulated gradients are averaged over the ranks once.

    For a model ``fsdp`` sharded, it changes nothing: each backward reduce-scatters its
    gradients (the adjoint of the gather) and each rank's shard accumulates in ``.grad``, which
    by linearity equals one step on the whole batch. Keeping whole gradients until the last
    micro-step would save that communication at the memory of an unsharded gradient per rank,
    which is what sharding is for."""
    state = state_of(model)
    if state is None:
        from thunder.distributed.fsdp import fsdp_state_of

        if fsdp_state_of(model) is not None:
            yield
            return
        raise JitError(
            "thunder.distributed.no_sync: the model was not prepared with ddp() or fsdp()"
        )
    previous, state.sync = state.sync, False
    try:
        yield
    finally:
        state.sync = previous
        if previous:
            _average_gradients(model, state)


def state_of(model: Any) -> DDPState | None:
    inner = getattr(model, "get_model", None)
    if callable(inner):  # a ThunderModule
        model = inner()
    state = model.__dict__.get(_STATE)
    return state if isinstance(state, DDPState) else None


def _average_gradients(model: torch.nn.Module, state: DDPState) -> None:
    """Every rank reduces the same tensors in the same order, whatever it computed: every
    parameter that requires grad, in the model's order, a missing gradient as zeros (a rank
    that skipped a layer contributes nothing to it, as torch's DDP with
    ``find_unused_parameters``). A parameter no rank has a gradient of keeps ``None``."""
    params = [p for p in dict.fromkeys(model.parameters()) if p.requires_grad]
    if not params:
        return
    index = {id(p): k for k, p in enumerate(params)}
    has_grad = torch.tensor([float(p.grad is not None) for p in params], device=params[0].device)
    dist.all_reduce(has_grad, op=dist.ReduceOp.MAX, group=state.group)
    # Grouped by dtype in an order every process agrees on (a set's is by address).
    dtypes = sorted({p.dtype for p in params}, key=str)
    for dtype in dtypes:
        same = [p for p in params if p.dtype == dtype]
        flat = torch.cat(
            [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in same]
        )
        dist.all_reduce(flat, op=dist.ReduceOp.AVG, group=state.group)
        offset = 0
        for p in same:
            averaged = flat[offset : offset + p.numel()].view_as(p)
            offset += p.numel()
            if p.grad is not None:
                p.grad.copy_(averaged)
            elif has_grad[index[id(p)]]:
                p.grad = averaged.clone()


class DDPTransform(Transform):
    """Averages the gradients of ``model``'s parameters over the ranks, in the backward trace
    (see the module docstring). ``thunder.jit`` adds it for a model ``ddp`` prepared."""

    def __init__(self, model: torch.nn.Module) -> None:
        state = state_of(model)
        if state is None:
            raise JitError("thunder.distributed.DDPTransform: prepare the model with ddp() first")
        self.state = state
        # Each parameter's position in the model: names the gradients in the collectives' layout.
        self.parameters = {id(p): k for k, p in enumerate(dict.fromkeys(model.parameters()))}

    def transform_traces_pre_prologue(
        self, prologue: Trace, computation: Trace, epilogue: Trace | None, **kwargs: Any
    ) -> tuple[Trace, Trace, Trace | None]:
        # Whether gradients are synchronized is decided now: the prologue checks it stays so.
        body = prologue.bound_symbols
        ret = body.pop()
        with tracectx(prologue):
            state = Proxy(None)
            body.append(prims.unpack_attr.bind(PythonCode("fn"), _STATE, output=state))
            sync = Proxy(None)
            body.append(prims.unpack_attr.bind(state, "sync", output=sync))
            check = prims.check_value.bind(sync, self.state.sync, output=None)
            body.append(check.replace(header="guard: gradient sync (thunder.distributed.no_sync)"))
        body.append(ret)
        return prologue, computation, epilogue

    def transform_backward(self, backward: Trace, *, inputs: Sequence[Any], **kwargs: Any) -> Trace:
        if not self.state.sync:
            return backward
        grads, chosen = parameter_gradients(backward, inputs, set(self.parameters), "ddp")
        if not chosen:
            return backward
        layout = [self.parameters[id(inputs[i])] for i in chosen]
        return _with_gradient_sync(backward, grads, chosen, self.state, layout)


def parameter_gradients(
    backward: Trace, inputs: Sequence[Any], parameters: set[int], what: str
) -> tuple[tuple[Any, ...], list[int]]:
    """The gradients a backward trace returns, and the positions of those of ``parameters``
    (by id, among the forward's ``inputs``)."""
    ret = backward.bound_symbols[-1]
    grads = ret.args[0] if ret.args else None
    if not isinstance(grads, tuple):
        raise JitError(
            f"thunder.distributed.{what}: this program writes in place where torch.autograd "
            "differentiates it (a written input, or a tensor autograd saved), so thunder has no "
            "backward trace to place gradient communication in"
        )
    chosen = [
        i
        for i, (g, x) in enumerate(zip(grads, inputs))
        if isinstance(g, TensorProxy) and id(x) in parameters
    ]
    return grads, chosen


def _with_gradient_sync(
    backward: Trace,
    grads: tuple[Any, ...],
    chosen: list[int],
    state: DDPState,
    positions: list[int],
) -> Trace:
    body = backward.bound_symbols[:-1]
    made_at = {p.name: k for k, b in enumerate(body) for p in b.flat_proxy_outs}
    # In the order the backward computes them (inputs passed straight through come first).
    order = sorted(chosen, key=lambda i: made_at.get(grads[i].name, -1))
    buckets: list[list[int]] = []
    size = 0
    for i in order:
        g = grads[i]
        nbytes = _numel(g) * g.dtype.bytes
        last = buckets[-1] if buckets else None
        if (
            last is None
            or size + nbytes > state.bucket_bytes
            or grads[last[0]].dtype != g.dtype
            or grads[last[0]].device != g.device
        ):
            buckets.append([i])
            size = nbytes
        else:
            last.append(i)
            size += nbytes
    ready_after: dict[int, list[list[int]]] = {}
    for bucket in buckets:
        ready_after.setdefault(max(made_at.get(grads[i].name, -1) for i in bucket), []).append(
            bucket
        )

    position = dict(zip(chosen, positions))
    layout = [[(position[i], grads[i].shape, str(grads[i].dtype)) for i in b] for b in buckets]
    pending: list[tuple[list[int], Any]] = []
    with backward.rerecord("ddp gradient sync") as out:
        agreed = start_layout_check(layout, grads[chosen[0]].device, state.group)
        for bucket in ready_after.get(-1, []):
            pending.append((bucket, _start(bucket, grads, state)))
        for k, bsym in enumerate(body):
            out.record(bsym)
            for bucket in ready_after.get(k, []):
                pending.append((bucket, _start(bucket, grads, state)))
        synced = list(grads)
        for bucket, fut in pending:
            averaged = prims.wait(fut)
            if len(bucket) == 1:
                synced[bucket[0]] = averaged
                continue
            offset = 0
            for i in bucket:
                g = grads[i]
                n = _numel(g)
                piece = ltorch.narrow(averaged, 0, offset, n)
                synced[i] = ltorch.reshape(piece, g.shape)
                offset += n
        finish_layout_check(
            agreed,
            "thunder.distributed.ddp: the ranks' backward passes average different gradients "
            "(the forward reads other parameters, or in another order, on another rank: "
            "control flow that depends on the rank or on the rank's data?). Every rank must "
            "run the same program",
        )
        prims.python_return(tuple(synced))
    return out


def start_layout_check(layout: Any, device: Any, group: Any) -> Any:
    """Starts the check that every rank's program communicates the same tensors in the same
    order (``layout``: what it communicates, by parameter position, shape and dtype): a program
    that pairs one rank's gradient with another's of another parameter averages them silently
    where the sizes agree. Each rank's fingerprint ``h`` and ``-h`` reduced by ``max`` are
    ``h`` and ``-h`` again only where every rank's is ``h``: one collective of two numbers."""
    h = zlib.crc32(repr(layout).encode()) & 0x7FFFFFFF
    mine = ltorch.cat(
        [
            prims.full((1,), h, device=device, dtype=dtypes.int64),
            prims.full((1,), -h, device=device, dtype=dtypes.int64),
        ]
    )
    return mine, prims.all_reduce(mine, "max", group, True)


def finish_layout_check(started: Any, message: str) -> None:
    """Raises ``RuntimeError(message)`` where another rank's layout differed (a device-side
    assert on accelerators: no synchronization)."""
    mine, future = started
    agreed = ltorch.all(ltorch.eq(prims.wait(future), mine))
    prims.check_values(agreed, message)


def _start(bucket: list[int], grads: tuple[Any, ...], state: DDPState) -> Any:
    tensors = [grads[i] for i in bucket]
    flat = (
        tensors[0] if len(tensors) == 1 else ltorch.cat([ltorch.reshape(t, (-1,)) for t in tensors])
    )
    return prims.all_reduce(flat, "avg", state.group, True)


def _numel(t: TensorProxy) -> int:
    n = 1
    for s in t.shape:
        if not isinstance(s, int):
            raise JitError(
                "thunder.distributed.ddp: gradients with symbolic sizes are not supported"
            )
        n *= s
    return n
