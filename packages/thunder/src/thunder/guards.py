"""Prologue checks the jit adds beyond the IR's prologue prims (printed as ``thunder_guards``)."""

from __future__ import annotations

from typing import Any

from thunder_ir import Symbol
from thunder_ir.prims.prologue import GuardFailure
from thunder_ir.tags import OpTag

__all__ = ["HOOK_ATTRIBUTES", "check_has_attribute", "check_no_module_hooks"]

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
