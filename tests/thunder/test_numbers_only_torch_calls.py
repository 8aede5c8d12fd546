"""Elementwise torch functions called with numbers and no tensor behave as eager: torch's
argument parser raises TypeError for all but the arithmetic ones taking two numbers, which
return 0-dim tensors. The op itself would compute a number."""

import pytest
import torch
import torch.nn.functional as F

import thunder

CACHES = ["constant values", "symbolic values"]

RAISING = [
    (torch.remainder, (5, 3)),
    (torch.fmod, (5.0, 2)),
    (torch.rsub, (5, 3)),
    (torch.pow, (5.0, 2)),
    (torch.bitwise_and, (5, 3)),
    (torch.maximum, (5, 3)),
    (torch.atan2, (1.0, 2.0)),
    (torch.abs, (-7,)),
    (torch.neg, (7,)),
    (torch.exp, (2.0,)),
    (torch.sqrt, (7,)),
    (torch.sigmoid, (0.5,)),
    (torch.floor, (2.5,)),
    (torch.round, (7,)),
    (torch.log, (7,)),
    (torch.tanh, (0.3,)),
    (torch.reciprocal, (4.0,)),
    (torch.special.log1p, (2.0,)),
    (torch.special.expit, (2.0,)),
    (F.relu, (3,)),
]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn, numbers", RAISING, ids=lambda v: getattr(v, "__name__", None))
def test_numbers_only_call_raises_as_eager(fn, numbers, cache):
    def f(x, *ns):
        return x * 2, fn(*ns)

    with pytest.raises(TypeError) as eager:
        f(torch.randn(3), *numbers)
    jf = thunder.jit(f, cache=cache)
    for _ in range(2):
        with pytest.raises(TypeError) as jitted:
            jf(torch.randn(3), *numbers)
        assert str(jitted.value) == str(eager.value)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn", [torch.add, torch.sub, torch.mul, torch.div, torch.true_divide, torch.floor_divide]
)
def test_arithmetic_on_numbers_gives_eager_tensor(fn, cache):
    def f(x, a, b):
        r = fn(a, b)
        return x * r, r

    jf = thunder.jit(f, cache=cache)
    for a, b in ((7, 2), (9, 4), (7.5, 2), (3, 0.5)):
        x = torch.randn(3)
        expected, got = f(x, a, b), jf(x, a, b)
        assert isinstance(got[1], torch.Tensor)
        assert got[1].dtype == expected[1].dtype and got[1].shape == expected[1].shape
        torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("cache", CACHES)
def test_elementwise_with_a_tensor_and_numbers_still_compiles(cache):
    def f(x, n):
        return torch.pow(2.0, x) + torch.clamp(x, 0, n) + torch.where(x > 0, 1.0, float(n))

    jf = thunder.jit(f, cache=cache)
    for n in (1, 2, 3):
        x = torch.randn(5, requires_grad=True)
        expected = f(x, n)
        got = jf(x, n)
        torch.testing.assert_close(got, expected)
        (g,) = torch.autograd.grad(got.sum(), x)
        (ge,) = torch.autograd.grad(expected.sum(), x)
        torch.testing.assert_close(g, ge)
    assert thunder.compile_stats(jf).eager_fallbacks == 0
