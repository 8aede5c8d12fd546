"""Two classes of bug, each compared with eager over several calls, gradients included.

1. A torch callable that writes an argument without autograd (F.embedding's ``max_norm``
   renormalizes ``weight.detach()``; a function writing under its own ``torch.no_grad``) is
   replayed as such a write: a leaf weight that requires grad is renormalized in place, as in
   eager, not written by a differentiable in-place op (which raises on a leaf).
2. A data-dependent count that was 1 when tracing is not taken for "1 on every call": the
   backward of ``index_add``/``index_copy``/``x[m] = v`` with two counts read from data, both 1
   at the first call, stays right when they later differ from 1."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import thunder

CACHES = ["constant values", "symbolic values"]


def _same_grads(a: list[torch.Tensor], b: list[torch.Tensor]) -> None:
    for x, y in zip(a, b):
        assert (x.grad is None) == (y.grad is None)
        if x.grad is not None:
            torch.testing.assert_close(x.grad, y.grad)


# 1. Writes the callable makes without autograd -------------------------------------------------


def _emb_functional(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return F.embedding(x, w, max_norm=1.0) * 2


def _emb_norm_type(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return F.embedding(x, w, max_norm=0.5, norm_type=1.0, padding_idx=0).sin()


def _emb_freq(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return F.embedding(x.unsqueeze(0), w, max_norm=2.0, scale_grad_by_freq=True)


def _bag(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return F.embedding_bag(x, w, torch.tensor([0, 2]), max_norm=1.0, mode="sum")


def _renorm_then_weight(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    F.embedding(x, w, max_norm=1.5)
    return (w * w).sum() + F.embedding(x, w).sum()


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "embedding max_norm": _emb_functional,
    "norm_type, padding_idx": _emb_norm_type,
    "scale_grad_by_freq": _emb_freq,
    "embedding_bag max_norm": _bag,
    "renorm, then the weight itself": _renorm_then_weight,
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_max_norm_leaf_weight_like_eager(name: str, cache: str) -> None:
    fn = FUNCTIONS[name]
    g = torch.Generator().manual_seed(0)
    w_eager = (torch.randn(10, 4, generator=g) * 2).requires_grad_()
    w_thunder = w_eager.detach().clone().requires_grad_()
    jfn = thunder.jit(fn, cache=cache)
    for n in (4, 4, 6):
        x = torch.randint(0, 10, (n,), generator=g)
        expected, actual = fn(w_eager, x), jfn(w_thunder, x)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(w_thunder, w_eager)  # renormalized in place, as eager
        assert w_thunder.is_leaf and w_thunder.requires_grad
        expected.sum().backward()
        actual.sum().backward()
        _same_grads([w_eager], [w_thunder])
    stats = thunder.compile_stats(jfn)  # compiled whole: neither split nor run eagerly
    assert stats.split_calls == 0 and stats.eager_fallbacks == 0


class _Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(12, 5, max_norm=1.0)
        self.lin = nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(self.emb(x)).relu()


@pytest.mark.parametrize("cache", CACHES)
def test_embedding_module_max_norm_like_eager(cache: str) -> None:
    torch.manual_seed(0)
    model = _Model()
    with torch.no_grad():
        model.emb.weight.mul_(3)
    twin = copy.deepcopy(model)
    jmodel = thunder.jit(twin, cache=cache)
    g = torch.Generator().manual_seed(1)
    for n in (3, 3, 7):
        x = torch.randint(0, 12, (2, n), generator=g)
        expected, actual = model(x), jmodel(x)
        torch.testing.assert_close(actual, expected)
        expected.square().sum().backward()
        actual.square().sum().backward()
        torch.testing.assert_close(twin.emb.weight, model.emb.weight)
        _same_grads(list(model.parameters()), list(twin.parameters()))
    stats = thunder.compile_stats(jmodel)
    assert stats.split_calls == 0 and stats.eager_fallbacks == 0


def test_write_under_callable_no_grad_still_differentiable_when_grad_is_on() -> None:
    """A write the callable makes with grad mode on stays a differentiable in-place op: a
    non-leaf written by ``index_add_`` carries its gradient, as in eager."""

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        c = a * 1.0
        torch.Tensor.index_add_(c, 0, torch.tensor([0, 2]), b)
        return c

    jfn = thunder.jit(fn)
    for _ in range(3):
        a = torch.randn(4, 3, requires_grad=True)
        b = torch.randn(2, 3, requires_grad=True)
        a2, b2 = (t.detach().clone().requires_grad_() for t in (a, b))
        expected, actual = fn(a, b), jfn(a2, b2)
        torch.testing.assert_close(actual, expected)
        expected.exp().sum().backward()
        actual.exp().sum().backward()
        _same_grads([a, b], [a2, b2])


# 2. Data-dependent counts that were 1 when tracing ---------------------------------------------


def _index_add(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    rows = (t >= 5).nonzero().squeeze(1)
    src = x[t >= 5].sum(1)
    return torch.zeros(x.shape[0]).index_add(0, rows, src)


def _index_copy(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    rows = (t >= 5).nonzero().squeeze(1)
    src = x.index_select(0, rows).gather(1, (t[t >= 5] - 5).unsqueeze(1)).squeeze(1)
    return x.new_zeros(x.shape[0]).index_copy_(0, rows, src)


def _index_add_rows(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    rows = (t >= 5).nonzero().squeeze(1)
    src = x[t >= 5] * 3
    return x.new_zeros(x.shape).index_add(0, rows, src) + x


def _masked_assign(x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    out = x.new_zeros(x.shape[0])
    out[t >= 5] = x[t >= 5].sum(1)
    return out


DD_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "index_add": _index_add,
    "index_copy_": _index_copy,
    "index_add rows": _index_add_rows,
    "masked assign": _masked_assign,
}

# counts of targets (t >= 5) per call: 1 first, then others
TARGETS = [[0, 6, 1, 3], [0, 6, 7, 1, 2, 3], [0, 1, 2], [9, 5, 6, 1, 7]]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", list(DD_FUNCTIONS))
def test_data_dependent_count_of_one_like_eager(name: str, cache: str) -> None:
    fn = DD_FUNCTIONS[name]
    jfn = thunder.jit(fn, cache=cache)
    g = torch.Generator().manual_seed(0)
    for targets in TARGETS:
        t = torch.tensor(targets)
        x = torch.randn(len(targets), 8, generator=g, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        expected, actual = fn(x, t), jfn(x2, t)
        torch.testing.assert_close(actual, expected)
        cot = torch.randn(expected.shape, generator=g)
        (expected * cot).sum().backward()
        (actual * cot).sum().backward()
        _same_grads([x], [x2])


@pytest.mark.parametrize("cache", CACHES)
def test_adaptive_log_softmax_with_loss_like_eager(cache: str) -> None:
    torch.manual_seed(0)
    model = nn.AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs=[5, 12], div_value=2.0)
    twin = copy.deepcopy(model)
    jmodel = thunder.jit(twin, cache=cache)
    g = torch.Generator().manual_seed(2)
    # targets per cluster: exactly 1 at the first call, then other counts
    for targets in ([11, 16, 1, 3, 2, 4], [11, 18, 19, 2, 13], [1, 2, 3], [5, 5, 12, 16, 2, 17]):
        target = torch.tensor(targets)
        x = torch.randn(len(targets), 8, generator=g)
        expected, actual = model(x, target), jmodel(x, target)
        torch.testing.assert_close(actual.output, expected.output)
        torch.testing.assert_close(actual.loss, expected.loss)
        expected.loss.backward()
        actual.loss.backward()
        _same_grads(list(model.parameters()), list(twin.parameters()))
