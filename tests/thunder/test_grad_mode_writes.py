"""Grad-mode changes users write in training code, run as eager runs them: in-place writes under
``torch.no_grad()`` (or through ``.data``) into tensors that require grad (weight clipping, a manual EMA, weight
normalisation: the tensor keeps its place in the autograd graph with the new values), and grad
enabled inside a call made under ``torch.no_grad()`` (results that require grad, gradients taken
inside). Values, parameters after the call and gradients are compared with eager's."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder


def _snapshot(values: list[torch.Tensor]) -> list[Any]:
    return [
        (v.detach().clone(), v.requires_grad, None if v.grad is None else v.grad.clone())
        for v in values
    ]


def _compare_training(f: Callable[..., Any], make: Callable[[], list[torch.Tensor]]) -> None:
    torch.manual_seed(0)
    eager_args = make()
    jit_args = [a.detach().clone().requires_grad_(a.requires_grad) for a in eager_args]
    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager run after a failed trace
        for _ in range(3):
            out_e, out_j = f(*eager_args), jf(*jit_args)
            torch.testing.assert_close(out_j, out_e)
            assert out_j.requires_grad == out_e.requires_grad
            if out_e.requires_grad:
                out_e.square().sum().backward()
                out_j.square().sum().backward()
            for (v_e, rg_e, g_e), (v_j, rg_j, g_j) in zip(
                _snapshot(eager_args), _snapshot(jit_args)
            ):
                torch.testing.assert_close(v_j, v_e)
                assert rg_j == rg_e
                assert (g_e is None) == (g_j is None)
                if g_e is not None:
                    torch.testing.assert_close(g_j, g_e)


def _leaf(*shape: int) -> Callable[[], list[torch.Tensor]]:
    return lambda: [torch.randn(*shape, requires_grad=True), torch.randn(2, shape[-1])]


def clip_weight(w, x):
    with torch.no_grad():
        w.clamp_(-0.5, 0.5)
    return x @ w.t()


def decay_weight(w, x):
    with torch.no_grad():
        w.mul_(0.9)
    return x @ w.t() + w.sum()


def normalize_weight(w, x):
    with torch.no_grad():
        w.div_(w.norm(dim=1, keepdim=True))
    return torch.tanh(x @ w.t())


def write_a_row(w, x):
    with torch.no_grad():
        w[0].zero_()
        w[1:].mul_(2)
    return x @ w.t()


def write_after_use(w, x):
    y = x @ w.t()  # saves x, not w: the write does not touch what the backward reads
    with torch.no_grad():
        w.add_(1.0)
    return y + w.sum()


def clamp_an_intermediate(w, x):
    h = x @ w.t()
    with torch.no_grad():
        h.clamp_(-0.1, 0.1)  # h keeps its place in the graph with the clamped values
    return h * 3


def copy_into_a_leaf(w, x):
    with torch.no_grad():
        w.copy_(torch.ones_like(w))
    return x @ w.t()


def clip_through_data(w, x):
    w.data.clamp_(-0.5, 0.5)  # WGAN's weight clipping
    return x @ w.t()


def read_data(w, x):
    return x @ w.data.t() + w.sum()  # .data carries no gradient


def write_data_of_a_saved_tensor(w, x):
    y = torch.sin(x @ w.t())
    z = w.sin()  # saves w; .data writes do not bump its version: eager's backward runs
    w.data.mul_(2)
    return y + z.sum()


@pytest.mark.parametrize(
    "f",
    [
        clip_through_data,
        read_data,
        write_data_of_a_saved_tensor,
        clip_weight,
        decay_weight,
        normalize_weight,
        write_a_row,
        write_after_use,
        clamp_an_intermediate,
        copy_into_a_leaf,
    ],
)
def test_write_under_no_grad_into_a_tensor_that_requires_grad(f):
    _compare_training(f, _leaf(3, 4))


class EmaModel(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.register_buffer("ema", torch.zeros(3, 4))

    def forward(self, x):
        with torch.no_grad():
            self.ema.mul_(0.9).add_(self.lin.weight, alpha=0.1)
            self.lin.weight.clamp_(-0.3, 0.3)
        return self.lin(x).relu()


def test_module_training_steps_with_ema_and_weight_clipping():
    torch.manual_seed(0)
    eager = EmaModel()
    jitted = copy.deepcopy(eager)
    jm = thunder.jit(jitted)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1)
    opt_j = torch.optim.SGD(jitted.parameters(), lr=0.1)
    for _ in range(4):
        x = torch.randn(5, 4)
        for model, opt in ((eager, opt_e), (jm, opt_j)):
            opt.zero_grad()
            model(x).sum().backward()
            opt.step()
        for (name, a), (_, b) in zip(eager.state_dict().items(), jitted.state_dict().items()):
            torch.testing.assert_close(b, a, msg=name)


def test_leaf_written_in_place_under_grad_mode_raises_as_eager():
    w = torch.randn(3, requires_grad=True)
    for f in (lambda w: w.mul_(2), lambda w: w.copy_(w.detach() * 2)):
        with pytest.raises(RuntimeError, match="leaf Variable"):
            f(w)
        with pytest.raises(RuntimeError, match="leaf Variable"):
            thunder.jit(f)(w)


def returns_grad_tensor(x, w):
    before = x * w  # computed without grad: carries none
    with torch.enable_grad():
        inside = torch.tanh(x * w)
        with torch.no_grad():
            inner = inside * 2
    return before + inside + inner


def set_grad_enabled_true(x, w):
    torch.set_grad_enabled(True)
    try:
        return (x * w).exp()
    finally:
        torch.set_grad_enabled(False)


@pytest.mark.parametrize("f", [returns_grad_tensor, set_grad_enabled_true])
def test_grad_enabled_inside_a_call_made_under_no_grad(f):
    x = torch.randn(4)
    w_e = torch.randn(4, requires_grad=True)
    w_j = w_e.detach().clone().requires_grad_()
    jf = thunder.jit(f)
    for _ in range(3):
        with torch.no_grad():
            out_e, out_j = f(x, w_e), jf(x, w_j)
        torch.testing.assert_close(out_j, out_e)
        assert out_j.requires_grad == out_e.requires_grad
        if out_e.requires_grad:
            out_e.sum().backward()
            out_j.sum().backward()
            torch.testing.assert_close(w_j.grad, w_e.grad)
    assert torch.is_grad_enabled()
    assert thunder.compile_stats(jf).cache_misses == 1


def backward_inside(x, w):
    loss = (x * w).sin().sum()
    loss.backward()
    return w.grad * 1


def grad_inside(x, w):
    y = (x * w).sin().sum()
    (g,) = torch.autograd.grad(y, w)
    return g * 2


@pytest.mark.parametrize("f", [backward_inside, grad_inside])
def test_differentiating_inside_the_program_runs_eagerly_with_a_clear_warning(f):
    """Was a refusal naming a torch internal (loss.backward()) or a failed trace asking to be
    reported (torch.autograd.grad): thunder differentiates programs as a whole, so the call runs
    eagerly and the warning says why and what to do."""
    x = torch.randn(4)
    w_e = torch.randn(4, requires_grad=True)
    w_j = w_e.detach().clone().requires_grad_()
    with pytest.warns(UserWarning, match=r"inside the jitted function.*ran eagerly") as record:
        out_j = thunder.jit(f)(x, w_j)
    assert not any("please report" in str(r.message) for r in record)
    torch.testing.assert_close(out_j, f(x, w_e))
    if w_e.grad is not None:
        torch.testing.assert_close(w_j.grad, w_e.grad)
