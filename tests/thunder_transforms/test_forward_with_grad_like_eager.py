"""Ops whose forward, while gradients flow, ran as their decomposition and rounded otherwise than
eager's kernel (without grad the torch_ops executor runs the kernel): softmin, float16/bfloat16
nansum and batch_norm with running statistics in evaluation. Kept whole by their grad rules,
their forward equals eager's bit for bit with inputs requiring grad, and so do their gradients."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import thunder

pytestmark = pytest.mark.filterwarnings("error:thunder.jit")

Make = Callable[[torch.dtype], list[torch.Tensor]]


def _with_nans(*shape: int) -> Make:
    def make(dtype: torch.dtype) -> list[torch.Tensor]:
        x = torch.randn(shape) * 10
        return [torch.where(torch.rand(shape) < 0.1, float("nan"), x).to(dtype)]

    return make


def _eval_stats(x: torch.Tensor, m: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
    # running statistics, as a module holds them: not requiring grad
    return x, m.detach(), v.detach().abs() + 0.1


LOW = [torch.bfloat16, torch.float16]
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]

CASES: dict[str, tuple[Callable[..., torch.Tensor], Make, list[torch.dtype]]] = {
    "softmin-last": (
        lambda x: F.softmin(x, -1),
        lambda dt: [torch.randn(8, 100).to(dt)],
        FLOATS,
    ),
    "softmin-dim0-3d": (
        lambda x: F.softmin(x, 0),
        lambda dt: [torch.randn(37, 4, 5).to(dt)],
        FLOATS,
    ),
    "softmin-dtype": (
        lambda x: F.softmin(x, 1, dtype=torch.float64),
        lambda dt: [torch.randn(6, 50).to(dt)],
        [torch.float32, torch.bfloat16],
    ),
    "softmin-0d": (lambda x: F.softmin(x, 0), lambda dt: [torch.randn(()).to(dt)], FLOATS),
    "nansum-dims": (lambda x: torch.nansum(x, (0, 2)), _with_nans(4, 33, 5), LOW),
    "nansum-keepdim": (lambda x: x.nansum((0, 2), keepdim=True), _with_nans(7, 9, 3), LOW),
    "nansum-all": (lambda x: x.nansum(), _with_nans(16, 65), LOW),
    "nansum-dtype": (
        lambda x: torch.nansum(x, (0, 2), dtype=torch.float32),
        _with_nans(4, 33, 5),
        LOW,
    ),
    "batch_norm-eval": (
        lambda x, m, v, w, b: F.batch_norm(*_eval_stats(x, m, v), w, b, training=False),
        lambda dt: [torch.randn(s).to(dt) for s in ((4, 16, 5, 7), (16,), (16,), (16,), (16,))],
        FLOATS,
    ),
    "batch_norm-eval-2d-no-affine": (
        lambda x, m, v: F.batch_norm(*_eval_stats(x, m, v), eps=1e-3),
        lambda dt: [torch.randn(s).to(dt) for s in ((64, 16), (16,), (16,))],
        FLOATS,
    ),
    "batch_norm-eval-mixed": (  # a low-precision input, float32 statistics and parameters
        lambda x, m, v, w, b: F.batch_norm(*_eval_stats(x, m, v), w, b),
        lambda dt: [torch.randn(4, 8, 9).to(dt), *(torch.randn(8) for _ in range(4))],
        [torch.bfloat16],
    ),
}
PARAMS = [(name, dt) for name, (_, _, dts) in CASES.items() for dt in dts]


def _leaves(ts: list[torch.Tensor]) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(True) for t in ts]


@pytest.mark.parametrize(("name", "dtype"), PARAMS, ids=[f"{n}-{str(d)[6:]}" for n, d in PARAMS])
def test_forward_and_gradients_bit_for_bit(name: str, dtype: torch.dtype) -> None:
    fn, make, _ = CASES[name]
    jf = thunder.jit(fn)
    for _ in range(3):
        inputs = make(dtype)
        ours, theirs = _leaves(inputs), _leaves(inputs)
        got, want = jf(*ours), fn(*theirs)
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        g = torch.randn(want.shape).to(want.dtype)
        grads = torch.autograd.grad(got, ours, g, allow_unused=True)
        expected = torch.autograd.grad(want, theirs, g, allow_unused=True)
        for a, b in zip(grads, expected, strict=True):
            assert (a is None) == (b is None)
            if b is not None:
                torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0 and stats.split_calls == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_frozen_batch_norm_model(dtype: torch.dtype) -> None:
    # A network fine-tuned with its batch norms in evaluation (frozen statistics).
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 4, 3), nn.BatchNorm2d(4)
    ).to(dtype)
    with torch.no_grad():
        for bn in (model[1], model[4]):
            bn.running_mean.normal_()
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
    model.eval()
    jm = thunder.jit(model)
    for _ in range(3):
        x = torch.randn(2, 3, 11, 9).to(dtype)
        got, want = jm(x.requires_grad_()), model(x)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        g = torch.randn(want.shape).to(dtype)
        wrt = [x, *model.parameters()]
        grads = torch.autograd.grad(got, wrt, g)
        expected = torch.autograd.grad(want, wrt, g)
        for t, a, b in zip(wrt, grads, expected, strict=True):
            # (a convolution's bias gradient is summed in another order than eager's kernel's)
            exact = t is x or any(t is p for p in (*model[1].parameters(), *model[4].parameters()))
            torch.testing.assert_close(a, b, **({"rtol": 0, "atol": 0} if exact else {}))
