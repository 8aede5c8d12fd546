"""Losses, transposed convolutions and einsum give eager's values and gradients.

Losses: a "mean" is torch's (float16/bfloat16 summed and divided in float32, rounded once);
binary_cross_entropy's forward and backward, huber_loss's and smooth_l1_loss's backward kernels,
kl_div with a log target and bce_with_logits' target gradient round as eager's do; nll_loss and
cross_entropy divide a "mean" gradient by the total weight of eager's forward (a count rounded to
the dtype); weighted huber_loss is eager's plain mean; a tensor argument a torch callable reads
only through comparisons (cosine_embedding_loss's target) gets no gradient, as in eager.
Transposed convolutions with an output_padding of at least the stride (allowed below the
dilation) compile and match, and a convolution's bias gradient is the kernel's. einsum of a
pair with nothing to contract multiplies, as torch's does. Fresh inputs on every call; float16
and bfloat16 compared exactly (NaN where eager has NaN)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

LOW = [torch.bfloat16, torch.float16]
DTYPES = [torch.float32, *LOW]


def _same(eager: torch.Tensor | None, jitted: torch.Tensor | None, what: str) -> None:
    assert (eager is None) == (jitted is None), f"{what}: eager {eager} thunder {jitted}"
    if eager is None or jitted is None:
        return
    assert jitted.dtype == eager.dtype and jitted.shape == eager.shape, what
    e, j = eager.detach(), jitted.detach()
    if e.dtype == torch.float32:
        torch.testing.assert_close(j, e, equal_nan=True, msg=what)
        return
    assert torch.equal(e.isnan(), j.isnan()), what
    assert torch.equal(e.nan_to_num(), j.nan_to_num()), (
        f"{what}: max diff {(e.double() - j.double()).nan_to_num().abs().max()}"
    )


def _check(fn: Callable[..., Any], make: Callable[[int], Sequence[Any]], calls: int = 3) -> None:
    """``fn`` jitted against eager over ``calls`` fresh inputs: the output and the gradients
    (None where eager's is None) of the inputs that require grad, for a random cotangent;
    compiled without a fallback to eager."""
    jf = thunder.jit(fn)
    for seed in range(calls):
        torch.manual_seed(seed)
        args = list(make(seed))
        want = fn(*args)
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message="thunder.jit")
            got = jf(*args)
        _same(want, got, f"output, call {seed}")
        wrt = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        if not wrt or not want.requires_grad:
            continue
        ct = torch.randn_like(want)
        want_g = torch.autograd.grad(want, wrt, ct, allow_unused=True)
        got_g = torch.autograd.grad(got, wrt, ct, allow_unused=True)
        for i, (w, g) in enumerate(zip(want_g, got_g, strict=True)):
            _same(w, g, f"gradient {i}, call {seed}")


def _randn(*shape: int, dtype: torch.dtype, grad: bool = True) -> torch.Tensor:
    return torch.randn(*shape).to(dtype).requires_grad_(grad)


def _unit(*shape: int, dtype: torch.dtype, grad: bool = True) -> torch.Tensor:
    return (torch.rand(*shape) * 0.98 + 0.01).to(dtype).requires_grad_(grad)


# 64 x 33 elements: a whole number of vectors of eager's kernels, whose last partial vector
# takes a scalar loop that rounds huber_loss's delta and products in another order.
SHAPE = (64, 33)


def _losses_apart(
    losses: Sequence[Callable[..., torch.Tensor]], arity: int
) -> Callable[..., torch.Tensor]:
    """One program computing each loss from its own inputs (a shared input's gradient would be
    a sum in another order than eager's autograd adds)."""

    def fn(*args: torch.Tensor) -> torch.Tensor:
        parts = [f(*args[i * arity : (i + 1) * arity]) for i, f in enumerate(losses)]
        return torch.cat([p.reshape(-1) for p in parts])

    return fn


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_pointwise_losses_like_eager(dtype: torch.dtype) -> None:
    for reduction in ("mean", "sum", "none"):
        r = reduction
        losses = [
            lambda a, t, u, w: F.l1_loss(a, t, reduction=r),
            lambda a, t, u, w: F.kl_div(a, u, reduction=r),
            lambda a, t, u, w: F.kl_div(a, t, reduction=r, log_target=True),
            lambda a, t, u, w: F.huber_loss(a, t, reduction=r),
            lambda a, t, u, w: F.huber_loss(a, t, reduction=r, delta=0.5),
            lambda a, t, u, w: F.huber_loss(a, t, reduction=r, delta=0.7, weight=w),
            lambda a, t, u, w: F.smooth_l1_loss(a, t, reduction=r, beta=0.5),
            lambda a, t, u, w: F.mse_loss(a, t, reduction=r, weight=w),
            lambda a, t, u, w: F.l1_loss(a, t, reduction=r, weight=w),
        ]

        def make(_: int, n: int = len(losses)) -> list[torch.Tensor]:
            return [
                x
                for _ in range(n)
                for x in (
                    _randn(*SHAPE, dtype=dtype),
                    _randn(*SHAPE, dtype=dtype),
                    _unit(*SHAPE, dtype=dtype),
                    (torch.rand(*SHAPE) + 0.2).to(dtype).requires_grad_(),
                )
            ]

        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="reduction: 'mean' divides")
            _check(_losses_apart(losses, 4), make, calls=2)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_binary_cross_entropy_like_eager(dtype: torch.dtype) -> None:
    for reduction in ("mean", "sum", "none"):
        r = reduction
        losses = [
            lambda x, y, w, pw: F.binary_cross_entropy(x, y, reduction=r),
            lambda x, y, w, pw: F.binary_cross_entropy(x, y, w, reduction=r),
            lambda x, y, w, pw: F.binary_cross_entropy_with_logits(
                x, y, w, reduction=r, pos_weight=pw
            ),
        ]

        def make(_: int, n: int = len(losses)) -> list[torch.Tensor]:
            return [
                x
                for _ in range(n)
                for x in (
                    _unit(*SHAPE, dtype=dtype),
                    _unit(*SHAPE, dtype=dtype),
                    (torch.rand(*SHAPE) + 0.5).to(dtype),
                    (torch.rand(SHAPE[1]) + 0.5).to(dtype),
                )
            ]

        _check(_losses_apart(losses, 4), make, calls=2)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_class_index_losses_divide_by_eager_total_weight(dtype: torch.dtype) -> None:
    # 1000 rows, some ignored: the count is no bfloat16 number, eager divides by it rounded
    losses = [
        lambda a, t, w: F.nll_loss(a, t, ignore_index=1),
        lambda a, t, w: F.nll_loss(a, t, w, ignore_index=1),
        lambda a, t, w: F.cross_entropy(a, t, w, ignore_index=1),
        lambda a, t, w: F.cross_entropy(a, t, ignore_index=1, label_smoothing=0.2),
        lambda a, t, w: F.cross_entropy(a, t, w, ignore_index=1, label_smoothing=0.2),
    ]
    for shape in ((1000, 5), (6, 5, 4, 3)):

        def make(_: int, shape: tuple[int, ...] = shape) -> list[torch.Tensor]:
            return [
                x
                for _ in losses
                for x in (
                    _randn(*shape, dtype=dtype),
                    torch.randint(0, 5, (shape[0], *shape[2:])),
                    (torch.rand(5) + 0.3).to(dtype),
                )
            ]

        _check(_losses_apart(losses, 3), make, calls=2)


def test_targets_read_by_comparisons_only_get_no_gradient() -> None:
    # eager's graph does not reach them: .grad stays None (not zeros); other arguments' do
    def cosine(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return F.cosine_embedding_loss(a, b, t, margin=0.1)

    def hinge(a: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return F.hinge_embedding_loss(a, t, reduction="sum")

    def ranking(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return F.margin_ranking_loss(a, b, t, margin=0.3)

    def sign(n: int) -> torch.Tensor:
        return torch.randn(n).sign().requires_grad_()

    f32 = torch.float32
    _check(cosine, lambda _: (_randn(8, 5, dtype=f32), _randn(8, 5, dtype=f32), sign(8)))
    _check(
        hinge, lambda _: (_randn(8, 5, dtype=f32), sign(40).detach().view(8, 5).requires_grad_())
    )
    _check(ranking, lambda _: (_randn(8, dtype=f32), _randn(8, dtype=f32), sign(8)))

    # with only the target requiring grad the loss requires none, as in eager
    out = thunder.jit(hinge)(torch.randn(8, 5), sign(40).detach().view(8, 5).requires_grad_())
    assert not out.requires_grad


_TRANSPOSED = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_transpose_output_padding_below_dilation(nd: int) -> None:
    # output_padding >= stride (allowed below the dilation): the adjoint convolution's gradient
    # has rows past the input's, dropped; float32 bias gradients are the kernel's sums.
    op = _TRANSPOSED[nd]
    for stride, dilation, output_padding, groups in ((1, 2, 1, 1), (2, 3, 2, 2), (2, 1, 1, 2)):

        def fn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return op(x, w, b, stride, 1, output_padding, groups, dilation)

        _check(
            fn,
            lambda _: (
                _randn(2, 4, *(7, 6, 5)[:nd], dtype=torch.float32),
                _randn(4, 6 // groups, *(3, 2, 3)[:nd], dtype=torch.float32),
                _randn(6, dtype=torch.float32),
            ),
            calls=2,
        )

    module = (torch.nn.ConvTranspose1d, torch.nn.ConvTranspose2d, torch.nn.ConvTranspose3d)[nd - 1]
    for dtype, batches in ((torch.float32, ((), (2,))), (torch.bfloat16, ((2,),))):
        m = module(4, 6, 3, stride=1, dilation=2, output_padding=1, groups=2).to(dtype)
        jm = thunder.jit(m)
        for batch in batches:  # unbatched too
            x = _randn(*batch, 4, *(6, 5, 4)[:nd], dtype=dtype)
            with warnings.catch_warnings():
                warnings.filterwarnings("error", message="thunder.jit")
                got = jm(x)
            want = m(x)
            _same(want, got, "output")
            ct = torch.randn_like(want)
            wrt = [x, *m.parameters()]
            for w, g in zip(
                torch.autograd.grad(want, wrt, ct), torch.autograd.grad(got, wrt, ct), strict=True
            ):
                _same(w, g, "gradient")


def test_conv_bias_gradient_is_the_kernels() -> None:
    # eager's float32 CPU kernels sum the bias's gradient their own way: equal, not close
    for conv in (
        torch.nn.Conv3d(4, 6, 3, stride=2),
        torch.nn.ConvTranspose3d(4, 6, 3, stride=2),
        torch.nn.ConvTranspose2d(4, 6, 3, stride=2, output_padding=1),
    ):
        jconv = thunder.jit(conv)
        nd = conv.weight.ndim - 2
        for seed in range(2):
            torch.manual_seed(seed)
            x = torch.randn(2, 4, *(17, 16, 15)[:nd])
            ct = torch.randn_like(conv(x))
            want = torch.autograd.grad(conv(x), [conv.weight, conv.bias], ct)
            got = torch.autograd.grad(jconv(x), [conv.weight, conv.bias], ct)
            assert torch.equal(got[1], want[1])
            torch.testing.assert_close(got[0], want[0])


EINSUMS = [
    ("i,j->ij", [(7,), (9,)]),
    ("bi,bj->bij", [(3, 40), (3, 50)]),
    ("ij,j->ij", [(30, 40), (40,)]),
    ("bi,bj,bk->bijk", [(3, 4), (3, 5), (3, 6)]),
    ("ij,kl->ijkl", [(3, 4), (5, 6)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 8), (2, 3, 6, 8)]),
    ("ij,jk,kl->il", [(20, 30), (30, 40), (40, 10)]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_einsum_like_eager(dtype: torch.dtype) -> None:
    # a pair with nothing to contract is a product, each gradient term rounded once before the
    # sum over the other operand's labels
    for equation, shapes in EINSUMS:
        _check(
            lambda *xs, eq=equation: torch.einsum(eq, *xs),
            lambda _, shapes=shapes: [_randn(*s, dtype=dtype) for s in shapes],
            calls=2,
        )
