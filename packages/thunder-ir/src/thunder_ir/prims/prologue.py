"""Prologue prims: unpack the inputs a computation reads and check the guards its cache entry
relies on. They are plain Python, so their implementations live here with them."""

from __future__ import annotations

from typing import Any

import torch

from thunder_ir.prims._common import make_prim
from thunder_ir.tags import OpTag

__all__ = ["GuardFailure"]


class GuardFailure(Exception):
    """A prologue check failed: the cached program does not apply to these inputs."""


def _no_meta(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("prologue prims are bound directly with Symbol.bind, not traced")


def _fail(what: str) -> Any:
    raise GuardFailure(what)


def _unpack_sequence(x: Any, n: int) -> Any:
    if len(x) != n:
        _fail(f"expected a sequence of length {n}, got {len(x)}")
    return x


def _unpack_key(d: Any, key: Any) -> Any:
    try:
        return d[key]
    except (KeyError, IndexError, TypeError):
        return _fail(f"missing key {key!r}")


def _unpack_attr(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name)
    except AttributeError:
        return _fail(f"missing attribute {name!r}")


def _unpack_global(globs: dict[str, Any], name: str) -> Any:
    try:
        return globs[name]
    except KeyError:
        try:
            return (
                globs["__builtins__"][name]
                if isinstance(globs.get("__builtins__"), dict)
                else getattr(globs["__builtins__"], name)
            )
        except (KeyError, AttributeError):
            return _fail(f"global {name!r} is not defined")


def _unpack_cell(fn: Any, index: int) -> Any:
    try:
        return fn.__closure__[index].cell_contents
    except (TypeError, IndexError, ValueError):
        return _fail(f"closure cell {index} of {fn!r} is not available")


def _check_tensor_metadata(
    t: Any, shape: tuple[int, ...], device: str, dtype: torch.dtype, requires_grad: bool
) -> None:
    if (
        not (type(t) is torch.Tensor or isinstance(t, torch.Tensor))
        or t.shape != shape
        or t.dtype is not dtype
        or t.requires_grad is not requires_grad
        or str(t.device) != device
    ):
        _fail(
            f"tensor metadata changed: expected {device} {dtype}{list(shape)} requires_grad={requires_grad}"
        )


def _check_value(x: Any, value: Any) -> None:
    if type(x) is not type(value) or x != value:
        _fail(f"expected {value!r}, got {x!r}")


def _check_type(x: Any, typ: type) -> None:
    if type(x) is not typ:
        _fail(f"expected type {typ.__name__}, got {type(x).__name__}")


def _check_len(x: Any, n: int) -> None:
    if len(x) != n:
        _fail(f"expected length {n}, got {len(x)}")


def _check_keys(x: Any, keys: tuple[Any, ...]) -> None:
    if tuple(x) != keys:
        _fail(f"expected the keys {keys!r} in this order, got {tuple(x)!r}")


def _check_is(x: Any, obj: Any) -> None:
    if x is not obj:
        _fail(f"expected the object {obj!r}")


def _check_constraint(cond: Any, text: str) -> None:
    if not cond:
        _fail(f"constraint {text} does not hold")


_P = (OpTag.PROLOGUE, OpTag.DONT_DCE)
unpack_sequence = make_prim(
    "unpack_sequence", _no_meta, tags=(OpTag.PROLOGUE,), impl=_unpack_sequence
)
unpack_key = make_prim("unpack_key", _no_meta, tags=(OpTag.PROLOGUE,), impl=_unpack_key)
unpack_attr = make_prim("unpack_attr", _no_meta, tags=(OpTag.PROLOGUE,), impl=_unpack_attr)
unpack_global = make_prim("unpack_global", _no_meta, tags=(OpTag.PROLOGUE,), impl=_unpack_global)
unpack_cell = make_prim("unpack_cell", _no_meta, tags=(OpTag.PROLOGUE,), impl=_unpack_cell)
check_tensor_metadata = make_prim(
    "check_tensor_metadata", _no_meta, tags=_P, impl=_check_tensor_metadata
)
check_value = make_prim("check_value", _no_meta, tags=_P, impl=_check_value)
check_type = make_prim("check_type", _no_meta, tags=_P, impl=_check_type)
check_len = make_prim("check_len", _no_meta, tags=_P, impl=_check_len)
check_keys = make_prim("check_keys", _no_meta, tags=_P, impl=_check_keys)
check_is = make_prim("check_is", _no_meta, tags=_P, impl=_check_is)
check_constraint = make_prim("check_constraint", _no_meta, tags=_P, impl=_check_constraint)


def _return_meta(value: Any = None) -> None:
    return None


python_return = make_prim("python_return", _return_meta, tags=(OpTag.RETURN, OpTag.DONT_DCE))
