"""Benchmark: distributed training on CPU ranks (gloo), the nanoGPT of ``thunder.models``.

Rows: thunder DDP, ZeRO-2 and ZeRO-3 (``thunder.distributed``), and PyTorch's own DDP and FSDP2
(``fully_shard``) on the same process group of 2 ranks. Columns: per-rank bytes at rest after a
step of parameters, gradients and Adam's state (gradients counted before ``zero_grad``), the
ratio to DDP's, and the step time (forward, backward, optimizer; median over the steps, the
slower rank's), with its ratio to PyTorch's DDP.

A second table: tensor parallelism and sharding on 4 ranks, a 2 x 2 ``DeviceMesh`` (``("dp",
"tp")``): thunder's ``tensor_parallel`` (each block's MLP: ``c_fc`` colwise, ``c_proj``
rowwise) on the mesh's TP groups then ``fsdp`` on its DP groups, against PyTorch's
``parallelize_module`` (``ColwiseParallel`` / ``RowwiseParallel`` on the same layers) then
``fully_shard`` (each block, then the model) on the same mesh, each row in processes of its
own (``--tp-layers``, ``--tp-embd``). Columns: bytes at rest as above; the peak resident
growth per rank over the training steps (the process's peak resident size during the steps,
above its resident size before the model was built: the sharded model, gradients, Adam's state,
activations, and whatever else training keeps, thunder's compiled programs included; the whole
model each rank builds before splitting it, the same in both rows, is not counted: the peak is
reset after sharding), and the same over the timed steps only ("steady": the first two steps
compile, thunder's traces and programs, and create Adam's state); the step time; the last
step's loss (the same model, weights and batches: equal up to float noise). Thunder's ``fsdp``
gathers in buckets of 25 MB (PyTorch's rows: one block at a time), so on the default small
model one bucket holds a rank's whole slice of the parameters, gathered with its gradients at
the peak (``bucket_size_in_mb=0.5`` brings it near PyTorch's).

A third table, each row in processes of its own: the peak memory per rank (the growth of the
process's maximum resident size) of building a larger nanoGPT (``--init-layers``,
``--init-embd``) and sharding it: built whole then ``fsdp``, built on the meta device and
materialized shard by shard by ``fsdp``, and PyTorch's ``fully_shard`` of a meta model then
``to_empty`` and its init; and the time to save and load the sharded model and Adam's state
through ``torch.distributed.checkpoint``. Before the baseline, every row builds and shards a
1-layer model the same way (then frees it): what the first build costs whatever the model's
size is not the model's. That matters: the first operation on a meta tensor imports
``torch._dynamo``, numpy's random module and some 280 other modules (torch's Python meta
kernels), about 105 MB resident, which without the warm-up the two meta rows counted as their
model's peak (0.70x and 0.68x of the whole row instead of about half).

Run: ``python -m benchmarks distributed [--tables train,tp,init] [--steps N] [--layers N]
[--embd N] [--batch N] [--tp-layers N] [--tp-embd N] [--init-layers N] [--init-embd N]``.
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import socket
import statistics
import time
import traceback
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD_SIZE = 2
MODES = ("thunder DDP", "thunder ZeRO-2", "thunder ZeRO-3", "torch DDP", "torch FSDP2")


def _tensor_bytes(t: Any) -> int:
    local = t.to_local() if hasattr(t, "to_local") else t
    return int(local.numel() * local.element_size())


def _build(mode: str, config: Any) -> tuple[Any, torch.nn.Module]:
    import thunder
    import thunder.distributed
    from thunder.models import GPT

    torch.manual_seed(0)
    model = GPT(config)
    if mode == "thunder DDP":
        return thunder.jit(thunder.distributed.ddp(model)), model
    if mode.startswith("thunder ZeRO"):
        stage = "ZERO2" if mode.endswith("2") else "ZERO3"
        return thunder.jit(thunder.distributed.fsdp(model, sharding_strategy=stage)), model
    if mode == "torch DDP":
        ddp = torch.nn.parallel.DistributedDataParallel(model)
        return ddp, model
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (WORLD_SIZE,))
    for block in model.transformer.h:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model, model


def _measure(rank: int, mode: str, args: Any) -> dict[str, Any]:
    from thunder.models import GPTConfig

    config = GPTConfig(n_layer=args.layers, n_embd=args.embd, n_head=4, block_size=64)
    run, model = _build(mode, config)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(rank)
    times, _ = _train(run, opt, config, args.batch, args.steps, g)
    return {"bytes": _state_bytes(model, opt), "step": statistics.median(times)}


def _train(
    run: Any,
    opt: Any,
    config: Any,
    batch: int,
    steps: int,
    g: torch.Generator,
    after_compiling: Any = None,
) -> tuple[list[float], torch.Tensor]:
    """``steps`` timed training steps after 2 that compile (``after_compiling()`` runs between),
    the gradients of the last kept: the step times and the last loss."""
    times, loss = [], torch.zeros(())
    for step in range(steps + 2):
        if step == 2 and after_compiling is not None:
            after_compiling()
        x = torch.randint(0, config.vocab_size, (batch, config.block_size), generator=g)
        y = torch.randint(0, config.vocab_size, (batch, config.block_size), generator=g)
        dist.barrier()
        start = time.perf_counter()
        logits = run(x)
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), y.reshape(-1)
        )
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        elapsed = time.perf_counter() - start
        if step >= 2:  # the first steps compile
            times.append(elapsed)
        if step < steps + 1:
            opt.zero_grad()
    return times, loss


def _state_bytes(model: torch.nn.Module, opt: Any) -> int:
    """Per-rank bytes at rest: parameters, gradients and the optimizer's tensors."""
    params = sum(_tensor_bytes(p) for p in model.parameters())
    grads = sum(_tensor_bytes(p.grad) for p in model.parameters() if p.grad is not None)
    state = sum(
        _tensor_bytes(v)
        for s in opt.state.values()
        for v in s.values()
        if isinstance(v, torch.Tensor) and v.ndim > 0
    )
    return params + grads + state


def _worker(rank: int, port: int, args: Any, queue: Any) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", rank=rank, world_size=WORLD_SIZE, timeout=datetime.timedelta(seconds=300)
    )
    results: dict[str, Any] = {}
    for mode in MODES:
        try:
            results[mode] = _measure(rank, mode, args)
        except Exception as e:  # a row that cannot run here says why
            results[mode] = {"error": f"{type(e).__name__}: {e}"}
            if os.environ.get("THUNDER_BENCH_TRACEBACK"):
                traceback.print_exc()
        dist.barrier()
    buffer = io.BytesIO()
    torch.save(results, buffer)
    queue.put((rank, buffer.getvalue()))
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--embd", type=int, default=128)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--tp-layers", type=int, default=4)
    parser.add_argument("--tp-embd", type=int, default=256)
    parser.add_argument("--init-layers", type=int, default=12)
    parser.add_argument("--init-embd", type=int, default=1024)
    parser.add_argument(
        "--tables", default="train,tp,init", help="which tables, of train, tp and init"
    )
    parser.add_argument("--no-init", action="store_true", help="skip the init table")
    args = parser.parse_args()
    tables = set(args.tables.split(","))
    if tables - {"train", "tp", "init"}:
        parser.error(f"unknown tables {sorted(tables - {'train', 'tp', 'init'})}")
    if args.no_init:
        tables.discard("init")
    if "train" in tables:
        train_table(args)
    if "tp" in tables:
        tp_table(args)
    if "init" in tables:
        init_table(args)


def _spawn_rows(ctx: Any, target: Any, world: int, extra: tuple[Any, ...]) -> list[Any]:
    """``target(rank, port, *extra, queue)`` on ``world`` spawned ranks: what each put in the
    queue (its second item)."""
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=target, args=(r, port, *extra, queue)) for r in range(world)]
    for p in procs:
        p.start()
    rows = [queue.get(timeout=1800)[1] for _ in procs]
    for p in procs:
        p.join()
    return rows


def train_table(args: Any) -> None:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, port, args, queue)) for r in range(WORLD_SIZE)]
    for p in procs:
        p.start()
    per_rank = {}
    for _ in procs:
        rank, data = queue.get(timeout=1800)
        per_rank[rank] = torch.load(io.BytesIO(data))
    for p in procs:
        p.join()
    print(
        f"nanoGPT ({args.layers} layers, n_embd {args.embd}), Adam, {WORLD_SIZE} ranks (gloo, "
        f"1 thread each), batch {args.batch} per rank, median of {args.steps} steps"
    )

    def slowest(mode: str) -> dict[str, Any]:
        rows = [per_rank[r][mode] for r in range(WORLD_SIZE)]
        if any("error" in row for row in rows):
            return {}
        return {"bytes": max(r["bytes"] for r in rows), "step": max(r["step"] for r in rows)}

    base, torch_ddp = slowest("thunder DDP"), slowest("torch DDP")
    print(f"{'':16}{'bytes/rank':>12}{'vs DDP':>8}{'step ms':>9}{'vs torch DDP':>14}")
    for mode in MODES:
        rows = [per_rank[r][mode] for r in range(WORLD_SIZE)]
        if any("error" in row for row in rows):
            print(f"{mode:16}  failed: {next(row['error'] for row in rows if 'error' in row)}")
            continue
        nbytes, step = slowest(mode)["bytes"], slowest(mode)["step"]
        ratio = nbytes / base["bytes"] if "bytes" in base else float("nan")
        vs_torch = step / torch_ddp["step"] if "step" in torch_ddp else float("nan")
        print(f"{mode:16}{nbytes:>12,}{ratio:>7.2f}x{step * 1e3:>9.1f}{vs_torch:>13.2f}x")


# -- tensor parallelism and fsdp on a 2 x 2 mesh ---------------------------------------------

TP_WORLD_SIZE = 4
TP_MODES = ("thunder tensor_parallel + fsdp", "torch parallelize_module + fully_shard")


def _resident() -> tuple[int, int]:
    """This process's resident size and its peak so far (VmRSS, VmHWM), in bytes."""
    import re

    with open("/proc/self/status") as f:
        status = f.read()
    rss, hwm = (re.search(rf"{k}:\s+(\d+) kB", status) for k in ("VmRSS", "VmHWM"))
    assert rss is not None and hwm is not None
    return int(rss.group(1)) * 1024, int(hwm.group(1)) * 1024


def _reset_peak() -> bool:
    """Resets the process's peak resident size to its current one (Linux); False if not."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _tp_build(mode: str, config: Any, mesh: Any) -> tuple[Any, torch.nn.Module]:
    import thunder
    import thunder.distributed
    from thunder.models import GPT

    torch.manual_seed(0)
    model = GPT(config)
    layers = [f"transformer.h.{i}.mlp" for i in range(config.n_layer)]
    if mode.startswith("thunder"):
        plan = {**{f"{m}.c_fc": "colwise" for m in layers}}
        plan |= {f"{m}.c_proj": "rowwise" for m in layers}
        thunder.distributed.tensor_parallel(model, plan, group=mesh.get_group("tp"))
        thunder.distributed.fsdp(model, group=mesh.get_group("dp"))
        return thunder.jit(model), model
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    torch_plan: dict[str, Any] = {f"{m}.c_fc": ColwiseParallel() for m in layers}
    torch_plan |= {f"{m}.c_proj": RowwiseParallel() for m in layers}
    parallelize_module(model, mesh["tp"], torch_plan)
    for block in model.transformer.h:
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    return model, model


def _tp_steps(
    run: Any, model: torch.nn.Module, config: Any, args: Any, dp_rank: int, steps: int
) -> dict[str, Any]:
    """``steps`` timed training steps after 2 that compile; the peak resident sizes of the
    first two and of the timed ones (VmHWM: reset after sharding and after the first two)."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(dp_rank)  # the same batches on the ranks of a TP group
    first_peak = 0

    def after_compiling() -> None:
        nonlocal first_peak
        first_peak = _resident()[1]
        _reset_peak()

    times, loss = _train(run, opt, config, args.batch, steps, g, after_compiling)
    last = loss.detach().clone()
    dist.all_reduce(last)
    return {
        "first_peak": first_peak,
        "steady_peak": _resident()[1],
        "bytes": _state_bytes(model, opt),
        "step": statistics.median(times) if times else float("nan"),
        "loss": last.item() / TP_WORLD_SIZE,
    }


def _tp_measure(rank: int, mode: str, args: Any) -> dict[str, Any]:
    import gc

    import torch.distributed.fsdp
    import torch.distributed.tensor.parallel  # noqa: F401
    from torch.distributed.device_mesh import init_device_mesh

    import thunder.distributed  # noqa: F401  (both rows import the same before the baseline)
    from thunder.models import GPTConfig

    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    dp_rank = mesh.get_local_rank("dp")
    # A 1-layer model through the same path first: first-call set-up is not the model's.
    tiny = GPTConfig(n_layer=1, n_embd=64, n_head=4, block_size=16)
    _tp_steps(*_tp_build(mode, tiny, mesh), tiny, args, dp_rank, 0)
    gc.collect()
    config = GPTConfig(n_layer=args.tp_layers, n_embd=args.tp_embd, n_head=4, block_size=64)
    before, _ = _resident()
    run, model = _tp_build(mode, config, mesh)
    gc.collect()
    reset = _reset_peak()
    result = _tp_steps(run, model, config, args, dp_rank, args.steps)
    nan = float("nan")
    result["peak"] = max(result["first_peak"], result["steady_peak"]) - before if reset else nan
    result["steady"] = result["steady_peak"] - before if reset else nan
    return result


def _tp_worker(rank: int, port: int, args: Any, mode: str, queue: Any) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", rank=rank, world_size=TP_WORLD_SIZE, timeout=datetime.timedelta(seconds=300)
    )
    try:
        result = _tp_measure(rank, mode, args)
    except Exception as e:  # a row that cannot run here says why
        result = {"error": f"{type(e).__name__}: {e}"}
        if os.environ.get("THUNDER_BENCH_TRACEBACK"):
            traceback.print_exc()
    queue.put((rank, result))
    dist.destroy_process_group()


def tp_table(args: Any) -> None:
    ctx = mp.get_context("spawn")
    # Large blocks mapped and unmapped at once: the resident peak follows the tensors alive.
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(1 << 20))
    print(
        f"\nnanoGPT ({args.tp_layers} layers, n_embd {args.tp_embd}), Adam, {TP_WORLD_SIZE} "
        "ranks as a 2 x 2 mesh (tensor parallel MLPs x sharded data parallel), batch "
        f"{args.batch} per data-parallel rank, median of {args.steps} steps (the slower rank's)"
    )
    print(
        f"{'':40}{'bytes/rank':>12}{'peak MB/rank':>13}{'steady MB':>10}{'step ms':>9}"
        f"{'last loss':>11}"
    )
    for mode in TP_MODES:
        rows = _spawn_rows(ctx, _tp_worker, TP_WORLD_SIZE, (args, mode))
        if any("error" in r for r in rows):
            print(f"{mode:40}  failed: {next(r['error'] for r in rows if 'error' in r)}")
            continue
        nbytes, peak = max(r["bytes"] for r in rows), max(r["peak"] for r in rows)
        steady, step = max(r["steady"] for r in rows), max(r["step"] for r in rows)
        print(
            f"{mode:40}{nbytes:>12,}{peak / 2**20:>13.1f}{steady / 2**20:>10.1f}"
            f"{step * 1e3:>9.1f}{rows[0]['loss']:>11.5f}"
        )


INIT_MODES = ("thunder whole, then fsdp", "thunder meta, fsdp", "torch meta, fully_shard")


def _init_peak(rank: int, mode: str, args: Any, folder: str) -> dict[str, Any]:
    """Peak resident growth of building and sharding the model, and DCP save/load times."""
    import gc
    import resource

    import torch.distributed.checkpoint as dcp

    import thunder
    import thunder.distributed
    from thunder.models import GPTConfig

    config = GPTConfig(n_layer=args.init_layers, n_embd=args.init_embd, n_head=4, block_size=64)
    # Every row imports the same modules before the baseline: only the model's memory counts.
    import torch.distributed.fsdp
    import torch.distributed.tensor
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh("cpu", (WORLD_SIZE,)) if mode.startswith("torch") else None
    # And builds a 1-layer model the same way first: lazily imported modules (the first meta
    # tensor operation imports torch's Python meta kernels, torch._dynamo with them: ~105 MB)
    # and first-call set-up cost the same whatever the model's size; they are not its peak.
    _init_build(mode, GPTConfig(n_layer=1, n_embd=64, n_head=4, block_size=16), mesh)
    gc.collect()
    # The peak above the resident size now (where the peak cannot be reset: above the peak so
    # far, which may be higher than the resident size).
    reset = _reset_peak()
    before = _resident()[0] if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    torch.manual_seed(0)
    model = _init_build(mode, config, mesh)
    after = _resident()[1] if reset else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    peak = after - before
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if mode.startswith("thunder"):
        state = {
            "model": model.state_dict(),
            "optim": thunder.distributed.optimizer_state_dict(model, opt),
        }
    else:
        from torch.distributed.checkpoint.state_dict import get_state_dict

        model_state, optim_state = get_state_dict(model, opt)
        state = {"model": model_state, "optim": optim_state}
    dist.barrier()
    start = time.perf_counter()
    dcp.save(state, checkpoint_id=f"{folder}/{INIT_MODES.index(mode)}")
    saved = time.perf_counter() - start
    dist.barrier()
    start = time.perf_counter()
    dcp.load(state, checkpoint_id=f"{folder}/{INIT_MODES.index(mode)}")
    if mode.startswith("thunder"):
        model.load_state_dict(state["model"])
        thunder.distributed.load_optimizer_state_dict(model, opt, state["optim"])
    else:
        from torch.distributed.checkpoint.state_dict import set_state_dict

        set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    loaded = time.perf_counter() - start
    return {"peak": peak, "save": saved, "load": loaded}


def _init_build(mode: str, config: Any, mesh: Any) -> torch.nn.Module:
    """The model of ``config`` built and sharded as ``mode`` says (``mesh``: torch's rows)."""
    import thunder.distributed
    from thunder.models import GPT

    if mode == "thunder whole, then fsdp":
        return thunder.distributed.fsdp(GPT(config))
    with torch.device("meta"):
        model = GPT(config)
    if mode == "thunder meta, fsdp":
        return thunder.distributed.fsdp(model, param_init_fn=_gpt_init)
    from torch.distributed.fsdp import fully_shard

    for block in model.transformer.h:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    model.to_empty(device="cpu")
    for module in model.modules():
        _gpt_init(module)
    return model


def _gpt_init(module: torch.nn.Module) -> None:
    from thunder.models import GPT

    if isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
        GPT._init_weights(None, module)  # type: ignore[arg-type]
    elif hasattr(module, "reset_parameters"):
        module.reset_parameters()


def _init_worker(rank: int, port: int, args: Any, mode: str, folder: str, queue: Any) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", rank=rank, world_size=WORLD_SIZE, timeout=datetime.timedelta(seconds=300)
    )
    try:
        result = _init_peak(rank, mode, args, folder)
    except Exception as e:  # a row that cannot run here says why
        result = {"error": f"{type(e).__name__}: {e}"}
    queue.put((rank, result))
    dist.destroy_process_group()


def init_table(args: Any) -> None:
    import tempfile

    ctx = mp.get_context("spawn")
    folder = tempfile.mkdtemp()
    # Large blocks mapped and unmapped at once (glibc keeps freed heap memory, and raises its
    # threshold after frees): the resident peak then follows the tensors alive, in every row.
    os.environ.setdefault("MALLOC_MMAP_THRESHOLD_", str(1 << 20))
    print(
        f"\nnanoGPT ({args.init_layers} layers, n_embd {args.init_embd}) built and sharded on "
        f"{WORLD_SIZE} ranks: peak resident growth per rank (the larger rank's), DCP save/load"
    )
    print(f"{'':26}{'peak MB/rank':>13}{'vs whole':>9}{'save s':>8}{'load s':>8}")
    base = None
    for mode in INIT_MODES:
        rows = _spawn_rows(ctx, _init_worker, WORLD_SIZE, (args, mode, folder))
        if any("error" in r for r in rows):
            print(f"{mode:26}  failed: {next(r['error'] for r in rows if 'error' in r)}")
            continue
        peak = max(r["peak"] for r in rows)
        base = base or peak
        save, load = max(r["save"] for r in rows), max(r["load"] for r in rows)
        print(f"{mode:26}{peak / 2**20:>13.1f}{peak / base:>8.2f}x{save:>8.2f}{load:>8.2f}")


if __name__ == "__main__":
    main()
