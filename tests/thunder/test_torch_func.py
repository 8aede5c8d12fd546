"""Jitted functions and modules under ``torch.func`` transforms: ``grad``, ``vjp`` and
``jacrev`` run the compiled program (thunder's forward and backward traces); ``vmap``, ``jvp``,
``jacfwd`` and nested transforms run the function eagerly, with one warning. Either way the
results are eager's."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import func

import thunder


def _scalar(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return (torch.tanh(x @ w).sin() * x.sum()).sum()


def _vector(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x @ w) * x.mean()


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(3, 4), torch.randn(4, 5)


def _no_warnings(fn: Callable[[], Any]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return fn()


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_grad_matches_eager_and_runs_the_compiled_program(argnums: Any) -> None:
    jf = thunder.jit(_scalar)
    for _ in range(3):
        x, w = _inputs()
        got = _no_warnings(lambda: func.grad(jf, argnums=argnums)(x, w))
        torch.testing.assert_close(got, func.grad(_scalar, argnums=argnums)(x, w))
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0 and stats.compilations == 1 and stats.cache_hits == 2
    assert thunder.last_backward_traces(jf)


def test_grad_and_value_with_aux() -> None:
    def f(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x.exp()
        return y.sum(), y

    jf = thunder.jit(f)
    x = torch.randn(6)
    (g, (v, aux)), (rg, (rv, raux)) = (
        func.grad_and_value(jf, has_aux=True)(x),
        func.grad_and_value(f, has_aux=True)(x),
    )
    torch.testing.assert_close((g, v, aux), (rg, rv, raux))
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_vjp_matches_eager() -> None:
    jf = thunder.jit(_vector)
    for _ in range(2):
        x, w = _inputs()
        out, vjp_fn = _no_warnings(lambda: func.vjp(jf, x, w))
        ref, ref_vjp = func.vjp(_vector, x, w)
        torch.testing.assert_close(out, ref)
        ct = torch.randn_like(ref)
        torch.testing.assert_close(vjp_fn(ct), ref_vjp(ct))
    assert thunder.compile_stats(jf).eager_fallbacks == 0


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_jacrev_matches_eager(argnums: Any) -> None:
    # jacrev vmaps the vjp: the compiled backward runs once per basis vector, below the vmap
    jf = thunder.jit(_vector)
    x, w = _inputs()
    got = _no_warnings(lambda: func.jacrev(jf, argnums=argnums)(x, w))
    torch.testing.assert_close(got, func.jacrev(_vector, argnums=argnums)(x, w))
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_grad_of_a_jitted_module_through_functional_call() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    jm = thunder.jit(model)

    def loss(params: dict[str, torch.Tensor], m: Any, x: torch.Tensor) -> torch.Tensor:
        return func.functional_call(m, params, (x,)).pow(2).sum()

    for _ in range(2):
        params = {k: torch.randn_like(v) for k, v in model.named_parameters()}
        x = torch.randn(5, 4)
        got = _no_warnings(lambda: func.grad(loss)(params, jm, x))
        want = func.grad(loss)(params, model, x)
        assert got.keys() == want.keys()
        for k in want:
            torch.testing.assert_close(got[k], want[k], msg=k)
    assert thunder.compile_stats(jm).eager_fallbacks == 0


def _eager_cases() -> dict[str, Callable[[Callable[..., Any], torch.Tensor], Any]]:
    def scalar(f: Callable[..., Any]) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda x: f(x, W).sum()

    return {
        "vmap": lambda f, x: func.vmap(lambda row: f(row[None], W))(x),
        "jvp": lambda f, x: func.jvp(lambda y: f(y, W), (x,), (torch.ones_like(x),)),
        "jacfwd": lambda f, x: func.jacfwd(lambda y: f(y, W))(x),
        "grad_of_grad": lambda f, x: func.grad(lambda y: func.grad(scalar(f))(y).sum())(x),
        "vmap_of_grad": lambda f, x: func.vmap(func.grad(lambda r: f(r[None], W).sum()))(x),
        "hessian": lambda f, x: func.hessian(scalar(f))(x),
    }


W = torch.randn(4, 5)


@pytest.mark.parametrize("case", list(_eager_cases()))
def test_other_transforms_run_eagerly_with_one_warning(case: str) -> None:
    run = _eager_cases()[case]
    jf = thunder.jit(_vector)
    x = torch.randn(3, 4)
    with pytest.warns(UserWarning, match=r"torch\.func .*runs eagerly there \(shown once\)"):
        got = run(jf, x)
    torch.testing.assert_close(got, run(_vector, x))
    x = torch.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        got = run(jf, x)
    torch.testing.assert_close(got, run(_vector, x))
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks >= 2 and "torch.func" in (stats.last_eager_reason or "")
    torch.testing.assert_close(jf(x, W), _vector(x, W))  # outside the transforms: compiled
    assert thunder.compile_stats(jf).compilations >= 1


def test_grad_with_disable_torch_autograd_runs_eagerly() -> None:
    jf = thunder.jit(_scalar, disable_torch_autograd=True)
    x, w = _inputs()
    with pytest.warns(UserWarning, match="disable_torch_autograd=True"):
        got = func.grad(jf)(x, w)
    torch.testing.assert_close(got, func.grad(_scalar)(x, w))


def test_plain_autograd_still_runs_the_backward_trace() -> None:
    jf = thunder.jit(_scalar)
    x, w = _inputs()
    x.requires_grad_()
    xr = x.detach().clone().requires_grad_()
    jf(x, w).backward()
    _scalar(xr, w).backward()
    torch.testing.assert_close(x.grad, xr.grad)
    assert thunder.last_backward_traces(jf)
