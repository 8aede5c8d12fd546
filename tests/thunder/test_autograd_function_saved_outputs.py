"""User ``torch.autograd.Function``s in jitted programs, against eager: a Function that saves its
own output, differentiated again (create_graph: gradient penalties, PINN residuals, under
torch.func too); and tensors autograd never sees through the Function (saved from a list
argument, kept on ``ctx``, given a None gradient) keep ``.grad`` None."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Callable[..., Any], cache: str | None) -> Callable[..., Any]:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


class ExpSavesOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return g * y


class SigmoidOutputOnCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = torch.sigmoid(x)
        ctx.y = y
        return y

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        y = ctx.y
        return g * y * (1 - y)


class TanhSetupContext(torch.autograd.Function):
    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)

    @staticmethod
    def setup_context(ctx: Any, inputs: Any, output: torch.Tensor) -> None:
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return g * (1 - y * y)


class TwoOutputsSavesOne(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.sigmoid(x * w)
        ctx.save_for_backward(x, w, y)
        return y, x * 2

    @staticmethod
    def backward(ctx: Any, gy: torch.Tensor, gz: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x, w, y = ctx.saved_tensors
        d = gy * y * (1 - y)
        return d * w + gz * 2, d * x


def _exp(x: torch.Tensor) -> torch.Tensor:
    return ExpSavesOutput.apply(x) * 3


def _sigmoid(x: torch.Tensor) -> torch.Tensor:
    return SigmoidOutputOnCtx.apply(x.sin()) * x


def _tanh(x: torch.Tensor) -> torch.Tensor:
    return TanhSetupContext.apply(x * 2) + x


def _rnn(x: torch.Tensor) -> torch.Tensor:
    h = torch.zeros_like(x[0])
    for t in range(x.shape[0]):
        h = TanhSetupContext.apply(x[t] + h * 0.5)
    return h


def _two_outputs(x: torch.Tensor) -> torch.Tensor:
    y, z = TwoOutputsSavesOne.apply(x, x.cos())
    return y * z


FUNCTIONS = [_exp, _sigmoid, _tanh, _rnn, _two_outputs]


def _double_backward(fn: Callable[..., Any], x: torch.Tensor) -> tuple[Any, ...]:
    """The first gradient (create_graph), the gradient of a penalty on it, and ``x.grad`` after
    a loss adding the penalty."""
    x = x.detach().requires_grad_()
    y = fn(x).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    assert g.requires_grad
    (gg,) = torch.autograd.grad((g**2).sum(), x, retain_graph=True)
    (y + (g**2).sum()).backward()
    return g.detach(), gg, x.grad


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_saved_output_double_backward_like_eager(fn: Callable[..., Any], cache: str | None) -> None:
    jf = _jit(fn, cache)
    for i in range(3):
        x = torch.randn(3, 4 + i % 2)
        torch.testing.assert_close(_double_backward(jf, x), _double_backward(fn, x))


@pytest.mark.parametrize("fn", [_exp, _tanh, _two_outputs], ids=lambda f: f.__name__)
def test_saved_output_first_order_like_eager(fn: Callable[..., Any]) -> None:
    jf = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(5)
        xe, xj = (x.clone().requires_grad_() for _ in range(2))
        torch.testing.assert_close(jf(xj), fn(xe))
        fn(xe).sum().backward()
        jf(xj).sum().backward()
        torch.testing.assert_close(xj.grad, xe.grad)


def _pinn(fn: Callable[..., Any]) -> Callable[[torch.Tensor], torch.Tensor]:
    def residual(x: torch.Tensor) -> torch.Tensor:
        (g,) = torch.autograd.grad(fn(x).sum(), x, create_graph=True)
        return (g**2).sum()

    return residual


@pytest.mark.parametrize("fn", [_tanh, _rnn], ids=lambda f: f.__name__)
def test_torch_func_grad_of_create_graph_gradient(fn: Callable[..., Any]) -> None:
    jf = thunder.jit(fn)
    for i in range(3):
        x = torch.randn(3, 2 + i)
        expected = torch.func.grad(_pinn(fn))(x)
        torch.testing.assert_close(torch.func.grad(_pinn(jf))(x), expected)


# -- tensors autograd never sees through the Function keep .grad None ------------------------


class SavesFromList(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, lst: list[torch.Tensor]) -> torch.Tensor:
        ctx.save_for_backward(lst[0])
        return x * lst[0]

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        (a,) = ctx.saved_tensors
        return g * a, None


W = torch.nn.Parameter(torch.randn(4))


class ParameterOnCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.w = W
        return x * W

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g * ctx.w


class NoGradientForSecond(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(a)
        return x * a

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        (a,) = ctx.saved_tensors
        return g * a, None


def _from_list(x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    return SavesFromList.apply(x, [a]) * 2


def _parameter_on_ctx(x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    return ParameterOnCtx.apply(x) + a


def _none_gradient(x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    return NoGradientForSecond.apply(x, a).sin()


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn", [_from_list, _parameter_on_ctx, _none_gradient], ids=lambda f: f.__name__
)
def test_unseen_tensors_keep_grad_none(fn: Callable[..., Any], cache: str | None) -> None:
    jf = _jit(fn, cache)
    for i in range(3):
        torch.manual_seed(i)
        x0, a0 = torch.randn(4), torch.randn(4)
        grads = []
        for f in (fn, jf):
            W.grad = None
            x, a = x0.clone().requires_grad_(), a0.clone().requires_grad_()
            f(x, a).sum().backward()
            grads.append((x.grad, a.grad, W.grad))
        (ex, ea, ew), (jx, ja, jw) = grads
        torch.testing.assert_close(jx, ex)
        assert (ja is None) == (ea is None)
        if ea is not None:
            torch.testing.assert_close(ja, ea)
        assert ew is None and jw is None


def test_weight_decay_does_not_move_unseen_parameter() -> None:
    jf = thunder.jit(_from_list)
    for seed in range(3):
        torch.manual_seed(seed)
        x0, a0 = torch.randn(4), torch.randn(4)
        results = []
        for f in (_from_list, jf):
            x, a = torch.nn.Parameter(x0.clone()), torch.nn.Parameter(a0.clone())
            opt = torch.optim.AdamW([x, a], lr=0.1, weight_decay=0.1)
            for _ in range(2):
                opt.zero_grad()
                f(x, a).sum().backward()
                opt.step()
            results.append((x.detach(), a.detach()))
        torch.testing.assert_close(results[1], results[0])
        torch.testing.assert_close(results[1][1], a0)


class ReturnsInputSaved(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return g * x * 2


class ExpOnce(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        y = x.exp()
        ctx.save_for_backward(y)
        return y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return g * y


@pytest.mark.parametrize(
    "fn",
    [lambda x: ReturnsInputSaved.apply(x) * 1, lambda x: ReturnsInputSaved.apply(x.sin()) * 1],
    ids=["leaf", "intermediate"],
)
def test_saved_input_returned_as_is_stays_the_input(fn: Callable[..., Any]) -> None:
    jf = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(4)
        torch.testing.assert_close(_double_backward(jf, x), _double_backward(fn, x))


def test_once_differentiable_saving_its_output_like_eager() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return ExpOnce.apply(x) * 3

    jf = thunder.jit(f)
    for _ in range(3):
        x0 = torch.randn(4)
        results = []
        for fn in (f, jf):
            x = x0.clone().requires_grad_()
            (g,) = torch.autograd.grad(fn(x).sum(), x, create_graph=True)
            results.append((g, g.requires_grad))
        torch.testing.assert_close(results[1][0], results[0][0])
        # eager's once_differentiable backward gives a constant for a constant gradient
        assert results[1][1] == results[0][1] is False
