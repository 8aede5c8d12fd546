"""Factory, random and in-place prims.

Random prims take their RNG state explicitly: ``seed=None`` draws from the ambient torch generator
at run time (as eager does under ``torch.manual_seed``); a ``seed`` (and ``offset``) makes the
draw a pure function of them, which lets passes recompute it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from thunder_ir.devices import Device, to_device
from thunder_ir.dtypes import DType
from thunder_ir.prims._common import check_shape, check_tensor, is_number, make_prim
from thunder_ir.proxies import TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import check


def _check_factory(
    shape: Sequence[Any], device: Any, dtype: Any, what: str
) -> tuple[tuple[Any, ...], Device]:
    shape = check_shape(shape, what)
    check(isinstance(dtype, DType), lambda: f"{what}: expected a dtype, got {dtype!r}", TypeError)
    return shape, to_device(device)


def _full_meta(shape: Sequence[Any], fill_value: Any, *, device: Any, dtype: DType) -> TensorProxy:
    shape, dev = _check_factory(shape, device, dtype, "prims.full")
    check(
        is_number(fill_value),
        lambda: f"prims.full: fill value must be a number, got {type(fill_value).__name__}",
        TypeError,
    )
    return TensorProxy(shape=shape, dtype=dtype, device=dev)


full = make_prim("full", _full_meta, tags=(OpTag.FACTORY,))


def _tensor_meta(
    values: Sequence[Any], shape: Sequence[Any], *, device: Any, dtype: DType
) -> TensorProxy:
    shape, dev = _check_factory(shape, device, dtype, "prims.tensor")
    check(
        isinstance(values, tuple) and all(is_number(v) for v in values),
        "prims.tensor: values must be a tuple of numbers",
        TypeError,
    )
    check(
        all(isinstance(s, int) for s in shape) and len(values) == math.prod(shape),
        lambda: f"prims.tensor: {len(values)} values do not fill the shape {shape}",
    )
    return TensorProxy(shape=shape, dtype=dtype, device=dev)


# A tensor of the given values (row-major), which may be symbolic numbers: ``torch.tensor``.
tensor = make_prim("tensor", _tensor_meta, tags=(OpTag.FACTORY,))


def _iota_meta(length: Any, *, start: Any, step: Any, device: Any, dtype: DType) -> TensorProxy:
    check(
        not isinstance(length, int) or length >= 0,
        lambda: f"prims.iota: length must be non-negative, got {length}",
    )
    _, dev = _check_factory((), device, dtype, "prims.iota")
    check(step != 0, "prims.iota: step must be non-zero")
    return TensorProxy(shape=(length,), dtype=dtype, device=dev)


iota = make_prim("iota", _iota_meta, tags=(OpTag.FACTORY,))


def _random_meta(name: str) -> Any:
    def meta(
        shape: Sequence[Any],
        a: Any,
        b: Any,
        *,
        device: Any,
        dtype: DType,
        seed: Any = None,
        offset: Any = 0,
    ) -> TensorProxy:
        shape, dev = _check_factory(shape, device, dtype, f"prims.{name}")
        check(
            dtype.is_float,
            lambda: f"prims.{name}: dtype must be floating point, got {dtype.name}",
            TypeError,
        )
        return TensorProxy(shape=shape, dtype=dtype, device=dev)

    return meta


uniform = make_prim("uniform", _random_meta("uniform"), tags=(OpTag.FACTORY, OpTag.RANDOM))
normal = make_prim("normal", _random_meta("normal"), tags=(OpTag.FACTORY, OpTag.RANDOM))


def _bernoulli_meta(
    shape: Sequence[Any], p: Any, *, device: Any, dtype: DType, seed: Any = None, offset: Any = 0
) -> TensorProxy:
    shape, dev = _check_factory(shape, device, dtype, "prims.bernoulli")
    check(is_number(p), "prims.bernoulli: p must be a number", TypeError)
    return TensorProxy(shape=shape, dtype=dtype, device=dev)


# 1 with probability p, else 0: ``torch.empty(shape).bernoulli_(p)``, the draw of eager's dropout.
bernoulli = make_prim("bernoulli", _bernoulli_meta, tags=(OpTag.FACTORY, OpTag.RANDOM))


def _bernoulli_like_meta(like: Any, p: Any, *, dtype: DType) -> TensorProxy:
    like = check_tensor(like, "prims.bernoulli_like")
    check(is_number(p), "prims.bernoulli_like: p must be a number", TypeError)
    return TensorProxy(shape=like.shape, dtype=dtype, device=like.device)


# ``torch.empty_like(like, dtype=dtype).bernoulli_(p)``, eager's CPU dropout draw: it fills in the
# memory order of ``like`` (whose values it does not read), so a transposed or channels-last
# input gets eager's mask for the same seed, where ``bernoulli`` fills in logical order.
bernoulli_like = make_prim("bernoulli_like", _bernoulli_like_meta, tags=(OpTag.RANDOM,))


def _randint_meta(
    shape: Sequence[Any],
    low: Any,
    high: Any,
    *,
    device: Any,
    dtype: DType,
    seed: Any = None,
    offset: Any = 0,
) -> TensorProxy:
    shape, dev = _check_factory(shape, device, dtype, "prims.randint")
    check(is_number(low) and is_number(high), "prims.randint: bounds must be numbers", TypeError)
    return TensorProxy(shape=shape, dtype=dtype, device=dev)


# Integers uniform in [low, high): ``torch.empty(shape).random_(low, high)``, as torch.randint.
randint = make_prim("randint", _randint_meta, tags=(OpTag.FACTORY, OpTag.RANDOM))


def _copy__meta(src: Any, dst: Any, *, bumps_version: bool = True) -> TensorProxy:
    # ``bumps_version=False``: the write leaves ``dst``'s autograd version counter as it was, as
    # torch's batch_norm kernel leaves its running statistics' (autograd does not see it).
    src, dst = check_tensor(src, "prims.copy_"), check_tensor(dst, "prims.copy_")
    check(
        src.shape == dst.shape,
        lambda: f"prims.copy_: shapes differ, {src.shape} and {dst.shape} (broadcast first)",
    )
    check(
        src.dtype == dst.dtype,
        lambda: (
            f"prims.copy_: dtypes differ, {src.dtype.name} and {dst.dtype.name} (convert first)"
        ),
    )
    if src.requires_grad and not dst.requires_grad:
        # The written tensor requires grad from now on, as eager's does after the write (a
        # grad-mode write: under no_grad ``src`` comes without grad): what the program reads of
        # it later (``.requires_grad``, a torch fallback's fake run) says so.
        dst.requires_grad = True
        from thunder_ir.aliasing import flag_aliases_requiring_grad

        flag_aliases_requiring_grad(dst)
    return TensorProxy(
        shape=dst.shape,
        dtype=dst.dtype,
        device=dst.device,
        requires_grad=dst.requires_grad,
    )


copy_ = make_prim("copy_", _copy__meta, tags=(OpTag.IN_PLACE, OpTag.DONT_DCE, OpTag.WRITE))


def _device_put_meta(a: Any, device: Any) -> TensorProxy:
    a = check_tensor(a, "prims.device_put")
    return TensorProxy(
        shape=a.shape, dtype=a.dtype, device=to_device(device), requires_grad=a.requires_grad
    )


# The tensor copied to ``device`` (Tensor.to(device)).
device_put = make_prim("device_put", _device_put_meta)
