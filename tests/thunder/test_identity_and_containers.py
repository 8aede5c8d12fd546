"""Results that depend on which outside object a value is (``==`` of objects compared by
identity, ``in`` a set, ``d.get(obj)``, ``id``, ``hash``), and objects reached through
containers and references the binder must find again (set and deque members, dict keys,
``weakref.ref()``, a descriptor's own state): compared with eager over several calls that
change the state between them."""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import warnings
import weakref
from typing import Any

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]


class Mode(enum.Enum):
    A = 1
    B = 2
    C = 3


class Holder:
    pass


def _same(e: Any, j: Any) -> bool:
    if isinstance(e, tuple):
        return all(_same(a, b) for a, b in zip(e, j, strict=True))
    return bool(torch.equal(e, j))


def _compare(fn: Any, holder: Holder, values: list[Any], cache: str) -> None:
    jfn = thunder.jit(fn, cache=cache)
    for v in values:
        holder.v = v
        x = torch.randn(3)
        e, j = fn(x), jfn(x)
        assert _same(e, j), (v, e, j)


@pytest.mark.parametrize("cache", CACHES)
def test_enum_equality_on_a_module_and_its_config(cache: str) -> None:
    class Cfg:
        def __init__(self) -> None:
            self.mode = Mode.A

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cfg = Cfg()
            self.mode = Mode.A

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y = x * 10 if self.cfg.mode == Mode.B else x
            z = x * 100 if self.mode != Mode.A else x - 1
            return y, z

    m = M()
    jm = thunder.jit(m, cache=cache)
    for mode in [Mode.A, Mode.B, Mode.A, Mode.C, Mode.B]:
        m.cfg.mode = m.mode = mode
        x = torch.randn(2)
        assert _same(m(x), jm(x)), mode


def _kinds() -> dict[str, tuple[Any, Any]]:
    class Plain:
        pass

    class WithRepr:
        def __repr__(self) -> str:
            return "R"

    class WithHash:
        def __hash__(self) -> int:
            return 1

    class WithGetattr:
        def __getattr__(self, k: str) -> Any:
            raise AttributeError(k)

    @dataclasses.dataclass(eq=False)
    class DC:
        a: int = 0

    return {
        "plain": (Plain(), Plain()),
        "repr": (WithRepr(), WithRepr()),
        "hash": (WithHash(), WithHash()),
        "getattr": (WithGetattr(), WithGetattr()),
        "dataclass": (DC(), DC()),
        "enum": (Mode.A, Mode.B),
        "sentinel": (object(), object()),
    }


@pytest.mark.parametrize("kind", list(_kinds()))
@pytest.mark.parametrize("cache", CACHES)
def test_equality_of_objects_compared_by_identity(kind: str, cache: str) -> None:
    a, b = _kinds()[kind]
    h = Holder()
    h.ref = b

    def eq(x: torch.Tensor) -> torch.Tensor:
        return x * 10 if h.v == h.ref else x

    def ne(x: torch.Tensor) -> torch.Tensor:
        return x * 10 if h.v != b else x + 1

    _compare(eq, h, [a, b, a, b], cache)
    _compare(ne, h, [a, b, a, b], cache)


@pytest.mark.parametrize("kind", ["plain", "hash", "enum", "sentinel"])
@pytest.mark.parametrize("cache", CACHES)
def test_membership_and_lookups_by_identity(kind: str, cache: str) -> None:
    a, b = _kinds()[kind]
    h = Holder()
    in_set, in_tuple, registry, ids = {b}, (b,), {b: 10.0}, {id(b): 10.0}
    programs = [
        lambda x: x * 10 if h.v in in_set else x,
        lambda x: x * 10 if h.v in {b} else x,
        lambda x: x * 10 if h.v in in_tuple else x,
        lambda x: x * 10 if h.v in [b] else x,
        lambda x: x * registry.get(h.v, 1.0),
        lambda x: x * (1 + [b, b].count(h.v)),
        lambda x: x * ids.get(id(h.v), 1.0),
        lambda x: x * 10 if id(h.v) == id(b) else x,
        lambda x: x * 10 if hash(h.v) == hash(b) and h.v is b else x,
    ]
    for fn in programs:
        _compare(fn, h, [a, b, a, b], cache)


@pytest.mark.parametrize("cache", CACHES)
def test_a_skip_set_and_a_registry_keyed_by_submodule(cache: str) -> None:
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = torch.nn.ModuleList(torch.nn.Linear(3, 3) for _ in range(3))
            self.skip: set[torch.nn.Module] = set()
            self.scale_of: dict[torch.nn.Module, float] = {}

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for b in self.blocks:
                if b in self.skip:
                    continue
                x = b(x) * self.scale_of.get(b, 1.0)
            return x

    torch.manual_seed(0)
    me = M()
    torch.manual_seed(0)
    mj = M()
    jm = thunder.jit(mj, cache=cache)
    for i in range(5):
        for m in (me, mj):
            if i == 1:
                m.skip.add(m.blocks[1])
            if i == 2:
                m.scale_of[m.blocks[0]] = 5.0
            if i == 3:
                m.skip.clear()
            if i == 4:
                m.scale_of.clear()
        x = torch.randn(2, 3)
        e, j = me(x), jm(x)
        torch.testing.assert_close(e, j)
        e.sum().backward()
        j.sum().backward()
        for pe, pj in zip(me.parameters(), mj.parameters(), strict=True):
            torch.testing.assert_close(pe.grad, pj.grad)


class Obj:
    def __init__(self) -> None:
        self.scale = 1.0
        self.hits = 0


HOLDERS = {
    "set": (lambda o: {o}, lambda h: next(iter(h))),
    "frozenset": (lambda o: frozenset([o]), lambda h: next(iter(h))),
    "set-list": (lambda o: {o}, lambda h: list(h)[0]),
    "set-min": (lambda o: {o}, lambda h: min(h, key=id)),
    "deque-iter": (lambda o: collections.deque([o]), lambda h: next(iter(h))),
    "dict-keys": (lambda o: {o: 1}, lambda h: next(iter(h))),
    "weakref": (lambda o: weakref.ref(o), lambda h: h()),
}


@pytest.mark.parametrize("kind", list(HOLDERS))
@pytest.mark.parametrize("cache", CACHES)
def test_objects_reached_through_a_container_are_read_and_written(kind: str, cache: str) -> None:
    make_holder, get = HOLDERS[kind]

    def make() -> tuple[Any, Obj]:
        o = Obj()
        h = make_holder(o)

        def f(x: torch.Tensor) -> torch.Tensor:
            r = get(h)
            r.hits += 1
            return x * r.scale

        f.keep = h  # type: ignore[attr-defined]  # (a weakref's object stays alive)
        return f, o

    fe, oe = make()
    fj0, oj = make()
    fj = thunder.jit(fj0, cache=cache)
    for i in range(4):
        oe.scale = oj.scale = float(i + 1)
        x = torch.randn(2)
        torch.testing.assert_close(fe(x), fj(x))
        assert oe.hits == oj.hits == i + 1


@pytest.mark.parametrize("kind", ["set", "weakref"])
def test_a_write_before_a_raise_happens_once(kind: str) -> None:
    make_holder, get = HOLDERS[kind]

    def make() -> tuple[Any, Obj]:
        o = Obj()
        h = make_holder(o)

        def f(x: torch.Tensor) -> torch.Tensor:
            r = get(h)
            r.hits += 1
            if x.shape[0] > 2:
                raise ValueError("batch too large")
            return x * 2

        f.keep = h  # type: ignore[attr-defined]
        return f, o

    fe, oe = make()
    fj0, oj = make()
    fj = thunder.jit(fj0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in [3, 2, 3, 2]:
            for f in (fe, fj):
                try:
                    f(torch.randn(n))
                except ValueError:
                    pass
            assert oe.hits == oj.hits


def test_a_descriptor_counting_its_reads() -> None:
    class Counted:
        def __init__(self, value: float) -> None:
            self.value = value
            self.reads = 0

        def __get__(self, obj: Any, typ: Any = None) -> float:
            self.reads += 1
            return self.value * self.reads

    def module_class() -> type[torch.nn.Module]:
        class M(torch.nn.Module):
            scale = Counted(1.0)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x * self.scale

        return M

    me, mj = module_class()(), module_class()()
    jm = thunder.jit(mj)
    for _ in range(4):
        x = torch.randn(2)
        torch.testing.assert_close(me(x), jm(x))
        assert type(me).__dict__["scale"].reads == type(mj).__dict__["scale"].reads


def test_a_cached_property_whose_getter_writes_an_attribute() -> None:
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.base = 2.0
            self.n_computed = 0

        @functools.cached_property
        def scale(self) -> float:
            self.n_computed += 1
            return self.base * 3

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.scale

    me, mj = M(), M()
    jm = thunder.jit(mj)
    for i in range(4):
        if i == 2:
            me.base = mj.base = 5.0  # (the cached value stays, as in eager)
        x = torch.randn(2)
        torch.testing.assert_close(me(x), jm(x))
        assert me.n_computed == mj.n_computed == 1
        assert mj.__dict__["scale"] == me.__dict__["scale"]


def test_an_attribute_read_through_a_weakref_proxy() -> None:
    class Cfg:
        scale = 2.0

    c = Cfg()
    p = weakref.proxy(c)

    def f(x: torch.Tensor) -> torch.Tensor:
        return x * p.scale

    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(3):
            c.scale = float(i + 1)
            x = torch.randn(2)
            torch.testing.assert_close(f(x), jf(x))
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_objects_not_compared_by_identity_are_not_pinned() -> None:
    """A config object the program only reads attributes of: another one of the same class,
    holding the same values, reuses the program (its identity is not guarded)."""

    class Cfg:
        def __init__(self) -> None:
            self.mode = Mode.B
            self.scale = 2.0

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cfg = Cfg()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.cfg.scale if self.cfg.mode == Mode.B else x

    m = M()
    jm = thunder.jit(m)
    for _ in range(3):
        m.cfg = Cfg()
        x = torch.randn(2)
        torch.testing.assert_close(m(x), jm(x))
    assert thunder.compile_stats(jm).compilations == 1
