"""OpInfos of loss functions: cross entropy (class indices, ignore_index, label smoothing, class
probabilities), nll, regression and binary losses, KL divergence."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F

from opinfos._base import ErrorInput, OpInfo, SampleInput, make_tensor
from thunder_ir import ops as ltorch

FLOATS_BF16 = (torch.float32, torch.float64, torch.bfloat16)
F32 = torch.float32


def _t(
    dtype: torch.dtype,
    *shape: int,
    nc: bool = False,
    low: float | None = None,
    high: float | None = None,
    rg: bool = False,
) -> torch.Tensor:
    return make_tensor(shape, dtype, noncontiguous=nc, low=low, high=high, requires_grad=rg)


def _idx(high: int, *shape: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.randint(0, high, shape, dtype=dtype)


# Losses ---------------------------------------------------------------------------------------------


def cross_entropy_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    n, c = 6, 5
    target = _idx(c, n)
    yield SampleInput((t(n, c), target))  # logits (batch*seq, vocab)
    yield SampleInput((t(n, c), target), {"reduction": "sum"})
    yield SampleInput((t(n, c), target), {"reduction": "none"})
    ignored = target.clone()
    ignored[::2] = -100
    yield SampleInput((t(n, c, nc=True), ignored))  # nanoGPT's ignore_index=-100 padding
    yield SampleInput((t(n, c), target), {"ignore_index": 1, "reduction": "mean"})
    yield SampleInput((t(n, c), target), {"weight": _t(dtype, c, low=0.1, high=1.0)})
    yield SampleInput(
        (t(n, c), ignored), {"weight": _t(dtype, c, low=0.1, high=1.0), "reduction": "sum"}
    )
    yield SampleInput((t(2, c, 3), _idx(c, 2, 3)))  # (N, C, d1)
    yield SampleInput((t(c), torch.tensor(2)))  # unbatched
    for reduction in ("mean", "sum", "none"):
        yield SampleInput((t(n, c), ignored), {"label_smoothing": 0.1, "reduction": reduction})
        yield SampleInput(
            (t(n, c), ignored),
            {
                "label_smoothing": 0.2,
                "reduction": reduction,
                "weight": _t(dtype, c, low=0.1, high=1.0),
            },
        )
    probs = torch.softmax(_t(dtype, n, c), -1)
    yield SampleInput((t(n, c), probs))  # class probabilities
    yield SampleInput((t(n, c), probs), {"label_smoothing": 0.3, "reduction": "sum"})
    yield SampleInput(
        (t(2, c, 3), torch.softmax(_t(dtype, 2, c, 3), 1)),
        {"weight": _t(dtype, c, low=0.1, high=1.0), "reduction": "none"},
    )


def cross_entropy_errors() -> Iterator[ErrorInput]:
    x = _t(F32, 3, 5)
    yield ErrorInput(
        SampleInput((x, torch.tensor([1.0, 2.0, 3.0]))),
        RuntimeError,
        r"expected target dtype to be Long or Byte, but got Float",
    )
    yield ErrorInput(
        SampleInput((x, torch.tensor([1, 2, 3], dtype=torch.int32))),
        RuntimeError,
        r"expected target dtype to be Long or Byte, but got Int",
    )
    yield ErrorInput(
        SampleInput((x, _idx(5, 4))),
        ValueError,
        r"Expected input batch_size \(3\) to match target batch_size \(4\)",
    )
    yield ErrorInput(
        SampleInput((x, _idx(5, 3, 5))),
        RuntimeError,
        r"Expected floating point type for target with class probabilities, got Long",
    )
    yield ErrorInput(
        SampleInput((x, _idx(5, 3)), {"weight": _t(F32, 4)}),
        RuntimeError,
        r"weight tensor should be defined either for all 5 classes or no classes",
    )
    yield ErrorInput(
        SampleInput((x, _idx(5, 3)), {"label_smoothing": 1.5}),
        RuntimeError,
        r"label_smoothing must be between 0.0 and 1.0. Got: 1.5",
    )
    yield ErrorInput(
        SampleInput((_t(F32, 2, 5, 3), _idx(5, 2, 4))),
        RuntimeError,
        r"Expected target size \[2, 3\], got \[2, 4\]",
    )
    yield ErrorInput(
        SampleInput((x, _idx(5, 3)), {"reduction": "average"}),
        ValueError,
        r"average is not a valid value for reduction",
    )


def nll_loss_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    n, c = 6, 5
    logp = torch.log_softmax(_t(dtype, n, c), -1)
    target = _idx(c, n)
    ignored = target.clone()
    ignored[1::3] = -100
    yield SampleInput((logp, target))
    yield SampleInput((logp, ignored), {"reduction": "sum"})
    yield SampleInput(
        (logp, ignored), {"weight": _t(dtype, c, low=0.1, high=1.0), "reduction": "none"}
    )
    yield SampleInput((logp, ignored), {"weight": _t(dtype, c, low=0.1, high=1.0)})
    yield SampleInput((logp, target), {"size_average": False})  # legacy arguments
    yield SampleInput((torch.log_softmax(_t(dtype, 2, c, 3, 2), 1), _idx(c, 2, 3, 2)))
    yield SampleInput((logp[0], target[0]))


def nll_loss_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32), torch.tensor(1))),
        ValueError,
        r"Expected 1 or more dimensions \(got 0\)",
    )


def _pair_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    yield SampleInput((t(4, 5), t(4, 5)))
    yield SampleInput((t(2, 3, 4, nc=True), t(2, 3, 4)), {"reduction": "sum"})
    yield SampleInput((t(4, 5), t(4, 5)), {"reduction": "none"})
    yield SampleInput((t(), t()))


def weighted_pair_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield from _pair_samples(dtype, rg)
    for reduction in ("mean", "sum", "none"):
        yield SampleInput(
            (_t(dtype, 4, 5), _t(dtype, 4, 5)),
            {"reduction": reduction, "weight": _t(dtype, 4, 5, low=0.1, high=1.0)},
        )


def smooth_l1_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield from _pair_samples(dtype, rg)
    yield SampleInput((_t(dtype, 4, 5), _t(dtype, 4, 5)), {"beta": 0.5})
    yield SampleInput((_t(dtype, 4, 5), _t(dtype, 4, 5)), {"beta": 0.0, "reduction": "sum"})


def huber_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield from _pair_samples(dtype, rg)
    yield SampleInput((_t(dtype, 4, 5), _t(dtype, 4, 5)), {"delta": 0.5, "reduction": "none"})


def mse_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 3), _t(F32, 3)), {"reduction": "avg"}),
        ValueError,
        r"avg is not a valid value for reduction",
    )


def bce_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def p(*s: int) -> torch.Tensor:
        return _t(dtype, *s, low=0.01, high=0.99)

    yield SampleInput((p(4, 5), p(4, 5)))
    yield SampleInput(
        (p(4, 5), p(4, 5)), {"reduction": "none", "weight": _t(dtype, 4, 5, low=0.1, high=1.0)}
    )
    yield SampleInput((p(6), torch.randint(0, 2, (6,)).to(dtype)), {"reduction": "sum"})
    yield SampleInput(
        (torch.tensor([0.0, 1.0, 0.5], dtype=dtype), torch.tensor([0.0, 1.0, 1.0], dtype=dtype))
    )


def bce_logits_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, low=-4, high=4, rg=rg)

    def p(*s: int) -> torch.Tensor:
        return _t(dtype, *s, low=0.0, high=1.0)

    yield SampleInput((t(4, 5), p(4, 5)))
    yield SampleInput(
        (t(4, 5, nc=True), p(4, 5)), {"reduction": "sum", "weight": _t(dtype, 5, low=0.1, high=1.0)}
    )
    yield SampleInput(
        (t(4, 5), p(4, 5)), {"reduction": "none", "pos_weight": _t(dtype, 5, low=0.5, high=3.0)}
    )
    yield SampleInput(
        (
            torch.tensor([-100.0, 0.0, 100.0], dtype=dtype),
            torch.tensor([0.0, 1.0, 1.0], dtype=dtype),
        )
    )


def bce_logits_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 3, 5), _t(F32, 3))),
        ValueError,
        r"Target size \(torch.Size\(\[3\]\)\) must be the same as input size \(torch.Size\(\[3, 5\]\)\)",
    )


def kl_div_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    logp = torch.log_softmax(_t(dtype, 4, 6), -1)
    q = torch.softmax(_t(dtype, 4, 6), -1)
    yield SampleInput((logp, q), {"reduction": "batchmean"})
    yield SampleInput((logp, q), {"reduction": "sum"})
    yield SampleInput((logp, torch.log(q)), {"reduction": "none", "log_target": True})
    q0 = q.clone()
    q0[0, 0] = 0.0
    yield SampleInput((logp, q0), {"reduction": "batchmean"})


OPINFOS = [
    OpInfo(
        ltorch.cross_entropy,
        F.cross_entropy,
        cross_entropy_samples,
        dtypes=FLOATS_BF16,
        error_inputs=cross_entropy_errors,
    ),
    OpInfo(
        ltorch.nll_loss,
        F.nll_loss,
        nll_loss_samples,
        dtypes=FLOATS_BF16,
        error_inputs=nll_loss_errors,
    ),
    OpInfo(
        ltorch.mse_loss,
        F.mse_loss,
        weighted_pair_samples,
        dtypes=FLOATS_BF16,
        error_inputs=mse_errors,
    ),
    OpInfo(ltorch.l1_loss, F.l1_loss, weighted_pair_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.smooth_l1_loss, F.smooth_l1_loss, smooth_l1_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.huber_loss, F.huber_loss, huber_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.binary_cross_entropy, F.binary_cross_entropy, bce_samples, dtypes=FLOATS_BF16),
    OpInfo(
        ltorch.binary_cross_entropy_with_logits,
        F.binary_cross_entropy_with_logits,
        bce_logits_samples,
        dtypes=FLOATS_BF16,
        error_inputs=bce_logits_errors,
    ),
    OpInfo(ltorch.kl_div, F.kl_div, kl_div_samples, dtypes=FLOATS_BF16),
]
