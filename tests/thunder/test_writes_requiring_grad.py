"""A tensor the program writes a value requiring grad into requires grad from then on, as in
eager: ``buf[:3] = x * w`` then an op torch runs (a torch fallback: ``torch.fft.ifft``) keeps
the gradient (it was dropped silently), and ``buf.requires_grad`` reads True."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]


def _setitem(z: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    buf = torch.zeros(z.shape[0] + 2, dtype=z.dtype)
    buf[: z.shape[0]] = z * w
    return buf


def _view_copy(z: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    buf = torch.zeros(z.shape[0] + 2, dtype=z.dtype)
    buf[: z.shape[0]].copy_(z * w)
    return buf


def _add_(z: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    buf = torch.ones_like(z)
    buf.add_(z * w)
    return buf


WRITES = {"setitem": _setitem, "view copy_": _view_copy, "add_": _add_}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_a_torch_fallback_after_the_write_keeps_the_gradient(
    cache: str, write: str, dtype: torch.dtype
) -> None:
    fill = WRITES[write]
    w = torch.randn(4, dtype=dtype, requires_grad=True)

    def f(z: torch.Tensor) -> torch.Tensor:
        return torch.fft.ifft(fill(z, w)).abs().sum()

    jf = thunder.jit(f, cache=cache)
    for n in (4, 4, 4):
        z = torch.randn(n, dtype=dtype)
        expected, got = f(z), jf(z)
        assert got.requires_grad == expected.requires_grad
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(torch.autograd.grad(got, w), torch.autograd.grad(expected, w))


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("write", sorted(WRITES))
def test_requires_grad_read_after_the_write(cache: str, write: str) -> None:
    fill = WRITES[write]
    w = torch.randn(4, requires_grad=True)

    def f(z: torch.Tensor) -> tuple[Any, ...]:
        buf = fill(z, w)
        with torch.no_grad():
            quiet = fill(z, w)
        return buf * 2, buf.requires_grad, quiet.requires_grad

    jf = thunder.jit(f, cache=cache)
    for _ in range(3):
        z = torch.randn(4)
        expected, got = f(z), jf(z)
        assert got[1:] == expected[1:]
        torch.testing.assert_close(got[0], expected[0])


@pytest.mark.parametrize("cache", CACHES)
def test_an_op_without_gradient_stays_without(cache: str) -> None:
    w = torch.randn(4, requires_grad=True)

    def f(z: torch.Tensor) -> torch.Tensor:
        buf = _setitem(z, w)
        return torch.randint_like(buf, 0, 5) + torch.fft.ifft(buf).abs()

    jf = thunder.jit(f, cache=cache)
    for _ in range(3):
        z = torch.randn(4)
        torch.manual_seed(0)
        expected = f(z)
        torch.manual_seed(0)
        got = jf(z)
        torch.testing.assert_close(got, expected)
        (ge,) = torch.autograd.grad(expected.sum(), w)
        (gt,) = torch.autograd.grad(got.sum(), w)
        torch.testing.assert_close(gt, ge)


@pytest.mark.parametrize("cache", CACHES)
def test_the_base_and_its_other_views_require_grad_after_a_write_through_a_view(
    cache: str,
) -> None:
    # Eager: writing through ``x[:3]`` makes ``x`` and a view made before the write require grad
    # (their grad_fn is rebuilt); a copy made before does not.
    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[Any, ...]:
        tail, col, copy = x[3:], x.view(-1, 1), x.clone()
        x[:3].copy_(w * 2)
        flags = (x.requires_grad, tail.requires_grad, col.requires_grad, copy.requires_grad)
        return flags, (tail * 3).sum() + x.sum() + col.sum()

    jf = thunder.jit(f, cache=cache)
    for n in (5, 6, 7):
        x, w = torch.randn(n), torch.randn(3, requires_grad=True)
        x2, w2 = x.clone(), w.detach().clone().requires_grad_()
        got, expected = jf(x, w), f(x2, w2)
        assert got[0] == expected[0] == (True, True, True, False)
        torch.testing.assert_close(got[1], expected[1])
        torch.testing.assert_close(x, x2)
        assert x.requires_grad and x.grad_fn is not None
        torch.testing.assert_close(
            torch.autograd.grad(got[1], w), torch.autograd.grad(expected[1], w2)
        )
