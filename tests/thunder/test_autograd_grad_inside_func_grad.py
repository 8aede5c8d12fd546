"""``torch.autograd.grad(..., create_graph=True)`` of a jitted program inside a function that a
``torch.func`` transform differentiates (a PINN residual, a gradient penalty under
``torch.func.grad``): the inner gradient is differentiated again at the transform's level, so
the outer derivative is eager's, never a silent zero."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from torch import func, nn

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Any, cache: str | None) -> Any:
    return thunder.jit(fn, **({"cache": cache} if cache else {}))


def _net(frozen: bool) -> nn.Module:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))
    net.requires_grad_(not frozen)
    return net


def _penalty(model: Any) -> Any:
    def f(x: torch.Tensor) -> torch.Tensor:
        (g,) = torch.autograd.grad(model(x).tanh().sum(), x, create_graph=True)
        return (g**2).sum() + model(x).sum()

    return f


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("frozen", [False, True])
def test_func_grad_of_an_inner_create_graph_gradient(cache: str | None, frozen: bool) -> None:
    net = _net(frozen)
    jnet = _jit(net, cache)
    for n in (4, 4, 6):
        x = torch.randn(n, 3)
        expected = func.grad(_penalty(net))(x)
        got = func.grad(_penalty(jnet))(x)
        assert expected.abs().sum() > 0
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("cache", CACHES)
def test_the_outer_derivative_reaches_the_parameters(cache: str | None) -> None:
    net, twin = _net(False), _net(False)
    jnet = _jit(twin, cache)
    for _ in range(3):
        x = torch.randn(5, 3)
        func.grad(_penalty(net))(x).square().sum().backward()
        func.grad(_penalty(jnet))(x).square().sum().backward()
        for p, q in zip(net.parameters(), twin.parameters()):
            torch.testing.assert_close(q.grad, p.grad)


@pytest.mark.parametrize("cache", CACHES)
def test_vjp_and_jacrev_of_an_inner_create_graph_gradient(cache: str | None) -> None:
    w = torch.randn(3)

    def u(x: torch.Tensor) -> torch.Tensor:
        return (x.sin() * w).sum(-1).exp()

    ju = _jit(u, cache)

    def residual(model: Any) -> Any:
        def r(x: torch.Tensor) -> torch.Tensor:
            (ux,) = torch.autograd.grad(model(x).sum(), x, create_graph=True)
            return ux * x - model(x)[:, None]

        return r

    for _ in range(3):
        x, ct = torch.randn(4, 3), torch.randn(4, 3)
        (eo, efn), (to, tfn) = func.vjp(residual(u), x), func.vjp(residual(ju), x)
        torch.testing.assert_close(to, eo)
        torch.testing.assert_close(tfn(ct)[0], efn(ct)[0])
        x1 = torch.randn(3)
        one = lambda m: lambda v: residual(m)(v[None])[0]  # noqa: E731
        torch.testing.assert_close(func.jacrev(one(ju))(x1), func.jacrev(one(u))(x1))


def test_plain_func_grad_keeps_the_compiled_backward() -> None:
    # torch.func's own gradient call is not differentiated at its level: the forward does not
    # run again (a program that draws random numbers could not), and the result is eager's.
    net = _net(True)
    drop = nn.Sequential(net, nn.Dropout(0.5)).train()
    jdrop = thunder.jit(drop)
    for _ in range(3):
        x = torch.randn(4, 3)
        torch.manual_seed(1)
        expected = func.grad(lambda v: drop(v).sum())(x)
        torch.manual_seed(1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = func.grad(lambda v: jdrop(v).sum())(x)
        torch.testing.assert_close(got, expected)


def test_an_inner_create_graph_gradient_of_a_program_drawing_random_numbers_raises() -> None:
    # Its forward cannot run again at the level: a clear error, never a silent zero.
    drop = nn.Sequential(_net(True), nn.Dropout(0.5)).train()
    jdrop = thunder.jit(drop)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="draws random numbers"):
            func.grad(_penalty(jdrop))(torch.randn(4, 3))
