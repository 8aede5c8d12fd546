"""Rotary embeddings as ``roll(x) * sin_signed`` (``thunder_transforms/rotary.py``): values and
gradients bit for bit eager's, in every float dtype, and nothing rewritten that something else
reads or writes."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import thunder


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> Any:
    """transformers' ``apply_rotary_pos_emb`` (Llama, Mistral, Qwen, Gemma)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def two_layers(q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> Any:
    """Two layers sharing one ``cos``/``sin``, as a decoder computes them once per forward."""
    emb = torch.cat((pos, pos), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    q1, k1 = apply_rotary(q, k, cos, sin)
    return apply_rotary(q1 * 2, k1 + 1, cos, sin)


def partial(q: torch.Tensor, k: torch.Tensor, pos: torch.Tensor) -> Any:
    """GPT-NeoX and Phi: the first ``rotary_ndims`` features rotate, the rest pass."""
    n = pos.shape[-1] * 2
    emb = torch.cat((pos, pos), dim=-1)
    cos, sin = emb.cos().unsqueeze(1), emb.sin().unsqueeze(1)
    q_rot, q_pass = q[..., :n], q[..., n:]
    k_rot, k_pass = k[..., :n], k[..., n:]
    q_embed = q_rot * cos + rotate_half(q_rot) * sin
    k_embed = k_rot * cos + rotate_half(k_rot) * sin
    return torch.cat([q_embed, q_pass], dim=-1), torch.cat([k_embed, k_pass], dim=-1)


def _inputs(fn: Any, dtype: torch.dtype, seed: int = 0, d: int = 8) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    rot = d // 2 if fn is partial else d  # partial rotates half of the head
    q = torch.randn(2, 8, 4, d, generator=g).transpose(1, 2).to(dtype)  # (2, 4 heads, 8, d)
    k = torch.randn(2, 8, 2, d, generator=g).transpose(1, 2).to(dtype)
    pos = (torch.arange(8.0)[:, None] * torch.rand(rot // 2, generator=g))[None].to(dtype)
    return q, k, pos


def _ops(jitted: Any) -> list[str]:
    return [b.sym.name for b in thunder.last_traces(jitted)[-1].bound_symbols]


@pytest.mark.parametrize("fn", [two_layers, partial])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_rotary_embeddings_run_as_roll_with_eagers_bits(fn: Any, dtype: torch.dtype) -> None:
    jitted = thunder.jit(fn)
    for seed in range(3):
        args = _inputs(fn, dtype, seed)
        with torch.no_grad():
            got, want = jitted(*args), fn(*args)
        for g, w in zip(got, want, strict=True):
            assert torch.equal(g, w) and g.stride() == w.stride()
    ops = _ops(jitted)
    rotations = 4 if fn is two_layers else 2
    assert ops.count("roll") == rotations, ops
    assert ops.count("neg") == 1, ops  # sin's half, negated once for every rotation


@pytest.mark.parametrize("fn", [two_layers, partial])
def test_rotary_gradients_are_eagers(fn: Any) -> None:
    jitted = thunder.jit(fn)
    q, k, pos = _inputs(fn, torch.float32, 5)
    grads = []
    for f in (jitted, fn):
        leaves = [t.detach().clone().requires_grad_() for t in (q, k, pos)]
        out = f(*leaves)
        cotangents = [
            torch.randn(o.shape, generator=torch.Generator().manual_seed(i))
            for i, o in enumerate(out)
        ]
        grads.append(torch.autograd.grad(out, leaves, cotangents))
    for g, w in zip(*grads, strict=True):
        assert torch.equal(g, w)
    assert "roll" in [b.sym.name for t in thunder.last_traces(jitted) for b in t.bound_symbols]


def test_what_the_rewrite_would_change_keeps_the_ops() -> None:
    q, k, pos = _inputs(two_layers, torch.float32)
    emb = torch.cat((pos, pos), dim=-1)
    sin = emb.sin().unsqueeze(1)

    def rotated_returned(q: torch.Tensor, sin: torch.Tensor) -> Any:
        r = rotate_half(q)
        return r * sin, r

    def other_split(q: torch.Tensor, sin: torch.Tensor) -> Any:
        return torch.cat((-q[..., 3:], q[..., :3]), dim=-1)[..., :5] * sin[..., :5]

    def sin_broadcast_over_features(q: torch.Tensor, sin: torch.Tensor) -> Any:
        return rotate_half(q) * sin[..., :1]

    def sin_written_between(q: torch.Tensor, sin: torch.Tensor) -> Any:
        first = rotate_half(q) * sin
        sin.mul_(2)
        return first, rotate_half(q * 3) * sin

    for fn in (rotated_returned, other_split, sin_broadcast_over_features, sin_written_between):
        s1, s2 = sin.clone(), sin.clone()
        jitted = thunder.jit(fn)
        with torch.no_grad():
            got, want = jitted(q, s1), fn(q, s2)
        got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
        for g, w in zip(got, want, strict=True):
            assert torch.equal(g, w), fn.__name__
        assert torch.equal(s1, s2)
        assert "roll" not in _ops(jitted), (fn.__name__, _ops(jitted))


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from([2, 4, 6, 16]),
    st.integers(1, 3),
    st.booleans(),
    st.sampled_from([torch.float32, torch.bfloat16]),
    st.integers(0, 2**16),
)
def test_any_head_size_and_broadcast_matches_eager(
    d: int, heads: int, unsqueezed: bool, dtype: torch.dtype, seed: int
) -> None:
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(2, heads, 5, d, generator=g) * 100).to(dtype)
    x.view(-1)[:4] = torch.tensor([0.0, -0.0, float("inf"), float("nan")]).to(dtype)
    sin = torch.randn(2, 5, d, generator=g).to(dtype)

    def f(x: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        s = sin.unsqueeze(1) if unsqueezed else sin[:, None]
        return rotate_half(x) * s

    with torch.no_grad():
        got, want = thunder.jit(f)(x, sin), f(x, sin)
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    numbers = ~want.isnan()
    assert torch.equal(got.signbit()[numbers], want.signbit()[numbers])
