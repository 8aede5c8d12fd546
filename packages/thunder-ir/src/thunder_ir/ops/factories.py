"""Tensor-creation torch-language ops: zeros/ones/full/empty (and their _like and new_ forms),
arange, linspace, eye, and the random factories.

``empty`` is ``zeros`` in the IR (its values are unspecified, so zeros are as good as any).
Random factories draw from the ambient torch generator at run time (``seed=None`` on the prims),
as eager torch does under ``torch.manual_seed``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from thunder_ir import dtypes, prims
from thunder_ir.devices import Device, default_device, to_device
from thunder_ir.dtypes import DType
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.known_numbers import index_value
from thunder_ir.ops._helpers import dtype_arg, to_shape
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.elementwise import check_number_fits
from thunder_ir.ops.shape import check_tensor_arg
from thunder_ir.proxies import NumberProxy, TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import check

_FACTORY = (OpTag.FACTORY,)
_RANDOM = (OpTag.FACTORY, OpTag.RANDOM)
_LIKE = ()  # _like factories read only their input's metadata

_TORCH_TYPE_NAMES = {
    "bool8": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
    "bfloat16": "BFloat16", "float16": "Half", "float32": "Float", "float64": "Double",
    "complex64": "ComplexFloat", "complex128": "ComplexDouble",
}  # fmt: skip


def torch_type_name(dtype: DType) -> str:
    """torch's name of a scalar type in messages ("Long", "Float")."""
    return _TORCH_TYPE_NAMES.get(dtype.name, dtype.name)


def _device(device: Any, default: Device | None = None) -> Device:
    if device is not None:
        return to_device(device)
    return default_device() if default is None else default


def _check_common(requires_grad: bool, layout: Any, pin_memory: Any, op: str) -> None:
    check(
        not requires_grad,
        f"{op}(requires_grad=True) is not supported inside a traced function; create the tensor outside and pass it in",
        UnsupportedOptionError,
    )
    check(
        layout is None or str(layout) == "torch.strided",
        lambda: f"{op}(layout={layout}) is not supported: only strided tensors",
        UnsupportedOptionError,
    )
    check(not pin_memory, f"{op}(pin_memory=True) is not supported", UnsupportedOptionError)


def _fill_dtype(fill_value: Any) -> DType:
    """torch.full's dtype for a fill value when none is given."""
    typ = fill_value.python_type if isinstance(fill_value, NumberProxy) else type(fill_value)
    if typ is bool:
        return dtypes.bool8
    if typ is int:
        return dtypes.int64
    if typ is complex:
        return dtypes.default_complex_dtype()
    return dtypes.default_float_dtype()


def _fill(shape: Sequence[Any], value: Any, device: Device, dtype: DType) -> TensorProxy:
    for s in shape:
        check(
            not isinstance(s, int) or s >= 0,
            lambda: f"Trying to create tensor with negative dimension {s}: {list(shape)}",
        )
    check_number_fits(value, dtype)  # torch converts the value to the dtype, checked
    if not isinstance(value, NumberProxy):
        value = dtypes.python_type_of(dtype)(value)
    return prims.full(tuple(shape), value, device=device, dtype=dtype)  # type: ignore[no-any-return]


def _size_arg(size: tuple[Any, ...], op: str) -> tuple[Any, ...]:
    # A 0-d integer tensor is a size, as torch reads it (__index__): a value read from data
    # (RNNs make their initial state with a packed sequence's batch_sizes[0]).
    shape = tuple(
        index_value(s) if isinstance(s, TensorProxy) and _is_index_tensor(s) else s
        for s in to_shape(size)
    )
    for s in shape:
        check(
            (isinstance(s, int) and not isinstance(s, bool)) or isinstance(s, NumberProxy),
            lambda: (
                f"{op}(): argument 'size' must be tuple of ints, but found element of type {type(s).__name__}"
            ),
            TypeError,
        )
    return shape


def _is_index_tensor(t: TensorProxy) -> bool:
    return t.ndim == 0 and t.dtype.is_exact and not t.dtype.is_boolean


# From data -------------------------------------------------------------------------------------


def _nested(data: Any, dim: int, op: str) -> tuple[tuple[int, ...], list[Any]]:
    """The shape and row-major values of nested sequences of numbers (torch's rules)."""
    if isinstance(data, TensorProxy):
        raise UnsupportedOptionError(
            f"{op}() of tensors is not supported in traced code; use torch.stack or torch.cat"
        )
    if isinstance(data, (bool, int, float, complex, NumberProxy)):
        return (), [data]
    check(
        isinstance(data, (list, tuple)),
        lambda: f"Could not infer dtype of {type(data).__name__}",
        TypeError,
    )
    if not data:
        return (0,), []
    shapes_values = [_nested(x, dim + 1, op) for x in data]
    inner = shapes_values[0][0]
    for shape, _ in shapes_values:
        check(
            shape == inner,
            lambda: (
                f"expected sequence of length {inner[0] if inner else 0} at dim {dim + 1} "
                f"(got {shape[0] if shape else 0})"
            ),
            ValueError,
        )
    return (len(data), *inner), [v for _, values in shapes_values for v in values]


def _data_dtype(values: Sequence[Any]) -> DType:
    """torch.tensor's dtype for Python values when none is given."""
    types = {v.python_type if isinstance(v, NumberProxy) else type(v) for v in values}
    if complex in types:
        return _inferred_complex_dtype()
    if float in types or not types:
        return dtypes.default_float_dtype()
    if types == {bool}:
        return dtypes.bool8
    return dtypes.int64


def _inferred_complex_dtype() -> DType:
    """torch.tensor's dtype for complex values: the complex dtype of the default dtype, which
    is complex32 for float16 (no IR dtype: refused) and none for bfloat16 (eager's error)."""
    default = torch.get_default_dtype()
    if default == torch.bfloat16:
        raise RuntimeError("invalid default scalar type for complex")
    if default == torch.float16:
        raise UnsupportedOptionError(
            "complex values with torch.float16 as the default dtype make a complex32 "
            "(torch.chalf) tensor, a dtype thunder does not support; pass dtype=torch.complex64"
        )
    return dtypes.default_complex_dtype()


def _from_data(data: Any, dtype: Any, device: Device, op: str) -> TensorProxy:
    shape, values = _nested(data, 0, op)
    dt = dtype_arg(dtype) or _data_dtype(values)
    py = dtypes.python_type_of(dt)
    values = [v if isinstance(v, NumberProxy) else py(v) for v in values]
    return prims.tensor(tuple(values), shape, device=device, dtype=dt)  # type: ignore[no-any-return]


@torchop("torch.tensor", tags=_FACTORY)
def tensor(
    data: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Any:
    _check_common(requires_grad, None, pin_memory, "tensor")
    return _from_data(data, dtype, _device(device), "tensor")


@torchop("torch.as_tensor", tags=_FACTORY)
def as_tensor(data: Any, *, dtype: Any = None, device: Any = None) -> Any:
    if isinstance(data, TensorProxy):
        dt = dtype_arg(dtype) or data.dtype
        dev = _device(device, data.device)
        if dt == data.dtype and dev == data.device:
            return data  # the tensor itself when nothing changes, as eager
        from thunder_ir.ops.conversion import to

        return to(data, device=dev, dtype=dt)
    return _from_data(data, dtype, _device(device), "as_tensor")


@torchop("torch.Tensor.new_tensor", tags=_LIKE)
def new_tensor(
    a: Any,
    data: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
) -> Any:
    a = check_tensor_arg(a, "new_tensor")
    _check_common(requires_grad, layout, pin_memory, "new_tensor")
    if isinstance(data, TensorProxy):
        raise UnsupportedOptionError(
            "new_tensor() of a tensor is not supported in traced code; use clone().detach()"
        )
    return _from_data(data, dtype or a.dtype, _device(device, a.device), "new_tensor")


# Filled ----------------------------------------------------------------------------------------


@torchop("torch.zeros", tags=_FACTORY)
def zeros(
    *size: Any,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    out: Any = None,
) -> Any:
    _check_common(requires_grad, layout, pin_memory, "zeros")
    check(out is None, "zeros(out=...) is not supported", UnsupportedOptionError)
    return _fill(
        _size_arg(size, "zeros"),
        0,
        _device(device),
        dtype_arg(dtype) or dtypes.default_float_dtype(),
    )


@torchop("torch.ones", tags=_FACTORY)
def ones(
    *size: Any,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    out: Any = None,
) -> Any:
    _check_common(requires_grad, layout, pin_memory, "ones")
    check(out is None, "ones(out=...) is not supported", UnsupportedOptionError)
    return _fill(
        _size_arg(size, "ones"),
        1,
        _device(device),
        dtype_arg(dtype) or dtypes.default_float_dtype(),
    )


@torchop("torch.empty", tags=_FACTORY)
def empty(
    *size: Any,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    memory_format: Any = None,
    out: Any = None,
) -> Any:
    _check_common(requires_grad, layout, pin_memory, "empty")
    check(out is None, "empty(out=...) is not supported", UnsupportedOptionError)
    shape = _size_arg(size, "empty")
    dtype = dtype_arg(dtype) or dtypes.default_float_dtype()
    if len(size) > 1:
        # empty(2, 3) as empty((2, 3)): the form executors keep whole, so that torch fills it as
        # eager does (NaN under torch.use_deterministic_algorithms, decided at run time).
        return empty(shape, dtype=dtype, device=_device(device))
    return _fill(shape, 0, _device(device), dtype)


@torchop("torch.full", tags=_FACTORY)
def full(
    size: Sequence[Any],
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    out: Any = None,
) -> Any:
    _check_common(requires_grad, layout, pin_memory, "full")
    check(out is None, "full(out=...) is not supported", UnsupportedOptionError)
    check(
        not isinstance(fill_value, TensorProxy),
        "full(): a tensor fill value is not supported; pass a number",
        UnsupportedOptionError,
    )
    return _fill(
        _size_arg((size,), "full"),
        fill_value,
        _device(device),
        dtype_arg(dtype) or _fill_dtype(fill_value),
    )


def _like(
    a: Any,
    value: Any,
    dtype: Any,
    device: Any,
    requires_grad: bool,
    layout: Any,
    pin_memory: bool,
    op: str,
) -> TensorProxy:
    a = check_tensor_arg(a, op)
    _check_common(requires_grad, layout, pin_memory, op)
    return _fill(a.shape, value, _device(device, a.device), dtype_arg(dtype) or a.dtype)


@torchop("torch.zeros_like", tags=_LIKE)
def zeros_like(
    a: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    memory_format: Any = None,
) -> Any:
    return _like(a, 0, dtype, device, requires_grad, layout, pin_memory, "zeros_like")


@torchop("torch.ones_like", tags=_LIKE)
def ones_like(
    a: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    memory_format: Any = None,
) -> Any:
    return _like(a, 1, dtype, device, requires_grad, layout, pin_memory, "ones_like")


@torchop("torch.empty_like", tags=_LIKE)
def empty_like(
    a: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    memory_format: Any = None,
) -> Any:
    return _like(a, 0, dtype, device, requires_grad, layout, pin_memory, "empty_like")


@torchop("torch.full_like", tags=_LIKE)
def full_like(
    a: Any,
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    memory_format: Any = None,
) -> Any:
    return _like(a, fill_value, dtype, device, requires_grad, layout, pin_memory, "full_like")


def _new(
    a: Any,
    size: tuple[Any, ...],
    value: Any,
    dtype: Any,
    device: Any,
    requires_grad: bool,
    layout: Any,
    pin_memory: bool,
    op: str,
) -> TensorProxy:
    a = check_tensor_arg(a, op, "self")
    check(size, lambda: f'{op}() missing 1 required positional arguments: "size"', TypeError)
    _check_common(requires_grad, layout, pin_memory, op)
    return _fill(_size_arg(size, op), value, _device(device, a.device), dtype_arg(dtype) or a.dtype)


@torchop("torch.Tensor.new_zeros", tags=_LIKE)
def new_zeros(
    a: Any,
    *size: Any,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
) -> Any:
    return _new(a, size, 0, dtype, device, requires_grad, layout, pin_memory, "new_zeros")


@torchop("torch.Tensor.new_ones", tags=_LIKE)
def new_ones(
    a: Any,
    *size: Any,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
) -> Any:
    return _new(a, size, 1, dtype, device, requires_grad, layout, pin_memory, "new_ones")


@torchop("torch.Tensor.new_empty", tags=_LIKE)
def new_empty(
    a: Any,
    *size: Any,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
) -> Any:
    # Through empty, as eager's new_empty is: kept whole, torch fills it as torch.empty is
    # filled (NaN under torch.use_deterministic_algorithms, at run time).
    a = check_tensor_arg(a, "new_empty", "self")
    check(size, 'new_empty() missing 1 required positional arguments: "size"', TypeError)
    _check_common(requires_grad, layout, pin_memory, "new_empty")
    shape = _size_arg(size, "new_empty")
    return empty(shape, dtype=dtype_arg(dtype) or a.dtype, device=_device(device, a.device))


@torchop("torch.Tensor.new_full", tags=_LIKE)
def new_full(
    a: Any,
    size: Sequence[Any],
    fill_value: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
) -> Any:
    check(
        isinstance(size, (tuple, list)) or type(size).__name__ == "Size",
        lambda: (
            "new_full(): argument 'size' (position 1) must be tuple of ints, not "
            f"{type(size).__name__}"
        ),
        TypeError,
    )
    return _new(
        a, (size,), fill_value, dtype, device, requires_grad, layout, pin_memory, "new_full"
    )


# Ranges ----------------------------------------------------------------------------------------


def _is_float(x: Any) -> bool:
    typ = x.python_type if isinstance(x, NumberProxy) else type(x)
    return typ is float


@torchop("torch.arange", tags=_FACTORY)
def arange(
    start: Any,
    end: Any = None,
    step: Any = 1,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    out: Any = None,
) -> Any:
    _check_common(requires_grad, layout, pin_memory, "arange")
    check(out is None, "arange(out=...) is not supported", UnsupportedOptionError)
    if end is None:
        start, end = 0, start
    for x in (start, end, step):
        check(
            not isinstance(x, TensorProxy),
            "arange() with tensor bounds is not supported; pass Python numbers",
            UnsupportedOptionError,
        )
        check(
            isinstance(x, (int, float, NumberProxy)) and not isinstance(x, complex),
            lambda: f"arange(): expected a real number, got {type(x).__name__}",
            TypeError,
        )
    out_dtype = dtype_arg(dtype) or (
        dtypes.default_float_dtype()
        if any(_is_float(x) for x in (start, end, step))
        else dtypes.int64
    )
    check(step != 0, "step must be nonzero")
    check(
        (step > 0 and end >= start) or (step < 0 and end <= start),
        "upper bound and larger bound inconsistent with step sign",
    )
    integral = all(
        (isinstance(x, int) and not isinstance(x, bool))
        or (isinstance(x, NumberProxy) and x.python_type is int)
        for x in (start, end, step)
    )
    if integral and isinstance(step, int):
        # Integer arithmetic (traced for symbolic bounds): arange(n) has n elements.
        length: Any = (
            end - start if step == 1 else (end - start + step - (1 if step > 0 else -1)) // step
        )
    elif integral:
        length = (end - start + step - (1 if step > 0 else -1)) // step
    else:
        length = (
            prims.ceil((end - start) / step)
            if any(isinstance(x, NumberProxy) for x in (start, end, step))
            else math.ceil((end - start) / step)
        )
    dev = _device(device)
    if out_dtype.is_exact and not any(_is_float(x) for x in (start, end, step)):
        return prims.iota(length, start=start, step=step, device=dev, dtype=out_dtype)
    # torch computes start + i * step in double precision, then rounds to the dtype.
    values = prims.iota(
        length,
        start=float(start) if not isinstance(start, NumberProxy) else start,
        step=float(step) if not isinstance(step, NumberProxy) else step,
        device=dev,
        dtype=dtypes.float64,
    )
    return prims.convert_element_type(values, out_dtype) if out_dtype != dtypes.float64 else values


@torchop("torch.linspace", tags=_FACTORY)
def linspace(
    start: Any,
    end: Any,
    steps: int,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    out: Any = None,
) -> Any:
    _check_common(requires_grad, layout, pin_memory, "linspace")
    check(out is None, "linspace(out=...) is not supported", UnsupportedOptionError)
    check(steps >= 0, "number of steps must be non-negative")
    out_dtype = dtype_arg(dtype) or dtypes.default_float_dtype()
    dev = _device(device)
    if steps == 0:
        return prims.full((0,), 0, device=dev, dtype=out_dtype)
    if steps == 1:
        return prims.full(
            (1,), dtypes.python_type_of(out_dtype)(start), device=dev, dtype=out_dtype
        )
    compute = (
        dtypes.float64 if out_dtype.is_exact or out_dtype == dtypes.float64 else dtypes.float32
    )
    step = (end - start) / (steps - 1)
    # torch's kernel: the first half counts up from start, the second half down from end.
    i = prims.iota(steps, start=0, step=1, device=dev, dtype=compute)
    up = prims.add(prims.mul(i, step), float(start))
    down = prims.sub(float(end), prims.mul(prims.sub(float(steps - 1), i), step))
    half = steps // 2
    first = prims.lt(i, float(half))
    values = prims.where(first, up, down)
    return prims.convert_element_type(values, out_dtype) if out_dtype != compute else values


@torchop("torch.eye", tags=_FACTORY)
def eye(
    n: int,
    m: int | None = None,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    out: Any = None,
) -> Any:
    _check_common(requires_grad, layout, pin_memory, "eye")
    check(out is None, "eye(out=...) is not supported", UnsupportedOptionError)
    m = n if m is None else m
    check(n >= 0, lambda: f"n must be greater or equal to 0, got {n}")
    check(m >= 0, lambda: f"m must be greater or equal to 0, got {m}")
    out_dtype = dtype_arg(dtype) or dtypes.default_float_dtype()
    dev = _device(device)
    rows = prims.broadcast_in_dim(
        prims.iota(n, start=0, step=1, device=dev, dtype=dtypes.int64), (n, m), (0,)
    )
    cols = prims.broadcast_in_dim(
        prims.iota(m, start=0, step=1, device=dev, dtype=dtypes.int64), (n, m), (1,)
    )
    return prims.convert_element_type(prims.eq(rows, cols), out_dtype)


# Random ----------------------------------------------------------------------------------------


def _random(
    prim: Any, shape: tuple[Any, ...], dtype: Any, device: Any, generator: Any, op: str
) -> TensorProxy:
    check(
        generator is None,
        f"{op}(generator=...) is not supported; seed the default generator with torch.manual_seed",
        UnsupportedOptionError,
    )
    out_dtype = dtype_arg(dtype) or dtypes.default_float_dtype()
    check(
        out_dtype.is_float,
        lambda: (
            f"\"{'check_uniform_bounds' if prim is prims.uniform else 'normal_kernel_cpu'}\" not implemented for '{torch_type_name(out_dtype)}'"
        ),
    )
    for s in shape:
        check(
            not isinstance(s, int) or s >= 0,
            lambda: f"Trying to create tensor with negative dimension {s}: {list(shape)}",
        )
    return prim(shape, 0.0, 1.0, device=_device(device), dtype=out_dtype)  # type: ignore[no-any-return]


@torchop("torch.rand", tags=_RANDOM)
def rand(
    *size: Any,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    out: Any = None,
) -> Any:
    _check_common(requires_grad, layout, pin_memory, "rand")
    return _random(prims.uniform, _size_arg(size, "rand"), dtype, device, generator, "rand")


@torchop("torch.randn", tags=_RANDOM)
def randn(
    *size: Any,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    out: Any = None,
) -> Any:
    _check_common(requires_grad, layout, pin_memory, "randn")
    return _random(prims.normal, _size_arg(size, "randn"), dtype, device, generator, "randn")


@torchop("torch.rand_like", tags=(OpTag.RANDOM,))
def rand_like(
    a: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    memory_format: Any = None,
) -> Any:
    a = check_tensor_arg(a, "rand_like")
    _check_common(requires_grad, layout, pin_memory, "rand_like")
    return _random(
        prims.uniform, a.shape, dtype or a.dtype, _device(device, a.device), None, "rand_like"
    )


@torchop("torch.randn_like", tags=(OpTag.RANDOM,))
def randn_like(
    a: Any,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    memory_format: Any = None,
) -> Any:
    a = check_tensor_arg(a, "randn_like")
    _check_common(requires_grad, layout, pin_memory, "randn_like")
    return _random(
        prims.normal, a.shape, dtype or a.dtype, _device(device, a.device), None, "randn_like"
    )


@torchop("torch.randint", tags=_RANDOM)
def randint(
    *args: Any,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    layout: Any = None,
    pin_memory: bool = False,
    out: Any = None,
) -> Any:
    """randint(high, size) or randint(low, high, size): ``random_(low, high)``, eager's draw."""
    _check_common(requires_grad, layout, pin_memory, "randint")
    check(
        generator is None,
        "randint(generator=...) is not supported; seed the default generator with torch.manual_seed",
        UnsupportedOptionError,
    )
    check(len(args) in (2, 3), "randint() expects (high, size) or (low, high, size)", TypeError)
    low, high, size = (0, *args) if len(args) == 2 else args
    check(
        low < high,
        lambda: f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}",
    )
    out_dtype = dtype_arg(dtype) or dtypes.int64
    shape = _size_arg((size,), "randint")
    dev = _device(device)
    return prims.randint(shape, low, high, device=dev, dtype=out_dtype)
