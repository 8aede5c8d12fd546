"""Tensors held in outside state whose sizes change on every call (a KV cache kept on a module and
grown with ``torch.cat``, a growing buffer, a global or closure tensor, an object's attribute):
once a tensor's sizes fail a program's check, its sizes are symbolic in the programs compiled
from then on (sizes 0 and 1 stay constants), so a few programs serve every call, each result,
write-back and gradient as eager's, where each size used to compile a program of its own up to
the recompile limit."""

from __future__ import annotations

import copy
import logging
import types
from typing import Any

import pytest
import torch
import torch.nn as nn

import thunder
from thunder.errors import JitError

CACHES = [{}, {"cache": "symbolic values"}]
CALLS = 12  # more than the recompile limit (8)


class Growing(nn.Module):
    """A KV cache on a plain attribute, grown by one token a call; it requires grad after the
    first call (it holds ``lin``'s output)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.cache = torch.zeros(1, 0, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.cache = torch.cat([self.cache, self.lin(x)], 1)
        return self.cache.softmax(1).sum(1)


def _assert_bounded(jm: Any, programs: int = 3) -> None:
    stats = thunder.compile_stats(jm)
    assert stats.compilations <= programs, stats
    assert stats.eager_fallbacks == 0, stats


@pytest.mark.parametrize("options", CACHES)
def test_a_cache_grown_on_a_module_compiles_few_programs(options: dict[str, str]) -> None:
    torch.manual_seed(0)
    eager = Growing()
    ours = copy.deepcopy(eager)
    jm = thunder.jit(ours, **options)
    outs_e, outs_t = [], []
    for _ in range(CALLS):
        x = torch.randn(1, 1, 8)
        e, t = eager(x), jm(x)
        torch.testing.assert_close(t, e)
        torch.testing.assert_close(ours.cache, eager.cache)
        assert ours.cache.requires_grad == eager.cache.requires_grad
        outs_e.append(e)
        outs_t.append(t)
    _assert_bounded(jm)
    # Gradients through every call's cache (each holds the graphs of the calls before).
    sum(o.square().sum() for o in outs_e).backward()
    sum(o.square().sum() for o in outs_t).backward()
    for p, q in zip(eager.parameters(), ours.parameters()):
        torch.testing.assert_close(q.grad, p.grad)


@pytest.mark.parametrize("options", CACHES)
def test_training_steps_on_a_growing_cache_match_eager(options: dict[str, str]) -> None:
    """A loss on each call's output, differentiated at once (the cache's graph kept)."""
    torch.manual_seed(1)
    eager = Growing()
    ours = copy.deepcopy(eager)
    jm = thunder.jit(ours, **options)
    for _ in range(CALLS):
        x = torch.randn(1, 1, 8)
        le, lt = eager(x).pow(2).mean(), jm(x).pow(2).mean()
        torch.testing.assert_close(lt, le)
        le.backward(retain_graph=True)
        lt.backward(retain_graph=True)
        for p, q in zip(eager.parameters(), ours.parameters()):
            torch.testing.assert_close(q.grad, p.grad)
    _assert_bounded(jm)


class GrowingBuffer(nn.Module):
    """A registered buffer reassigned to a longer tensor on every call (in state_dict)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("history", torch.zeros(0, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.history = torch.cat([self.history, x.detach()], 0)
        return self.lin(x) * self.history.mean(0) + self.history.shape[0]


@pytest.mark.parametrize("options", CACHES)
def test_a_growing_registered_buffer_stays_a_buffer(options: dict[str, str]) -> None:
    torch.manual_seed(2)
    eager = GrowingBuffer()
    ours = copy.deepcopy(eager)
    jm = thunder.jit(ours, **options)
    for _ in range(CALLS):
        x = torch.randn(3, 4)
        e, t = eager(x), jm(x)
        torch.testing.assert_close(t, e)
        e.sum().backward()
        t.sum().backward()
        for p, q in zip(eager.parameters(), ours.parameters()):
            torch.testing.assert_close(q.grad, p.grad)
        assert "history" in ours._buffers and "history" not in ours.__dict__
        sd_e, sd_t = eager.state_dict(), jm.state_dict()
        assert list(sd_t) == list(sd_e)
        for k in sd_e:
            torch.testing.assert_close(sd_t[k], sd_e[k])
    _assert_bounded(jm)


class Running(nn.Module):
    """Returns the grown tensor itself: the module's attribute is the returned object."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = torch.zeros(2, 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen = torch.cat([self.seen, x * 2], 1)
        return self.seen


@pytest.mark.parametrize("options", CACHES)
def test_the_written_back_tensor_is_the_returned_one(options: dict[str, str]) -> None:
    eager, ours = Running(), Running()
    jm = thunder.jit(ours, **options)
    for _ in range(CALLS):
        x = torch.randn(2, 3)
        e, t = eager(x), jm(x)
        torch.testing.assert_close(t, e)
        assert t is ours.seen
    _assert_bounded(jm)


HISTORY = torch.zeros(0, 3)


def _grow_global(x: torch.Tensor) -> torch.Tensor:
    global HISTORY
    HISTORY = torch.cat([HISTORY, x], 0)
    return HISTORY.sum(0) * x


@pytest.mark.parametrize("options", CACHES)
def test_a_growing_global_tensor(options: dict[str, str]) -> None:
    global HISTORY
    torch.manual_seed(3)
    xs = [torch.randn(2, 3) for _ in range(CALLS)]
    HISTORY = torch.zeros(0, 3)
    want = [_grow_global(x) for x in xs]
    final = HISTORY
    HISTORY = torch.zeros(0, 3)
    jf = thunder.jit(_grow_global, **options)
    for x, w in zip(xs, want):
        torch.testing.assert_close(jf(x), w)
    torch.testing.assert_close(HISTORY, final)
    _assert_bounded(jf)


def _closure_counter() -> Any:
    acc = torch.zeros(1, 0)

    def step(x: torch.Tensor) -> torch.Tensor:
        nonlocal acc
        acc = torch.cat([acc, x], 1)
        return acc.exp().sum(1, keepdim=True) * x

    return step, lambda: acc


@pytest.mark.parametrize("options", CACHES)
def test_a_growing_closure_tensor(options: dict[str, str]) -> None:
    torch.manual_seed(4)
    f_eager, acc_eager = _closure_counter()
    f_ours, acc_ours = _closure_counter()
    jf = thunder.jit(f_ours, **options)
    for _ in range(CALLS):
        x = torch.randn(1, 2)
        torch.testing.assert_close(jf(x), f_eager(x))
        torch.testing.assert_close(acc_ours(), acc_eager())
    _assert_bounded(jf)


STATE = types.SimpleNamespace(keys=torch.zeros(0, 2), w=torch.randn(2, 2))


def _attend(q: torch.Tensor) -> torch.Tensor:
    STATE.keys = torch.cat([STATE.keys, q @ STATE.w], 0)
    return torch.softmax(q @ STATE.keys.T, -1) @ STATE.keys


@pytest.mark.parametrize("options", CACHES)
def test_a_growing_attribute_of_an_outside_object(options: dict[str, str]) -> None:
    torch.manual_seed(5)
    w = torch.randn(2, 2)
    qs = [torch.randn(1, 2) for _ in range(CALLS)]
    STATE.keys, STATE.w = torch.zeros(0, 2), w
    want = [_attend(q) for q in qs]
    final = STATE.keys
    STATE.keys = torch.zeros(0, 2)
    jf = thunder.jit(_attend, **options)
    for q, expected in zip(qs, want):
        torch.testing.assert_close(jf(q), expected)
    torch.testing.assert_close(STATE.keys, final)
    _assert_bounded(jf)


@pytest.mark.parametrize("options", CACHES)
def test_a_cache_reset_between_sequences(options: dict[str, str]) -> None:
    """Sizes 0 and 1 stay constants: each new sequence reuses the first programs."""
    torch.manual_seed(6)
    eager = Growing()
    ours = copy.deepcopy(eager)
    jm = thunder.jit(ours, **options)
    with torch.no_grad():
        for _ in range(3):
            eager.cache, ours.cache = torch.zeros(1, 0, 8), torch.zeros(1, 0, 8)
            for _ in range(6):
                x = torch.randn(1, 1, 8)
                torch.testing.assert_close(jm(x), eager(x))
                torch.testing.assert_close(ours.cache, eager.cache)
    _assert_bounded(jm)


class WithRunningStats(nn.Module):
    """Buffers written in place with fixed sizes, and a fixed-size table sliced by length."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(4)
        self.register_buffer("table", torch.randn(16, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x) + self.table[: x.shape[0]]


def test_state_tensors_of_fixed_sizes_keep_constant_sizes() -> None:
    torch.manual_seed(7)
    eager = WithRunningStats()
    ours = copy.deepcopy(eager)
    jm = thunder.jit(ours)
    for _ in range(CALLS):
        x = torch.randn(5, 4)
        torch.testing.assert_close(jm(x), eager(x))
        torch.testing.assert_close(ours.bn.running_mean, eager.bn.running_mean)
    stats = thunder.compile_stats(jm)
    assert stats.compilations == 1
    trace = stats.last_traces[0]
    assert all(type(s) is int for a in trace.args if hasattr(a, "shape") for s in a.shape)


def test_constant_values_keep_state_sizes_constant() -> None:
    """An explicit cache="constant values": a program per size, then eager, as before."""
    torch.manual_seed(8)
    eager = Growing()
    ours = copy.deepcopy(eager)
    jm = thunder.jit(ours, cache="constant values", recompile_limit=4)
    with pytest.warns(UserWarning, match="recompile limit"):
        for _ in range(6):
            x = torch.randn(1, 1, 8)
            torch.testing.assert_close(jm(x), eager(x))
            torch.testing.assert_close(ours.cache, eager.cache)
    assert thunder.compile_stats(jm).compilations == 4


class _Layer:
    def __init__(self) -> None:
        self.keys = torch.zeros(1, 1, 0, 8)
        self.values = torch.zeros(1, 1, 0, 8)


class _DynamicCache:
    """As transformers' DynamicCache: per-layer objects whose keys and values ``update`` grows."""

    def __init__(self) -> None:
        self.layers = [_Layer()]

    def update(self, k: torch.Tensor, v: torch.Tensor, layer: int) -> tuple[Any, Any]:
        held = self.layers[layer]
        held.keys = torch.cat([held.keys, k], -2)
        held.values = torch.cat([held.values, v], -2)
        return held.keys, held.values


class _Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(8, 24)

    def forward(self, x: torch.Tensor, cache: _DynamicCache) -> torch.Tensor:
        q, k, v = self.qkv(x).unsqueeze(1).chunk(3, -1)
        k, v = cache.update(k, v, 0)
        return nn.functional.scaled_dot_product_attention(q, k, v).squeeze(1)


def test_a_cache_passed_in_an_argument_object() -> None:
    """Read through an argument (not outside state): the arguments' rule serves it."""
    torch.manual_seed(9)
    model = _Attention()
    jm = thunder.jit(model)
    ours, theirs = _DynamicCache(), _DynamicCache()
    with torch.no_grad():
        for _ in range(CALLS):
            x = torch.randn(1, 1, 8)
            torch.testing.assert_close(jm(x, ours), model(x, theirs))
            torch.testing.assert_close(ours.layers[0].values, theirs.layers[0].values)
    _assert_bounded(jm)


def test_a_refused_symbolic_compile_falls_back_to_constant_sizes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import thunder.jit_function as jit_function

    compile_entry = jit_function.compile_entry

    def refusing(fn: Any, args: Any, kwargs: Any, options: Any, *rest: Any) -> Any:
        if options.symbolic_state_tensors:
            raise JitError("thunder.jit: refused with symbolic sizes (this test)")
        return compile_entry(fn, args, kwargs, options, *rest)

    monkeypatch.setattr(jit_function, "compile_entry", refusing)
    eager = Running()
    jm = thunder.jit(Running(), recompile_limit=20)
    thunder.set_logs("recompiles")
    try:
        with caplog.at_level(logging.INFO, logger="thunder"):
            for _ in range(6):
                x = torch.randn(2, 3)
                torch.testing.assert_close(jm(x), eager(x))
    finally:
        thunder.set_logs("")
    stats = thunder.compile_stats(jm)
    assert stats.compilations == 6 and stats.eager_fallbacks == 0
    assert "symbolic sizes of outside state refused" in caplog.text


def test_a_reduction_over_a_leading_dim_keeps_sizes_unrelated() -> None:
    """softmax over a dim that is not the last: broadcasting its reduction back compares no
    two unrelated symbolic sizes (which would constrain them, one program more where equal)."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return x.softmax(0) + x.log_softmax(1)

    jf = thunder.jit(f, cache="symbolic values")
    for shape in ((3, 5), (4, 6), (5, 5), (2, 7)):
        x = torch.randn(*shape)
        torch.testing.assert_close(jf(x), f(x))
    assert thunder.compile_stats(jf).compilations == 1


def _grow_on_module_argument(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    model.cache = torch.cat([model.cache, x], 1)
    return model.cache.cumsum(1)[:, -1] * x.sum()


@pytest.mark.parametrize("options", CACHES)
def test_a_cache_on_a_module_passed_as_an_argument(options: dict[str, str]) -> None:
    """A module's attribute is its state even where the module is an argument."""
    ours, theirs = nn.Module(), nn.Module()
    ours.cache, theirs.cache = torch.zeros(2, 0), torch.zeros(2, 0)
    jf = thunder.jit(_grow_on_module_argument, **options)
    for _ in range(CALLS):
        x = torch.randn(2, 3)
        torch.testing.assert_close(jf(ours, x), _grow_on_module_argument(theirs, x))
        torch.testing.assert_close(ours.cache, theirs.cache)
    _assert_bounded(jf)
