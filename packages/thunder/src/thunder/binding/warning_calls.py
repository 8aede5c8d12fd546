"""``warnings.warn`` called by the program: output, replayed by the epilogue on every call (as a
logger's output is), so that the warning filters in force at each call decide ("always",
"once", "error", ``pytest.warns``), as they do for eager's calls. Not emitted while tracing: the
first call's epilogue emits it."""

from __future__ import annotations

import sys
import warnings
from typing import Any

from thunder.access import ROOT, Access
from thunder.binding.state import Write
from thunder.logs import _first_user_frame
from thunder_interp._frames import warn_args, warn_from, warning_site

__all__ = ["WarningReplay", "warning_lookaside"]


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
