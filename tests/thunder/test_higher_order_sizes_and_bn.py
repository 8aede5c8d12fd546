"""Gradients of torch's higher-order operators whose backward reads symbolic sizes
(``cache="symbolic values"``), and train-mode BatchNorm whose running statistics are program
inputs; against eager on fresh random inputs over several calls."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch._higher_order_ops import associative_scan, scan, while_loop
from torch._higher_order_ops import map as hop_map

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Callable[..., Any], cache: str | None) -> Any:
    return thunder.jit(fn, **({"cache": cache} if cache else {}))


def _tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in _tensors(v)]
    return []


def _check(
    fn: Callable[..., Any], cache: str | None, make: Callable[[int], tuple[torch.Tensor, ...]]
) -> None:
    """Outputs and input gradients of ``jit(fn)`` equal eager's over calls with fresh inputs of
    changing sizes; no call runs eagerly and nothing warns."""
    jf = _jit(fn, cache)
    for n in (3, 4, 5, 4):
        inputs = make(n)
        ref_inputs = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = jf(*inputs)
        ref = fn(*ref_inputs)
        torch.testing.assert_close(out, ref)
        outs, refs = _tensors(out), _tensors(ref)
        weights = [torch.randn_like(r) for r in refs]
        wanted = [x for x in inputs if x.requires_grad]
        ref_wanted = [x for x in ref_inputs if x.requires_grad]
        grads = torch.autograd.grad(sum((o * w).sum() for o, w in zip(outs, weights)), wanted)
        ref_grads = torch.autograd.grad(
            sum((r * w).sum() for r, w in zip(refs, weights)), ref_wanted
        )
        torch.testing.assert_close(grads, ref_grads)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def _rand(*shape: int, requires_grad: bool = True) -> torch.Tensor:
    return torch.randn(*shape, requires_grad=requires_grad)


# -- higher-order operators: the backward reads sizes ------------------------------------------


@pytest.mark.parametrize("cache", CACHES)
def test_cond_broadcasting_operands(cache: str | None) -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.cond(
            x.sum() > 0, lambda a, b: (a * b).sin(), lambda a, b: (a - b).cos(), (x, w)
        )

    _check(f, cache, lambda n: (_rand(n, 3), _rand(3)))
    _check(f, cache, lambda n: (_rand(n, n + 1), _rand(n + 1)))


@pytest.mark.parametrize("cache", CACHES)
def test_cond_branches_capture_different_values(cache: str | None) -> None:
    def f(x: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.sum() > 0, lambda a: (a * u).exp(), lambda a: a + v.sum(0), (x,))

    _check(f, cache, lambda n: (_rand(n, 3), _rand(3), _rand(n + 2, 3)))


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("reverse", [False, True])
def test_scan(cache: str | None, reverse: bool) -> None:
    def f(h0: torch.Tensor, x: torch.Tensor) -> Any:
        return scan(lambda h, xi: ((h + xi).tanh(), h * 2), h0, x, reverse=reverse)

    _check(f, cache, lambda n: (_rand(3), _rand(n, 3)))


@pytest.mark.parametrize("cache", CACHES)
def test_scan_with_captured_tensor(cache: str | None) -> None:
    def f(h0: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> Any:
        return scan(lambda h, xi: ((h * w + xi).sin(), (h * xi).sum(-1)), h0, x)

    _check(f, cache, lambda n: (_rand(2, n), _rand(4, 2, n), _rand(n)))


@pytest.mark.parametrize("cache", CACHES)
def test_while_loop(cache: str | None) -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        def body(i: torch.Tensor, a: torch.Tensor) -> Any:
            return i + 1, (a * w).sin()

        return while_loop(lambda i, a: i < 3, body, (torch.tensor(0), x))[1]

    _check(f, cache, lambda n: (_rand(n), _rand(n)))
    _check(f, cache, lambda n: (_rand(2, n), _rand(n)))


@pytest.mark.parametrize("cache", CACHES)
def test_map_broadcasting_captured_tensor(cache: str | None) -> None:
    def f(xs: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return hop_map(lambda x: (x * w).tanh(), xs)

    _check(f, cache, lambda n: (_rand(4, n, 3), _rand(3)))


@pytest.mark.parametrize("cache", CACHES)
def test_associative_scan(cache: str | None) -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return associative_scan(lambda a, b: a * b, (x * w).sin(), dim=0, combine_mode="generic")

    _check(f, cache, lambda n: (_rand(n, 3), _rand(3)))


# -- train-mode BatchNorm: running statistics the program writes are its inputs ----------------


def _bn_forms() -> list[Any]:
    from torch.func import functional_call

    bn = torch.nn.BatchNorm1d(3)

    def tuple_of_dicts(rm: torch.Tensor, rv: torch.Tensor, x: torch.Tensor) -> Any:
        return functional_call(bn, ({"running_mean": rm},), (x,))

    def both_stats(rm: torch.Tensor, rv: torch.Tensor, x: torch.Tensor) -> Any:
        return functional_call(bn, {"running_mean": rm, "running_var": rv}, (x,))

    def running_var_only(rm: torch.Tensor, rv: torch.Tensor, x: torch.Tensor) -> Any:
        return functional_call(bn, ({"running_var": rv},), (x,))

    def returns_running_mean(rm: torch.Tensor, rv: torch.Tensor, x: torch.Tensor) -> Any:
        return F.batch_norm(x, rm, rv, training=True), rm

    def returns_running_var(rm: torch.Tensor, rv: torch.Tensor, x: torch.Tensor) -> Any:
        return F.batch_norm(x, rm, rv, training=True).exp(), rv

    def plain(rm: torch.Tensor, rv: torch.Tensor, x: torch.Tensor) -> Any:
        return F.batch_norm(x, rm, rv, training=True)

    return [
        tuple_of_dicts,
        both_stats,
        running_var_only,
        returns_running_mean,
        returns_running_var,
        plain,
    ]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("form", range(6))
def test_batch_norm_running_stats_as_inputs(cache: str | None, form: int) -> None:
    fn = _bn_forms()[form]
    jf = _jit(fn, cache)
    for n in (5, 6, 5):
        rm, rv = torch.randn(3), torch.rand(3) + 0.5
        x = torch.randn(n, 3, requires_grad=True)
        rm_ref, rv_ref = rm.clone(), rv.clone()
        x_ref = x.detach().clone().requires_grad_()
        out, ref = jf(rm, rv, x), fn(rm_ref, rv_ref, x_ref)
        y = out[0] if isinstance(out, tuple) else out
        y_ref = ref[0] if isinstance(ref, tuple) else ref
        torch.testing.assert_close(out, ref)
        weight = torch.randn_like(y)
        (g,) = torch.autograd.grad((y * weight).sum(), x)
        (g_ref,) = torch.autograd.grad((y_ref * weight).sum(), x_ref)
        torch.testing.assert_close(g, g_ref)
        torch.testing.assert_close((rm, rv), (rm_ref, rv_ref))
    assert thunder.compile_stats(jf).eager_fallbacks == 0


@pytest.mark.parametrize("returned", [False, True])
def test_batch_norm_later_write_of_running_stat_still_raises(returned: bool) -> None:
    """The program's own write is not a later modification; the caller's is, as in eager's."""

    def fn(rm: torch.Tensor, rv: torch.Tensor, x: torch.Tensor) -> Any:
        y = F.batch_norm(x, rm, rv, training=True)
        return (y, rm) if returned else y

    for f in (fn, thunder.jit(fn)):
        rm, rv, x = torch.randn(3), torch.rand(3) + 0.5, torch.randn(5, 3, requires_grad=True)
        out = f(rm, rv, x)
        y = out[0] if returned else out
        rm.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


@pytest.mark.parametrize("returned", [False, True])
def test_batch_norm_kernel_write_keeps_version_as_eager(returned: bool) -> None:
    """batch_norm's kernel updates the running statistics without bumping their version: a node
    that saved them before the call still runs its backward, as eager's."""

    def fn(rm: torch.Tensor, rv: torch.Tensor, x: torch.Tensor) -> Any:
        y = F.batch_norm(x, rm, rv, training=True)
        return (y, rm) if returned else y

    jf = thunder.jit(fn)
    for f in (fn, jf, jf):
        rm, rv = torch.randn(3), torch.rand(3) + 0.5
        w, x = torch.randn(3, requires_grad=True), torch.randn(5, 3, requires_grad=True)
        earlier = (w * rm).sum()
        out = f(rm, rv, x)
        assert (rm._version, rv._version) == (0, 0)
        if returned:
            assert out[1] is rm
        earlier.backward()
        (out[0] if returned else out).sum().backward()


@pytest.mark.parametrize("cache", CACHES)
def test_batch_norm_one_running_stat_raises_as_eager(cache: str | None) -> None:
    def only_mean(rm: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, rm, None, training=True)

    def only_var(rv: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, None, rv, training=True)

    message = "running_mean and running_var must either both be None or neither be None"
    for fn in (only_mean, only_var):
        for f in (fn, _jit(fn, cache)):
            with pytest.raises(ValueError, match=message):
                f(torch.rand(3) + 0.5, torch.randn(5, 3, requires_grad=True))


# -- torch.func.grad: in-place writes into captured tensors ------------------------------------


def test_grad_transform_refuses_in_place_write_into_captured_buffer() -> None:
    """BatchNorm's ``num_batches_tracked += 1`` on a buffer the transformed function captured:
    eager's functorch refuses it."""
    from torch.func import grad

    for module in (torch.nn.BatchNorm1d(3), thunder.jit(torch.nn.BatchNorm1d(3))):
        with pytest.raises(RuntimeError, match="mutate a captured Tensor"):
            grad(lambda v: module(v).pow(2).sum())(torch.randn(5, 3))


def test_grad_transform_allows_batch_norm_kernel_update_of_captured_stats() -> None:
    """The running-statistics update inside batch_norm's kernel is no in-place op functorch
    sees: eager allows it on captured statistics, and so must thunder."""
    from torch.func import grad

    def fn(v: torch.Tensor, rm: torch.Tensor, rv: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(v, rm, rv, training=True).pow(3).sum()

    jf = thunder.jit(fn)
    for _ in range(3):
        v = torch.randn(5, 3)
        rm, rv = torch.randn(3), torch.rand(3) + 0.5
        rm_ref, rv_ref = rm.clone(), rv.clone()
        g = grad(lambda x: jf(x, rm, rv))(v)
        g_ref = grad(lambda x: fn(x, rm_ref, rv_ref))(v)
        torch.testing.assert_close(g, g_ref)
        torch.testing.assert_close((rm, rv), (rm_ref, rv_ref))
