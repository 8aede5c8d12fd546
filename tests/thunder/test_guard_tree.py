"""The guard tree (``thunder/guard_tree.py``): a cache entry's prologue checked by torch's C++
guard manager. The suite runs with ``THUNDER_VERIFY_GUARD_TREE=1`` (tests/conftest.py): every
call the tree accepts is also run through the Python prologue, which must accept it and read the
same objects, so a tree that accepts what it should not fails loudly here and in every other test
that calls a program more than once."""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import thunder
from thunder import guard_tree

pytestmark = pytest.mark.skipif(guard_tree._cpp is None, reason="torch has no guard manager")

SCALE = 2.0  # a global the forward reads


class Config:
    def __init__(self) -> None:
        self.flag = True
        self.layers = [1, 2]
        self.eps = 0.5


class Helper:
    def factor(self) -> float:
        return 3.0


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.norm = torch.nn.LayerNorm(4)
        self.cfg = Config()
        self.helper = Helper()
        self.scale = 0.5
        self.register_buffer("offset", torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.norm(self.lin(x)) * self.scale + self.offset
        if self.cfg.flag:
            y = y * len(self.cfg.layers)
        if self.training:
            y = y - 1
        return y * self.helper.factor() * SCALE + self.cfg.eps


class ShiftedLinear(torch.nn.Linear):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + 1


def _state(j: Any) -> Any:
    return thunder.compile_stats(j).last_program.prologue.guard_tree  # type: ignore[union-attr]


def _check(j: Any, m: torch.nn.Module) -> None:
    x = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(j(x), m(x))


def test_cached_calls_of_a_module_are_served_by_the_tree() -> None:
    m = Block().eval()
    j = thunder.jit(m)
    for _ in range(4):
        _check(j, m)
    state = _state(j)
    assert state.tree is not None
    assert state.hits >= 2
    assert thunder.compile_stats(j).compilations == 1


def _set_global(value: float) -> None:
    global SCALE
    SCALE = value


def _replace_weight(m: Block) -> None:
    m.lin.weight = torch.nn.Parameter(torch.randn(4, 4))


def _scale_weight_in_place(m: Block) -> None:
    with torch.no_grad():
        m.lin.weight.mul_(2)


def _new_weight_data(m: Block) -> None:
    m.lin.weight.data = torch.randn(4, 4)  # the same Parameter, new storage


def _hook(m: Block) -> None:
    m.lin.register_forward_hook(lambda mod, args, out: out * 10)


def _pre_hook_on_root(m: Block) -> None:
    m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))


def _patch_helper_class(m: Block) -> None:
    Helper.factor = lambda self: 5.0  # type: ignore[method-assign]


def _shadow_method_on_instance(m: Block) -> None:
    m.helper.factor = lambda: 7.0  # type: ignore[method-assign]


def _swap_class(m: Block) -> None:
    m.lin.__class__ = ShiftedLinear


def _new_submodule(m: Block) -> None:
    m.norm = torch.nn.LayerNorm(4, eps=1e-3)


MUTATIONS = [
    lambda m: _set_global(SCALE + 1.0),
    _replace_weight,
    _scale_weight_in_place,
    _new_weight_data,
    lambda m: setattr(m, "scale", m.scale * 3),
    lambda m: m.cfg.layers.append(3),
    lambda m: setattr(m.cfg, "flag", not m.cfg.flag),
    lambda m: setattr(m.cfg, "eps", m.cfg.eps + 1),
    lambda m: m.offset.add_(1),
    lambda m: setattr(m, "offset", torch.randn(4)),
    _hook,
    _pre_hook_on_root,
    _patch_helper_class,
    _shadow_method_on_instance,
    _swap_class,
    _new_submodule,
    lambda m: m.train(),
    lambda m: m.eval(),
    lambda m: setattr(m.norm, "eps", 0.25),
    lambda m: setattr(m, "helper", Helper()),
    lambda m: setattr(m, "cfg", Config()),
    lambda m: m.lin.weight.requires_grad_(False),
]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(range(len(MUTATIONS))), min_size=1, max_size=8))
def test_any_change_of_the_state_the_program_read_is_seen(mutations: list[int]) -> None:
    """Changes a cached program relied on, made between calls once the tree serves them:
    every call still equals eager (and the verifying mode checks each call the tree accepts)."""
    factor = Helper.factor
    scale = SCALE
    try:
        m = Block().eval()
        j = thunder.jit(m, recompile_limit=64)
        for _ in range(3):
            _check(j, m)
        for i in mutations:
            MUTATIONS[i](m)
            _check(j, m)
            _check(j, m)
    finally:
        Helper.factor = factor  # type: ignore[method-assign]
        _set_global(scale)


class Counting(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.last_rows = x.shape[0]  # written on every call, never read
        return self.lin(x)


def test_a_dict_written_on_every_call_is_read_item_by_item() -> None:
    m = Counting()
    j = thunder.jit(m)
    for _ in range(12):
        _check(j, m)
    assert m.last_rows == 3
    state = _state(j)
    assert state.tree is not None and state.hits > 0  # rebuilt without that dict's version
    # (on CPython 3.13.0 an object's __dict__ is never versioned: no dict turns volatile)
    assert len(state.volatile) == (1 if guard_tree._instance_dicts_versioned() else 0)
    assert thunder.compile_stats(j).compilations == 1


def test_the_python_prologue_alone_without_the_guard_manager(monkeypatch: Any) -> None:
    monkeypatch.setattr(guard_tree, "_cpp", None)
    m = Block().eval()
    j = thunder.jit(m)
    for _ in range(3):
        _check(j, m)
    assert not hasattr(thunder.compile_stats(j).last_program.prologue, "guard_tree")  # type: ignore[union-attr]
    m.scale = 4.0
    _check(j, m)


def test_verification_is_on_in_the_suite() -> None:
    assert os.environ.get("THUNDER_VERIFY_GUARD_TREE") == "1"


def test_the_verification_catches_a_tree_that_accepts_wrongly(monkeypatch: Any) -> None:
    m = Block().eval()
    j = thunder.jit(m)
    for _ in range(3):
        _check(j, m)
    tree = _state(j).tree
    # a tree that accepts anything and returns its cached inputs: the verifying run must refuse
    monkeypatch.setattr(tree, "_check", lambda x: True)
    old = m.lin.weight  # alive: its death would make the tree reject every call
    m.lin.weight = torch.nn.Parameter(torch.randn(4, 4))
    with pytest.raises(AssertionError, match="other inputs than the prologue"), torch.no_grad():
        j(torch.randn(3, 4))
    del old


class Sliced(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
        return self.lin(x).sum(0)[:n] * x.shape[0]


def test_symbolic_sizes_and_their_constraints_are_read_by_the_generated_code() -> None:
    m = Sliced()
    j = thunder.jit(m, cache="symbolic values")
    calls = [(2, 3), (3, 3), (5, 1), (6, 4), (7, 5), (1, 2), (9, 0), (4, 9), (8, 2)]
    with torch.no_grad():
        for rows, n in calls:
            x = torch.randn(rows, 4)
            torch.testing.assert_close(j(x, n), m(x, n))
    states = [
        e.prologue.guard_tree for bucket in j._thunder_function._buckets.values() for e in bucket
    ]
    assert sum(s.hits for s in states) >= 3  # the sizes and n change; the tree serves them


class Ordered(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.table = OrderedDict(a=1.0, b=2.0, c=3.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, k in enumerate(self.table):
            x = x * (i + 1) + self.table[k]
        return x


def test_an_ordered_dict_reordered_in_place_is_seen() -> None:
    # move_to_end changes the order without giving the dict a new version (the order is
    # guarded by equality here; check_keys of an OrderedDict is never implied by its version)
    m = Ordered()
    j = thunder.jit(m)
    for _ in range(3):
        _check(j, m)
    m.table.move_to_end("a")
    _check(j, m)
    m.table["b"] = 5.0
    _check(j, m)
