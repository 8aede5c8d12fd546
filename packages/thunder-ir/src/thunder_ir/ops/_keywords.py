"""Calls of an op with torch's keyword names.

An op's decomposition names its parameters as its body reads best (``ones(*size)``,
``ones_like(a)``); torch's callables take the same arguments by other names (``ones(size=...)``,
``ones_like(input=...)``, ``randint(high=..., size=...)``). A call whose keywords the op does not
take is rebound by the torch callable's own signature: the ``inspect`` signature of a Python
function (``torch.nn.functional``), else the aten schemas of the op's torch names. The
arguments then go to the op by position, in the order torch's Python API takes them, which is
the order every positional call of the op already follows.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["accepting_torch_keywords", "own_arguments"]

_SELF = ("self", "input")
# The numpy spellings torch's argument parser also takes (``sum(x, axis=0)``, ``cat(axis=)``).
_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim", "x": "input", "x1": "input", "x2": "other"}


def accepting_torch_keywords(
    fn: Callable[..., Any], torch_names: Sequence[str]
) -> Callable[..., Any]:
    """``fn``, also taking its arguments by the keyword names of ``torch_names``."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return fn
    if not torch_names:
        return fn
    accepted: frozenset[str] | None = frozenset(
        p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )
    if any(p.kind is p.VAR_KEYWORD for p in params):
        accepted = None  # it takes any keyword

    @functools.wraps(fn)
    def op(*args: Any, **kwargs: Any) -> Any:
        if not kwargs:
            return fn(*args)
        try:
            return fn(*args, **kwargs)
        except TypeError as e:
            # Raised by the call itself (the arguments do not bind), not from inside ``fn``:
            # no frame of ``fn`` follows this one in the traceback.
            if e.__traceback__ is None or e.__traceback__.tb_next is not None:
                raise
            rebound = _rebind(torch_names, accepted, args, kwargs)
        return fn(*rebound[0], **rebound[1])  # where nothing binds, the op's own TypeError

    op.torch_keywords = (tuple(torch_names), accepted)  # type: ignore[attr-defined]
    return op


def own_arguments(
    op: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A recorded call of ``op`` (its arguments as the program passed them, torch's keyword
    names included: ``mul(x, other=w)``) as the op's own parameters take them."""
    names = getattr(op, "torch_keywords", None)
    if names is None or not kwargs:
        return args, kwargs
    try:
        inspect.signature(op).bind(*args, **kwargs)
        return args, kwargs
    except TypeError:
        return _rebind(names[0], names[1], args, kwargs)


def _rebind(
    torch_names: Sequence[str],
    accepted: frozenset[str] | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if accepted is None or not accepted.issuperset(kwargs):
        kwargs = {_NUMPY_NAMES.get(k, k): v for k, v in kwargs.items()}
    for positional in _positional_names(tuple(torch_names)):
        bound = _bind(positional, accepted, args, kwargs)
        if bound is not None:
            return bound
    return args, kwargs  # no torch signature takes them either: the op's own TypeError


def _bind(
    positional: tuple[str, ...],
    accepted: frozenset[str] | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
    """The call as positional arguments in ``positional``'s order (up to the first one not
    given), the other keywords left as they are; None where the op does not take those."""
    rest = dict(kwargs)
    out = list(args)
    for name in positional[len(args) :]:
        key = name if name in rest else ("input" if name in _SELF and "input" in rest else None)
        if key is None:
            break
        out.append(rest.pop(key))
    if accepted is not None and not accepted.issuperset(rest):
        return None
    return tuple(out), rest


@functools.cache
def _positional_names(torch_names: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """Per signature of the torch callables, its parameter names that can be given by
    position, in order."""
    from thunder_ir.ops._registry import resolve_torch_name

    found: list[tuple[str, ...]] = []
    for qualified in torch_names:
        method = qualified.startswith("torch.Tensor.")
        fn = resolve_torch_name(qualified)
        if fn is None:
            continue
        python = _python_signature(fn)
        if python is not None:
            found.append(python)
            continue
        for schema in _schemas(qualified.rsplit(".", 1)[-1]):
            names = tuple(a.name for a in schema.arguments if not a.kwarg_only)
            if method and (not names or names[0] not in _SELF):
                continue
            found.append(names)
    return tuple(dict.fromkeys(found))


def _python_signature(fn: Any) -> tuple[str, ...] | None:
    if not inspect.isfunction(fn):
        return None
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return None
    return tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _schemas(name: str) -> list[Any]:
    import torch

    for candidate in (name, name.rstrip("_")):
        try:
            schemas = torch._C._jit_get_schemas_for_operator(f"aten::{candidate}")
        except RuntimeError:
            continue
        if schemas:
            return list(schemas)
    return []
