"""What ``locals()`` (and ``vars()``, ``dir()``, ``exec``/``eval`` without mappings) sees in an
interpreted frame, version by version.

- Functions before 3.13: one dict per frame (CPython's ``f_locals``), refreshed from the local
  variables at each call; keys that are not local variables, and edits, stay until the next
  refresh overwrites them.
- Functions on 3.13+ (PEP 667): a fresh snapshot each call.
- Class bodies and module code: the names mapping itself. Before 3.13 the refresh also writes
  the cells of a class body into it (3.12's ``__classdict__``). Inside a comprehension, which
  3.12+ inlines (PEP 709), its variables are shown too: 3.12 in a copy of the names, 3.13 in a
  snapshot of the frame's variables alone.
"""

from __future__ import annotations

import contextlib
import sys
from types import CellType
from typing import Any

from thunder_interp._frame import NULL, Frame

__all__ = ["frame_locals"]

_SNAPSHOTS = sys.version_info >= (3, 13)


def frame_locals(f: Frame) -> Any:
    """The mapping ``locals()`` returns when called in ``f``."""
    if f.names is not None:
        return _namespace_locals(f, f.names)
    if _SNAPSHOTS:
        return {name: value for name, value in _local_values(f) if value is not NULL}
    try:
        cache = f.locals_cache
    except AttributeError:
        cache = f.locals_cache = {}
    for name, value in _local_values(f):
        if value is NULL:
            cache.pop(name, None)
        else:
            cache[name] = value
    return cache


def _namespace_locals(f: Frame, names: Any) -> Any:
    code = f.code
    if not code.co_varnames and not code.co_cellvars:
        return names
    # Free variables never show in a namespace; variable names are those of inlined comprehensions.
    free = frozenset(code.co_freevars)
    comprehension_names = frozenset(code.co_varnames)
    values = [(name, value) for name, value in _local_values(f) if name not in free]
    if _SNAPSHOTS:
        if any(value is not NULL for name, value in values if name in comprehension_names):
            return {name: value for name, value in values if value is not NULL}
        return names
    comprehension_values: dict[str, Any] = {}
    for name, value in values:
        if name in comprehension_names:
            if value is not NULL:
                comprehension_values[name] = value
        elif value is not NULL:
            names[name] = value
        else:
            with contextlib.suppress(KeyError):
                del names[name]
    if comprehension_values:
        return {**names, **comprehension_values}
    return names


def _local_values(f: Frame) -> list[tuple[str, Any]]:
    """``(name, value)`` of every local slot of ``f``, cells dereferenced; NULL when unbound."""
    code = f.code
    cell_names = frozenset(code.co_cellvars) | frozenset(code.co_freevars)
    result: list[tuple[str, Any]] = []
    for name, value in zip(f.cc.local_names, f.lv):
        if isinstance(value, CellType) and name in cell_names:
            try:
                value = value.cell_contents
            except ValueError:
                value = NULL
        result.append((name, value))
    return result
