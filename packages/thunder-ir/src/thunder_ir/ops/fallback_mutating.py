"""Custom ops that write into their arguments (``torch.library.custom_op(..., mutates_args=...)``,
a schema argument marked ``Tensor(a!)``): recorded as their functional variant, which runs the op
on copies of the arguments it writes and returns them after its own result, then a ``copy_`` of
each into its argument: a write the trace's alias analysis and functionalization know.

The functional variant is named for the torch fallback by a dotted path through ``FUNCTIONAL``
(``thunder_ir.ops.fallback_mutating.FUNCTIONAL.mylib.bump.default`` for
``torch.ops.mylib.bump.default``), so a printed trace names it and any process resolves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

__all__ = ["FUNCTIONAL", "call_mutating_custom_op", "written_arguments"]


def written_arguments(fn: Any) -> list[tuple[int, str]]:
    """The (position, name) of each argument ``fn``'s schema marks as written (``Tensor(a!)``);
    empty for a callable that is not an op overload."""
    if not isinstance(fn, torch._ops.OpOverload):
        return []
    return [
        (i, a.name)
        for i, a in enumerate(fn._schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write
    ]


def _functional(op: torch._ops.OpOverload) -> Any:
    written = written_arguments(op)

    def run(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        positional, keywords = list(args), dict(kwargs)
        copies = []
        for i, name in written:
            if i < len(positional):
                positional[i] = positional[i].clone()
                copies.append(positional[i])
            else:
                keywords[name] = keywords[name].clone()
                copies.append(keywords[name])
        out = op(*positional, **keywords)
        return (out, *copies)

    run.__qualname__ = run.__name__ = f"functional_{op._opname}"
    return run


class _Path:
    """``FUNCTIONAL.<namespace>.<op>.<overload>``: the functional variant of that op."""

    def __init__(self, parts: tuple[str, ...]) -> None:
        self._parts = parts

    def __getattr__(self, name: str) -> Any:
        parts = (*self._parts, name)
        if len(parts) < 3:
            return _Path(parts)
        namespace, op, overload = parts
        return _functional(getattr(getattr(getattr(torch.ops, namespace), op), overload))


FUNCTIONAL = _Path(())


def call_mutating_custom_op(
    fn: torch._ops.OpOverload, args: Sequence[Any], kwargs: dict[str, Any]
) -> Any:
    """Records ``fn(*args, **kwargs)`` (an op that writes into the arguments its schema marks):
    its functional variant through the torch fallback, then the copies into those arguments.
    Returns what ``fn`` returns."""
    from thunder_ir.ops.conversion import copy_
    from thunder_ir.ops.fallback import (
        DataDependentFallbackError,
        torch_fallback,
        torch_fallback_sized,
    )
    from thunder_ir.proxies import can_read_data

    name = f"{__name__}.FUNCTIONAL.{fn.namespace}.{fn._opname}.{fn._overloadname}"
    try:
        out, *new = torch_fallback(name, *args, **kwargs)
    except DataDependentFallbackError:  # no fake implementation: run on the call's values
        if not can_read_data():
            raise
        (out, *new), _ = torch_fallback_sized(name, *args, **kwargs)
    for (i, arg_name), value in zip(written_arguments(fn), new):
        target = args[i] if i < len(args) else kwargs[arg_name]
        copy_(target, value)
    return out
