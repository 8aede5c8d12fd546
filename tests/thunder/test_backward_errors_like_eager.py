"""Programs that write in place what autograd saved: eager's backward raises ("modified by an
inplace operation"), and so must the jitted program's; where eager's backward runs, the
gradients are eager's. Each case runs both ways on the same values."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch

import thunder


def relu_result_written(w):
    h = w.relu()
    h.add_(1)
    return h * w


def tanh_result_written(w):
    y = torch.tanh(w * 2)
    y.mul_(2)
    return y


def sigmoid_result_written_through_a_view(w):
    y = (w * 2).sigmoid()
    y[1:].mul_(2)
    return y


def exp_input_written_after(w):
    h = w * 2
    y = h.exp()  # saves its result, not h
    h.add_(1)
    return y


def sin_input_written_after(w):
    h = w * 2
    y = h.sin()  # saves h
    h.zero_()
    return y


def mul_input_written_after(w):
    h = w * 2
    y = h * h
    h.mul_(3)
    return y


def add_then_written(w):
    h = w * 2
    y = h + 1  # saves nothing
    h.zero_()
    return y


def softmax_result_written(w):
    y = torch.nn.functional.softmax(w * 2, 0)
    y.add_(1)
    return y


CASES = [
    relu_result_written,
    tanh_result_written,
    sigmoid_result_written_through_a_view,
    exp_input_written_after,
    sin_input_written_after,
    mul_input_written_after,
    add_then_written,
    softmax_result_written,
]


def _backward(fn: Any, w: torch.Tensor) -> tuple[str, Any]:
    try:
        fn(w).square().sum().backward()
    except RuntimeError as e:
        return "raise", str(e)
    return "ok", w.grad


@pytest.mark.parametrize("fn", CASES)
def test_backward_raises_where_eager_raises(fn):
    w_e = torch.randn(4, requires_grad=True)
    w_j = w_e.detach().clone().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kind_e, e = _backward(fn, w_e)
        kind_j, j = _backward(thunder.jit(fn), w_j)
    assert kind_j == kind_e, (e, j)
    if kind_e == "raise":
        assert "modified by an inplace operation" in j
    else:
        torch.testing.assert_close(j, e)
