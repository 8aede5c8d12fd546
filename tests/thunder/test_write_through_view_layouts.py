"""A write through a view of a tensor the program computed keeps that tensor's layout, as eager's
in-place write does, also when its sizes are symbols (``cache="symbolic values"``)."""

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]


def narrow_write(a, w):
    c = a * 2 + 1
    c.narrow(0, 0, 1).add_(1.5)
    return c, c * w


def column_write(a, w):
    c = a.exp()
    c[:, :2].mul_(w[:, :2])
    return c, c.sum(0)


def select_write(a, w):
    c = a + w
    c.select(1, 1).copy_(a[:, 0] * 3)
    return c * 2, c


def transposed_view_write(a, w):
    c = a * w
    c.t()[1:].zero_()
    return c, c.square().sum()


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", [narrow_write, column_write, select_write, transposed_view_write])
def test_write_through_a_view_keeps_layout(fn, cache):
    jf = thunder.jit(fn, cache=cache)
    for rows, cols in ((4, 3), (5, 3), (3, 6), (6, 4)):
        a = torch.randn(cols, rows).t()  # a column-major input: its results are too
        w = torch.randn(rows, cols, requires_grad=True)
        expected = fn(a, w)
        got = jf(a, w)
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e)
            assert g.stride() == e.stride(), (fn.__name__, cache, (rows, cols))
        (ge,) = torch.autograd.grad(sum(t.sum() for t in expected), w)
        (gg,) = torch.autograd.grad(sum(t.sum() for t in got), w)
        torch.testing.assert_close(gg, ge)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


@pytest.mark.parametrize("cache", CACHES)
def test_write_through_a_view_of_an_empty_tensor(cache):
    jf = thunder.jit(column_write, cache=cache)
    for rows, cols in ((4, 3), (0, 3), (5, 3)):
        a = torch.randn(cols, rows).t()
        w = torch.randn(rows, cols)
        expected, got = column_write(a, w), jf(a, w)
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e)
    assert thunder.compile_stats(jf).eager_fallbacks == 0
