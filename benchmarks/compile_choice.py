"""Benchmark: what ``thunder.compile`` runs once its fusion regions are compiled, on the zoo's
tiny Hugging Face models (``tests/e2e/hf_zoo.py``; eval, ``torch.no_grad()``).

Without nvFuser, ``thunder.compile`` compiles regions in the background and then times each
region's compiled program against its torch calls, keeping the faster. Per model: the steady
forward time of ``thunder.compile`` (after its regions are compiled and measured) and of
``thunder.jit`` as ratios to eager (medians of interleaved calls, one process), and per region
what it runs (``compiled`` or ``torch calls``). The logits are checked against eager's.

Run: ``python -m benchmarks compile_choice [--models bert,llama] [--repeat N] [--threads N]``.
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
    args = parser.parse_args(argv)
    from thunder_executors.background_compile import wait_for_background_compiles

    if args.threads:
        torch.set_num_threads(args.threads)
    zoo = load_zoo()
    print(f"{'model':<10} {'thunder.compile':>15} {'thunder.jit':>12}  regions run")
    print("-" * 60)
    for name in (n for n in args.models.split(",") if n):
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
            times = medians(
                {
                    "eager": lambda: model(**kwargs),
                    "jit": lambda: jitted(**kwargs),
                    "compile": lambda: compiled(**kwargs),
                },
                args.repeat,
            )
        regions = thunder.last_traces(compiled)[-1].fusion_regions
        runs = ", ".join("compiled" if r.sym.impl.runs_compiled else "torch calls" for r in regions)
        print(
            f"{name:<10} {times['compile'] / times['eager']:>14.2f}x "
            f"{times['jit'] / times['eager']:>11.2f}x  {runs or '-'}",
            flush=True,
        )


if __name__ == "__main__":
    main()
