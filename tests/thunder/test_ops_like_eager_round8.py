"""Ops as eager PyTorch, round 8: bool parameters given ints, index writes and one_hot with
only the torch executor, and the sign of zero gradients of single-kernel ops (eager's formula
gives -0 where a decomposition's sum of gradient pieces gives +0)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Callable[..., Any], cache: str | None, **kw: Any) -> Callable[..., Any]:
    if cache is not None:
        kw["cache"] = cache
    return thunder.jit(fn, **kw)


def _outcome(fn: Callable[..., Any], *args: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - the error's type is compared
            return e


# 1. torch's argument parser takes only a bool for a builtin's bool parameter ------------------

REFUSED_INT_BOOLS = {
    "sum_keepdim": lambda x: torch.sum(x, 0, 1),
    "sum_keepdim_kw": lambda x: torch.sum(x, 0, keepdim=1),
    "sum_keepdim_float": lambda x: torch.sum(x, 0, 1.0),
    "method_sum": lambda x: x.sum(0, 1),
    "method_mean": lambda x: x.mean(0, 1),
    "mean_kw": lambda x: torch.mean(x, dim=0, keepdim=1),
    "amax": lambda x: torch.amax(x, 0, 1),
    "amin": lambda x: torch.amin(x, 0, 1),
    "argmax": lambda x: torch.argmax(x, 0, 1),
    "argmin": lambda x: torch.argmin(x, 0, 0),
    "max_dim": lambda x: torch.max(x, 0, 1)[0],
    "var_unbiased": lambda x: torch.var(x, 0, 0),
    "var_unbiased_kw": lambda x: torch.var(x, 0, unbiased=0),
    "var_keepdim": lambda x: x.var(0, keepdim=1),
    "var_correction_keepdim": lambda x: torch.var(x, 0, correction=0, keepdim=1),
    "var_mean": lambda x: torch.var_mean(x, 0, 0, 1)[0],
    "std_mean": lambda x: torch.std_mean(x, 0, keepdim=1)[1],
    "isclose": lambda x: torch.isclose(x, x, equal_nan=1),
    "topk_largest": lambda x: torch.topk(x, 2, 1, 0)[0],
    "sort_descending": lambda x: torch.sort(x, 1, 1)[0],
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(REFUSED_INT_BOOLS))
def test_int_for_a_bool_parameter_raises_type_error_as_eager(name: str, cache: str | None) -> None:
    fn = REFUSED_INT_BOOLS[name]
    jfn = _jit(fn, cache)
    for _ in range(2):
        x = torch.randn(3, 4)
        assert isinstance(_outcome(fn, x), TypeError)
        assert isinstance(_outcome(jfn, x), TypeError)


ACCEPTED_BOOLS = {
    "sum_keepdim": lambda x, b: torch.sum(x, 0, b),
    "method_mean": lambda x, b: x.mean(1, b),
    "amax": lambda x, b: torch.amax(x, 0, keepdim=b),
    "argmax": lambda x, b: torch.argmax(x, 1, b),
    "var": lambda x, b: torch.var(x, 0, b, b),
    "var_dim_only": lambda x, b: torch.var(x, 1) * b,  # the int is a dim
    "std_unbiased_only": lambda x, b: torch.std(x, b),
    "max_dim": lambda x, b: torch.max(x, 1, b)[0],
    "isclose": lambda x, b: torch.isclose(x, x + 1e-9, equal_nan=b),
    # torch.nn.functional parses its own arguments: an int is taken as truthy
    "relu_inplace_int": lambda x, b: F.relu(x.clone(), inplace=int(b)),
    "hardtanh_inplace_int": lambda x, b: F.hardtanh(x.clone(), inplace=int(b)),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(ACCEPTED_BOOLS))
def test_bool_parameters_taken_as_eager_takes_them(name: str, cache: str | None) -> None:
    fn = ACCEPTED_BOOLS[name]
    jfn = _jit(fn, cache)
    for b in (True, False, True):
        x = torch.randn(3, 4)
        torch.testing.assert_close(jfn(x, b), fn(x, b))


# 2. Only the torch executor: index writes and one_hot refuse what eager refuses ----------------

EXECUTOR_LISTS = [["torch"], None, ["torch_ops", "torch"]]


def _one_hot(i: torch.Tensor) -> torch.Tensor:
    return F.one_hot(i, 4)


def _scatter_value(i: torch.Tensor) -> torch.Tensor:
    return torch.zeros(3, 4).scatter(0, i, 2.0)


def _scatter_src(i: torch.Tensor) -> torch.Tensor:
    return torch.zeros(3, 4).scatter(0, i, torch.ones(1, 4))


def _index_add(i: torch.Tensor) -> torch.Tensor:
    return torch.zeros(4, 2).index_add(0, i[0], torch.ones(4, 2))


def _index_copy(i: torch.Tensor) -> torch.Tensor:
    return torch.zeros(4, 2).index_copy(0, i[0], torch.ones(4, 2))


def _index_fill(i: torch.Tensor) -> torch.Tensor:  # eager wraps a negative index here
    return torch.zeros(4, 2).index_fill(0, i[0], 2.0)


INDEX_WRITES = {
    "one_hot": _one_hot,
    "scatter_value": _scatter_value,
    "scatter_src": _scatter_src,
    "index_add": _index_add,
    "index_copy": _index_copy,
    "index_fill": _index_fill,
}


@pytest.mark.parametrize("executors", EXECUTOR_LISTS, ids=str)
@pytest.mark.parametrize("name", sorted(INDEX_WRITES))
def test_index_writes_with_indices_out_of_range_as_eager(name: str, executors: Any) -> None:
    fn = INDEX_WRITES[name]
    kw = {} if executors is None else {"executors": executors}
    jfn = thunder.jit(fn, **kw)
    cases = [
        torch.tensor([[0, 3, 1, 2]]),
        torch.tensor([[-1, 0, 1, 2]]),
        torch.tensor([[2, 1, 0, 3]]),
        torch.tensor([[0, 1, 4, 2]]),
        torch.tensor([[0, 1, -4, 3]]),
    ]
    for i in cases:
        expected, got = _outcome(fn, i), _outcome(jfn, i)
        if isinstance(expected, Exception):
            assert isinstance(got, (RuntimeError, IndexError)), (i, expected, got)
        else:
            assert isinstance(got, torch.Tensor), (i, got)
            assert got.dtype == expected.dtype
            torch.testing.assert_close(got, expected, rtol=0, atol=0)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("executors", EXECUTOR_LISTS, ids=str)
def test_factories_and_one_hot_with_each_executor_list(executors: Any, cache: str | None) -> None:
    def fn(x: torch.Tensor, i: torch.Tensor, n: int) -> Any:
        t = torch.empty(x.shape, dtype=x.dtype)
        t.fill_(2.0)
        z = torch.zeros(n, x.shape[1], dtype=torch.float64)
        nz = x.new_zeros((2, n))
        return t + x, z, nz, F.one_hot(i, n + 2), F.one_hot(i, num_classes=-1)

    kw: dict[str, Any] = {} if executors is None else {"executors": executors}
    jfn = _jit(fn, cache, **kw)
    for n in (3, 4, 3):
        x, i = torch.randn(3, 4), torch.randint(0, 3, (5,))
        for got, expected in zip(jfn(x, i, n), fn(x, i, n)):
            assert got.dtype == expected.dtype
            torch.testing.assert_close(got, expected, rtol=0, atol=0)


# 3. The sign of zero gradients: eager's formula, not a sum that turns -0 into +0 --------------


def _signed_zero_inputs(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.tensor([-2.0, -1.0, -0.0, 0.0, 0.5, 1.0, 1.5, 3.0] * (n // 8))[torch.randperm(n)]
    w = torch.tensor([0.0, -0.0, 1.0, -1.0, 2.0, -3.0, 0.5, -0.5] * (n // 8))[torch.randperm(n)]
    g = torch.randn(n)
    g[torch.randperm(n)[: n // 4]] = 0.0
    g[torch.randperm(n)[: n // 4]] = -0.0
    return x, w, g


def _assert_same_bits(got: Any, expected: Any) -> None:
    assert (got is None) == (expected is None)
    if expected is None:
        return
    torch.testing.assert_close(got, expected, equal_nan=True)
    # an elementwise function may round an ulp apart; a zero's sign may not differ
    zeros = (expected == 0) | (got == 0)
    assert torch.equal(torch.signbit(got[zeros]), torch.signbit(expected[zeros])), (got, expected)


SIGNED_ZERO_GRADS = {
    "glu": lambda x, w: F.glu(torch.cat([x, w]), 0),
    "glu_2d": lambda x, w: F.glu(torch.stack([x, w], 1), -1),
    "lerp_weight_0": lambda x, w: torch.lerp(x, w, 0.0),
    "lerp_weight_1": lambda x, w: torch.lerp(x, w, 1.0),
    "lerp_tensor_weight": lambda x, w: torch.lerp(x, w, (w > 0).to(x.dtype)),
    "lerp_broadcast": lambda x, w: torch.lerp(x.view(-1, 8), w[:8], 0.0),
    "lerp_method_weight_half": lambda x, w: x.lerp(w, 0.5),
    "prelu_zero_weight": lambda x, w: F.prelu(x, w[:1] * 0.0),
    "prelu_weight": lambda x, w: F.prelu(x, w[:1]),
    "prelu_channels": lambda x, w: F.prelu(x.view(-1, 4, 2), w[:4]),
    "mse_none": lambda x, w: F.mse_loss(x, w, reduction="none"),
    "mse_sum": lambda x, w: F.mse_loss(x, w, reduction="sum") * w[0],
    "mse_mean": lambda x, w: F.mse_loss(x, w) * w[1],
    "sort_values": lambda x, w: x.sort().values * w,
    "sort_descending": lambda x, w: torch.sort(x.view(-1, 4), 1, descending=True)[0],
    "topk_values": lambda x, w: x.topk(4).values,
    "max_dim": lambda x, w: x.view(-1, 4).max(1).values,
    "min_dim_keepdim": lambda x, w: x.view(-1, 4).min(0, keepdim=True).values,
    "roll": lambda x, w: x.roll(3),
    "roll_dims": lambda x, w: x.view(2, -1).roll((1, -1), (0, 1)),
    "bce_logits": lambda x, w: F.binary_cross_entropy_with_logits(x, w, reduction="none"),
    "bce_logits_mean": lambda x, w: F.binary_cross_entropy_with_logits(x, w) * w[0],
    "bce_logits_pos_weight": lambda x, w: F.binary_cross_entropy_with_logits(
        x, w.sigmoid(), pos_weight=torch.full((x.shape[0],), 2.0), reduction="none"
    ),
    "logsumexp": lambda x, w: x.view(2, -1).logsumexp(1),
    "floor": lambda x, w: torch.floor(x),
    "ceil": lambda x, w: torch.ceil(x),
    "round": lambda x, w: torch.round(x),
    "trunc": lambda x, w: torch.trunc(x),
    "sign": lambda x, w: torch.sign(x),
    "where": lambda x, w: torch.where(x > 0, x, w),
    "clamp": lambda x, w: torch.clamp(x, -1.0, 1.0),
    "abs": lambda x, w: x.abs(),
    "relu": lambda x, w: F.relu(x),
    "hardtanh": lambda x, w: F.hardtanh(x),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(SIGNED_ZERO_GRADS))
def test_zero_gradients_keep_eagers_sign(name: str, cache: str | None) -> None:
    fn = SIGNED_ZERO_GRADS[name]
    jfn = _jit(fn, cache)
    for n in (8, 16, 8):
        x, w, g = _signed_zero_inputs(n)
        grads = []
        for f in (fn, jfn):
            xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
            out = f(xr, wr)
            cot = g[: out.numel()].reshape(out.shape) if out.ndim else g[0]
            grads.append(torch.autograd.grad(out, (xr, wr), cot, allow_unused=True))
        for got, expected in zip(grads[1], grads[0]):
            _assert_same_bits(got, expected)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_glu_lerp_prelu_gradients_in_other_dtypes(dtype: torch.dtype) -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (
            F.glu(x, -1).sum()
            + torch.lerp(x, w, 0.25).sum()
            + torch.lerp(x, w, w.sigmoid()).sum()
            + F.prelu(x, w[0, :1]).sum()
        )

    jfn = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(4, 6, dtype=dtype, requires_grad=True)
        w = torch.randn(4, 6, dtype=dtype, requires_grad=True)
        expected = torch.autograd.grad(fn(x, w), (x, w))
        got = torch.autograd.grad(jfn(x, w), (x, w))
        for a, b in zip(got, expected):
            # bfloat16: the sums of the four terms' gradients round in another order
            tol = {"atol": 2e-2, "rtol": 2e-2} if dtype is torch.bfloat16 else {}
            torch.testing.assert_close(a, b, **tol)
