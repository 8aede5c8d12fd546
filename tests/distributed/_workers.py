"""Worker functions for the distributed tests: each runs in a process of its own (started by
``_spawn``), with a gloo process group of ``world_size`` ranks, and puts its results in a queue."""

from __future__ import annotations

import datetime
import io
import os
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

import thunder
import thunder.distributed
from thunder.models import GPT, GPTConfig

CONFIG = GPTConfig(vocab_size=63, block_size=16, n_layer=2, n_head=2, n_embd=32)
STEPS = 3
GLOBAL_BATCH = 4
SEQ = 12


def batches(
    steps: int = STEPS, batch: int = GLOBAL_BATCH
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(1234)
    out = []
    for _ in range(steps):
        x = torch.randint(0, CONFIG.vocab_size, (batch, SEQ), generator=g)
        y = torch.randint(0, CONFIG.vocab_size, (batch, SEQ), generator=g)
        out.append((x, y))
    return out


def make_model(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return GPT(CONFIG)


def loss_of(model: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = model(x)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def single_process_training(steps: int = STEPS) -> tuple[list[float], dict[str, torch.Tensor]]:
    """The reference: eager training on the global batch in one process."""
    model = make_model(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in batches(steps):
        loss = loss_of(model, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses, {k: v.detach().clone() for k, v in model.state_dict().items()}


def run(
    rank: int,
    world_size: int,
    port: int,
    target: Callable[..., Any],
    queue: Any,
    timeout: float,
    streams: Any = None,
) -> None:
    for fd, inherited in zip((1, 2), streams or ()):  # the test process's stdout and stderr
        received = inherited.detach()
        os.dup2(received, fd)
        os.close(received)
    torch.seed()  # a random state of its own, as a new process has, not the server's
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", rank=rank, world_size=world_size, timeout=datetime.timedelta(seconds=timeout)
    )
    try:
        # As bytes: tensors sent through the queue would share memory with an exiting process.
        buffer = io.BytesIO()
        torch.save(target(rank, world_size), buffer)
        queue.put((rank, "ok", buffer.getvalue()))
    except BaseException as e:  # reported to the test, whatever it is
        queue.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
    finally:
        dist.destroy_process_group()


def ddp_training(rank: int, world_size: int, bucket_size_in_mb: float = 25.0) -> dict[str, Any]:
    # Each rank builds other weights: ddp broadcasts rank 0's.
    model = thunder.distributed.ddp(make_model(rank), bucket_size_in_mb=bucket_size_in_mb)
    jitted = thunder.jit(model)
    return {
        "losses": _train(model, jitted, rank, world_size),
        "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "backward": str(thunder.last_backward_traces(jitted)[-1]),
    }


def _train(
    model: torch.nn.Module,
    jitted: Any,
    rank: int,
    world_size: int,
    data: Any = None,
    opt: Any = None,
) -> list[float]:
    """Steps of ``opt`` (default SGD) on this rank's share of each global batch of ``data``
    (default ``batches()``); the global loss of every step."""
    opt = opt or torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    shard = GLOBAL_BATCH // world_size
    for x, y in batches() if data is None else data:
        xs, ys = x[rank * shard : (rank + 1) * shard], y[rank * shard : (rank + 1) * shard]
        loss = loss_of(jitted, xs, ys)
        loss.backward()
        opt.step()
        opt.zero_grad()
        full = loss.detach().clone()
        dist.all_reduce(full, op=dist.ReduceOp.AVG)
        losses.append(full.item())
    return losses


def ddp_training_small_buckets(rank: int, world_size: int) -> dict[str, Any]:
    return ddp_training(rank, world_size, bucket_size_in_mb=0.02)


def fsdp_no_sync(rank: int, world_size: int) -> dict[str, Any]:
    """ddp_no_sync for a sharded model: the whole gradients gathered from the shards."""
    out = ddp_no_sync(rank, world_size, prepare=thunder.distributed.fsdp)
    model = out.pop("model")
    grads = {}
    for name, p in model.named_parameters():
        whole = torch.empty((p.grad.shape[0] * world_size, *p.grad.shape[1:]))
        dist.all_gather_into_tensor(whole, p.grad.contiguous())
        shape = model.__dict__["_thunder_fsdp"].shapes[id(p)]
        grads[name] = whole[: shape[0]].reshape(shape)
    return {**out, "grads": grads}


def ddp_no_sync(rank: int, world_size: int, prepare: Any = None) -> dict[str, Any]:
    """Two micro-batches per rank, the first inside no_sync: the gradients must equal those of
    the whole global batch (as the mean of four equal-sized quarters)."""
    model = (prepare or thunder.distributed.ddp)(make_model(0))
    jitted = thunder.jit(model)
    ((x, y),) = batches(1, batch=2 * world_size * 2)
    per = x.shape[0] // (2 * world_size)
    parts = [
        (x[i * per : (i + 1) * per], y[i * per : (i + 1) * per]) for i in range(2 * world_size)
    ]
    mine = parts[rank * 2 : rank * 2 + 2]
    with model.no_sync():
        (loss_of(jitted, *mine[0]) / 2).backward()
    (loss_of(jitted, *mine[1]) / 2).backward()
    return {
        "grads": {n: p.grad.detach().clone() for n, p in model.named_parameters()},
        "compiles": thunder.compile_stats(jitted).compilations,
        **({"model": model} if prepare is not None else {}),
    }


def raising_rank(rank: int, world_size: int) -> str:
    model = thunder.distributed.ddp(make_model(0))
    jitted = thunder.jit(model)
    ((x, y),) = batches(1)
    if rank == 1:
        raise RuntimeError("rank 1 fails before its backward")
    loss_of(jitted, x, y).backward()  # waits for rank 1's gradients, which never come
    return "finished"


def fsdp_training(rank: int, world_size: int, strategy: str = "ZERO3") -> dict[str, Any]:
    model = thunder.distributed.fsdp(make_model(rank), sharding_strategy=strategy)
    jitted = thunder.jit(model)
    return {
        "losses": _train(model, jitted, rank, world_size),
        "state": thunder.distributed.full_state_dict(model),
        "shard_numel": sum(p.numel() for p in model.parameters()),
        "forward": str(thunder.last_traces(jitted)[-1]),
        "backward": str(thunder.last_backward_traces(jitted)[-1]),
    }


def fsdp_training_zero2(rank: int, world_size: int) -> dict[str, Any]:
    return fsdp_training(rank, world_size, "ZERO2")


def fsdp_checkpoint(rank: int, world_size: int) -> dict[str, Any]:
    """Two steps, a full checkpoint, one more step; then a fresh sharded model loaded from the
    checkpoint takes the same third step."""
    data = batches()
    shard = GLOBAL_BATCH // world_size

    def step(jitted: Any, opt: Any, x: torch.Tensor, y: torch.Tensor) -> None:
        xs, ys = x[rank * shard : (rank + 1) * shard], y[rank * shard : (rank + 1) * shard]
        loss_of(jitted, xs, ys).backward()
        opt.step()
        opt.zero_grad()

    model = thunder.distributed.fsdp(make_model(0))
    jitted = thunder.jit(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in data[:2]:
        step(jitted, opt, x, y)
    saved = thunder.distributed.full_state_dict(model)
    step(jitted, opt, *data[2])
    expected = thunder.distributed.full_state_dict(model)

    restored = thunder.distributed.fsdp(make_model(5))  # other weights, replaced by the load
    thunder.distributed.load_full_state_dict(restored, saved)
    jitted2 = thunder.jit(restored)
    opt2 = torch.optim.SGD(restored.parameters(), lr=0.1)
    step(jitted2, opt2, *data[2])
    return {"expected": expected, "restored": thunder.distributed.full_state_dict(restored)}


def _tiny_llama(seed: int) -> torch.nn.Module:
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=61,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=32,
    )
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(config).train()


def _llama_loss(model: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=x).logits
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def llama_reference() -> dict[str, torch.Tensor]:
    model = _tiny_llama(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in batches(2):
        _llama_loss(model, x % 61, y % 61).backward()
        opt.step()
        opt.zero_grad()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def llama_with_recipe(rank: int, world_size: int, strategy: str) -> dict[str, Any]:
    from thunder.recipes import HFTransformers

    model = _tiny_llama(rank)
    compiled = thunder.compile(model, recipe=HFTransformers(distributed=strategy))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    shard = GLOBAL_BATCH // world_size
    for x, y in batches(2):
        xs, ys = (
            x[rank * shard : (rank + 1) * shard] % 61,
            y[rank * shard : (rank + 1) * shard] % 61,
        )
        _llama_loss(compiled, xs, ys).backward()
        opt.step()
        opt.zero_grad()
    if strategy == "ddp":
        return {k: v.detach().clone() for k, v in model.state_dict().items()}
    return thunder.distributed.full_state_dict(model)


def llama_ddp(rank: int, world_size: int) -> dict[str, Any]:
    return llama_with_recipe(rank, world_size, "ddp")


def llama_fsdp(rank: int, world_size: int) -> dict[str, Any]:
    return llama_with_recipe(rank, world_size, "fsdp")


def collective_gradients(rank: int, world_size: int) -> dict[str, Any]:
    """Each collective inside a jitted function, differentiated: values and gradients against
    the same computation done by hand on the gathered values."""
    from thunder_ir import prims

    torch.manual_seed(100)
    xs = [torch.randn(4, 3) for _ in range(world_size)]  # every rank knows all inputs
    mine = xs[rank].clone().requires_grad_()
    cases = {
        "all_gather": lambda x: prims.all_gather(x, None, world_size).sin().sum(),
        "all_reduce": lambda x: (prims.all_reduce(x, "sum", None) ** 2).sum(),
        "reduce_scatter": lambda x: (prims.reduce_scatter(x, "avg", None, world_size) * 3).sum(),
        "broadcast": lambda x: prims.broadcast(x, 0, None).exp().sum(),
    }
    out = {}
    for name, fn in cases.items():
        jitted = thunder.jit(fn)
        value = jitted(mine)
        (grad,) = torch.autograd.grad(value, mine)
        out[name] = (value.detach(), grad)
    return out


def expected_collective_gradients(rank: int, world_size: int) -> dict[str, Any]:
    torch.manual_seed(100)
    xs = [torch.randn(4, 3) for _ in range(world_size)]
    total = sum(xs)
    chunk = 4 // world_size
    return {
        # Every rank's loss reads every shard: the gradient of mine sums all ranks' losses.
        "all_gather": (torch.cat(xs).sin().sum(), world_size * xs[rank].cos()),
        "all_reduce": ((total**2).sum(), world_size * 2 * total),
        "reduce_scatter": (
            (total[rank * chunk : (rank + 1) * chunk] / world_size * 3).sum(),
            torch.full((4, 3), 3.0 / world_size),
        ),
        "broadcast": (
            xs[0].exp().sum(),
            world_size * xs[0].exp() if rank == 0 else torch.zeros(4, 3),
        ),
    }


# --- checkpoints of sharded models ----------------------------------------------------------


def fsdp_state_dicts(rank: int, world_size: int) -> dict[str, Any]:
    """What state_dict() of a sharded model gives and what load_state_dict() takes."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.tensor import DTensor

    eager = make_model(0).state_dict()
    model = thunder.distributed.fsdp(make_model(0))
    jitted = thunder.jit(model)
    loss_of(jitted, *batches(1, batch=2)[0])  # compiled once: state_dict after a call
    sd = jitted.state_dict()
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))

    other = thunder.distributed.fsdp(make_model(5))
    other.load_state_dict(eager)  # a whole checkpoint into a sharded model
    shards = {k: v.to_local() if isinstance(v, DTensor) else v for k, v in sd.items()}
    try:
        thunder.jit(thunder.distributed.fsdp(make_model(6))).load_state_dict(shards)
        refused = ""
    except ValueError as e:
        refused = str(e)
    buffer = io.BytesIO()
    torch.save(sd, buffer)  # each rank its DTensors
    buffer.seek(0)
    third = thunder.distributed.fsdp(make_model(7))
    third.load_state_dict(torch.load(buffer, weights_only=False))
    return {
        "keys": list(sd),
        "dtensors": sorted(k for k, v in sd.items() if isinstance(v, DTensor)),
        "shapes": {k: tuple(v.shape) for k, v in sd.items()},
        "eager_shapes": {k: tuple(v.shape) for k, v in eager.items()},
        "full": {k: v.clone() for k, v in full.items()},
        "eager": eager,
        "loaded": thunder.distributed.full_state_dict(other),
        "refused": refused,
        "round_trip": thunder.distributed.full_state_dict(third),
    }


def fsdp_dcp_save(rank: int, world_size: int, folder: str) -> dict[str, Any]:
    """Two Adam steps, a sharded checkpoint through torch.distributed.checkpoint, a third step:
    its result is what a resumed run must reach."""
    import torch.distributed.checkpoint as dcp

    data = batches()
    model = thunder.distributed.fsdp(make_model(0))
    jitted = thunder.jit(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    _train(model, jitted, rank, world_size, data[:2], opt)
    state = {
        "model": model.state_dict(),
        "optim": thunder.distributed.optimizer_state_dict(model, opt),
    }
    dcp.save(state, checkpoint_id=folder)
    _train(model, jitted, rank, world_size, data[2:], opt)
    return {"after": thunder.distributed.full_state_dict(model)}


def fsdp_dcp_resume(rank: int, world_size: int, folder: str) -> dict[str, Any]:
    """A fresh model and optimizer (other weights) loaded from the checkpoint, on this world
    size, take the third step."""
    import torch.distributed.checkpoint as dcp

    model = thunder.distributed.fsdp(make_model(5))
    jitted = thunder.jit(model)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    state = {
        "model": model.state_dict(),
        "optim": thunder.distributed.optimizer_state_dict(model, opt),
    }
    dcp.load(state, checkpoint_id=folder)
    jitted.load_state_dict(state["model"])
    thunder.distributed.load_optimizer_state_dict(model, opt, state["optim"])
    _train(model, jitted, rank, world_size, batches()[2:], opt)
    return {"after": thunder.distributed.full_state_dict(model)}


# --- models built on the meta device --------------------------------------------------------


def gpt_init(module: torch.nn.Module) -> None:
    """GPT's own initialization, one module at a time (``reset_parameters`` for the others)."""
    if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
        GPT._init_weights(None, module)  # type: ignore[arg-type]
    elif hasattr(module, "reset_parameters"):
        module.reset_parameters()


def meta_init_reference() -> dict[str, torch.Tensor]:
    model = make_model(0)
    torch.manual_seed(1)
    for module in model.modules():
        gpt_init(module)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def fsdp_meta_init(rank: int, world_size: int) -> dict[str, Any]:
    """A GPT built on the meta device, materialized shard by shard, then one training step."""
    with torch.device("meta"):
        model = GPT(CONFIG)
    torch.manual_seed(1)
    model = thunder.distributed.fsdp(model, param_init_fn=gpt_init)
    devices = {str(t.device) for t in (*model.parameters(), *model.buffers())}
    tied = model.lm_head.weight is model.transformer.wte.weight
    state = thunder.distributed.full_state_dict(model)
    jitted = thunder.jit(model)
    losses = _train(model, jitted, rank, world_size)
    return {
        "devices": devices,
        "tied": tied,
        "state": state,
        "shard_numel": sum(p.numel() for p in model.parameters()),
        "losses": losses,
    }


def fsdp_meta_without_init(rank: int, world_size: int) -> str:
    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(4))

    with torch.device("meta"):
        model = torch.nn.Sequential(torch.nn.Linear(4, 4), Scaled())
    try:
        thunder.distributed.fsdp(model)
    except thunder.JitError as e:
        return str(e)
    return ""


def symbolic_lengths(rank: int, world_size: int, prepare: Any) -> dict[str, Any]:
    """Training on sequences of three lengths under cache="symbolic values": one program."""
    model = prepare(make_model(0))
    jitted = thunder.jit(model, cache="symbolic values")
    losses = _train(model, jitted, rank, world_size, _lengths_batches())
    return {"losses": losses, "compiles": thunder.compile_stats(jitted).compilations}


def _lengths_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    return [
        (
            torch.randint(0, CONFIG.vocab_size, (GLOBAL_BATCH, length), generator=g),
            torch.randint(0, CONFIG.vocab_size, (GLOBAL_BATCH, length), generator=g),
        )
        for length in (12, 9, 5)
    ]


def ddp_symbolic(rank: int, world_size: int) -> dict[str, Any]:
    return symbolic_lengths(rank, world_size, thunder.distributed.ddp)


def fsdp_symbolic(rank: int, world_size: int) -> dict[str, Any]:
    return symbolic_lengths(rank, world_size, thunder.distributed.fsdp)


def symbolic_reference() -> list[float]:
    model = make_model(0)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in _lengths_batches():
        loss = loss_of(model, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


# --- tensor parallelism ------------------------------------------------------------------------


class TPNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(64, 32)
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.head = torch.nn.Linear(32, 64)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        h = h + self.fc2(torch.nn.functional.gelu(self.fc1(h)))
        return self.head(self.norm(h))


TP_PLANS = {
    "rows": {"embed": "rowwise", "fc1": "colwise", "fc2": "rowwise", "head": "colwise_gather"},
    "cols": {"embed": "colwise", "fc1": "colwise", "fc2": "rowwise", "head": "colwise_gather"},
}


def _tp_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(3)
    return [
        (torch.randint(0, 64, (4, 6), generator=g), torch.randint(0, 64, (4, 6), generator=g))
        for _ in range(STEPS)
    ]


def _tp_loss(model: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    logits = model(x)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, 64), y.reshape(-1))


def tp_reference(adam: bool = False) -> dict[str, Any]:
    """One process on the whole batches: SGD (lr 0.5), or Adam (lr 0.01) when ``adam``."""
    torch.manual_seed(0)
    model = TPNet()
    opt = _tp_optimizer(model, adam)
    losses = []
    for x, y in _tp_batches():
        loss = _tp_loss(model, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return {
        "losses": losses,
        "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
    }


def _tp_optimizer(model: torch.nn.Module, adam: bool) -> torch.optim.Optimizer:
    if adam:
        return torch.optim.Adam(model.parameters(), lr=0.01)
    return torch.optim.SGD(model.parameters(), lr=0.5)


def _whole_tp_state(
    model: torch.nn.Module, tp_group: Any, fsdp_group: Any = None
) -> dict[str, Any]:
    """Every parameter whole on every rank: gathered over the FSDP group, then the TP group."""
    from thunder.distributed.fsdp import _whole, fsdp_state_of
    from thunder.distributed.tensor_parallel import tp_state_of

    tp = tp_state_of(model)
    fs = fsdp_state_of(model)
    out = {}
    for name, p in model.named_parameters():
        value = p.detach()
        if fs is not None:
            value = _whole(value, fs.shapes[id(p)], fs)
        if id(p) in tp.splits:
            _, dim = tp.splits[id(p)]
            parts = [torch.empty_like(value) for _ in range(tp.world_size)]
            dist.all_gather(parts, value.contiguous(), group=tp_group)
            value = torch.cat(parts, dim)
        out[name] = value.clone()
    return out


def tp_training(rank: int, world_size: int, plan: str, jit: bool = True) -> dict[str, Any]:
    torch.manual_seed(0)
    model = thunder.distributed.tensor_parallel(TPNet(), TP_PLANS[plan])
    run = thunder.jit(model) if jit else model
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for x, y in _tp_batches():  # every rank of the group sees the same batch
        loss = _tp_loss(run, x, y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    from torch.distributed.tensor import DTensor

    sd = model.state_dict()
    out = {
        "losses": losses,
        "state": _whole_tp_state(model, None),
        "saved": {k: v.full_tensor() if isinstance(v, DTensor) else v for k, v in sd.items()},
        "dtensors": sorted(k for k, v in sd.items() if isinstance(v, DTensor)),
        "local_numel": sum(p.numel() for p in model.parameters()),
    }
    if jit:
        out["forward"] = str(thunder.last_traces(run)[-1])
        out["backward"] = str(thunder.last_backward_traces(run)[-1])
    try:  # a layer no style applies to is a clear error
        thunder.distributed.tensor_parallel(TPNet(), {"norm": "colwise"})
        out["refused"] = ""
    except thunder.JitError as e:
        out["refused"] = str(e)
    if plan == "cols" and jit:  # fsdp over the same group: no 2-D mesh to place them on
        same = thunder.distributed.fsdp(thunder.distributed.tensor_parallel(TPNet(), {}))
        try:
            same.state_dict()
            out["not_a_mesh"] = ""
        except NotImplementedError as e:
            out["not_a_mesh"] = str(e)
    # loading the whole state back keeps each rank's slices
    again = thunder.distributed.tensor_parallel(TPNet(), TP_PLANS[plan])
    again.load_state_dict(out["saved"])
    out["reloaded"] = _whole_tp_state(again, None)
    return out


def tp_rows(rank: int, world_size: int) -> dict[str, Any]:
    return tp_training(rank, world_size, "rows")


def tp_cols(rank: int, world_size: int) -> dict[str, Any]:
    return tp_training(rank, world_size, "cols")


def tp_rows_eager(rank: int, world_size: int) -> dict[str, Any]:
    return tp_training(rank, world_size, "rows", jit=False)


def _mesh_2x2(rank: int) -> tuple[Any, Any, int]:
    """4 ranks as a 2 x 2 mesh: tensor parallel within {0, 1} and {2, 3}, fsdp within {0, 2}
    and {1, 3}. This rank's TP group, data-parallel group and data-parallel rank."""
    tp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    dp_groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    return tp_groups[rank // 2], dp_groups[rank % 2], rank // 2


def _tp_fsdp_model(seed: int, plan: str, tp_group: Any, dp_group: Any) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = thunder.distributed.tensor_parallel(TPNet(), TP_PLANS[plan], group=tp_group)
    return thunder.distributed.fsdp(model, group=dp_group)


def _train_2d(jitted: Any, opt: Any, data: Any, dp_rank: int, dp_group: Any) -> list[float]:
    """Steps on this data-parallel rank's half of each batch; the global loss of every step."""
    losses = []
    for x, y in data:
        xs, ys = x[dp_rank * 2 : dp_rank * 2 + 2], y[dp_rank * 2 : dp_rank * 2 + 2]
        loss = _tp_loss(jitted, xs, ys)
        loss.backward()
        opt.step()
        opt.zero_grad()
        full = loss.detach().clone()
        dist.all_reduce(full, op=dist.ReduceOp.AVG, group=dp_group)
        losses.append(full.item())
    return losses


def tp_fsdp_2d(rank: int, world_size: int) -> dict[str, Any]:
    """The 2 x 2 mesh (``_mesh_2x2``); each data-parallel rank trains on its half of the batch.
    Then its state dict: 2-D DTensors, gathered whole; whole and sharded loads."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.tensor import DTensor

    tp_group, dp_group, dp_rank = _mesh_2x2(rank)
    model = _tp_fsdp_model(0, "rows", tp_group, dp_group)
    jitted = thunder.jit(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = _train_2d(jitted, opt, _tp_batches(), dp_rank, dp_group)
    sd = jitted.state_dict()
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    # A whole checkpoint (plain tensors) loads: each rank keeps its slice's shard.
    whole = _tp_fsdp_model(7, "rows", tp_group, dp_group)
    whole.load_state_dict(full)
    # thunder's own full state dict, and back.
    gathered = thunder.distributed.full_state_dict(model)
    again = _tp_fsdp_model(8, "rows", tp_group, dp_group)
    thunder.distributed.load_full_state_dict(again, gathered)
    try:  # each rank's local pieces posing as the parameters
        shards = {k: v.to_local() if isinstance(v, DTensor) else v for k, v in sd.items()}
        _tp_fsdp_model(9, "rows", tp_group, dp_group).load_state_dict(shards)
        refused = ""
    except ValueError as e:
        refused = str(e)
    return {
        "losses": losses,
        "state": _whole_tp_state(model, tp_group),
        "local_numel": sum(p.numel() for p in model.parameters()),
        "placements": {
            k: (tuple(str(p) for p in v.placements), tuple(v.device_mesh.mesh.tolist()))
            for k, v in sd.items()
            if isinstance(v, DTensor)
        },
        "shapes": {k: tuple(v.shape) for k, v in sd.items()},
        "full": {k: v.clone() for k, v in full.items()},
        "gathered": gathered,
        "whole_loaded": _whole_tp_state(whole, tp_group),
        "full_loaded": _whole_tp_state(again, tp_group),
        "refused": refused,
    }


def tp_fsdp_dcp(rank: int, world_size: int, folder: str) -> dict[str, Any]:
    """The 2 x 2 mesh: two Adam steps, a checkpoint through torch.distributed.checkpoint, a
    third step; then a fresh model and optimizer (other weights) loaded from the checkpoint
    take the third step again."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    tp_group, dp_group, dp_rank = _mesh_2x2(rank)
    data = _tp_batches()
    full = StateDictOptions(full_state_dict=True)

    def fresh(seed: int) -> tuple[torch.nn.Module, Any, torch.optim.Optimizer]:
        model = _tp_fsdp_model(seed, "cols", tp_group, dp_group)
        return model, thunder.jit(model), _tp_optimizer(model, adam=True)

    def checkpoint(model: torch.nn.Module, opt: torch.optim.Optimizer) -> dict[str, Any]:
        return {
            "model": model.state_dict(),
            "optim": thunder.distributed.optimizer_state_dict(model, opt),
        }

    model, jitted, opt = fresh(0)
    losses = _train_2d(jitted, opt, data[:2], dp_rank, dp_group)
    dcp.save(checkpoint(model, opt), checkpoint_id=folder)
    losses += _train_2d(jitted, opt, data[2:], dp_rank, dp_group)

    model2, jitted2, opt2 = fresh(5)
    state = checkpoint(model2, opt2)
    dcp.load(state, checkpoint_id=folder)
    jitted2.load_state_dict(state["model"])
    thunder.distributed.load_optimizer_state_dict(model2, opt2, state["optim"])
    resumed_losses = _train_2d(jitted2, opt2, data[2:], dp_rank, dp_group)
    return {
        "losses": losses,
        "resumed_losses": resumed_losses,
        "uninterrupted": get_model_state_dict(model, options=full),
        "resumed": get_model_state_dict(model2, options=full),
    }
