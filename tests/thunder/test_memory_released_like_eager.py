"""What the caller drops, thunder drops as eager does (a server, a long training loop):

- a callback made per call (a closure, a lambda with defaults, a per-call object's bound
  method) is not kept by the cache entries keyed by it, nor what it captures;
- a class made at run time (a model factory's local class, ``type()`` per instance) is not
  kept by the interpreter's per-class tables;
- the generated sources registered with linecache go with their programs;
- the inputs of a call that raised while traced, and of the first (compiling) call, die by
  reference counting once the caller drops them (no reference cycle through thunder's frames).

Compared with eager through weak references; where eager frees by reference counting, with the
cyclic collector disabled.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import linecache
import traceback
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

# The first guard tree built in a process imports torch._dynamo, and that import keeps the
# frames of the call that made it: imported here, so every test sees its steady state.
import torch._dynamo  # noqa: F401
from gc_new_objects import only_new_objects_collected

import thunder
import thunder_interp


@pytest.fixture(autouse=True)
def _collections_walk_only_what_the_test_makes() -> Iterator[None]:
    with only_new_objects_collected():
        yield


@contextlib.contextmanager
def _refcounting_only() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _alive(refs: list[weakref.ref[Any]]) -> list[int]:
    return [i for i, r in enumerate(refs) if r() is not None]


# -- callbacks made per call ---------------------------------------------------------------------


class _Scaler:
    def __init__(self, table: torch.Tensor) -> None:
        self.table = table

    def apply(self, t: torch.Tensor) -> torch.Tensor:
        return t * 2 + self.table[0, :3]


def _inner(t: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    return t * table[1, :3]


def _make_callback(kind: str, table: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    if kind == "closure":
        return lambda t: t * 2 + table[0, :3]
    if kind == "default":
        return lambda t, table=table: t.sin() + table[0, :3]
    if kind == "kwdefault":
        return lambda t, *, table=table: t * table[2, :3]
    if kind == "method":
        return _Scaler(table).apply
    if kind == "partial":
        return functools.partial(_inner, table=table)
    if kind == "nested":

        def outer(t: torch.Tensor) -> torch.Tensor:
            return (lambda u: u + table[0, :3])(t) * 2

        return outer
    raise AssertionError(kind)


def _apply(x: torch.Tensor, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    return fn(x) + 1


def _apply_both(x: torch.Tensor, fns: list[Callable[[torch.Tensor], torch.Tensor]]) -> Any:
    return fns[0](x) + fns[1](x)


KINDS = ["closure", "default", "kwdefault", "method", "partial", "nested"]


@pytest.mark.parametrize("kind", KINDS)
def test_callback_made_per_call_is_not_kept(kind: str) -> None:
    def run(f: Callable[..., torch.Tensor], g: Callable[..., torch.Tensor]) -> list[int]:
        refs = []
        for k in range(10):
            table = torch.randn(8, 8)
            cb, cb2 = _make_callback(kind, table), _make_callback(kind, table * 2)
            x = torch.randn(3, requires_grad=True)
            out = f(x, cb)
            (grad,) = torch.autograd.grad(out.sum(), x)
            x_e = x.detach().requires_grad_()
            expected = _apply(x_e, cb)
            (grad_e,) = torch.autograd.grad(expected.sum(), x_e)
            torch.testing.assert_close(out, expected)
            torch.testing.assert_close(grad, grad_e)
            torch.testing.assert_close(g(x.detach(), [cb, cb2]), _apply_both(x.detach(), [cb, cb2]))
            refs += [weakref.ref(table), weakref.ref(cb)]
            del table, cb, cb2, out, expected, grad, grad_e, x, x_e
        return _alive(refs)

    jf, jg = thunder.jit(_apply), thunder.jit(_apply_both)
    with warnings.catch_warnings(), _refcounting_only():
        warnings.simplefilter("ignore")  # a program per new callback (each is another key)
        assert run(jf, jg) == run(_apply, _apply_both) == []
    # Their entries went with them: the cache never filled up to the recompile limit.
    assert thunder.compile_stats(jf).eager_fallbacks == 0
    assert thunder.compile_stats(jg).eager_fallbacks == 0


def test_callback_changed_after_compiling_recompiles() -> None:
    # The program reads what it checks of an argument callback through the argument: a
    # default, the code, a bound method's object replaced on the same object still recompile.
    table = torch.randn(8, 8)
    cb = lambda t, k=2.0, table=table: t * k + table[0, :3]  # noqa: E731
    scaler = _Scaler(table)
    jf = thunder.jit(_apply)
    for step in range(6):
        x = torch.randn(3)
        if step == 2:
            cb.__defaults__ = (3.0, table)
        if step == 3:
            cb.__defaults__ = (3.0, torch.randn(8, 8))
        if step == 4:
            cb.__code__ = (lambda t, k=1.0, table=table: t - k * table[1, :3]).__code__
        torch.testing.assert_close(jf(x, cb), _apply(x, cb))
        if step == 5:
            scaler.table = torch.randn(8, 8)
        torch.testing.assert_close(jf(x, scaler.apply), _apply(x, scaler.apply))
    other = _Scaler(torch.randn(8, 8))
    x = torch.randn(3)
    torch.testing.assert_close(jf(x, other.apply), _apply(x, other.apply))
    torch.testing.assert_close(jf(x, scaler.apply), _apply(x, scaler.apply))


def test_callback_closure_rebound_between_calls() -> None:
    def make() -> tuple[Callable[[torch.Tensor], torch.Tensor], Callable[[Any], None]]:
        table = torch.ones(3)

        def rebind(value: Any) -> None:
            nonlocal table
            table = value

        return (lambda t: t * 2 + table), rebind

    cb, rebind = make()
    jf = thunder.jit(_apply)
    for value in [None, torch.zeros(3), torch.randn(3), torch.randn(3), torch.randn(2, 3), 5.0]:
        if value is not None:
            rebind(value)
        x = torch.randn(3)
        torch.testing.assert_close(jf(x, cb), _apply(x, cb))


def test_methods_of_objects_made_per_call_take_one_program() -> None:
    jf = thunder.jit(_apply)
    for _ in range(6):
        scaler = _Scaler(torch.randn(8, 8))
        x = torch.randn(3)
        torch.testing.assert_close(jf(x, scaler.apply), _apply(x, scaler.apply))
    assert thunder.compile_stats(jf).compilations == 1


# -- classes made at run time --------------------------------------------------------------------


def _factory_module(table: torch.Tensor) -> torch.nn.Module:
    class Lookup(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.proj(x @ table[: x.shape[-1], :4])

    return Lookup()


def _per_instance_class(table: torch.Tensor) -> torch.nn.Module:
    base = torch.nn.Linear(8, 4)
    # As torch.nn.utils.parametrize does: a class made per instance.
    cls = type(
        "ScaledLinear",
        (torch.nn.Linear,),
        {"forward": lambda self, x: super(cls, self).forward(x) * table[0, 0]},
    )
    base.__class__ = cls
    return base


def _local_config_class(table: torch.Tensor) -> torch.nn.Module:
    class Config:  # a plain local class, read as an object argument's attributes
        def __init__(self) -> None:
            self.scale = 3.0
            self.table = table

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cfg = Config()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.cfg.scale + self.cfg.table[: x.shape[-1], 0]

    return Net()


@pytest.mark.parametrize("make", [_factory_module, _per_instance_class, _local_config_class])
def test_class_made_at_run_time_is_not_kept(
    make: Callable[[torch.Tensor], torch.nn.Module],
) -> None:
    def run(wrap: Callable[[torch.nn.Module], Any]) -> list[int]:
        refs = []
        for _ in range(4):
            table = torch.randn(16, 16)
            m = make(table)
            fm = wrap(m)
            for _ in range(2):
                x = torch.randn(2, 8, requires_grad=True)
                out, expected = fm(x), m(x)
                torch.testing.assert_close(out, expected)
                (g,) = torch.autograd.grad(out.sum(), x)
                (ge,) = torch.autograd.grad(expected.sum(), x)
                torch.testing.assert_close(g, ge)
            refs += [weakref.ref(table), weakref.ref(type(m))]
            del table, m, fm, x, out, expected, g, ge
        gc.collect()  # (a class is in reference cycles of its own: eager frees it so too)
        return _alive(refs)

    assert run(thunder.jit) == run(lambda m: m) == []


def test_interpreter_forgets_local_classes() -> None:
    def make(n: int) -> Any:
        class Point:  # plain (its slots native) and with Python special methods
            def __init__(self, x: int) -> None:
                self.x = x

        class Vec(Point):
            def __add__(self, other: Vec) -> Vec:
                return Vec(self.x + other.x + n)

            def __len__(self) -> int:
                return self.x % 5

        def work(k: int) -> int:
            total = Vec(0)
            for i in range(k):
                total = total + Vec(i)
                total.y = len(total)
            return total.x + Point(total.y).x

        return work, (Point, Vec)

    refs = []
    for n in range(3):
        work, classes = make(n)
        assert thunder_interp.interpret(work)(20) == work(20)
        assert thunder_interp.interpret(work)(7) == work(7)
        refs += [weakref.ref(c) for c in classes]
        del work, classes
    gc.collect()
    assert _alive(refs) == []


# -- generated sources in linecache --------------------------------------------------------------


def _thunder_sources() -> set[str]:
    return {k for k in linecache.cache if isinstance(k, str) and k.startswith("<thunder")}


def test_generated_sources_go_with_their_programs() -> None:
    torch.manual_seed(0)
    gc.collect()
    before = _thunder_sources()
    for _ in range(4):
        m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
        jm = thunder.jit(m)
        x = torch.randn(3, 8, requires_grad=True)
        out = jm(x)
        torch.testing.assert_close(out, m(x))
        out.sum().backward()
        assert _thunder_sources() - before  # its programs' lines are there while they live
        del m, jm, x, out
    gc.collect()
    assert _thunder_sources() - before == set()


def _checks(x: torch.Tensor) -> torch.Tensor:
    y = x.cos()
    if (x < 0).any():
        raise ValueError("negative input")
    return y


def test_raising_calls_do_not_grow_linecache() -> None:
    jc = thunder.jit(_checks)
    torch.testing.assert_close(jc(torch.ones(5)), _checks(torch.ones(5)))
    gc.collect()
    before = _thunder_sources()
    for _ in range(12):
        x = -torch.rand(5)
        with pytest.raises(ValueError, match="negative input"):
            _checks(x)
        with pytest.raises(ValueError, match="negative input"):
            jc(x)
        x = torch.rand(5)
        torch.testing.assert_close(jc(x), _checks(x))
    gc.collect()
    assert len(_thunder_sources() - before) <= 3  # (at most the programs it still keeps)


def test_traceback_through_a_live_program_shows_its_lines() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (x @ w).sin()

    jf = thunder.jit(f)
    x, w = torch.randn(2, 3), torch.randn(3, 4)
    torch.testing.assert_close(jf(x, w), f(x, w))
    computation = thunder.compile_stats(jf).last_program.computation
    with pytest.raises(RuntimeError) as info:
        computation(x, torch.randn(5, 4))  # (called directly: the entry's checks skipped)
    frames = [
        fr
        for fr in traceback.extract_tb(info.value.__traceback__)
        if fr.filename.startswith("<thunder trace")
    ]
    assert frames and all("matmul" in (fr.line or "") for fr in frames)


# -- inputs of raising calls and of the first call -----------------------------------------------


def _too_large(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    if x.shape[0] > 3:
        raise ValueError("batch too large")
    return y


def _alive_after_each_call(
    fn: Callable[..., Any], make: Callable[[int], tuple[Any, ...]]
) -> list[int]:
    """How many of a call's tensor arguments are alive right after the caller drops them."""
    alive = []
    with warnings.catch_warnings(), _refcounting_only():
        warnings.simplefilter("ignore")
        for k in range(8):
            args = make(k)
            refs = [weakref.ref(a) for a in args if isinstance(a, torch.Tensor)]
            try:
                out = fn(*args)
            except (ValueError, IndexError) as e:
                out = type(e)
            del args
            alive.append(len(_alive(refs)))
            del out
    return alive


def test_inputs_of_calls_that_raise_while_traced_die_at_once() -> None:
    def make(k: int) -> tuple[torch.Tensor]:
        return (torch.randn(5 if k % 3 else 2, 16),)

    eager = _alive_after_each_call(_too_large, make)
    assert _alive_after_each_call(thunder.jit(_too_large), make) == eager == [0] * 8


def test_inputs_of_the_first_call_die_at_once() -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x * y).relu().sum(0)

    def make(k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(4 + k % 2, 6), torch.randn(6)  # (two sizes: each compiles once)

    jf = thunder.jit(f)
    x, y = make(0)
    torch.testing.assert_close(jf(x, y), f(x, y))
    assert _alive_after_each_call(jf, make) == _alive_after_each_call(f, make) == [0] * 8


def test_inputs_of_a_program_that_raises_at_run_time_die_at_once() -> None:
    def pick(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return x[i] * 2  # an index past the end raises at run time (eager runs the call)

    def make(k: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn(4, 3), torch.tensor(1 if k % 2 == 0 else 10)

    jp = thunder.jit(pick)
    x, i = make(0)
    torch.testing.assert_close(jp(x, i), pick(x, i))
    assert _alive_after_each_call(jp, make) == _alive_after_each_call(pick, make) == [0] * 8
