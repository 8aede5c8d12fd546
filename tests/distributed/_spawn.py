"""Running a worker of ``_workers`` on gloo ranks, each in a process of its own."""

from __future__ import annotations

import io
import queue as queue_module
import socket
from multiprocessing import reduction
from typing import Any

import _workers
import pytest
import torch
import torch.multiprocessing as mp

WORLD_SIZE = 2

# Each rank is a fresh process forked from a server that imported these once (per test
# process), before running anything: a spawned rank spent most of a test importing them anew.
# (The server ignores a module that is not installed.)
_PRELOAD = [
    "thunder",
    "thunder.distributed",
    "thunder.models",
    "torch._dynamo",  # imported by the first optimizer made
    "torch.distributed.checkpoint",
    "torch.distributed.checkpoint.state_dict",
    "torch.distributed.tensor",
    "torch.nn.parallel",
    "torch._inductor.compile_fx",  # the recipes' fusions compile with it
    "transformers.models.llama.modeling_llama",
]


class _Streams:
    """Stands, when a rank is started, for the test process's stdout and stderr as they are
    then: the rank writes there (under pytest's capture, the running test's), not where the
    server's streams were when it started."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, ([reduction.DupFd(1), reduction.DupFd(2)],))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(
    target: Any, *, timeout: float = 60.0, world_size: int = WORLD_SIZE
) -> dict[int, tuple[str, Any]]:
    """Runs ``target(rank, world_size)`` on every rank; returns each rank's (status, result)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)  # read when the server starts, on the first spawn
    q = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(target=_workers.run, args=(r, world_size, port, target, q, timeout, _Streams()))
        for r in range(world_size)
    ]
    for p in procs:
        p.start()
    results: dict[int, tuple[str, Any]] = {}
    try:
        while len(results) < world_size:
            rank, status, value = q.get(timeout=timeout + 120)
            results[rank] = (status, value)
    except queue_module.Empty:
        pytest.fail(f"ranks {sorted(set(range(world_size)) - set(results))} never reported")
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return results


def ok(results: dict[int, tuple[str, Any]]) -> list[Any]:
    """Each rank's result, failing the test with a rank's traceback if one failed."""
    for rank, (status, value) in sorted(results.items()):
        assert status == "ok", f"rank {rank} failed:\n{value}"
    return [torch.load(io.BytesIO(results[r][1]), weights_only=False) for r in sorted(results)]
