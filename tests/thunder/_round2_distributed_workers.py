"""Workers of test_distributed_round2_fixes (each runs on a spawned gloo rank, through
``tests/distributed/_workers.run``): each returns a dict of checks, a message per failure."""

from __future__ import annotations

import warnings
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import thunder
import thunder.distributed


def _mismatch(name: str, expected: Any, actual: Any) -> str:
    try:
        torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    except AssertionError as e:
        return f"{name}: {str(e)[:300]}"
    return ""


class NoGradFirstRead(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            s = self.l.weight.abs().mean()
        return self.l(x) / s


def fsdp_no_grad_first_read(rank: int, world_size: int) -> list[str]:
    failures = []
    for strategy, cache in (("ZERO3", None), ("ZERO2", None), ("ZERO3", "symbolic values")):
        torch.manual_seed(0)
        ref = DDP(NoGradFirstRead())
        torch.manual_seed(0)
        model = thunder.distributed.fsdp(NoGradFirstRead(), sharding_strategy=strategy)
        jm = thunder.jit(model) if cache is None else thunder.jit(model, cache=cache)
        for call in range(3):
            torch.manual_seed(100 + call + 10 * rank)
            x = torch.randn(3 + call, 4)
            ref(x).pow(2).sum().backward()
            jm(x).pow(2).sum().backward()
            for name, p in model.named_parameters():
                whole = dict(ref.module.named_parameters())[name].grad
                shard = whole.chunk(world_size)[rank]
                failures.append(_mismatch(f"{strategy}/{cache}/{name}/call{call}", shard, p.grad))
            ref.zero_grad()
            model.zero_grad()
    return [f for f in failures if f]


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.l(x) * (dist.get_rank() + 1) / dist.get_world_size()
        if dist.get_rank() == 0:  # a branch on the rank that reads the same parameters
            y = y + 1
        return y


def ddp_rank_queries_compile(rank: int, world_size: int) -> dict[str, Any]:
    torch.manual_seed(0)
    ref = DDP(Scaled())
    torch.manual_seed(0)
    model = thunder.distributed.ddp(Scaled())
    jm = thunder.jit(model)
    failures = []
    for call in range(3):
        torch.manual_seed(call + 10 * rank)
        x = torch.randn(2 + call, 4)
        ref_out, out = ref(x), jm(x)
        failures.append(_mismatch(f"out{call}", ref_out, out))
        ref_out.sum().backward()
        out.sum().backward()
        for name, p in model.named_parameters():
            expected = dict(ref.module.named_parameters())[name].grad
            failures.append(_mismatch(f"{name}.grad call{call}", expected, p.grad))
        ref.zero_grad()
        model.zero_grad()
    stats = thunder.compile_stats(jm)
    return {"failures": [f for f in failures if f], "eager": stats.eager_fallbacks}


class Printing(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        print(end="")  # thunder cannot hold a print in its program
        return self.l(x)


def _error_of(fn: Any) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return ""


def untraceable_distributed_calls(rank: int, world_size: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    torch.manual_seed(0)
    ref = DDP(Printing())
    torch.manual_seed(0)
    model = thunder.distributed.ddp(Printing())
    jm = thunder.jit(model)
    x = torch.randn(2, 4) + rank
    out["ddp_grad"] = _error_of(lambda: jm(x).sum().backward())
    out["ddp_grad_again"] = _error_of(lambda: jm(x).sum().backward())
    # Without gradient, and inside no_sync, an eager ddp call computes what a compiled one
    # would: it runs.
    with torch.no_grad():
        out["ddp_no_grad"] = _mismatch("ddp no_grad", ref(x), jm(x))
    model.zero_grad()
    with model.no_sync():
        jm(x).sum().backward()
    ref(x).sum().backward()
    out["ddp_no_sync"] = _mismatch("ddp no_sync", ref.module.l.weight.grad, model.l.weight.grad)
    torch.manual_seed(0)
    sharded = thunder.distributed.fsdp(Printing())
    js = thunder.jit(sharded)
    out["fsdp"] = _error_of(lambda: js(x))
    with torch.no_grad():
        out["fsdp_no_grad"] = _error_of(lambda: js(x))
    return out


class TwoBranches(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)
        self.unused = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, use_a: bool) -> torch.Tensor:
        return self.a(x) if use_a else self.b(x)


def rank_dependent_parameters(rank: int, world_size: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    x = torch.randn(3, 4) + rank
    # ddp: the backward's collectives would pair a's gradients with b's: an error, not a mix
    torch.manual_seed(0)
    model = thunder.distributed.ddp(TwoBranches())
    jm = thunder.jit(model)
    out["ddp"] = _error_of(lambda: jm(x, rank == 0).sum().backward())
    # fsdp: the gathers would pair a's shards with b's
    torch.manual_seed(0)
    sharded = thunder.distributed.fsdp(TwoBranches())
    js = thunder.jit(sharded)
    out["fsdp"] = _error_of(lambda: js(x, rank == 0))
    # The same branch on every rank is no mismatch (several calls, both caches)
    failures = []
    for cache in (None, "symbolic values"):
        torch.manual_seed(0)
        ref = TwoBranches()
        torch.manual_seed(0)
        sharded = thunder.distributed.fsdp(TwoBranches())
        js = thunder.jit(sharded) if cache is None else thunder.jit(sharded, cache=cache)
        for call in range(3):
            torch.manual_seed(call)
            y = torch.randn(2 + call, 4)
            failures.append(
                _mismatch(f"fsdp {cache} call{call}", ref(y, call % 2 == 0), js(y, call % 2 == 0))
            )
    out["same_branch"] = [f for f in failures if f]
    # Leaving no_sync: every rank averages every parameter's gradient (a rank that skipped a
    # layer contributes zeros), as torch's DDP with find_unused_parameters
    torch.manual_seed(0)
    ref_ddp = DDP(TwoBranches(), find_unused_parameters=True)
    torch.manual_seed(0)
    model = thunder.distributed.ddp(TwoBranches())
    jm = thunder.jit(model)
    with model.no_sync():
        jm(x, rank == 0).sum().backward()
    ref_ddp(x, rank == 0).sum().backward()
    grads = {}
    for name, p in model.named_parameters():
        expected = dict(ref_ddp.module.named_parameters())[name].grad
        grads[name] = (expected is None, p.grad is None)
        if expected is not None and p.grad is not None:
            grads[name] = _mismatch(name, expected, p.grad)
    out["no_sync"] = grads
    return out


class MixedDtypes(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Parameter(torch.ones(3, dtype=torch.float32))
        self.b = torch.nn.Parameter(torch.ones(3, dtype=torch.float16))
        self.c = torch.nn.Parameter(torch.ones(3, dtype=torch.bfloat16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.a * x).sum() + (self.b * x.half()).sum() + (self.c * x.bfloat16()).sum()


def no_sync_mixed_dtypes(rank: int, world_size: int) -> dict[str, Any]:
    model = thunder.distributed.ddp(MixedDtypes())
    jm = thunder.jit(model)
    reduced: list[str] = []
    original = dist.all_reduce

    def recording(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        reduced.append(str(tensor.dtype))
        return original(tensor, *args, **kwargs)

    x = torch.full((3,), float(rank + 1))
    dist.all_reduce = recording  # type: ignore[assignment]
    try:
        with model.no_sync():
            jm(x).backward()
    finally:
        dist.all_reduce = original
    expected = torch.full((3,), (world_size + 1) / 2)
    failures = [_mismatch(n, expected, p.grad.float()) for n, p in model.named_parameters()]
    return {"failures": [f for f in failures if f], "order": reduced}
