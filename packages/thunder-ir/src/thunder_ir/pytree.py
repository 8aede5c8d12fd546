"""Flattening nested Python containers (tuple, list, dict, slice, namedtuples and torch.return_types
structseqs) into leaves and back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["tree_flatten", "tree_iter", "tree_map", "tree_unflatten"]

# A spec is None for a leaf, or (kind, aux, child_specs).
Spec = Any


def tree_flatten(x: Any) -> tuple[list[Any], Spec]:
    leaves: list[Any] = []
    spec = _flatten(x, leaves)
    return leaves, spec


def _flatten(x: Any, leaves: list[Any]) -> Spec:
    t = type(x)
    if t is tuple or t is list:
        return (t, None, tuple(_flatten(v, leaves) for v in x))
    if t is dict:
        keys = tuple(x.keys())
        return (dict, keys, tuple(_flatten(x[k], leaves) for k in keys))
    if t is slice:
        return (slice, None, tuple(_flatten(v, leaves) for v in (x.start, x.stop, x.step)))
    if isinstance(x, tuple) and hasattr(x, "_fields"):  # namedtuple
        return (t, None, tuple(_flatten(v, leaves) for v in x))
    if isinstance(x, tuple) and hasattr(t, "n_fields"):  # structseq (torch.return_types)
        return (t, "structseq", tuple(_flatten(v, leaves) for v in x))
    leaves.append(x)
    return None


def tree_unflatten(leaves: list[Any], spec: Spec) -> Any:
    it = iter(leaves)
    return _unflatten(it, spec)


def _unflatten(it: Iterator[Any], spec: Spec) -> Any:
    if spec is None:
        return next(it)
    kind, aux, children = spec
    values = [_unflatten(it, c) for c in children]
    if kind is dict:
        return dict(zip(aux, values))
    if kind is slice:
        return slice(*values)
    if kind is tuple or kind is list or aux == "structseq":
        return kind(values)
    return kind(*values)


def tree_map(fn: Callable[[Any], Any], x: Any) -> Any:
    leaves, spec = tree_flatten(x)
    return tree_unflatten([fn(v) for v in leaves], spec)


def tree_iter(x: Any) -> Iterator[Any]:
    """The leaves of ``x``, without building a spec."""
    t = type(x)
    if (
        t is tuple
        or t is list
        or ((isinstance(x, tuple) and hasattr(x, "_fields")) or hasattr(t, "n_fields"))
    ):
        for v in x:
            yield from tree_iter(v)
    elif t is dict:
        for v in x.values():
            yield from tree_iter(v)
    elif t is slice:
        yield from tree_iter((x.start, x.stop, x.step))
    else:
        yield x
