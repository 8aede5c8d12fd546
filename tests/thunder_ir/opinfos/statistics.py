"""OpInfos of covariance, correlation, histograms and combinations: ops whose output shapes are
static although torch computes some of their scalars on the host."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from opinfos._base import FLOATS, ErrorInput, OpInfo, SampleInput, make_tensor
from thunder_ir import ops as ltorch


def _t(shape: tuple[int, ...], dtype: torch.dtype, **kw: object) -> torch.Tensor:
    return make_tensor(shape, dtype, **kw)  # type: ignore[arg-type]


def cov_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    x = _t((3, 6), dtype, requires_grad=rg)
    fw = torch.randint(1, 4, (6,))
    fw[2] = 0  # a zero frequency
    aw = make_tensor((6,), dtype, low=0.0, high=2.0)
    yield SampleInput((x,))
    yield SampleInput((_t((7,), dtype, requires_grad=rg),))
    yield SampleInput((x,), {"correction": 0})
    yield SampleInput((x,), {"correction": 6})  # degrees of freedom <= 0: eager's inf/nan
    yield SampleInput((x,), {"fweights": fw})
    yield SampleInput((x,), {"aweights": aw})
    yield SampleInput((x,), {"fweights": fw, "aweights": aw, "correction": 2})
    yield SampleInput((_t((2, 1), dtype),), {"aweights": aw[:1] + 0.5, "fweights": fw[:1]})
    yield SampleInput((_t((1, 5), dtype, noncontiguous=True),))
    yield SampleInput((torch.randint(-3, 4, (2, 5)),), {"fweights": fw[:5]})


def cov_errors() -> Iterator[ErrorInput]:
    x = torch.randn(2, 4)
    yield ErrorInput(SampleInput((torch.randn(2, 2, 2),)), RuntimeError, r"two or fewer dim")
    yield ErrorInput(SampleInput((x > 0,)), RuntimeError, r"bool dtype is not supported")
    yield ErrorInput(
        SampleInput((x,), {"fweights": torch.ones(4)}), RuntimeError, r"fweights to have integral"
    )
    yield ErrorInput(
        SampleInput((x,), {"aweights": torch.ones(3)}), RuntimeError, r"same numel as there are"
    )


def corrcoef_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t((4, 7), dtype, requires_grad=rg),))
    yield SampleInput((_t((6,), dtype, requires_grad=rg),))  # a scalar: c / c
    yield SampleInput((_t((3, 1), dtype),))  # one observation: nan
    yield SampleInput((torch.randint(-3, 4, (3, 5)),))


def histogram_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    x = _t((4, 25), dtype)
    yield SampleInput((x, 7))
    yield SampleInput((x, 10), {"density": True})
    yield SampleInput((x, 5), {"range": (-2, 3), "weight": _t((4, 25), dtype, low=0.0)})
    yield SampleInput((torch.arange(11, dtype=dtype), 10))  # the last edge is in the last bin
    yield SampleInput((torch.ones(3, dtype=dtype), 3))  # an empty range, widened by 0.5
    yield SampleInput((torch.empty(0, dtype=dtype), 4))
    yield SampleInput((_t((30,), dtype), 4), {"range": (0.0, 0.0)})
    edges = torch.tensor([-5.0, -1.0, 0.0, 0.5, 2.0], dtype=dtype)
    yield SampleInput((x, edges), {"weight": _t((4, 25), dtype, low=0.0), "density": True})


def histogram_errors() -> Iterator[ErrorInput]:
    x = torch.randn(10)
    yield ErrorInput(SampleInput((x, 0)), RuntimeError, r"bins must be > 0")
    yield ErrorInput(SampleInput((x, 3), {"range": (1.0, 0.0)}), RuntimeError, r"should not exceed")
    yield ErrorInput(
        SampleInput((x, 3), {"weight": torch.ones(9)}), RuntimeError, r"the same shape as the input"
    )
    yield ErrorInput(SampleInput((x.long(), 3)), NotImplementedError, r"not implemented for 'Long'")
    yield ErrorInput(SampleInput((x, torch.ones(1, 2))), RuntimeError, r"should have one dimension")


def combinations_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    x = _t((5,), dtype, requires_grad=rg)
    yield SampleInput((x,))
    yield SampleInput((x, 3))
    yield SampleInput((x, 3, True))
    yield SampleInput((x, 1))
    yield SampleInput((x, 0))
    yield SampleInput((x, 7))  # more than there are: no rows
    yield SampleInput((_t((0,), dtype), 2, True))


def combinations_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(SampleInput((torch.randn(2, 2),)), RuntimeError, r"Expect a 1D vector")
    yield ErrorInput(SampleInput((torch.randn(3), -1)), RuntimeError, r"non-negative number")


OPINFOS = [
    OpInfo(ltorch.cov, torch.cov, cov_samples, dtypes=FLOATS, error_inputs=cov_errors),
    OpInfo(ltorch.corrcoef, torch.corrcoef, corrcoef_samples, dtypes=FLOATS),
    OpInfo(
        ltorch.histogram,
        torch.histogram,
        histogram_samples,
        dtypes=FLOATS,
        error_inputs=histogram_errors,
        supports_grad=False,
    ),
    OpInfo(
        ltorch.combinations,
        torch.combinations,
        combinations_samples,
        dtypes=(*FLOATS, torch.int64, torch.bool),
        error_inputs=combinations_errors,
    ),
]
