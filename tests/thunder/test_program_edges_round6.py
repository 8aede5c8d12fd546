"""Edges of how a jitted program meets Python: ``@thunder.jit`` on a method binds ``self`` as a
function does; a ``BaseException`` that is no ``Exception`` raised while tracing keeps eager's
writes; an outside object whose class defines ``__setattr__`` or ``__delattr__`` in user code
sees each write once. Each test compares with eager over several calls, fresh inputs each,
and the outside state after every call."""

from __future__ import annotations

import copy
import inspect
import pickle
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder


def _quietly(fn: Callable[[], Any]) -> Any:
    """``fn()`` with thunder's warnings (a call that ran eagerly) ignored."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn()


def _outcome(fn: Callable[[], Any]) -> Any:
    """What a call gives: its result (as lists), or the type and message of what it raised."""
    try:
        out = _quietly(fn)
    except BaseException as e:  # KeyboardInterrupt and SystemExit too
        return (type(e).__name__, str(e))
    return out.tolist() if isinstance(out, torch.Tensor) else out


# -- @thunder.jit on a method ---------------------------------------------------------------


class Scaler(torch.nn.Module):
    def __init__(self, k: float) -> None:
        super().__init__()
        self.k = torch.nn.Parameter(torch.tensor(k, dtype=torch.float64))

    def eager_forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.k + 1

    @thunder.jit
    def jit_forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.k + 1


class Counter:
    def __init__(self, step: float) -> None:
        self.step, self.calls = step, 0

    def eager_add(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x + self.step * self.calls

    @thunder.jit
    def jit_add(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x + self.step * self.calls


def test_jitted_method_binds_self_per_instance_with_gradients() -> None:
    eager = [Scaler(2.0), Scaler(-3.0)]
    jitted = [Scaler(2.0), Scaler(-3.0)]
    for _ in range(4):
        for e, j in zip(eager, jitted, strict=True):
            x = torch.randn(3, dtype=torch.float64, requires_grad=True)
            xe = x.detach().clone().requires_grad_()
            out, expected = j.jit_forward(x), e.eager_forward(xe)
            torch.testing.assert_close(out, expected)
            out.sum().backward()
            expected.sum().backward()
            torch.testing.assert_close(x.grad, xe.grad)
            torch.testing.assert_close(j.k.grad, e.k.grad)
    # As bound methods share their function's code, the instances share the method's cache:
    # modules of one structure, one program.
    stats = thunder.compile_stats(jitted[0].jit_forward)
    assert stats is thunder.compile_stats(jitted[1].jit_forward)
    assert (stats.compilations, stats.cache_hits) == (1, 7)
    assert jitted[0].jit_forward == jitted[0].jit_forward != jitted[1].jit_forward
    assert isinstance(Scaler.jit_forward, thunder.ThunderFunction)  # the class's own


def test_jitted_method_through_the_class_like_eager() -> None:
    e, j = Scaler(1.5), Scaler(1.5)
    for _ in range(3):
        x = torch.randn(4, dtype=torch.float64)
        torch.testing.assert_close(Scaler.jit_forward(j, x), Scaler.eager_forward(e, x))


def test_jitted_method_writing_its_instance_like_eager() -> None:
    e, j = Counter(0.5), Counter(0.5)
    for _ in range(4):
        x = torch.randn(3)
        torch.testing.assert_close(j.jit_add(x), e.eager_add(x))
        assert j.calls == e.calls


def test_jitted_method_in_a_jitted_function_like_eager() -> None:
    def outer(x: torch.Tensor, c: Counter) -> torch.Tensor:
        return c.jit_add(x) * 2 + c.jit_add(x)

    def outer_eager(x: torch.Tensor, c: Counter) -> torch.Tensor:
        return c.eager_add(x) * 2 + c.eager_add(x)

    jo, e, j = thunder.jit(outer), Counter(0.25), Counter(0.25)
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(jo(x, j), outer_eager(x, e))
        assert (j.calls, vars(j)) == (e.calls, vars(e))


def test_bound_jitted_method_reads_as_a_bound_method() -> None:
    s = Scaler(2.0)
    assert inspect.signature(s.jit_forward) == inspect.signature(s.eager_forward)
    assert s.jit_forward.__name__ == "jit_forward" and s.jit_forward.__self__ is s
    x = torch.randn(3, dtype=torch.float64)
    for bound in (pickle.loads(pickle.dumps(s.jit_forward)), copy.deepcopy(s.jit_forward)):
        assert bound.__self__ is not s
        bound.__self__.k.data.fill_(5.0)
        torch.testing.assert_close(bound(x), x * 5 + 1)
    torch.testing.assert_close(s.jit_forward(x), x * 2 + 1)


def test_copies_of_the_instance_bind_to_the_copy() -> None:
    original = Counter(1.0)
    x = torch.randn(2)
    original.jit_add(x)
    shallow, deep = copy.copy(original), copy.deepcopy(original)
    loaded = pickle.loads(pickle.dumps(original))
    for other in (shallow, deep, loaded):
        other.step = 10.0
        torch.testing.assert_close(other.jit_add(x), x + 10.0 * 2)
        assert other.calls == 2
    assert original.calls == 1  # no call of a copy ran on the original


# -- a BaseException raised while tracing ------------------------------------------------------


class Stop(BaseException):
    pass


@pytest.mark.parametrize("kind", [KeyboardInterrupt, SystemExit, Stop])
def test_base_exception_keeps_the_writes_made_before_it(kind: type[BaseException]) -> None:
    def run(jit: bool) -> list[Any]:
        calls = {"n": 0}
        seen: list[float] = []

        def callback(x: torch.Tensor) -> torch.Tensor:
            calls["n"] += 1
            seen.append(float(calls["n"]))
            if calls["n"] == 2:
                raise kind("stop")
            return x * calls["n"]

        def f(x: torch.Tensor, cb: Any) -> torch.Tensor:
            return cb(x * 2) + 1

        fn = thunder.jit(f) if jit else f
        history = []
        for i in range(5):
            x = torch.full((3,), float(i))
            history.append((_outcome(lambda: fn(x, callback)), calls["n"], list(seen)))
        return history

    assert run(True) == run(False)


def test_interrupt_while_tracing_still_reaches_the_caller() -> None:
    # Raised only while thunder traces (as an interrupt may come): eager would not raise, so the
    # call runs eagerly once and the interrupt is raised after it, never lost.
    log: list[int] = []

    def f(x: torch.Tensor) -> torch.Tensor:
        log.append(1)
        if torch.compiler.is_compiling():
            raise KeyboardInterrupt
        return x + 1

    jf = thunder.jit(f)
    with pytest.raises(KeyboardInterrupt):
        _quietly(lambda: jf(torch.ones(2)))
    assert log == [1]  # the eager run's write, once (tracing's was undone)


# -- a class's own __setattr__ / __delattr__ --------------------------------------------------


def _compare_state_over_calls(
    make: Callable[[], Any], f: Callable[..., Any], calls: int = 4
) -> None:
    """``f(x, state)`` jitted against eager on two fresh states; ``make()`` returns
    ``(state, snapshot)`` where ``snapshot()`` reads what the call may have changed."""
    (e_state, e_snap), (j_state, j_snap) = make(), make()
    jf = thunder.jit(f)
    for _ in range(calls):
        x = torch.randn(3)
        assert _outcome(lambda: jf(x, j_state)) == _outcome(lambda: f(x, e_state))
        assert j_snap() == e_snap()


def test_logging_setattr_sees_each_write_once() -> None:
    def make() -> Any:
        log: list[Any] = []

        class Logged:
            def __setattr__(self, k: str, v: Any) -> None:
                log.append((k, v))
                object.__setattr__(self, k, v)

        o = Logged()
        object.__setattr__(o, "n", 0)
        return o, lambda: (list(log), o.n)

    def f(x: torch.Tensor, o: Any) -> torch.Tensor:
        o.n = o.n + 1
        return x * o.n

    _compare_state_over_calls(make, f)


def test_validating_setattr_raising_keeps_earlier_writes() -> None:
    def make() -> Any:
        class Positive:
            def __setattr__(self, k: str, v: Any) -> None:
                if v < 0:
                    raise ValueError(f"{k} must not be negative")
                super().__setattr__(k, v)

        o = Positive()
        o.a, o.b = 3, 3
        return o, lambda: (o.a, o.b)

    def f(x: torch.Tensor, o: Any) -> torch.Tensor:
        o.a = o.a - 1
        o.b = o.a - 1  # negative from the third call on
        return x + o.a

    _compare_state_over_calls(make, f, calls=5)


def _with_logged_delattr(observe: Any) -> Any:
    """A factory of an object whose class logs each deletion, and of ``observe(o, log)``."""

    def make() -> Any:
        log: list[Any] = []

        class Logged:
            def __delattr__(self, k: str) -> None:
                log.append(("del", k))
                object.__delattr__(self, k)

        o = Logged()
        return o, lambda: observe(o, log)

    return make


def test_logging_delattr_sees_each_deletion_once() -> None:
    make = _with_logged_delattr(lambda o, log: (list(log), sorted(vars(o))))

    def f(x: torch.Tensor, o: Any) -> torch.Tensor:
        o.tmp = 1
        del o.tmp
        return x + 1

    _compare_state_over_calls(make, f)


def test_store_on_an_object_with_logging_delattr_is_not_logged() -> None:
    # The store itself is plain; undoing it after tracing must not run the class's __delattr__.
    make = _with_logged_delattr(lambda o, log: (list(log), getattr(o, "total", None)))

    def f(x: torch.Tensor, o: Any) -> torch.Tensor:
        o.total = getattr(o, "total", 0) + 1
        return x * o.total

    _compare_state_over_calls(make, f)


def test_module_with_its_own_setattr_like_eager() -> None:
    def make() -> Any:
        log: list[str] = []

        class Tracked(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.w = torch.nn.Parameter(torch.ones(3))
                self.steps = 0

            def __setattr__(self, k: str, v: Any) -> None:
                log.append(k)
                super().__setattr__(k, v)

        m = Tracked()
        log.clear()
        return m, lambda: (list(log), m.steps)

    def f(x: torch.Tensor, m: Any) -> torch.Tensor:
        m.steps = m.steps + 1
        return x * m.w * m.steps

    _compare_state_over_calls(make, f)
