"""Gradients of gradients (``create_graph=True``) through a compiled program equal eager's: a
gradient penalty, a Hessian-vector product, through linear, convolution and normalization layers.
The compiled backward is not differentiable itself; its forward runs again under autograd."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import thunder


def _penalized_step(call, module, x):
    xi = x.clone().requires_grad_()
    out = call(xi).sum()
    (g,) = torch.autograd.grad(out, xi, create_graph=True)
    loss = out + (g.flatten(1).norm(2, dim=1) - 1).pow(2).mean()
    loss.backward()
    return g, [p.grad.clone() for p in module.parameters()]


@pytest.mark.parametrize(
    "make, shape",
    [
        (lambda: nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.LayerNorm(8), nn.GELU(), nn.Linear(8, 1)), (5, 3)),
        (lambda: nn.Sequential(nn.Conv2d(2, 4, 3), nn.SiLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 1)), (3, 2, 6, 6)),
        (lambda: nn.Sequential(nn.Linear(4, 6), nn.Softplus(), nn.Linear(6, 6), nn.LogSoftmax(-1)), (4, 4)),
    ],
)  # fmt: skip
def test_gradient_penalty_like_eager(make, shape):
    torch.manual_seed(0)
    m = make()
    e = copy.deepcopy(m)
    jm = thunder.jit(m)
    for _ in range(2):  # fresh data, gradients accumulate as in eager
        x = torch.randn(shape)
        g_eager, p_eager = _penalized_step(e, e, x)
        g, p = _penalized_step(jm, m, x)
        assert g.requires_grad
        torch.testing.assert_close(g, g_eager)
        for a, b in zip(p, p_eager, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_hessian_vector_product_like_eager():
    def f(w, a):
        return (torch.sin(w) * w.exp() @ a).pow(2).sum()

    def hvp(fn, w, a, v):
        (g,) = torch.autograd.grad(fn(w, a), w, create_graph=True)
        return torch.autograd.grad(g, (w, a), v)

    jf = thunder.jit(f)
    for _ in range(2):
        w = torch.randn(3, 4, requires_grad=True)
        a = torch.randn(4, 2, requires_grad=True)
        v = torch.randn(3, 4)
        for got, want in zip(hvp(jf, w, a, v), hvp(f, w, a, v), strict=True):
            torch.testing.assert_close(got, want)


def test_first_order_backward_stays_compiled():
    jf = thunder.jit(lambda x: torch.tanh(x).sum())
    x = torch.randn(4, requires_grad=True)
    (g,) = torch.autograd.grad(jf(x), x)
    assert not g.requires_grad
    torch.testing.assert_close(g, 1 - torch.tanh(x.detach()) ** 2)


def test_a_program_with_effects_says_it_cannot_run_twice():
    bn = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))  # training: writes running stats
    jb = thunder.jit(bn)
    x = torch.randn(5, 3, requires_grad=True)
    out = jb(x).sum()
    with pytest.raises(RuntimeError, match="writes into its inputs"):
        torch.autograd.grad(out, x, create_graph=True)


def test_an_input_written_after_the_forward_is_reported():
    jf = thunder.jit(lambda x, w: (x * w).sin().sum())
    x = torch.randn(3, requires_grad=True)
    w = torch.randn(3)
    out = jf(x, w)
    with torch.no_grad():
        w.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        torch.autograd.grad(out, x, create_graph=True)
