"""OpInfos of shape and view ops."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from opinfos._base import ALL_NUMERIC, ErrorInput, OpInfo, SampleInput, make_tensor
from thunder_ir import ops as ltorch


def reshape_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = make_tensor((2, 3, 4), dtype, requires_grad=requires_grad)
    yield SampleInput((t, (6, 4)))
    yield SampleInput((t, -1))
    yield SampleInput((t, (4, -1)))
    yield SampleInput((make_tensor((), dtype), (1, 1)))
    yield SampleInput((make_tensor((4, 6), dtype, noncontiguous=True), (24,)))


def reshape_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(SampleInput((make_tensor((2, 3), torch.float32), (4, 2))), RuntimeError, r"shape '\[4, 2\]' is invalid for input of size 6")


OPINFOS = [
    OpInfo(ltorch.reshape, torch.reshape, reshape_samples, dtypes=ALL_NUMERIC, error_inputs=reshape_errors, torch_names=("torch.reshape", "torch.Tensor.reshape")),
]
