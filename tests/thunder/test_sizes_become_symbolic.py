"""The default cache compiles a program per tensor size until sizes keep changing: once two
programs serve other sizes, a call whose inputs differ from them in sizes only compiles with
``cache="symbolic values"``, and that program serves every later size (a decoding step's longer
KV cache, batches of other lengths), as eager on every call."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch

import thunder
from thunder.errors import JitError


def _scaled_softmax(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x @ w / x.shape[-1] ** 0.5, -1) * x.shape[0]


def test_a_third_size_compiles_one_program_for_every_size() -> None:
    jf = thunder.jit(_scaled_softmax)
    w = torch.randn(4, 4)
    for n in (3, 5, 7, 2, 9, 11, 6, 13, 17, 3, 5):
        x = torch.randn(n, 4)
        torch.testing.assert_close(jf(x, w), _scaled_softmax(x, w))
    stats = thunder.compile_stats(jf)
    assert stats.compilations == 3  # sizes 3 and 5 specialized, then one for every size
    assert stats.eager_fallbacks == 0


def test_two_sizes_stay_specialized() -> None:
    """Train and eval batches of two sizes: two programs of constant sizes, as before."""
    jf = thunder.jit(_scaled_softmax)
    w = torch.randn(4, 4)
    for n in (8, 3, 8, 3, 8):
        x = torch.randn(n, 4)
        torch.testing.assert_close(jf(x, w), _scaled_softmax(x, w))
    assert thunder.compile_stats(jf).compilations == 2
    assert thunder.compile_stats(jf).last_traces[0].args[0].shape == (3, 4)


class _Cache:
    def __init__(self) -> None:
        self.k = torch.zeros(1, 0, 4)


class _Decoder(torch.nn.Module):
    """A KV cache held in an object the program grows: its sizes are read through the object."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, cache: _Cache) -> torch.Tensor:
        k = self.proj(x)
        cache.k = torch.cat([cache.k, k], 1)
        att = torch.softmax(x @ cache.k.transpose(1, 2), -1)
        return att @ cache.k


def test_a_growing_cache_read_through_an_object_compiles_three_programs() -> None:
    torch.manual_seed(0)
    model = _Decoder()
    jm = thunder.jit(model)
    ours, theirs = _Cache(), _Cache()
    for _ in range(12):
        x = torch.randn(1, 1, 4)
        torch.testing.assert_close(jm(x, ours), model(x, theirs))
        torch.testing.assert_close(ours.k, theirs.k)
    stats = thunder.compile_stats(jm)
    assert stats.compilations == 3 and stats.eager_fallbacks == 0


def test_training_on_batches_of_many_lengths_matches_eager() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    ref.load_state_dict(net.state_dict())
    jnet = thunder.jit(net)
    for n in (4, 9, 5, 12, 7, 4):
        x = torch.randn(n, 6)
        got, want = jnet(x), ref(x)
        torch.testing.assert_close(got, want)
        got.pow(2).mean().backward()
        want.pow(2).mean().backward()
        for p, q in zip(net.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
            p.grad = q.grad = None
    assert thunder.compile_stats(jnet).compilations == 3


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_a_cache_given_is_kept(cache: str) -> None:
    jf = thunder.jit(_scaled_softmax, cache=cache)
    w = torch.randn(4, 4)
    for n in (3, 5, 7, 9):
        x = torch.randn(n, 4)
        torch.testing.assert_close(jf(x, w), _scaled_softmax(x, w))
    assert thunder.compile_stats(jf).compilations == (4 if cache == "constant values" else 1)


def test_other_changes_keep_constant_values() -> None:
    """A dtype that changes is no size: each dtype keeps a program of constant sizes."""
    jf = thunder.jit(lambda x, k: x * k)
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        x = torch.randn(3).to(dtype)
        torch.testing.assert_close(jf(x, 2), x * 2)
    stats = thunder.compile_stats(jf)
    assert stats.compilations == 4
    assert stats.last_traces[0].args[0].shape == (3,)


def test_a_program_symbolic_values_refuse_compiles_with_constant_values(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import thunder.jit_function as jit_function
    from thunder.options import CACHE_OPTIONS

    compile_entry = jit_function.compile_entry

    def refusing(fn: Any, args: Any, kwargs: Any, options: Any, *rest: Any) -> Any:
        if options.cache is CACHE_OPTIONS.SYMBOLIC_VALUES:
            raise JitError("thunder.jit: refused with symbolic values (this test)")
        return compile_entry(fn, args, kwargs, options, *rest)

    monkeypatch.setattr(jit_function, "compile_entry", refusing)
    jf = thunder.jit(_scaled_softmax)
    w = torch.randn(4, 4)
    thunder.set_logs("recompiles")
    try:
        with caplog.at_level(logging.INFO, logger="thunder"):
            for n in (3, 5, 7, 9, 3):
                x = torch.randn(n, 4)
                torch.testing.assert_close(jf(x, w), _scaled_softmax(x, w))
    finally:
        thunder.set_logs("")
    stats = thunder.compile_stats(jf)
    assert stats.compilations == 4 and stats.eager_fallbacks == 0 and stats.cache_hits == 1
    assert "symbolic values refused" in caplog.text
    assert "compiling with cache='symbolic values' from now on" in caplog.text


def test_a_program_raising_after_the_switch_raises_eagers_error() -> None:
    def f(x: torch.Tensor, k: int) -> torch.Tensor:
        if k == 4:
            raise ValueError("boom")
        return x * k

    jf = thunder.jit(f)
    for k in (1, 2, 3):
        x = torch.randn(k + 1)
        torch.testing.assert_close(jf(x, k), f(x, k))
    with pytest.raises(ValueError, match="boom"):
        jf(torch.randn(5), 4)
    x = torch.randn(7)
    torch.testing.assert_close(jf(x, 6), f(x, 6))
