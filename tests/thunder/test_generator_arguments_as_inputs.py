"""A torch.Generator passed to a jitted function is an input of the compiled program, keyed by
its type and device: a fresh generator on every call (``generator=torch.Generator().manual_seed(s)``,
as diffusers pipelines take it) takes one program, draws eager's numbers, leaves the generator
where eager leaves it, and is not kept alive by the program."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn as nn
from torch.utils._pytree import tree_leaves

import thunder

CALLS = 5


def _seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _assert_like_eager(
    fn: Callable[..., Any],
    make_args: Callable[[int], tuple[tuple[Any, ...], dict[str, Any]]],
    **jit_options: Any,
) -> Any:
    """Calls ``fn`` eagerly and jitted with arguments made alike (fresh generators with a new seed
    on every call): values and generators' states equal, one compilation."""
    jf = thunder.jit(fn, **jit_options)
    for call in range(CALLS):
        eager_args, eager_kwargs = make_args(call)
        jit_args, jit_kwargs = make_args(call)
        expected = fn(*eager_args, **eager_kwargs)
        got = jf(*jit_args, **jit_kwargs)
        for e, g in zip(
            tree_leaves((expected, eager_args, eager_kwargs)),
            tree_leaves((got, jit_args, jit_kwargs)),
            strict=True,
        ):
            if isinstance(e, torch.Tensor):
                torch.testing.assert_close(g, e, rtol=0, atol=0)
            elif isinstance(e, torch.Generator):
                assert torch.equal(g.get_state(), e.get_state()), f"call {call}"
    assert thunder.compile_stats(jf).compilations == 1
    return jf


def test_positional_generator_fresh_each_call() -> None:
    x = torch.randn(3)

    def fn(x: torch.Tensor, g: torch.Generator) -> Any:
        return x + torch.randn(3, generator=g), torch.rand(2, 2, generator=g)

    jf = _assert_like_eager(fn, lambda s: ((x, _seeded(100 + s)), {}))
    assert len(thunder.last_traces(jf)) > 0


def test_keyword_generator_and_many_random_ops() -> None:
    x = torch.randn(4)

    def fn(x: torch.Tensor, generator: torch.Generator | None = None) -> Any:
        return (
            x * torch.randn(4, generator=generator),
            torch.rand(4, generator=generator),
            torch.randint(0, 10, (4,), generator=generator),
            torch.normal(torch.zeros(4), torch.ones(4), generator=generator),
            torch.bernoulli(torch.full((6,), 0.3), generator=generator),
            torch.multinomial(torch.ones(5), 3, generator=generator),
            torch.randperm(7, generator=generator),
            torch.empty(4).uniform_(generator=generator),
            x.new_empty(3).normal_(generator=generator),
        )

    _assert_like_eager(fn, lambda s: ((x,), {"generator": _seeded(7 * s + 1)}))


def test_generators_in_containers() -> None:
    x = torch.randn(3)

    def fn(x: torch.Tensor, gens: list[torch.Generator], named: dict[str, Any]) -> Any:
        a = torch.randn(3, generator=gens[0])
        b = torch.rand(3, generator=gens[1])
        c = torch.randint(0, 5, (3,), generator=named["g"])
        d = torch.cat([torch.randn(1, 3, generator=g) for g in gens])
        return x + a * b + c, d

    _assert_like_eager(
        fn,
        lambda s: ((x, [_seeded(s), _seeded(s + 50)], {"g": _seeded(s + 99)}), {}),
    )


def test_diffusers_like_generator_or_list_of_generators() -> None:
    x = torch.randn(2, 3)

    def fn(x: torch.Tensor, generator: Any = None) -> torch.Tensor:
        device = generator[0].device if isinstance(generator, list) else generator.device
        if isinstance(generator, list):
            noise = torch.cat([torch.randn((1, 3), generator=g, device=device) for g in generator])
        else:
            noise = torch.randn((2, 3), generator=generator, device=device)
        return x + noise

    _assert_like_eager(fn, lambda s: ((x,), {"generator": _seeded(s)}))
    _assert_like_eager(fn, lambda s: ((x,), {"generator": [_seeded(s), _seeded(s + 1)]}))


def test_two_generators_and_one_passed_twice() -> None:
    x = torch.randn(3)

    def fn(x: torch.Tensor, a: torch.Generator, b: torch.Generator) -> Any:
        return (
            x + torch.rand(3, generator=a),
            torch.randn(3, generator=b),
            torch.rand(2, generator=a),
        )

    _assert_like_eager(fn, lambda s: ((x, _seeded(s), _seeded(s + 1000)), {}))

    def same_twice(s: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
        g = _seeded(s)
        return (x, g, g), {}

    _assert_like_eager(fn, same_twice)

    # One program traced with two generators, then called with one object twice (and back):
    # each call draws as eager does from the objects it is given.
    jf = thunder.jit(fn)
    for s in range(CALLS):
        ge, gj = _seeded(s), _seeded(s)
        pair_e = (ge, ge) if s % 2 else (ge, _seeded(s + 3))
        pair_j = (gj, gj) if s % 2 else (gj, _seeded(s + 3))
        expected, got = fn(x, *pair_e), jf(x, *pair_j)
        for e, g in zip(expected, got, strict=True):
            torch.testing.assert_close(g, e, rtol=0, atol=0)
        for e, g in zip(pair_e, pair_j, strict=True):
            assert torch.equal(g.get_state(), e.get_state())


def test_no_generator_kept_alive_after_the_call() -> None:
    x = torch.randn(3)

    def fn(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        return x + torch.randn(3, generator=g)

    jf = thunder.jit(fn)
    for s in range(CALLS):
        g = _seeded(s)
        ref = weakref.ref(g)
        jf(x, g)
        del g
        gc.collect()
        assert ref() is None, f"call {s}: the generator is still alive"
    assert thunder.compile_stats(jf).compilations == 1


def test_module_with_generator_kwarg() -> None:
    class Noisy(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = nn.Linear(3, 4)

        def forward(
            self, x: torch.Tensor, generator: torch.Generator | None = None
        ) -> torch.Tensor:
            return self.linear(x + 0.1 * torch.randn(x.shape, generator=generator))

    model = Noisy()
    tm = thunder.jit(model)
    x = torch.randn(2, 3)
    for s in range(CALLS):
        ge, gj = _seeded(s), _seeded(s)
        torch.testing.assert_close(tm(x, generator=gj), model(x, generator=ge), rtol=0, atol=0)
        assert torch.equal(gj.get_state(), ge.get_state())
    assert thunder.compile_stats(tm).compilations == 1


@pytest.mark.parametrize("executors", [None, ["torchcompile"]], ids=["default", "torchcompile"])
def test_gradient_through_a_graph_drawing_from_a_generator(executors: Any) -> None:
    def fn(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        noise = torch.randn(x.shape, generator=g)
        mask = torch.bernoulli(torch.full_like(x, 0.5), generator=g)
        return ((x + 1).sin() * noise * mask).sum()

    jf = thunder.jit(fn) if executors is None else thunder.jit(fn, executors=executors)
    for s in range(CALLS):
        x = torch.randn(3, 4)
        xe, xj = x.clone().requires_grad_(), x.clone().requires_grad_()
        ge, gj = _seeded(s), _seeded(s)
        expected, got = fn(xe, ge), jf(xj, gj)
        torch.testing.assert_close(got, expected)
        state = gj.get_state()
        expected.backward()
        got.backward()
        assert torch.equal(gj.get_state(), state), "the backward drew"
        assert torch.equal(gj.get_state(), ge.get_state())
        torch.testing.assert_close(xj.grad, xe.grad)
    assert thunder.compile_stats(jf).compilations == 1


def test_symbolic_values_cache() -> None:
    def fn(x: torch.Tensor, n: int, g: torch.Generator) -> torch.Tensor:
        return x.sum() * n + torch.randn(4, generator=g)

    _assert_like_eager(
        fn, lambda s: ((torch.arange(float(s + 2)), s + 1, _seeded(s)), {}), cache="symbolic values"
    )


def test_generator_also_a_global_stays_pinned() -> None:
    # Found both as an argument and as a global: the program drew from the global's object
    # through either path, so another generator argument is another program.
    shared = _seeded(0)
    x = torch.randn(3)

    def fn(x: torch.Tensor, g: torch.Generator) -> torch.Tensor:
        return x + torch.randn(3, generator=g) + torch.rand(3, generator=shared)

    jf = thunder.jit(fn)
    for s in range(3):
        other_e, other_j = _seeded(s + 10), _seeded(s + 10)
        shared.manual_seed(s)
        expected = fn(x, shared), fn(x, other_e)
        expected_state = shared.get_state()
        shared.manual_seed(s)
        got = jf(x, shared), jf(x, other_j)
        for e, g in zip(expected, got, strict=True):
            torch.testing.assert_close(g, e, rtol=0, atol=0)
        assert torch.equal(shared.get_state(), expected_state)
        assert torch.equal(other_j.get_state(), other_e.get_state())
