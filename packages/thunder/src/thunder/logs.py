"""What thunder is doing, through Python's ``logging`` (``THUNDER_LOGS``, ``thunder.set_logs``).

Each channel is a logger under ``thunder`` (``thunder.recompiles``...), so the tools users
route logs with apply; the switch only sets their levels and puts one handler on stderr:

- ``compiles``: each compilation, its time per stage and the call (the user's ``file:line``);
- ``recompiles``: each compilation after the first, and why (what changed, the failed guard);
- ``guards``: each compiled program a call's inputs failed, with the failed guard;
- ``fallbacks``: each call that ran eagerly, and why (and each ``torch.compile`` graph thunder
  refused, with what ran it instead);
- ``splits``: each call split by ``torch.compile`` around a function run natively, and why;
- ``traces``: the prologue and execution traces of each compilation;
- ``data``: where a compiled program reads tensor data and decides on it.

``THUNDER_LOGS=recompiles,fallbacks`` (``all`` for every channel) at import, or
``thunder.set_logs("recompiles,fallbacks")`` / ``thunder.set_logs(recompiles=True)`` later.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType

__all__ = [
    "CHANNELS",
    "channel",
    "log_cache_mode",
    "log_compile",
    "log_eager",
    "log_guard_failure",
    "log_program",
    "log_split",
    "set_logs",
    "user_call_site",
    "user_stacklevel",
]

CHANNELS = ("compiles", "recompiles", "guards", "fallbacks", "splits", "traces", "data")

_ROOT = logging.getLogger("thunder")
_handler: logging.Handler | None = None


def channel(name: str) -> logging.Logger:
    """The logger of a channel (``thunder.<name>``)."""
    assert name in CHANNELS, name
    return logging.getLogger(f"thunder.{name}")


def set_logs(spec: str | Iterable[str] | None = None, **channels: bool) -> None:
    """Switch channels on and off: ``set_logs("recompiles,guards")`` turns those on and the
    others off (``""``: all off, ``"all"``: all on); ``set_logs(traces=True)`` only the channels
    named. A channel on logs at INFO to stderr through one handler on the ``thunder`` logger;
    one off, at WARNING. Until then the levels are ``logging``'s own (set the ``thunder``
    logger's level to route them yourself). Unknown names are an error that lists the
    channels."""
    wanted: dict[str, bool] = {}
    if spec is not None:
        names = [n.strip() for n in (spec.split(",") if isinstance(spec, str) else spec)]
        names = [n for n in names if n]
        wanted = {c: False for c in CHANNELS}
        for name in names:
            if name == "all":
                wanted.update({c: True for c in CHANNELS})
            else:
                wanted[_known(name)] = True
    for name, on in channels.items():
        wanted[_known(name)] = bool(on)
    for name, on in wanted.items():
        channel(name).setLevel(logging.INFO if on else logging.WARNING)
    if any(channel(c).level == logging.INFO for c in CHANNELS):
        _install_handler()


def _known(name: str) -> str:
    if name not in CHANNELS:
        raise ValueError(
            f"thunder logs: unknown channel {name!r}; the channels are {', '.join(CHANNELS)} "
            "(or 'all')"
        )
    return name


def _install_handler() -> None:
    global _handler
    if _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        _ROOT.addHandler(_handler)


@functools.cache
def _own_files() -> tuple[tuple[str, ...], str]:
    """The folders of thunder's packages, and nn.Module's file (its call path is not the
    user's line either)."""
    import torch.nn.modules.module as module_calls

    folders = []
    for name in (
        "thunder",
        "thunder_ir",
        "thunder_transforms",
        "thunder_executors",
        "thunder_interp",
    ):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin is not None:
            folders.append(str(Path(spec.origin).parent) + os.sep)
    return tuple(folders), str(module_calls.__file__)


@functools.cache
def _dynamo_folder() -> str:
    """torch._dynamo's folder: its frames run the graphs of a split call, between the user's
    frame and thunder's."""
    # Beside torch's own file: not imported for this, nor found through ``sys.modules``, where
    # another thread may be importing it (a module without its spec yet).
    import torch

    return str(Path(torch.__file__).parent / "_dynamo") + os.sep


def _is_own(filename: str) -> bool:
    folders, module_calls = _own_files()
    # (and the code thunder generates: an epilogue replaying a warning runs in its own)
    return (
        filename.startswith((*folders, _dynamo_folder(), "<thunder ")) or filename == module_calls
    )


def is_own_file(filename: str) -> bool:
    """Whether ``filename`` is one of thunder's own source files."""
    return filename.startswith(_own_files()[0])


def _first_user_frame(frame: FrameType | None) -> tuple[FrameType | None, int]:
    """The first frame outside thunder from ``frame`` outwards, and how many frames out."""
    level = 1
    while frame is not None and _is_own(frame.f_code.co_filename):
        frame = frame.f_back
        level += 1
    return frame, level


def user_call_site() -> str | None:
    """The ``file:line`` of the innermost frame outside thunder: where the user called."""
    frame, _ = _first_user_frame(sys._getframe(1))
    return None if frame is None else f"{frame.f_code.co_filename}:{frame.f_lineno}"


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a warning the caller raises name the user's line."""
    frame, level = _first_user_frame(sys._getframe(1))
    return level if frame is not None else 1


def _on(name: str) -> logging.Logger | None:
    log = channel(name)
    return log if log.isEnabledFor(logging.INFO) else None


def log_compile(
    name: str, number: int, seconds: float, timings: dict[str, float], reason: str | None
) -> None:
    """A compilation: ``compiles`` always, ``recompiles`` when it is not the first."""
    where = user_call_site() or "?"
    stages = ", ".join(f"{k} {v:.3f} s" for k, v in timings.items() if k != "total")
    log = _on("compiles")
    if log is not None:
        log.info(
            "%s: program %d compiled in %.3f s (%s) for the call at %s",
            name,
            number,
            seconds,
            stages,
            where,
        )
    log = _on("recompiles")
    if log is not None and reason is not None:
        log.info("%s: recompiling (program %d) for the call at %s: %s", name, number, where, reason)


def log_program(name: str, traces: dict[str, object], data_reads: Callable[[], list[str]]) -> None:
    """The traces of a new program (``traces``) and its reads of tensor data (``data``)."""
    log = _on("traces")
    if log is not None:
        for title, trace in traces.items():
            log.info("%s: %s\n%s", name, title, trace)
    log = _on("data")
    reads = data_reads() if log is not None else []
    if log is not None and reads:
        log.info("%s: reads tensor data:\n  %s", name, "\n  ".join(reads))


def log_cache_mode(name: str, what: str) -> None:
    """The cache mode a function compiles with changed (``recompiles``)."""
    log = _on("recompiles")
    if log is not None:
        log.info("%s: at the call at %s, %s", name, user_call_site() or "?", what)


def log_guard_failure(name: str, failure: str) -> None:
    log = _on("guards")
    if log is not None:
        where = user_call_site() or "?"
        log.info("%s: a compiled program does not serve the call at %s: %s", name, where, failure)


def log_eager(name: str, reason: str) -> None:
    log = _on("fallbacks")
    if log is not None:
        log.info("%s: the call at %s ran eagerly: %s", name, user_call_site() or "?", reason)


def log_split(name: str, reason: str, segments: bool = False) -> None:
    log = _on("splits")
    if log is not None:
        log.info(
            "%s: the call at %s runs split %s: %s",
            name,
            user_call_site() or "?",
            "as thunder's own segments around the native call"
            if segments
            else "by torch.compile (thunder compiles the graphs around the native call)",
            reason,
        )


if os.environ.get("THUNDER_LOGS"):
    set_logs(os.environ["THUNDER_LOGS"])
