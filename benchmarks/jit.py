"""Benchmark: thunder.jit against eager PyTorch and torch.compile.

Measures (one run, one table):
- per-call overhead of ``jit(lambda a, b: a + b)`` on tiny tensors (goal: at most 10 us above eager);
- per-call time of 8 tiny ``Linear`` layers whose parameters require grad (autograd records the
  call: thunder's one node against eager's eight);
- per-call overhead per tensor argument with 600 of them (goal: at most 3 us), and an
  optimizer-like ``_foreach_add_`` step over two lists of 300;
- the first call (interpret, trace, transform, compile) of a 4-layer nanoGPT forward with the torch
  executor (goal: at most 1 s), in a fresh process and in a warm one;
- per-call time of that GPT forward once compiled;
- cache lookup: time per call with 64 cached entries against 1 (goal: within 10%).

Run: ``python -m benchmarks.jit [--quick] [--no-torch-compile]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from _timing import median_times  # type: ignore[import-not-found]

import thunder
from thunder.models import GPT, GPTConfig


def _per_call(fn: Callable[[], Any], n: int, repeat: int) -> float:
    """Median over ``repeat`` runs of the mean time of ``n`` calls (seconds)."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - start) / n)
    return statistics.median(runs)


def _interleaved(fns: list[Callable[[], Any]], n: int, repeat: int) -> list[float]:
    """Per-call times of several functions, measured in turn (robust to a varying load)."""
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            start = time.perf_counter()
            for _ in range(n):
                fn()
            samples[k].append((time.perf_counter() - start) / n)
    return [min(s) for s in samples]


def add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a + b


def _two_of_many(ps: list[torch.Tensor], gs: list[torch.Tensor]) -> torch.Tensor:
    return ps[0] + gs[-1]


def _foreach_step(ps: list[torch.Tensor], gs: list[torch.Tensor]) -> None:
    with torch.no_grad():
        torch._foreach_add_(ps, gs, alpha=-0.1)


_COLD_FIRST_CALL = """
import time, torch
start = time.perf_counter()
import thunder
from thunder.models import GPT, GPTConfig
imported = time.perf_counter()
torch.manual_seed(0)
model = GPT(GPTConfig(n_layer=4)).eval()
idx = torch.randint(0, 512, (2, 64))
with torch.no_grad():
    t = time.perf_counter()
    model(idx)  # torch's own first-run costs are not thunder's
    eager_first = time.perf_counter() - t
    jm = thunder.jit(model)
    t = time.perf_counter()
    jm(idx)
print(time.perf_counter() - t, imported - start, eager_first)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--no-torch-compile", action="store_true", help="skip torch.compile")
    options = parser.parse_args()
    n, repeat = (2000, 5) if options.quick else (20000, 9)
    rows: list[tuple[str, str, str, str, str]] = []

    # 1. Per-call overhead on tiny tensors.
    a, b = torch.randn(4), torch.randn(4)
    jadd = thunder.jit(add)
    jadd(a, b)
    fns: list[Callable[[], Any]] = [lambda: add(a, b), lambda: jadd(a, b)]
    compiled_add = None
    if not options.no_torch_compile:
        compiled_add = torch.compile(add)
        compiled_add(a, b)
        fns.append(lambda: compiled_add(a, b))
    times = _interleaved(fns, n, repeat)
    eager, jit = times[0], times[1]
    tc = times[2] if compiled_add is not None else float("nan")
    rows.append(
        (
            "a + b per call (4 floats)",
            f"{eager * 1e6:.2f} us",
            f"{jit * 1e6:.2f} us (+{(jit - eager) * 1e6:.2f} us, {jit / eager:.1f}x)",
            f"{tc * 1e6:.2f} us (+{(tc - eager) * 1e6:.2f} us)" if compiled_add else "-",
            "<= +10 us",
        )
    )

    # 1b. A forward recorded by autograd (parameters require grad): thunder's one autograd node.
    layers = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(8)])
    jlayers = thunder.jit(layers)
    jlayers(a)
    lfns: list[Callable[[], Any]] = [lambda: layers(a), lambda: jlayers(a)]
    compiled_layers = None
    if not options.no_torch_compile:
        compiled_layers = torch.compile(layers)
        compiled_layers(a)
        lfns.append(lambda: compiled_layers(a))
    lt = _interleaved(lfns, max(n // 10, 200), repeat)
    rows.append(
        (
            "8 Linear(4, 4), grad recorded",
            f"{lt[0] * 1e6:.1f} us",
            f"{lt[1] * 1e6:.1f} us ({lt[1] / lt[0]:.2f}x)",
            f"{lt[2] * 1e6:.1f} us ({lt[2] / lt[0]:.2f}x)" if compiled_layers else "-",
            "",
        )
    )

    # 1c. Many tensor arguments: the per-call checks per tensor (two lists of 300 tensors; the
    # program reads two of them), and an optimizer-like in-place step over both lists.
    ps = [torch.randn(4) for _ in range(300)]
    gs = [torch.randn(4) for _ in range(300)]
    jtwo = thunder.jit(_two_of_many)
    jstep = thunder.jit(_foreach_step)
    for _ in range(3):
        jtwo(ps, gs)
        jstep(ps, gs)
    calls = max(n // 200, 20)
    many = median_times(
        [
            lambda: [_two_of_many(ps, gs) for _ in range(calls)],
            lambda: [jtwo(ps, gs) for _ in range(calls)],
            lambda: [_foreach_step(ps, gs) for _ in range(calls)],
            lambda: [jstep(ps, gs) for _ in range(calls)],
        ],
        repeat * 3,
    )
    two_e, two_j, step_e, step_j = (t / calls for t in many)
    rows.append(
        (
            "600 tensor arguments, 2 read (median)",
            f"{two_e * 1e6:.1f} us",
            f"{two_j * 1e6:.1f} us (+{(two_j - two_e) / 600 * 1e6:.2f} us per tensor)",
            "-",
            "<= +3 us per tensor",
        )
    )
    rows.append(
        (
            "_foreach_add_ step, 300+300 tensors (median)",
            f"{step_e * 1e6:.0f} us",
            f"{step_j * 1e6:.0f} us (+{(step_j - step_e) / 600 * 1e6:.2f} us per tensor)",
            "-",
            "",
        )
    )

    # 2. First call of a 4-layer nanoGPT forward.
    out = subprocess.run(
        [sys.executable, "-c", _COLD_FIRST_CALL], capture_output=True, text=True, check=True
    )
    cold, import_s, cold_eager_first = (float(x) for x in out.stdout.split())
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=4)).eval()
    idx = torch.randint(0, 512, (2, 64))
    jm = thunder.jit(model)
    with torch.no_grad():
        start = time.perf_counter()
        model(idx)
        eager_first = time.perf_counter() - start
        start = time.perf_counter()
        jm(idx)
        warm = time.perf_counter() - start
    timings = thunder.compile_stats(jm).last_timings
    breakdown = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in timings.items() if k != "total")
    tc_first = "-"
    compiled_model = None
    if not options.no_torch_compile:
        compiled_model = torch.compile(model)
        with torch.no_grad():
            start = time.perf_counter()
            compiled_model(idx)
            tc_first = f"{time.perf_counter() - start:.2f} s"
    rows.append(
        (
            "GPT-4L first call (fresh process)",
            f"{cold_eager_first * 1e3:.1f} ms",
            f"{cold:.2f} s (after one eager call; import thunder {import_s:.2f} s not included)",
            tc_first,
            "<= 1 s",
        )
    )
    rows.append(
        (
            "GPT-4L first call (warm process)",
            f"{eager_first * 1e3:.1f} ms",
            f"{warm:.2f} s ({breakdown})",
            "",
            "<= 1 s",
        )
    )

    # 3. GPT per call.
    with torch.no_grad():
        gfns: list[Callable[[], Any]] = [lambda: model(idx), lambda: jm(idx)]
        if compiled_model is not None:
            gfns.append(lambda: compiled_model(idx))
        gt = _interleaved(gfns, max(n // 1000, 5), repeat)
    rows.append(
        (
            "GPT-4L forward per call",
            f"{gt[0] * 1e3:.2f} ms",
            f"{gt[1] * 1e3:.2f} ms ({gt[1] / gt[0]:.2f}x)",
            f"{gt[2] * 1e3:.2f} ms ({gt[2] / gt[0]:.2f}x)" if compiled_model is not None else "-",
            "",
        )
    )

    # 4. Cache lookup: one entry against 64 (the same call, other shapes cached beside it).
    # (constant values: by default sizes become symbolic once a third size is met)
    one = thunder.jit(add, recompile_limit=64, cache="constant values")
    many = thunder.jit(add, recompile_limit=64, cache="constant values")
    x, y = torch.randn(3), torch.randn(3)
    one(x, y)
    for i in range(64):
        many(torch.randn(i + 1), torch.randn(i + 1))
    assert thunder.cache_misses(many) == 64
    t1, t64 = _interleaved([lambda: one(x, y), lambda: many(x, y)], n, repeat)
    rows.append(
        (
            "cache lookup: 64 entries vs 1",
            "",
            f"{t64 * 1e6:.2f} us vs {t1 * 1e6:.2f} us ({(t64 / t1 - 1) * 100:+.1f}%)",
            "",
            "within 10%",
        )
    )

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, Python {sys.version.split()[0]}"
    )
    header = ("benchmark", "eager", "thunder.jit", "torch.compile", "goal")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
