"""Gradients at the points where eager's backward formulas special-case the input: ``max``/``min``
along a dim with ties (the whole gradient at the returned index), norms at a zero vector (0, not
``0 * inf``), ``std`` of a constant input, ``atan2(0, 0)``, ``cumprod`` through zeros. Each is
checked against ``torch.autograd.grad`` of eager on those inputs and on random ones, with thunder's
default executors and with the decompositions alone (``executors=("torch",)``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

import thunder

pytestmark = [
    pytest.mark.filterwarnings("error:thunder.jit"),
    pytest.mark.filterwarnings("ignore:.*degrees of freedom is <= 0"),
]

EXECUTORS = [None, ("torch",)]  # None: thunder's defaults

_JITTED: dict[tuple[str, Any], Any] = {}


def _jit(name: str, fn: Callable[..., Any], executors: tuple[str, ...] | None) -> Any:
    """One jitted function per case, so that repeated calls reuse its compilation."""
    key = (name, executors)
    if key not in _JITTED:
        _JITTED[key] = (
            thunder.jit(fn) if executors is None else thunder.jit(fn, executors=executors)
        )
    return _JITTED[key]


def _flat(out: Any) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _grads(fn: Callable[..., Any], inputs: list[torch.Tensor], seed: int) -> tuple[Any, ...]:
    xs = [x.detach().clone().requires_grad_() for x in inputs]
    outs = _flat(fn(*xs))
    gen = torch.Generator().manual_seed(seed)
    cts = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype) for o in outs]
    return outs, torch.autograd.grad(outs, xs, cts, allow_unused=True)


def _assert_like_eager(
    name: str,
    fn: Callable[..., Any],
    inputs: list[torch.Tensor],
    executors: tuple[str, ...] | None,
    *,
    seed: int = 0,
    finite: bool = True,
    tol: dict[str, float] | None = None,
) -> tuple[Any, ...]:
    """Values and gradients (for a random cotangent) of the jitted ``fn`` are eager's; with
    ``finite``, eager's gradients must be finite (no NaN to hide behind ``equal_nan``)."""
    want_out, want = _grads(fn, inputs, seed)
    got_out, got = _grads(_jit(name, fn, executors), inputs, seed)
    for o, w in zip(got_out, want_out):
        torch.testing.assert_close(o, w.detach(), equal_nan=not finite)
    for g, w in zip(got, want):
        if w is None or g is None:  # an input the output does not use
            assert g is None or not g.any(), (name, g)
            assert w is None or not w.any(), (name, w)
            continue
        if finite:
            assert torch.isfinite(w).all(), (name, w)
        torch.testing.assert_close(g, w, equal_nan=not finite, **(tol or {}))
    return got


def _t(*values: Any, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


def _clip_by_total_norm(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # What clip_grad_norm_ computes: the norm of the per-tensor norms, then a clamped coefficient.
    total = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(t) for t in (a, b)]))
    coef = torch.clamp(1.0 / (total + 1e-6), max=1.0)
    return a * coef, b * coef


Z23 = [[0.0, 0.0, 0.0], [1.0, -2.0, 0.0]]  # a zero row and a row with a zero

# name -> (fn, edge inputs)
CASES: dict[str, tuple[Callable[..., Any], list[torch.Tensor]]] = {
    # max/min along a dim: the gradient goes to the returned index only.
    "max_dim": (lambda x: x.max(0).values, [_t(4.0, 0.0, 4.0)]),
    "min_dim_getitem": (lambda x: x.min(0)[0], [_t(0.0, 4.0, 0.0)]),
    "torch_max_dim": (lambda x: torch.max(x, 1)[0], [_t([1.0, 3.0, 3.0], [2.0, 2.0, 0.0])]),
    "torch_min_dim_kw": (lambda x: torch.min(x, dim=0).values, [_t([1.0, 3.0], [1.0, 3.0])]),
    "max_keepdim": (
        lambda x: x.max(1, keepdim=True).values,
        [_t([1.0, 3.0, 3.0], [2.0, 2.0, 0.0])],
    ),
    "min_neg_dim": (
        lambda x: x.min(-1).values,
        [_t([[1.0, 1.0], [0.0, 0.0]], [[5.0, 5.0], [5.0, 5.0]])],
    ),
    "max_0d": (lambda x: x.max(0)[0], [torch.tensor(2.0)]),
    # without indices: an even split among the ties, as eager
    "amax": (lambda x: x.amax(0), [_t(4.0, 0.0, 4.0)]),
    "amin_keepdim": (lambda x: x.amin(1, keepdim=True), [_t([1.0, 1.0, 3.0], [2.0, 2.0, 2.0])]),
    "max_all": (lambda x: x.max(), [_t(4.0, 0.0, 4.0)]),
    "min_all": (lambda x: torch.min(x), [_t(0.0, 4.0, 0.0)]),
    "maximum": (lambda x, y: torch.max(x, y), [_t(1.0, 2.0), _t(1.0, 3.0)]),
    "cummax": (lambda x: x.cummax(0).values, [_t(1.0, 3.0, 3.0, 2.0)]),
    "cummin": (lambda x: x.cummin(0).values, [_t(3.0, 1.0, 1.0, 2.0)]),
    # norms at zero: eager's gradient is 0 there
    "norm": (lambda x: x.norm(), [torch.zeros(3)]),
    "norm_p3": (lambda x: x.norm(3), [torch.zeros(3)]),
    "norm_fro": (lambda x: x.norm("fro"), [torch.zeros(2, 2)]),
    "vector_norm": (lambda x: torch.linalg.vector_norm(x), [torch.zeros(3)]),
    "vector_norm_3": (lambda x: torch.linalg.vector_norm(x, 3), [torch.zeros(3)]),
    "vector_norm_1": (lambda x: torch.linalg.vector_norm(x, 1), [torch.zeros(3)]),
    "vector_norm_1_5": (lambda x: torch.linalg.vector_norm(x, 1.5, dim=1), [_t(*Z23)]),
    "vector_norm_0_5": (lambda x: torch.linalg.vector_norm(x, 0.5, dim=1), [_t(*Z23)]),
    "vector_norm_inf": (lambda x: torch.linalg.vector_norm(x, math.inf, dim=1), [_t(*Z23)]),
    "vector_norm_neg_inf": (lambda x: torch.linalg.vector_norm(x, -math.inf), [_t(1.0, -1.0, 3.0)]),
    "vector_norm_dim_keepdim": (
        lambda x: torch.linalg.vector_norm(x, dim=-1, keepdim=True),
        [_t(*Z23)],
    ),
    "vector_norm_0d": (lambda x: torch.linalg.vector_norm(x), [torch.tensor(0.0)]),
    "vector_norm_dtype": (
        lambda x: torch.linalg.vector_norm(x, dim=1, dtype=torch.float64),
        [_t(*Z23)],
    ),
    "linalg_norm": (lambda x: torch.linalg.norm(x), [torch.zeros(3)]),
    "nested_norm": (
        lambda a, b: torch.stack([a.norm(), b.norm()]).norm(),
        [torch.zeros(3), torch.zeros(2)],
    ),
    "nested_norm_one_zero": (
        lambda a, b: torch.stack([a.norm(), b.norm()]).norm(),
        [torch.zeros(3), _t(1.0, 2.0)],
    ),
    "clip_by_total_norm": (_clip_by_total_norm, [torch.zeros(3), torch.zeros(2)]),
    "normalize": (lambda x: F.normalize(x, dim=1), [_t(*Z23)]),
    "normalize_p1": (lambda x: F.normalize(x, p=1, dim=1), [_t(*Z23)]),
    "normalize_p3": (lambda x: F.normalize(x, p=3, dim=-1), [_t(*Z23)]),
    "normalize_tiny": (lambda x: F.normalize(x), [_t([1e-13, 0.0])]),
    "cosine_similarity": (
        lambda a, b: F.cosine_similarity(a, b),
        [_t([0.0, 0.0], [1.0, 2.0]), _t([1.0, 2.0], [0.0, 0.0])],
    ),
    # a norm below eps: eager clamps it outside autograd
    "cosine_similarity_tiny": (
        lambda a, b: F.cosine_similarity(a, b),
        [_t([1e-9, 0.0]), _t([1.0, 2.0])],
    ),
    "pairwise_distance": (
        lambda a, b: F.pairwise_distance(a, b),
        [_t([0.0, 0.0], [1.0, 2.0]), _t([1e-6, 1e-6])],
    ),
    "pairwise_distance_p3": (
        lambda a, b: F.pairwise_distance(a, b, 3, keepdim=True),
        [_t([0.0, 0.0]), _t([1e-6, 1e-6])],
    ),
    "dist": (lambda a, b: torch.dist(a, b), [_t(1.0, 2.0), _t(1.0, 2.0)]),
    "dist_p3": (lambda a, b: torch.dist(a, b, 3), [_t(1.0, 2.0), _t(1.0, 2.0)]),
    "cdist": (lambda a, b: torch.cdist(a, b), [_t([1.0, 2.0], [3.0, 4.0]), _t([1.0, 2.0])]),
    "pdist": (lambda a: torch.pdist(a), [_t([1.0, 2.0], [1.0, 2.0], [3.0, 4.0])]),
    "renorm": (lambda a: torch.renorm(a, 2, 0, 1.0), [_t([0.0, 0.0], [3.0, 4.0])]),
    # std of a constant: eager's gradient is 0
    "std": (lambda x: x.std(), [_t(2.0, 2.0, 2.0)]),
    "std_unbiased_false": (lambda x: x.std(unbiased=False), [_t(2.0, 2.0, 2.0)]),
    "std_positional_unbiased": (lambda x: torch.std(x, False), [_t(2.0, 2.0, 2.0)]),
    "std_dim": (lambda x: x.std(1), [_t([2.0, 2.0, 2.0], [1.0, 2.0, 3.0])]),
    "std_dims_keepdim": (
        lambda x: x.std((0, 2), keepdim=True),
        [torch.ones(2, 3, 2)],
    ),
    "std_correction_0_single": (lambda x: x.std(correction=0), [_t(2.0)]),
    "std_mean": (lambda x: torch.std_mean(x), [_t(2.0, 2.0, 2.0)]),
    "std_mean_dim": (lambda x: torch.std_mean(x, dim=1, keepdim=True), [_t(*[[3.0] * 3] * 2)]),
    "var": (lambda x: x.var(), [_t(2.0, 2.0, 2.0)]),
    "var_mean": (lambda x: torch.var_mean(x, 0), [_t(2.0, 2.0, 2.0)]),
    # atan2 at the origin: 0 (signed as eager)
    "atan2": (lambda a, b: torch.atan2(a, b), [_t(0.0, -0.0, 0.0, 1.0), _t(0.0, 0.0, -0.0, 0.0)]),
    "atan2_underflow": (lambda a, b: torch.atan2(a, b), [_t(1e-23, 0.0), _t(1e-23, 0.0)]),
    # cumprod through zeros: the first zero gets the product of its neighbours, later ones 0
    "cumprod": (lambda x: x.cumprod(0), [_t(2.0, 0.0, 3.0)]),
    "cumprod_two_zeros": (lambda x: x.cumprod(0), [_t(2.0, 0.0, 3.0, 0.0, 5.0)]),
    "cumprod_all_zeros": (lambda x: x.cumprod(-1), [torch.zeros(2, 3)]),
    "cumprod_2d": (
        lambda x: x.cumprod(1),
        [_t([2.0, 0.0, 3.0, 4.0], [0.0, 1.0, 2.0, 0.0], [1.0, 2.0, 0.0, 0.0])],
    ),
    "cumprod_dim0": (lambda x: x.cumprod(0), [_t([2.0, 0.0], [0.0, 3.0], [4.0, 5.0])]),
    "cumprod_size_one": (lambda x: x.cumprod(1), [_t([0.0], [2.0])]),
    "cumprod_dtype": (lambda x: x.cumprod(0, dtype=torch.float64), [_t(2.0, 0.0, 3.0)]),
    "prod_one_zero": (lambda x: x.prod(), [_t(2.0, 0.0, 3.0)]),
    "prod_two_zeros": (lambda x: x.prod(1), [_t([2.0, 0.0, 0.0], [0.0, 1.0, 2.0])]),
}

# eager's gradient here is NaN (or its value is); thunder must give the same
NAN_CASES: dict[str, tuple[Callable[..., Any], list[torch.Tensor]]] = {
    "sqrt_of_sum_of_squares": (lambda x: (x * x).sum().sqrt(), [torch.zeros(3)]),
    "atan2_subnormal": (lambda a, b: torch.atan2(a, b), [_t(1e-20, 0.0), _t(0.0, 1e-20)]),
    "std_single_element": (lambda x: x.std(), [_t(2.0)]),
    "var_single_element": (lambda x: x.var(0), [_t([2.0, 3.0])]),
    "std_mean_correction_2": (lambda x: torch.std_mean(x, 0, correction=2), [_t(1.0, 2.0)]),
    "cumprod_nan": (lambda x: x.cumprod(0), [_t(2.0, math.nan, 0.0, 3.0)]),
}


@pytest.mark.parametrize("executors", EXECUTORS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_edge_inputs_like_eager(name: str, executors: tuple[str, ...] | None) -> None:
    fn, inputs = CASES[name]
    _assert_like_eager(name, fn, inputs, executors)


@pytest.mark.parametrize("executors", EXECUTORS)
@pytest.mark.parametrize("name", sorted(NAN_CASES))
def test_nan_gradients_stay_like_eager(name: str, executors: tuple[str, ...] | None) -> None:
    fn, inputs = NAN_CASES[name]
    _assert_like_eager(name, fn, inputs, executors, finite=False)


@pytest.mark.parametrize("executors", EXECUTORS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_random_inputs_like_eager(name: str, executors: tuple[str, ...] | None) -> None:
    fn, inputs = CASES[name]
    gen = torch.Generator().manual_seed(sum(map(ord, name)))
    fresh = [torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x.dtype) for x in inputs]
    _assert_like_eager(name, fn, fresh, executors, seed=1)


def _value_grad(fn: Callable[..., Any], x: torch.Tensor) -> torch.Tensor:
    x = x.clone().requires_grad_()
    (g,) = torch.autograd.grad(fn(x).sum(), x)
    return g


def test_max_dim_gradient_goes_to_the_returned_index() -> None:
    x = _t(4.0, 0.0, 4.0)
    for fn in (lambda t: t.max(0).values, lambda t: torch.max(t, 0)[0]):
        assert _value_grad(thunder.jit(fn), x).tolist() == [1.0, 0.0, 0.0]
    assert _value_grad(thunder.jit(lambda t: t.min(0)[0]), _t(0.0, 4.0, 0.0)).tolist() == [
        1.0,
        0.0,
        0.0,
    ]
    # amax and max() split it evenly, as eager
    assert _value_grad(thunder.jit(lambda t: t.amax(0)), x).tolist() == [0.5, 0.0, 0.5]
    assert _value_grad(thunder.jit(lambda t: t.max()), x).tolist() == [0.5, 0.0, 0.5]


def test_zero_norm_gradients_are_zero() -> None:
    for fn in (
        lambda t: t.norm(),
        lambda t: torch.linalg.vector_norm(t),
        lambda t: torch.linalg.vector_norm(t, 3),
        lambda t: t.std(),
    ):
        assert _value_grad(thunder.jit(fn), torch.zeros(3)).tolist() == [0.0, 0.0, 0.0]
    assert _value_grad(thunder.jit(lambda t: t.cumprod(0)), _t(2.0, 0.0, 3.0)).tolist() == [
        1.0,
        8.0,
        0.0,
    ]


def test_low_precision_like_eager() -> None:
    x = torch.tensor([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0], [2.0, 2.0, 2.0]], dtype=torch.bfloat16)
    for name, fn in {
        "bf16_norm": lambda t: torch.linalg.vector_norm(t, dim=1),
        "bf16_normalize": lambda t: F.normalize(t, dim=1),
        "bf16_std": lambda t: t.std(1),
        "bf16_max": lambda t: t.max(1).values,
        "bf16_cumprod": lambda t: t.cumprod(1),
    }.items():
        # eager's backward rounds to bfloat16 at each step, thunder's computes in float32
        _assert_like_eager(name, fn, [x], None, tol={"atol": 1e-2, "rtol": 5e-2})


# Property: small integer tensors (many ties, zeros, zero rows and constant rows) ----------------

OPS: dict[str, Callable[..., Any]] = {
    "max_dim": lambda x, y: x.max(1).values,
    "min_dim_keepdim": lambda x, y: x.min(0, keepdim=True)[0],
    "amax": lambda x, y: x.amax(1),
    "max_all": lambda x, y: x.max(),
    "norm": lambda x, y: x.norm(dim=1),
    "norm_all": lambda x, y: x.norm(),
    "norm_p3": lambda x, y: torch.linalg.vector_norm(x, 3, dim=1),
    "norm_p1_5": lambda x, y: torch.linalg.vector_norm(x, 1.5, dim=0),
    "norm_p0_5": lambda x, y: torch.linalg.vector_norm(x, 0.5, dim=1),
    "norm_inf": lambda x, y: torch.linalg.vector_norm(x, math.inf, dim=1),
    "nested_norm": lambda x, y: torch.stack([x.norm(), y.norm()]).norm(),
    "normalize": lambda x, y: F.normalize(x, dim=1),
    "cosine_similarity": lambda x, y: F.cosine_similarity(x, y),
    "std": lambda x, y: x.std(1),
    "std_mean": lambda x, y: torch.std_mean(x, 0),
    "atan2": lambda x, y: torch.atan2(x, y),
    "cumprod": lambda x, y: x.cumprod(1),
    "prod": lambda x, y: x.prod(1),
}


@given(
    name=st.sampled_from(sorted(OPS)),
    xs=st.lists(st.integers(-2, 2), min_size=24, max_size=24),
    zero_row=st.booleans(),
    const_row=st.booleans(),
)
def test_small_integer_inputs_like_eager(
    name: str, xs: list[int], zero_row: bool, const_row: bool
) -> None:
    x = torch.tensor(xs[:12], dtype=torch.float64).reshape(3, 4)
    y = torch.tensor(xs[12:], dtype=torch.float64).reshape(3, 4)
    if zero_row:
        x[0] = 0.0
        y[0] = 0.0
    if const_row:
        x[1] = x[1, 0]
    _assert_like_eager(f"prop_{name}", OPS[name], [x, y], None)


def test_abs_of_complex_tensors_like_eager():
    def f(x, w):
        return (x.abs() * w).sum()

    jf = thunder.jit(f)
    for x0 in (torch.tensor([1 + 1j, 3 + 4j, 0j]), torch.randn(5, dtype=torch.complex64)):
        w = torch.rand(x0.shape)
        grads = []
        for fn in (f, jf):
            x = x0.clone().requires_grad_()
            fn(x, w).backward()
            grads.append(x.grad)
        torch.testing.assert_close(grads[1], grads[0])
