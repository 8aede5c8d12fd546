"""Convolutions' gradients are eager's kernels: with the torch_ops executor the backward trace
calls ``aten.convolution_backward`` once per gradient needed (the input's gradient of a first layer
is not computed, as eager's output mask leaves it out), and the gradients match torch.autograd
for every dimension, stride, padding, dilation, groups, transposed and channels-last layout; the
decompositions (other executors) are checked by finite differences in test_autodiff_prims.py and
here against eager."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import assume, given
from hypothesis import strategies as st

import thunder

CONVS = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
TRANSPOSED = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@st.composite
def _conv_cases(draw: Any) -> dict[str, Any]:
    nd = draw(st.sampled_from([1, 2, 3]))
    groups = draw(st.sampled_from([1, 2]))
    transposed = draw(st.booleans())
    stride = draw(st.integers(1, 2))
    dilation = draw(st.integers(1, 2))
    padding = draw(st.integers(0, 1))
    kernel = draw(st.integers(1, 3))
    output_padding = draw(st.integers(0, max(0, min(stride, dilation) - 1))) if transposed else 0
    c_in, c_out = 2 * groups, draw(st.sampled_from([1, 3])) * groups
    size = draw(st.integers(kernel * dilation + 1, 7))
    if transposed:  # an output of at least one element, as torch requires
        span = (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding
        assume(span >= 0)
    return {
        "nd": nd, "groups": groups, "transposed": transposed, "stride": stride,
        "dilation": dilation, "padding": padding, "kernel": kernel, "c_in": c_in, "c_out": c_out,
        "size": size, "output_padding": output_padding, "bias": draw(st.booleans()),
        "channels_last": nd == 2 and draw(st.booleans()),
    }  # fmt: skip


def _setup(case: dict[str, Any]) -> tuple[Any, list[torch.Tensor]]:
    nd, g = case["nd"], case["groups"]
    x = torch.randn(2, case["c_in"], *[case["size"]] * nd, dtype=torch.float64)
    if case["transposed"]:
        w = torch.randn(case["c_in"], case["c_out"] // g, *[case["kernel"]] * nd, dtype=x.dtype)
    else:
        w = torch.randn(case["c_out"], case["c_in"] // g, *[case["kernel"]] * nd, dtype=x.dtype)
    if case["channels_last"]:
        x = x.to(memory_format=torch.channels_last)
    b = torch.randn(case["c_out"], dtype=x.dtype) if case["bias"] else None
    common = dict(stride=case["stride"], padding=case["padding"], dilation=case["dilation"])
    if case["transposed"]:
        op, extra = TRANSPOSED[nd], dict(output_padding=case["output_padding"], groups=g)
    else:
        op, extra = CONVS[nd], dict(groups=g)

    def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        return op(x, w, b, **common, **extra).sin()

    return fn, [x, w, b]


def _gradients(fn: Any, inputs: list[Any], needs: list[bool]) -> tuple[Any, list[Any]]:
    args = [
        None if t is None else t.detach().clone().requires_grad_(n) for t, n in zip(inputs, needs)
    ]
    out = fn(*args)
    wrt = [a for a, n in zip(args, needs) if a is not None and n]
    return out, list(torch.autograd.grad(out, wrt, torch.ones_like(out)))


@pytest.mark.parametrize("executors", [("torch_ops", "torch"), ("torch",)])
@given(case=_conv_cases(), input_needs_grad=st.booleans())
def test_convolution_gradients_match_eager(
    executors: tuple[str, ...], case: dict[str, Any], input_needs_grad: bool
) -> None:
    fn, inputs = _setup(case)
    needs = [input_needs_grad, True, True]
    want_out, want = _gradients(fn, inputs, needs)
    jfn = thunder.jit(fn, executors=executors)
    got_out, got = _gradients(jfn, inputs, needs)
    torch.testing.assert_close(got_out, want_out)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)
    backward = thunder.last_backward_traces(jfn)[-1].python()
    if "torch_ops" in executors:
        assert ("convolution_backward_input" in backward) == input_needs_grad, backward
        assert "torch_ops.convolution_backward_weight(" in backward, backward


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_low_precision_conv_block_gradients(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(8, 8, 3, groups=8)
    ).to(dtype)
    jm = thunder.jit(model)
    x = torch.randn(2, 3, 8, 8, dtype=dtype)
    jm(x).float().square().mean().backward()
    got = [p.grad for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    model(x).float().square().mean().backward()
    for a, b in zip(got, [p.grad for p in model.parameters()], strict=True):
        torch.testing.assert_close(a, b)  # the same kernels: equal up to their own rounding
