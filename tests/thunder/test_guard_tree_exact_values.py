"""The guard tree (built after the first calls; ``THUNDER_GUARD_TREE_AFTER=1`` in the tests)
checks a value read from outside state as the prologue does (``same_value``): ``(1.0, 2)`` is
not ``(1, 2)``, ``-0.0`` is not ``0.0``, ``True`` in a list is not ``1``; a call whose value
changed that way runs the program compiled for it, never the old one."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]


@dataclasses.dataclass
class _Config:
    scale: Any = (1, 2)


def _run(f: Any, jf: Any, x: torch.Tensor) -> None:
    expected, got = f(x), jf(x)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "values",
    [
        [(1, 2), (1.0, 2), (1, 2)],
        [[2, 1], [2.0, 1], [True, 1], [2, 1]],
        [frozenset({2}), frozenset({2.0})],
        [((1, 2), (3, 4)), ((1, 2.0), (3, 4))],
        [{"a": 1}, {"a": 1.0}],
    ],
)
def test_a_closed_over_config_field_changing_type(cache: str, values: list[Any]) -> None:
    cfg = _Config(values[0])

    def f(x: torch.Tensor) -> torch.Tensor:
        v = cfg.scale
        if isinstance(v, dict):
            v = tuple(v.values())
        return x * torch.tensor(sorted(v) if isinstance(v, frozenset) else v)

    jf = thunder.jit(f, cache=cache)
    for v in values:
        cfg.scale = v
        for _ in range(3):
            _run(f, jf, torch.tensor([3, 4]) if not isinstance(v, frozenset) else torch.tensor(3))


@pytest.mark.parametrize("cache", CACHES)
def test_the_sign_of_a_zero_read_from_a_list(cache: str) -> None:
    cur = [0.0]

    def f(x: torch.Tensor) -> torch.Tensor:
        return x / cur[0]

    jf = thunder.jit(f, cache=cache)
    for v in (0.0, -0.0, 0.0, 1.5, -0.0):
        cur[0] = v
        for _ in range(3):
            _run(f, jf, torch.tensor([1.0, -2.0]))


@pytest.mark.parametrize("cache", CACHES)
def test_a_tuple_in_a_dict_that_also_holds_a_counter(cache: str) -> None:
    state: dict[str, Any] = {"t": (2, 1), "n": 0}

    def f(x: torch.Tensor) -> torch.Tensor:
        return x * torch.tensor(state["t"]) + state["n"]

    jf = thunder.jit(f, cache=cache)
    for i in range(10):
        state["n"] = i if i < 5 else 5
        if i == 7:
            state["t"] = (2.0, 1)
        _run(f, jf, torch.tensor([3, 4]))


class _Name(str):
    pass


@pytest.mark.parametrize("cache", CACHES)
def test_a_tuple_gaining_an_item_of_a_type_marshal_refuses(cache: str) -> None:
    # The tree compares such containers by their marshal bytes; an item marshal refuses (a str
    # subclass, an object) is another value, never an error and never the old program.
    cfg = _Config(("a", "b"))

    def f(x: torch.Tensor) -> torch.Tensor:
        v = cfg.scale
        return x * len(v) + (10 if type(v[0]) is not str else 0)

    jf = thunder.jit(f, cache=cache)
    for v in (("a", "b"), (_Name("a"), "b"), ("a", "b"), (object(), "b", "c"), ("a", "b")):
        cfg.scale = v
        for _ in range(3):
            _run(f, jf, torch.tensor([1, 2]))
