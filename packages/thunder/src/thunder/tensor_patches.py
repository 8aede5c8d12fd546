"""Attributes of ``torch.Tensor`` replaced by the user or a library (``torch.Tensor.relu =
my_relu``, ``torch.Tensor.__add__ = ...``, a property): a proxy answers Tensor's methods with
thunder's own ops, so tracing finds such replacements here (``patches``) and runs them, and the
cache key holds the state of the replacements (``patch_token``), so a change between calls
selects another program, never a stale one.

The check per call is one C call: the version tag CPython gives ``torch.Tensor``'s dict on every
change (torch's ``dict_version``), compared with the last one seen."""

from __future__ import annotations

import gc
import itertools
import types
from typing import Any

import torch

from thunder_interp._slots import set_stand_in
from thunder_ir import TensorProxy

__all__ = ["MISSING", "PatchState", "original", "patch_token", "patches"]

MISSING: Any = object()  # an attribute of torch's deleted from torch.Tensor


def _class_dict(cls: type) -> dict[str, Any]:
    """The dict behind ``cls.__dict__`` (a read-only proxy of it)."""
    (d,) = gc.get_referents(cls.__dict__)
    return d  # type: ignore[no-any-return]


try:
    from torch._C._dynamo.guards import dict_version as _dict_version
except ImportError:  # pragma: no cover - a torch without it: the dict is compared every call
    _never_seen = itertools.count(-1, -1)

    def _dict_version(d: dict[Any, Any]) -> int:
        return next(_never_seen)


def _torchs_own(value: Any) -> bool:
    """Whether ``value`` (found in ``torch.Tensor.__dict__`` when thunder was imported) is
    torch's own, not set there by a library imported before thunder."""
    func = value.fget if isinstance(value, property) else value
    func = getattr(func, "__func__", func)
    if isinstance(func, types.FunctionType):
        module = func.__module__ or ""
        return module == "torch" or module.startswith("torch.")
    return True


_TENSOR_DICT = _class_dict(torch.Tensor)
_BASE_DICT = _class_dict(torch._C.TensorBase)
_ORIGINAL = {k: v for k, v in _TENSOR_DICT.items() if _torchs_own(v)}


def original(name: str) -> Any:
    """torch's own ``torch.Tensor.name``, whatever replaced it since (the tables that map
    torch's callables to the IR's must not map a replacement)."""
    found = _ORIGINAL.get(name, MISSING)
    return getattr(torch._C.TensorBase, name) if found is MISSING else found


class PatchState:
    """One set of replaced attributes of ``torch.Tensor`` (name -> what it holds, ``MISSING``
    where deleted): the key's part for them, compared by identity (one object per set)."""

    __slots__ = ("patches",)

    def __init__(self, patches: dict[str, Any]) -> None:
        self.patches = patches  # (holds the replacements, so their ids are not reused)

    def __repr__(self) -> str:
        return f"<torch.Tensor with {', '.join(sorted(self.patches))} replaced>"


_STATES: dict[tuple[tuple[str, int], ...], PatchState] = {}
_NONE: dict[str, Any] = {}
# [the version of torch.Tensor's dict last seen, its PatchState (None: nothing replaced), the
# replaced attributes]: the signature reads the first two inline.
SEEN: list[Any] = [None, None, _NONE]


def _refresh() -> None:
    version = _dict_version(_TENSOR_DICT)
    current = {
        k: v
        for k, v in _TENSOR_DICT.items()
        if _ORIGINAL.get(k, _BASE_DICT.get(k, MISSING)) is not v  # (a base's own put back)
    }
    current.update(dict.fromkeys(_ORIGINAL.keys() - _TENSOR_DICT.keys(), MISSING))
    if not current:
        state, current = None, _NONE
    else:
        ident = tuple(sorted((k, id(v)) for k, v in current.items()))
        state = _STATES.get(ident)
        if state is None:
            state = _STATES[ident] = PatchState(current)
        current = state.patches
    # A proxy's operators (``x + y``) look its special methods up only while one is replaced.
    set_stand_in(TensorProxy, any(k[:2] == "__" for k in current))
    # (the version last: a reader that sees it sees the state that goes with it)
    SEEN[1], SEEN[2] = state, current
    SEEN[0] = version


def patch_token() -> PatchState | None:
    """The state of torch.Tensor's replaced attributes, for the cache key."""
    if _dict_version(_TENSOR_DICT) != SEEN[0]:
        _refresh()
    token: PatchState | None = SEEN[1]
    return token


def patches() -> dict[str, Any]:
    """The replaced attributes of torch.Tensor now (name -> value, ``MISSING`` if deleted)."""
    if _dict_version(_TENSOR_DICT) != SEEN[0]:
        _refresh()
    found: dict[str, Any] = SEEN[2]
    return found


# Names the signature's generated code reads (one C call and a comparison per call).
SIGNATURE_GLOBALS = {
    "_tensor_dict_version": _dict_version,
    "_TENSOR_DICT": _TENSOR_DICT,
    "_TENSOR_PATCHES": SEEN,
    "tensor_patch_token": patch_token,
}
SIGNATURE_EXPR = (
    "(_TENSOR_PATCHES[1] if _tensor_dict_version(_TENSOR_DICT) == _TENSOR_PATCHES[0] "
    "else tensor_patch_token())"
)
