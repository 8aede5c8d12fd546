"""Gradients (and the forwards of ops kept whole for them) match eager's at numerical edges: ties,
NaNs, infinities, exact zeros, overflow in a branch ``where`` does not select, a loss at a perfect
prediction. Each grad rule follows eager's derivative formula rather than differentiating the op's
decomposition. Every test compares a compiled function with eager on edge inputs and then on
fresh random inputs over several calls (the same compiled function), forward and gradients.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

nan, inf = float("nan"), float("inf")

# Thunder's default executors keep the ops with these rules whole (torch's kernels); "torch"
# alone runs their decompositions, whose forwards the rules' gradients must match too.
_EXECUTORS: dict[str, tuple[str, ...] | None] = {"defaults": None, "decompositions": ("torch",)}
_executors: tuple[str, ...] | None = None


@pytest.fixture(autouse=True, params=list(_EXECUTORS))
def executors(request: pytest.FixtureRequest) -> Any:
    global _executors
    _executors = _EXECUTORS[request.param]
    yield request.param
    _executors = None


def _decomposed_forward_differs(executors: str, why: str) -> None:
    """Where the decomposition's forward itself differs from eager's (a bug of the op, not of
    its grad rule), the decompositions-only run is an expected failure."""
    if executors == "decompositions":
        pytest.xfail(why)


def _leaves(args: Sequence[Any], grad: Sequence[bool]) -> list[Any]:
    return [
        a.detach().clone().requires_grad_(g) if isinstance(a, torch.Tensor) else a
        for a, g in zip(args, grad, strict=True)
    ]


def _run(fn: Callable[..., Any], args: Sequence[Any], grad: Sequence[bool], seed: int) -> Any:
    """fn's output and the gradients of its inputs that require grad (None where none)."""
    leaves = _leaves(args, grad)
    out = fn(*leaves)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    wrt = [x for x, g in zip(leaves, grad, strict=True) if g]
    gen = torch.Generator().manual_seed(seed)
    cts = [torch.randn(o.shape, generator=gen, dtype=o.dtype) for o in outs]
    grads = torch.autograd.grad(outs, wrt, cts, allow_unused=True) if wrt else ()
    return [o.detach() for o in outs], list(grads)


def _assert_same(
    got: Any, want: Any, signed_zeros: bool = True, tol: dict[str, float] | None = None
) -> None:
    for g, w in zip(got, want, strict=True):
        if w is None:
            assert g is None
            continue
        torch.testing.assert_close(g, w, equal_nan=True, **(tol or {}))
        if not signed_zeros:
            continue
        zeros = (w == 0) & (g == 0)  # the sign of a zero shows (1 / x, copysign)
        assert torch.equal(torch.signbit(g[zeros]), torch.signbit(w[zeros])), (g, w)


def _like_eager(
    fn: Callable[..., Any],
    edge_args: Sequence[Any],
    random_args: Callable[[torch.Generator], Sequence[Any]] | None = None,
    grad: Sequence[bool] | None = None,
    calls: int = 3,
    signed_zero_outputs: bool = True,
    tol: dict[str, float] | None = None,
) -> None:
    """The compiled ``fn`` gives eager's outputs and gradients on ``edge_args``, then on
    ``calls`` fresh draws of ``random_args``; thunder compiles each call (no eager or split run).
    ``signed_zero_outputs=False``: the outputs' zeros may differ in sign (the gradients' not)."""
    if grad is None:
        grad = [isinstance(a, torch.Tensor) and a.is_floating_point() for a in edge_args]
    jfn = thunder.jit(fn) if _executors is None else thunder.jit(fn, executors=_executors)
    gen = torch.Generator().manual_seed(1234)
    cases = [edge_args] + ([random_args(gen) for _ in range(calls)] if random_args else [])
    for i, args in enumerate(cases):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got_out, got_grads = _run(jfn, args, grad, seed=i)
        reports = [str(w.message) for w in caught if "report" in str(w.message)]
        assert not reports, reports
        want_out, want_grads = _run(fn, args, grad, seed=i)
        _assert_same(got_out, want_out, signed_zero_outputs, tol)
        _assert_same(got_grads, want_grads, tol=tol)
    stats = thunder.compile_stats(jfn)
    assert stats.eager_fallbacks == 0 and stats.split_calls == 0, stats


def _randn(*shape: int) -> Callable[[torch.Generator], list[torch.Tensor]]:
    return lambda gen: [torch.randn(*shape, generator=gen)]


# -- max/min, maximum/minimum, fmax/fmin, clamp: ties and NaNs --------------------------------


@pytest.mark.parametrize("op", [torch.max, torch.min, torch.amax, torch.amin])
def test_full_max_min_route_the_gradient_to_nan_elements(op: Callable[..., Any]) -> None:
    edge = torch.tensor([[1.0, nan, 3.0], [nan, 3.0, 3.0]])
    _like_eager(op, [edge], lambda gen: [torch.randn(4, 5, generator=gen)])
    _like_eager(op, [torch.tensor([2.0, 5.0, 5.0, 1.0])])  # ties split evenly
    _like_eager(op, [torch.tensor(nan)])


@pytest.mark.parametrize("op", [torch.maximum, torch.minimum, torch.max, torch.min])
def test_maximum_minimum_give_both_operands_the_gradient_at_nan(op: Callable[..., Any]) -> None:
    a = torch.tensor([nan, nan, 1.0, 1.0, 2.0, -1.0])
    b = torch.tensor([nan, 1.0, nan, 1.0, -3.0, 4.0])
    pair = lambda gen: [torch.randn(6, generator=gen), torch.randn(6, generator=gen)]  # noqa: E731
    _like_eager(op, [a, b], pair)
    _like_eager(op, [a.reshape(2, 3), torch.tensor([nan, 1.0, 1.0])])  # broadcast


@pytest.mark.parametrize("op", [torch.fmax, torch.fmin])
def test_fmax_fmin_give_ties_to_self(op: Callable[..., Any]) -> None:
    a = torch.tensor([1.0, 2.0, 3.0, nan, nan, 4.0])
    b = torch.tensor([1.0, 0.0, 5.0, 1.0, nan, nan])
    pair = lambda gen: [  # noqa: E731
        torch.randint(-2, 3, (6,), generator=gen).float(),
        torch.randint(-2, 3, (6,), generator=gen).float(),
    ]
    _like_eager(op, [a, b], pair)
    _like_eager(op, [a.reshape(2, 3), torch.tensor([1.0, nan, 3.0])])  # broadcast


_CLAMPS = {
    "clamp(0, 1)": lambda x: x.clamp(0.0, 1.0),
    "clamp(min=0)": lambda x: x.clamp(min=0.0),
    "clamp(max=1)": lambda x: x.clamp(max=1.0),
    "clamp(min=nan)": lambda x: x.clamp(min=nan),
    "clamp(1, 0)": lambda x: x.clamp(1.0, 0.0),
    "clamp_min": lambda x: torch.clamp_min(x, 0.0),
    "clamp_max": lambda x: torch.clamp_max(x, 1.0),
    "clip": lambda x: torch.clip(x, -0.5, 0.5),
    "hardtanh": F.hardtanh,
    "relu6": F.relu6,
}


@pytest.mark.parametrize("name", list(_CLAMPS))
def test_clamp_gives_no_gradient_at_nan_inputs(name: str) -> None:
    x = torch.tensor([0.5, nan, 2.0, 0.0, 1.0, -1.0, -0.5, 6.0])
    _like_eager(_CLAMPS[name], [x], _randn(8))


def test_clamp_with_tensor_bounds() -> None:
    x = torch.tensor([0.5, nan, 2.0, 0.0, 1.0, -1.0])
    lo = torch.tensor([0.0, 0.0, 0.0, 0.0, 2.0, nan])
    hi = torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0, 1.0])
    three = lambda gen: [torch.randn(6, generator=gen) for _ in range(3)]  # noqa: E731
    _like_eager(torch.clamp, [x, lo, hi], three)
    _like_eager(lambda x, lo: torch.clamp(x, min=lo), [x, lo])
    _like_eager(lambda x, hi: torch.clamp(x, max=hi), [x, hi])
    _like_eager(torch.clamp, [x.reshape(2, 3), torch.tensor(0.0), torch.tensor([1.0, 0.5, nan])])


# -- pow of a number base, hypot, remainder ---------------------------------------------------


_NUMBER_BASES = {
    "0 ** t": lambda t: 0**t,
    "0.0 ** t": lambda t: 0.0**t,
    "(-2) ** t": lambda t: (-2) ** t,
    "(-0.5) ** t": lambda t: (-0.5) ** t,
    "pow(0., t)": lambda t: torch.pow(0.0, t),
    "float_power(-2, t)": lambda t: torch.float_power(-2, t),
    "2 ** t": lambda t: 2**t,
}


@pytest.mark.parametrize("name", list(_NUMBER_BASES))
def test_pow_of_a_number_base_at_or_below_zero(name: str) -> None:
    t = torch.tensor([0.0, 1.0, 2.0, -1.0, 0.5, -0.0])
    _like_eager(_NUMBER_BASES[name], [t], _randn(6))


def test_hypot_neither_overflows_nor_underflows(executors: str) -> None:
    a = torch.tensor([3e20, 1e-30, inf, nan, 0.0, -3.0])
    b = torch.tensor([4e20, 1e-30, nan, inf, 0.0, 4.0])
    pair = lambda gen: [torch.randn(6, generator=gen), torch.randn(6, generator=gen)]  # noqa: E731
    _like_eager(torch.hypot, [a, b], pair)
    _like_eager(torch.hypot, [a.reshape(2, 3), torch.tensor([1.0, 2.0, 3.0])])


def test_remainder_gradient_of_other_uses_floor_division() -> None:
    a = torch.tensor([1.0, 0.3, -5.0, inf, 7.0, -7.0])
    b = torch.tensor([0.1, 0.1, inf, 2.0, -3.0, 0.0])
    pair = lambda gen: [torch.randn(6, generator=gen), torch.randn(6, generator=gen)]  # noqa: E731
    _like_eager(torch.remainder, [a, b], pair)
    _like_eager(lambda x: torch.remainder(x, 0.7), [a], _randn(6))


@pytest.mark.parametrize("mode", ["floor", "trunc"])
def test_rounded_division_gives_zero_gradients(mode: str) -> None:
    a, b = torch.tensor([7.0, -7.0, inf]), torch.tensor([2.0, 3.0, 0.0])
    pair = lambda gen: [torch.randn(3, generator=gen), torch.randn(3, generator=gen)]  # noqa: E731
    _like_eager(lambda x, y: torch.div(x, y, rounding_mode=mode), [a, b], pair)


_NO_DERIVATIVE = {
    "a // b": lambda a, b: a // b,
    "floor_divide": torch.floor_divide,
    "1. % b": lambda a, b: 1.0 % b + a,
    "floor_divide_": lambda a, b: (a * 1).floor_divide_(b),
}


@pytest.mark.parametrize("name", list(_NO_DERIVATIVE))
def test_ops_without_a_derivative_raise_eagers_error_in_backward(name: str) -> None:
    fn = _NO_DERIVATIVE[name]
    for f in (fn, thunder.jit(fn)):
        a = torch.tensor([7.0, -7.0], requires_grad=True)
        b = torch.tensor([2.0, 3.0], requires_grad=True)
        out = f(a, b)  # the forward runs; eager raises only when a gradient is asked for
        torch.testing.assert_close(out, fn(a.detach(), b.detach()))
        with pytest.raises(RuntimeError, match="derivative for aten::(floor_divide|remainder)"):
            torch.autograd.grad(out.sum(), (a, b), allow_unused=True)


# -- activations and losses -------------------------------------------------------------------


_ACTIVATIONS = {
    "celu": F.celu,
    "celu(alpha=2)": lambda x: F.celu(x, alpha=2.0),
    "selu": F.selu,
    "elu": F.elu,
    "relu": torch.relu,
    "F.relu": F.relu,
    "logsigmoid": F.logsigmoid,
}


@pytest.mark.parametrize("name", list(_ACTIVATIONS))
def test_activations_at_edges(name: str, executors: str) -> None:
    x = torch.tensor([100.0, 89.0, inf, 1.0, 0.0, -0.0, -1.0, -100.0, nan, -inf])
    _like_eager(_ACTIVATIONS[name], [x], lambda gen: [torch.randn(10, generator=gen) * 50])


def test_relu_keeps_the_sign_of_negative_zero(executors: str) -> None:
    x = torch.tensor([-0.0, 0.0, 1.0, -1.0])
    _like_eager(torch.relu, [x])
    _like_eager(F.relu, [x], grad=[False])


def test_dpo_style_loss_at_zero_logits() -> None:
    def dpo(pc: torch.Tensor, pr: torch.Tensor, rc: torch.Tensor, rr: torch.Tensor) -> Any:
        return -F.logsigmoid(0.1 * ((pc - rc) - (pr - rr))).mean()

    pc, pr = torch.tensor([-5.0, -7.0]), torch.tensor([-6.0, -8.0])
    _like_eager(
        dpo, [pc, pr, pc, pr], lambda gen: [torch.randn(2, generator=gen) for _ in range(4)]
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_at_perfect_predictions(reduction: str) -> None:
    x = torch.tensor([0.0, 1.0, 0.5, 1e-20, 0.0, 1.0])
    y = torch.tensor([0.0, 1.0, 1.0, 1.0, 1.0, 0.0])
    w = torch.tensor([1.0, 2.0, 0.5, 1.0, 3.0, 1.0])

    def probs(gen: torch.Generator) -> list[torch.Tensor]:
        return [torch.rand(6, generator=gen), torch.rand(6, generator=gen)]

    def bce(x: torch.Tensor, y: torch.Tensor) -> Any:
        return F.binary_cross_entropy(x, y, reduction=reduction)

    # The forward's decomposition gives -0.0 where eager gives 0.0 (a loss of exactly 0):
    # the gradients are compared sign of zero included, the loss values without it.
    kw: dict[str, Any] = {"signed_zero_outputs": False}
    _like_eager(bce, [x, y], probs, grad=[True, False], **kw)
    _like_eager(bce, [torch.tensor([0.2, 0.7, 0.5]), torch.tensor([0.3, 0.9, 0.5])])  # target too
    _like_eager(
        lambda x, y: F.binary_cross_entropy(x, y, weight=w, reduction=reduction),
        [x, y],
        probs,
        grad=[True, False],
        **kw,
    )


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits_at_zero_logits(reduction: str) -> None:
    logits, y = torch.zeros(3), torch.tensor([0.5, 0.0, 1.0])

    def bce(x: torch.Tensor, y: torch.Tensor) -> Any:
        return F.binary_cross_entropy_with_logits(x, y, reduction=reduction)

    _like_eager(
        bce,
        [logits, y],
        lambda gen: [torch.randn(3, generator=gen), torch.rand(3, generator=gen)],
        grad=[True, False],
    )


# -- var/std with no degrees of freedom, prod with zeros -------------------------------------


_VARIANCES = {
    "var(correction=4)": lambda a: a.var(correction=4),
    "var(correction=3)": lambda a: a.var(correction=3),
    "var(0, correction=5)": lambda a: a.var(0, correction=5),
    "std(correction=4)": lambda a: a.std(correction=4),
    "std(0, correction=4)": lambda a: a.std(0, correction=4),
    "var_mean(correction=4)": lambda a: torch.var_mean(a, correction=4),
    "std_mean(correction=4)": lambda a: torch.std_mean(a, correction=4),
    "var()": lambda a: a.var(),
    "std(unbiased=False)": lambda a: a.std(unbiased=False),
}


@pytest.mark.parametrize("name", list(_VARIANCES))
def test_variance_without_degrees_of_freedom(name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager's own "degrees of freedom <= 0"
        _like_eager(_VARIANCES[name], [torch.tensor([1.0, 2.0, 4.0])], _randn(3))
        _like_eager(_VARIANCES[name], [torch.tensor([2.0, 2.0, 2.0])])


_PRODS = {
    "prod()": lambda a: a.prod(),
    "prod(-1)": lambda a: a.prod(-1),
    "prod(0, keepdim)": lambda a: a.prod(0, keepdim=True),
}


@pytest.mark.parametrize("name", list(_PRODS))
@pytest.mark.parametrize(
    "x",
    [
        [[2.0, nan, 0.0], [1.0, 2.0, 3.0]],
        [[2.0, inf, 0.0], [1.0, 2.0, 3.0]],
        [[2.0, nan, 3.0], [1.0, 2.0, 3.0]],
        [[0.0, 0.0, nan], [1.0, 0.0, 3.0]],
        [[0.0, 5.0, 2.0], [1.0, 4.0, 3.0]],
    ],
)
def test_prod_with_zeros_and_nans(name: str, x: list[list[float]]) -> None:
    _like_eager(_PRODS[name], [torch.tensor(x)], _randn(2, 3))


def test_prod_of_a_vector_with_one_zero_and_a_nan() -> None:
    _like_eager(lambda a: a.prod(), [torch.tensor([2.0, nan, 0.0, 4.0])], _randn(4))
    _like_eager(lambda a: a.prod(), [torch.tensor([2.0, inf, 0.0, 4.0])])


_LOW_PRECISION = {
    "celu": F.celu,
    "selu": F.selu,
    "logsigmoid": F.logsigmoid,
    "relu": torch.relu,
    "clamp": lambda x, y: torch.clamp(x, -0.5, 0.5) * y,
    "fmax": torch.fmax,
    "maximum": torch.maximum,
    "hypot": torch.hypot,
    "bce": lambda x, y: F.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(y)),
    "var(correction=4)": lambda x: x.var(correction=4),
    "std": lambda x: x.std(),
    "prod": lambda x: x.prod(),
    "max": lambda x: x.max(),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("name", list(_LOW_PRECISION))
def test_other_dtypes_like_eager(name: str, dtype: torch.dtype, executors: str) -> None:
    fn = _LOW_PRECISION[name]
    n_args = 2 if name in ("clamp", "fmax", "maximum", "hypot", "bce") else 1
    edge = torch.tensor([0.0, -0.0, 1.0, -1.0, 100.0, nan], dtype=dtype)
    if name == "bce":
        edge[-1] = -100.0  # eager's loss refuses a NaN probability (a check of the data)

    def draw(gen: torch.Generator) -> list[torch.Tensor]:
        return [torch.randn(6, generator=gen).to(dtype) for _ in range(n_args)]

    # eager's backward rounds to the low-precision dtype after each step where the rules
    # compute in float32 and round once
    tol = {"atol": 1e-2, "rtol": 2e-2} if dtype != torch.float64 else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager's own "degrees of freedom <= 0"
        _like_eager(fn, [edge] * n_args, draw, tol=tol)


_POINTWISE_LOSSES = {
    "huber": lambda x, t: F.huber_loss(x, t),
    "huber(delta=2, sum)": lambda x, t: F.huber_loss(x, t, delta=2.0, reduction="sum"),
    "huber(none)": lambda x, t: F.huber_loss(x, t, reduction="none"),
    "smooth_l1": lambda x, t: F.smooth_l1_loss(x, t),
    "smooth_l1(beta=0.5, sum)": lambda x, t: F.smooth_l1_loss(x, t, beta=0.5, reduction="sum"),
    "smooth_l1(beta=0)": lambda x, t: F.smooth_l1_loss(x, t, beta=0.0),
}


@pytest.mark.filterwarnings("ignore:Using a target size")  # eager's, for the broadcast case
@pytest.mark.parametrize("name", list(_POINTWISE_LOSSES))
def test_pointwise_losses_at_infinite_differences(name: str) -> None:
    x = torch.tensor([0.0, 1.0, nan, inf, -inf, -2.0, 0.3, 1e30])
    t = torch.tensor([0.0, 0.0, 0.0, 0.5, 2.0, 0.0, 0.1, -1e30])
    pair = lambda gen: [torch.randn(8, generator=gen), torch.randn(8, generator=gen)]  # noqa: E731
    _like_eager(_POINTWISE_LOSSES[name], [x, t], pair)
    _like_eager(_POINTWISE_LOSSES[name], [x.reshape(2, 4), torch.tensor([0.0, inf, 1.0, -1.0])])


_SIGNED_ZERO_GRADIENTS = {
    "copysign": lambda a: torch.copysign(a, -a),
    "copysign(number)": lambda a: torch.copysign(a, -1.0),
    "a ** a": lambda a: a**a,
    "nan_to_num": torch.nan_to_num,
    "nan_to_num(1, 2, 3)": lambda a: torch.nan_to_num(a, 1.0, 2.0, 3.0),
}


@pytest.mark.parametrize("name", list(_SIGNED_ZERO_GRADIENTS))
def test_gradients_keep_eagers_signed_zeros(name: str) -> None:
    x = torch.tensor([0.0, -0.0, 1.0, -1.0, inf, -inf, nan, 0.5, 2.0, -2.0])
    _like_eager(_SIGNED_ZERO_GRADIENTS[name], [x], _randn(10))


_DIVISIONS = {
    "div": torch.div,
    "a / b": lambda a, b: a / b,
    "addcdiv": lambda a, b: torch.addcdiv(a, a, b, value=0.5),
    "addcdiv(value=tensor)": lambda a, b: torch.addcdiv(a, b, b.flip(0), value=torch.tensor(2.0)),
}


@pytest.mark.parametrize("name", list(_DIVISIONS))
def test_division_gradients_overflow_where_eagers_do(name: str) -> None:
    a = torch.tensor([1e30, 1e-30, 3.0, 0.0, inf, nan, 1.0, -2.0])
    b = torch.tensor([1e30, 1e-30, 1e-20, 0.0, 2.0, 1.0, -0.0, 4.0])
    pair = lambda gen: [torch.randn(8, generator=gen), torch.randn(8, generator=gen)]  # noqa: E731
    _like_eager(_DIVISIONS[name], [a, b], pair)
