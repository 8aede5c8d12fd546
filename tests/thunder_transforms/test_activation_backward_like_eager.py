"""Activations stay whole in a differentiated forward and their gradients are one op each: eager's
backward kernel under torch_ops (bit for bit equal to torch.autograd), their decomposition
elsewhere; at the kinks too (hardswish at -3 and 3, hardtanh at its bounds). A call with
``inplace=True`` is the op whole, then a write of its result into the input."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder

pytestmark = pytest.mark.filterwarnings("error:thunder.jit")

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu6": F.relu6,
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "hardtanh": lambda x: F.hardtanh(x, -0.5, 0.7),
    "silu": F.silu,
    "elu": lambda x: F.elu(x, 0.7),
    "leaky_relu": lambda x: F.leaky_relu(x, 0.2),
    "softplus": lambda x: F.softplus(x, 2.0, 3.0),
    "mish": F.mish,
}
KINKS = torch.tensor([-3.0, 3.0, 0.0, 6.0, -0.5, 0.7, 1.5, 20.0])


def _input(dtype: torch.dtype) -> torch.Tensor:
    x = torch.randn(2, 4, 8, 8, dtype=dtype) * 4
    x.view(-1)[: len(KINKS)] = KINKS.to(dtype)
    return x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_kernels_equal_eager_bit_for_bit(name: str, dtype: torch.dtype) -> None:
    fn = ACTIVATIONS[name]
    jfn = thunder.jit(fn)
    for _ in range(2):
        x = _input(dtype)
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        g = torch.randn_like(x)
        got, want = jfn(x1), fn(x2)
        torch.testing.assert_close(got, want)  # mish's forward runs decomposed
        (a,), (b,) = torch.autograd.grad(got, [x1], g), torch.autograd.grad(want, [x2], g)
        assert torch.equal(a, b), (a - b).abs().max()
    backward = thunder.last_backward_traces(jfn)[-1].python()
    assert "_backward(" in backward and backward.count(" = torch") <= 2, backward


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_decompositions_match_eager(name: str, dtype: torch.dtype) -> None:
    fn = ACTIVATIONS[name]
    jfn = thunder.jit(fn, executors=("torch",))
    x = _input(dtype)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    g = torch.randn_like(x)
    (a,) = torch.autograd.grad(jfn(x1), [x1], g)
    (b,) = torch.autograd.grad(fn(x2), [x2], g)
    torch.testing.assert_close(a, b)


@pytest.mark.parametrize("name", ["relu6", "hardswish", "hardsigmoid", "silu", "elu", "mish"])
def test_in_place_activation_gradients(name: str) -> None:
    op = {"relu6": F.relu6, "hardswish": F.hardswish, "hardsigmoid": F.hardsigmoid,
          "silu": F.silu, "elu": F.elu, "mish": F.mish}[name]  # fmt: skip

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x * 2
        op(y, inplace=True)
        return y * x

    jfn = thunder.jit(fn)
    x = _input(torch.float32)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    g = torch.randn_like(x)
    (a,) = torch.autograd.grad(jfn(x1), [x1], g)
    (b,) = torch.autograd.grad(fn(x2), [x2], g)
    torch.testing.assert_close(a, b)
