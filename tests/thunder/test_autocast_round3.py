"""Autocast state that decides a jitted program's result, part of what selects its compiled code:

- ``enabled=`` given as an argument, a global or a module attribute, differing between calls or
  between the branches of an ``if``; a block with ``enabled=False`` nested in an enabled one; a
  ``torch.autocast`` decorator on a helper, ``torch.amp.autocast``, a block entered by hand;
- autocast's weight cache: eager converts a float32 leaf requiring grad that is not a view once
  per outermost region, only while ``torch.is_autocast_cache_enabled()`` (``cache_enabled=``,
  ``torch.set_autocast_cache_enabled``, the caller's ``torch.autocast``). With the cache, the
  gradient of a weight used twice is summed in bfloat16 (1 bfloat16 ulp from the sum per use),
  so which tensors a call passes (a leaf, a non-leaf, a view, a leaf view) and whether the cache
  is on must each select their own program.

Each compares with eager on fresh random inputs over several calls, outputs and gradients
bitwise, with the default cache and ``cache="symbolic values"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

BF16 = torch.bfloat16
CACHES = [None, "symbolic values"]


def _jit(fn: Callable[..., Any], cache: str | None) -> Any:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


def _randn(*shape: int, seed: int, grad: bool = False) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).requires_grad_(grad)


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (tuple, list)):
        return [y for z in x for y in _flat(z)]
    return [x]


def _assert_equal(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype
    assert torch.equal(got, want), (got - want).abs().max()


def _same_as_eager(
    jf: Any,
    fn: Callable[..., Any],
    make_args: Callable[[], tuple[list[Any], list[torch.Tensor]]],
) -> None:
    """One call of ``jf`` and of ``fn`` on arguments ``make_args`` builds twice (the second
    list: the tensors to differentiate): outputs and gradients bitwise equal."""
    ours, wrt_ours = make_args()
    theirs, wrt_theirs = make_args()
    got, want = _flat(jf(*ours)), _flat(fn(*theirs))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, torch.Tensor):
            _assert_equal(g, w)
        else:
            assert g == w
    outs = [(g, w) for g, w in zip(got, want) if isinstance(w, torch.Tensor) and w.requires_grad]
    assert all(g.requires_grad for g, _ in outs)
    if not outs or not wrt_theirs:
        return
    cots = [torch.randn_like(w) for _, w in outs]
    got_grads = torch.autograd.grad([g for g, _ in outs], wrt_ours, cots, allow_unused=True)
    want_grads = torch.autograd.grad([w for _, w in outs], wrt_theirs, cots, allow_unused=True)
    for g, w in zip(got_grads, want_grads):
        assert (g is None) == (w is None)
        if w is not None:
            _assert_equal(g, w)


def _x_w(seed: int, *extra: Any) -> Callable[[], tuple[list[Any], list[torch.Tensor]]]:
    def make() -> tuple[list[Any], list[torch.Tensor]]:
        w = _randn(8, 8, seed=seed + 1, grad=True)
        return [_randn(8, 8, seed=seed), w, *extra], [w]

    return make


# -- enabled, dtype and cache_enabled that differ between calls ------------------------------------


def _enabled_argument(x, w, flag):
    with torch.autocast("cpu", dtype=BF16, enabled=flag):
        return (x @ w) @ w


def _enabled_by_branch(x, w, flag):
    if flag:
        with torch.autocast("cpu", dtype=BF16, enabled=True):
            return (x @ w) @ w
    with torch.autocast("cpu", dtype=BF16, enabled=False):
        return (x @ w) @ w


def _cache_argument(x, w, flag):
    with torch.autocast("cpu", dtype=BF16, cache_enabled=flag):
        return (x @ w) @ w


def _nested_off(x, w, flag):
    with torch.autocast("cpu", dtype=BF16):
        y = x @ w
        with torch.autocast("cpu", dtype=BF16, enabled=flag):
            z = F.bilinear(x, y.float(), w.unsqueeze(0)) + y.float() @ w
        return y, z, y @ w


def _entered_by_hand(x, w, flag):
    block = torch.autocast("cpu", dtype=BF16, enabled=flag)
    block.__enter__()
    try:
        return (x @ w) @ w, torch.is_autocast_enabled("cpu")
    finally:
        block.__exit__(None, None, None)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn", [_enabled_argument, _enabled_by_branch, _cache_argument, _nested_off, _entered_by_hand]
)
@pytest.mark.parametrize("first", [True, False])
def test_autocast_settings_given_per_call(fn, first, cache):
    jf = _jit(fn, cache)
    for i, flag in enumerate([first, not first, not first, first]):
        _same_as_eager(jf, fn, _x_w(i, flag))
    assert thunder.compile_stats(jf).eager_fallbacks == 0


@pytest.mark.parametrize("cache", CACHES)
def test_autocast_dtype_given_per_call(cache):
    def fn(x, w, dtype):
        with torch.autocast("cpu", dtype=dtype):
            return (x @ w) @ w

    jf = _jit(fn, cache)
    for i, dtype in enumerate([BF16, torch.float16, BF16, torch.float16]):
        _same_as_eager(jf, fn, _x_w(i, dtype))


FLAG = True


def _enabled_by_global(x, w):
    with torch.autocast("cpu", dtype=BF16, enabled=FLAG):
        return (x @ w) @ w


@pytest.mark.parametrize("cache", CACHES)
def test_enabled_read_from_a_global_that_changes(cache):
    global FLAG
    jf = _jit(_enabled_by_global, cache)
    try:
        for i, flag in enumerate([True, False, True, False]):
            FLAG = flag
            _same_as_eager(jf, _enabled_by_global, _x_w(i))
    finally:
        FLAG = True


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.amp = True

    def forward(self, x):
        with torch.autocast("cpu", dtype=BF16, enabled=self.amp):
            return self.lin(self.lin(x).relu())


@pytest.mark.parametrize("cache", CACHES)
def test_enabled_read_from_a_module_attribute_that_changes(cache):
    torch.manual_seed(0)
    model = _Model()
    jm = _jit(model, cache)
    for i, flag in enumerate([True, False, True, False]):
        model.amp = flag
        x = _randn(4, 8, seed=i)
        got, want = jm(x), model(x)
        _assert_equal(got, want)
        cot = torch.randn_like(want)
        params = list(model.parameters())
        for g, w in zip(
            torch.autograd.grad(got, params, cot), torch.autograd.grad(want, params, cot)
        ):
            _assert_equal(g, w)


@torch.autocast("cpu", dtype=BF16)
def _helper_under_autocast(x, w):
    return (x @ w) @ w


def _through_decorator(x, w):
    return _helper_under_autocast(x, w).float() + x @ w


def _amp_autocast(x, w):
    with torch.amp.autocast("cpu", dtype=BF16):
        return (x @ w) @ w


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", [_through_decorator, _amp_autocast])
def test_decorator_and_amp_autocast(fn, cache):
    jf = _jit(fn, cache)
    for i in range(3):
        _same_as_eager(jf, fn, _x_w(i))
    assert thunder.compile_stats(jf).eager_fallbacks == 0


# -- the weight cache: which tensors eager caches -------------------------------------------------


def _twice(x, w):
    with torch.autocast("cpu", dtype=BF16):
        return (x @ w) @ w


def _weight_of_kind(kind: str, seed: int) -> Callable[[], tuple[list[Any], list[torch.Tensor]]]:
    """``(x, w)`` with ``w`` of ``kind``, differentiated at the tensor it is made from."""

    def make() -> tuple[list[Any], list[torch.Tensor]]:
        x, p = _randn(8, 8, seed=seed), _randn(8, 8, seed=seed + 1)
        if kind == "leaf_view":  # a view that is a leaf requiring grad: eager does not cache it
            w = p[:].requires_grad_()
            return [x, w], [w]
        p.requires_grad_(kind != "no_grad")
        w = {"leaf": p, "non_leaf": p * 1, "view": p[:], "no_grad": p}[kind]
        return [x, w], [p] if p.requires_grad else []

    return make


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "kinds",
    [
        ["leaf", "non_leaf", "leaf", "view"],
        ["non_leaf", "leaf", "view", "leaf"],
        ["leaf_view", "leaf", "leaf_view", "no_grad", "leaf"],
    ],
)
def test_weight_cache_holds_only_leaves_that_require_grad(kinds, cache):
    jf = _jit(_twice, cache)
    for i, kind in enumerate(kinds):
        _same_as_eager(jf, _twice, _weight_of_kind(kind, i))
    assert thunder.compile_stats(jf).eager_fallbacks == 0


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("first", [True, False])
def test_weight_cache_of_the_callers_autocast_per_call(first, cache):
    def fn(x, w):
        return (x @ w) @ w

    jf = _jit(fn, cache)
    for i, enabled in enumerate([first, not first, first, not first]):
        with torch.autocast("cpu", dtype=BF16, cache_enabled=enabled):
            _same_as_eager(jf, fn, _x_w(i))


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("first", [True, False])
def test_weight_cache_switched_off_by_set_autocast_cache_enabled(first, cache):
    # torch.autocast() without cache_enabled= takes the flag as it is when it is built.
    jf = _jit(_twice, cache)
    for i, enabled in enumerate([first, not first, first, not first]):
        torch.set_autocast_cache_enabled(enabled)
        try:
            _same_as_eager(jf, _twice, _x_w(i))
        finally:
            torch.set_autocast_cache_enabled(True)


@pytest.mark.parametrize("cache", CACHES)
def test_weight_cache_switched_inside_the_program(cache):
    def fn(x, w, enabled):
        torch.set_autocast_cache_enabled(enabled)
        try:
            with torch.autocast("cpu", dtype=BF16):
                return (x @ w) @ w
        finally:
            torch.set_autocast_cache_enabled(True)

    jf = _jit(fn, cache)
    for i, enabled in enumerate([True, False, True, False]):
        _same_as_eager(jf, fn, _x_w(i, enabled))
