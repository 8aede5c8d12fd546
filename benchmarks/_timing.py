"""Timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

__all__ = ["median_times", "medians", "settle_regions"]


def median_times(fns: list[Callable[[], Any]], repeat: int) -> list[float]:
    """Per function, the median of ``repeat`` timed calls (seconds); the functions take turns,
    so a slow phase of the machine hits all of them alike."""
    samples: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            samples[k].append(time.perf_counter() - start)
    return [statistics.median(s) for s in samples]


def medians(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """``median_times`` of named functions: the median seconds of one call of each."""
    return dict(zip(fns, median_times(list(fns.values()), repeat), strict=True))


def _regions(jm: Any) -> list[Any]:
    """The fusion regions (``CompiledRegion``) of the last forward and backward programs."""
    import thunder

    traces = [*thunder.last_traces(jm)[-1:], *thunder.last_backward_traces(jm)[-1:]]
    return [r.sym.impl for t in traces for r in getattr(t, "fusion_regions", ())]


def settle_regions(step: Callable[[], Any], jm: Any, max_steps: int = 200) -> tuple[int, str]:
    """Steps until every region of ``jm`` has chosen what it runs (``CompiledRegion.settled``);
    the steps taken and, per region, what it runs."""
    steps = 0
    while steps < max_steps and not all(getattr(r, "settled", True) for r in _regions(jm)):
        step()
        steps += 1
    runs = [
        "measuring" if not getattr(r, "settled", True)
        else "failed" if getattr(r, "error", None) is not None
        else "compiled" if getattr(r, "runs_compiled", True) else "torch calls"
        for r in _regions(jm)
    ]  # fmt: skip
    return steps, ", ".join(runs)
