"""``warnings.warn`` called by the program: output, replayed by the epilogue on every call (as a
logger's output is), so that the warning filters in force at each call decide ("always",
"once", "error", ``pytest.warns``), as they do for eager's calls. Not emitted while tracing: the
first call's epilogue emits it."""

from __future__ import annotations

import dis
import functools
import inspect
import logging
import os
import sys
import types
import warnings
from typing import Any

import torch

from thunder.access import ROOT, Access
from thunder.binding.state import Write
from thunder.logs import _first_user_frame
from thunder_interp._frames import FrameView, _user_frames, warn_args, warn_from, warning_site

__all__ = [
    "LogReplay",
    "WarningReplay",
    "WarningWouldRaise",
    "checking_warning_filters",
    "legacy_reduction_lookasides",
    "log_site",
    "warning_lookaside",
]


class WarningReplay:
    """One ``warnings.warn`` call site of a program: its category and the frame the warning is
    attributed to, an interpreted frame's file, line and module (``site``), or the ``outside``-th
    frame out of the program (1: the caller of the jitted function), found at each call."""

    __slots__ = ("category", "outside", "site")

    def __init__(self, category: type[Warning], site: Any, outside: int) -> None:
        self.category = category
        self.site = site
        self.outside = outside

    def __call__(self, message: Any, source: Any) -> None:
        site = self.site
        if site is None:
            frame, _ = _first_user_frame(sys._getframe(1))
            for _ in range(self.outside - 1):
                frame = frame.f_back if frame is not None else None
            if frame is None:
                warnings.warn(message, self.category, 1 << 30, source)  # past the stack: "sys"
                return
            code = frame.f_code
            site = (code.co_filename, frame.f_lineno, code.co_name, frame.f_globals)
        filename, lineno, name, module_globals = site
        warn_from(filename, lineno, name, module_globals, message, self.category, source)

    def __repr__(self) -> str:
        where = f"{self.site[0]}:{self.site[1]}" if self.site else f"caller+{self.outside - 1}"
        return f"<warning {self.category.__name__} at {where}>"


def warning_lookaside(binder: Any) -> Any:
    """The lookaside of ``warnings.warn`` for ``binder``'s tracing run: a ``warn`` write."""

    def warn(*args: Any, **kwargs: Any) -> None:
        try:
            message, category, stacklevel, source, prefixes = warn_args(*args, **kwargs)
        except TypeError:
            return warnings.warn(*args, **kwargs)  # CPython's TypeError
        if isinstance(message, Warning):
            category = type(message)
        elif category is None:
            category = UserWarning
        if (
            not (isinstance(category, type) and issubclass(category, Warning))
            or type(stacklevel) is not int
            or type(prefixes) is not tuple
        ):
            return warnings.warn(*args, **kwargs)  # CPython's TypeError
        if prefixes and stacklevel < 2:
            stacklevel = 2
        frame, outside = warning_site(stacklevel, prefixes)
        site = None
        if frame is not None:
            code = frame.f_code
            site = (code.co_filename, frame.f_lineno, code.co_name, frame.f_globals)
        replay = WarningReplay(category, site, outside)
        value = (
            replay,
            binder._template(message, "warnings.warn's message"),
            binder._template(source, "warnings.warn's source"),
        )
        binder.effects.writes.append(Write("warn", Access(ROOT, None), "warn", value))
        return None

    return warn


def _legacy_warning_site(fn: Any) -> tuple[Any, ...]:
    """Where eager's deprecation warning of the loss ``fn`` is attributed (stacklevel=2 of
    ``_Reduction.legacy_get_string``): the line of its caller, ``fn`` or ``legacy_get_enum``."""
    for ins in dis.get_instructions(fn):
        if ins.argval == "legacy_get_enum":
            return _legacy_warning_site(torch.nn._reduction.legacy_get_enum)
        if ins.argval == "legacy_get_string" and ins.positions is not None:
            line = ins.positions.lineno or fn.__code__.co_firstlineno
            return (fn.__code__.co_filename, line, fn.__name__, fn.__globals__)
    return (fn.__code__.co_filename, fn.__code__.co_firstlineno, fn.__name__, fn.__globals__)


def legacy_reduction_lookasides(binder: Any, table: dict[Any, Any]) -> dict[Any, Any]:
    """The losses of torch.nn.functional given the legacy ``size_average``/``reduce``: eager
    warns that they are deprecated on every call (the filters decide), from the loss's line
    that folds them into ``reduction``. The op gets the folded ``reduction``, so that a kernel
    of torch's that runs it warns no second time."""
    return {
        fn: _legacy_reduction_call(binder, fn, sig, table[fn])
        for fn, sig in _legacy_losses()
        if fn in table
    }


@functools.cache
def _legacy_losses() -> tuple[tuple[Any, inspect.Signature], ...]:
    found = []
    for fn in vars(torch.nn.functional).values():
        if not isinstance(fn, types.FunctionType):
            continue
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):
            continue
        if {"size_average", "reduce", "reduction"} <= sig.parameters.keys():
            found.append((fn, sig))
    return tuple(found)


def _legacy_reduction_call(binder: Any, fn: Any, sig: inspect.Signature, impl: Any) -> Any:
    site: tuple[Any, ...] | None = None

    def call(*args: Any, **kwargs: Any) -> Any:
        nonlocal site
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            return impl(*args, **kwargs)  # the op's own error
        size_average = bound.arguments.get("size_average")
        reduce = bound.arguments.get("reduce")
        if size_average is None and reduce is None:
            return impl(*args, **kwargs)
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        reduction = "mean" if size_average and reduce else "sum" if reduce else "none"
        if site is None:
            site = _legacy_warning_site(fn)
        message = (
            "size_average and reduce args will be deprecated, please use "
            f"reduction='{reduction}' instead."
        )
        replay = WarningReplay(UserWarning, site, 0)
        value = (replay, message, None)
        binder.effects.writes.append(Write("warn", Access(ROOT, None), "warn", value))
        bound.arguments["size_average"] = None
        bound.arguments["reduce"] = None
        bound.arguments["reduction"] = reduction
        return impl(*bound.args, **bound.kwargs)

    return call


_LOGGING_FILE = os.path.normcase(logging.__file__)


def _logging_internal(frame: Any) -> bool:
    """``logging``'s own test of a frame it skips when it looks for the caller."""
    filename = os.path.normcase(frame.f_code.co_filename)
    return filename == _LOGGING_FILE or ("importlib" in filename and "_bootstrap" in filename)


def log_site(stacklevel: int) -> tuple[tuple[Any, ...] | None, int]:
    """Where a logger's call made now by the innermost interpreted frame (from a lookaside)
    attributes its record (``Logger.findCaller``): ``(site, 0)`` with the interpreted frame's
    file, line, function and globals, or ``(None, k)`` for the ``k``-th frame out of the
    program (1: the caller of the jitted function)."""
    frame = next((v for v, _ in _user_frames(sys._getframe(1)) if type(v) is FrameView), None)
    while frame is not None and type(frame) is FrameView and _logging_internal(frame):
        frame = frame.f_back
    level = max(stacklevel, 1)
    while level > 1 and type(frame) is FrameView:
        frame = frame.f_back
        while type(frame) is FrameView and _logging_internal(frame):
            frame = frame.f_back
        level -= 1
    if type(frame) is not FrameView:
        return None, level
    code = frame.f_code
    return (code.co_filename, frame.f_lineno, code.co_name, frame.f_globals), 0


_LOG_STUB = compile(
    "lambda method, args, kwargs: method(*args, **kwargs)", "<stub>", "eval"
).co_consts[0]


@functools.lru_cache(maxsize=256)
def _log_stub_code(filename: str, lineno: int, name: str) -> types.CodeType:
    code: types.CodeType = _LOG_STUB.replace(
        co_filename=filename, co_firstlineno=max(lineno, 1), co_name=name
    )
    return code


class LogReplay:
    """One logger call site of a program, replayed by the epilogue: the record carries the
    file, line and function eager's does (the interpreted frame ``site``, or the ``outside``-th
    frame out of the program found at each call), as if logged there (the call is made from a
    stub frame of that file, line and name, which ``findCaller`` finds)."""

    __slots__ = ("method", "outside", "site")

    def __init__(self, method: str, site: tuple[Any, ...] | None, outside: int) -> None:
        self.method = method
        self.site = site
        self.outside = outside

    def __call__(self, logger: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        site = self.site
        if site is None:
            frame, _ = _first_user_frame(sys._getframe(1))
            for _ in range(self.outside - 1):
                if frame is not None and frame.f_back is not None:
                    frame = frame.f_back  # (findCaller stops at the last frame)
            if frame is None:
                return getattr(logger, self.method)(*args, **kwargs)
            code = frame.f_code
            site = (code.co_filename, frame.f_lineno, code.co_name, frame.f_globals)
        filename, lineno, name, module_globals = site
        stub = types.FunctionType(_log_stub_code(filename, lineno, name), module_globals)
        return stub(getattr(logger, self.method), args, kwargs)

    def __repr__(self) -> str:
        where = f"{self.site[0]}:{self.site[1]}" if self.site else f"caller+{self.outside - 1}"
        return f"<{self.method} at {where}>"


class WarningWouldRaise(Exception):
    """Raised before a program's computation where one of its replayed ``warnings.warn``
    calls may be turned into an error by the filters in force (``simplefilter("error")``,
    ``pytest -W error``): eager raises at the call, before the program's later writes and
    random draws, which the epilogue's replay would come after. The call runs eagerly."""


def _may_be_error(replay: WarningReplay, message: Any) -> bool:
    """Whether ``warnings.warn`` as the replay issues it may take the "error" action (the
    first matching filter's, CPython's ``warn_explicit``); a message or site known only at
    the call (computed, or a frame out of the program) is taken to match."""
    category = replay.category
    text = str(message) if isinstance(message, (str, Warning)) else None
    site = replay.site
    module = None
    lineno = None
    if site is not None:
        lineno = site[1]
        module_globals = site[3]
        module = module_globals.get("__name__", "<string>") if module_globals else "<string>"
    for action, msg, cat, mod, ln in warnings.filters:
        if (
            (msg is None or text is None or msg.match(text))
            and issubclass(category, cat)
            and (mod is None or not isinstance(module, str) or mod.match(module))
            and (ln == 0 or lineno is None or lineno == ln)
        ):
            return bool(action == "error")
    return bool(warnings.defaultaction == "error")  # type: ignore[attr-defined]


# The filters last scanned (the list, its length, its first entry, the default action) and
# whether one says "error": ``simplefilter``, ``filterwarnings``, ``resetwarnings`` and
# ``catch_warnings`` change one of the four, so that a call mostly skips the scan.
_filters_seen: tuple[Any, int, Any, Any, bool] = (None, -1, None, None, False)


def _scan_filters() -> tuple[Any, int, Any, Any, bool]:
    global _filters_seen
    filters = warnings.filters
    default = warnings.defaultaction  # type: ignore[attr-defined]
    error = default == "error" or any(entry[0] == "error" for entry in filters)
    _filters_seen = (filters, len(filters), filters[0] if filters else None, default, error)
    return _filters_seen


def checking_warning_filters(
    computation: Any, replays: tuple[tuple[WarningReplay, Any], ...]
) -> Any:
    """``computation``, raising ``WarningWouldRaise`` before it runs where one of the program's
    replayed warnings (``replays``: each with its message template) may be an error now. The
    common case, no "error" filter, costs one scan of the filters."""

    def check() -> None:
        for replay, message in replays:
            if _may_be_error(replay, message):
                raise WarningWouldRaise(
                    f"its warning {replay!r} may be an error under the warning filters"
                )

    def run(*args: Any) -> Any:
        filters = warnings.filters
        seen = _filters_seen
        if (
            seen[0] is not filters
            or seen[1] != len(filters)
            or (seen[2] is not filters[0] if filters else seen[2] is not None)
            or seen[3] is not warnings.defaultaction  # type: ignore[attr-defined]
        ):
            seen = _scan_filters()
        if seen[4]:
            check()
        return computation(*args)

    run.__wrapped__ = computation  # type: ignore[attr-defined]
    return run
