"""Ops that mutate their inputs do so exactly as eager torch does, when their trace runs."""

from __future__ import annotations

import pytest
import torch

from thunder_executors import transform_for_execution
from thunder_ir import check_trace, trace_function
from thunder_ir import ops as ltorch
from thunder_transforms import dce


@pytest.mark.parametrize("executors", [("torch",), ("torch_ops", "torch")])
@pytest.mark.parametrize("use_output", [True, False])
def test_batch_norm_training_updates_running_stats(
    executors: tuple[str, ...], use_output: bool
) -> None:
    x = torch.randn(8, 3, 5)
    w, b = torch.randn(3), torch.randn(3)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5

    def f(x, rm, rv, w, b):
        out = ltorch.batch_norm(x, rm, rv, w, b, True, 0.2, 1e-5)
        return out if use_output else None

    trace = dce(trace_function(f, x, rm, rv, w, b))
    check_trace(trace)
    fn = transform_for_execution(trace, executors=executors).python_callable()
    rm_t, rv_t = rm.clone(), rv.clone()
    got = fn(x, rm_t, rv_t, w, b)
    rm_e, rv_e = rm.clone(), rv.clone()
    want = torch.nn.functional.batch_norm(x, rm_e, rv_e, w, b, True, 0.2, 1e-5)
    if use_output:
        torch.testing.assert_close(got, want)
    torch.testing.assert_close(rm_t, rm_e)
    torch.testing.assert_close(rv_t, rv_e)


def test_in_place_tensor_methods_write_into_the_input() -> None:
    def f(a, b):
        a.add_(b)
        a.mul_(2)
        return a

    a, b = torch.randn(4), torch.randn(4)
    fn = transform_for_execution(trace_function(f, a, b)).python_callable()
    mine = a.clone()
    fn(mine, b)
    torch.testing.assert_close(mine, (a + b) * 2)


@pytest.mark.parametrize("momentum", [0.1, 0.5])
def test_instance_norm_updates_running_stats_with_the_batch_mean(momentum: float) -> None:
    x = torch.randn(4, 3, 2, 5)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5

    def f(x, rm, rv):
        return ltorch.instance_norm(x, rm, rv, None, None, True, momentum, 1e-5)

    trace = dce(trace_function(f, x, rm, rv))
    check_trace(trace)
    fn = transform_for_execution(trace).python_callable()
    rm_t, rv_t = rm.clone(), rv.clone()
    got = fn(x, rm_t, rv_t)
    rm_e, rv_e = rm.clone(), rv.clone()
    want = torch.nn.functional.instance_norm(x, rm_e, rv_e, momentum=momentum)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(rm_t, rm_e)
    torch.testing.assert_close(rv_t, rv_e)
