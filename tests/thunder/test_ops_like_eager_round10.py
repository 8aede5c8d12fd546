"""Calls against eager, round 10: the rounding of float16/bfloat16 activation gradients
(tanhshrink and softsign, eager's Python composites; glu and logsigmoid, whose CPU backward
kernels read a rounded sigmoid or buffer; gelu, whose CPU float16 kernel is not its float32 one),
the sign of masked_select's zero gradients, and None where torch's builtins take only a bool."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder

CACHES = ["constant values", "symbolic values"]
LOW = [torch.float16, torch.bfloat16]


def _same_with_zero_signs(expected: torch.Tensor, got: torch.Tensor) -> None:
    """Equal up to rounding (NaN where eager's is NaN), and every zero of eager's with its sign."""
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, equal_nan=True)
    zeros = expected == 0
    assert torch.equal(torch.signbit(got)[zeros], torch.signbit(expected)[zeros])


def _forward_and_grad_like_eager(
    fn: Callable[..., torch.Tensor],
    jfn: Callable[..., torch.Tensor],
    x: torch.Tensor,
    *rest: object,
) -> None:
    ex, jx = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected, got = fn(ex, *rest), jfn(jx, *rest)
    _same_with_zero_signs(expected, got)
    g = torch.randn_like(expected)
    g.view(-1)[::3] = -0.0
    (ge,) = torch.autograd.grad(expected, ex, g)
    (gj,) = torch.autograd.grad(got, jx, g)
    _same_with_zero_signs(ge, gj)


# -- float16/bfloat16 activation gradients ------------------------------------------------------

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tanhshrink": F.tanhshrink,
    "softsign": F.softsign,
    "glu_last": F.glu,
    "glu_first": lambda x: F.glu(x, 0),
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
    "silu": F.silu,
    "mish": F.mish,
    "softplus": lambda x: F.softplus(x, beta=2.0, threshold=1.0),
    "elu": lambda x: F.elu(x, 0.5),
    "selu": F.selu,
    "celu": lambda x: F.celu(x, 2.0),
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "logsigmoid": F.logsigmoid,
    "hardtanh": lambda x: F.hardtanh(x, -2.0, 1.5),
    "relu6": F.relu6,
    "threshold": lambda x: F.threshold(x, 0.5, -1.0),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("dtype", [*LOW, torch.float32])
@pytest.mark.parametrize("name", list(ACTIVATIONS))
def test_low_precision_activation_gradients_round_as_eager(
    name: str, dtype: torch.dtype, cache: str
) -> None:
    fn = ACTIVATIONS[name]
    jfn = thunder.jit(fn, cache=cache)
    for n in (16, 16, 24):
        _forward_and_grad_like_eager(fn, jfn, (torch.randn(n, 32) * 4).to(dtype))


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name", ["tanhshrink", "softsign", "glu_last", "gelu", "logsigmoid"])
def test_low_precision_activation_gradients_match_eager_bit_for_bit(
    name: str, dtype: torch.dtype
) -> None:
    # eager's formulas op by op, rounded where eager rounds (gelu: eager's kernel on eager's
    # dtypes; glu and logsigmoid: what the CPU kernels save or write first, rounded)
    fn = ACTIVATIONS[name]
    jfn = thunder.jit(fn)
    for _ in range(3):
        x = (torch.randn(16, 64) * 4).to(dtype)
        ex, jx = x.clone().requires_grad_(), x.clone().requires_grad_()
        expected = fn(ex)
        g = torch.randn_like(expected)
        (ge,) = torch.autograd.grad(expected, ex, g)
        (gj,) = torch.autograd.grad(jfn(jx), jx, g)
        assert torch.equal(ge, gj)
        assert torch.equal(torch.signbit(ge), torch.signbit(gj))


# -- masked_select's gradient: written into zeros -----------------------------------------------

SELECTIONS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "masked_select": torch.masked_select,
    "method": lambda x, m: (x * 2).masked_select(m),
    "mask_broadcast": lambda x, m: torch.masked_select(x, m[0]),
    "input_broadcast": lambda x, m: torch.masked_select(x[0], m),
    # indexing adds the gradient into zeros in eager (index_put with accumulate): +0 for -0
    "getitem": lambda x, m: x[m],
    "getitem_rows": lambda x, m: x[m[:, 0]],
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("name", list(SELECTIONS))
def test_masked_select_gradient_zero_signs_like_eager(
    name: str, dtype: torch.dtype, cache: str
) -> None:
    fn = SELECTIONS[name]
    jfn = thunder.jit(fn, cache=cache)
    for n in (4, 4, 6):
        mask = torch.rand(n, 5) > 0.4
        _forward_and_grad_like_eager(fn, jfn, torch.randn(n, 5, dtype=dtype), mask)


# -- None for a bool parameter ------------------------------------------------------------------

NONE_FOR_BOOL: dict[str, Callable[[torch.Tensor], object]] = {
    "dropout": lambda x: F.dropout(x, 0.5, None),
    "dropout_keyword": lambda x: F.dropout(x, 0.5, training=None),
    "torch.dropout": lambda x: torch.dropout(x, 0.5, None),
    "sum_keepdim": lambda x: torch.sum(x, 0, keepdim=None),
    "amax": lambda x: torch.amax(x, 0, None),
    "argmax": lambda x: torch.argmax(x, 0, None),
    "kl_div": lambda x: F.kl_div(x, x, reduction="sum", log_target=None),
}


@pytest.mark.parametrize("name", list(NONE_FOR_BOOL))
def test_none_for_a_bool_parameter_raises_like_eager(name: str) -> None:
    fn = NONE_FOR_BOOL[name]
    x = torch.randn(3, 4)
    with pytest.raises(TypeError) as eager:
        fn(x)
    with pytest.raises(TypeError) as got:
        thunder.jit(fn)(x)
    assert str(got.value) == str(eager.value)


@pytest.mark.parametrize("cache", CACHES)
def test_bool_parameters_given_bools_still_compile(cache: str) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, 0.5, False) + torch.sum(x, 0, keepdim=True) + x.var(0, keepdim=True)

    jf = thunder.jit(f, cache=cache)
    for n in (3, 3, 5):
        x = torch.randn(n, 4)
        torch.testing.assert_close(jf(x), f(x))
