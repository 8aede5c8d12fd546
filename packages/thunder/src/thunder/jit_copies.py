"""Copying and pickling jitted callables (``copy.copy``, ``copy.deepcopy``, ``pickle``,
``torch.save``).

Compiled programs are not state: a copy keeps what was given to ``thunder.jit`` (the function or
module, the options, executors, transforms and lookasides) and compiles again on its first call.
Executors registered by name travel as their names (they are process-wide tables of callables);
anything else is pickled by value, and what cannot be is named in the error.
"""

from __future__ import annotations

import copy
import io
import pickle
import sys
import types
from collections.abc import Sequence
from typing import Any

import torch

__all__ = [
    "check_function_picklable",
    "check_not_distributed",
    "check_picklable",
    "copy_transforms",
    "executors_from_state",
    "executors_state",
    "pickled_by_name",
]


def executors_state(executors: Sequence[Any]) -> tuple[Any, ...]:
    """Each executor as its registered name, or the object itself where it is not registered
    (checked to pickle)."""
    from thunder_executors import get_executor

    out: list[Any] = []
    for ex in executors:
        try:
            registered = get_executor(ex.name) is ex
        except (KeyError, RuntimeError):
            registered = False
        if not registered:
            check_picklable(ex, f"executor {ex!r} (not registered by name)")
        out.append(ex.name if registered else ex)
    return tuple(out)


def executors_from_state(state: Sequence[Any]) -> tuple[Any, ...]:
    """The executors ``executors_state`` described, in this process."""
    from thunder_executors import get_executor

    out = []
    for ex in state:
        if not isinstance(ex, str):
            out.append(ex)
            continue
        try:
            out.append(get_executor(ex))
        except (KeyError, RuntimeError) as e:
            raise RuntimeError(
                f"thunder: a jitted function was saved with executor {ex!r}, which cannot run "
                f"here: {e}"
            ) from None
    return tuple(out)


class _Probe(pickle.Pickler):
    """Pickles into nothing, tensors and storages by reference: whether an object pickles."""

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)):
            return id(obj)
        return None


class _Discard(io.RawIOBase):
    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        return len(b)


def check_picklable(obj: Any, what: str) -> None:
    """Raises a ``TypeError`` naming ``what`` when ``obj`` cannot be pickled."""
    try:
        _Probe(_Discard(), protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    except Exception as e:
        raise TypeError(
            f"thunder: cannot pickle the jitted function: its {what} cannot be pickled ({e}). "
            "Define it at module level (functions, classes), or register an executor by name "
            "(thunder_executors.register_executor)"
        ) from e


def pickled_by_name(obj: Any, fn: Any) -> str | None:
    """``fn``'s qualified name when ``obj`` itself is the module-level global of that name (a
    function decorated with ``@thunder.jit``): it then pickles by reference, as functions do."""
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    qualname = getattr(fn, "__qualname__", None)
    if module is None or not isinstance(qualname, str) or "<locals>" in qualname:
        return None
    found: Any = module
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return qualname if found is obj else None


def check_function_picklable(fn: Any) -> None:
    """A plain function pickles by reference: a lambda or a local function cannot."""
    if isinstance(fn, (types.FunctionType, types.MethodType, types.BuiltinFunctionType)):
        check_picklable(fn, f"function {getattr(fn, '__qualname__', fn)!r}")


def check_not_distributed(fn: Any) -> None:
    """A model ``thunder.distributed`` prepared is refused: its transforms hold this process's
    group and the identities of its parameters, which a copy would silently not synchronize."""
    if isinstance(fn, torch.nn.Module) and any(
        "_thunder_ddp" in m.__dict__ or "_thunder_fsdp" in m.__dict__ for m in fn.modules()
    ):
        raise TypeError(
            "thunder: a model prepared by thunder.distributed (ddp, fsdp) cannot be copied or "
            "pickled: its gradient synchronization belongs to this process and these parameters. "
            "Copy the model before preparing it, or save its state_dict (fsdp: full_state_dict)"
        )


def copy_transforms(transforms: Sequence[Any], memo: dict[int, Any]) -> tuple[Any, ...]:
    """Deep copies of the transforms (they may hold state of the module they were given)."""
    out = []
    for t in transforms:
        try:
            out.append(copy.deepcopy(t, memo))
        except Exception as e:
            raise TypeError(
                f"thunder: cannot copy the jitted function's transform {t!r}: {e}"
            ) from e
    return tuple(out)
