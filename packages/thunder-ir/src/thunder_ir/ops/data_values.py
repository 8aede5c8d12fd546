"""Torch callables that return Python values computed from tensor data: ``torch.equal``,
``torch.allclose``, ``Tensor.tolist``. Each is static-shape ops ending in values read from data
(``prims.item``, ``prims.tolist``), so a program that decides on them is checked on every call
(``thunder_ir/prims/data.py``). Plain functions, as those of ``data_shapes``: the reads are
values of the trace only at its top level. ``torch.isclose``, which they build on, is an op.
"""

from __future__ import annotations

from typing import Any

from thunder_ir import prims
from thunder_ir.errors import DataDependentError
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.elementwise import abs as abs_
from thunder_ir.ops.elementwise import isfinite, isnan
from thunder_ir.ops.elementwise_binary import add as add_
from thunder_ir.ops.elementwise_binary import bitwise_and, bitwise_or, eq, le, mul, sub
from thunder_ir.ops.reductions import all as all_
from thunder_ir.proxies import TensorProxy, register_tensor_method
from thunder_ir.sizes import same_size
from thunder_ir.tags import OpTag
from thunder_ir.utils import check

__all__ = ["allclose", "assert_async", "equal", "isclose", "tolist"]


def _check_same_dtype(op: str, a: TensorProxy, b: TensorProxy) -> None:
    check(
        a.dtype == b.dtype,
        lambda: f"{op}(): {a.dtype.shortname} did not match {b.dtype.shortname}",
        RuntimeError,
    )


@torchop("torch.isclose", "torch.Tensor.isclose", tags=(OpTag.ELEMENTWISE,))
def isclose(
    a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Any:
    """torch's rule: equal, or both finite and ``|a - b| <= atol + rtol * |b|``; NaNs equal
    where ``equal_nan``."""
    check(isinstance(a, TensorProxy) and isinstance(b, TensorProxy), "isclose(): expected tensors")
    _check_same_dtype("isclose", a, b)
    check(rtol >= 0, lambda: f"rtol must be greater than or equal to zero, but got {rtol}")
    check(atol >= 0, lambda: f"atol must be greater than or equal to zero, but got {atol}")
    close = eq(a, b)
    if equal_nan and (a.dtype.is_float or a.dtype.is_complex):
        close = bitwise_or(close, bitwise_and(isnan(a), isnan(b)))
    if a.dtype.is_boolean or (rtol == 0 and atol == 0):
        return close
    if not (a.dtype.is_float or a.dtype.is_complex):
        raise DataDependentError("isclose of integer tensors with tolerances is not supported")
    error = abs_(sub(a, b))
    allowed = add_(mul(abs_(b), rtol), atol)
    return bitwise_or(close, bitwise_and(isfinite(error), le(error, allowed)))


def allclose(
    a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Any:
    """``torch.allclose``: ``isclose(...).all()`` read as a Python bool."""
    return prims.item(all_(isclose(a, b, rtol, atol, equal_nan)))


def equal(a: Any, b: Any) -> Any:
    """``torch.equal``: the same shape and the same elements, as a Python bool."""
    check(isinstance(a, TensorProxy) and isinstance(b, TensorProxy), "equal(): expected tensors")
    if a.ndim != b.ndim or not all(same_size(x, y) for x, y in zip(a.shape, b.shape)):
        if all(isinstance(s, int) for s in (*a.shape, *b.shape)):
            return False
        raise DataDependentError("torch.equal of tensors with symbolic sizes is not supported")
    return prims.item(all_(eq(a, b)))  # eq promotes mixed dtypes, as torch.equal compares


def tolist(a: Any) -> Any:
    """``Tensor.tolist()``: nested lists of Python numbers read from the data (a number for a
    0-dim tensor)."""
    check(isinstance(a, TensorProxy), "tolist(): expected a tensor")
    values = prims.tolist(a)
    return _nested(list(values), tuple(a.shape))


def _nested(flat: list[Any], shape: tuple[int, ...]) -> Any:
    if not shape:
        return flat[0]
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nested(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


register_tensor_method("tolist", tolist)


@torchop(
    "torch._assert_async",
    "torch.ops.aten._assert_async",
    "torch.ops.aten._assert_async.default",
    "torch.ops.aten._assert_async.msg",
)
def assert_async(cond: Any, assert_msg: str | None = None) -> None:
    """Raises where ``cond`` (one element) is zero, on every call (a device-side assert on
    CUDA, as eager's)."""
    check(isinstance(cond, TensorProxy), "_assert_async expects a tensor", TypeError)
    check(cond.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous")
    text = "Expected Tensor with single nonzero value, but got zero"
    prims.check_values(cond, text if assert_msg is None else assert_msg)
