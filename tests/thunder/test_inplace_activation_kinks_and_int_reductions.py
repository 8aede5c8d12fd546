"""Two classes of results that were not eager's.

In-place activations (``F.relu(x, inplace=True)``, ``nn.ReLU(inplace=True)``, ``F.elu_``, ...):
eager differentiates them with the same backward kernels as the out-of-place ops, the ELU family
from the result it wrote. Gradients equal eager's bit for bit, at the kinks (relu at 0, hardtanh
at its bounds, hardswish at +-3, ...) and where an exponential overflows in the branch not taken.

Sums, products and scans given a result dtype (``a.sum(dtype=torch.int8)``) in a fusion region:
the input converted to that dtype, integers wrapping as eager's do; a mean given a float16 or
bfloat16 dtype within rounding of eager's.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import textwrap
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder

EXECUTORS = {"default": None, "torchcompile": ("torchcompile", "torch")}
KINKS = [-100.0, -6.0, -3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0, 6.0, 100.0]

Activation = Callable[[torch.Tensor], torch.Tensor]

# Each in-place form: the functional call given inplace=True, the module given inplace=True and
# the trailing-underscore function where torch has one.
IN_PLACE: dict[str, Activation] = {
    "F.relu": lambda t: F.relu(t, inplace=True),
    "nn.ReLU": lambda t: torch.nn.ReLU(inplace=True)(t),
    "torch.relu_": torch.relu_,
    "F.hardtanh": lambda t: F.hardtanh(t, -1.0, 1.0, inplace=True),
    "F.hardtanh_": lambda t: F.hardtanh_(t, -0.5, 3.0),
    "F.relu6": lambda t: F.relu6(t, inplace=True),
    "nn.ReLU6": lambda t: torch.nn.ReLU6(inplace=True)(t),
    "F.leaky_relu": lambda t: F.leaky_relu(t, 0.1, inplace=True),
    "F.leaky_relu_": lambda t: F.leaky_relu_(t, 0.2),
    "F.elu": lambda t: F.elu(t, inplace=True),
    "F.elu_alpha": lambda t: F.elu(t, 2.0, inplace=True),
    "F.elu_": lambda t: F.elu_(t, 0.7),
    "F.celu": lambda t: F.celu(t, inplace=True),
    "F.celu_alpha": lambda t: F.celu(t, 2.0, inplace=True),
    "F.selu": lambda t: F.selu(t, inplace=True),
    "torch.selu_": torch.selu_,
    "F.threshold": lambda t: F.threshold(t, 0.5, 2.0, inplace=True),
    "F.threshold_": lambda t: F.threshold_(t, 0.5, -2.0),
    "F.silu": lambda t: F.silu(t, inplace=True),
    "F.hardswish": lambda t: F.hardswish(t, inplace=True),
    "F.hardsigmoid": lambda t: F.hardsigmoid(t, inplace=True),
    "F.rrelu_eval": lambda t: F.rrelu(t, 0.1, 0.3, training=False, inplace=True),
    "F.mish": lambda t: F.mish(t, inplace=True),
}

# Piecewise activations given ``inplace``: their in-place gradients are their out-of-place ones
# (in eager too), at the kinks as well.
PIECEWISE: dict[str, Callable[..., torch.Tensor]] = {
    "relu": F.relu,
    "hardtanh": F.hardtanh,
    "relu6": F.relu6,
    "leaky_relu": F.leaky_relu,
    "threshold": lambda t, inplace: F.threshold(t, 0.5, 2.0, inplace),
    "hardswish": F.hardswish,
    "hardsigmoid": F.hardsigmoid,
}


def _input(dtype: torch.dtype) -> torch.Tensor:
    x = torch.randn(4, 16, dtype=dtype) * 4
    x.view(-1)[: len(KINKS)] = torch.tensor(KINKS, dtype=dtype)
    return x


def _values_and_grad(
    fn: Activation, x: torch.Tensor, g: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.clone().requires_grad_()
    y = fn(x)
    (gx,) = torch.autograd.grad(y, x, g)
    return y.detach(), gx


# Smooth: no kink, and a region's fused formula is within an ulp of eager's kernel, not equal.
SMOOTH = frozenset({"F.silu", "F.mish"})


def _check_like_eager(
    activation: Activation, executors: tuple[str, ...] | None, smooth: bool
) -> None:
    def fn(t: torch.Tensor) -> torch.Tensor:
        return activation(t * 1) * 1  # the write lands in an intermediate, as in a model

    jfn = thunder.jit(fn, executors=executors) if executors else thunder.jit(fn)
    for _ in range(3):
        x = _input(torch.float32)
        g = torch.randn_like(x)
        want_y, want_g = _values_and_grad(fn, x, g)
        got_y, got_g = _values_and_grad(jfn, x, g)
        torch.testing.assert_close(got_y, want_y)
        if executors is None:
            # eager's kernels: bit for bit everywhere
            assert torch.equal(got_g, want_g), (got_g, want_g)
            continue
        if smooth:
            torch.testing.assert_close(got_g, want_g)
            continue
        kinks = slice(0, len(KINKS))
        assert torch.equal(got_g.view(-1)[kinks], want_g.view(-1)[kinks]), (
            got_g.view(-1)[kinks],
            want_g.view(-1)[kinks],
        )
        torch.testing.assert_close(got_g, want_g, rtol=1e-6, atol=1e-30)


@pytest.mark.parametrize("executor", list(EXECUTORS))
@pytest.mark.parametrize("name", list(IN_PLACE))
def test_in_place_activation_gradients_equal_eager(name: str, executor: str) -> None:
    _check_like_eager(IN_PLACE[name], EXECUTORS[executor], name in SMOOTH)


@pytest.mark.parametrize("name", list(PIECEWISE))
def test_in_place_and_out_of_place_gradients_agree_at_the_kinks(name: str) -> None:
    op = PIECEWISE[name]

    def out_of_place(t: torch.Tensor) -> torch.Tensor:
        return op(t * 1, inplace=False) * 1

    def in_place(t: torch.Tensor) -> torch.Tensor:
        return op(t * 1, inplace=True) * 1

    x = torch.tensor(KINKS)
    g = torch.randn_like(x)
    _, want = _values_and_grad(out_of_place, x, g)
    _, got = _values_and_grad(thunder.jit(in_place), x, g)
    _, got_out_of_place = _values_and_grad(thunder.jit(out_of_place), x, g)
    assert torch.equal(got, want), (got, want)
    assert torch.equal(got_out_of_place, want)


def test_linear_then_relu_in_place_bias_gradient_like_eager() -> None:
    # Swinv2's position-bias MLP: a zero bias on rows of zeros puts exact zeros into the ReLU.
    for _ in range(3):
        model = torch.nn.Sequential(
            torch.nn.Linear(2, 16), torch.nn.ReLU(inplace=True), torch.nn.Linear(16, 1)
        )
        torch.nn.init.zeros_(model[0].bias)
        jmodel = thunder.jit(copy.deepcopy(model))
        inp = torch.randn(8, 2)
        inp[:3] = 0.0
        model(inp).sum().backward()
        jmodel(inp).sum().backward()
        for p, q in zip(model.parameters(), jmodel.parameters(), strict=True):
            assert p.grad is not None and q.grad is not None
            torch.testing.assert_close(q.grad, p.grad, rtol=1e-5, atol=1e-6)


# Reductions given a dtype ---------------------------------------------------------------------

TORCHCOMPILE = ("torchcompile", "torch")


def _ints(dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    if dtype is torch.bool:
        return torch.rand(shape) > 0.3
    if dtype.is_floating_point:
        return torch.randint(-100, 101, shape).to(dtype)
    low, high = max(torch.iinfo(dtype).min, -100), min(torch.iinfo(dtype).max, 100)
    return torch.randint(low, high + 1, shape, dtype=dtype)


REDUCTIONS: dict[str, Callable[[torch.Tensor, torch.dtype], torch.Tensor]] = {
    "sum": lambda a, d: a.sum(dtype=d),
    "sum_dim": lambda a, d: a.sum(1, dtype=d),
    "sum_keepdim": lambda a, d: torch.sum(a, 0, keepdim=True, dtype=d),
    "nansum": lambda a, d: a.nansum(1, dtype=d),
    "prod": lambda a, d: a[:, :5].prod(1, dtype=d),
    "cumsum": lambda a, d: a.cumsum(1, dtype=d),
    "cumprod": lambda a, d: a[:, :5].cumprod(1, dtype=d),
}
INT_CASES = [
    (torch.int8, torch.int8),
    (torch.int8, torch.uint8),
    (torch.uint8, torch.uint8),
    (torch.uint8, torch.int8),
    (torch.int32, torch.int8),
    (torch.int64, torch.uint8),
    (torch.int16, torch.int16),
    (torch.float32, torch.int8),
    (torch.int8, torch.int64),
]


@pytest.mark.parametrize(("in_dtype", "out_dtype"), INT_CASES, ids=str)
@pytest.mark.parametrize("name", list(REDUCTIONS))
def test_integer_reductions_in_a_region_wrap_as_eager(
    name: str, in_dtype: torch.dtype, out_dtype: torch.dtype
) -> None:
    op = REDUCTIONS[name]

    def fn(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return op(a, out_dtype), a + 1  # two ops: one region

    jfn = thunder.jit(fn, executors=TORCHCOMPILE)
    for _ in range(3):
        a = _ints(in_dtype, (4, 300))  # sums of 300 elements wrap in 8 bits
        got, want = jfn(a)[0], fn(a)[0]
        assert got.dtype == want.dtype and torch.equal(got, want), (got, want)


def test_int8_sum_of_the_report() -> None:
    def fn(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a.sum(dtype=torch.int8), a + 1

    jfn = thunder.jit(fn, executors=TORCHCOMPILE)
    for n in (12, 200, 1000):
        a = torch.ones(n, dtype=torch.int8)
        assert torch.equal(jfn(a)[0], fn(a)[0])


@pytest.mark.parametrize("executors", [TORCHCOMPILE, ("torch",)], ids=["torchcompile", "torch"])
@pytest.mark.parametrize("name", ["sum", "prod", "nansum"])
def test_bool_result_converts_the_input_first(name: str, executors: tuple[str, ...]) -> None:
    # eager converts to bool first: 2 and -2 are both True, their sum True (not 0, False)
    op = {"sum": torch.sum, "prod": torch.prod, "nansum": torch.nansum}[name]

    def fn(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return op(a, 1, dtype=torch.bool), a * 2

    jfn = thunder.jit(fn, executors=executors)
    for a in (torch.tensor([[2, -2], [0, 0], [3, 0]]), torch.randint(-2, 3, (5, 40))):
        got, want = jfn(a)[0], fn(a)[0]
        assert torch.equal(got, want), (got, want)


def test_bool_sum_of_floats_in_a_region_does_not_corrupt_memory() -> None:
    # Inductor's own bool sum wrote out of bounds here (the process aborted at exit).
    code = textwrap.dedent(
        """
        import torch, thunder
        def fn(a):
            return torch.sum(a, 0, keepdim=True, dtype=torch.bool), a * 1
        jfn = thunder.jit(fn, executors=("torchcompile", "torch"))
        for _ in range(3):
            a = torch.randn(3, 70).half() * 50
            assert torch.equal(jfn(a)[0], fn(a)[0])
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.bfloat16], ids=str)
def test_low_precision_mean_in_a_region_like_eager(out_dtype: torch.dtype) -> None:
    def fn(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a.mean(1, dtype=out_dtype), a * 1

    jfn = thunder.jit(fn, executors=TORCHCOMPILE)
    for _ in range(5):
        a = torch.randn(16, 70) * 30
        got, want = jfn(a)[0], fn(a)[0]
        # within an ulp of eager (the sums' order may differ), not the inputs' rounding's
        torch.testing.assert_close(got, want, rtol=2 * torch.finfo(out_dtype).eps, atol=1e-3)


@pytest.mark.parametrize("out_dtype", [torch.float16, torch.bfloat16], ids=str)
def test_low_precision_scan_converts_the_input_first(out_dtype: torch.dtype) -> None:
    # eager's cumsum(dtype=...) rounds every input to the dtype before accumulating (these sums
    # of 20 rounded values are exact in float32, whatever the order: one rounding at the end)
    def fn(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a.cumsum(1, dtype=out_dtype), a * 2

    for executors in (TORCHCOMPILE, ("torch",)):
        jfn = thunder.jit(fn, executors=executors)
        for _ in range(3):
            a = torch.randn(4, 20) * 30
            got, want = jfn(a)[0], fn(a)[0]
            assert torch.equal(got, want), (got, want)
