"""OpInfos of conversions (Tensor.to and the dtype shorthands), detach, and the in-place writes
copy_, zero_ and fill_."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

from opinfos._base import ALL_NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor
from thunder_ir import ops as ltorch

DTYPES = (*ALL_NUMERIC, torch.float16, torch.bool)


def _values(dtype: torch.dtype) -> Iterator[torch.Tensor]:
    # Values that every target dtype represents (small, non-negative for uint8).
    yield make_tensor((2, 3), dtype, low=0, high=9)
    yield make_tensor((), dtype, low=0, high=9)
    yield make_tensor((4, 6), dtype, low=0, high=9, noncontiguous=True)


def to_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    for t in _values(dtype):
        yield SampleInput((t, torch.float64))
        yield SampleInput((t, torch.int32))
        yield SampleInput((t, dtype))  # no change
    t = make_tensor((2, 3), dtype, low=0, high=9)
    yield SampleInput((t, "cpu"))
    yield SampleInput((t, torch.device("cpu"), torch.float16))
    yield SampleInput((t,), {"dtype": torch.bfloat16, "copy": True})
    yield SampleInput((t, dtype), {"copy": True})
    yield SampleInput((t,), {"device": "cpu", "dtype": torch.bool})
    yield SampleInput((t, make_tensor((1,), torch.float64)))
    yield SampleInput((t, torch.float32, False, True))  # positional non_blocking, copy


def to_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((make_tensor((2,), torch.float32), "cpu"), {"bogus": 1}),
        TypeError,
        r"to\(\) got unexpected keyword arguments",
    )


def type_as_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    for t in _values(dtype):
        yield SampleInput((t, make_tensor((1,), torch.float64)))
        yield SampleInput((t, make_tensor((), dtype)))


def type_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    for t in _values(dtype):
        yield SampleInput((t, torch.float64))
        yield SampleInput((t, "torch.IntTensor"))
    yield SampleInput((make_tensor((2,), dtype, low=0, high=9),), {"dtype": torch.bool})


def unary_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    for t in _values(dtype):
        yield SampleInput((t,))


def copy_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((make_tensor((2, 3), dtype), make_tensor((2, 3), dtype)))
    yield SampleInput(
        (make_tensor((2, 3), dtype, noncontiguous=True), make_tensor((3,), dtype))
    )  # broadcast
    yield SampleInput(
        (make_tensor((2, 3), dtype), make_tensor((2, 1), torch.float64, low=0, high=9))
    )  # converted
    yield SampleInput((make_tensor((), dtype), make_tensor((), dtype)))


def copy_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((make_tensor((3,), torch.float32), make_tensor((2, 3), torch.float32))),
        RuntimeError,
        r"doesn't match the broadcast shape|must match",
    )


def fill_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    value = True if dtype == torch.bool else 3
    yield SampleInput((make_tensor((2, 3), dtype), value))
    yield SampleInput((make_tensor((4, 6), dtype, noncontiguous=True), value))
    yield SampleInput((make_tensor((), dtype), value))
    yield SampleInput((make_tensor((2, 3), dtype), make_tensor((), dtype)))


def fill_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((make_tensor((2, 3), torch.float32), make_tensor((2,), torch.float32))),
        RuntimeError,
        r"fill_ only supports 0-dimension value tensor",
    )


def _inplace(method: str) -> Any:
    def ref(a: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        return getattr(a.clone(), method)(*args, **kwargs)  # type: ignore[no-any-return]

    return ref


def _shorthand(op: Any, method: str) -> OpInfo:
    return OpInfo(op, getattr(torch.Tensor, method), unary_samples, dtypes=DTYPES, name=method)


OPINFOS = [
    OpInfo(ltorch.to, torch.Tensor.to, to_samples, dtypes=DTYPES, error_inputs=to_errors),
    OpInfo(ltorch.type_as, torch.Tensor.type_as, type_as_samples, dtypes=DTYPES),
    OpInfo(ltorch.type, torch.Tensor.type, type_samples, dtypes=DTYPES),
    *(
        _shorthand(getattr(ltorch, m), m)
        for m in (
            "float",
            "double",
            "half",
            "bfloat16",
            "int",
            "long",
            "short",
            "char",
            "byte",
            "bool",
        )
    ),
    OpInfo(ltorch.cpu, torch.Tensor.cpu, unary_samples, dtypes=DTYPES),
    OpInfo(ltorch.detach, torch.detach, unary_samples, dtypes=DTYPES),
    OpInfo(ltorch.copy_, _inplace("copy_"), copy_samples, dtypes=DTYPES, error_inputs=copy_errors),
    OpInfo(ltorch.zero_, _inplace("zero_"), unary_samples, dtypes=DTYPES),
    OpInfo(ltorch.fill_, _inplace("fill_"), fill_samples, dtypes=DTYPES, error_inputs=fill_errors),
    OpInfo(ltorch.fill, torch.fill, fill_samples, dtypes=DTYPES),
]
