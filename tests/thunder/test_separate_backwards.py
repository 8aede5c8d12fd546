"""Backward through each output of one call separately (``a.backward()``, then ``b.backward()``),
as eager allows for outputs whose graphs share nothing: one autograd node holds the whole compiled
program, so the second backward computes the values the first one freed again from the inputs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import thunder


def _two_losses(x, y, w):
    return (x @ w).tanh().sum(), (y * y).sin().sum()


def test_each_output_backward_alone_like_eager():
    jf = thunder.jit(_two_losses)
    for _ in range(2):
        grads = []
        base = [torch.randn(3, 4), torch.randn(5), torch.randn(4, 2)]
        for fn in (_two_losses, jf):
            x, y, w = (t.clone().requires_grad_() for t in base)
            a, b = fn(x, y, w)
            a.backward()
            b.backward()
            grads.append((x.grad, y.grad, w.grad))
        for got, want in zip(grads[1], grads[0], strict=True):
            torch.testing.assert_close(got, want)


def test_autograd_grad_on_each_output():
    jf = thunder.jit(_two_losses)
    base = [torch.randn(3, 4), torch.randn(5), torch.randn(4, 2)]
    results = []
    for fn in (_two_losses, jf):
        x, y, w = (t.clone().requires_grad_() for t in base)
        a, b = fn(x, y, w)
        results.append((*torch.autograd.grad(a, (x, w)), *torch.autograd.grad(b, y)))
    for got, want in zip(results[1], results[0], strict=True):
        torch.testing.assert_close(got, want)


def test_a_program_with_effects_cannot_run_again():
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))  # training: writes running stats

    def f(x):
        h = m(x)
        return h[:, :2].sum(), h[:, 2:].sum()

    jf = thunder.jit(f)
    a, b = jf(torch.randn(5, 3))
    a.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        b.backward()
