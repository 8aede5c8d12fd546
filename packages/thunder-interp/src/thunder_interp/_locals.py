"""What ``locals()`` (and ``vars()``, ``dir()``, ``exec``/``eval`` without mappings) sees in an
interpreted frame, version by version.

- Functions before 3.13: one dict per frame (CPython's ``f_locals``), refreshed from the local
  variables at each call; keys that are not local variables, and edits, stay until the next
  refresh overwrites them.
- Functions on 3.13+ (PEP 667): a fresh snapshot each call; ``frame.f_locals`` is a live view
  (``FrameLocalsProxy``): it reads and writes the variables, other keys kept aside on the frame.
- Class bodies and module code: the names mapping itself. Before 3.13 the refresh also writes
  the cells of a class body into it (3.12's ``__classdict__``). Inside a comprehension, which
  3.12+ inlines (PEP 709), its variables are shown too: 3.12 in a copy of the names, 3.13 in a
  snapshot of the frame's variables alone.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Mapping
from types import CellType
from typing import Any

from thunder_interp._frame import NULL, Frame

__all__ = ["FrameLocalsProxy", "frame_f_locals", "frame_locals"]

_SNAPSHOTS = sys.version_info >= (3, 13)


def frame_locals(f: Frame) -> Any:
    """The mapping ``locals()`` returns when called in ``f``."""
    if f.names is not None:
        return _namespace_locals(f, f.names)
    if _SNAPSHOTS:
        snapshot = {name: value for name, value in _local_values(f) if value is not NULL}
        snapshot.update(f.__dict__.get("extra_locals", ()))
        return snapshot
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


def frame_f_locals(f: Frame) -> Any:
    """``frame.f_locals`` of ``f``: on 3.13+ a function's is a live view (PEP 667)."""
    if _SNAPSHOTS and f.names is None:
        return FrameLocalsProxy(f)
    return frame_locals(f)


class FrameLocalsProxy(Mapping[Any, Any]):
    """CPython 3.13's ``FrameLocalsProxy`` of an interpreted function frame: the frame's bound
    variables (cells dereferenced), then the other keys written through a view, in the frame's
    ``extra_locals``. A write to a variable is the variable's; none can be removed."""

    __slots__ = ("_frame",)

    def __init__(self, frame: Frame) -> None:
        self._frame = frame

    def _index(self, key: Any) -> int:
        try:
            return self._frame.cc.local_names.index(key) if type(key) is str else -1
        except ValueError:
            return -1

    def _extra(self) -> dict[Any, Any]:
        extra: dict[Any, Any] = self._frame.__dict__.setdefault("extra_locals", {})
        return extra

    def __getitem__(self, key: Any) -> Any:
        i = self._index(key)
        if i >= 0:
            value = dict(_local_values(self._frame)).get(key, NULL)
            if value is not NULL:
                return value
        return self._frame.__dict__.get("extra_locals", {})[key]

    def __setitem__(self, key: Any, value: Any) -> None:
        f = self._frame
        i = self._index(key)
        if i < 0:
            self._extra()[key] = value
            return
        slot = f.lv[i]
        code = f.code
        if isinstance(slot, CellType) and key in (*code.co_cellvars, *code.co_freevars):
            hook = f.rt.cb_store_cell
            if hook is not None:
                hook(key, value, code, slot)
            slot.cell_contents = value
        else:
            f.lv[i] = value

    def __delitem__(self, key: Any) -> None:
        raise TypeError("cannot remove variables from FrameLocalsProxy")

    def __iter__(self) -> Iterator[Any]:
        names: list[Any] = [name for name, value in _local_values(self._frame) if value is not NULL]
        names += self._frame.__dict__.get("extra_locals", ())
        return iter(names)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __reversed__(self) -> Iterator[Any]:
        keys: list[Any] = list(self)
        return iter(keys[::-1])

    def __repr__(self) -> str:
        return repr(dict(self))

    def copy(self) -> dict[Any, Any]:
        return dict(self)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, other: Any = (), /) -> None:
        for key, value in dict(other).items():
            self[key] = value

    def __or__(self, other: Any) -> Any:
        if not isinstance(other, (dict, FrameLocalsProxy)):
            return NotImplemented
        result = dict(self)
        result.update(other)
        return result

    def __ror__(self, other: Any) -> Any:
        if not isinstance(other, dict):
            return NotImplemented
        result = dict(other)
        result.update(self)
        return result

    def __ior__(self, other: Any) -> FrameLocalsProxy:
        self.update(other)
        return self
