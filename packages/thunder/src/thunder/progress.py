"""Progress of a long compilation on stderr: a compile that takes more than ``THUNDER_PROGRESS_AFTER``
seconds (2 by default) says what it is doing every few seconds, and how long each stage took at
the end. Shown when stderr is a terminal, or with ``THUNDER_PROGRESS=1``; never with
``THUNDER_PROGRESS=0``. A timer thread prints, so the compilation itself pays nothing."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["compiled", "compiling", "lap", "running"]

_current = threading.local()


class _Progress:
    def __init__(self, name: str, after: float) -> None:
        self.name = name
        self.after = after
        self.start = time.perf_counter()
        self.laps: dict[str, float] = {}
        self.stage = "interpretation"
        self.shown = False
        # Compilations inside this one (the graphs of a split call): their stages are not its.
        self.nested = 0
        self.graphs = 0
        self.compiled = False
        self.split: str | None = None  # how the call runs split, where it does
        self.lock = threading.Lock()
        self.timer: threading.Timer | None = None
        self._arm(after)

    def _arm(self, delay: float) -> None:
        self.timer = threading.Timer(delay, self._show)
        self.timer.daemon = True
        self.timer.start()

    def _show(self) -> None:
        with self.lock:
            if self.timer is None:  # finished meanwhile
                return
            self.shown = True
            done = "".join(f", {k} {v:.1f} s" for k, v in self.laps.items())
            elapsed = time.perf_counter() - self.start
            print(
                f"[thunder] compiling {self.name}: {self.stage} ({elapsed:.1f} s{done})",
                file=sys.stderr,
                flush=True,
            )
            self._arm(max(self.after, 2.0))

    def lap(self, stage: str, seconds: float, next_stage: str) -> None:
        with self.lock:
            self.laps[stage] = seconds
            self.stage = next_stage

    def finish(self, failed: bool) -> None:
        with self.lock:
            if self.timer is not None:
                self.timer.cancel()
                self.timer = None
            if self.shown:
                print(f"[thunder] {self._outcome(failed)}", file=sys.stderr, flush=True)

    def _outcome(self, failed: bool) -> str:
        total = time.perf_counter() - self.start
        stages = ", ".join(f"{k} {v:.1f} s" for k, v in self.laps.items())
        stages = f" ({stages})" if stages else ""
        if failed:
            return f"{self.name} was not compiled: the call raised ({total:.1f} s{stages})"
        if self.compiled:
            return f"compiled {self.name} in {total:.1f} s{stages}"
        if self.split:
            return (
                f"{self.name} ran split {self.split} in {total:.1f} s (thunder compiled "
                f"{self.graphs} graph(s) of it)"
            )
        return f"{self.name} was not compiled: it ran eagerly ({total:.1f} s{stages})"


def _enabled() -> bool:
    switch = os.environ.get("THUNDER_PROGRESS")
    if switch is not None:
        return switch not in ("0", "", "false", "False")
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(isatty and isatty())


@contextmanager
def compiling(name: str) -> Iterator[None]:
    """Around one compilation (and its first run, where executors compile their regions)."""
    outer = getattr(_current, "progress", None)
    if not _enabled() or outer is not None:
        with _nested(outer):  # off, or a compilation inside another's (an enclosing jit shows it)
            yield
        return
    after = float(os.environ.get("THUNDER_PROGRESS_AFTER", "2"))
    _current.progress = progress = _Progress(name, after)
    failed = True
    try:
        yield
        failed = False
    finally:
        _current.progress = None
        progress.finish(failed)


@contextmanager
def _nested(progress: _Progress | None) -> Iterator[None]:
    if progress is None:
        yield
        return
    progress.nested += 1
    try:
        yield
    finally:
        progress.nested -= 1


# What each stage is followed by, for the line shown while it runs.
_NEXT = {"interpretation": "transforms", "transforms": "codegen", "codegen": "first run"}


def lap(stage: str, seconds: float) -> None:
    """``stage`` of the compilation on this thread took ``seconds``."""
    progress = getattr(_current, "progress", None)
    if progress is not None and not progress.nested:
        progress.lap(stage, seconds, _NEXT.get(stage, "running"))


def compiled() -> None:
    """The compilation on this thread made a program (or, inside another, one of its graphs)."""
    progress = getattr(_current, "progress", None)
    if progress is None:
        return
    if progress.nested:
        progress.graphs += 1
    else:
        progress.compiled = True


def running(stage: str, *, split: str | None = None) -> None:
    """The compilation on this thread now runs ``stage`` (the call, split ``split``: "by
    torch.compile" or "as thunder's own segments")."""
    progress = getattr(_current, "progress", None)
    if progress is not None and not progress.nested:
        with progress.lock:
            progress.stage = stage
            progress.split = split or progress.split
