"""Torch ops on two Python numbers return 0-dim tensors (``torch.div(n, 2, rounding_mode="floor")``),
and code uses them as sizes, slice bounds, ``int()``, ``.item()`` or in an ``if`` (Longformer's
``chunks_count = torch.div(seq_len, w, rounding_mode="trunc") - 1``). Their value is a number the
trace knows: the program compiles (no read of tensor data, no eager run, no split) and under
``cache="symbolic values"`` stays one program across sizes."""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]


def _check(fn, inputs, cache, *, compilations=None):
    jf = thunder.jit(fn, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # "reads tensor data" would be a warning
        for args in inputs:
            expected = fn(*args)
            got = jf(*args)
            expected = expected if isinstance(expected, tuple) else (expected,)
            got = got if isinstance(got, tuple) else (got,)
            assert len(got) == len(expected)
            for g, e in zip(got, expected, strict=True):
                if isinstance(e, torch.Tensor):
                    assert isinstance(g, torch.Tensor)
                    assert g.dtype == e.dtype and g.shape == e.shape
                    torch.testing.assert_close(g, e, rtol=0, atol=0)
                else:
                    assert type(g) is type(e) and g == e
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0
    assert stats.split_calls == 0
    if compilations is not None and cache == "symbolic values":
        assert stats.compilations == compilations
    return jf


def _sizes(*widths):
    return [(torch.randn(2, n),) for n in widths]


@pytest.mark.parametrize("cache", CACHES)
def test_floor_div_of_a_size_as_slice_bound_and_size(cache):
    def f(x):
        h = torch.div(x.shape[1], 2, rounding_mode="floor")
        return x[:, :h] * 2, x.new_zeros((x.shape[0], h))

    _check(f, _sizes(6, 8, 11, 6), cache, compilations=1)


@pytest.mark.parametrize("cache", CACHES)
def test_trunc_div_minus_one_as_size_longformer(cache):
    def f(x):
        w = 2
        chunks_count = torch.div(x.shape[1], w, rounding_mode="trunc") - 1
        y = x[:, : chunks_count * w].reshape(x.shape[0], chunks_count, w)
        return y.sum(-1), chunks_count, x.new_ones(chunks_count)

    _check(f, _sizes(6, 8, 12, 9), cache, compilations=1)


@pytest.mark.parametrize("cache", CACHES)
def test_python_conversions_of_number_tensors(cache):
    def f(x):
        n = x.shape[1]
        h = torch.floor_divide(n, 3)
        q = torch.true_divide(n, 4)
        s = torch.add(n, 1)
        p = torch.mul(n, 2)
        out = x * int(h) + float(q) + s.item() + p.item()
        if h > 1:
            out = out + 1
        if bool(torch.sub(n, 7) == 0):
            out = out * 3
        return out, h, q, s, p

    _check(f, _sizes(5, 7, 9, 7), cache)


@pytest.mark.parametrize("cache", CACHES)
def test_float_number_tensor_rounded_as_eager(cache):
    def f(x):
        q = torch.div(x.shape[1], 3)  # float32 in eager: float() gives its rounded value
        return x + float(q), q.item(), q

    jf = _check(f, _sizes(7, 10, 7), cache)
    assert isinstance(jf(torch.randn(2, 7))[1], float)


def _written_in_place(x):
    h = torch.div(x.shape[1], 2, rounding_mode="floor")
    h.add_(1)
    v = h.view(())
    v.sub_(2)
    return x[:, :h] * 2, h


def _written_through_out(x):
    h = torch.div(x.shape[1], 2, rounding_mode="floor")
    torch.add(h, 1, out=h)
    return x.new_zeros(h), x[:, :h]


def _written_through_views(x):
    h = torch.tensor(x.shape[1])
    h.expand(()).fill_(1)
    h[...].add_(1)
    for v in h.unsqueeze(0):
        v.add_(1)
    return x[:, :h], h


@pytest.mark.parametrize("fn", [_written_in_place, _written_through_out, _written_through_views])
@pytest.mark.parametrize("cache", CACHES)
def test_number_tensor_written_is_not_stale(fn, cache):
    """A write to the tensor (itself, through out= or through a view of it) changes its value:
    never the old number."""
    jf = thunder.jit(fn, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for (x,) in _sizes(6, 8, 11, 6):
            got, expected = jf(x), fn(x)
            for g, e in zip(got, expected, strict=True):
                assert g.shape == e.shape
                torch.testing.assert_close(g, e, rtol=0, atol=0)


@pytest.mark.parametrize("cache", CACHES)
def test_number_tensor_in_tensor_math_stays_a_tensor(cache):
    def f(x):
        h = torch.div(x.shape[1], 2, rounding_mode="floor")
        return x * h, (h - 1) * 2, h.dtype == torch.int64

    _check(
        f,
        [(torch.randn(3, 4, dtype=torch.float16),), (torch.randn(3, 6, dtype=torch.float16),)],
        cache,
    )


@pytest.mark.parametrize("cache", CACHES)
def test_number_operands_as_torch_converts_them(cache):
    """A float32 tensor compared with 0.1 compares with 0.1 made a float32 (eager says equal); an
    int8 tensor wraps around; each answer is eager's."""

    def f(x):
        t = torch.tensor(0.1)
        small = torch.tensor(100, dtype=torch.int8) + 100  # wraps to -56 in eager
        q = torch.true_divide(x.shape[1], 10)
        return x + 1 if t == 0.1 else x - 1, int(small), float(q * 3), bool(q * 10 == x.shape[1])

    jf = thunder.jit(f, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for (x,) in _sizes(3, 7, 3):
            got, expected = jf(x), f(x)
            torch.testing.assert_close(got[0], expected[0], rtol=0, atol=0)
            assert got[1:] == expected[1:]


@pytest.mark.parametrize("cache", CACHES)
def test_user_made_number_tensor_as_size(cache):
    def f(x):
        n = torch.tensor(x.shape[1]) - 1
        m = torch.maximum(n, torch.tensor(2))
        return x[:, 1:n], x.new_zeros(m), (n >= 3).item()

    _check(f, _sizes(4, 6, 9), cache, compilations=1)


@pytest.mark.parametrize("cache", CACHES)
def test_gradients_through_number_tensor_sizes(cache):
    def f(x):
        h = torch.div(x.shape[1], 2, rounding_mode="floor")
        return (x[:, :h] * h).sum() + x.new_ones(x.shape[0], h).mul(x[:, -h:]).sum()

    jf = thunder.jit(f, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        for n in (4, 7, 10):
            x = torch.randn(3, n, requires_grad=True)
            xe = x.detach().clone().requires_grad_()
            got, expected = jf(x), f(xe)
            got.backward()
            expected.backward()
            torch.testing.assert_close(got, expected)
            torch.testing.assert_close(x.grad, xe.grad)
    assert thunder.compile_stats(jf).eager_fallbacks == 0
