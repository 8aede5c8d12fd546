"""Tensor default values of the functions a program calls, item lookups with a tensor default,
torch's callables run for ops whose arguments they lack (``relu(t, False)``), and ``copy.copy``
of a jitted module: each compared with eager PyTorch over several calls."""

from __future__ import annotations

import collections
import copy
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Any, cache: str | None) -> Any:
    return thunder.jit(fn, cache=cache) if cache else thunder.jit(fn)


def _calls(
    fn: Any, jfn: Any, between: Callable[[int], None] = lambda i: None, n: int = 4
) -> list[str]:
    """Calls both on the same fresh inputs, ``between`` after each pair: the warnings seen."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for i in range(n):
            x = torch.randn(3)
            torch.testing.assert_close(jfn(x), fn(x))
            between(i)
    return [str(w.message) for w in seen]


# -- tensor defaults of called functions --------------------------------------------------------

THRESH = torch.tensor(-1.0)


def _gate(x: torch.Tensor, t: torch.Tensor = THRESH) -> torch.Tensor:
    return x + 1 if t > 0 else x - 1


def _scaled(x: torch.Tensor, *, t: torch.Tensor = THRESH) -> torch.Tensor:
    return x / float(t)


def _pair_default(x: torch.Tensor, ts: tuple[Any, ...] = (THRESH, 2.0)) -> torch.Tensor:
    return x * ts[0] + ts[1]


def _dict_default(x: torch.Tensor, d: dict[str, Any] = {"t": THRESH}) -> torch.Tensor:  # noqa: B006
    return x * d["t"]


def _positional_only(x: torch.Tensor, t: torch.Tensor = THRESH, /) -> torch.Tensor:
    return x - t


_Point = collections.namedtuple("_Point", "a b", defaults=(THRESH,))


class _Callable:
    def __call__(self, x: torch.Tensor, t: torch.Tensor = THRESH) -> torch.Tensor:
        return x * t + t


_CALLABLE = _Callable()


class _ForwardDefault(torch.nn.Module):
    def forward(self, x: torch.Tensor, temp: torch.Tensor = THRESH) -> torch.Tensor:
        return x / float(temp) + temp


class _HelperMethod(torch.nn.Module):
    def helper(self, x: torch.Tensor, t: torch.Tensor = THRESH) -> torch.Tensor:
        return torch.where(t > 0, x, -x) * t

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.helper(x)


def _namedtuple_default(x: torch.Tensor) -> torch.Tensor:
    p = _Point(x)
    return p.a * p.b


DEFAULT_USERS: dict[str, Callable[[], Any]] = {
    "helper, bool(t > 0)": lambda: lambda x: _gate(x),
    "keyword-only, float(t)": lambda: lambda x: _scaled(x),
    "tuple default": lambda: lambda x: _pair_default(x),
    "dict default": lambda: lambda x: _dict_default(x),
    "positional-only": lambda: lambda x: _positional_only(x),
    "namedtuple default": lambda: _namedtuple_default,
    "callable object": lambda: lambda x: _CALLABLE(x),
    "module forward": _ForwardDefault,
    "module method": _HelperMethod,
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", list(DEFAULT_USERS))
def test_tensor_default_is_read_on_every_call(name: str, cache: str | None) -> None:
    # The default tensor changes in place between calls: each call sees its values, none
    # runs eagerly.
    THRESH.fill_(-1.0)
    fn = DEFAULT_USERS[name]()
    jfn = _jit(fn, cache)
    try:
        seen = _calls(fn, jfn, lambda i: THRESH.mul_(-2))
    finally:
        THRESH.fill_(-1.0)
    assert thunder.compile_stats(jfn).eager_fallbacks == 0, seen
    assert not [m for m in seen if "please report" in m]


WEIGHT = torch.randn(3, requires_grad=True)


def _weighted(x: torch.Tensor, w: torch.Tensor = WEIGHT) -> torch.Tensor:
    return (x * w).tanh().sum()


@pytest.mark.parametrize("cache", CACHES)
def test_tensor_default_gets_its_gradient(cache: str | None) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return _weighted(x)

    jfn = _jit(fn, cache)
    for _ in range(3):
        x = torch.randn(3)
        (expected,) = torch.autograd.grad(fn(x), WEIGHT)
        (got,) = torch.autograd.grad(jfn(x), WEIGHT)
        torch.testing.assert_close(got, expected)
        with torch.no_grad():
            WEIGHT.add_(0.5)
    assert thunder.compile_stats(jfn).eager_fallbacks == 0


BUFFER = torch.zeros(3)


def _accumulate(x: torch.Tensor, b: torch.Tensor = BUFFER) -> torch.Tensor:
    b.add_(x)
    return b * 2


def test_tensor_default_written_in_place() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return _accumulate(x)

    jfn = thunder.jit(fn)
    eager_buffer = torch.zeros(3)
    for _ in range(3):
        x = torch.randn(3)
        eager_buffer.add_(x)
        torch.testing.assert_close(jfn(x), eager_buffer * 2)
        torch.testing.assert_close(BUFFER, eager_buffer)
    assert thunder.compile_stats(jfn).eager_fallbacks == 0


def _with_default(x: torch.Tensor, t: torch.Tensor = THRESH) -> torch.Tensor:
    return x * t


def test_replaced_tensor_default_is_seen() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return _with_default(x)

    jfn = thunder.jit(fn)
    replacements = [torch.full((3,), 3.0), torch.ones(1) * 5, THRESH]
    try:
        _calls(fn, jfn, lambda i: setattr(_with_default, "__defaults__", (replacements[i % 3],)))
    finally:
        _with_default.__defaults__ = (THRESH,)
    assert thunder.compile_stats(jfn).eager_fallbacks == 0


# -- item lookups with a tensor default ---------------------------------------------------------


class _ConfigDefaults(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mask", torch.ones(3))
        self.cfg: dict[str, Any] = {"dropout": 0.0}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (
            x * self.cfg.get("mask", self.mask)
            + self.cfg.pop("bias", x)
            + self.cfg.setdefault("dropout", x)
        )


@pytest.mark.parametrize("cache", CACHES)
def test_item_lookup_with_tensor_default_compiles(cache: str | None) -> None:
    m = _ConfigDefaults()
    jm = _jit(m, cache)
    seen = _calls(m, jm, lambda i: m.mask.mul_(2))
    assert thunder.compile_stats(jm).eager_fallbacks == 0, seen


# -- relu's ``inplace`` argument, run as torch's callable ---------------------------------------


_W = torch.randn(3, 3, requires_grad=True)


def _relu_positional(x: torch.Tensor) -> torch.Tensor:
    y = F.relu(x @ _W, False)
    y.clamp_(max=0.5)
    return y * 2


def _relu_keyword(x: torch.Tensor) -> torch.Tensor:
    y = F.relu(x @ _W, inplace=False)
    y.mul_(3)
    return y


def _softmax_stacklevel(x: torch.Tensor) -> torch.Tensor:
    y = F.softmax(x @ _W, 1, 3, torch.float64)
    y.mul_(2)
    return y


class _ReluThenAdd(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)
        self.act = torch.nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc(x))
        h += x
        return h


def _with_clamping_pre_hook() -> torch.nn.Module:
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 3))
    m[2].register_forward_pre_hook(lambda mod, inp: (inp[0].clamp_(max=0.5),))
    return m


WRITTEN_AFTER: dict[str, Callable[[], Any]] = {
    "F.relu(t, False)": lambda: _relu_positional,
    "F.relu(t, inplace=False)": lambda: _relu_keyword,
    "F.softmax(t, dim, _stacklevel, dtype)": lambda: _softmax_stacklevel,
    "nn.ReLU then +=": _ReluThenAdd,
    "nn.ReLU then a pre-hook's clamp_": _with_clamping_pre_hook,
}


@pytest.mark.parametrize("name", list(WRITTEN_AFTER))
def test_result_written_in_place_after_an_activation(name: str) -> None:
    fn = WRITTEN_AFTER[name]()
    jfn = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(2, 3)
        torch.testing.assert_close(jfn(x), fn(x))
    assert thunder.compile_stats(jfn).eager_fallbacks == 0


def test_relu_result_written_in_place_backward_errors_as_eager() -> None:
    m = _ReluThenAdd()
    jm = thunder.jit(m)
    x = torch.randn(2, 3)
    for module in (m, jm):
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            module(x).sum().backward()


# -- copy.copy of a jitted module ---------------------------------------------------------------


class _Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(3, 3)
        self.drop = torch.nn.Dropout(0.5)
        self.scale = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc(x)) * self.scale if self.training else self.fc(x) * self.scale


def test_shallow_copy_of_jitted_module_has_its_own_attributes() -> None:
    eager, original = _Scaled(), _Scaled()
    jm = thunder.jit(original)
    eager_copy, jitted_copy = copy.copy(eager), copy.copy(jm)
    for cp in (eager_copy, jitted_copy):
        cp.scale = 5.0
        cp.eval()
    assert jm.training == eager.training and jm.fc.training == eager.fc.training
    assert jitted_copy.training == eager_copy.training
    assert original.scale == eager.scale == 1.0
    # parameters shared with the original, as eager's copy.copy shares them
    assert jitted_copy.fc.weight is jm.fc.weight
    for _ in range(3):
        x = torch.randn(2, 3)
        torch.manual_seed(1)
        expected = eager(x)
        torch.manual_seed(1)
        torch.testing.assert_close(jm(x), expected)
        torch.testing.assert_close(jitted_copy(x), eager_copy(x))
    with torch.no_grad():
        jm.fc.weight.mul_(2)
        eager.fc.weight.mul_(2)
    x = torch.randn(2, 3)
    torch.testing.assert_close(jitted_copy(x), eager_copy(x))


# -- the interpreter's load_defaults hook -------------------------------------------------------


def test_load_defaults_hook_replaces_what_a_call_binds() -> None:
    from thunder_interp import Callbacks, interpret

    def inner(a: int, b: int = 1, *, c: int = 2) -> tuple[int, int, int]:
        return a, b, c

    def outer() -> list[Any]:
        return [inner(0), inner(0, c=5), inner(0, 3, c=4), inner(0)]

    asked: list[Any] = []

    def hook(fn: Any) -> Any:
        asked.append(fn)
        return (10,), {"c": 20}

    assert interpret(outer, callbacks=Callbacks(load_defaults=hook))() == [
        (0, 10, 20),
        (0, 10, 5),
        (0, 3, 4),
        (0, 10, 20),
    ]
    assert asked == [inner]  # once per interpretation while the function's defaults stay
    assert inner.__defaults__ == (1,) and inner.__kwdefaults__ == {"c": 2}
    assert interpret(outer, callbacks=Callbacks(load_defaults=lambda fn: None))() == [
        (0, 1, 2),
        (0, 1, 5),
        (0, 3, 4),
        (0, 1, 2),
    ]
