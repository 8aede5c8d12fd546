"""A ``view`` that eager refuses for its input's strides, where a fusion region (torch.compile)
takes it: the jitted program raises eager's error too (checked once at compile time as eager
runs the program, on fake tensors), and inputs laid out otherwise than when it was checked are
compiled anew (their strides are checked by the prologue)."""

from __future__ import annotations

import pytest
import torch

import thunder

FUSING = ("torchcompile", "torch")


def dead_view(x):
    (x + 1).t().view(-1)  # eager raises, though nothing reads it
    return x * 2


def used_view(x):
    return (x + 1).t().view(-1) * 2


def view_of_a_computed_value(x):
    return (x * 3).view(-1).exp()


@pytest.mark.parametrize("fn", [dead_view, used_view])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_a_view_eager_refuses_raises(fn, requires_grad):
    x = torch.randn(3, 4, requires_grad=requires_grad)
    with pytest.raises(RuntimeError, match="view size is not compatible") as eager:
        fn(x)
    with pytest.raises(type(eager.value), match="view size is not compatible"):
        thunder.jit(fn, executors=FUSING)(x)


def test_the_strides_of_the_inputs_decide_and_are_checked():
    jf = thunder.jit(view_of_a_computed_value, executors=FUSING)
    contiguous = torch.randn(4, 4)
    torch.testing.assert_close(jf(contiguous), view_of_a_computed_value(contiguous))
    transposed = torch.randn(4, 4).t()  # same shape and key; x * 3 is transposed in eager
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        view_of_a_computed_value(transposed)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        jf(transposed)
    torch.testing.assert_close(jf(contiguous), view_of_a_computed_value(contiguous))
    assert thunder.compile_stats(jf).cache_hits >= 1


def test_inputs_before_an_op_that_lays_out_anew_are_not_checked():
    lin = torch.nn.Linear(4, 6)

    def fn(x):
        return lin(x * 2).view(-1, 3, 2).sum(-1)

    jf = thunder.jit(fn, executors=FUSING)
    x = torch.randn(5, 4)
    torch.testing.assert_close(jf(x), fn(x))
    assert "check_strides" not in str(thunder.last_prologue_traces(jf)[-1])
    y = torch.randn(4, 5).t()  # any layout: the linear lays its result out anew
    torch.testing.assert_close(jf(y), fn(y))
    assert thunder.compile_stats(jf).cache_misses == 1
