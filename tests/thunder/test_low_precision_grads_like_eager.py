"""float16/bfloat16 values and gradients bit for bit eager's where eager runs an op (or its
backward) as one kernel or with a formula that rounds op by op: matmul's backward folds batch
dimensions into one mm/mv, index_add and prod run torch's kernels while training,
index_select's backward is index_add, backward formulas round in the dtype (mse_loss, norm,
kl_div, avg_pool, cumsum with a dtype), attention with a mask runs the CPU flash kernel. Several
calls with fresh inputs each; comparisons are exact (NaN where eager has NaN)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

LOW = [torch.bfloat16, torch.float16]


def _same(eager: torch.Tensor, jitted: torch.Tensor, what: str) -> None:
    assert jitted.dtype == eager.dtype and jitted.shape == eager.shape, what
    e, j = eager.detach(), jitted.detach()
    assert torch.equal(e.isnan(), j.isnan()), what
    assert torch.equal(e.nan_to_num(), j.nan_to_num()), (
        f"{what}: max diff {(e.double() - j.double()).nan_to_num().abs().max()}"
    )


def _check(
    fn: Callable[..., Any],
    make: Callable[[int], Sequence[Any]],
    *,
    calls: int = 3,
    **jit_options: Any,
) -> None:
    """``fn`` jitted against eager over ``calls`` fresh inputs: outputs and the gradients of the
    inputs that require grad, for a random cotangent."""
    jf = thunder.jit(fn, **jit_options)
    for i in range(calls):
        torch.manual_seed(i)
        args = list(make(i))
        jargs = [
            a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
            for a in args
        ]
        expected, got = fn(*args), jf(*jargs)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = got if isinstance(got, tuple) else (got,)
        for k, (e, j) in enumerate(zip(expected, got)):
            _same(e, j, f"call {i}: output {k}")
        wanted = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        jwanted = [a for a in jargs if isinstance(a, torch.Tensor) and a.requires_grad]
        if not wanted:
            continue
        torch.manual_seed(100 + i)
        cotangents = [torch.randn_like(e) for e in expected]
        ge = torch.autograd.grad(expected, wanted, cotangents)
        gj = torch.autograd.grad(got, jwanted, cotangents)
        for k, (e, j) in enumerate(zip(ge, gj)):
            _same(e, j, f"call {i}: gradient {k}")


def _t(*shape: int, dtype: torch.dtype, grad: bool = True, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(shape) * scale).to(dtype).requires_grad_(grad)


# matmul: eager folds the batch dimensions into one mm/mv --------------------------------------

_MATMUL_SHAPES = [
    ((2, 16, 32), (32, 8)),
    ((3, 2, 16, 32), (32, 8)),
    ((16, 32), (2, 32, 8)),
    ((16, 32), (3, 2, 32, 8)),
    ((32,), (2, 32, 8)),
    ((2, 16, 32), (32,)),
    ((2, 16, 32), (1, 32, 8)),
    ((1, 16, 32), (4, 32, 8)),
    ((2, 16, 32), (2, 32, 8)),
    ((2, 3, 16, 32), (1, 32, 8)),
]


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("shapes", _MATMUL_SHAPES, ids=str)
@pytest.mark.parametrize("needs", [(True, True), (False, True), (True, False)], ids=str)
def test_matmul_backward_folds_batches_as_eager(dtype, shapes, needs):
    (sa, sb), (ra, rb) = shapes, needs
    _check(
        lambda a, b: a @ b, lambda i: (_t(*sa, dtype=dtype, grad=ra), _t(*sb, dtype=dtype, grad=rb))
    )


@pytest.mark.parametrize("dtype", LOW)
def test_matmul_with_a_transposed_weight_and_symbolic_sizes(dtype):
    def make(i):
        return _t(2 + i, 16, 32, dtype=dtype), _t(8, 32, dtype=dtype)

    _check(lambda x, w: x @ w.t(), make)
    _check(lambda x, w: x @ w.t(), make, cache="symbolic values")


def test_complex_matmul_folded_gradients_are_eagers():
    def make(i):
        return (
            torch.randn(2, 16, 32, dtype=torch.complex64, requires_grad=True),
            torch.randn(32, 8, dtype=torch.complex64, requires_grad=True),
        )

    jf = thunder.jit(lambda a, b: a @ b)
    for i in range(2):
        a, b = make(i)
        ja, jb = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
        g = torch.randn(2, 16, 8, dtype=torch.complex64)
        ge = torch.autograd.grad(a @ b, [a, b], g)
        gj = torch.autograd.grad(jf(ja, jb), [ja, jb], g)
        for e, j in zip(ge, gj):
            torch.testing.assert_close(j, e)


def test_llama_style_projection_under_cpu_autocast():
    def attn(x, wq, wk):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return x @ wq, F.linear(x, wk)

    _check(
        attn,
        lambda i: (
            torch.randn(2, 6, 16, requires_grad=True),
            torch.randn(16, 16, requires_grad=True),
            torch.randn(16, 16, requires_grad=True),
        ),
    )


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("shape", [(4, 16, 64), (16, 64)], ids=str)
def test_linear_with_a_1d_weight(dtype, shape):
    _check(lambda x, w: F.linear(x, w), lambda i: (_t(*shape, dtype=dtype), _t(64, dtype=dtype)))


# index_add and prod run torch's kernels while training -----------------------------------------


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("alpha", [1, 0.3])
def test_index_add_with_repeated_indices(dtype, alpha):
    def f(x, i, s):
        return x.index_add(0, i, s, alpha=alpha)

    _check(f, lambda k: (_t(5, 4, dtype=dtype), torch.randint(0, 5, (64,)), _t(64, 4, dtype=dtype)))

    def g(x, i, s):
        return x.index_add(1, i, s)

    _check(g, lambda k: (_t(4, 5, dtype=dtype), torch.randint(0, 5, (64,)), _t(4, 64, dtype=dtype)))


@pytest.mark.parametrize("dtype", LOW)
def test_moe_combine_with_in_place_index_add(dtype):
    def combine(h, token_idx, w):
        out = torch.zeros(8, h.shape[1], dtype=h.dtype)
        out.index_add_(0, token_idx, h * w[:, None])
        return out

    _check(
        combine,
        lambda k: (_t(32, 16, dtype=dtype), torch.randint(0, 8, (32,)), _t(32, dtype=dtype)),
    )


def test_in_place_index_add_error_names_the_in_place_op():
    def f(x, i, s):
        return x.clone().index_add_(0, i, s)

    x, i, s = torch.randn(5, 4), torch.tensor([0, 1]), torch.randn(2, 4, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="index_add_"):
        thunder.jit(f)(x.requires_grad_(), i, s)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize(
    "kwargs", [{}, {"dim": -1}, {"dim": 0, "keepdim": True}], ids=lambda k: str(k)
)
def test_prod_forward_and_backward_with_zeros(dtype, kwargs):
    def make(i):
        x = torch.randn(4, 8) * 1.5
        if i == 1:
            x[1, 2] = 0
        if i == 2:
            x[0, 1] = x[0, 3] = 0
        return (x.to(dtype).requires_grad_(),)

    _check(lambda x: x.prod(**kwargs), make)


# index_select's backward is zeros.index_add_ -------------------------------------------------


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("dim", [0, 1])
def test_index_select_backward_with_repeated_indices(dtype, dim):
    shape = (5, 8) if dim == 0 else (8, 5)
    _check(
        lambda w, i: w.index_select(dim, i),
        lambda k: (_t(*shape, dtype=dtype), torch.randint(0, 5, (64,))),
    )
    _check(
        lambda w, i: w.index_select(dim, i),
        lambda k: (_t(*shape, dtype=dtype), torch.randint(0, 5, (60 + k,))),
        cache="symbolic values",
    )


# backward formulas that round in the dtype ----------------------------------------------------


def test_cumsum_to_float32_rounds_the_gradient_first():
    _check(
        lambda x: x.cumsum(-1, dtype=torch.float32),
        lambda i: (_t(4, 64, dtype=torch.bfloat16),),
    )
    _check(lambda x: x.cumsum(0, dtype=torch.float64), lambda i: (_t(64, 3, dtype=torch.float32),))


@pytest.mark.filterwarnings("ignore:Using a target size")  # eager's warning, thunder's too
@pytest.mark.parametrize("dtype", [*LOW, torch.float32])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shapes", [((4, 64), (4, 64)), ((4, 3, 7), (3, 7))], ids=str)
def test_mse_loss_gradients(dtype, reduction, shapes):
    sa, st = shapes
    _check(
        lambda x, t: F.mse_loss(x, t, reduction=reduction),
        lambda i: (_t(*sa, dtype=dtype), _t(*st, dtype=dtype)),
    )


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize(
    "kwargs",
    [{"dim": -1}, {}, {"p": 1, "dim": -1}, {"p": 3, "dim": 1}, {"p": 0.5, "dim": -1},
     {"p": 1.5, "dim": -1}, {"p": float("inf"), "dim": -1}, {"dim": -1, "keepdim": True}],
    ids=lambda k: str(k),
)  # fmt: skip
def test_norm_gradients(dtype, kwargs):
    def make(i):
        x = torch.randn(4, 64)
        if i == 1:
            x[0] = 0
        return (x.to(dtype).requires_grad_(),)

    _check(lambda x: x.norm(**kwargs), make)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none"])
def test_kl_div_target_gradient(dtype, reduction):
    def make(i):
        x = torch.randn(4, 64).to(dtype).log_softmax(-1)
        t = torch.randn(4, 64).to(dtype).softmax(-1)
        if i == 1:
            t[0, :3] = 0
        return x.requires_grad_(), t.requires_grad_()

    _check(lambda x, t: F.kl_div(x, t, reduction=reduction), make)


_POOLS = [
    (F.avg_pool1d, (1, 2, 64), {"kernel_size": 3, "stride": 1}),
    (F.avg_pool1d, (2, 64), {"kernel_size": 4, "stride": 2}),
    (F.avg_pool1d, (1, 2, 65), {"kernel_size": 3, "stride": 2, "padding": 1}),
    (F.avg_pool1d, (1, 2, 64), {"kernel_size": 3, "padding": 1, "count_include_pad": False}),
    (F.avg_pool1d, (1, 2, 64), {"kernel_size": 3, "stride": 2, "ceil_mode": True}),
    (F.avg_pool1d, (1, 2, 300), {"kernel_size": 20, "stride": 1}),
    (F.avg_pool2d, (1, 2, 16, 16), {"kernel_size": 3, "stride": 1}),
    (F.avg_pool2d, (1, 2, 16, 17), {"kernel_size": (2, 3), "stride": (2, 1), "padding": (1, 1)}),
    (F.avg_pool2d, (1, 2, 16, 16), {"kernel_size": 3, "divisor_override": 5}),
    (F.avg_pool2d, (2, 17, 15),
     {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True, "count_include_pad": False}),
]  # fmt: skip


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("pool", _POOLS, ids=lambda p: f"{p[0].__name__}-{p[1]}-{p[2]}")
def test_avg_pool_gradients(dtype, pool):
    fn, shape, kwargs = pool
    _check(lambda x: fn(x, **kwargs), lambda i: (_t(*shape, dtype=dtype),))


# attention with a mask while training: torch's CPU flash kernel, as eager ---------------------


def _masks(dtype: torch.dtype) -> list[torch.Tensor]:
    causal = torch.ones(8, 8, dtype=torch.bool).tril()
    empty_row = causal.clone()
    empty_row[2] = False
    return [
        causal,
        empty_row,
        torch.randn(8, 8).to(dtype),
        torch.randn(8, 8),
        torch.randn(1, 1, 8, 8).to(dtype),
        torch.randn(1, 2, 8, 8).to(dtype),
        torch.randn(2, 8, 8).to(dtype),  # 3-d: eager's math path
        torch.randn(8, 1).to(dtype),
        torch.randn(2, 2, 8, 8) > 0,
    ]


@pytest.mark.parametrize("dtype", [*LOW, torch.float32])
@pytest.mark.parametrize("which", range(9))
def test_sdpa_with_a_mask_while_training(dtype, which):
    def f(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    def make(i):
        q, k, v = (_t(2, 2, 8, 16, dtype=dtype) for _ in range(3))
        return q, k, v, _masks(dtype)[which]

    _check(f, make)


def test_sdpa_with_a_mask_same_with_and_without_grad():
    def f(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    jf = thunder.jit(f)
    for i in range(2):
        q, k, v = (_t(1, 2, 8, 16, dtype=torch.bfloat16) for _ in range(3))
        m = torch.ones(8, 8, dtype=torch.bool).tril()
        training = jf(q, k, v, m)
        with torch.no_grad():
            inference = jf(q, k, v, m)
        assert torch.equal(training, inference)
        assert torch.equal(training, f(q, k, v, m))


# sizes that change between calls, served by one program ---------------------------------------

_SYMBOLIC = {
    "mse_loss mean": (
        lambda x, t: F.mse_loss(x, t),
        lambda i: (_t(4 + i, 8, dtype=torch.bfloat16), _t(4 + i, 8, dtype=torch.bfloat16)),
    ),
    "avg_pool1d not counting padding": (
        lambda x: F.avg_pool1d(x, 3, 2, padding=1, count_include_pad=False),
        lambda i: (_t(2, 3, 20 + i, dtype=torch.bfloat16),),
    ),
    "matmul batch of 1": (
        lambda x, w: x @ w,
        lambda i: (_t(2 + i, 5, 8, dtype=torch.bfloat16), _t(1, 8, 4, dtype=torch.bfloat16)),
    ),
    "index_add": (
        lambda x, ix, s: x.index_add(0, ix, s),
        lambda i: (
            _t(5, 4, dtype=torch.bfloat16),
            torch.randint(0, 5, (30 + i,)),
            _t(30 + i, 4, dtype=torch.bfloat16),
        ),
    ),
    "prod": (lambda x: x.prod(-1), lambda i: (_t(4 + i, 8, dtype=torch.bfloat16),)),
    "norm": (lambda x: x.norm(dim=-1), lambda i: (_t(4 + i, 8, dtype=torch.bfloat16),)),
    "cumsum": (
        lambda x: x.cumsum(-1, dtype=torch.float32),
        lambda i: (_t(4, 8 + i, dtype=torch.bfloat16),),
    ),
    "sdpa with a mask": (
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda i: (
            *(_t(1, 2, 6 + i, 16, dtype=torch.bfloat16) for _ in range(3)),
            torch.randn(6 + i, 6 + i).bfloat16(),
        ),
    ),
}


@pytest.mark.parametrize("name", list(_SYMBOLIC))
def test_with_symbolic_sizes(name):
    fn, make = _SYMBOLIC[name]
    _check(fn, make, cache="symbolic values")
