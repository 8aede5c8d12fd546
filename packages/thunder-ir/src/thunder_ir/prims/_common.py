"""Declaring prims and the checks their meta functions share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from thunder_ir.devices import Device
from thunder_ir.dtypes import DType
from thunder_ir.proxies import IntegerProxy, NumberProxy, TensorProxy
from thunder_ir.symbol import Symbol
from thunder_ir.tags import OpTag
from thunder_ir.utils import check

__all__ = [
    "ALL_PRIMS",
    "check_same_device",
    "check_same_dtype",
    "check_same_shape",
    "check_shape",
    "check_tensor",
    "make_prim",
]

# Every prim, by name, in declaration order. Filled at import time only.
ALL_PRIMS: dict[str, Symbol] = {}


def make_prim(
    name: str,
    meta: Callable[..., Any],
    *,
    tags: Iterable[OpTag] = (),
    impl: Callable[..., Any] | None = None,
) -> Symbol:
    """Declares a prim: a symbol printed as ``prims.<name>`` whose meta only infers metadata."""
    check(name not in ALL_PRIMS, f"prim {name} declared twice")
    sym = Symbol(name, meta, module="prims", is_prim=True, tags=tags, impl=impl)
    ALL_PRIMS[name] = sym
    return sym


def check_tensor(x: Any, what: str) -> TensorProxy:
    check(
        isinstance(x, TensorProxy),
        lambda: f"{what}: expected a tensor, got {type(x).__name__}",
        TypeError,
    )
    return x  # type: ignore[no-any-return]


def check_shape(shape: Sequence[Any], what: str) -> tuple[int | IntegerProxy, ...]:
    check(
        isinstance(shape, (tuple, list)),
        lambda: f"{what}: expected a shape (tuple of ints), got {shape!r}",
        TypeError,
    )
    for s in shape:
        check(
            (isinstance(s, int) and not isinstance(s, bool)) or isinstance(s, IntegerProxy),
            lambda: f"{what}: shape entries must be ints, got {s!r}",
            TypeError,
        )
        check(
            not isinstance(s, int) or s >= 0,
            lambda: f"{what}: negative dimension {s} in shape {tuple(shape)}",
        )
    return tuple(shape)


def check_same_shape(tensors: Sequence[TensorProxy], what: str) -> None:
    if tensors:
        s = tensors[0].shape
        for t in tensors[1:]:
            check(
                t.shape == s,
                lambda: f"{what}: expected tensors of the same shape, got {s} and {t.shape}",
            )


def check_same_device(tensors: Sequence[TensorProxy], what: str) -> Device | None:
    if not tensors:
        return None
    d = tensors[0].device
    for t in tensors[1:]:
        check(
            t.device == d,
            lambda: f"{what}: expected tensors on the same device, got {d} and {t.device}",
        )
    return d


def check_same_dtype(tensors: Sequence[TensorProxy], what: str) -> DType | None:
    if not tensors:
        return None
    d = tensors[0].dtype
    for t in tensors[1:]:
        check(
            t.dtype == d,
            lambda: f"{what}: expected tensors of the same dtype, got {d.name} and {t.dtype.name}",
        )
    return d


def is_number(x: Any) -> bool:
    return isinstance(x, (bool, int, float, complex, NumberProxy))
