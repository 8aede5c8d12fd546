"""torch's argument parser takes only a bool for a ``bool`` parameter of a builtin:
``torch.sum(x, 0, 1)`` (``keepdim=1``) and ``x.var(0, unbiased=0)`` raise TypeError. An op
mirroring only builtins raises the same, where its decomposition would take the int as truthy.
Python-level callables (``torch.nn.functional``) take what their code takes, so their ops are
left alone."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["checking_bool_arguments"]

# The numpy spelling torch's argument parser also takes (``keepdims=``).
_NUMPY_NAMES = {"keepdims": "keepdim"}


def checking_bool_arguments(
    op: Callable[..., Any], fn: Callable[..., Any], torch_names: Sequence[str], op_name: str
) -> Callable[..., Any]:
    """``op`` (which calls ``fn``), raising torch's TypeError where a bool parameter of the
    torch builtins ``torch_names`` gets another value."""
    if not torch_names:
        return op
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return op
    positional = tuple(
        p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    )
    own_names = frozenset(p.name for p in params)
    names = tuple(torch_names)

    @functools.wraps(op)
    def checked(*args: Any, **kwargs: Any) -> Any:
        bools = _bool_parameters(names) & own_names
        if bools:
            given: list[tuple[str, Any, int | None]] = [
                (n, v, i + 1) for i, (n, v) in enumerate(zip(positional, args))
            ]
            given += [(_NUMPY_NAMES.get(n, n), v, None) for n, v in kwargs.items()]
            for name, value, position in given:
                if name in bools and not _is_bool(value):
                    where = f" (position {position})" if position is not None else ""
                    raise TypeError(
                        f"{op_name}(): argument '{name}'{where} must be bool, "
                        f"not {type(value).__name__}"
                    )
        return op(*args, **kwargs)

    return checked


def _is_bool(value: Any) -> bool:
    from thunder_ir.proxies import NumberProxy

    if isinstance(value, NumberProxy):
        return value.python_type is bool
    # None: the op's own default (``unbiased=None``), which no torch call can tell apart
    return value is None or isinstance(value, bool)


@functools.cache
def _bool_parameters(torch_names: tuple[str, ...]) -> frozenset[str]:
    """The parameter names typed ``bool`` in every aten schema of ``torch_names`` that has
    them; empty where one of the callables is a Python function (it parses its own
    arguments) or none has a schema."""
    from thunder_ir.ops._keywords import _schemas
    from thunder_ir.ops._registry import resolve_torch_name

    kinds: dict[str, set[bool]] = {}
    for qualified in torch_names:
        fn = resolve_torch_name(qualified)
        if fn is None:
            continue
        if inspect.isfunction(fn) or inspect.ismethod(fn) or isinstance(fn, property):
            return frozenset()
        for schema in _schemas(qualified.rsplit(".", 1)[-1]):
            for arg in schema.arguments:
                kinds.setdefault(arg.name, set()).add(str(arg.type) == "bool")
    return frozenset(name for name, is_bool in kinds.items() if is_bool == {True})
