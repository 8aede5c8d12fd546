"""Values computed under ``torch.no_grad()`` from tensors that require grad carry no gradient,
as in eager, also where an op is run whole by torch (``add_(w, alpha=0.1)``, ``lerp_``...,
while torch.autograd records the program) or has its own grad rule (``softmax``); and the
backward of a torch fallback differentiates only the arguments torch differentiates (a loss's
``target`` or ``weight`` gets no gradient). Outputs, gradients and the buffers written are
compared with eager's, over several calls on fresh random inputs."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

torch.set_num_threads(1)

# Writes under no_grad of values computed from a parameter ``w`` into a buffer ``e``.
NO_GRAD_WRITES: dict[str, Callable[[torch.Tensor, torch.Tensor], Any]] = {
    "mul_add_alpha": lambda e, w: e.mul_(0.9).add_(w, alpha=0.1),
    "sub_alpha": lambda e, w: e.sub_(w, alpha=0.2),
    "lerp_": lambda e, w: e.lerp_(w, 0.3),
    "lerp_tensor_weight": lambda e, w: e.lerp_(w, torch.full_like(w, 0.25)),
    "addcmul_": lambda e, w: e.addcmul_(w, w, value=0.5),
    "addcdiv_": lambda e, w: e.addcdiv_(w, w.abs() + 1, value=0.5),
    "clamp_min_param": lambda e, w: e.clamp_(min=w),
    "clamp_max_param": lambda e, w: e.clamp_(max=w),
    "copy_softmax": lambda e, w: e.copy_(w.softmax(-1)),
}


class _EMA(torch.nn.Module):
    def __init__(self, write: Callable[[torch.Tensor, torch.Tensor], Any]) -> None:
        super().__init__()
        self.write = write
        self.w = torch.nn.Parameter(torch.randn(3))
        self.register_buffer("ema", torch.randn(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.write(self.ema, self.w)
        return (x * self.w).sum() + (x * self.w * self.ema).sum()


@pytest.mark.parametrize("name", list(NO_GRAD_WRITES))
def test_no_grad_write_into_buffer_carries_no_gradient(name: str) -> None:
    torch.manual_seed(0)
    eager = _EMA(NO_GRAD_WRITES[name])
    model = _EMA(NO_GRAD_WRITES[name])
    model.load_state_dict(eager.state_dict())
    jm = thunder.jit(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager run after a failed trace
        for _ in range(3):
            x = torch.randn(3)
            out_e, out_j = eager(x), jm(x.clone())
            torch.testing.assert_close(out_j, out_e)
            out_e.backward()
            out_j.backward()
            torch.testing.assert_close(model.w.grad, eager.w.grad)
            torch.testing.assert_close(model.ema, eager.ema)
            assert model.ema.grad_fn is None and not model.ema.requires_grad


@pytest.mark.parametrize("name", list(NO_GRAD_WRITES))
def test_no_grad_write_into_argument_carries_no_gradient(name: str) -> None:
    write = NO_GRAD_WRITES[name]

    def f(x: torch.Tensor, w: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            write(e, w)
        return (x * w * e).sum() + (w * w).sum()

    torch.manual_seed(0)
    w0, e0 = torch.randn(3), torch.randn(3)
    w_e, w_j = w0.clone().requires_grad_(), w0.clone().requires_grad_()
    e_e, e_j = e0.clone(), e0.clone()
    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            x = torch.randn(3)
            out_e, out_j = f(x, w_e, e_e), jf(x.clone(), w_j, e_j)
            torch.testing.assert_close(out_j, out_e)
            out_e.backward()
            out_j.backward()
            torch.testing.assert_close(w_j.grad, w_e.grad)
            torch.testing.assert_close(e_j, e_e)
            assert e_j.grad_fn is None and not e_j.requires_grad


# Ops with their own grad rule, computed under no_grad from a tensor that requires grad.
NO_GRAD_VALUES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softmax": lambda w: torch.softmax(w, -1),
    "log_softmax": lambda w: F.log_softmax(w, -1),
    "gelu": F.gelu,
    "silu": F.silu,
    "std": lambda w: torch.std(w).expand(3),
    "vector_norm": lambda w: torch.linalg.vector_norm(w).expand(3),
}


@pytest.mark.parametrize("name", list(NO_GRAD_VALUES))
def test_no_grad_value_carries_no_gradient(name: str) -> None:
    op = NO_GRAD_VALUES[name]

    def f(w: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            y = op(w)
        return (y * w).sum()

    jf = thunder.jit(f)
    for _ in range(2):
        w_e = torch.randn(3, requires_grad=True)
        w_j = w_e.detach().clone().requires_grad_()
        out_e, out_j = f(w_e), jf(w_j)
        torch.testing.assert_close(out_j, out_e)
        out_e.backward()
        out_j.backward()
        torch.testing.assert_close(w_j.grad, w_e.grad)


# Torch fallbacks whose tensor arguments besides the input torch does not differentiate.
FALLBACK_LOSSES: dict[str, tuple[Callable[..., torch.Tensor], Callable[[], torch.Tensor]]] = {
    "soft_margin_loss": (F.soft_margin_loss, lambda: torch.sign(torch.randn(6, 5))),
    "multi_margin_loss_weight": (
        lambda x, w: F.multi_margin_loss(x, torch.arange(6) % 5, weight=w),
        lambda: torch.rand(5),
    ),
    "multi_margin_loss_weight_p2": (
        lambda x, w: F.multi_margin_loss(x, torch.arange(6) % 5, p=2, margin=0.5, weight=w),
        lambda: torch.rand(5),
    ),
}


@pytest.mark.parametrize("name", list(FALLBACK_LOSSES))
def test_fallback_backward_skips_arguments_torch_does_not_differentiate(name: str) -> None:
    fn, make_other = FALLBACK_LOSSES[name]

    def f(x: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
        return fn(x * 2, other)

    jf = thunder.jit(f)
    for _ in range(2):
        x_e = torch.randn(6, 5, requires_grad=True)
        x_j = x_e.detach().clone().requires_grad_()
        other = make_other()
        out_e, out_j = f(x_e, other), jf(x_j, other.clone())
        torch.testing.assert_close(out_j, out_e)
        g = torch.randn(())
        out_e.backward(g)
        out_j.backward(g)
        torch.testing.assert_close(x_j.grad, x_e.grad)
        assert other.grad is None
