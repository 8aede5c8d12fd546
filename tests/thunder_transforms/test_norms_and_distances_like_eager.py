"""Normalizations and distances under thunder.jit give eager's results: instance norm with running
statistics in evaluation (eager's batch norm kernel), pairwise distance (eager's norm kernel,
its gradient op by op in float16/bfloat16, none for p=0), cosine similarity of 0-d tensors with
gradients, F.normalize's float16/bfloat16 gradients for any p, group norm with a bias and no
weight (eager's kernel, and its backward's error), ``torch.linalg.norm(x, ord=0)``'s undefined
gradient, and the running statistics batch and instance norm update in training, bit for bit.
Each case runs over several calls with fresh inputs; forwards are compared exactly."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import thunder

pytestmark = pytest.mark.filterwarnings("error:thunder.jit")

CALLS = 3


def _fresh(inputs: list[torch.Tensor | None], grads: tuple[int, ...]) -> list[torch.Tensor | None]:
    return [
        None if t is None else t.detach().clone().requires_grad_(i in grads)
        for i, t in enumerate(inputs)
    ]


def _check(fn, make_inputs, grads: tuple[int, ...] = (), exact_grads: bool = False) -> None:
    """``thunder.jit(fn)`` against ``fn`` on ``CALLS`` sets of fresh inputs: the result (and
    every input afterwards, running statistics included) equal, the gradients of the inputs at
    ``grads`` close (equal with ``exact_grads``), None where eager's are."""
    jfn = thunder.jit(fn)
    for _ in range(CALLS):
        inputs = make_inputs()
        mine, theirs = _fresh(inputs, grads), _fresh(inputs, grads)
        got, want = jfn(*mine), fn(*theirs)
        assert got.dtype == want.dtype and got.stride() == want.stride()
        assert torch.equal(got, want) or torch.allclose(got, want, rtol=0, atol=0, equal_nan=True)
        assert got.requires_grad == want.requires_grad
        for a, b in zip(mine, theirs):
            if a is not None:
                assert torch.equal(a.detach(), b.detach())
        if not grads:
            continue
        ct = torch.randn_like(want)
        wrt_mine = [mine[i] for i in grads]
        wrt_theirs = [theirs[i] for i in grads]
        got_grads = torch.autograd.grad(got, wrt_mine, ct, allow_unused=True)
        want_grads = torch.autograd.grad(want, wrt_theirs, ct, allow_unused=True)
        for g, w in zip(got_grads, want_grads):
            assert (g is None) == (w is None)
            if w is None:
                continue
            if exact_grads:
                torch.testing.assert_close(g, w, rtol=0, atol=0, equal_nan=True)
            else:
                torch.testing.assert_close(g, w, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_instance_norm_with_running_statistics_in_evaluation(dtype: torch.dtype) -> None:
    def fn(x, rm, rv, w, b):
        return F.instance_norm(x, rm, rv, w, b, use_input_stats=False)

    def inputs():
        c = 3
        return [
            torch.randn(4, c, 5, dtype=dtype),
            torch.randn(c, dtype=dtype),
            torch.rand(c, dtype=dtype) + 0.5,
            torch.randn(c, dtype=dtype),
            torch.randn(c, dtype=dtype),
        ]

    _check(fn, inputs)
    _check(fn, inputs, grads=(0, 3, 4), exact_grads=True)


def test_instance_norm_of_an_unbatched_input_in_evaluation() -> None:
    # eager takes a 2-D input where only the running statistics normalize it
    def fn(x, rm, rv):
        return F.instance_norm(x, rm, rv, use_input_stats=False)

    _check(fn, lambda: [torch.randn(2, 3), torch.randn(3), torch.rand(3) + 0.5], grads=(0,))


@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, math.inf, 0.5])
def test_pairwise_distance_forward_is_eagers(p: float) -> None:
    def fn(a, b):
        return F.pairwise_distance(a, b, p=p, keepdim=True)

    _check(fn, lambda: [torch.randn(8, 16), torch.randn(16)], grads=(0, 1))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_pairwise_distance_low_precision_gradients(dtype: torch.dtype) -> None:
    for p in (2.0, 3.0, 0.5):

        def fn(a, b, p=p):
            return F.pairwise_distance(a, b, p=p)

        _check(
            fn,
            lambda: [torch.randn(1, 5, dtype=dtype), torch.randn(4, 5, dtype=dtype)],
            grads=(0, 1),
            exact_grads=True,
        )


def test_pairwise_distance_with_p_0_requires_grad_without_a_gradient() -> None:
    def fn(a, b):
        return F.pairwise_distance(a, b, p=0)

    def fn_plus(a, b):
        return F.pairwise_distance(a, b, p=0) + a.sum(-1)

    _check(fn, lambda: [torch.randn(4, 5), torch.randn(4, 5)], grads=(0, 1))
    _check(fn_plus, lambda: [torch.randn(4, 5), torch.randn(4, 5)], grads=(0, 1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cosine_similarity_of_0d_tensors_with_grad(dtype: torch.dtype) -> None:
    def fn(a, b):
        return F.cosine_similarity(a, b, dim=0)

    _check(fn, lambda: [torch.randn((), dtype=dtype), torch.randn((), dtype=dtype)], grads=(0, 1))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("p", [1.0, 3.0, math.inf, -1.0, 2.0])
def test_normalize_low_precision_gradients(p: float, dtype: torch.dtype) -> None:
    def fn(x):
        return F.normalize(x, p=p, dim=0)

    _check(fn, lambda: [torch.randn(16, 8, dtype=dtype)], grads=(0,), exact_grads=True)


def test_normalize_of_a_0d_tensor_float16_gradient() -> None:
    def fn(x):
        return F.normalize(x, dim=0)

    _check(fn, lambda: [torch.randn((), dtype=torch.float16)], grads=(0,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_group_norm_with_bias_without_weight(dtype: torch.dtype) -> None:
    def fn(x, b):
        return F.group_norm(x, 2, None, b)

    def inputs():
        x = torch.randn(2, 4, 3, 3, dtype=dtype).to(memory_format=torch.channels_last)
        return [x, torch.randn(4, dtype=dtype)]

    _check(fn, inputs)
    _check(fn, inputs, grads=(0,), exact_grads=True)


def test_group_norm_bias_gradient_without_weight_raises_as_eager() -> None:
    def fn(x, b):
        return F.group_norm(x, 2, None, b)

    x, b = torch.randn(2, 4, 5), torch.randn(4)
    results = []
    for f in (fn, thunder.jit(fn)):
        xr, br = x.clone().requires_grad_(), b.clone().requires_grad_()
        out = f(xr, br)
        with pytest.raises(RuntimeError) as raised:
            out.sum().backward()
        results.append(str(raised.value))
    assert results[0] == results[1]


def test_linalg_norm_of_ord_0_gives_no_gradient() -> None:
    def fn(x):
        return torch.linalg.norm(x, ord=0, dim=-1)

    def fn_plus(x):
        return torch.linalg.norm(x, ord=0) + x.sum()

    _check(fn, lambda: [torch.randn(3, 5)], grads=(0,))
    _check(fn_plus, lambda: [torch.randn(5)], grads=(0,))
    x = torch.randn(5, requires_grad=True)
    thunder.jit(fn)(x).sum().backward()
    assert x.grad is None


@pytest.mark.parametrize(
    "dtypes", [(torch.float32, torch.float32), (torch.bfloat16, torch.bfloat16)], ids=str
)
def test_batch_norm_running_statistics_in_training(dtypes: tuple[torch.dtype, ...]) -> None:
    x_dtype, p_dtype = dtypes

    def fn(x, rm, rv, w, b):
        return F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3)

    def inputs():
        c = 6
        return [
            torch.randn(4, c, 5, 3, dtype=x_dtype) * 3 + 1,
            torch.randn(c, dtype=p_dtype),
            torch.rand(c, dtype=p_dtype) + 0.5,
            torch.randn(c, dtype=p_dtype),
            torch.randn(c, dtype=p_dtype),
        ]

    _check(fn, inputs, grads=(0, 3, 4))


def test_batch_norm_running_statistics_mixed_dtypes() -> None:
    def fn(x, rm, rv, w, b):
        return F.batch_norm(x, rm, rv, w, b, training=True)

    def inputs():
        return [torch.randn(8, 3, dtype=torch.bfloat16)] + [torch.randn(3) for _ in range(4)]

    _check(fn, lambda: [t.abs() if i == 2 else t for i, t in enumerate(inputs())], grads=(0,))


@pytest.mark.parametrize("n", [1, 3])
def test_instance_norm_running_statistics_in_training(n: int) -> None:
    def fn(x, rm, rv, w):
        return F.instance_norm(x, rm, rv, w, momentum=0.2)

    def inputs():
        return [torch.randn(n, 4, 7) * 2, torch.randn(4), torch.rand(4) + 0.5, torch.randn(4)]

    _check(fn, inputs, grads=(0, 3))


def test_batch_norm_input_shapes_as_eager() -> None:
    # eager takes (1, C) in evaluation and refuses any 1-D input: thunder the same
    def fn(x, rm, rv, training):
        return F.batch_norm(x, rm, rv, training=training)

    stats = (torch.zeros(3), torch.ones(3))
    _check(lambda x, rm, rv: fn(x, rm, rv, False), lambda: [torch.randn(1, 3), *stats], (0,))
    for shape, training in (((3,), False), ((3,), True), ((1, 3), True)):
        x = torch.randn(shape)
        with pytest.raises((RuntimeError, ValueError, IndexError)) as eager:
            fn(x, *stats, training)
        with pytest.raises(type(eager.value)) as mine:
            thunder.jit(fn)(x, *stats, training)
        assert str(mine.value) == str(eager.value)
