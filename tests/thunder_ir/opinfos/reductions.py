"""OpInfos of reductions."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from opinfos._base import ALL_NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor
from thunder_ir import ops as ltorch


def reduction_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((3, 4, 5), dtype, requires_grad=requires_grad)
    yield SampleInput((make_tensor((), dtype),))
    yield SampleInput((t,))
    yield SampleInput((t, 1))
    yield SampleInput((t, (0, 2), True))
    yield SampleInput((t, -1), {"keepdim": True})
    yield SampleInput((make_tensor((4, 6), dtype, noncontiguous=True),), {"dim": 0})


def sum_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(SampleInput((make_tensor((3, 4), torch.float32), 2)), IndexError, r"Dimension out of range")


OPINFOS = [
    OpInfo(ltorch.sum, torch.sum, reduction_samples, dtypes=(*ALL_NUMERIC, torch.bool), error_inputs=sum_errors),
]
