"""The GPU check: on a machine with a CUDA device, the GPU tests and the CUDA benchmarks, one table.

1. The tests that need a device (``tests/gpu``: functions, the zoo, a conv block and a training
   step under each executor that runs on CUDA, random numbers, autocast, attention; the Triton
   kernels compiled for the device; the cache keyed by device), in a separate pytest process
   (``-n`` workers when pytest-xdist is installed). Their summary is the table's first rows.
2. Steady times on the device, the configurations taking turns, each timed call synchronized:
   the zoo's models (eval forward), a conv block (eval forward and a training step) and a
   nanoGPT training step, as ratios to eager (lower is faster), with each configuration's first
   call in seconds.

Run: ``./dev gpu-check`` (the machine's own python3 and torch, this checkout's packages on the
path), or ``python -m benchmarks gpu_check [--skip-tests] [--skip-bench] [--repeat N]``. Without a
CUDA device it says so and exits with status 1: a check that ran nothing must not pass.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

if (
    str(Path(__file__).resolve().parent) not in sys.path
):  # imported by file path: _timing is a sibling
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import medians  # type: ignore[import-not-found]

RUN_BY_DEFAULT = False  # ``python -m benchmarks`` alone skips it: it needs a CUDA device
ROOT = Path(__file__).resolve().parent.parent
GPU_TESTS = [
    "tests/gpu",
    "tests/thunder_executors/test_triton.py",
    "tests/thunder/test_jit_cache.py",
]
ZOO_MODELS = ("bert", "llama", "resnet", "gpt2", "vit")
CONFIGS = {
    "thunder": None,
    "thunder+tc": ("torchcompile", "torch_ops", "torch"),
    "torch.compile": "torch.compile",
}


def run_tests(timeout: float, log: str | None) -> tuple[str, int]:
    """Runs the GPU tests in a fresh process; returns their summary line and exit status. The
    failures are printed; the whole output goes to ``log`` when given."""
    command = [sys.executable, "-m", "pytest", *GPU_TESTS, "-q", "-p", "no:cacheprovider"]
    command += ["-p", "no:logging", "--tb=short", "-rfE"]  # libraries' debug logs drown failures
    if importlib.util.find_spec("xdist") is not None:
        command += ["-n", "8"]
    if importlib.util.find_spec("pytest_timeout") is not None:
        command += ["--timeout", "150"]  # one hung test must not take the whole lease
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("TRITON_INTERPRET", None)  # the Triton kernels compile for the device
    try:
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode()
        print(out[-4000:])
        return f"timed out after {timeout:.0f} s", 1
    if log:
        Path(log).write_text(done.stdout + "\n" + done.stderr)
    print(done.stdout[-12000:])
    if done.returncode not in (0, 1):
        print(done.stderr[-4000:])
    lines = [ln for ln in done.stdout.splitlines() if re.search(r"\d+ (passed|failed|error)", ln)]
    return (lines[-1].strip("= ") if lines else "no summary"), done.returncode


def _sync() -> None:
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _synchronized(fn: Callable[[], Any]) -> Callable[[], Any]:
    def call() -> Any:
        out = fn()
        _sync()
        return out

    return call


def _compile(config: str, model: Any) -> Any:
    import thunder

    executors = CONFIGS[config]
    if executors == "torch.compile":
        return torch.compile(model)
    return thunder.jit(model) if executors is None else thunder.jit(model, executors=executors)


def measure(name: str, model: Any, step: Callable[[Any], Any], repeat: int) -> dict[str, Any]:
    """One row: eager's steady time; per configuration its first call and steady ratio."""
    torch._dynamo.reset()
    row: dict[str, Any] = {"name": name, "first": {}, "ratio": {}, "error": {}}
    step(model)  # torch's own first-run costs (cuBLAS handles, kernels) are not counted
    runners = {"eager": _synchronized(lambda: step(model))}
    for config in CONFIGS:
        try:
            compiled = _compile(config, model)
            start = time.perf_counter()
            step(compiled)
            _sync()
            row["first"][config] = time.perf_counter() - start
            step(compiled)
            runners[config] = _synchronized(lambda c=compiled: step(c))
        except Exception as e:
            row["error"][config] = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
            traceback.print_exc()
    times = medians(runners, repeat)
    row["eager"] = times.pop("eager")
    row["ratio"] = {c: t / row["eager"] for c, t in times.items()}
    return row


def _zoo() -> Any:
    spec = importlib.util.spec_from_file_location("hf_zoo", ROOT / "tests" / "e2e" / "hf_zoo.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def benchmark_rows(
    repeat: int, device: str, models: list[str], seconds: float
) -> list[dict[str, Any]]:
    """The rows, most telling first; once ``seconds`` have passed the rest are left out (said
    in the table), so the check ends inside a GPU lease."""
    cuda = torch.device(device)
    deadline = time.perf_counter() + seconds
    rows = []
    for name, make in _workloads(cuda, models):
        if time.perf_counter() > deadline:
            rows.append({"name": name, "skipped": f"not run: past the {seconds:.0f} s budget"})
            continue
        model, step = make()
        rows.append(measure(name, model, step, repeat))
    return rows


def _workloads(cuda: torch.device, models: list[str]) -> list[tuple[str, Callable[[], Any]]]:
    from thunder.models import GPT, ConvBlock, GPTConfig

    zoo = _zoo()

    def conv_block(training: bool) -> tuple[Any, Callable[[Any], Any]]:
        torch.manual_seed(0)
        block = ConvBlock(64).to(cuda).train(training)
        x = torch.randn(32, 3, 112, 112, device=cuda)

        def step(m: Any) -> Any:
            if not training:
                with torch.no_grad():
                    return m(x)
            for p in block.parameters():
                p.grad = None
            out = m(x).square().mean()
            out.backward()
            return out

        return block, step

    def gpt(config: GPTConfig) -> tuple[Any, Callable[[Any], Any]]:
        torch.manual_seed(0)
        model = GPT(config).to(cuda)
        idx = torch.randint(0, config.vocab_size, (8, config.block_size), device=cuda)
        targets = torch.randint(0, config.vocab_size, (8, config.block_size), device=cuda)

        def step(m: Any) -> Any:
            for p in model.parameters():
                p.grad = None
            logits = m(idx)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            loss.backward()
            return loss

        return model, step

    def zoo_model(name: str) -> tuple[Any, Callable[[Any], Any]]:
        model = zoo.build(name).to(cuda)
        kwargs = {k: v.to(cuda) for k, v in zoo.inputs(name, 0, batch=8, length=64).items()}
        if "pixel_values" in kwargs:
            kwargs["pixel_values"] = torch.randn(8, 3, 64, 64, device=cuda)

        def step(m: Any) -> Any:
            with torch.no_grad():
                return m(**kwargs)

        return model, step

    work: list[tuple[str, Callable[[], Any]]] = [
        ("conv block eval", lambda: conv_block(False)),
        ("conv block train", lambda: conv_block(True)),
        ("GPT train (4x128, seq 64)", lambda: gpt(GPTConfig(n_layer=4))),
        (
            "GPT train (4x768, seq 256)",
            lambda: gpt(
                GPTConfig(n_layer=4, n_head=12, n_embd=768, block_size=256, vocab_size=8192)
            ),
        ),
    ]
    work += [(f"{n} forward", lambda n=n: zoo_model(n)) for n in models if n]
    return work


def print_table(rows: list[dict[str, Any]], tests: tuple[str, int] | None) -> None:
    header = ["", "eager"]
    for config in CONFIGS:
        header += [f"{config} first", config]
    lines = []
    if tests is not None:
        lines.append(["GPU tests", tests[0]] + [""] * (len(header) - 2))
    for r in rows:
        if "skipped" in r:
            lines.append([r["name"], r["skipped"]] + [""] * (len(header) - 2))
            continue
        cells = [r["name"], f"{r['eager'] * 1e3:.2f} ms"]
        for config in CONFIGS:
            if config in r["error"]:
                cells += ["FAIL", r["error"][config]]
            else:
                cells += [f"{r['first'][config]:.1f} s", f"{r['ratio'][config]:.2f}x"]
        lines.append(cells)
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    where = torch.cuda.get_device_name() if torch.cuda.is_initialized() else "no GPU"
    print(
        f"GPU check: {where}, torch {torch.__version__}, "
        f"Python {sys.version.split()[0]}; ratios are time / eager (lower is faster)"
    )
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("-|-".join("-" * w for w in widths))
    for cells in lines:
        print(" | ".join(c.ljust(w) for c, w in zip(cells, widths)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--test-timeout", type=float, default=240.0)
    parser.add_argument("--log", help="write the tests' whole output to this file")
    parser.add_argument("--bench-seconds", type=float, default=200.0, help="start no row after")
    parser.add_argument(
        "--models", default=",".join(ZOO_MODELS), help="comma-separated zoo models to time"
    )
    parser.add_argument(
        "--cpu", action="store_true", help="time the benchmarks on the CPU (a dry run of the check)"
    )
    options = parser.parse_args()
    if options.cpu:
        print_table(
            benchmark_rows(options.repeat, "cpu", options.models.split(","), options.bench_seconds),
            None,
        )
        return
    if not torch.cuda.is_available():
        print("no CUDA device here: the GPU check has nothing to run")
        sys.exit(1)
    tests = None if options.skip_tests else run_tests(options.test_timeout, options.log)
    rows = (
        []
        if options.skip_bench
        else benchmark_rows(
            options.repeat, "cuda", options.models.split(","), options.bench_seconds
        )
    )
    print_table(rows, tests)
    failed = (tests is not None and tests[1] != 0) or any(r.get("error") for r in rows)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
