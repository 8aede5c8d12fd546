"""Calls against eager, round 11: a scalar operand of a float16/bfloat16 CPU op (rounded to the
dtype first, except the second operand of mul and div), the gradient of a 0-dim float32
operand of a low-precision op (computed and summed in the low dtype), float16/bfloat16
floor_divide of tensors, where with a uint8 condition, addcmul under grad (one kernel), cat of
an empty 1-D tensor requiring grad (a zero gradient), and what eager's graph of a torch callable
run as a fallback saves (its result: written in place before backward, eager raises)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import pytest
import torch
import torch.nn as nn

import thunder

CACHES = ["constant values", "symbolic values"]
LOW = [torch.float16, torch.bfloat16]


def _equal(expected: torch.Tensor, got: torch.Tensor) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)


_BINARY: dict[str, Callable[..., torch.Tensor]] = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "div": torch.div,
    "true_divide": torch.true_divide,
    "floor_divide": torch.floor_divide,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "remainder": torch.remainder,
    "fmod": torch.fmod,
    "pow": torch.pow,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "atan2": torch.atan2,
    "hypot": torch.hypot,
    "copysign": torch.copysign,
    "rsub": torch.rsub,
    "where": lambda a, b: torch.where(torch.arange(256) % 3 == 0, a, b),
    "op_mul": lambda a, b: a * b,
    "op_div": lambda a, b: a / b,
    "op_floordiv": lambda a, b: a // b,
}


def _call(op: Callable[..., torch.Tensor], first: bool) -> Callable[..., torch.Tensor]:
    return lambda x, s: op(s, x) if first else op(x, s)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("scalar", ["number", "0-dim"])
@pytest.mark.parametrize("first", [True, False], ids=["scalar_first", "scalar_second"])
@pytest.mark.parametrize("name", list(_BINARY))
def test_scalar_operand_of_low_precision_cpu_op(
    name: str, first: bool, scalar: str, dtype: torch.dtype
) -> None:
    fn = _call(_BINARY[name], first)
    jfn = thunder.jit(fn)
    ran = 0
    for i in range(3):
        x = (torch.randn(256) * 3).to(dtype)
        value = 2.6592 * (1 + 0.37 * i)
        s = value if scalar == "number" else torch.tensor(value)
        try:
            expected = fn(x, s)
        except (RuntimeError, TypeError):
            continue  # eager refuses a number there (atan2(x, 2.0))
        _equal(expected, jfn(x, s))
        ran += 1
    assert ran in (0, 3)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn",
    [
        lambda x, s: s * x,
        lambda x, s: torch.mul(s, x),
        lambda x, s: torch.true_divide(s, x),
        lambda x, s: torch.floor_divide(s, x),
        lambda x, s: x * s,
        lambda x, s: x / s,
    ],
    ids=["rmul", "mul_first", "true_divide_first", "floor_divide_first", "mul", "div"],
)
def test_python_number_operand_across_calls(fn: Callable[..., torch.Tensor], cache: str) -> None:
    jfn = thunder.jit(fn, cache=cache)
    for i in range(3):
        x = (torch.randn(256) * 3).bfloat16()
        s = 1.2345 + 0.731 * i
        _equal(fn(x, s), jfn(x, s))


def test_clip_style_logit_scale_under_autocast() -> None:
    def loss(img: torch.Tensor, txt: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = scale.exp() * (img @ txt.t())
            labels = torch.arange(img.shape[0])
            ce = torch.nn.functional.cross_entropy
            return (ce(logits, labels) + ce(logits.t(), labels)) / 2

    jloss = thunder.jit(loss)
    for _ in range(3):
        img = torch.nn.functional.normalize(torch.randn(8, 16), dim=-1)
        txt = torch.nn.functional.normalize(torch.randn(8, 16), dim=-1)
        se = torch.tensor(2.6592, requires_grad=True)
        sj = se.detach().clone().requires_grad_()
        le, lj = loss(img, txt, se), jloss(img, txt, sj)
        _equal(le, lj)
        le.backward()
        lj.backward()
        _equal(se.grad, sj.grad)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("divisor_scale", [0.01, 1.0, 100.0])
def test_low_precision_floor_divide_of_tensors(dtype: torch.dtype, divisor_scale: float) -> None:
    jfn = thunder.jit(torch.floor_divide)
    for _ in range(3):
        a = (torch.randn(4096) * 3).to(dtype)
        b = (torch.randn(4096) * divisor_scale).to(dtype)
        a[:8] = 0
        b[4:16] = 0
        a[20] = float("inf")
        a[21] = -0.0
        b[22] = float("nan")
        expected, got = torch.floor_divide(a, b), jfn(a, b)
        _equal(expected, got)
        assert torch.equal(expected.signbit(), got.signbit())


_MIXED: dict[str, Callable[..., torch.Tensor]] = {
    "x*s": lambda x, s: x * s,
    "s*x": lambda x, s: s * x,
    "where": lambda x, s: torch.where(x > 0, x, s),
    "where_s_first": lambda x, s: torch.where(x > 0, s, x),
    "maximum": torch.maximum,
    "minimum": lambda x, s: torch.minimum(s, x),
    "pow_tensor_exponent": lambda x, s: torch.pow(x.abs() + 0.5, s),
    "add": lambda x, s: x + s,
    "div": lambda x, s: x / s,
}


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name", list(_MIXED))
def test_grad_of_0dim_float32_operand_of_low_precision_op(name: str, dtype: torch.dtype) -> None:
    fn = _MIXED[name]
    jfn = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(64).to(dtype)
        x[::7] = 0.5  # ties with s for maximum/minimum
        xe, xj = x.clone().requires_grad_(), x.clone().requires_grad_()
        se = torch.tensor(0.5, requires_grad=True)
        sj = se.detach().clone().requires_grad_()
        expected, got = fn(xe, se), jfn(xj, sj)
        _equal(expected, got)
        g = torch.randn(64).to(dtype)
        ge = torch.autograd.grad(expected, (xe, se), g)
        gj = torch.autograd.grad(got, (xj, sj), g)
        for a, b in zip(ge, gj):
            _equal(a, b)


def test_where_with_uint8_condition() -> None:
    fn = lambda c, x: torch.where(c, x, 0.0)  # noqa: E731
    jfn = thunder.jit(fn)
    for _ in range(3):
        c = torch.randint(0, 3, (16,), dtype=torch.uint8)
        x = torch.randn(16)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = jfn(c, x)
        assert not [w for w in caught if "please report" in str(w.message)]
        _equal(fn(c, x), got)
    xe = torch.randn(16, requires_grad=True)
    xj = xe.detach().clone().requires_grad_()
    c = torch.tensor([0, 2, 1, 0] * 4, dtype=torch.uint8)
    fn(c, xe).sum().backward()
    jfn(c, xj).sum().backward()
    _equal(xe.grad, xj.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("value", [0.5, 3, "tensor"])
def test_addcmul_under_grad_is_one_kernel(dtype: torch.dtype, value: object) -> None:
    v = torch.tensor(0.3) if value == "tensor" else value
    fn = lambda a, b, c: torch.addcmul(a, b, c, value=v)  # noqa: E731
    jfn = thunder.jit(fn)
    for _ in range(3):
        ins = [torch.randn(s, dtype=dtype) for s in ((3, 1, 4), (5, 4), (1, 4))]
        e_ins = [t.clone().requires_grad_() for t in ins]
        j_ins = [t.clone().requires_grad_() for t in ins]
        expected, got = fn(*e_ins), jfn(*j_ins)
        _equal(expected, got)
        g = torch.randn_like(expected)
        for a, b in zip(
            torch.autograd.grad(expected, e_ins, g), torch.autograd.grad(got, j_ins, g)
        ):
            _equal(a, b)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("two_d", [False, True])
def test_cat_of_empty_slice_keeps_its_zero_gradient(two_d: bool, cache: str) -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.cat([w[:0], x, w[:0]]).sin().sum()

    jfn = thunder.jit(fn, cache=cache)
    for n in (3, 4, 5):
        x = torch.randn((2, n) if two_d else (n,))
        xe, xj = x.clone().requires_grad_(), x.clone().requires_grad_()
        we = torch.randn(n, requires_grad=True)
        wj = we.detach().clone().requires_grad_()
        _equal(fn(xe, we), jfn(xj, wj))
        fn(xe, we).backward()
        jfn(xj, wj).backward()
        assert wj.grad is not None
        _equal(we.grad, wj.grad)
        _equal(xe.grad, xj.grad)


_lstm = nn.LSTM(4, 3)
_SAVES_RESULT: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "linalg.inv": lambda x: torch.linalg.inv(x + 4 * torch.eye(4)),
    "cdist": lambda x: torch.cdist(x, x.flip(0)),
    "linalg.norm": lambda x: torch.linalg.norm(x),
    "linalg.det": lambda x: torch.linalg.det(x + 4 * torch.eye(4)),
    "linalg.cholesky": lambda x: torch.linalg.cholesky(x @ x.t() + torch.eye(4)),
    "nn.LSTM": lambda x: _lstm(x.view(2, 2, 4))[0],
}


def _backward_after_writing_result(fn: Callable[[torch.Tensor], torch.Tensor]) -> str:
    x = torch.randn(4, 4, requires_grad=True)
    y = fn(x)
    y.mul_(2)
    try:
        y.sum().backward()
    except RuntimeError as e:
        return "modified by an inplace operation" if "modified by an inplace" in str(e) else str(e)
    return "ok"


@pytest.mark.parametrize("name", list(_SAVES_RESULT))
def test_fallback_result_written_before_backward_raises_as_eager(name: str) -> None:
    fn = _SAVES_RESULT[name]
    jfn = thunder.jit(fn)
    for _ in range(3):
        assert _backward_after_writing_result(jfn) == _backward_after_writing_result(fn)


def test_fallback_result_not_written_gives_eager_gradient() -> None:
    fn = _SAVES_RESULT["linalg.inv"]
    jfn = thunder.jit(fn)
    for _ in range(3):
        xe = torch.randn(4, 4, requires_grad=True)
        xj = xe.detach().clone().requires_grad_()
        fn(xe).sum().backward()
        jfn(xj).sum().backward()
        torch.testing.assert_close(xe.grad, xj.grad)


_NORMS: dict[str, Callable[..., torch.Tensor]] = {
    "batch_norm": lambda x, w, b: torch.nn.functional.batch_norm(x, None, None, w, b, True),
    "batch_norm_no_affine": lambda x, w, b: torch.nn.functional.batch_norm(
        x, None, None, training=True
    ),
    "instance_norm": lambda x, w, b: torch.nn.functional.instance_norm(x, weight=w, bias=b),
    "instance_norm_no_affine": lambda x, w, b: torch.nn.functional.instance_norm(x),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("name", list(_NORMS))
def test_low_precision_batch_statistics_norm_under_grad(
    name: str, dtype: torch.dtype, cache: str
) -> None:
    fn = _NORMS[name]
    jfn = thunder.jit(fn, cache=cache)
    for n in (2, 3, 4):
        ins = [
            torch.randn(n, 4, 6).to(dtype),
            torch.rand(4).to(dtype) + 0.5,
            torch.randn(4).to(dtype),
        ]
        e_ins = [t.clone().requires_grad_() for t in ins]
        j_ins = [t.clone().requires_grad_() for t in ins]
        expected, got = fn(*e_ins), jfn(*j_ins)
        _equal(expected, got)
        g = torch.randn_like(expected)
        for a, b in zip(
            torch.autograd.grad(expected, e_ins, g, allow_unused=True),
            torch.autograd.grad(got, j_ins, g, allow_unused=True),
        ):
            assert (a is None) == (b is None)
            if a is not None:
                _equal(a, b)
