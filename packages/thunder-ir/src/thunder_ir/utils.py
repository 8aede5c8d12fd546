"""Shape, dim and dtype helpers shared by prims and ops."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from thunder_ir import dtypes
from thunder_ir.dtypes import DType

__all__ = [
    "canonicalize_dim",
    "canonicalize_dims",
    "check",
    "dtype_of",
    "fail",
    "promote_types",
    "result_type",
]


def fail(msg: str, exc: type[Exception] = RuntimeError) -> NoReturn:
    raise exc(msg)


def check(cond: Any, msg: Any, exc: type[Exception] = RuntimeError) -> None:
    """Raises ``exc`` with ``msg`` (a string, or a callable returning one) unless ``cond``."""
    if not cond:
        raise exc(msg() if callable(msg) else msg)


def canonicalize_dim(ndim: int, dim: int, *, wrap_scalar: bool = True) -> int:
    """``dim`` as a non-negative index into a tensor of rank ``ndim`` (0-d tensors accept 0 and -1)."""
    rank = max(ndim, 1) if wrap_scalar else ndim
    if not isinstance(dim, int) or isinstance(dim, bool):
        if isinstance(dim, (bool, float, complex)) or getattr(dim, "python_type", int) is not int:
            # torch takes an integer (or what has __index__) and refuses the rest
            raise TypeError(f"a dim must be an integer, got {type(dim).__name__} ({dim!r})")
        dim = int(dim)
    if not -rank <= dim < rank:
        raise IndexError(
            f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})"
        )
    return dim + rank if dim < 0 else dim


def canonicalize_dims(ndim: int, dims: int | Sequence[int] | None) -> tuple[int, ...]:
    if dims is None:
        return tuple(range(ndim))
    given: Sequence[Any]
    if isinstance(dims, (tuple, list)):
        given = dims
    elif isinstance(dims, (dict, set, frozenset, str, bytes)):  # torch refuses them
        raise TypeError(f"dims must be an integer or a sequence of them, got {dims!r}")
    else:
        given = (dims,)
    out = tuple(canonicalize_dim(ndim, d) for d in given)
    check(len(set(out)) == len(out), lambda: f"dims {tuple(given)} contain a repeated dimension")
    return out


_KIND_ORDER = {"bool": 0, "int": 1, "float": 2, "complex": 3}


def promote_types(a: DType, b: DType) -> DType:
    """torch.promote_types on strong dtypes."""
    a, b = a.strong(), b.strong()
    if a == b:
        return a
    ka, kb = _KIND_ORDER[a.kind], _KIND_ORDER[b.kind]
    if ka == kb:
        if a.kind == "int":
            if {a, b} == {dtypes.uint8, dtypes.int8}:
                return dtypes.int16
            return a if a.bytes > b.bytes else b
        if a.kind == "float":
            if a.bytes == 1 or b.bytes == 1:
                fail(
                    f"Promotion for Float8 Types is not supported, attempted to promote {a.name} and {b.name}",
                    TypeError,
                )
            if {a, b} == {dtypes.bfloat16, dtypes.float16}:
                return dtypes.float32
            return a if a.bytes > b.bytes else b
        return a if a.bytes > b.bytes else b
    hi, lo = (a, b) if ka > kb else (b, a)
    if hi.kind == "complex" and lo.kind == "float":
        return dtypes.complex128 if lo == dtypes.float64 or hi == dtypes.complex128 else hi
    if hi.kind == "float" and hi.bytes == 1:
        fail(
            f"Promotion for Float8 Types is not supported, attempted to promote {a.name} and {b.name}",
            TypeError,
        )
    return hi


def _promote_skip_none(a: DType | None, b: DType | None) -> DType | None:
    if a is None:
        return b
    if b is None:
        return a
    return promote_types(a, b)


def _combine_categories(higher: DType | None, lower: DType | None) -> DType | None:
    # torch's c10 combine_categories: a higher-priority group wins unless the lower one is of a
    # higher category.
    if higher is not None and higher.is_complex:
        return higher
    if lower is not None and lower.is_complex:
        if higher is not None and higher.is_float:
            return (
                dtypes.corresponding_complex_dtype(higher)
                if higher != dtypes.float64
                else dtypes.complex128
            )
        return lower
    if higher is not None and higher.is_float:
        return higher
    if higher is not None and (higher.is_boolean or (lower is not None and lower.is_float)):
        return _promote_skip_none(higher, lower)
    return higher if higher is not None else lower


def dtype_of(x: Any) -> DType:
    """The dtype of a tensor proxy (strong) or a Python number (weak)."""
    from thunder_ir.proxies import NumberProxy, TensorProxy

    if isinstance(x, TensorProxy):
        return x.dtype
    if isinstance(x, NumberProxy):
        return dtypes.to_dtype(x.python_type)
    for kind in (bool, int, float, complex):  # (a subclass, an IntEnum, is its base number)
        if isinstance(x, kind):
            return dtypes.to_dtype(kind)
    raise TypeError(f"expected a tensor or a number, got {type(x).__name__}")


def result_type(*args: Any) -> DType:
    """torch.result_type over tensors and Python numbers (the latter by category only)."""
    from thunder_ir.proxies import NumberProxy, TensorProxy

    dim_result: DType | None = None
    zero_result: DType | None = None
    wrapped_result: DType | None = None
    for x in args:
        if x is None:
            continue
        if isinstance(x, TensorProxy):
            if x.ndim > 0:
                dim_result = _promote_skip_none(dim_result, x.dtype)
            else:
                zero_result = _promote_skip_none(zero_result, x.dtype)
        elif isinstance(x, (bool, int, float, complex, NumberProxy)):
            wrapped_result = _promote_skip_none(wrapped_result, dtype_of(x).strong())
        else:
            raise TypeError(f"expected a tensor or a number, got {type(x).__name__}")
    out = _combine_categories(dim_result, _combine_categories(zero_result, wrapped_result))
    check(out is not None, "result_type needs at least one tensor or number")
    assert out is not None
    return out
