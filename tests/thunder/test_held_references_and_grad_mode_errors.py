"""What a jitted function keeps alive, compared with eager (which keeps nothing of a call):
objects read through the program's state (a dataclass batch, a request context assigned on
every call, a hot-swapped submodule) and callable arguments made per call die with the caller's
last reference; an identity guard never passes for a new object at a dead one's address. And
grad mode after an op's error is eager's (``torch.set_grad_enabled(False)`` then an index out
of range leaves it off)."""

from __future__ import annotations

import dataclasses
import functools
import gc
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from gc_new_objects import only_new_objects_collected

import thunder

CACHES = [None, "symbolic values"]


@pytest.fixture(autouse=True)
def _collections_walk_only_what_the_test_makes() -> Iterator[None]:
    with only_new_objects_collected():
        yield


def _jit(fn: Any, cache: str | None) -> Any:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


def _alive(refs: list[weakref.ref[Any]]) -> list[int]:
    gc.collect()
    return [i for i, r in enumerate(refs) if r() is not None]


@dataclasses.dataclass
class Batch:
    images: torch.Tensor
    labels: torch.Tensor


W = torch.randn(3 * 8 * 8, 10)


def _loss(b: Batch) -> torch.Tensor:
    return torch.nn.functional.cross_entropy(b.images.flatten(1) @ W, b.labels)


@pytest.mark.parametrize("cache", CACHES)
def test_dataclass_batch_argument_not_kept(cache: str | None) -> None:
    def run(f: Callable[[Batch], torch.Tensor]) -> list[int]:
        refs = []
        for _ in range(12):
            b = Batch(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,)))
            torch.testing.assert_close(f(b), _loss(b))
            refs.append(weakref.ref(b.images))
            del b
        return _alive(refs)

    assert run(_jit(_loss, cache)) == run(_loss) == []


class _WithContext(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.ctx = {"mask": torch.ones(16)}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.ctx["mask"]


@pytest.mark.parametrize("cache", CACHES)
def test_request_context_assigned_per_call_not_kept(cache: str | None) -> None:
    def run(make: Callable[[torch.nn.Module], Any]) -> list[int]:
        torch.manual_seed(0)
        m = _WithContext()
        f = make(m)
        refs = []
        for _ in range(40):  # past several rebuilds of the guard tree
            m.ctx = {"mask": torch.randn(16)}
            x = torch.randn(2, 16)
            torch.testing.assert_close(f(x), m(x))
            refs.append(weakref.ref(m.ctx["mask"]))
        m.ctx = {"mask": torch.ones(16)}
        return _alive(refs)

    assert run(lambda m: _jit(m, cache)) == run(lambda m: m) == []


class _Served(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(32, 32)
        self.cache = torch.zeros(4, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x) + self.cache


@pytest.mark.parametrize("cache", CACHES)
def test_hot_swapped_submodule_and_buffer_not_kept(cache: str | None) -> None:
    def run(make: Callable[[torch.nn.Module], Any]) -> list[int]:
        net = _Served()
        f = make(net)
        refs: list[weakref.ref[Any]] = []
        for _ in range(6):
            old_head, old_cache = net.head, net.cache
            x = torch.randn(4, 32, requires_grad=True)
            out, expected = f(x), net(x)
            torch.testing.assert_close(out, expected)
            (g,) = torch.autograd.grad(out.sum(), x)
            (ge,) = torch.autograd.grad(expected.sum(), x)
            torch.testing.assert_close(g, ge)
            del out, expected
            net.head = torch.nn.Linear(32, 32)
            net.cache = torch.randn(4, 32)
            refs += [weakref.ref(old_head), weakref.ref(old_head.weight), weakref.ref(old_cache)]
            del old_head, old_cache
        return _alive(refs)

    assert run(lambda n: _jit(n, cache)) == run(lambda n: n) == []


def test_dead_objects_address_reused_is_not_a_hit() -> None:
    # The mask is replaced in place in the context dict: the new tensor is often made at the
    # dead one's address. The guard tree must read the new one, never pass for the old.
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ctx = {"mask": torch.ones(8)}

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.ctx["mask"]

    m = M()
    jm = thunder.jit(m)
    for i in range(30):
        if i % 3 == 0:
            m.ctx = {"mask": m.ctx["mask"]}  # a new dict: its path goes item by item
        m.ctx["mask"] = None  # the old mask dies here
        m.ctx["mask"] = torch.full((8,), float(i))  # likely at its address
        x = torch.randn(8)
        torch.testing.assert_close(jm(x), m(x))


def _apply(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    return fn(x)


@pytest.mark.parametrize("cache", CACHES)
def test_partial_argument_made_per_call_not_kept(cache: str | None) -> None:
    def run(f: Any) -> list[int]:
        refs = []
        for _ in range(10):
            table = torch.randn(16, 32)
            cb = functools.partial(torch.matmul, other=table.T)
            x = torch.randn(2, 32)
            torch.testing.assert_close(f(cb, x), _apply(cb, x))
            refs.append(weakref.ref(table))
            del table, cb
        return _alive(refs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each new partial is a new program (recompile limit)
        assert run(_jit(_apply, cache)) == run(_apply) == []


class _Scaler:
    def __init__(self, w: torch.Tensor) -> None:
        self.w = w

    def scale(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.w


def test_bound_method_argument_not_kept() -> None:
    def run(f: Any) -> list[int]:
        refs = []
        for _ in range(6):
            s = _Scaler(torch.randn(8))
            x = torch.randn(8)
            torch.testing.assert_close(f(s.scale, x), _apply(s.scale, x))
            refs.append(weakref.ref(s))
            del s
        return _alive(refs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run(thunder.jit(_apply)) == run(_apply) == []


def test_same_partial_is_one_program() -> None:
    table = torch.randn(16, 32)
    cb = functools.partial(torch.matmul, other=table.T)
    jf = thunder.jit(_apply)
    for _ in range(4):
        x = torch.randn(2, 32)
        torch.testing.assert_close(jf(cb, x), _apply(cb, x))
    assert thunder.cache_misses(jf) == 1


def test_lambda_argument_made_per_call_not_kept() -> None:
    def run(f: Any) -> list[int]:
        refs = []
        for _ in range(6):
            table = torch.randn(16, 32)
            x = torch.randn(2, 32)
            cb = lambda t, w=table: t @ w.T  # noqa: E731
            torch.testing.assert_close(f(cb, x), _apply(cb, x))
            refs.append(weakref.ref(table))
            del table, cb
        return _alive(refs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert run(thunder.jit(_apply)) == run(_apply) == []


def _switches_grad_off(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    torch.set_grad_enabled(False)
    y = x[idx] * 2
    torch.set_grad_enabled(True)
    return y


def _no_grad_block(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        y = x[idx] * 2
    return y + x.sum()


def _inference_block(x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    torch.autograd.set_grad_enabled(False)
    y = torch.sin(x)[idx]
    torch.autograd.set_grad_enabled(True)
    return y * x[0]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", [_switches_grad_off, _no_grad_block, _inference_block])
def test_grad_mode_after_an_error_is_eagers(fn: Any, cache: str | None) -> None:
    jf = _jit(fn, cache)
    try:
        for i in range(6):
            outcomes = []
            for f in (jf, fn):
                torch.manual_seed(i)
                x = torch.randn(4, 3, requires_grad=True)
                idx = torch.tensor([1, 2] if i % 3 != 2 else [1, 9])  # 9: out of range
                torch.set_grad_enabled(True)
                try:
                    out = f(x, idx)
                    grad = torch.autograd.grad(out.sum(), x) if out.requires_grad else None
                    result: Any = (out.detach(), grad)
                except IndexError:
                    result = "IndexError"
                outcomes.append((result, torch.is_grad_enabled()))
            (got, got_mode), (want, want_mode) = outcomes
            assert got_mode == want_mode, f"call {i}"
            if isinstance(want, str):
                assert got == want
            else:
                torch.testing.assert_close(got, want)
    finally:
        torch.set_grad_enabled(True)


def test_sizes_changing_per_grad_mode_go_symbolic() -> None:
    # Training steps of every batch size interleaved with no_grad evaluation calls of others:
    # each call differs from the one before in grad mode, from the earlier call of its own grad
    # mode in sizes only. The default cache goes symbolic, as it does without the interleaving.
    torch.manual_seed(0)
    m = torch.nn.Linear(8, 8)
    jm = thunder.jit(m)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no recompile-limit warning
        for n in range(1, 30):
            x = torch.randn(n, 8, requires_grad=True)
            out, expected = jm(x), m(x)
            torch.testing.assert_close(out, expected)
            (g,) = torch.autograd.grad(out.sum(), x)
            (ge,) = torch.autograd.grad(expected.sum(), x)
            torch.testing.assert_close(g, ge)
            torch.testing.assert_close(m.weight.grad, None)
            with torch.no_grad():
                x = torch.randn(n + 1, 8)
                torch.testing.assert_close(jm(x), m(x))
    stats = thunder.compile_stats(jm)
    assert stats.eager_fallbacks == 0
    assert stats.compilations <= 4
    assert thunder.cache_hits(jm) >= 2 * 29 - 4


def test_sizes_changing_with_requires_grad_alternating_go_symbolic() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x * w).sum(0) + 1

    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in range(1, 40):
            x = torch.randn(n, 3, requires_grad=n % 2 == 0)
            w = torch.randn(3)
            out, expected = jf(x, w), f(x, w)
            torch.testing.assert_close(out, expected)
            if x.requires_grad:
                torch.testing.assert_close(
                    torch.autograd.grad(out.sum(), x), torch.autograd.grad(expected.sum(), x)
                )
    assert thunder.compile_stats(jf).eager_fallbacks == 0
    assert thunder.compile_stats(jf).compilations <= 4
