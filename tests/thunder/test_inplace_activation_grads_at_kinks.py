"""In-place activations differentiate with the same rule as their out-of-place forms: at a kink
(relu at 0) the gradient is eager's, not the decomposition's."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "F.relu(inplace)": lambda t: F.relu(t * 1, inplace=True),
    "nn.ReLU(inplace)": lambda t: torch.nn.ReLU(inplace=True)(t * 1),
    "relu_": lambda t: torch.relu_(t * 1),
    "F.selu(inplace)": lambda t: F.selu(t * 1, inplace=True),
    "F.celu(inplace)": lambda t: F.celu(t * 1, alpha=0.5, inplace=True),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_inplace_activation_grads_like_eager(name: str) -> None:
    f = ACTIVATIONS[name]
    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(16)
        x[::3] = 0.0  # the kinks, with random values between
        x.requires_grad_(True)
        w = torch.randn(16)
        want = f(x)
        (want_grad,) = torch.autograd.grad((want * w).sum(), x)
        got = jf(x)
        (got_grad,) = torch.autograd.grad((got * w).sum(), x)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(got_grad, want_grad)
