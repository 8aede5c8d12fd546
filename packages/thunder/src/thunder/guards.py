"""Prologue checks the jit adds beyond the IR's prologue prims (printed as ``thunder_guards``)."""

from __future__ import annotations

from typing import Any

import torch

from thunder_ir import Symbol
from thunder_ir.prims.prologue import GuardFailure
from thunder_ir.tags import OpTag

__all__ = [
    "HOOK_ATTRIBUTES",
    "check_has_attribute",
    "check_no_module_hooks",
    "is_plain_module_member",
    "unpack_module_attr",
]

# nn.Module attributes that ``Module.__call__`` reads to decide whether it takes its fast path.
HOOK_ATTRIBUTES = frozenset(
    {
        "_compiled_call_impl",
        "_backward_hooks",
        "_backward_pre_hooks",
        "_forward_hooks",
        "_forward_pre_hooks",
        "_forward_hooks_with_kwargs",
        "_forward_hooks_always_called",
        "_forward_pre_hooks_with_kwargs",
    }
)


def _check_no_module_hooks(module: Any) -> None:
    d = module.__dict__
    if (
        d["_forward_hooks"]
        or d["_forward_pre_hooks"]
        or d["_backward_hooks"]
        or d["_backward_pre_hooks"]
        or d.get("_compiled_call_impl") is not None
    ):
        raise GuardFailure(f"hooks were registered on the {type(module).__name__} module")


def _no_meta(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("prologue checks are bound directly, not traced")


check_no_module_hooks = Symbol(
    "check_no_module_hooks",
    _no_meta,
    module="thunder_guards",
    is_prim=True,
    tags=(OpTag.PROLOGUE, OpTag.DONT_DCE),
    impl=_check_no_module_hooks,
)


def _check_has_attribute(obj: Any, name: str, expected: bool) -> None:
    if hasattr(obj, name) is not expected:
        raise GuardFailure(
            f"expected the attribute {name!r} to be {'set' if expected else 'unset'}"
        )


# hasattr(obj, name) / getattr(obj, name, default) in the program: whether the attribute exists.
check_has_attribute = Symbol(
    "check_has_attribute",
    _no_meta,
    module="thunder_guards",
    is_prim=True,
    tags=(OpTag.PROLOGUE, OpTag.DONT_DCE),
    impl=_check_has_attribute,
)


# -- reading a module's parameters, buffers and submodules --------------------------------------


def is_plain_module_member(module: Any, name: str) -> bool:
    """Whether ``module.<name>`` is answered by ``nn.Module.__getattr__`` from the parameter,
    buffer or submodule dicts: the type neither customizes attribute lookup nor defines ``name``,
    and the instance dict does not hold it. The prologue then reads the dicts directly."""
    cls = type(module)
    if not isinstance(module, torch.nn.Module):
        return False
    if cls.__getattribute__ is not object.__getattribute__:  # type: ignore[comparison-overlap]
        return False
    if cls.__getattr__ is not torch.nn.Module.__getattr__:
        return False
    if any(name in vars(c) for c in cls.__mro__):
        return False
    d = module.__dict__
    if name in d:
        return False
    return any(name in d.get(store, ()) for store in ("_parameters", "_buffers", "_modules"))


def _unpack_module_attr(module: Any, name: str) -> Any:
    # nn.Module.__getattr__'s own order, without the failed ordinary lookup before it; anything
    # unusual (the name now in the instance dict, a module without the dicts) takes getattr.
    d = module.__dict__
    if name not in d:
        try:
            members = d["_parameters"]
            if name in members:
                return members[name]
            members = d["_buffers"]
            if name in members:
                return members[name]
            members = d["_modules"]
            if name in members:
                return members[name]
        except KeyError:
            pass
    try:
        return getattr(module, name)
    except AttributeError:
        raise GuardFailure(f"missing attribute {name!r}") from None


unpack_module_attr = Symbol(
    "unpack_module_attr",
    _no_meta,
    module="thunder_guards",
    is_prim=True,
    tags=(OpTag.PROLOGUE,),
    impl=_unpack_module_attr,
)
