"""OpInfos of elementwise ops."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from opinfos._base import ALL_NUMERIC, FLOATS_AND_HALF, ErrorInput, OpInfo, SampleInput, make_tensor
from thunder_ir import ops as ltorch


def unary_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    for shape in ((), (5,), (3, 4), (2, 3, 4)):
        yield SampleInput((make_tensor(shape, dtype, requires_grad=requires_grad),))
    yield SampleInput((make_tensor((4, 6), dtype, noncontiguous=True, requires_grad=requires_grad),))


def binary_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    def t(*shape: int, nc: bool = False) -> torch.Tensor:
        return make_tensor(shape, dtype, requires_grad=requires_grad, noncontiguous=nc)

    yield SampleInput((t(), t()))
    yield SampleInput((t(3, 4), t(3, 4)))
    yield SampleInput((t(3, 4, nc=True), t(4)))  # broadcasting, non-contiguous
    yield SampleInput((t(2, 1, 4), t(3, 1)))
    yield SampleInput((t(3, 4), t()))  # 0-d tensor operand
    yield SampleInput((t(3, 4), 2))  # Python scalar (weak)
    yield SampleInput((t(3, 4), 2.5))
    yield SampleInput((t(3, 4), make_tensor((3, 4), torch.float64)))  # mixed dtypes promote


def binary_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((make_tensor((3, 4), torch.float32), make_tensor((5,), torch.float32))),
        RuntimeError,
        r"The size of tensor a \(4\) must match the size of tensor b \(5\)",
    )


OPINFOS = [
    OpInfo(ltorch.exp, torch.exp, unary_samples, dtypes=(*FLOATS_AND_HALF, torch.int64)),
    OpInfo(ltorch.add, torch.add, binary_samples, dtypes=ALL_NUMERIC, error_inputs=binary_errors),
    OpInfo(
        ltorch.add,
        torch.add,
        lambda dt, rg: (SampleInput(s.args, {"alpha": 2}) for s in binary_samples(dt, rg)),
        dtypes=ALL_NUMERIC,
        name="add_alpha",
    ),
    OpInfo(ltorch.mul, torch.mul, binary_samples, dtypes=ALL_NUMERIC),
]
