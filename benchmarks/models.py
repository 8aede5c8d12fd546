"""Benchmark: tiny Hugging Face models (``tests/e2e/hf_zoo.py``) under thunder.jit and torch.compile.

For every architecture of the zoo (random weights, eval mode, ``torch.no_grad()``), one row:

- ``eager``: the steady time of one eager forward;
- ``thunder first``: seconds of the first call of ``thunder.jit(model)`` with the default
  executors (interpret, trace, transform, compile; torch's own first-run costs are paid by an
  eager call before);
- ``thunder``: its steady time as a ratio to eager (lower is faster: 0.5x is twice as fast);
- ``thunder+tc first`` / ``thunder+tc``: the same with torch.compile fusion regions first
  (executors ``torchcompile, torch_ops, torch``, when the ``torchcompile`` executor is available);
- ``ops alone``: the steady time of the default configuration's computation alone (the torch
  calls of its execution trace, without prologue, epilogue or call overhead) as a ratio to eager:
  the floor for a configuration that runs one torch call per op;
- ``thunder backend first`` / ``thunder backend``: ``torch.compile(model, backend="thunder")``
  (dynamo's graphs compiled by thunder with the default executors, ``thunder.dynamo``);
- ``torch.compile first`` / ``torch.compile``: ``torch.compile(model)`` itself (inductor's on-disk
  caches make a second run of the benchmark faster on first calls);
- ``check``: ``ok`` when every configuration's logits equal eager's (``torch.testing.assert_close``),
  else ``FAIL: <exception type>: <short message>`` and the configurations it stopped, whose cells
  read ``FAIL``; the benchmark goes on with the next configuration and model. A call thunder.jit
  could not trace and ran eagerly (it warns and counts an eager fallback) is a failure too
  (``RanEagerly``): its figures would be eager's.

Steady times are medians of ``--repeat`` calls after warm-up, the configurations taking turns so
a slow phase of the machine hits all of them alike.

Each model is measured in a fresh interpreter (``--in-process`` measures all in this one): a
model that crashes it (a segfault in a compiler) is a FAIL row, and the benchmark goes on.

Run: ``python -m benchmarks models [--models bert,gpt2] [--repeat N] [--no-torch-compile]
[--threads N]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

import thunder

if (
    str(Path(__file__).resolve().parent) not in sys.path
):  # imported by file path: _timing is a sibling
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from _timing import medians  # type: ignore[import-not-found]

ZOO_PATH = Path(__file__).resolve().parent.parent / "tests" / "e2e" / "hf_zoo.py"
FUSION_EXECUTORS = ("torchcompile", "torch_ops", "torch")


def load_zoo() -> ModuleType:
    """``tests/e2e/hf_zoo.py`` by file path: benchmarks do not rely on pytest's import set-up."""
    spec = importlib.util.spec_from_file_location("hf_zoo", ZOO_PATH)
    assert spec is not None and spec.loader is not None, ZOO_PATH
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def failure(e: BaseException, width: int = 120) -> str:
    """``FAIL: <type>: <first line of the message>``, cut to ``width`` characters."""
    lines = str(e).strip().splitlines()
    text = f"FAIL: {type(e).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text if len(text) <= width else text[: width - 3] + "..."


class RanEagerly(Exception):
    """thunder.jit could not trace the call and ran it eagerly (it warns and goes on): its
    figures would be eager's, so the row says why instead."""


def _check_compiled(config: str, compiled: Any, caught: list[warnings.WarningMessage]) -> None:
    if config == "thunder backend":
        from thunder.dynamo import subgraphs

        others = [g.runs for g in subgraphs(compiled) if g.runs != "thunder"]
        if others:
            raise RanEagerly(others[0])
        return
    if not config.startswith("thunder") or not thunder.compile_stats(compiled).eager_fallbacks:
        return
    notes = [str(w.message) for w in caught if str(w.message).startswith("thunder.jit")]
    note = notes[0] if notes else "the call ran eagerly"
    raise RanEagerly(note.split(" raised ", 1)[-1].split("; the call ran eagerly")[0])


def configurations(use_torch_compile: bool) -> list[str]:
    """The compiled configurations measured against eager, in column order."""
    from thunder_executors import get_available_executors

    configs = ["thunder"]
    if "torchcompile" in {e.name for e in get_available_executors()}:
        configs.append("thunder+tc")
    if use_torch_compile:
        configs += ["thunder backend", "torch.compile"]
    return configs


def _compile(config: str, model: torch.nn.Module) -> Callable[..., Any]:
    if config == "thunder":
        return thunder.jit(model)
    if config == "thunder+tc":
        return thunder.jit(model, executors=FUSION_EXECUTORS)
    if config == "thunder backend":
        from thunder.dynamo import thunderfx

        return thunderfx(model)
    assert config == "torch.compile", config
    return torch.compile(model)


def measure(zoo: ModuleType, name: str, configs: list[str], repeat: int) -> dict[str, Any]:
    """One row: eager's steady time, and per configuration its first-call seconds and steady
    ratio to eager, or the exception that stopped it."""
    # torch.compile keeps compiled code per code object, and after ``recompile_limit`` (8)
    # entries it silently runs the rest eagerly: the zoo's models share the code of
    # transformers' layers, so without a reset the later models' torch.compile figures (and
    # thunder's torchcompile regions) would be eager's. Every model starts from a clean slate.
    torch._dynamo.reset()
    model = zoo.build(name)
    kwargs = zoo.inputs(name, 0)
    row: dict[str, Any] = {"name": name, "first": {}, "ratio": {}, "error": {}}
    with torch.no_grad():
        expected = zoo.logits(model(**kwargs))  # torch's own first-run costs are not measured
        runners: dict[str, Callable[[], Any]] = {"eager": lambda: model(**kwargs)}
        for config in configs:
            try:
                compiled = _compile(config, model)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    start = time.perf_counter()
                    out = compiled(**kwargs)
                    row["first"][config] = time.perf_counter() - start
                    compiled(**kwargs)  # warm up (torch.compile may specialize on a second call)
                _check_compiled(config, compiled, caught)
                torch.testing.assert_close(zoo.logits(out), expected)
            except Exception as e:
                row["error"][config] = failure(e)
                continue
            runners[config] = lambda c=compiled: c(**kwargs)
            if config == "thunder":
                # The computation alone (no prologue, epilogue or call overhead): torch's time for
                # the ops themselves, one call each, the floor of this configuration.
                program = thunder.compile_stats(compiled).last_program
                assert program is not None
                inputs = program.prologue((), kwargs)
                runners[_OPS] = lambda p=program, i=inputs: p.computation(*i)
        times = medians(runners, repeat)
    row["eager"] = times.pop("eager")
    ops = times.pop(_OPS, None)
    row["ops"] = None if ops is None else ops / row["eager"]
    row["ratio"] = {config: t / row["eager"] for config, t in times.items()}
    return row


_OPS = "thunder ops alone"


def print_table(rows: list[dict[str, Any]], configs: list[str]) -> None:
    header = ["model", "eager"]
    for config in configs:
        header += [f"{config} first", config]
        if config == "thunder":
            header.append("ops alone")
    header.append("check")
    lines = []
    for r in rows:
        eager = r["eager"]
        cells = [r["name"], "-" if eager != eager else f"{eager * 1e3:.2f} ms"]  # nan: crashed
        for config in configs:
            if config in r["error"]:
                cells += ["FAIL", "FAIL"]
            else:
                cells += [f"{r['first'][config]:.2f} s", f"{r['ratio'][config]:.2f}x"]
            if config == "thunder":
                ops = r.get("ops")
                cells.append("-" if ops is None else f"{ops:.2f}x")
        by_message: dict[str, list[str]] = {}  # one message, with every configuration it stopped
        for config, message in r["error"].items():
            by_message.setdefault(message, []).append(config)
        errors = [f"{m} ({', '.join(cs)})" for m, cs in by_message.items()]
        cells.append("; ".join(errors) if errors else "ok")
        lines.append(cells)
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header) - 1)]
    text = ["  ".join(c.ljust(w) for c, w in zip(header, widths)) + "  " + header[-1]]
    text.append("-" * len(text[0]))
    text += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] for row in lines]
    print("\n".join(text))
    passed = sum(1 for r in rows if not r["error"])
    print(f"\n{passed} of {len(rows)} models ok in every configuration")


def measure_in_subprocess(name: str, options: argparse.Namespace) -> dict[str, Any]:
    """``measure`` in a fresh interpreter: a model that crashes it (a segfault in a compiler)
    becomes a FAIL row, and no model inherits another's compiled code or caches."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--models", name]
    cmd += ["--repeat", str(options.repeat), "--threads", str(options.threads), "--worker"]
    if options.no_torch_compile:
        cmd.append("--no-torch-compile")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(_ROW_MARK)]
    if proc.returncode == 0 and lines:
        row: dict[str, Any] = json.loads(lines[-1].removeprefix(_ROW_MARK))
        return row
    what = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
    tail = (proc.stderr.strip().splitlines() or [""])[-1][:80]
    message = f"FAIL: crashed ({what}) {tail}".rstrip()
    configs = configurations(not options.no_torch_compile)
    return {"name": name, "eager": float("nan"), "first": {}, "ratio": {},
            "error": dict.fromkeys(configs, message)}  # fmt: skip


_ROW_MARK = "ROW "


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated names (default: all)")
    parser.add_argument(
        "--repeat", type=int, default=200, help="steady calls per configuration (medians)"
    )
    parser.add_argument("--no-torch-compile", action="store_true", help="skip torch.compile")
    parser.add_argument(
        "--in-process", action="store_true", help="measure every model in this process"
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="torch threads (default: torch's choice); "
        "on a machine shared with other work, 1 gives steadier figures"
    )  # fmt: skip
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.threads:
        torch.set_num_threads(options.threads)
    zoo = load_zoo()
    names = [n for n in options.models.split(",") if n] or list(zoo.ARCHITECTURES)
    known = (*zoo.ARCHITECTURES, *zoo.MORE_ARCHITECTURES)  # the default set, and those on request
    unknown = sorted(set(names) - set(known))
    if unknown:
        sys.exit(f"unknown model(s) {unknown}; known: {', '.join(known)}")
    configs = configurations(not options.no_torch_compile)
    if options.worker:  # one model, for measure_in_subprocess
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            row = measure(zoo, names[0], configs, max(options.repeat, 1))
        print(_ROW_MARK + json.dumps(row))
        return
    print(
        f"tiny Hugging Face models, eval forward under no_grad; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, Python {sys.version.split()[0]}; "
        f"ratios are time / eager (lower is faster), medians of {options.repeat} calls"
    )
    rows = []
    for name in names:
        print(f"  {name}...", file=sys.stderr, flush=True)
        if not options.in_process:
            rows.append(measure_in_subprocess(name, options))
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # transformers' and the recompile notices
            rows.append(measure(zoo, name, configs, max(options.repeat, 1)))
    print_table(rows, configs)


if __name__ == "__main__":
    main()
