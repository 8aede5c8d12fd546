"""Elementwise ops give eager's values on the CPU, bit for bit, with and without gradients, and
eager's gradients (within eager's tolerance for the dtype).

What these check, and why thunder's decompositions alone would not give it:
- torch's float16/bfloat16 CPU kernels are not its float32 kernels rounded: erf's and sqrt's are
  other code than the float32 ones, rsqrt's scalar loop (the tail after the vectorized part, a
  strided input) rounds the root before dividing, float16's pow computes every exponent as pow
  (pow(-inf, 0.5) is inf where sqrt gives nan) and bfloat16's takes -0.5 to rsqrt's kernel;
- add, sub and rsub given an alpha compute ``a + alpha * b`` in one kernel (a fused multiply-add
  in its vectorized part), not a product then a sum;
- torch converts a tensor operand of another dtype to the operands' common dtype before it
  broadcasts it: a bfloat16 op reads an int tensor's 257 as 256, and the gradient of a bfloat16
  operand of a float32 result is summed in float32, then rounded; float_power converts to
  float64 first, so its gradients are summed in float64;
- fmod, remainder and floor division of a huge quotient (a subnormal divisor) are nan in the
  vector loop of torch's kernels and 0 in their scalar one, so eager's value depends on where the
  element falls; converting a broadcast float16/bfloat16 operand to float32 moves it;
- the float16/bfloat16 gradients of atan2, fmod, remainder and log are eager's formulas, each op
  rounded in the dtype (fmod's quotient rounded before it is truncated); the logs' gradients
  divide in every dtype, as eager's (``grad * (1 / x)`` is inf at a subnormal ``x``).

Each case runs the compiled program on three fresh inputs: contiguous with a tail the vector
loop leaves over, strided, and transposed, each holding edge values (zeros of both signs,
infinities, NaN, subnormals)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
Make = Callable[[int, torch.dtype], list[torch.Tensor]]


def _values(
    seed: int,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    low: float,
    high: float,
    specials: tuple[float, ...] = (),
    edges: bool = True,
) -> Any:
    """Uniform values in [low, high) of ``dtype`` laid out by ``seed``: contiguous (1000
    elements leave a tail after any vector width), strided, transposed; with edge values (unless
    ``edges`` is False: a nan summed into every gradient hides the rest) and ``specials`` (where
    eager's kernels are their own) at random places."""
    gen = torch.Generator().manual_seed(seed)
    n = 1
    for s in shape:
        n *= s
    flat = (torch.rand(3 * n, generator=gen) * (high - low) + low).to(dtype)
    layout = seed % 3
    if layout == 0:
        x = flat[:n].view(shape)
    elif layout == 1:
        x = flat[: 3 * n : 3].view(shape)
    else:
        x = flat[:n].view(tuple(reversed(shape))).permute(*reversed(range(len(shape))))
    tiny = torch.finfo(dtype).tiny
    edge_values = [0.0, -0.0, tiny / 4, -tiny / 2, tiny, float("inf"), float("-inf"), float("nan")]
    values = torch.tensor([*(edge_values if edges else []), *specials])[:n]
    where = torch.randperm(n, generator=gen)[: len(values)]
    x[torch.unravel_index(where, shape)] = values.to(dtype)
    return x


def _same(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.is_floating_point():
        assert torch.equal(got.isnan(), want.isnan())
        got, want = got.nan_to_num(0.0), want.nan_to_num(0.0)
        # -0.0 and 0.0 are told apart
        assert torch.equal(torch.signbit(got), torch.signbit(want))
    assert torch.equal(got, want), (got != want).nonzero()[:8].flatten().tolist()


def _check(fn: Callable[..., Any], make: Make, dtype: torch.dtype, requires_grad: bool) -> None:
    jfn = thunder.jit(fn)
    for seed in range(3):
        inputs = make(seed, dtype)
        want_in = [
            t.detach().clone().requires_grad_(requires_grad and t.is_floating_point())
            for t in inputs
        ]
        got_in = [t.detach().clone().requires_grad_(t.requires_grad) for t in want_in]
        want, got = fn(*want_in), jfn(*got_in)
        _same(got.detach(), want.detach())
        if not (requires_grad and want.requires_grad):
            continue
        g = torch.randn(want.shape, generator=torch.Generator().manual_seed(seed)).to(want.dtype)
        leaves_want = [t for t in want_in if t.requires_grad]
        leaves_got = [t for t in got_in if t.requires_grad]
        try:
            want_grads = torch.autograd.grad(want, leaves_want, g)
        except RuntimeError as e:  # floor_divide: eager has no derivative, and says so
            with pytest.raises(RuntimeError, match=re.escape(str(e))):
                torch.autograd.grad(got, leaves_got, g)
            continue
        got_grads = torch.autograd.grad(got, leaves_got, g)
        for a, b in zip(got_grads, want_grads, strict=True):
            assert a.dtype == b.dtype
            torch.testing.assert_close(a, b, equal_nan=True)  # eager's tolerance for the dtype


def _one(low: float, high: float, *specials: float) -> Make:
    return lambda seed, dtype: [_values(seed, dtype, (1000,), low, high, specials)]


def _two(low: float, high: float, shape_a: tuple[int, ...], shape_b: tuple[int, ...]) -> Make:
    return lambda seed, dtype: [
        _values(seed, dtype, shape_a, low, high),
        _values(seed + 10, dtype, shape_b, low, high),
    ]


UNARY: dict[str, tuple[Callable[..., Any], Make]] = {
    "rsqrt": (torch.rsqrt, _one(0.0, 8.0)),
    "rsqrt_": (lambda x: x.clone().rsqrt_(), _one(0.0, 8.0)),
    # float16's sqrt kernel rounds these otherwise than float32's rounded
    "sqrt": (torch.sqrt, _one(0.0, 8.0, 0.2498779296875, 0.99951171875, 3.998046875)),
    "sqrt_": (lambda x: x.clone().sqrt_(), _one(0.0, 8.0, 0.062469482421875, 15.9921875)),
    "erf": (torch.erf, _one(-3.0, 3.0, -5.960464477539063e-08, -1.8367099231598242e-40)),
    "sin": (torch.sin, _one(-400.0, 400.0, 300.0, -300.0)),
    "cosh": (torch.cosh, _one(-90.0, 90.0, 89.0, -89.0)),
    "log": (torch.log, _one(0.0, 8.0)),
    "log2": (torch.log2, _one(0.0, 8.0)),
    "log1p": (torch.log1p, _one(-1.0, 8.0)),
    "asin": (torch.asin, _one(-1.0, 1.0)),
    "asinh": (torch.asinh, _one(-3.0, 3.0)),
    "erfinv": (torch.erfinv, _one(-1.0, 1.0)),
    "sigmoid": (torch.sigmoid, _one(-8.0, 8.0)),
    "pow_-0.5": (lambda x: torch.pow(x, -0.5), _one(0.0, 8.0)),
    "pow_0.5": (lambda x: torch.pow(x, 0.5), _one(-8.0, 8.0)),
    "pow_2.5": (lambda x: x**2.5, _one(0.0, 4.0)),
    "pow_-1": (lambda x: torch.pow(x, -1), _one(-4.0, 4.0)),
    "pow_3": (lambda x: torch.pow(x, 3), _one(-4.0, 4.0)),
}


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_like_eager(name: str, dtype: torch.dtype, requires_grad: bool) -> None:
    fn, make = UNARY[name]
    _check(fn, make, dtype, requires_grad)


BINARY: dict[str, tuple[Callable[..., Any], Make]] = {
    "rsub_number_alpha": (lambda x: torch.rsub(x, 1.7, alpha=0.3), _one(-3.0, 3.0)),
    "rsub_alpha": (lambda a, b: torch.rsub(a, b, alpha=-1.5), _two(-3, 3, (30, 1), (1, 40))),
    "__rsub__": (lambda x: 1.7 - x, _one(-3.0, 3.0)),
    "sub_number_alpha": (lambda x: torch.sub(x, 1.7, alpha=0.3), _one(-3.0, 3.0)),
    "add_alpha": (lambda a, b: torch.add(a, b, alpha=0.3), _two(-3, 3, (30, 1), (1, 40))),
    "float_power_number": (lambda x: torch.float_power(x, 2.5), _one(0.0, 4.0)),
    "float_power_base": (lambda x: torch.float_power(1.5, x), _one(-4.0, 4.0)),
    # rows of 30: a tail after float64's vector loop, where its pow is another function
    "float_power_broadcast": (torch.float_power, _two(0.25, 3.0, (40, 1), (1, 30))),
    "float_power_float32": (
        lambda a, b: torch.float_power(a, b.float()),
        _two(0.25, 3.0, (40, 1), (1, 30)),
    ),
    "fmod": (torch.fmod, _two(-3, 3, (1000,), (1000,))),
    "fmod_broadcast": (torch.fmod, _two(-3, 3, (30, 1), (1, 40))),
    "remainder": (torch.remainder, _two(-3, 3, (1000,), (1000,))),
    "remainder_broadcast": (torch.remainder, _two(-3, 3, (30, 1), (1, 40))),
    "floor_divide": (torch.floor_divide, _two(-3, 3, (1000,), (1000,))),
    "floor_divide_broadcast": (torch.floor_divide, _two(-3, 3, (30, 1), (1, 40))),
    "atan2": (torch.atan2, _two(-3, 3, (30, 1), (1, 40))),
}


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_like_eager(name: str, dtype: torch.dtype, requires_grad: bool) -> None:
    fn, make = BINARY[name]
    _check(fn, make, dtype, requires_grad)


def _with_float32(shape_low: tuple[int, ...], shape_f32: tuple[int, ...]) -> Make:
    return lambda seed, dtype: [
        _values(seed, dtype, shape_low, 0.25, 3.0, edges=False),
        _values(seed + 10, torch.float32, shape_f32, -3.0, 3.0, edges=False),
    ]


MIXED: dict[str, tuple[Callable[..., Any], Make]] = {
    "mul": (torch.mul, _with_float32((30, 1), (1, 40))),
    "add": (torch.add, _with_float32((1, 40), (30, 40))),
    "atan2": (torch.atan2, _with_float32((30, 1), (1, 40))),
    "pow": (lambda a, b: torch.pow(b.abs(), a), _with_float32((30, 1), (1, 40))),
}


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(MIXED))
def test_float32_result_of_low_precision_operand(
    name: str, dtype: torch.dtype, requires_grad: bool
) -> None:
    fn, make = MIXED[name]
    _check(fn, make, dtype, requires_grad)


def _with_ints(seed: int, dtype: torch.dtype) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    x = (torch.rand(64, generator=gen) * 600 - 300).to(dtype)
    i = torch.randint(-2000, 2000, (64,), generator=gen, dtype=torch.int32)
    # ints bfloat16 and float16 do not hold: x + 257 is 256.5 in eager, where 257.5 would round
    # otherwise, and 256 == 257 holds there
    odd = torch.tensor([257, 1025, -259, 2049, 4097, -8193], dtype=torch.int32)
    i[: len(odd)], i[8 : 8 + len(odd)] = odd, odd
    x[: len(odd)] = 0.5
    x[8 : 8 + len(odd)] = odd.to(dtype)
    return [x, i]


INT_OPERAND: dict[str, Callable[..., Any]] = {
    "add": lambda x, i: x + i,
    "sub_broadcast": lambda x, i: x[:, None] - i[None, :8],
    "eq": lambda x, i: torch.eq(x.round(), i),
    "lt": torch.lt,
    "atan2": torch.atan2,
    "fmod": lambda x, i: torch.fmod(i, x),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(INT_OPERAND))
def test_int_tensor_operand_converted_first(name: str, dtype: torch.dtype) -> None:
    # torch converts the int tensor to the float one's dtype (bfloat16 257 is 256), then computes
    _check(INT_OPERAND[name], _with_ints, dtype, requires_grad=False)


@pytest.mark.parametrize("requires_grad", [False, True], ids=["no_grad", "grad"])
def test_fusion_executor_keeps_eager_conversions(requires_grad: bool) -> None:
    # Inductor computes these as eager does once the operands come converted as eager's: the
    # region reads the int tensor as bfloat16, and sums the bfloat16 operand's gradient in float32.
    def fn(x: torch.Tensor, i: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (x + i)[:, None] * w

    jfn = thunder.jit(fn, executors=["torchcompile"])
    for seed in range(2):
        x, i = _with_ints(seed, torch.bfloat16)
        w = torch.randn(1, 40, generator=torch.Generator().manual_seed(seed))
        want_in = [x.clone().requires_grad_(requires_grad), i, w]
        got_in = [x.clone().requires_grad_(requires_grad), i, w]
        want, got = fn(*want_in), jfn(*got_in)
        _same(got.detach(), want.detach())
        if requires_grad:
            g = torch.randn_like(want)
            (want_grad,) = torch.autograd.grad(want, want_in[0], g)
            (got_grad,) = torch.autograd.grad(got, got_in[0], g)
            torch.testing.assert_close(got_grad, want_grad)
