"""A value written in place through a view, where gradients flow (functionalized for autodiff),
keeps the layout eager gives it: the caller sees eager's strides on the result, and eager's
values and gradients (found by the view fuzzer: a product of a transposed input came back
contiguous)."""

from __future__ import annotations

import pytest
import torch

import thunder


def written_through_a_view(a, w):
    c = a * w  # laid out as a is
    c.narrow(0, 0, 1).add_(1.5)
    c[:, 2].mul_(2)
    return c


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "stepped"])
def test_result_written_through_views_has_eager_strides_and_gradients(layout):
    base = torch.randn(4, 8)
    a = {"contiguous": base[:, :4], "transposed": base[:, :4].t(), "stepped": base[:, ::2]}[layout]
    a = a.contiguous() if layout == "contiguous" else a
    w = torch.randn(4, 4, requires_grad=True)
    expected = written_through_a_view(a, w)
    got = thunder.jit(written_through_a_view)(a, w)
    torch.testing.assert_close(got, expected)
    assert got.stride() == expected.stride()
    grad = torch.randn(4, 4)
    (expected_grad,) = torch.autograd.grad(expected, w, grad)
    (got_grad,) = torch.autograd.grad(got, w, grad)
    torch.testing.assert_close(got_grad, expected_grad)
