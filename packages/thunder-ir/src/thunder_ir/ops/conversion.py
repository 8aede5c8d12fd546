"""Conversion torch-language ops: ``Tensor.to`` and the dtype shorthands (``float()``, ``long()``...),
device moves, ``detach``, and the in-place writes ``copy_``, ``zero_`` and ``fill_``.

A conversion that changes nothing returns its input itself in torch, and here (the same proxy);
these ops are tagged ``OpTag.MAY_RETURN_VIEW`` (``to(..., copy=True)`` always copies). ``detach`` is a view that stops
gradients (``prims.stop_gradient``).
"""

from __future__ import annotations

from typing import Any

import torch

from thunder_ir import dtypes, prims
from thunder_ir.devices import Device, to_device
from thunder_ir.dtypes import DType
from thunder_ir.ops._helpers import broadcast_shapes, dtype_arg, expand_to, to_dtype
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.elementwise import check_number_fits
from thunder_ir.ops.factories import torch_type_name
from thunder_ir.ops.shape import check_tensor_arg, same_shape, shape_str
from thunder_ir.proxies import NumberProxy, TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import check

_MAY_VIEW = (OpTag.MAY_RETURN_VIEW,)
_IN_PLACE = (OpTag.IN_PLACE,)


def _is_dtype(x: Any) -> bool:
    return isinstance(x, (torch.dtype, DType))


def _is_device(x: Any) -> bool:
    return isinstance(x, (str, torch.device, Device)) or (
        isinstance(x, int) and not isinstance(x, bool)
    )


def convert(
    a: TensorProxy,
    dtype: DType | None,
    device: Device | None,
    copy: bool = False,
    memory_format: Any = None,
) -> TensorProxy:
    """``a`` with ``dtype`` on ``device`` (None keeps). Where nothing changes it is ``a`` itself,
    as torch's (``x.float() is x``: a write through it writes ``a``); a ``memory_format`` other
    than "preserve" may copy, by strides: a fresh proxy that torch's call answers."""
    out = a
    if dtype is not None and dtype != a.dtype:
        out = prims.convert_element_type(out, dtype)
    if device is not None and device != a.device:
        out = prims.device_put(out, device)
    if out is a:
        if copy:
            return prims.clone(a)  # type: ignore[no-any-return]
        if memory_format not in (None, torch.preserve_format):
            return prims.shallow_copy(a)  # type: ignore[no-any-return]
    return out


@torchop("torch.Tensor.to", tags=_MAY_VIEW)
def to(a: Any, *args: Any, **kwargs: Any) -> Any:
    """Tensor.to(dtype), to(device, dtype=None), to(other): keyword forms too; non_blocking and
    memory_format are accepted and have no effect on values."""
    a = check_tensor_arg(a, "to", "self")
    dtype: Any = kwargs.pop("dtype", None)
    device: Any = kwargs.pop("device", None)
    copy = bool(kwargs.pop("copy", False))
    kwargs.pop("non_blocking", None)
    memory_format = kwargs.pop("memory_format", None)
    check(not kwargs, lambda: f"to() got unexpected keyword arguments {sorted(kwargs)}", TypeError)
    rest = list(args)
    if rest and isinstance(rest[0], TensorProxy):
        other = rest.pop(0)
        dtype, device = other.dtype, other.device
    elif rest and _is_dtype(rest[0]):
        dtype = rest.pop(0)
    elif rest and isinstance(rest[0], bool):  # torch's parser reads a leading bool as torch.bool
        rest.pop(0)
        dtype = bool
    elif rest and (_is_device(rest[0]) or rest[0] is None):
        device = rest.pop(0)
        if rest and (_is_dtype(rest[0]) or rest[0] is None):
            dtype = rest.pop(0)
    # Trailing positional non_blocking and copy.
    if rest and isinstance(rest[0], bool):
        rest.pop(0)
        if rest and isinstance(rest[0], bool):
            copy = rest.pop(0)
    check(
        not rest, lambda: f"to() received an invalid combination of arguments: {args!r}", TypeError
    )
    return convert(
        a, dtype_arg(dtype), None if device is None else to_device(device), copy, memory_format
    )


@torchop("torch.Tensor.type_as", tags=_MAY_VIEW)
def type_as(a: Any, other: Any) -> Any:
    a = check_tensor_arg(a, "type_as", "self")
    return convert(a, check_tensor_arg(other, "type_as", "other").dtype, None)


_TYPE_NAMES = {
    f"torch.{name}Tensor": d
    for d, name in ((d, torch_type_name(d)) for d in dtypes.all_dtypes)
    if name != d.name
}


@torchop("torch.Tensor.type", name="type", tags=_MAY_VIEW)
def type_(a: Any, dtype: Any = None, non_blocking: bool = False) -> Any:
    a = check_tensor_arg(a, "type", "self")
    if dtype is None:
        return f"torch.{torch_type_name(a.dtype)}Tensor"
    if isinstance(dtype, str):
        check(dtype in _TYPE_NAMES, lambda: f"invalid type: '{dtype}'", ValueError)
        return convert(a, _TYPE_NAMES[dtype], None)
    return convert(a, dtype_arg(dtype), None)


def _shorthand(method: str, dtype: DType) -> Any:
    def fn(a: Any, *, memory_format: Any = None) -> Any:
        return convert(check_tensor_arg(a, method, "self"), dtype, None, False, memory_format)

    fn.__name__ = method
    fn.__qualname__ = method
    fn.__doc__ = f"Tensor.{method}(): the tensor as {dtype.name}."
    return torchop(f"torch.Tensor.{method}", tags=_MAY_VIEW)(fn)


float_ = _shorthand("float", dtypes.float32)
double = _shorthand("double", dtypes.float64)
half = _shorthand("half", dtypes.float16)
bfloat16 = _shorthand("bfloat16", dtypes.bfloat16)
int_ = _shorthand("int", dtypes.int32)
long = _shorthand("long", dtypes.int64)
short = _shorthand("short", dtypes.int16)
char = _shorthand("char", dtypes.int8)
byte = _shorthand("byte", dtypes.uint8)
bool_ = _shorthand("bool", dtypes.bool8)


@torchop("torch.Tensor.cpu", tags=_MAY_VIEW)
def cpu(a: Any, *, memory_format: Any = None) -> Any:
    return convert(check_tensor_arg(a, "cpu", "self"), None, to_device("cpu"), False, memory_format)


@torchop("torch.Tensor.cuda", tags=_MAY_VIEW)
def cuda(
    a: Any, device: Any = None, non_blocking: bool = False, *, memory_format: Any = None
) -> Any:
    target = (
        to_device("cuda")
        if device is None
        else to_device(device if not isinstance(device, int) else f"cuda:{device}")
    )
    return convert(check_tensor_arg(a, "cuda", "self"), None, target, False, memory_format)


@torchop("torch.detach", "torch.Tensor.detach", tags=(OpTag.VIEW,))
def detach(a: Any) -> Any:
    return prims.stop_gradient(check_tensor_arg(a, "detach"))


@torchop("torch.Tensor.data", tags=(OpTag.VIEW,))
def data(a: Any) -> Any:
    """``t.data``: the same memory, without gradient (as ``detach``; where writes make torch run
    it, torch's own ``.data`` keeps eager's version counter)."""
    return prims.stop_gradient(check_tensor_arg(a, "data"))


# In-place writes ---------------------------------------------------------------------------------


def _source(a: TensorProxy, src: Any, op: str) -> TensorProxy:
    """``src`` (a tensor or a number) as ``a``'s dtype and device, broadcast to ``a``'s shape."""
    if isinstance(src, TensorProxy):
        common = broadcast_shapes(a.shape, src.shape)
        check(
            same_shape(common, a.shape),
            lambda: (
                f"output with shape {shape_str(a.shape)} doesn't match the broadcast shape {shape_str(common)}"
            ),
        )
        v = to_dtype(src, a.dtype)
        if v.device != a.device:
            v = prims.device_put(v, a.device)
        return expand_to(v, a.shape)
    check(
        isinstance(src, (bool, int, float, complex, NumberProxy)),
        lambda: f"{op}(): argument 'value' must be Number or Tensor, not {type(src).__name__}",
        TypeError,
    )
    check_number_fits(src, a.dtype)  # torch converts the value to the dtype, checked
    value = src if isinstance(src, NumberProxy) else dtypes.python_type_of(a.dtype)(src)
    return prims.full(a.shape, value, device=a.device, dtype=a.dtype)  # type: ignore[no-any-return]


@torchop("torch.Tensor.copy_", tags=_IN_PLACE)
def copy_(a: Any, src: Any, non_blocking: bool = False) -> Any:
    a = check_tensor_arg(a, "copy_", "self")
    src = check_tensor_arg(src, "copy_", "src")
    return prims.copy_(_source(a, src, "copy_"), a)


@torchop("torch.Tensor.zero_", "torch.zero_", tags=_IN_PLACE)
def zero_(a: Any) -> Any:
    a = check_tensor_arg(a, "zero_", "self")
    return prims.copy_(_source(a, 0, "zero_"), a)


def _fill_value(value: Any, op: str) -> Any:
    if isinstance(value, TensorProxy):
        check(
            value.ndim == 0,
            lambda: (
                f"fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
            ),
        )
    return value


@torchop("torch.Tensor.fill_", "torch.fill_", tags=_IN_PLACE)
def fill_(a: Any, value: Any) -> Any:
    a = check_tensor_arg(a, "fill_", "self")
    return prims.copy_(_source(a, _fill_value(value, "fill_"), "fill_"), a)


@torchop("torch.fill")
def fill(a: Any, value: Any) -> Any:
    a = check_tensor_arg(a, "fill")
    src = _source(a, _fill_value(value, "fill"), "fill")
    return prims.clone(src) if src is value else src
