"""Ops with static output shapes whose values torch computes partly on the host (combinations,
cov, corrcoef, narrow at a tensor start, histogram), instance_norm's running statistics and the
torch.masked ops: compiled (no eager fallback) and equal to eager, gradients included, on fresh
random inputs."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from runs_by_torch import call_split

import thunder


def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    jf = thunder.jit(fn)

    def call(*args: Any, **kwargs: Any) -> Any:
        out = jf(*args, **kwargs)
        assert thunder.compile_stats(jf).eager_fallbacks == 0  # eager's result is no success
        return out

    return call


def _copies(args: tuple[Any, ...], grad: bool) -> list[Any]:
    """Fresh copies of ``args``; the first requires grad where ``grad`` and it is a float."""
    out = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
    if grad and out[0].dtype.is_floating_point:
        out[0].requires_grad_(True)
    return out


def _check(fn: Callable[..., Any], *args: Any, grad: bool = True, **kwargs: Any) -> None:
    """``fn`` jitted equals eager on copies of ``args``: results, the gradients of the first
    argument, and the arguments afterwards (what the op writes into them)."""
    eager_args, jit_args = _copies(args, grad), _copies(args, grad)
    expected = fn(*eager_args, **kwargs)
    got = _compiled(fn)(*jit_args, **kwargs)
    torch.testing.assert_close(got, expected, equal_nan=True)
    if grad and expected.requires_grad:
        cot = torch.randn_like(expected)
        (want,) = torch.autograd.grad(expected, eager_args[0], cot)
        (have,) = torch.autograd.grad(got, jit_args[0], cot)
        torch.testing.assert_close(have, want, equal_nan=True)
    for e, j in zip(eager_args, jit_args):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(j, e, equal_nan=True)


@pytest.mark.parametrize(
    ("n", "r", "with_replacement"), [(5, 2, False), (4, 3, True), (3, 4, False)]
)
def test_combinations(n: int, r: int, with_replacement: bool) -> None:
    _check(lambda x: torch.combinations(x, r, with_replacement).sin(), torch.randn(n))
    positions = list(
        (itertools.combinations_with_replacement if with_replacement else itertools.combinations)(
            range(n), r
        )
    )
    got = _compiled(lambda x: torch.combinations(x, r, with_replacement))(torch.arange(n))
    assert got.tolist() == [list(p) for p in positions]


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"correction": 0},
        {"correction": 8},  # degrees of freedom <= 0: the factor is zeroed, as eager does
        {"fweights": "f"},
        {"aweights": "a"},
        {"fweights": "f", "aweights": "a", "correction": 2},
    ],
    ids=["plain", "correction0", "no-dof", "fweights", "aweights", "both"],
)
@pytest.mark.filterwarnings("ignore:cov.*degrees of freedom")  # eager's, of a value
def test_cov_and_corrcoef(kwargs: dict[str, Any]) -> None:
    weights = {"f": torch.randint(1, 5, (8,)), "a": torch.rand(8) + 0.1}
    kw = {k: weights[v] if isinstance(v, str) else v for k, v in kwargs.items()}
    _check(lambda x: torch.cov(x, **kw), torch.randn(3, 8))
    _check(lambda x: x.cov(**kw), torch.randn(8))
    if not kw:
        _check(torch.corrcoef, torch.randn(4, 8))
        _check(lambda x: x.corrcoef(), torch.randn(1, 8))


@pytest.mark.filterwarnings("ignore:cov.*degrees of freedom")
def test_cov_of_one_observation_with_one_kind_of_weight_zeroes_the_input_as_eager() -> None:
    # Eager's corner case writes zeros into the input (its centered values alias it).
    _check(lambda x: torch.cov(x, fweights=torch.tensor([3])), torch.randn(3, 1), grad=False)
    _check(lambda x: torch.cov(x, aweights=torch.tensor([0.5])), torch.randn(3, 1), grad=False)


@pytest.mark.parametrize("start", [0, 3, -3, -6])
def test_narrow_at_a_tensor_start(start: int) -> None:
    s = torch.tensor(start)
    _check(lambda x, s: torch.narrow(x, 1, s, 3), torch.randn(4, 6), s)
    _check(lambda x, s: x.narrow(0, s, 2) * 2, torch.randn(6, 3), s)


def test_narrow_at_a_tensor_start_is_a_view_for_writes() -> None:
    def f(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        x.narrow(0, s, 2).mul_(10)
        return x

    for start in (1, -3):
        x = torch.randn(5, 3)
        expected = f(x.clone(), torch.tensor(start))
        torch.testing.assert_close(_compiled(f)(x, torch.tensor(start)), expected)
        torch.testing.assert_close(x, expected)


@pytest.mark.parametrize("shape", [(2, 3, 5), (3, 4, 2, 3)])
def test_instance_norm_updates_running_statistics(shape: tuple[int, ...]) -> None:
    c = shape[1]
    w, b = torch.randn(c, requires_grad=True), torch.randn(c, requires_grad=True)

    def f(x: torch.Tensor, rm: torch.Tensor, rv: torch.Tensor) -> torch.Tensor:
        return F.instance_norm(x, rm, rv, w, b, use_input_stats=True, momentum=0.3)

    _check(f, torch.randn(shape), torch.randn(c), torch.rand(c) + 0.5)
    # As a module over several calls: the statistics keep following eager's.
    m = torch.nn.InstanceNorm1d(c, track_running_stats=True, affine=True)
    jm = thunder.jit(torch.nn.InstanceNorm1d(c, track_running_stats=True, affine=True))
    x = torch.randn(2, c, 7)
    for _ in range(2):
        torch.testing.assert_close(jm(x), m(x))
    assert thunder.compile_stats(jm).eager_fallbacks == 0
    torch.testing.assert_close(jm.running_mean, m.running_mean)
    torch.testing.assert_close(jm.running_var, m.running_var)


def test_instance_norm_with_one_running_statistic_raises_as_eager() -> None:
    with pytest.raises(ValueError, match="both be None or neither"):
        thunder.jit(lambda x, rm: F.instance_norm(x, rm, None))(torch.randn(2, 3, 4), torch.ones(3))


@pytest.mark.parametrize(
    ("bins", "kwargs"),
    [
        (7, {}),
        (10, {"density": True}),
        (5, {"range": (-1.0, 1.0), "weight": "w"}),
        (4, {"range": (0.0, 0.0)}),
        ("edges", {"weight": "w", "density": True}),
    ],
)
def test_histogram(bins: Any, kwargs: dict[str, Any]) -> None:
    x = torch.randn(200)
    kw = {k: torch.rand(200) if v == "w" else v for k, v in kwargs.items()}
    b = torch.tensor([-2.0, -0.5, 0.0, 0.25, 3.0]) if bins == "edges" else bins
    got = _compiled(lambda x: torch.histogram(x, b, **kw))(x)
    expected = torch.histogram(x, b, **kw)
    assert type(got) is type(expected)
    torch.testing.assert_close(got.bin_edges, expected.bin_edges, atol=0, rtol=0)
    torch.testing.assert_close(got.hist, expected.hist)


def test_histogram_counts_the_last_edge_in_the_last_bin() -> None:
    x = torch.arange(11.0)  # elements on every edge
    for kw in ({}, {"range": (0.0, 10.0)}, {"range": (2.0, 8.0)}):
        got = _compiled(lambda x, kw=kw: torch.histogram(x, 5, **kw))(x)
        torch.testing.assert_close(got.hist, torch.histogram(x, 5, **kw).hist)


@pytest.mark.parametrize(
    "op",
    ["sum", "prod", "amax", "mean", "cumsum", "softmax", "log_softmax", "var", "norm"],
)
def test_torch_masked_ops(op: str) -> None:
    fn = getattr(torch.masked, op)
    mask = torch.rand(3, 5) > 0.3
    args: tuple[Any, ...] = (2.0, 1) if op == "norm" else (1,)

    def f(x: torch.Tensor) -> torch.Tensor:
        return fn(x, *args, mask=mask)

    _check(f, torch.randn(3, 5), grad=op in ("sum", "mean", "softmax", "norm"))


def test_an_autograd_function_class_defined_in_the_program() -> None:
    # torch.masked defines one per call; its metaclass draws an id from torch's global counter.
    def f(x: torch.Tensor) -> torch.Tensor:
        class Twice(torch.autograd.Function):
            @staticmethod
            def forward(ctx: Any, a: torch.Tensor) -> torch.Tensor:
                return a * 2

            @staticmethod
            def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
                return g * 3  # not the true derivative: shows this backward runs

        return Twice.apply(x).sum()

    x = torch.randn(4, requires_grad=True)
    _check(f, x)
    (g,) = torch.autograd.grad(_compiled(f)(x), x)
    torch.testing.assert_close(g, torch.full((4,), 3.0))


def test_next_on_torchs_global_counter_runs_split() -> None:
    counter = torch.autograd.function.AUTOGRAD_FUNCTION_COUNTER
    expected = next(copy.copy(counter))
    out = call_split(
        thunder.jit(lambda x: x * next(counter)), torch.ones(2), match="an iterator .* made outside"
    )
    # torch's run reads it (autograd Functions made meanwhile advance it too)
    assert out[0].item() >= expected and out[0] == out[1]
