"""Gradients of ``.real``, ``.imag`` (complex inputs) and ``digamma`` compile (they ran split for
want of a rule) and equal eager's: a power-spectrum loss, a phase term, ``Dirichlet.entropy``."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]


def _compiled(fn: Any, cache: str) -> Any:
    jf = thunder.jit(fn, cache=cache)

    def call(*args: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a split or eager run warns: it must not happen
            return jf(*args)

    return call


def _check(fn: Any, cache: str, make: Any, calls: int = 3) -> None:
    jf = _compiled(fn, cache)
    for n in range(4, 4 + calls):
        inputs = make(n)
        expected = fn(*inputs)
        got = jf(*inputs)
        torch.testing.assert_close(got, expected)
        wrt = [t for t in inputs if t.requires_grad]
        ge = torch.autograd.grad(expected, wrt)
        gt = torch.autograd.grad(got, wrt)
        torch.testing.assert_close(gt, ge)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_real_and_imag_parts(cache: str, dtype: torch.dtype) -> None:
    def f(z: torch.Tensor) -> torch.Tensor:
        return (z.real * 2).sum() + (z.imag**2).sum() + (z * z.conj()).real.sum()

    _check(f, cache, lambda n: (torch.randn(n, dtype=dtype, requires_grad=True),))


@pytest.mark.parametrize("cache", CACHES)
def test_power_spectrum_and_phase_loss(cache: str) -> None:
    window = torch.hann_window(16)

    def f(x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(x, 16, hop_length=4, window=window, return_complex=True)
        power = spec.real**2 + spec.imag**2
        phase = torch.atan2(spec.imag, spec.real + 1e-3)
        return (power - target).abs().mean() + phase.square().mean()

    def make(n: int) -> tuple[torch.Tensor, ...]:
        x = torch.randn(2, 60 + 4 * n, requires_grad=True)
        frames = torch.stft(x.detach(), 16, hop_length=4, window=window, return_complex=True)
        return x, torch.rand(frames.shape)

    _check(f, cache, make)


@pytest.mark.parametrize("cache", CACHES)
def test_imag_gradient_of_an_infinite_cotangent_is_eagers(cache: str) -> None:
    scale = torch.tensor([1.0, float("inf"), -float("inf"), 2.0])

    def f(z: torch.Tensor) -> torch.Tensor:
        return (z.imag * scale).sum() + (z.real * scale).sum()

    jf = _compiled(f, cache)
    for _ in range(2):
        z = torch.randn(4, dtype=torch.complex64, requires_grad=True)
        (ge,) = torch.autograd.grad(f(z), z)
        (gt,) = torch.autograd.grad(jf(z), z)
        torch.testing.assert_close(gt, ge, equal_nan=True)


@pytest.mark.parametrize("cache", CACHES)
def test_digamma_first_and_second_derivatives(cache: str) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.digamma(x).mul(x).sum()

    _check(f, cache, lambda n: (torch.rand(n, dtype=torch.float64).add(0.2).requires_grad_(),))
    jf = _compiled(f, cache)
    x = torch.rand(5, dtype=torch.float64).add(0.2).requires_grad_()
    (ge,) = torch.autograd.grad(f(x), x, create_graph=True)
    (gt,) = torch.autograd.grad(jf(x), x, create_graph=True)
    torch.testing.assert_close(gt, ge)
    torch.testing.assert_close(
        torch.autograd.grad(gt.sum(), x)[0], torch.autograd.grad(ge.sum(), x)[0]
    )


@pytest.mark.parametrize("cache", CACHES)
def test_dirichlet_entropy(cache: str) -> None:
    def f(c: torch.Tensor) -> torch.Tensor:
        return torch.distributions.Dirichlet(c, validate_args=False).entropy().sum()

    _check(f, cache, lambda n: (torch.rand(n, 3).add(0.5).requires_grad_(),))


@pytest.mark.parametrize("cache", CACHES)
def test_complex_matmul_and_einsum(cache: str) -> None:
    def f(a: torch.Tensor, b: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        y = a @ b
        dot = v @ b[:, 0]
        mv = a[0] @ b[:, 1]
        return (y.abs() ** 2).sum() + (dot * dot.conj()).real + mv.imag.sum()

    def make(n: int) -> tuple[torch.Tensor, ...]:
        return (
            torch.randn(2, 3, n, dtype=torch.complex128, requires_grad=True),
            torch.randn(n, 5, dtype=torch.complex128, requires_grad=True),
            torch.randn(n, dtype=torch.complex128, requires_grad=True),
        )

    _check(f, cache, make)


@pytest.mark.parametrize("cache", CACHES)
def test_a_spectral_convolution(cache: str) -> None:
    # A Fourier neural operator's layer: rfft2, complex weights on the low modes, irfft2.
    modes = 3
    weight = (torch.randn(4, 5, modes, modes, dtype=torch.complex64) * 0.1).requires_grad_()

    def f(x: torch.Tensor) -> torch.Tensor:
        spec = torch.fft.rfft2(x)
        out = torch.zeros(
            x.shape[0], 5, x.shape[-2], x.shape[-1] // 2 + 1, dtype=spec.dtype, device=x.device
        )
        out[:, :, :modes, :modes] = torch.einsum(
            "bixy,ioxy->boxy", spec[:, :, :modes, :modes], weight
        )
        return torch.fft.irfft2(out, s=x.shape[-2:]).square().mean()

    jf = _compiled(f, cache)
    for n in (8, 8, 10):
        x = torch.randn(2, 4, n, n, requires_grad=True)
        expected, got = f(x), jf(x)
        torch.testing.assert_close(got, expected)
        ge = torch.autograd.grad(expected, (x, weight))
        gt = torch.autograd.grad(got, (x, weight))
        torch.testing.assert_close(gt, ge)
