"""``torch.add``/``torch.sub`` with ``alpha`` while gradients flow: eager's kernel computes
``a + alpha * b`` rounding once, and its backward gives ``grad`` and ``(-)grad * alpha``. The
forward and both gradients equal eager's bit for bit, with the default executors."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import thunder

Fn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

CALLS: dict[str, Fn] = {
    "add": lambda a, b: torch.add(a, b, alpha=0.3),
    "sub": lambda a, b: torch.sub(a, b, alpha=0.3),
    "Tensor.add-int-alpha": lambda a, b: a.add(b, alpha=3),
    "Tensor.sub-negative": lambda a, b: a.sub(b, alpha=-1.7),
    "add-broadcast": lambda a, b: torch.add(a, b[0], alpha=0.7),
    "add-then-mul": lambda a, b: torch.add(a * 2, b.sin(), alpha=1 / 3) * b,
    "add-in-place-on-a-copy": lambda a, b: (a * 1).add_(b, alpha=0.3),
}
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.complex64]


def _leaves(*ts: torch.Tensor) -> list[torch.Tensor]:
    return [t.detach().clone().requires_grad_(True) for t in ts]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(CALLS))
def test_values_and_gradients_bit_for_bit(name: str, dtype: torch.dtype) -> None:
    fn = CALLS[name]
    jf = thunder.jit(fn)
    for _ in range(3):
        a0, b0 = torch.randn(4, 257, dtype=dtype), torch.randn(4, 257, dtype=dtype)
        a, b = _leaves(a0, b0)
        ae, be = _leaves(a0, b0)
        got, want = jf(a, b), fn(ae, be)
        g = torch.randn_like(want)
        got.backward(g)
        want.backward(g)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch.testing.assert_close(a.grad, ae.grad, rtol=0, atol=0)
        torch.testing.assert_close(b.grad, be.grad, rtol=0, atol=0)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_mixed_dtypes_and_a_number_operand() -> None:
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.add(a, b, alpha=0.3) + torch.sub(a, 2.5, alpha=0.1)

    jf = thunder.jit(fn)
    for _ in range(3):
        a0, b0 = torch.randn(8, 33), torch.randn(8, 33, dtype=torch.bfloat16)
        a, b = _leaves(a0, b0)
        ae, be = _leaves(a0, b0)
        got, want = jf(a, b), fn(ae, be)
        got.sum().backward()
        want.sum().backward()
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert b.grad is not None and be.grad is not None and b.grad.dtype == be.grad.dtype
        torch.testing.assert_close(a.grad, ae.grad, rtol=0, atol=0)
        torch.testing.assert_close(b.grad, be.grad, rtol=0, atol=0)


@pytest.mark.parametrize("alpha", [0.25, 2.0])
def test_symbolic_alpha(alpha: float) -> None:
    def fn(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
        return torch.add(a, b, alpha=alpha)

    jf = thunder.jit(fn, cache="symbolic values")
    for k in range(3):
        a0, b0 = torch.randn(100), torch.randn(100)
        a, b = _leaves(a0, b0)
        ae, be = _leaves(a0, b0)
        got, want = jf(a, b, alpha + k), fn(ae, be, alpha + k)
        got.sum().backward()
        want.sum().backward()
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        torch.testing.assert_close(b.grad, be.grad, rtol=0, atol=0)
