"""The main job: ``thunder.jit`` a small GPT, check it against eager PyTorch, show what it made.

Run with ``./dev demo`` (``python -m thunder.demo [--layers N] [--calls N]``). It builds the
nanoGPT-style model of ``thunder.models.gpt`` with random weights, jits it, compares the outputs
with eager PyTorch on fresh random inputs, prints an excerpt of the execution trace and of the
prologue (the guards of the cache entry), and a table of first-call and per-call times. Then a
training step (forward, cross-entropy loss, backward) through the same jitted model: thunder's
autodiff splits the program into a forward and a backward trace; the loss and every parameter's
gradient are checked against eager, and an excerpt of the backward trace is printed.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch
from torch.nn import functional as F

import thunder
from thunder.models import GPT, GPTConfig


def _excerpt(text: str, head: int, tail: int) -> str:
    lines = [
        line if len(line) <= 150 else line[:146] + " ..."
        for line in text.splitlines()
        if not line.lstrip().startswith(("# ", "del ", '"""'))
    ]
    if len(lines) <= head + tail:
        return "\n".join(lines)
    skipped = len(lines) - head - tail
    return "\n".join([*lines[:head], f"  ... ({skipped} more lines) ...", *lines[-tail:]])


def _per_call(fns: list[Any], idx: torch.Tensor, calls: int, rounds: int = 7) -> list[float]:
    """Best per-call time of each function, measured in alternation (robust to a busy machine)."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            start = time.perf_counter()
            for _ in range(calls):
                fn(idx)
            best[k] = min(best[k], (time.perf_counter() - start) / calls)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--calls", type=int, default=10)
    options = parser.parse_args()

    torch.manual_seed(0)
    config = GPTConfig(n_layer=options.layers, n_head=4, n_embd=128, vocab_size=512, block_size=64)
    model = GPT(config).eval()
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"nanoGPT: {config.n_layer} layers, {config.n_head} heads, {config.n_embd} dims, "
        f"vocab {config.vocab_size}, seq {config.block_size}; {n_params / 1e6:.2f}M parameters"
    )

    def batch() -> torch.Tensor:
        return torch.randint(0, config.vocab_size, (2, config.block_size))

    jmodel = thunder.jit(model)
    with torch.no_grad():
        idx = batch()
        start = time.perf_counter()
        eager_out = model(idx)
        eager_first = time.perf_counter() - start
        start = time.perf_counter()
        out = jmodel(idx)
        jit_first = time.perf_counter() - start
        torch.testing.assert_close(out, eager_out)
        for _ in range(3):  # fresh random inputs reuse the compiled program
            idx = batch()
            torch.testing.assert_close(jmodel(idx), model(idx))
        idx = batch()
        eager_call, jit_call = _per_call([model, jmodel], idx, options.calls)

    stats = thunder.compile_stats(jmodel)
    execution = thunder.last_traces(jmodel)[-1]
    prologue = thunder.last_prologue_traces(jmodel)[-1]
    print(
        f"outputs {tuple(out.shape)} match eager PyTorch on 4 random batches "
        f"(cache: {stats.cache_misses} miss, {stats.cache_hits} hits)\n"
    )
    print("# The execution trace (excerpt; what runs on every call):")
    print(_excerpt(execution.python(), head=14, tail=12))
    print(
        f"\n# The prologue (excerpt; {len(prologue.bound_symbols)} unpacks and checks "
        "guard the cache entry):"
    )
    print(_excerpt(prologue.python(), head=10, tail=4))
    timings = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in stats.last_timings.items())
    print(f"\ncompilation: {timings}")
    rows = [
        (
            "first call",
            f"{eager_first * 1e3:9.1f} ms",
            f"{jit_first * 1e3:9.1f} ms",
            f"{jit_first / eager_first:6.2f}x",
        ),
        (
            "per call",
            f"{eager_call * 1e3:9.2f} ms",
            f"{jit_call * 1e3:9.2f} ms",
            f"{jit_call / eager_call:6.2f}x",
        ),
    ]
    rows.extend(_training(model, jmodel, config, options.calls))
    print(f"\n{'':<12}{'eager':>13}{'thunder.jit':>14}{'ratio':>9}")
    for name, e, j, r in rows:
        print(f"{name:<12}{e:>13}{j:>14}{r:>9}")


def _loss(model: Any, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model(idx)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def _train_step(model: Any, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    for p in model.parameters():
        p.grad = None
    loss = _loss(model, idx, targets)
    loss.backward()  # type: ignore[no-untyped-call]
    return loss


def _training(
    model: torch.nn.Module, jmodel: Any, config: GPTConfig, calls: int
) -> list[tuple[str, str, str, str]]:
    """A training step through ``jmodel`` checked against eager; prints the backward trace and
    returns the timing rows."""
    params = list(model.parameters())

    def batch() -> tuple[torch.Tensor, torch.Tensor]:
        shape = (2, config.block_size)
        return torch.randint(0, config.vocab_size, shape), torch.randint(
            0, config.vocab_size, shape
        )

    model.train()
    first: list[float] = []
    for _ in range(3):  # fresh batches; the first compiles the forward/backward pair
        idx, targets = batch()
        start = time.perf_counter()
        expected = _train_step(model, idx, targets)
        eager_time = time.perf_counter() - start
        grads = [p.grad for p in params]
        start = time.perf_counter()
        loss = _train_step(jmodel, idx, targets)
        if not first:
            first = [eager_time, time.perf_counter() - start]
        torch.testing.assert_close(loss, expected)
        for p, g in zip(params, grads):
            torch.testing.assert_close(p.grad, g, atol=1e-5, rtol=1e-4)
    eager_first, jit_first = first
    forward = thunder.last_traces(jmodel)[-1]
    backward = thunder.last_backward_traces(jmodel)[-1]
    n_cotangents = sum(1 for a in backward.args if a.name.startswith("ct"))
    print(
        f"\n# Training step: loss {loss.item():.4f} and the .grad of all {len(params)} parameters "
        "match eager PyTorch on 3 random batches."
    )
    print(
        f"# The backward trace (excerpt; the forward runs {len(forward.bound_symbols)} lines and "
        f"saves {len(backward.args) - n_cotangents} values for it):"
    )
    print(_excerpt(backward.python(), head=10, tail=6))
    idx, targets = batch()
    best = [float("inf")] * 2
    for _ in range(5):  # alternating, best of rounds
        for k, m in enumerate((model, jmodel)):
            start = time.perf_counter()
            for _ in range(calls):
                _train_step(m, idx, targets)
            best[k] = min(best[k], (time.perf_counter() - start) / calls)
    model.eval()
    return [
        (
            "train 1st",
            f"{eager_first * 1e3:9.1f} ms",
            f"{jit_first * 1e3:9.1f} ms",
            f"{jit_first / eager_first:6.2f}x",
        ),
        (
            "train step",
            f"{best[0] * 1e3:9.2f} ms",
            f"{best[1] * 1e3:9.2f} ms",
            f"{best[1] / best[0]:6.2f}x",
        ),
    ]


if __name__ == "__main__":
    main()
