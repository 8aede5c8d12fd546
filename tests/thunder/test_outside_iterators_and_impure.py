"""Iterators that live outside the program, C calls that read the clock or entropy, and torch's
generator seeds: eager takes a new item or value on every call, so a compiled program must too
(the call runs split or eagerly, with a warning), never a constant taken while tracing. Tracing
never takes an item from an outside iterator: a call run after a refused trace takes exactly
what eager takes."""

from __future__ import annotations

import datetime
import itertools
import random
import re
import time
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from runs_by_torch import call_eagerly, call_split

import thunder


def _eagerly(jf: Any, *args: Any, match: str) -> Any:
    """``jf(*args)`` asserted to run eagerly (the warning is shown on the first such call)."""
    before = thunder.compile_stats(jf).eager_fallbacks
    if before == 0:
        return call_eagerly(jf, *args, match=match)
    out = jf(*args)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == before + 1 and stats.split_calls == 0, stats
    assert re.search(match, stats.last_eager_reason or ""), stats.last_eager_reason
    return out


_ITERATORS: dict[str, Callable[[], Iterator[Any]]] = {
    "list_iterator": lambda: iter([float(i) for i in range(1, 40)]),
    "generator": lambda: (float(i) for i in range(1, 40)),
    "cycle": lambda: itertools.cycle([1.0, 2.0, 3.0]),
    "count": lambda: itertools.count(1.0),
    "map": lambda: map(float, range(1, 40)),
}


def _for_loop(it: Iterator[Any]) -> Callable[[torch.Tensor], torch.Tensor]:
    def f(x):
        for scale in it:
            return x * scale
        return x

    return f


def _islice_next(it: Iterator[Any]) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: x * next(itertools.islice(it, 1))


def _star_islice(it: Iterator[Any]) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: x * sum([*itertools.islice(it, 2)])


def _min_islice(it: Iterator[Any]) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: x * min(itertools.islice(it, 2))


def _contains(it: Iterator[Any]) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: x * (3.0 in it)


def _unpack(it: Iterator[Any]) -> Callable[[torch.Tensor], torch.Tensor]:
    def f(x):
        a, b = itertools.islice(it, 2)
        return x * a + b

    return f


def _dunder_next(it: Iterator[Any]) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: x * it.__next__()


def _zip_enumerate(it: Iterator[Any]) -> Callable[[torch.Tensor], torch.Tensor]:
    def f(x):
        for i, (a, b) in enumerate(zip(it, [1.0, 2.0])):
            return x * a + b + i
        return x

    return f


_USES = [_for_loop, _islice_next, _star_islice, _min_islice, _contains, _unpack, _dunder_next]
_USES.append(_zip_enumerate)


def _run_both(use: Any, make: Callable[[], Iterator[Any]], calls: int = 4) -> None:
    # Two iterators in the same state: eager's and thunder's take the same items on each call.
    fe, fj = use(make()), thunder.jit(use(make()))
    for _ in range(calls):
        x = torch.randn(3, dtype=torch.float64)
        torch.testing.assert_close(
            call_split(fj, x, match="iterator .* made outside it"), fe(x), rtol=0, atol=0
        )


@pytest.mark.parametrize("use", _USES, ids=lambda u: u.__name__)
@pytest.mark.parametrize("kind", list(_ITERATORS))
def test_outside_iterator_in_a_closure_advances_on_every_call(use: Any, kind: str) -> None:
    if use is _contains and kind in ("cycle", "count"):
        pytest.skip("`in` on an endless iterator without the item never returns")
    _run_both(use, _ITERATORS[kind])


def test_outside_iterator_of_tensors_is_never_consumed_by_tracing() -> None:
    # Traced, the item would be a real tensor and the call rerun eagerly with the next item.
    data = [torch.full((2,), float(i)) for i in range(10)]

    def make(it):
        def step(x):
            for batch in it:
                return x + batch
            return x

        return step

    it_j = iter(data)
    fe, fj = make(iter(data)), thunder.jit(make(it_j))
    for _ in range(3):
        x = torch.randn(2)
        torch.testing.assert_close(call_split(fj, x, match="list_iterator"), fe(x))
    assert next(it_j) is data[3]  # one item a call, none taken by tracing


def test_outside_iterator_on_a_module_attribute_and_a_global() -> None:
    holder = types.SimpleNamespace(schedule=(float(i) for i in range(1, 20)))
    expected = types.SimpleNamespace(schedule=(float(i) for i in range(1, 20)))

    def f(x, h):
        return x * next(itertools.islice(h.schedule, 1))

    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(call_split(jf, x, holder, match="schedule"), f(x, expected))

    global _SCALES
    _SCALES = iter([2.0, 3.0, 4.0, 5.0])
    jg = thunder.jit(lambda x: x * next(itertools.islice(_SCALES, 1)))
    for want in (2.0, 3.0, 4.0):
        x = torch.randn(3)
        torch.testing.assert_close(call_split(jg, x, match="_SCALES"), x * want)


_SCALES: Iterator[float] = iter(())


def test_outside_file_iterated_takes_a_line_on_every_call(tmp_path: Any) -> None:
    path = tmp_path / "scales.txt"
    path.write_text("".join(f"{i}.5\n" for i in range(8)))
    with open(path) as fe, open(path) as fj_file:

        def make(f):
            def step(x):
                for line in f:
                    return x * float(line)
                return x

            return step

        ge, gj = make(fe), thunder.jit(make(fj_file))
        for _ in range(3):
            x = torch.randn(3)
            torch.testing.assert_close(call_split(gj, x, match="TextIOWrapper"), ge(x))


def test_outside_iterator_with_gradients() -> None:
    weights = [torch.randn(3, dtype=torch.float64) for _ in range(6)]

    def make(it):
        def f(x):
            for w in it:
                return (x * w).sin().sum()
            return x.sum()

        return f

    fe, fj = make(iter(weights)), thunder.jit(make(iter(weights)))
    for _ in range(3):
        x = torch.randn(3, dtype=torch.float64, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        out = call_split(fj, x, match="iterator")
        ref = fe(xe)
        torch.testing.assert_close(out, ref)
        out.backward()
        ref.backward()
        torch.testing.assert_close(x.grad, xe.grad)


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_iterators_made_inside_still_compile(cache: str | None) -> None:
    # Over lists, ranges, tensors, dicts, zip/enumerate of outside lists, a Python iterator
    # class: one program, no split, no eager run.
    scales = [1.0, 2.0, 3.0]
    table = {"a": 2.0, "b": 3.0}

    class Countdown:
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return self

        def __next__(self):
            if self.n == 0:
                raise StopIteration
            self.n -= 1
            return self.n

    def f(x):
        for s in scales:
            x = x * s
        for i, (s, t) in enumerate(zip(scales, range(3))):
            x = x + s * t + i
        for row in x.unsqueeze(0):
            x = x + row
        for k, v in table.items():
            x = x * v if k == "a" else x + v
        it = iter(scales)
        x = x + next(it) + sum(itertools.islice(it, 2))
        for n in Countdown(2):
            x = x - n
        g = (s * 2 for s in scales)
        return x + min(g)

    jf = thunder.jit(f) if cache is None else thunder.jit(f, cache=cache)
    for _ in range(3):
        x = torch.randn(4)
        torch.testing.assert_close(jf(x), f(x))
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 0 and stats.eager_fallbacks == 0
    assert stats.compilations == 1


def test_outside_python_iterator_class_keeps_eager_behaviour() -> None:
    # Its __next__ is interpreted: the attribute write is replayed, the read guarded.
    class Counter:
        def __init__(self):
            self.i = 0

        def __iter__(self):
            return self

        def __next__(self):
            self.i += 1
            return float(self.i)

    ce, cj = Counter(), Counter()
    fe = lambda x: x * next(ce)  # noqa: E731
    jf = thunder.jit(lambda x: x * next(cj))
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(jf(x), fe(x))
    assert cj.i == ce.i == 3


_CLOCK_AND_ENTROPY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "datetime.now": lambda x: x * datetime.datetime.now().microsecond,
    "datetime.utcnow": lambda x: x * datetime.datetime.now(datetime.timezone.utc).microsecond,
    "date.today": lambda x: x * datetime.date.today().toordinal(),
    "Random().random": lambda x: x * random.Random().random(),
}


@pytest.mark.parametrize("kind", list(_CLOCK_AND_ENTROPY))
def test_clock_and_entropy_calls_are_made_on_every_call(kind: str) -> None:
    fn = _CLOCK_AND_ENTROPY[kind]
    jf = thunder.jit(fn)
    values = []
    with pytest.warns(UserWarning, match="thunder"):  # (shown once)
        for _ in range(3):
            values.append(jf(torch.ones(1, dtype=torch.float64)).item())
            time.sleep(0.002)
    stats = thunder.compile_stats(jf)
    assert stats.split_calls + stats.eager_fallbacks == 3, stats
    if kind != "date.today":
        assert len(set(values)) == 3, values  # a new value on every call


def test_numpy_datetime_now_reads_the_clock_on_every_call() -> None:
    np = pytest.importorskip("numpy")
    jf = thunder.jit(lambda x: x * float(np.datetime64("now", "us").astype("int64") % 999983))
    values = []
    for _ in range(2):
        values.append(_eagerly(jf, torch.ones(1), match="reads the clock").item())
        time.sleep(1.05)  # "now" has a resolution of seconds
    assert values[0] != values[1]


def test_outside_itertools_object_method_is_not_pure() -> None:
    counter = itertools.count()
    jf = thunder.jit(lambda x: x * counter.__next__())
    got = [call_split(jf, torch.ones(1), match="count").item() for _ in range(3)]
    assert got == [0.0, 1.0, 2.0]


def test_common_pure_calls_still_compile() -> None:
    def f(x):
        n = int("3") + int(2.5) + len(tuple([1, 2])) + len(dict.fromkeys("ab"))
        d = datetime.timedelta(seconds=2).total_seconds()
        t = datetime.datetime(2020, 1, 2).day + datetime.datetime.fromisoformat("2020-01-03").day
        s = float("1.5") + int.from_bytes(b"\x01", "little") + float.fromhex("0x1p0")
        size = torch.Size([2, 3]).numel()
        r = random.Random(0).random()  # seeded: the same every call
        return x * (n + d + t + s + size + r) + torch.zeros((), dtype=torch.float32)

    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(jf(x), f(x))
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 0 and stats.eager_fallbacks == 0 and stats.compilations == 1


@pytest.mark.parametrize(
    "kind", ["torch.seed", "torch.random.seed", "default_generator.seed", "torch.initial_seed"]
)
def test_torch_seed_and_initial_seed_are_eager_on_every_call(kind: str) -> None:
    def f(x):
        if kind == "torch.seed":
            s = torch.seed()
        elif kind == "torch.random.seed":
            s = torch.random.seed()
        elif kind == "default_generator.seed":
            s = torch.default_generator.seed()
        else:
            s = torch.initial_seed()
        return x + torch.rand(3), s

    jf = thunder.jit(f)
    seeds = []
    for i in range(3):
        torch.manual_seed(100 + i)  # initial_seed() changes between calls outside the program
        out, s = _eagerly(jf, torch.zeros(3), match="torch.Generator")
        seeds.append(s)
        assert torch.initial_seed() == (s if kind != "torch.initial_seed" else 100 + i)
        if kind == "torch.initial_seed":
            assert s == 100 + i
    if kind != "torch.initial_seed":
        assert len(set(seeds)) == 3, seeds


def test_torch_seed_and_draws_match_eager() -> None:
    # The draws after a reseed inside follow the new seed, as in eager.
    def f(x):
        torch.manual_seed(7)
        s = torch.initial_seed()
        return x + torch.rand(3), s

    jf = thunder.jit(f)
    for _ in range(2):
        x = torch.randn(3)
        out, s = _eagerly(jf, x, match="initial_seed")
        ref, rs = f(x)
        torch.testing.assert_close(out, ref)
        assert s == rs == 7
