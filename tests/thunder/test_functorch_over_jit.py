"""torch.func transforms (``grad``, ``vjp``, ``jacrev``) over jitted programs that read tensors
requiring grad outside the transform (module parameters, a closed-over tensor, an input that
requires grad): the gradients are eager's, and so is their dependence on those tensors (a
gradient penalty on ``grad(D)(x)`` reaches D's parameters, a second derivative through the
input). Also: a split call's backward is hidden from dynamo."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import func, nn

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Any, cache: str | None) -> Any:
    return thunder.jit(fn, **({"cache": cache} if cache else {}))


def _critic() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 1))


def _param_grads(m: nn.Module) -> list[torch.Tensor | None]:
    return [None if p.grad is None else p.grad.clone() for p in m.parameters()]


def _zero_grads(m: nn.Module) -> None:
    for p in m.parameters():
        p.grad = None


@pytest.mark.parametrize("cache", CACHES)
def test_vjp_of_module_with_parameters_gives_eager_input_gradient(cache: str | None) -> None:
    lin = nn.Linear(3, 3)
    jlin = _jit(lin, cache)
    for _ in range(3):
        x, ct = torch.randn(2, 3), torch.randn(2, 3)
        (eo, efn), (to, tfn) = func.vjp(lin, x), func.vjp(jlin, x)
        (eg,), (tg,) = efn(ct), tfn(ct)
        torch.testing.assert_close(to, eo)
        torch.testing.assert_close(tg, eg)
        assert tg.requires_grad == eg.requires_grad
        # a second cotangent through the same vjp function, and vmapped ones (jacrev's way)
        torch.testing.assert_close(tfn(2 * ct)[0], efn(2 * ct)[0])
        cts = torch.randn(4, 2, 3)
        torch.testing.assert_close(torch.vmap(tfn)(cts)[0], torch.vmap(efn)(cts)[0])
        # without grad mode (no create_graph): the compiled backward
        with torch.no_grad():
            torch.testing.assert_close(tfn(ct)[0], efn(ct)[0])


@pytest.mark.parametrize("cache", CACHES)
def test_vjp_with_closed_over_tensor_requiring_grad(cache: str | None) -> None:
    w = torch.randn(3, requires_grad=True)

    def f(x: torch.Tensor) -> torch.Tensor:
        return x.sin() * w

    def g(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return x.sin() * v * w

    jf, jg = _jit(f, cache), _jit(g, cache)
    for i in range(3):
        x = torch.randn(3, requires_grad=bool(i % 2))
        v = torch.randn(3, requires_grad=True)
        ct = torch.randn(3)
        eg, tg = func.vjp(f, x)[1](ct)[0], func.vjp(jf, x)[1](ct)[0]
        torch.testing.assert_close(tg, eg)
        assert tg.requires_grad == eg.requires_grad
        # the vjp depends on w as eager's does
        (ew,) = torch.autograd.grad(eg.sum(), w)
        (tw,) = torch.autograd.grad(tg.sum(), w)
        torch.testing.assert_close(tw, ew)
        e2, t2 = func.vjp(g, x, v)[1](ct), func.vjp(jg, x, v)[1](ct)
        torch.testing.assert_close(t2, e2)


TRANSFORMS: dict[str, Callable[[Any, torch.Tensor], torch.Tensor]] = {
    "grad": lambda m, x: func.grad(lambda v: m(v).sum())(x),
    "jacrev": lambda m, x: func.jacrev(lambda v: m(v).squeeze(-1))(x),
    "vjp": lambda m, x: func.vjp(m, x)[1](torch.ones(x.shape[0], 1))[0],
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_gradient_penalty_reaches_parameters(transform: str, cache: str | None) -> None:
    d = _critic()
    jd = _jit(d, cache)
    t = TRANSFORMS[transform]
    for _ in range(3):
        x = torch.randn(4, 3)
        results = []
        for m in (d, jd):
            _zero_grads(d)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                gx = t(m, x)
                loss = m(x).mean() + ((gx.flatten(1).norm(dim=1) - 1) ** 2).mean()
            loss.backward()
            results.append((gx.detach(), gx.requires_grad, loss.detach(), _param_grads(d)))
        (eg, erg, el, ep), (tg, trg, tl, tp) = results
        assert trg == erg
        torch.testing.assert_close(tg, eg)
        torch.testing.assert_close(tl, el)
        torch.testing.assert_close(tp, ep)


@pytest.mark.parametrize("cache", CACHES)
def test_frozen_parameters_keep_the_compiled_backward(cache: str | None) -> None:
    d = _critic().requires_grad_(False)
    jd = _jit(d, cache)
    for _ in range(3):
        x = torch.randn(4, 3)
        eg, tg = TRANSFORMS["grad"](d, x), TRANSFORMS["grad"](jd, x)
        torch.testing.assert_close(tg, eg)
        assert not tg.requires_grad and not eg.requires_grad
    assert thunder.last_backward_traces(jd)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("transform", ["grad", "jacrev"])
def test_second_derivative_through_input_requiring_grad(transform: str, cache: str | None) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x.sin() * x).sum()

    jf = _jit(f, cache)
    t = getattr(func, transform)
    for _ in range(3):
        x = torch.randn(5, requires_grad=True)
        weights = torch.randn(5)
        found = []
        for fn in (f, jf):
            g = t(fn)(x)
            (gg,) = torch.autograd.grad((g * weights).sum(), x)
            found.append((g.detach(), gg))
        torch.testing.assert_close(found[1], found[0])


def test_dropout_under_grad_first_order_runs_and_second_order_raises() -> None:
    torch.manual_seed(0)
    d = nn.Sequential(nn.Linear(3, 8), nn.Dropout(0.5), nn.Linear(8, 1))
    jd = thunder.jit(d)
    x = torch.randn(4, 3)
    gx = func.grad(lambda v: jd(v).sum())(x)
    assert gx.shape == x.shape
    with pytest.raises(RuntimeError, match="thunder.jit"):
        gx.sum().backward()  # never a silently constant gradient
    _out, vjp_fn = func.vjp(jd, x)
    (vx,) = vjp_fn(torch.ones(4, 1))
    assert vx.shape == x.shape
    with pytest.raises(RuntimeError, match="thunder.jit"):
        vx.sum().backward()
    d.requires_grad_(False)  # nothing to differentiate: plain results, as eager's
    (vx,) = func.vjp(jd, x)[1](torch.ones(4, 1))
    assert not vx.requires_grad


def test_split_call_backward_is_hidden_from_dynamo(capfd: pytest.CaptureFixture[str]) -> None:
    d = _critic()

    def penalty(real: torch.Tensor, fake: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        xi = (a * real + (1 - a) * fake).requires_grad_(True)
        out = d(xi)
        (gr,) = torch.autograd.grad(out, xi, torch.ones_like(out), create_graph=True)
        return ((gr.norm(2, dim=1) - 1) ** 2).mean()

    jp = thunder.jit(penalty)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the split's own warning
        for _ in range(3):
            real, fake, a = torch.randn(5, 3), torch.randn(5, 3), torch.rand(5, 1)
            _zero_grads(d)
            el = penalty(real, fake, a)
            el.backward()
            ep = _param_grads(d)
            _zero_grads(d)
            tl = jp(real, fake, a)
            tl.backward()
            torch.testing.assert_close(tl, el)
            torch.testing.assert_close(_param_grads(d), ep)
    err = capfd.readouterr().err
    assert "WON'T CONVERT" not in err and "InternalTorchDynamoError" not in err
    assert "recompile_limit" not in err
