"""Batch norm in training runs eager's kernels under torch_ops (``native_batch_norm`` forward,
``batch_norm_backward``), its decomposition elsewhere, and either way equals eager: outputs,
gradients of input, weight and bias, and the running statistics it updates, over calls."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import thunder

pytestmark = pytest.mark.filterwarnings("error:thunder.jit")

CASES = {
    "1d": (lambda **k: nn.BatchNorm1d(6, **k), (8, 6)),
    "1d_seq": (lambda **k: nn.BatchNorm1d(6, **k), (4, 6, 5)),
    "2d": (lambda **k: nn.BatchNorm2d(6, **k), (4, 6, 5, 3)),
    "3d": (lambda **k: nn.BatchNorm3d(6, **k), (2, 6, 3, 4, 2)),
}
OPTIONS = {
    "default": {},
    "no_affine": {"affine": False},
    "no_running_stats": {"track_running_stats": False},
    "momentum": {"momentum": 0.3, "eps": 1e-3},
}


@pytest.mark.parametrize("executors", [("torch_ops", "torch"), ("torch",)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("options", list(OPTIONS))
@pytest.mark.parametrize("case", list(CASES))
def test_training_batch_norm_matches_eager(
    case: str, options: str, dtype: torch.dtype, executors: tuple[str, ...]
) -> None:
    make, shape = CASES[case]
    torch.manual_seed(0)
    model = nn.Sequential(make(**OPTIONS[options]), nn.Tanh()).to(dtype).train()
    if OPTIONS[options].get("affine", True):
        with torch.no_grad():  # weights other than the initial ones and zeros
            model[0].weight.uniform_(0.5, 1.5)
            model[0].bias.uniform_(-0.5, 0.5)
    reference = copy.deepcopy(model)
    jm = thunder.jit(model, executors=executors)
    for _ in range(3):
        x = torch.randn(shape, dtype=dtype) * 2 + 1
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        got, want = jm(x1), reference(x2)
        torch.testing.assert_close(got, want)
        g = torch.randn_like(got)
        got.backward(g)
        want.backward(g)
        torch.testing.assert_close(x1.grad, x2.grad)
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)
            p.grad, q.grad = None, None
        for a, b in zip(model.buffers(), reference.buffers(), strict=True):
            torch.testing.assert_close(a, b)
    backward = thunder.last_backward_traces(jm)[-1].python()
    assert ("torch_ops.batch_norm_backward(" in backward) == ("torch_ops" in executors), backward


def test_channels_last_and_eval_after_training() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU())
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    x = torch.randn(4, 3, 9, 9).to(memory_format=torch.channels_last)
    for training in (True, False, True):
        model.train(training)
        reference.train(training)
        with torch.set_grad_enabled(training):
            torch.testing.assert_close(jm(x), reference(x))
        for a, b in zip(model.buffers(), reference.buffers(), strict=True):
            torch.testing.assert_close(a, b)
