"""Benchmark: what ``thunder.compile`` runs once its fusion regions are compiled, on the zoo's
tiny Hugging Face models (``tests/e2e/hf_zoo.py``; eval, ``torch.no_grad()``).

Without nvFuser, ``thunder.compile`` compiles regions in the background and then times each
region's compiled program against its torch calls, keeping the faster. Per model: the steady
forward time of ``thunder.compile`` (after its regions are compiled and measured), of
``thunder.jit`` and of ``torch.compile`` as ratios to eager (medians of interleaved calls, one
process), the ratio of ``thunder.compile`` to ``torch.compile`` (goal: at most 1.05), the
microseconds thunder.jit's program spends per call checking its guards (its prologue, the guard
tree once built; part of both thunder columns), and per region what it runs (``compiled`` or
``torch calls``). The logits are checked against eager's.

Run: ``python -m benchmarks compile_choice [--models bert,llama|all] [--repeat N] [--threads N]
[--no-torch-compile]``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch

import thunder

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import medians  # type: ignore[import-not-found]
from models import load_zoo  # type: ignore[import-not-found]

DEFAULT_MODELS = "bert,roberta,opt,vit,llama,gemma,gpt_neox"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's)")
    parser.add_argument("--no-torch-compile", action="store_true", help="leave out torch.compile")
    args = parser.parse_args(argv)
    from thunder_executors.background_compile import wait_for_background_compiles

    if args.threads:
        torch.set_num_threads(args.threads)
    zoo = load_zoo()
    names = zoo.ARCHITECTURES if args.models == "all" else [n for n in args.models.split(",") if n]
    print(
        f"{'model':<10} {'thunder.compile':>15} {'thunder.jit':>12} {'torch.compile':>14} "
        f"{'compile/torch.compile':>22} {'prologue us':>12}  regions run"
    )
    print("-" * 100)
    for name in names:
        # dynamo's per-code caches fill across models that share code (transformers' decorators):
        # past its recompile limit torch.compile would run them eagerly.
        torch._dynamo.reset()
        model = zoo.build(name)
        kwargs = zoo.inputs(name, 0)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = zoo.logits(model(**kwargs))
            jitted, compiled = thunder.jit(model), thunder.compile(model)
            jitted(**kwargs)
            compiled(**kwargs)
            wait_for_background_compiles()
            for _ in range(40):  # the measurement of each region (16 calls each way)
                compiled(**kwargs)
            torch.testing.assert_close(zoo.logits(compiled(**kwargs)), expected)
            program = thunder.compile_stats(jitted).last_program
            assert program is not None
            runs = {
                "eager": lambda: model(**kwargs),
                "jit": lambda: jitted(**kwargs),
                "compile": lambda: compiled(**kwargs),
                "prologue": lambda: program.prologue((), kwargs),
            }
            if not args.no_torch_compile:
                torch_compiled = torch.compile(model)
                torch.testing.assert_close(zoo.logits(torch_compiled(**kwargs)), expected)
                runs["torch.compile"] = lambda: torch_compiled(**kwargs)
            times = medians(runs, args.repeat)
        regions = thunder.last_traces(compiled)[-1].fusion_regions
        regions_run = ", ".join(
            "compiled" if r.sym.impl.runs_compiled else "torch calls" for r in regions
        )
        tc = times.get("torch.compile")
        tc_ratio = f"{tc / times['eager']:.2f}x" if tc else "-"
        against_tc = f"{times['compile'] / tc:.2f}" if tc else "-"
        print(
            f"{name:<10} {times['compile'] / times['eager']:>14.2f}x "
            f"{times['jit'] / times['eager']:>11.2f}x {tc_ratio:>14} {against_tc:>22} "
            f"{times['prologue'] * 1e6:>12.1f}  {regions_run or '-'}",
            flush=True,
        )


if __name__ == "__main__":
    main()
