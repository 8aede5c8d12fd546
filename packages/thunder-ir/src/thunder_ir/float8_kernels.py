"""Eager's "not implemented for 'Float8_e4m3fn'" errors, asked of torch itself.

torch has float8 kernels for casts, copies, views, indexing and a few ops (``mul``, ``abs``,
comparisons for equality, ``_scaled_mm``), which ones depending on the device and the torch
version; most arithmetic (``add``, ``sum``, ``exp``, ``gt``) raises. The IR computes a float8
op in float32 and converts back, so it would return values where eager raises. A torch op
called by the program (not one inside another op's decomposition) with a float8 tensor is
therefore run once by torch on small zero tensors of the same dtypes and device: where torch has
no kernel, the call raises eager's error (the ``NotImplementedError`` torch raises)."""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any

import torch

from thunder_ir import dtypes
from thunder_ir.devices import Device, to_torch_device
from thunder_ir.proxies import NumberProxy, TensorProxy
from thunder_ir.tags import OpTag

__all__ = ["check_float8_kernel", "has_float8_tensor"]

_FLOAT8 = frozenset(
    {dtypes.float8_e4m3fn, dtypes.float8_e4m3fnuz, dtypes.float8_e5m2, dtypes.float8_e5m2fnuz}
)
_FLOAT8_TORCH_NAMES = tuple(
    f"'{name}'" for name in ("Float8_e4m3fn", "Float8_e4m3fnuz", "Float8_e5m2", "Float8_e5m2fnuz")
)
# Probe tensors keep the proxies' shapes up to this many elements in all (so that shape
# arguments still fit), else every size is 1 (a size-1 dimension broadcasts and reduces alike).
_PROBE_ELEMENTS = 1 << 16
# Ops the probe must not run: they consume RNG state or have effects beyond their outputs.
_NOT_PROBED = (OpTag.RANDOM, OpTag.DONT_DCE)


def _is_float8_tensor(x: Any) -> bool:
    return isinstance(x, TensorProxy) and x.dtype in _FLOAT8


def has_float8_tensor(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether an argument (or an element of a list or tuple one) is a float8 tensor."""
    for x in itertools.chain(args, kwargs.values()):
        if _is_float8_tensor(x):
            return True
        if type(x) in (list, tuple) and any(map(_is_float8_tensor, x)):
            return True
    return False


def check_float8_kernel(
    torch_names: tuple[str, ...], tags: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    """Raises eager's error where torch has no kernel of the op ``torch_names[0]`` for the
    float8 tensors among ``args``; any other outcome of the probe (it returns, or raises for
    the probe's own values or shapes) leaves the op to the IR."""
    if any(tag in tags for tag in _NOT_PROBED) or not torch_names:
        return
    fn = _torch_callable(torch_names[0])
    if fn is None:
        return
    tensors = [
        t
        for x in itertools.chain(args, kwargs.values())
        for t in (x if type(x) in (list, tuple) else (x,))
        if isinstance(t, TensorProxy)
    ]
    # (a symbolic size by its value: int() of it would record a guard)
    shapes = {id(t): tuple(_value(s) for s in t.shape) for t in tensors}
    if not all(type(s) is int for shape in shapes.values() for s in shape):
        return
    if sum(math.prod(s) for s in shapes.values()) > _PROBE_ELEMENTS:
        shapes = {k: (1,) * len(s) for k, s in shapes.items()}
    try:
        probes = {id(t): _zeros(t, shapes[id(t)]) for t in tensors}
    except (RuntimeError, AssertionError):
        return  # a device this process cannot allocate on
    if any(p.device.type == "meta" for p in probes.values()):
        return  # meta tensors have no dtype kernels

    def real(x: Any) -> Any:
        if isinstance(x, TensorProxy):
            return probes[id(x)]
        if isinstance(x, NumberProxy):
            return _value(x)
        if type(x) in (list, tuple):
            return type(x)(map(real, x))
        if isinstance(x, dtypes.DType):
            return dtypes.to_torch_dtype(x)
        if isinstance(x, Device):
            return to_torch_device(x)
        return x

    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the program's own call warns, once
            fn(*map(real, args), **{k: real(v) for k, v in kwargs.items()})
    except (RuntimeError, NotImplementedError) as e:
        message = str(e).split("\n")[0]
        if "not implemented for" in message and any(n in message for n in _FLOAT8_TORCH_NAMES):
            # eager's error as the program's own (not an IR refusal, which would run torch)
            raise type(e)(message) from None
    except Exception:
        pass  # the probe's values or shapes, not its dtypes: the IR's checks decide


def _value(x: Any) -> Any:
    return x.value if isinstance(x, NumberProxy) else x


def _zeros(t: TensorProxy, shape: tuple[int, ...]) -> torch.Tensor:
    dtype = dtypes.to_torch_dtype(t.dtype)
    return torch.zeros(shape, dtype=dtype, device=to_torch_device(t.device))


def _torch_callable(name: str) -> Any:
    """torch's own callable named ``name`` (``torch.add``; ``torch.Tensor.add`` as the
    unbound method), or None (a property, a name this torch lacks)."""
    from thunder_ir.ops._registry import _torchs_tensor_attribute, resolve_torch_name

    if name.startswith("torch.Tensor."):
        fn = _torchs_tensor_attribute(torch, name.removeprefix("torch.Tensor."))
    else:
        fn = resolve_torch_name(name)
    return fn if callable(fn) else None
