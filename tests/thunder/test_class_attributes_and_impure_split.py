"""What a class holds is outside state also when the program reads it through an instance it made
itself (``Sampler().greedy``, ``self._validate_args`` in a distribution's ``__init__``): changed
between calls, the next call sees it as eager does. And an impure call that runs split (a global
``random.Random``'s methods) gives eager's values and advances eager's state on every call."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.distributions as D
from runs_by_torch import call_split

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Callable[..., Any], cache: str | None) -> Any:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


class Base:
    flag = False
    scale = 2.0

    def __init__(self, v: torch.Tensor) -> None:
        self.v = v * self.scale if self.flag else v + 1


class Sub(Base):
    pass


@pytest.mark.parametrize("cache", CACHES)
def test_class_attribute_read_through_an_instance_made_inside(cache: str | None) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return Base(x).v * Sub(x).v

    jf = _jit(f, cache)
    try:
        for flag, scale in [(False, 2.0), (True, 2.0), (True, 3.0), (False, 3.0), (True, 5.0)]:
            Base.flag, Base.scale = flag, scale
            x = torch.randn(3, requires_grad=True)
            xj = x.detach().clone().requires_grad_()
            expected, got = f(x), jf(xj)
            torch.testing.assert_close(got, expected)
            expected.sum().backward()
            got.sum().backward()
            torch.testing.assert_close(xj.grad, x.grad)
        Sub.flag = False  # a subclass's own value now answers for Sub, not Base's
        x = torch.randn(3)
        torch.testing.assert_close(jf(x), f(x))
    finally:
        Base.flag, Base.scale = False, 2.0
        if "flag" in vars(Sub):
            del Sub.flag


@pytest.mark.parametrize("cache", CACHES)
def test_a_sampler_made_inside_follows_its_class_switch(cache: str | None) -> None:
    class Sampler:
        greedy = False

        def sample(self, logits: torch.Tensor) -> torch.Tensor:
            if self.greedy:
                return logits.argmax(-1)
            return torch.multinomial(logits.softmax(-1), 1).squeeze(-1)

    def gen(logits: torch.Tensor) -> torch.Tensor:
        return Sampler().sample(logits)

    jg = _jit(gen, cache)
    for k, greedy in enumerate([False, True, True, False, True]):
        Sampler.greedy = greedy
        logits = torch.randn(4, 7)
        torch.manual_seed(k)
        expected = gen(logits)
        torch.manual_seed(k)
        assert torch.equal(jg(logits), expected), (k, greedy)


@pytest.fixture
def restore_validate_args() -> Iterator[None]:
    before = D.Distribution._validate_args
    yield
    D.Distribution.set_default_validate_args(before)


def _outcome(fn: Callable[..., Any], *args: Any) -> Any:
    try:
        return fn(*args)
    except ValueError as e:
        return type(e)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("first", [False, True])
def test_default_validate_args_changed_between_calls(
    cache: str | None, first: bool, restore_validate_args: None
) -> None:
    def h(s: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return D.Normal(torch.zeros(3), s).log_prob(x)

    jh = _jit(h, cache)
    for flag in [first, not first, first, not first]:
        D.Distribution.set_default_validate_args(flag)
        for s in (torch.tensor([1.0, -1.0, 1.0]), torch.rand(3) + 0.5):
            x = torch.randn(3)
            expected, got = _outcome(h, s, x), _outcome(jh, s, x)
            if isinstance(expected, torch.Tensor):
                assert isinstance(got, torch.Tensor), (flag, got)
                torch.testing.assert_close(got, expected, equal_nan=True)
            else:
                assert got is expected, (flag, got)


@pytest.mark.parametrize("cache", CACHES)
def test_a_library_class_attribute_read_directly(
    cache: str | None, restore_validate_args: None
) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x * 10 if D.Distribution._validate_args else x - 1

    jf = _jit(f, cache)
    for flag in [False, True, False]:
        D.Distribution.set_default_validate_args(flag)
        x = torch.randn(2)
        torch.testing.assert_close(jf(x), f(x))


@pytest.mark.parametrize("cache", CACHES)
def test_methods_properties_and_containers_of_the_class_of_an_instance_made_inside(
    cache: str | None,
) -> None:
    class Meta(type):
        boost = 1.0

    class Scaler(metaclass=Meta):
        k = 2.0
        offsets = [1.0]

        def apply(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.k + sum(self.offsets)

        @property
        def double_k(self) -> float:
            return self.k * 2

    def f(x: torch.Tensor) -> torch.Tensor:
        s = Scaler()
        return s.apply(x) * s.double_k + getattr(s, "extra", 0.5) * type(s).boost

    jf = _jit(f, cache)
    changes: list[Callable[[], None]] = [
        lambda: None,
        lambda: setattr(Scaler, "k", 3.0),
        lambda: setattr(Scaler, "apply", lambda self, x: x - self.k),
        lambda: setattr(Scaler, "double_k", property(lambda self: -1.0)),
        lambda: Scaler.offsets.append(4.0),
        lambda: setattr(Scaler, "extra", 7.0),
        lambda: setattr(Meta, "boost", 3.0),
    ]
    for change in changes:
        change()
        x = torch.randn(3)
        torch.testing.assert_close(jf(x), f(x))


def test_a_class_attribute_read_by_many_instances_is_guarded_once() -> None:
    class Layer:
        active = True

        def __call__(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 if self.active else x

    def f(x: torch.Tensor) -> torch.Tensor:
        for layer in [Layer() for _ in range(6)]:
            x = layer(x)
        return x

    jf = thunder.jit(f)
    x = torch.randn(2)
    torch.testing.assert_close(jf(x), f(x))
    prologue = str(thunder.last_prologue_traces(jf)[-1])
    guards = [line for line in prologue.splitlines() if "# guard:" in line and "active" in line]
    assert len(guards) == 1, guards
    Layer.active = False
    torch.testing.assert_close(jf(x), f(x))


# Each a function of its own (dynamo caches by code object).
_pr = random.Random(0)
_RANDOM_INSTANCE_CALLS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "randrange": lambda x: x[_pr.randrange(4)],
    "random": lambda x: x * _pr.random(),
    "randint": lambda x: x * _pr.randint(0, 9),
    "uniform": lambda x: x * _pr.uniform(-1, 1),
    "choice": lambda x: x * _pr.choice([1.0, 2.0, 3.0, 4.0]),
    "gauss": lambda x: x * _pr.gauss(0, 1),
    "getrandbits": lambda x: x * _pr.getrandbits(6),
    "shuffle": lambda x: x[(lambda order: (_pr.shuffle(order), order)[1])([0, 1, 2, 3])],
    "sample": lambda x: x[_pr.sample(range(4), 2)],
    "two draws": lambda x: x * _pr.random() + _pr.randint(0, 5),
    "draw then getstate": lambda x: x * _pr.random() + hash(_pr.getstate()) % 7,
    "hidden module instance": lambda x: x * random._inst.random(),  # type: ignore[attr-defined]
}
_RANDOM_MODULE_CALLS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "random": lambda x: x * random.random(),
    "randint": lambda x: x * random.randint(0, 9),
    "uniform": lambda x: x * random.uniform(-1, 1),
    "choice": lambda x: x * random.choice([1.0, 2.0, 3.0, 4.0]),
    "gauss": lambda x: x * random.gauss(0, 1),
    "shuffle": lambda x: x[(lambda order: (random.shuffle(order), order)[1])([0, 1, 2, 3])],
    "sample": lambda x: x[random.sample(range(4), 2)],
    "seed between draws": lambda x: (random.random(), random.seed(7), x * random.random())[2],
    "branch": lambda x: x + 1 if random.random() < 0.5 else x - 1,
}


def _same_draws_as_eager(fn: Callable[[torch.Tensor], torch.Tensor], gen: Any, match: str) -> None:
    jf = thunder.jit(fn)
    for seed in range(5):
        x = torch.arange(4.0)
        gen.seed(seed)
        expected = fn(x)
        state = gen.getstate()
        gen.seed(seed)
        got = call_split(jf, x, match=match)
        assert torch.equal(got, expected), (seed, got, expected)
        assert gen.getstate() == state, seed  # advanced as eager advanced it


@pytest.mark.parametrize("kind", list(_RANDOM_INSTANCE_CALLS))
def test_an_outside_random_instance_draws_anew_under_split(kind: str) -> None:
    gen = random._inst if kind == "hidden module instance" else _pr  # type: ignore[attr-defined]
    _same_draws_as_eager(_RANDOM_INSTANCE_CALLS[kind], gen, r"random\.Random\.")


@pytest.mark.parametrize("kind", list(_RANDOM_MODULE_CALLS))
def test_random_module_functions_draw_anew_under_split(kind: str) -> None:
    _same_draws_as_eager(_RANDOM_MODULE_CALLS[kind], random._inst, r"random\.Random\.")  # type: ignore[attr-defined]
