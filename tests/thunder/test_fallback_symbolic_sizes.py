"""Torch callables no op mirrors (the torch fallback) keep symbolic sizes symbolic: their fake run
uses torch's symbolic shapes, its output sizes become expressions of the trace and its guards
constraints, so a new length does not recompile (``torch.diff`` in transformers' ``generate``
with ``use_cache=False`` recompiled every step). Where torch itself specializes a size, or the
output's size has no expression in the IR, the call is specialized as before: correct values,
one program per size."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder

# Lengths for the last dimension; torch's guards on diff exclude 2 (a result of length 1).
LENGTHS = (5, 6, 7, 9, 12, 16)

OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "diff": lambda x: torch.diff(x, dim=-1),
    "diff_n2_prepend": lambda x: torch.diff(x, n=2, dim=-1, prepend=x[:, :1] * 3),
    "cdist": lambda x: torch.cdist(x.mT, x.mT),
    "pdist": lambda x: F.pdist(x.mT),
    "logcumsumexp": lambda x: torch.logcumsumexp(x, 1),
    "cumulative_trapezoid": lambda x: torch.cumulative_trapezoid(x),
    "pad_reflect": lambda x: F.pad(x[None], (2, 1), mode="reflect")[0],
    # a size passed as a number: symbolic in the fake run too
    "pad_reflect_by_size": lambda x: F.pad(x[None], (x.shape[-1] // 2, 1), mode="reflect")[0],
}


def _fallback_lines(jf: Callable[..., object]) -> list[str]:
    return [
        line
        for line in str(thunder.last_traces(jf)[0]).splitlines()
        if "torch_fallback" in line and not line.lstrip().startswith("#")
    ]


def _check_like_eager(
    f: Callable[[torch.Tensor], torch.Tensor], jf: Callable[..., torch.Tensor], n: int
) -> None:
    x = torch.randn(3, n, dtype=torch.float64, requires_grad=True)
    got, want = jf(x), f(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)
    g = torch.randn_like(want)
    (got_grad,) = torch.autograd.grad(got, x, g)
    (want_grad,) = torch.autograd.grad(want, x, g)
    torch.testing.assert_close(got_grad, want_grad)


@pytest.mark.parametrize("name", sorted(OPS))
def test_symbolic_values_compile_once_for_all_lengths(name: str) -> None:
    f = OPS[name]
    jf = thunder.jit(f, cache="symbolic values")
    for n in LENGTHS:
        _check_like_eager(f, jf, n)
    assert _fallback_lines(jf), "the call no longer goes through the torch fallback"
    stats = thunder.compile_stats(jf)
    assert stats.compilations == 1, stats.last_recompile_reason
    assert stats.eager_fallbacks == 0


@pytest.mark.parametrize("name", ["diff", "diff_n2_prepend", "cdist", "pad_reflect"])
def test_default_cache_stops_recompiling_once_sizes_are_symbolic(name: str) -> None:
    f = OPS[name]
    jf = thunder.jit(f)
    counts = []
    for n in LENGTHS:
        _check_like_eager(f, jf, n)
        counts.append(thunder.compile_stats(jf).compilations)
    # two programs for the first two lengths, then one symbolic program for all others
    assert counts[-1] <= 3 and counts[-1] == counts[2], counts
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_fallback_output_size_is_an_expression_of_the_input_sizes() -> None:
    jf = thunder.jit(lambda x: torch.diff(x, n=2, dim=-1), cache="symbolic values")
    jf(torch.randn(4, 9))
    (line,) = _fallback_lines(jf)
    assert "f32[x_size0, i" in line, line  # not f32[4, 7]
    out = jf(torch.randn(5, 13))
    assert out.shape == (5, 11)
    assert thunder.compile_stats(jf).compilations == 1


def test_size_torch_specializes_recompiles_with_correct_values() -> None:
    """torch's kron computes with the sizes' values (its guards fix them): one program per
    size, each right."""
    f = lambda x: torch.kron(x, x[:2])  # noqa: E731
    jf = thunder.jit(f, cache="symbolic values")
    for i, n in enumerate((3, 4, 6)):
        _check_like_eager(f, jf, n)
        assert thunder.compile_stats(jf).compilations == i + 1


@torch.library.custom_op("thunder_test_fallback_sizes::ceil_third", mutates_args=())
def _ceil_third(x: torch.Tensor) -> torch.Tensor:
    return x[: math.ceil(x.shape[0] / 3)] * 2


@_ceil_third.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty((math.ceil(x.shape[0] / 3), *x.shape[1:]))


@torch.library.custom_op("thunder_test_fallback_sizes::head_at_least_3", mutates_args=())
def _head_at_least_3(x: torch.Tensor) -> torch.Tensor:
    return x[: max(x.shape[0] - 4, 3)] * 2


@_head_at_least_3.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return x.new_empty((torch.sym_max(x.shape[0] - 4, 3), *x.shape[1:]))


def test_output_size_without_an_expression_is_specialized() -> None:
    """``ceil(n / 3)`` (a true division) has no expression in the IR: the call is specialized
    to each size, and right for each."""
    f = lambda x: _ceil_third(x) + 1  # noqa: E731
    jf = thunder.jit(f, cache="symbolic values")
    lengths = (5, 7, 9, 12)
    for n in lengths:
        x = torch.randn(n, 4)
        torch.testing.assert_close(jf(x), f(x))
    assert thunder.compile_stats(jf).compilations == len(lengths)


def test_max_of_sizes_holds_while_the_same_argument_is_larger() -> None:
    """``max(n - 4, 3)``: the argument larger for this call, with the constraint that it stays
    so; a length for which the other is larger compiles once more."""
    f = lambda x: _head_at_least_3(x) + 1  # noqa: E731
    jf = thunder.jit(f, cache="symbolic values")
    counts = []
    for n in (8, 9, 11, 14, 5, 6, 3, 7):
        x = torch.randn(n, 4)
        got, want = jf(x), f(x)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want)
        counts.append(thunder.compile_stats(jf).compilations)
    assert counts == [1, 1, 1, 1, 2, 2, 2, 2], counts


def _gpt2() -> torch.nn.Module:
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=128
    )
    return transformers.GPT2LMHeadModel(config).eval()


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_generate_without_kv_cache_does_not_recompile_every_step(cache: str | None) -> None:
    """Without a KV cache every step's forward sees one more token; transformers computes the
    position ids with ``torch.diff`` (a fallback), which pinned each length."""
    model = _gpt2()
    prompt = torch.randint(0, 128, (1, 7))
    options = {"max_new_tokens": 6, "min_new_tokens": 6, "do_sample": False, "use_cache": False}
    eager_forward = model.forward
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = model.generate(prompt, **options)
        jitted = (
            thunder.jit(eager_forward) if cache is None else thunder.jit(eager_forward, cache=cache)
        )
        model.forward = jitted
        try:
            got = model.generate(prompt, **options)
        finally:
            model.forward = eager_forward
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert _fallback_lines(jitted), "the forward no longer uses a torch fallback"
    stats = thunder.compile_stats(jitted)
    assert stats.eager_fallbacks == 0
    # six forwards: two specialized then one symbolic program (default cache), or one
    assert stats.compilations <= (3 if cache is None else 1), stats.last_recompile_reason
