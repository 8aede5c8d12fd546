"""Ops that crashed, filled or computed otherwise than eager: in-place methods running a Python
callable on the values (``apply_``, ``map_``, ``map2_``), ``empty`` factories under
``torch.use_deterministic_algorithms``, slices with symbolic strides in backwards of pooling,
and ``scaled_dot_product_attention`` given both ``attn_mask`` and ``is_causal``. Each compares
thunder.jit with eager on fresh inputs over several calls (a call that runs eagerly after an
internal error fails: tests/conftest.py)."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
import torch.nn.functional as F

import thunder


def _quiet(jf, *args):
    """``jf(*args)``, its warnings that parts run split by torch left out; fails where thunder
    ran the call eagerly after failing to trace it (eager's result would hide the bug)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = jf(*args)
    reports = [str(w.message) for w in caught if "please report" in str(w.message)]
    assert not reports, reports
    return out


# In-place methods that call a Python function on each element -------------------------------


def _apply(x):
    return x.clone().apply_(lambda v: v * 2 + 1)


def _map(x):
    return x.clone().map_(x.flip(0), lambda a, b: a * b - 1)


def _map2(x):
    return x.clone().map2_(x.flip(0), x.flip(1), lambda a, b, c: a + b * c)


@pytest.mark.parametrize("fn", [_apply, _map, _map2], ids=["apply_", "map_", "map2_"])
def test_in_place_methods_running_python_callables_run_through_torch(fn):
    jf = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(4, 3)
        torch.testing.assert_close(_quiet(jf, x), fn(x))


# empty factories under torch.use_deterministic_algorithms -------------------------------------


_EMPTY_FACTORIES = {
    "new_empty": lambda x: x.new_empty(3),
    "new_empty_list": lambda x: x.new_empty([2, 3]),
    "new_empty_varargs_int": lambda x: x.new_empty(2, 3, dtype=torch.int32),
    "empty_varargs": lambda x: torch.empty(2, 3),
    "empty_varargs_int": lambda x: torch.empty(2, 3, dtype=torch.int64),
    "empty_like": lambda x: torch.empty_like(x),
    "new_empty_strided": lambda x: x.new_empty_strided((2, 3), (1, 2)),
    "empty_strided": lambda x: torch.empty_strided((2, 3), (1, 2)),
    "empty_permuted": lambda x: torch.empty_permuted((2, 3), (1, 0)),
}


@pytest.mark.parametrize("name", list(_EMPTY_FACTORIES))
def test_empty_factories_are_filled_as_eager_under_deterministic_algorithms(name):
    fn = _EMPTY_FACTORIES[name]
    jf = thunder.jit(fn)
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        for _ in range(3):
            x = torch.randn(3)
            got, want = _quiet(jf, x), fn(x)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.stride() == want.stride()
            # NaN for floating types, the largest value for integers: as eager fills them
            torch.testing.assert_close(got, want, equal_nan=True)
    finally:
        torch.use_deterministic_algorithms(before)
    x = torch.randn(3)
    got = _quiet(jf, x)  # determinism off again: any values, eager's shape and dtype
    assert got.shape == fn(x).shape and got.dtype == fn(x).dtype


# Symbolic strides of the backward's slices ---------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.interpolate(x, scale_factor=0.5, mode="area"),
        lambda x: F.adaptive_avg_pool1d(x.flatten(2), 3),
        lambda x: x[:, :, ::2, 1::3] * 2,
    ],
    ids=["interpolate_area", "adaptive_avg_pool1d", "strided_slice"],
)
def test_backward_slices_with_symbolic_sizes_match_eager(fn):
    jf = thunder.jit(fn, cache="symbolic values")
    for n in (3, 4, 5, 6):
        x = torch.randn(1, 2, 2 * n, n + 1, requires_grad=True)
        got, want = _quiet(jf, x), fn(x)
        torch.testing.assert_close(got, want)
        g = torch.randn_like(want)
        (gx,) = torch.autograd.grad(got, x, g)
        (wx,) = torch.autograd.grad(want, x, g)
        torch.testing.assert_close(gx, wx)


# scaled_dot_product_attention with attn_mask and is_causal ------------------------------------


def _causal_attention(q, k, v, m):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=True)


@pytest.mark.parametrize("mask_dtype", [torch.bool, torch.float32])
@pytest.mark.parametrize("lengths", [(4, 4), (3, 5), (5, 3)], ids=str)
def test_sdpa_with_mask_and_is_causal_matches_eager(mask_dtype, lengths):
    L, S = lengths
    jf = thunder.jit(_causal_attention)
    for _ in range(3):
        q = torch.randn(2, 2, L, 8, requires_grad=True)
        k = torch.randn(2, 2, S, 8, requires_grad=True)
        v = torch.randn(2, 2, S, 8, requires_grad=True)
        m = torch.randn(L, S)
        m = m > 0 if mask_dtype is torch.bool else m
        got, want = _quiet(jf, q, k, v, m), _causal_attention(q, k, v, m)
        torch.testing.assert_close(got, want)
        g = torch.randn_like(want)
        got_grads = torch.autograd.grad(got, (q, k, v), g)
        want_grads = torch.autograd.grad(want, (q, k, v), g)
        for a, b in zip(got_grads, want_grads):
            torch.testing.assert_close(a, b)


def test_sdpa_with_mask_and_is_causal_raises_where_eager_does():
    jf = thunder.jit(_causal_attention)
    q = torch.randn(2, 3, 4)  # 3-D: torch's math kernel, which refuses the pair
    mask = torch.ones(3, 3, dtype=torch.bool)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
        _causal_attention(q, q, q, mask)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
        jf(q, q, q, mask)
    # A mask that requires grad: also torch's math kernel.
    q4 = torch.randn(2, 2, 4, 8)
    m = torch.randn(4, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
        _causal_attention(q4, q4, q4, m)
    with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set"):
        jf(q4, q4, q4, m)


_WEIGHTED_LOSSES = {
    "cross_entropy": lambda x, t, w: F.cross_entropy(x, t.argmax(1), weight=w),
    "cross_entropy_smoothed": lambda x, t, w: F.cross_entropy(
        x, t.argmax(1), weight=w, label_smoothing=0.1
    ),
    "nll_loss": lambda x, t, w: F.nll_loss(x.log_softmax(1), t.argmax(1), weight=w),
    "nll_loss_2d": lambda x, t, w: F.nll_loss(
        x.log_softmax(1)[..., None, None].expand(-1, -1, 2, 2),
        t.argmax(1)[:, None, None].expand(-1, 2, 2),
        weight=w,
    ),
    "binary_cross_entropy": lambda x, t, w: F.binary_cross_entropy(x.sigmoid(), t, weight=w),
    "bce_with_logits_weight": lambda x, t, w: F.binary_cross_entropy_with_logits(x, t, weight=w),
    "bce_with_logits_pos_weight": lambda x, t, w: F.binary_cross_entropy_with_logits(
        x, t, pos_weight=w
    ),
}


@pytest.mark.parametrize("name", list(_WEIGHTED_LOSSES))
def test_loss_weights_that_require_grad_are_refused_as_eager(name: str) -> None:
    """Eager's kernels have no derivative for these weights: in grad mode a weight that
    requires grad (a parameter, or computed from one) raises; under no_grad it computes."""
    loss = _WEIGHTED_LOSSES[name]
    jf = thunder.jit(loss)
    for seed in range(2):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(4, 5, generator=g, requires_grad=True)
        t = torch.rand(4, 5, generator=g)
        p = torch.rand(5, generator=g, requires_grad=True)
        for w in (p, p * 2):
            with pytest.raises(RuntimeError, match="is not differentiable with respect to") as e:
                loss(x, t, w)
            with pytest.raises(RuntimeError, match=re.escape(str(e.value))):
                jf(x, t, w)
        with torch.no_grad():
            torch.testing.assert_close(jf(x, t, p), loss(x, t, p))
        w = p.detach()
        out, expected = jf(x, t, w), loss(x, t, w)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(
            torch.autograd.grad(out, x)[0], torch.autograd.grad(expected, x)[0]
        )


def test_probability_targets_take_a_weight_that_requires_grad() -> None:
    def f(x: torch.Tensor, t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(x, t.softmax(1), weight=w)

    jf = thunder.jit(f)
    x, t = torch.randn(4, 5, requires_grad=True), torch.randn(4, 5)
    w = torch.rand(5, requires_grad=True)
    out, expected = jf(x, t, w), f(x, t, w)
    torch.testing.assert_close(out, expected)
    for a, b in zip(torch.autograd.grad(out, (x, w)), torch.autograd.grad(expected, (x, w))):
        torch.testing.assert_close(a, b)
