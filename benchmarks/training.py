"""Benchmark: a nanoGPT training step (forward, cross-entropy loss, backward) under thunder.jit
against eager PyTorch.

The model is ``thunder.models.GPT`` (4 layers by default); thunder jits the model (the loss is
eager, the same on both sides) and differentiates it with its own autodiff (forward/backward
traces, rematerialization). Columns:

- time per step (zero_grad, forward, loss, backward): the median of interleaved rounds (a shared
  machine's noise moves single rounds by 10%), its ratio to eager's median (goals: at most 1.0
  with the default executors, at most 0.92 with fusion), and the fastest round;
- bytes saved for backward, measured with ``torch.autograd.graph.saved_tensors_hooks`` on both
  sides, counting each storage once (goal: at most eager's); "activations" leaves out the
  parameters' storages (both sides save the weights they multiply by).

Each configuration runs in a process of its own, the rounds taking turns between them (one
process running at a time): in one process, configurations that free memory in different orders
make the allocator's heap shrink and grow, and the step measured after pays page faults it does
not pay alone (hundreds per step).

Configurations: thunder with the torch executors only (``torch_ops``, ``torch``) and, when the
``torchcompile`` executor is available, with torch.compile fusion regions first;
``thunder.compile`` (its regions compiled in the background: the note says when its first step
returned and when its regions were compiled, both from the start of that step; then each region
times its compiled program against its torch calls over its next calls and keeps the faster: the
note says after how many more steps, and what each region runs; its row is timed after, so it
measures the steady state, not calls alternating between the two); and torch.compile of the same
model.

Run: ``python -m benchmarks training [--quick] [--rounds N] [--threads N] [--layers N] [--batch N]
[--profile]``.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import pstats
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from _timing import interleaved_in_processes, settle_regions

import thunder
from thunder.models import GPT, GPTConfig


def _loss(model: Any, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model(idx)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def _step(model: Any, params: list[torch.nn.Parameter], batch: tuple[torch.Tensor, ...]) -> Any:
    for p in params:
        p.grad = None
    loss = _loss(model, *batch)
    loss.backward()
    return loss


def saved_bytes(
    model: Any, batch: tuple[torch.Tensor, ...], params: list[torch.nn.Parameter]
) -> tuple[int, int]:
    """Bytes saved for backward by one forward+loss (all, and without the parameters'
    storages), each storage counted once."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = _loss(model, *batch)
    param_ptrs = {p.untyped_storage().data_ptr() for p in params}
    total = sum(storages.values())
    activations = sum(n for ptr, n in storages.items() if ptr not in param_ptrs)
    loss.backward()  # release the graph
    for p in params:
        p.grad = None
    return total, activations


def _setup(name: str, options: argparse.Namespace) -> tuple[Callable[[], Any], dict[str, Any]]:
    """One configuration's step (in its own process, see ``interleaved_in_processes``) and its
    report: the note, the bytes saved for backward, torch's thread count."""
    if options.threads:
        torch.set_num_threads(options.threads)
    model, params, batch = _model_and_batch(options)

    def step_of(m: Any) -> Callable[[], Any]:
        return lambda: _step(m, params, batch)

    note = ""
    if name == "eager":
        run: Any = model
    elif name == "thunder.compile":
        from thunder_executors.background_compile import wait_for_background_compiles

        # Regions compile in the background; the first steps run their torch calls.
        run = thunder.compile(model)
        start = time.perf_counter()
        _step(run, params, batch)
        first = time.perf_counter() - start
        wait_for_background_compiles()
        fused = time.perf_counter() - start
        steps, runs = settle_regions(step_of(run), run)
        counts = collections.Counter(runs.split(", "))
        runs = ", ".join(f"{kind} x{n}" for kind, n in counts.items())  # (one per region)
        note = (
            f"first step {first:.2f} s, fused after {fused:.2f} s, regions chose after "
            f"{steps} more steps: {runs}"
        )
    else:
        if name == "torch.compile":
            run = torch.compile(model)
        else:
            run = thunder.jit(model, executors=_EXECUTORS[name])
        expected = _step(model, params, batch)
        grads = [p.grad for p in params]
        start = time.perf_counter()
        loss = _step(run, params, batch)
        note = f"first step {time.perf_counter() - start:.2f} s"
        torch.testing.assert_close(loss, expected)
        for p, g in zip(params, grads):
            torch.testing.assert_close(p.grad, g, atol=1e-4, rtol=1e-3)
    _step(run, params, batch)  # warm (torch.compile regions compile lazily)
    report = {
        "note": note,
        "saved": saved_bytes(run, batch, params),
        "threads": torch.get_num_threads(),
    }
    return step_of(run), report


_EXECUTORS = {
    "thunder (torch)": ("torch_ops", "torch"),
    "thunder (torchcompile)": ("torchcompile", "torch_ops", "torch"),
}


def _model_and_batch(
    options: argparse.Namespace,
) -> tuple[GPT, list[torch.nn.Parameter], tuple[torch.Tensor, torch.Tensor]]:
    torch.manual_seed(0)
    config = GPTConfig(n_layer=options.layers)
    model = GPT(config)
    shape = (options.batch, config.block_size)
    batch = (
        torch.randint(0, config.vocab_size, shape),
        torch.randint(0, config.vocab_size, shape),
    )
    return model, list(model.parameters()), batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=21, help="interleaved rounds of 5 steps")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's)")
    parser.add_argument("--profile", action="store_true", help="cProfile thunder's steps")
    options = parser.parse_args()
    from thunder_executors import get_available_executors

    available = {e.name for e in get_available_executors()}
    names = ["eager", "thunder (torch)"]
    if "torchcompile" in available:
        names.append("thunder (torchcompile)")
    if "torchcompile_background" in available:
        names.append("thunder.compile")
    names.append("torch.compile")

    n, rounds = (3, 3) if options.quick else (5, options.rounds)
    results = interleaved_in_processes(_setup, names, options, n, rounds)
    times = [statistics.median(t) for _, t in results]
    saved = [report["saved"] for report, _ in results]

    config = GPTConfig(n_layer=options.layers)
    print(
        f"nanoGPT training step: {config.n_layer} layers, {config.n_embd} dims, vocab "
        f"{config.vocab_size}, batch {options.batch}x{config.block_size}; torch "
        f"{torch.__version__}, {results[0][0]['threads']} threads, Python "
        f"{sys.version.split()[0]}"
    )
    header = (
        "", "ms/step", "time ratio", "fastest", "saved MB", "saved ratio", "activations MB", "notes"
    )  # fmt: skip
    rows = []
    for name, (report, each), t, (total, acts) in zip(names, results, times, saved):
        rows.append(
            (
                name,
                f"{t * 1e3:.2f}",
                f"{t / times[0]:.3f}",
                f"{min(each) * 1e3:.2f}",
                f"{total / 2**20:.2f}",
                f"{total / saved[0][0]:.2f}",
                f"{acts / 2**20:.2f}",
                report["note"],
            )
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    print(
        f"medians of {rounds} interleaved rounds of {n} steps, each configuration in its own "
        "process; goals: time ratio <= 1.0 with the default executors, <= 0.92 with fusion; "
        "saved ratio <= 1.0"
    )

    if options.profile:
        for name in names[1:]:
            step, _ = _setup(name, options)
            print(f"\n== cProfile of 5 steps: {name} ==")
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(5):
                step()
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
