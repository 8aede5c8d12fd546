"""Timing helpers shared by the benchmarks."""

from __future__ import annotations

import contextlib
import multiprocessing
import statistics
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["interleaved_in_processes", "median_times", "medians", "settle_regions"]


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


Setup = Callable[[str, Any], tuple[Callable[[], Any], Any]]


def interleaved_in_processes(
    setup: Setup, names: Sequence[str], options: Any, calls: int, rounds: int
) -> list[tuple[Any, list[float]]]:
    """Per name, what ``setup(name, options)`` reported and the seconds per call of the step it
    returned, one figure per round of ``calls`` calls.

    Each name is set up in a process of its own (spawned; one after the other, so first calls
    are timed on a quiet machine), then the rounds take turns between the processes, one running
    at a time, as ``median_times``'s calls do. In one process the configurations would share
    the allocator's heap: one that frees its memory in a different order makes the heap shrink
    and grow again, and the other one pays the page faults (a training step measured against
    eager in the same process: hundreds of faults per step that neither has alone). ``setup``
    must be a module-level function (it is pickled by name); an exception in it is raised here
    with the process's traceback."""
    context = multiprocessing.get_context("spawn")
    pipes: list[Any] = []
    processes: list[Any] = []
    reported: list[Any] = []
    try:
        for name in names:
            ours, theirs = context.Pipe()
            process = context.Process(
                target=_worker, args=(theirs, setup, name, options), daemon=True
            )
            process.start()
            pipes.append(ours)
            processes.append(process)
            reported.append(_receive(ours, name))
        times: list[list[float]] = [[] for _ in names]
        for _ in range(rounds):
            for k, pipe in enumerate(pipes):
                pipe.send(calls)
                times[k].append(_receive(pipe, names[k]))
        return list(zip(reported, times, strict=True))
    finally:
        for pipe, process in zip(pipes, processes):
            if process.is_alive():
                with contextlib.suppress(OSError):  # (one that has just exited)
                    pipe.send(0)
            process.join(timeout=30)
            if process.is_alive():
                process.kill()


def _receive(pipe: Any, name: str) -> Any:
    try:
        kind, value = pipe.recv()
    except EOFError:
        raise RuntimeError(f"{name}: its benchmark process died") from None
    if kind == "error":
        raise RuntimeError(f"{name}: its benchmark process raised:\n{value}")
    return value


def _worker(pipe: Any, setup: Setup, name: str, options: Any) -> None:
    try:
        step, reported = setup(name, options)
    except BaseException:
        pipe.send(("error", traceback.format_exc()))
        return
    pipe.send(("ok", reported))
    while calls := pipe.recv():
        try:
            start = time.perf_counter()
            for _ in range(calls):
                step()
            pipe.send(("ok", (time.perf_counter() - start) / calls))
        except BaseException:
            pipe.send(("error", traceback.format_exc()))
            return


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
