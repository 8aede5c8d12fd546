"""Where the traced program is: the user's ``file:line``, outside torch and thunder's own code.

The binder sets :func:`program_location` as the trace's ``locate``: every bound symbol recorded
carries the line of the program that made the call (``BoundSymbol.location``), so an error about
a call names it without walking a traceback."""

from __future__ import annotations

import functools
import os

from thunder_interp import running_line

__all__ = ["is_library_file", "program_location"]


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    import torch

    import thunder
    import thunder_executors
    import thunder_interp
    import thunder_ir
    import thunder_transforms

    modules = (thunder, thunder_interp, thunder_ir, thunder_transforms, thunder_executors, torch)
    return tuple(os.path.dirname(os.path.abspath(m.__file__ or "")) + os.sep for m in modules)


@functools.lru_cache(maxsize=4096)
def is_library_file(filename: str) -> bool:
    """Whether code of ``filename`` is torch's or thunder's (or generated: ``<...>``), not the
    program's."""
    return filename.startswith("<") or os.path.abspath(filename).startswith(_library_dirs())


def program_location() -> str | None:
    """The ``file:line`` of the innermost frame of the program running now outside torch and
    thunder (interpreted, or native above the interpretation), or None."""
    found = running_line(is_library_file)
    return None if found is None else f"{found[0]}:{found[1]}"
