"""Gradient rules whose form depends on a number argument (a norm's order, a dim, an exponent)
give eager's gradient when that number is symbolic (``cache="symbolic values"``) as when it is a
constant, over calls where the number changes; and float64 whole-tensor std/var backward."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Callable[..., Any], cache: str | None) -> Callable[..., Any]:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


def _leaves(tensors: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
    return tuple(t.detach().clone().requires_grad_() for t in tensors)


def _check(
    fn: Callable[..., Any],
    jfn: Callable[..., Any],
    tensors: Any,
    *numbers: Any,
    exact: bool = False,
) -> None:
    """Values and gradients of ``jfn`` equal eager's (NaNs in the same places; bit for bit when
    ``exact``); thunder neither warns nor runs the call eagerly (which would hide a wrong rule)."""
    tol: dict[str, Any] = {"rtol": 0.0, "atol": 0.0} if exact else {}
    eager_in, thunder_in = _leaves(tensors), _leaves(tensors)
    expected = fn(*eager_in, *numbers)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        actual = jfn(*thunder_in, *numbers)
    assert not [w for w in caught if "thunder" in str(w.message)], [str(w.message) for w in caught]
    torch.testing.assert_close(actual, expected, equal_nan=True, **tol)
    seed = torch.randn_like(expected)
    (expected * seed).sum().backward()
    (actual * seed).sum().backward()
    for a, e in zip(thunder_in, eager_in):
        torch.testing.assert_close(a.grad, e.grad, equal_nan=True, **tol)


def _with_zero_row(*shape: int) -> torch.Tensor:
    x = torch.randn(*shape, dtype=torch.float64)
    x[0] = 0.0
    return x


ORDERS = [2.0, 3.0, 0.5, 1.0, math.inf, 2.0, -math.inf, 3.0]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "name",
    ["vector_norm", "tensor_norm", "normalize", "pairwise_distance"],
)
def test_norm_order_as_argument(name: str, cache: str | None) -> None:
    fns: dict[str, Callable[..., Any]] = {
        "vector_norm": lambda x, p: torch.linalg.vector_norm(x, p, dim=1),
        "tensor_norm": lambda x, p: x.norm(p, dim=1),
        "normalize": lambda x, p: F.normalize(x, p=p, dim=1),
        "pairwise_distance": lambda x, p: F.pairwise_distance(x, x.flip(0), p=p, eps=0.0),
    }
    fn = fns[name]
    jfn = _jit(fn, cache)
    for p in ORDERS:
        if name == "normalize" and math.isinf(p) and p < 0:
            continue
        x = _with_zero_row(3, 4)
        if name == "pairwise_distance":
            x[2] = 0.0  # a row equal to its partner: a zero distance
        _check(fn, jfn, (x,), p)


@pytest.mark.parametrize("cache", CACHES)
def test_inf_norm_of_nan_input(cache: str | None) -> None:
    fn = lambda x, p: torch.linalg.vector_norm(x, p)  # noqa: E731
    jfn = _jit(fn, cache)
    for p in (math.inf, 2.0, math.inf):
        x = torch.randn(4, dtype=torch.float64)
        x[1] = math.nan
        _check(fn, jfn, (x,), p)


class _Normalizer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.p = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(x, p=self.p, dim=1) + torch.linalg.vector_norm(
            x, self.p, dim=1, keepdim=True
        )


@pytest.mark.parametrize("cache", CACHES)
def test_norm_order_as_module_attribute(cache: str | None) -> None:
    module = _Normalizer()
    jmodule = _jit(module, cache)
    for p in (2.0, 3.0, 0.5, math.inf, 2.0):
        module.p = p
        _check(lambda x: module(x), jmodule, (_with_zero_row(3, 5),))


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("reduction", ["max", "min"])
def test_max_min_dim_as_argument(reduction: str, cache: str | None) -> None:
    def fn(x: torch.Tensor, d: int) -> torch.Tensor:
        return getattr(x, reduction)(d).values

    jfn = _jit(fn, cache)
    for d in (1, 0, -1, 1):
        x = torch.randint(0, 3, (4, 5)).to(torch.float64)  # ties along both dims
        _check(fn, jfn, (x,), d)


@pytest.mark.parametrize("cache", CACHES)
def test_pow_exponent_as_argument(cache: str | None) -> None:
    fn = lambda x, s: x.pow(s)  # noqa: E731
    jfn = _jit(fn, cache)
    for s in (0.0, 2.0, 0.0, 3, 0, 1.5, 2.0):
        x = torch.randn(6, dtype=torch.float64).abs()
        x[0] = 0.0
        _check(fn, jfn, (x,), s)


@pytest.mark.parametrize("cache", CACHES)
def test_pow_base_as_argument(cache: str | None) -> None:
    fn = lambda x, s: torch.pow(s, x)  # noqa: E731
    jfn = _jit(fn, cache)
    for s in (2.0, 0.0, -1.0, 0.5, 0.0, 3.0, -2.5):
        x = torch.randn(6, dtype=torch.float64)
        x[0] = 0.0
        x[1] = 2.0
        _check(fn, jfn, (x,), s)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("reduction", ["std", "var", "var_mean", "std_mean"])
def test_float64_whole_tensor_std_var(reduction: str, cache: str | None) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        if reduction in ("var_mean", "std_mean"):
            v, m = getattr(torch, reduction)(x)
            return v + 2 * m
        return getattr(x, reduction)()

    jfn = _jit(fn, cache)
    for shape in ((1,), (5,), (3, 4), (1,), (7,)):
        _check(fn, jfn, (torch.randn(*shape, dtype=torch.float64),))


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("reduction", ["std", "var", "std_dim", "var_mean_dim"])
def test_low_precision_std_var_symbolic_counts(
    reduction: str, dtype: torch.dtype, cache: str | None
) -> None:
    # Sizes and the correction change between calls (symbolic counts); eager rounds op by op.
    def fn(x: torch.Tensor, correction: int) -> torch.Tensor:
        if reduction == "std":
            return x.std(correction=correction)
        if reduction == "var":
            return x.var(correction=correction)
        if reduction == "std_dim":
            return x.std(1, correction=correction)
        v, m = torch.var_mean(x, 0, correction=correction)
        return v + m

    jfn = _jit(fn, cache)
    for shape, correction in (((4, 5), 1), ((4, 7), 1), ((3, 9), 2), ((2, 3), 0), ((4, 6), 1)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # eager's degrees of freedom <= 0
            _check(fn, jfn, (torch.randn(*shape, dtype=dtype),), correction, exact=True)


@pytest.mark.parametrize("cache", CACHES)
def test_low_precision_var_no_degrees_of_freedom_left(cache: str | None) -> None:
    fn = lambda x, correction: x.var(correction=correction)  # noqa: E731
    jfn = _jit(fn, cache)
    for shape, correction in (((2, 3), 1), ((2, 3), 6), ((2, 4), 9), ((2, 3), 1)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _check(fn, jfn, (torch.randn(*shape, dtype=torch.bfloat16),), correction, exact=True)


@pytest.mark.parametrize("cache", [*CACHES, "constant values"])
def test_low_precision_no_dof_nan_where_element_equals_rounded_mean(cache: str | None) -> None:
    # The bfloat16 mean rounds to 0.1553, an element: eager's gradient is NaN there (inf * 0).
    fn = lambda x, correction: x.var(correction=correction)  # noqa: E731
    jfn = _jit(fn, cache)
    x = torch.tensor([[1.1328, 0.1553, 1.3359], [0.0854, 0.0088, -1.7891]], dtype=torch.bfloat16)
    for correction in (6, 7, 6):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _check(fn, jfn, (x,), correction, exact=True)
