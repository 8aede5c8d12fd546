"""Lists, tuples and dicts reached through an object argument (a user-class instance, a
dataclass, nested objects, lists of child objects): the cache key holds only the object's type,
so their length, keys, type and the items the program takes natively are guarded by the
prologue. Compared with eager over calls where the containers grow, shrink and change keys,
gradients included, for both caches."""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]
SIZES = (2, 3, 4, 3, 1, 2, 5)


class Obj:
    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


class Other:
    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


class MyList(list):
    pass


class MyDict(dict):
    pass


Pair = collections.namedtuple("Pair", "a b")
OtherPair = collections.namedtuple("OtherPair", "a b")


def _t() -> torch.Tensor:
    return torch.randn(3)


def _ts(n: int) -> list[torch.Tensor]:
    return [_t() for _ in range(n)]


# name: (function of (x, o), the object argument for a size n)
CASES: dict[str, tuple[Callable[..., Any], Callable[[int], Any]]] = {
    "list": (lambda x, o: x * len(o.items) + sum(o.items), lambda n: Obj(items=_ts(n))),
    "list_items_by_index": (
        lambda x, o: x * len(o.items) + o.items[0],
        lambda n: Obj(items=_ts(n)),
    ),
    "dict_values": (
        lambda x, o: x + sum(o.d.values()) + len("".join(o.d)),
        lambda n: Obj(d={str(k): _t() for k in range(n)}),
    ),
    "dict_same_length_other_keys": (
        lambda x, o: x * len("".join(o.d)) + sum(o.d.values()),
        lambda n: Obj(d={"k" * n: _t(), "z": _t()}),
    ),
    "dict_order": (
        lambda x, o: x * list(o.d)[0] + o.d[0],
        lambda n: Obj(d={n % 2: _t(), 1 - n % 2: _t()}),
    ),
    "tuple": (
        lambda x, o: x * len(o.t) + sum(o.t),
        lambda n: Obj(t=tuple(_ts(n))),
    ),
    "namedtuple_class": (
        lambda x, o: x * (2 if isinstance(o.t, Pair) else 3) + o.t.a,
        lambda n: Obj(t=(Pair if n % 2 else OtherPair)(_t(), _t())),
    ),
    "list_becomes_tuple": (
        lambda x, o: x * (2 if isinstance(o.items, list) else 3) + o.items[0],
        lambda n: Obj(items=_ts(2) if n % 2 else tuple(_ts(2))),
    ),
    "nested_object": (
        lambda x, o: x * len(o.child.items) + sum(o.child.items),
        lambda n: Obj(child=Obj(items=_ts(n))),
    ),
    "nested_object_class": (
        lambda x, o: x * (2 if isinstance(o.child, Obj) else 3) + o.child.t,
        lambda n: Obj(child=(Obj if n % 2 else Other)(t=_t())),
    ),
    "list_of_children": (
        lambda x, o: x * len(o.children) + sum(c.t for c in o.children),
        lambda n: Obj(children=[Obj(t=_t()) for _ in range(n)]),
    ),
    "lists_in_children": (
        lambda x, o: x + sum(len(c.ts) * c.ts[0] for c in o.children),
        lambda n: Obj(children=[Obj(ts=_ts(n)), Obj(ts=_ts(3))]),
    ),
    "list_of_lists": (
        lambda x, o: x + sum(len(inner) * inner[0] for inner in o.lists),
        lambda n: Obj(lists=[_ts(n), _ts(1)]),
    ),
    "list_in_dict_value": (
        lambda x, o: x * len(o.d["a"]) + sum(o.d["a"]),
        lambda n: Obj(d={"a": _ts(n)}),
    ),
    "getattr_chain": (
        lambda x, o: x * len(getattr(getattr(o, "c"), "items")) + sum(o.c.items),
        lambda n: Obj(c=Obj(items=_ts(n))),
    ),
    "instance_dict_item": (
        lambda x, o: x * len(o.__dict__["items"]) + sum(o.__dict__["items"]),
        lambda n: Obj(items=_ts(n)),
    ),
    "vars_item": (
        lambda x, o: x * len(vars(o)["items"]) + sum(vars(o)["items"]),
        lambda n: Obj(items=_ts(n)),
    ),
    "vars_names": (
        lambda x, o: x * len(vars(o)) + o.t,
        lambda n: Obj(t=_t(), **{f"a{i}": i for i in range(n)}),
    ),
    "vars_values": (
        lambda x, o: x * sum(v for v in vars(o).values() if isinstance(v, int)) + o.t,
        lambda n: Obj(t=_t(), a=n, b=1),
    ),
    "list_subclass": (
        lambda x, o: x * len(o.items) + sum(o.items),
        lambda n: Obj(items=MyList(_ts(n))),
    ),
    "dict_subclass": (
        lambda x, o: x * len(o.d) + sum(o.d.values()),
        lambda n: Obj(d=MyDict({str(k): _t() for k in range(n)})),
    ),
    "numbers_beside_tensors": (
        lambda x, o: x * o.items[0] * sum(o.items[1:]),
        lambda n: Obj(items=[_t(), n, 1]),
    ),
    "numbers_iterated": (
        lambda x, o: [x := x * v for v in o.items][-1],
        lambda n: Obj(items=[_t(), n]),
    ),
    "tuple_unpacked": (
        lambda x, o: x * o.t[1] + o.t[0],
        lambda n: Obj(t=(_t(), n)),
    ),
    "strings_beside_tensors": (
        lambda x, o: x * len("".join(s for s in o.names if isinstance(s, str))) + o.names[0],
        lambda n: Obj(names=[_t(), *["ab"] * n]),
    ),
    "numbers_only": (
        lambda x, o: x * len(o.ns) + sum(o.ns) + o.t,
        lambda n: Obj(ns=list(range(n)), t=_t()),
    ),
}


def _compare(fn: Callable[..., Any], make: Callable[[int], Any], cache: str, **kw: Any) -> None:
    jfn = thunder.jit(fn, cache=cache)
    for n in SIZES:
        o = make(n)
        x = torch.randn(3)
        expected = fn(x, **{kw.get("name", "o"): o}) if kw else fn(x, o)
        got = jfn(x, **{kw.get("name", "o"): o}) if kw else jfn(x, o)
        torch.testing.assert_close(got, expected, msg=f"size {n}")


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_containers_in_object_argument_like_eager(name: str, cache: str) -> None:
    fn, make = CASES[name]
    _compare(fn, make, cache)


@pytest.mark.parametrize("cache", CACHES)
def test_object_keyword_argument(cache: str) -> None:
    def fn(x: torch.Tensor, *, o: Any) -> torch.Tensor:
        return x * len(o.items) + sum(o.items)

    _compare(fn, lambda n: Obj(items=_ts(n)), cache, name="o")


@pytest.mark.parametrize("cache", CACHES)
def test_object_in_list_argument(cache: str) -> None:
    def fn(x: torch.Tensor, objs: list[Any]) -> torch.Tensor:
        return x * len(objs[0].items) + sum(objs[0].items)

    _compare(fn, lambda n: [Obj(items=_ts(n))], cache)


@dataclasses.dataclass
class History:
    t: torch.Tensor
    xs: list = dataclasses.field(default_factory=list)


@pytest.mark.parametrize("cache", CACHES)
def test_dataclass_list_the_program_appends_to(cache: str) -> None:
    def fn(x: torch.Tensor, h: History) -> torch.Tensor:
        h.xs.append(x * 2)
        return h.t + len(h.xs)

    jfn = thunder.jit(fn, cache=cache)
    he, hj = History(torch.zeros(3)), History(torch.zeros(3))
    for _ in range(5):
        x = torch.randn(3)
        torch.testing.assert_close(jfn(x, hj), fn(x, he))
        assert len(hj.xs) == len(he.xs)
        for a, b in zip(hj.xs, he.xs, strict=True):
            torch.testing.assert_close(a, b)


@dataclasses.dataclass
class Terms:
    base: torch.Tensor
    extra: list
    weights: dict


@pytest.mark.parametrize("cache", CACHES)
def test_loss_over_growing_terms_gradients(cache: str) -> None:
    def loss(t: Terms) -> torch.Tensor:
        total = t.base.square().sum()
        total = total + sum(e.square().sum() for e in t.extra)
        return total + sum(w * k for k, w in enumerate(t.weights.values())).sum()

    jloss = thunder.jit(loss, cache=cache)
    for n in (2, 3, 4, 2, 3):
        base = torch.randn(3, requires_grad=True)
        extra = [torch.randn(3, requires_grad=True) for _ in range(n)]
        weights = {f"w{k}": torch.randn(2, requires_grad=True) for k in range(n + 1)}
        leaves = [base, *extra, *weights.values()]
        expected = loss(Terms(base, extra, weights))
        got = jloss(Terms(base, extra, weights))
        torch.testing.assert_close(got, expected)
        ge = torch.autograd.grad(expected, leaves, allow_unused=True)
        gj = torch.autograd.grad(got, leaves, allow_unused=True)
        assert [g is None for g in gj] == [g is None for g in ge], n
        for a, b in zip(gj, ge, strict=True):
            if b is not None:
                torch.testing.assert_close(a, b)


def _prologue_text(jfn: Any) -> str:
    return str(thunder.last_prologue_traces(jfn)[-1])


def test_keyed_containers_get_no_length_guard() -> None:
    """What the cache key covers (a list argument, the items of a dict subclass argument) is
    not checked again by the prologue; a list inside an object is."""

    def of_list(x: torch.Tensor, items: list[torch.Tensor]) -> torch.Tensor:
        return x * len(items) + sum(items)

    def of_mapping(x: torch.Tensor, batch: MyDict) -> torch.Tensor:
        return x * len(batch["ids"]) + sum(batch["ids"])

    jl, jm = thunder.jit(of_list), thunder.jit(of_mapping)
    x = torch.randn(3)
    items = _ts(2)
    torch.testing.assert_close(jl(x, items), of_list(x, items))
    batch = MyDict(ids=_ts(2))
    batch.extra = 1
    torch.testing.assert_close(jm(x, batch), of_mapping(x, batch))
    assert "check_len" not in _prologue_text(jl)
    assert "check_len" not in _prologue_text(jm)

    jo = thunder.jit(lambda x, o: x * len(o.items) + sum(o.items))
    jo(x, Obj(items=_ts(2)))
    assert "check_len" in _prologue_text(jo)


@pytest.mark.parametrize("cache", CACHES)
def test_guard_tree_rejects_grown_containers(cache: str) -> None:
    """The same object mutated between calls (the guard tree answers from the second call)."""

    def fn(x: torch.Tensor, o: Any) -> torch.Tensor:
        return x * len(o.items) + sum(o.items) + sum(o.d.values()) * len(o.d)

    jfn = thunder.jit(fn, cache=cache)
    o = Obj(items=_ts(2), d={"a": _t()})
    for step in range(6):
        x = torch.randn(3)
        torch.testing.assert_close(jfn(x, o), fn(x, o))
        if step % 2:
            o.items.append(_t())
        else:
            o.d[f"k{step}"] = _t()
