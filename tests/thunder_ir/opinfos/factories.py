"""OpInfos of tensor factories: filled, _like, new_, ranges and random."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch

from opinfos._base import ALL_NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor
from thunder_ir import ops as ltorch

DTYPES = (*ALL_NUMERIC, torch.bool)
FLOATS = (torch.float32, torch.float64, torch.bfloat16)


def _same_metadata(got: Any, expected: Any) -> None:
    """For tensors whose values are unspecified (empty): shape, dtype and device agree."""
    assert isinstance(got, torch.Tensor), type(got)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    assert got.device == expected.device, (got.device, expected.device)


def _in_unit_interval(got: Any, expected: Any) -> None:
    _same_metadata(got, expected)
    assert bool(((got >= 0) & (got <= 1)).all()), "uniform draw outside [0, 1]"


def _finite(got: Any, expected: Any) -> None:
    _same_metadata(got, expected)
    assert bool(got.isfinite().all()), "normal draw not finite"
    if got.numel() > 1000:
        assert abs(float(got.double().mean())) < 0.2 and abs(float(got.double().std()) - 1) < 0.2


def _in_range(low: int, high: int) -> Callable[[Any, Any], None]:
    def compare(got: Any, expected: Any) -> None:
        _same_metadata(got, expected)
        assert bool(((got >= low) & (got < high)).all()), f"randint draw outside [{low}, {high})"

    return compare


def sized_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((2, 3), {"dtype": dtype})
    yield SampleInput(((4,),), {"dtype": dtype})
    yield SampleInput(((),), {"dtype": dtype})
    yield SampleInput((torch.Size([0, 3]),), {"dtype": dtype, "device": "cpu"})
    if dtype == torch.float32:
        yield SampleInput((3, 1))  # the default dtype


def sized_errors(op: str) -> Callable[[], Iterator[ErrorInput]]:
    def errors() -> Iterator[ErrorInput]:
        yield ErrorInput(
            SampleInput((2, -1)),
            RuntimeError,
            r"Trying to create tensor with negative dimension -1",
        )
        yield ErrorInput(
            SampleInput((2, 1.5)), TypeError, rf"{op}\(\): argument 'size' must be tuple of ints"
        )

    return errors


def full_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    value = True if dtype == torch.bool else 3
    yield SampleInput(((2, 3), value), {"dtype": dtype})
    yield SampleInput(((), value), {"dtype": dtype})
    if dtype == torch.float32:
        for v in (2, 2.5, True):  # dtype inferred from the value
            yield SampleInput(((2,), v))


def like_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((make_tensor((2, 3), dtype),))
    yield SampleInput((make_tensor((), dtype),))
    yield SampleInput((make_tensor((4, 6), dtype, noncontiguous=True),), {"dtype": torch.float64})


def full_like_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    value = True if dtype == torch.bool else 2
    yield SampleInput((make_tensor((2, 3), dtype), value))
    yield SampleInput((make_tensor((), dtype), value))
    yield SampleInput((make_tensor((2, 3), dtype), 1.5), {"dtype": torch.float32})


def new_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((2, 3), dtype)
    yield SampleInput((t, 4, 5))
    yield SampleInput((t, (3,)))
    yield SampleInput((t, ()), {"dtype": torch.float64})


def new_full_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((2, 3), dtype)
    value = True if dtype == torch.bool else 7
    yield SampleInput((t, (4, 5), value))
    yield SampleInput((t, (), value), {"dtype": torch.float64})


def arange_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((10,), {"dtype": dtype})
    yield SampleInput((2, 11, 3), {"dtype": dtype})
    yield SampleInput((10, 0, -3), {"dtype": dtype})
    yield SampleInput((5, 5), {"dtype": dtype})
    if dtype.is_floating_point:
        yield SampleInput((0.5, 3.2, 0.3), {"dtype": dtype})
        yield SampleInput((-1, 1, 0.1), {"dtype": dtype})
    if dtype == torch.float32:
        yield SampleInput((7,))  # int64 by default
        yield SampleInput((1, 2.5, 0.5))  # float32 by default
        yield SampleInput((0, 1000, 0.7))


def arange_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(SampleInput((0, 10, 0)), RuntimeError, r"step must be nonzero")
    yield ErrorInput(
        SampleInput((10, 0, 1)),
        RuntimeError,
        r"upper bound and larger bound inconsistent with step sign",
    )


def linspace_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((0, 1, 5), {"dtype": dtype})
    yield SampleInput((-2.5, 7.5, 11), {"dtype": dtype})
    yield SampleInput((3, -3, 2), {"dtype": dtype})
    yield SampleInput((1, 2, 1), {"dtype": dtype})
    yield SampleInput((1, 2, 0), {"dtype": dtype})
    if dtype == torch.float32:
        yield SampleInput((0, 10, 101))


def eye_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((3,), {"dtype": dtype})
    yield SampleInput((2, 4), {"dtype": dtype})
    yield SampleInput((4, 2), {"dtype": dtype})
    yield SampleInput((0,), {"dtype": dtype})
    if dtype == torch.float32:
        yield SampleInput((3,))


def eye_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(SampleInput((-1,)), RuntimeError, r"n must be greater or equal to 0, got -1")


def random_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((2, 3), {"dtype": dtype})
    yield SampleInput(((64, 64),), {"dtype": dtype})
    yield SampleInput(((),), {"dtype": dtype})
    if dtype == torch.float32:
        yield SampleInput((5,))


def rand_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((2,), {"dtype": torch.int64}),
        RuntimeError,
        r"\"check_uniform_bounds\" not implemented for 'Long'",
    )


def random_like_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((make_tensor((2, 3), dtype),))
    yield SampleInput((make_tensor((64, 64), dtype, noncontiguous=True),))
    yield SampleInput((make_tensor((), dtype),))


def randint_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((3, 10, (4, 5)), {"dtype": dtype})
    yield SampleInput((3, (100,)), {"dtype": dtype})


OPINFOS = [
    OpInfo(
        ltorch.zeros, torch.zeros, sized_samples, dtypes=DTYPES, error_inputs=sized_errors("zeros")
    ),
    OpInfo(
        ltorch.ones, torch.ones, sized_samples, dtypes=DTYPES, error_inputs=sized_errors("ones")
    ),
    OpInfo(ltorch.empty, torch.empty, sized_samples, dtypes=DTYPES, compare=_same_metadata),
    OpInfo(ltorch.full, torch.full, full_samples, dtypes=DTYPES),
    OpInfo(ltorch.zeros_like, torch.zeros_like, like_samples, dtypes=DTYPES),
    OpInfo(ltorch.ones_like, torch.ones_like, like_samples, dtypes=DTYPES),
    OpInfo(
        ltorch.empty_like, torch.empty_like, like_samples, dtypes=DTYPES, compare=_same_metadata
    ),
    OpInfo(ltorch.full_like, torch.full_like, full_like_samples, dtypes=DTYPES),
    OpInfo(ltorch.new_zeros, torch.Tensor.new_zeros, new_samples, dtypes=DTYPES),
    OpInfo(ltorch.new_ones, torch.Tensor.new_ones, new_samples, dtypes=DTYPES),
    OpInfo(
        ltorch.new_empty, torch.Tensor.new_empty, new_samples, dtypes=DTYPES, compare=_same_metadata
    ),
    OpInfo(ltorch.new_full, torch.Tensor.new_full, new_full_samples, dtypes=DTYPES),
    OpInfo(
        ltorch.arange,
        torch.arange,
        arange_samples,
        dtypes=(torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32),
        error_inputs=arange_errors,
    ),
    OpInfo(
        ltorch.linspace,
        torch.linspace,
        linspace_samples,
        dtypes=(torch.float32, torch.float64, torch.bfloat16, torch.int64),
    ),
    OpInfo(ltorch.eye, torch.eye, eye_samples, dtypes=DTYPES, error_inputs=eye_errors),
    OpInfo(
        ltorch.rand,
        torch.rand,
        random_samples,
        dtypes=FLOATS,
        compare=_in_unit_interval,
        error_inputs=rand_errors,
    ),
    OpInfo(ltorch.randn, torch.randn, random_samples, dtypes=FLOATS, compare=_finite),
    OpInfo(
        ltorch.rand_like,
        torch.rand_like,
        random_like_samples,
        dtypes=FLOATS,
        compare=_in_unit_interval,
    ),
    OpInfo(
        ltorch.randn_like, torch.randn_like, random_like_samples, dtypes=FLOATS, compare=_finite
    ),
    OpInfo(
        ltorch.randint,
        torch.randint,
        randint_samples,
        dtypes=(torch.int64, torch.int32, torch.float32),
        compare=_in_range(0, 10),
    ),
]
