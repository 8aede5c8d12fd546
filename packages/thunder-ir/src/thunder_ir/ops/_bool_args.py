"""torch's argument parser takes only a bool for a ``bool`` parameter of a builtin:
``torch.sum(x, 0, 1)`` (``keepdim=1``) and ``x.var(0, unbiased=0)`` raise TypeError. An op
mirroring only builtins raises the same, where its decomposition would take the int as truthy.
Python-level callables (``torch.nn.functional``) take what their code takes: a parameter they
only hand on to a builtin's ``bool`` parameter (``F.dropout``'s ``training``, ``F.kl_div``'s
``log_target``) raises there, the others are left alone."""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
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
    names = tuple(torch_names)
    # None is torch's TypeError too; taken only where it is the op's own default (``unbiased=
    # None``), which the op's internal callers may pass on
    none_defaults = frozenset(p.name for p in params if p.default is None)

    @functools.wraps(op)
    def checked(*args: Any, **kwargs: Any) -> Any:
        # (a keyword may be a builtin's own spelling: torch.dropout's ``train=``)
        bools = _bool_parameters(names)
        if bools:
            given: list[tuple[str, Any, int | None]] = [
                (n, v, i + 1) for i, (n, v) in enumerate(zip(positional, args))
            ]
            given += [(_NUMPY_NAMES.get(n, n), v, None) for n, v in kwargs.items()]
            for name, value, position in given:
                if name in bools and not (
                    _is_bool(value) or (value is None and name in none_defaults)
                ):
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
    return isinstance(value, bool)


@functools.cache
def _bool_parameters(torch_names: tuple[str, ...]) -> frozenset[str]:
    """The parameter names typed ``bool`` in every aten schema of ``torch_names`` that has
    them, and handed on only to such parameters by every Python function among them (which
    parses its own arguments); empty where none has a schema."""
    from thunder_ir.ops._keywords import _schemas
    from thunder_ir.ops._registry import resolve_torch_name

    kinds: dict[str, set[bool]] = {}
    for qualified in torch_names:
        fn = resolve_torch_name(qualified)
        if fn is None:
            continue
        if inspect.ismethod(fn) or isinstance(fn, property):
            return frozenset()
        if inspect.isfunction(fn):
            handed_on = _handed_on_to_bool_parameters(fn)
            for name in inspect.signature(fn).parameters:
                kinds.setdefault(name, set()).add(name in handed_on)
            continue
        for schema in _schemas(qualified.rsplit(".", 1)[-1]):
            for arg in schema.arguments:
                kinds.setdefault(arg.name, set()).add(str(arg.type) == "bool")
    return frozenset(name for name, is_bool in kinds.items() if is_bool == {True})


# Calls in a Python-level torch function that see every argument without using it.
_OVERRIDE_CALLS = frozenset(
    {
        "handle_torch_function",
        "has_torch_function",
        "has_torch_function_unary",
        "has_torch_function_variadic",
    }
)


def _handed_on_to_bool_parameters(fn: Any) -> frozenset[str]:
    """The parameters of the Python function ``fn`` its code uses only as arguments of a torch
    builtin's ``bool`` parameter (``_VF.dropout(input, p, training)``): an int there raises."""
    from thunder_ir.ops._keywords import _schemas

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    except (OSError, TypeError, SyntaxError):
        return frozenset()
    params = frozenset(inspect.signature(fn).parameters)
    as_bool: set[str] = set()
    other: set[str] = set()
    handed: set[int] = set()  # ids of the Name nodes passed to a bool parameter
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        callee = ast.unparse(node.func)
        if callee.rsplit(".", 1)[-1] in _OVERRIDE_CALLS:
            handed.update(id(n) for n in ast.walk(node) if isinstance(n, ast.Name))
            continue
        if not _is_builtin(fn, callee):
            continue
        schemas = _schemas(callee.rsplit(".", 1)[-1])
        for i, arg in enumerate(node.args):
            found = [s.arguments[i] if i < len(s.arguments) else None for s in schemas]
            if isinstance(arg, ast.Name) and _all_bool(found):
                handed.add(id(arg))
                as_bool.add(arg.id)
        for kw in node.keywords:
            found = [next((a for a in s.arguments if a.name == kw.arg), None) for s in schemas]
            if isinstance(kw.value, ast.Name) and _all_bool(found):
                handed.add(id(kw.value))
                as_bool.add(kw.value.id)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in params and id(node) not in handed:
            other.add(node.id)
    return frozenset((as_bool - other) & params)


def _is_builtin(fn: Any, dotted: str) -> bool:
    """Whether ``dotted`` names, in ``fn``'s globals, a torch builtin (not Python code)."""
    root, *rest = dotted.split(".")
    obj = fn.__globals__.get(root)
    for part in rest:
        obj = getattr(obj, part, None)
    return obj is not None and not inspect.isfunction(obj) and callable(obj)


def _all_bool(found: list[Any]) -> bool:
    """Whether every schema has the argument, typed ``bool``."""
    return bool(found) and all(a is not None and str(a.type) == "bool" for a in found)
