"""Timing helpers shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

__all__ = ["median_times", "medians"]


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
