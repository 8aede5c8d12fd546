"""Python 3.13 behaviours thunder.jit must match, tested through the mechanism they reach (CI runs
an older Python): dataclasses' own functions a thunder_ir class holds (every 3.13 dataclass has
``__replace__ = dataclasses._replace``) must stay interpreted for user objects, their reads
guarded; ``frame.f_locals`` is a live view of a function's variables (PEP 667); and CPython
3.13.0 does not tell a dict's watchers about ``obj.name = value`` stored in the object's inline
values (python/cpython#125608), so the guard tree must not trust a version guard on an object's
``__dict__`` there."""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import enum
import inspect
import sys
from typing import Any

import pytest
import torch

import thunder
import thunder_interp._locals
from thunder import guard_tree, lookasides

CACHES = ["constant values", "symbolic values"]


@dataclasses.dataclass
class Cfg:
    dim: int
    eps: float = 1e-5


@dataclasses.dataclass(frozen=True, slots=True)
class FrozenCfg:
    dim: int
    eps: float = 1e-5


def _same_as_eager(fn: Any, make_args: Any, cache: str, calls: int = 4) -> None:
    jfn = thunder.jit(fn, cache=cache)
    for i in range(calls):
        x = torch.randn(3, requires_grad=True)
        xj = x.detach().clone().requires_grad_()
        other = make_args(i)
        expected, got = fn(x, *other), jfn(xj, *other)
        torch.testing.assert_close(got, expected)
        expected.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(xj.grad, x.grad)


def test_only_thunder_irs_own_functions_run_natively() -> None:
    # A thunder_ir dataclass or enum also holds functions of dataclasses and enum: mapped to
    # themselves, they would run natively for every user object too, their reads unguarded.
    functions = lookasides._ir_functions()
    assert functions
    outside = [f for f in functions if f.__module__.split(".")[0] != "thunder_ir"]
    assert outside == []
    for fn in (getattr(dataclasses, "_replace", None), enum.Enum.__new__):
        assert fn not in functions


@pytest.mark.parametrize("cache", CACHES)
def test_dataclasses_replace_reads_the_fields_of_this_call(cache: str) -> None:
    def f(x: torch.Tensor, cfg: Cfg) -> torch.Tensor:
        c2 = dataclasses.replace(cfg, eps=0.1)
        return x * c2.dim + c2.eps

    _same_as_eager(f, lambda i: (Cfg(dim=i + 1),), cache)


@pytest.mark.parametrize("cache", CACHES)
def test_the_replace_protocol_reads_the_fields_of_this_call(cache: str) -> None:
    # copy.replace (3.13) calls __replace__; on older versions, the function 3.13 puts there
    replace = getattr(copy, "replace", None)

    def f(x: torch.Tensor, cfg: Cfg) -> torch.Tensor:
        c2 = replace(cfg, eps=0.25) if replace is not None else dataclasses.replace(cfg, eps=0.25)
        return x * c2.dim + c2.eps

    _same_as_eager(f, lambda i: (Cfg(dim=2 * i + 1),), cache)


@pytest.mark.parametrize("cache", CACHES)
def test_a_dataclasses_getstate_reads_the_fields_of_this_call(cache: str) -> None:
    # a frozen dataclass with slots gets __getstate__ = dataclasses._dataclass_getstate
    def f(x: torch.Tensor, cfg: FrozenCfg) -> torch.Tensor:
        dim, eps = cfg.__getstate__()
        return x * dim + eps

    _same_as_eager(f, lambda i: (FrozenCfg(dim=i + 1, eps=0.1 * i),), cache)


class Color(enum.Enum):
    RED = 1
    BLUE = 2


@pytest.mark.parametrize("cache", CACHES)
def test_an_enum_looked_up_by_value(cache: str) -> None:
    def f(x: torch.Tensor, v: int) -> torch.Tensor:
        return x * Color(v).value

    _same_as_eager(f, lambda i: (1 + i % 2,), cache)


# -- the guard tree and instance dicts ---------------------------------------------------------


def test_the_probe_says_whether_instance_dict_writes_change_the_version() -> None:
    if guard_tree._cpp is None:
        pytest.skip("torch has no guard manager")
    buggy = sys.implementation.name == "cpython" and sys.version_info[:3] == (3, 13, 0)
    assert guard_tree._instance_dict_writes_seen() is not buggy


class Gated(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))
        self.reads = 0

    @property
    def gated(self) -> torch.Tensor:
        self.reads += 1
        return self.w.tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.gated).sum()


def _counter_like_eager(cache: str) -> None:
    torch.manual_seed(0)
    eager, jitted = Gated(), Gated()
    jitted.load_state_dict(eager.state_dict())
    jm = thunder.jit(jitted, cache=cache)
    for i in range(8):  # each count a program of its own, up to the recompile limit
        x = torch.randn(3)
        expected, got = eager(x), jm(x)
        torch.testing.assert_close(got, expected)
        expected.backward()
        got.backward()
        assert jitted.reads == eager.reads == i + 1
        torch.testing.assert_close(jitted.w.grad, eager.w.grad)
        eager.w.grad = jitted.w.grad = None


@pytest.mark.parametrize("cache", CACHES)
def test_a_property_that_counts_its_reads_on_the_module(cache: str) -> None:
    _counter_like_eager(cache)


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))
        self.scale = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.w * self.scale).sum()


def _attribute_written_between_calls_like_eager(cache: str) -> Scaled:
    torch.manual_seed(0)
    eager, jitted = Scaled(), Scaled()
    jitted.load_state_dict(eager.state_dict())
    jm = thunder.jit(jitted, cache=cache)
    for i in range(12):
        if i % 3 == 2:  # once the tree serves the calls: an attribute store into the module
            eager.scale = jitted.scale = float(i)
        x = torch.randn(3)
        expected, got = eager(x), jm(x)
        torch.testing.assert_close(got, expected)
        expected.backward()
        got.backward()
        torch.testing.assert_close(jitted.w.grad, eager.w.grad)
        eager.w.grad = jitted.w.grad = None
    return jitted


@pytest.mark.parametrize("cache", CACHES)
def test_a_module_attribute_written_between_calls(cache: str) -> None:
    _attribute_written_between_calls_like_eager(cache)


@pytest.mark.parametrize("cache", CACHES)
def test_instance_dicts_unversioned_where_their_writes_go_unseen(
    monkeypatch: Any, cache: str
) -> None:
    # What the tree does on 3.13.0: no version guard on an object's __dict__, the values read
    # from it checked instead; still like eager, the tree still serving calls.
    if guard_tree._cpp is None:
        pytest.skip("torch has no guard manager")
    monkeypatch.setattr(guard_tree, "_INSTANCE_DICT_WRITES_SEEN", False)
    _counter_like_eager(cache)
    m = _attribute_written_between_calls_like_eager(cache)
    jm = thunder.jit(m, cache=cache)
    for _ in range(4):
        jm(torch.randn(3))
    state = thunder.compile_stats(jm).last_program.prologue.guard_tree  # type: ignore[union-attr]
    assert state.tree is not None and state.hits > 0
    assert all(d is not m.__dict__ for d in state.tree.versioned.values())


# -- frame.f_locals, a live view of the frame's variables on 3.13 (PEP 667) ---------------------


def _live_view(x: torch.Tensor, k: int) -> tuple[torch.Tensor, list[Any]]:
    z = k + 1

    def closure() -> int:
        return z

    view = inspect.currentframe().f_locals  # type: ignore[union-attr]
    y = x * 2  # bound after the view was taken
    seen = ["y" in view, "extra" in view]
    view["k"] = k + 10  # writes the local
    view["z"] = z * 3  # writes the cell the closure reads
    view["extra"] = 1  # kept beside the variables
    try:
        del view["extra"]
    except TypeError:
        seen.append("no removal")
    seen += [sorted(view), len(view), view.get("missing", "default"), closure()]
    return y * k + z, seen


def _expected_live_view(x: torch.Tensor, k: int) -> tuple[torch.Tensor, list[Any]]:
    z = (k + 1) * 3
    names = sorted(["closure", "extra", "k", "seen", "view", "x", "y", "z"])
    return x * 2 * (k + 10) + z, [True, False, "no removal", names, 8, "default", z]


@pytest.mark.parametrize("cache", CACHES)
def test_f_locals_is_a_live_view_of_the_frame(monkeypatch: Any, cache: str) -> None:
    if sys.version_info < (3, 13):  # the view thunder gives 3.13 code, on this interpreter
        monkeypatch.setattr(thunder_interp._locals, "_SNAPSHOTS", True)
    else:
        x = torch.randn(3)
        got, seen = _live_view(x, 2)
        expected, expected_seen = _expected_live_view(x, 2)
        torch.testing.assert_close(got, expected)
        assert seen == expected_seen
    jfn = thunder.jit(_live_view, cache=cache)
    for k in range(4):
        x = torch.randn(3, requires_grad=True)
        xj = x.detach().clone().requires_grad_()
        expected, expected_seen = _expected_live_view(x, k)
        got, seen = jfn(xj, k)
        torch.testing.assert_close(got, expected)
        assert seen == expected_seen
        expected.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(xj.grad, x.grad)


def test_the_view_is_a_mapping_like_cpythons() -> None:
    def f(a: int) -> list[Any]:
        view = sys._getframe().f_locals
        view.update({"a": a + 1, "b": 2})
        return [
            type(view).__name__,
            isinstance(view, dict),
            isinstance(view, collections.abc.Mapping),
            isinstance(view, collections.abc.MutableMapping),
            a,
            view.setdefault("c", 3),
            view.copy() == dict(view),
            list(reversed(view))[:2],
            type(view | {}).__name__,
        ]

    expected = ["FrameLocalsProxy", False, True, False, 2, 3, True, ["c", "b"], "dict"]
    if sys.version_info >= (3, 13):
        assert f(1) == expected
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(thunder_interp._locals, "_SNAPSHOTS", True)
        assert thunder.jit(f)(1) == expected
