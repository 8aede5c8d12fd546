"""Inference tensors (made under ``torch.inference_mode``) as inputs and constants: traced and
compiled, never an eager run, equal to eager; gradients where eager's backward never reads them
but thunder's does."""

from __future__ import annotations

import warnings

import torch

import thunder
from thunder.models import GPT, GPTConfig


def _no_eager_runs(jf: object) -> None:
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_torch_fallback_op_on_inference_inputs_and_constants() -> None:
    # polygamma has no IR op: its output is inferred on fake tensors, which an inference tensor
    # (no version counter) must not break
    with torch.inference_mode():
        constant = torch.rand(4) + 0.5

    def f(x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return torch.special.polygamma(1, x) * torch.special.polygamma(1, c) + constant

    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with torch.inference_mode():
            for _ in range(2):
                x, c = torch.rand(4) + 0.5, torch.rand(4) + 0.5
                torch.testing.assert_close(jf(x, c), f(x, c))
        x, c = torch.rand(4) + 0.5, torch.rand(4) + 0.5
        torch.testing.assert_close(jf(x, c), f(x, c))
    _no_eager_runs(jf)


def test_generation_loop_under_inference_mode() -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig(n_layer=2)).eval()
    jm = thunder.jit(model)
    with torch.inference_mode():
        ids = torch.randint(0, 512, (1, 4))
        for _ in range(4):
            logits = jm(ids)
            torch.testing.assert_close(logits, model(ids))
            ids = torch.cat([ids, logits[:, -1:].argmax(-1)], 1)
    _no_eager_runs(jm)


def test_backward_that_saves_an_inference_input() -> None:
    # Thunder's backward may keep an input where eager's keeps a tensor computed from it (x + 1):
    # an inference tensor cannot be saved for backward, a copy of it can. (Where eager saves the
    # inference input itself, x * w, both raise: tests/thunder/test_backward_like_eager.py.)
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return ((x + 1) * w).sum()

    jf = thunder.jit(f)
    for _ in range(2):
        with torch.inference_mode():
            x = torch.randn(3, 4)
        w = torch.randn(4, requires_grad=True)
        out = jf(x, w)
        (grad,) = torch.autograd.grad(out, w)
        expected_w = w.detach().clone().requires_grad_()
        expected = f(x, expected_w)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(grad, torch.autograd.grad(expected, expected_w)[0])
    _no_eager_runs(jf)
