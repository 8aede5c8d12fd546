"""softmax's and log_softmax's gradients run eager's backward kernels
(``_softmax_backward_data``, ``_log_softmax_backward_data``) with the torch executors.

Computed from the result with separate ops, they summed in another order than eager's one kernel:
gradients 1 ulp off in float32 (cross-entropy's too), and several passes over memory where eager
makes one. With a fusion executor the ops decompose into their math and fuse.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder

CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "softmax_last": lambda x: torch.softmax(x, -1),
    "softmax_dim1": lambda x: torch.softmax(x, 1),
    "softmax_dim0": lambda x: F.softmax(x, dim=0),
    "log_softmax_last": lambda x: torch.log_softmax(x, -1),
    "log_softmax_dim1": lambda x: F.log_softmax(x, dim=1),
    "softmax_to_float64": lambda x: torch.softmax(x, -1, dtype=torch.float64),
    "log_softmax_to_float32": lambda x: torch.log_softmax(x, 1, dtype=torch.float32),
    "cross_entropy": lambda x: F.cross_entropy(
        x.reshape(-1, x.shape[-1]), torch.arange(x.shape[0] * x.shape[1]) % x.shape[-1]
    ),
    "cross_entropy_smoothed": lambda x: F.cross_entropy(
        x.reshape(-1, x.shape[-1]),
        torch.arange(x.shape[0] * x.shape[1]) % x.shape[-1],
        label_smoothing=0.1,
    ),
    "attention_probs": lambda x: torch.softmax(x @ x.transpose(-1, -2) / 8.0, -1) @ x,
    "transposed_input": lambda x: torch.softmax(x.transpose(0, 2), 0),
}


def _grads(fn: Callable[..., torch.Tensor], x: torch.Tensor, gy: torch.Tensor | None) -> tuple:
    x = x.detach().requires_grad_()
    y = fn(x)
    (g,) = torch.autograd.grad(y, x, gy if y.ndim else None)
    return y.detach(), g


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_gradients_equal_eagers_bitwise(name: str, dtype: torch.dtype) -> None:
    fn = CASES[name]
    jf = thunder.jit(fn)
    for shape in [(4, 10, 64), (3, 7, 33)]:
        x = torch.randn(shape, dtype=dtype)
        y = fn(x)
        gy = torch.randn_like(y) if y.ndim else None
        want_y, want_g = _grads(fn, x, gy)
        got_y, got_g = _grads(jf, x, gy)
        assert torch.equal(got_y, want_y)
        assert got_g.dtype == want_g.dtype
        assert torch.equal(got_g, want_g), (got_g - want_g).abs().max()


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_runs_eagers_kernels(cache: str | None) -> None:
    fn = CASES["log_softmax_last"]
    jf = thunder.jit(fn, cache=cache) if cache else thunder.jit(fn)
    for n in (5, 6, 7):
        x = torch.randn(3, n)
        gy = torch.randn(3, n)
        assert torch.equal(_grads(jf, x, gy)[1], _grads(fn, x, gy)[1])
    backward = thunder.last_backward_traces(jf)[-1].python()
    assert "log_softmax_backward_data" in backward
    assert "torch.exp" not in backward


def test_zero_dim_softmax() -> None:
    fn = CASES["softmax_dim0"]
    jf = thunder.jit(fn)
    x = torch.randn((), requires_grad=True)
    (want,) = torch.autograd.grad(fn(x), x)
    (got,) = torch.autograd.grad(jf(x), x)
    assert torch.equal(got, want)


def test_fused_with_torchcompile() -> None:
    fn = CASES["attention_probs"]
    jf = thunder.jit(fn, executors=["torchcompile", "torch_ops", "torch"])
    for _ in range(2):
        x = torch.randn(2, 8, 16)
        gy = torch.randn(2, 8, 16)
        want_y, want_g = _grads(fn, x, gy)
        got_y, got_g = _grads(jf, x, gy)
        torch.testing.assert_close(got_y, want_y)
        torch.testing.assert_close(got_g, want_g)
