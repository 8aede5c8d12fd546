"""Indexing with several index tensors (``w[token_idx, slot, None]``) runs as eager's one
``aten.index`` kernel (``torch_ops.advanced_index``), forward and backward, with counts read from
data; values and gradients equal eager's on fresh inputs, for several routings."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder


def _ints(g: torch.Generator, n: int, high: int, signed: bool = True) -> torch.Tensor:
    return torch.randint(-high if signed else 0, high, (n,), generator=g)


# name -> (function, input shape, the index arguments of one call)
KEYS: dict[str, tuple[Callable[..., Any], tuple[int, ...], Callable[..., tuple[Any, ...]]]] = {
    "two leading": (lambda x, i, j: x[i, j], (5, 4, 3), lambda g: (_ints(g, 7, 5), _ints(g, 7, 4))),
    "after a slice": (
        lambda x, i, j: x[:, i, j],
        (3, 5, 4, 2),
        lambda g: (_ints(g, 6, 5), _ints(g, 6, 4)),
    ),
    "not adjacent": (
        lambda x, i, j: x[i, :, j],
        (5, 3, 4),
        lambda g: (_ints(g, 6, 5), _ints(g, 6, 4)),
    ),
    "with None": (
        lambda x, i, j: x[i, j, None],
        (5, 4),
        lambda g: (_ints(g, 6, 5), _ints(g, 6, 4)),
    ),
    "2-d index": (lambda x, i: x[:, i.reshape(2, 3)], (3, 5), lambda g: (_ints(g, 6, 5),)),
    "repeated rows": (lambda x, i: x[i], (3, 5), lambda g: (_ints(g, 8, 3, signed=False),)),
    "broadcast indices": (
        lambda x, i, j: x[i[:, None], j],
        (5, 4),
        lambda g: (_ints(g, 3, 5), _ints(g, 2, 4)),
    ),
    "int32": (lambda x, i: x[i, 1:], (5, 4), lambda g: (_ints(g, 3, 5).int(),)),
}


def _check(index: Callable[..., Any], shape: tuple[int, ...], keys: Callable[..., Any]) -> Any:
    def fn(x: torch.Tensor, *idx: torch.Tensor) -> torch.Tensor:
        # an intermediate indexed (an input's index whose result is returned runs as torch's own)
        return index(x.sin(), *idx) * 2

    jf = thunder.jit(fn)
    g = torch.Generator().manual_seed(0)
    for _ in range(3):  # fresh inputs and indices each call
        x, idx = torch.randn(*shape, generator=g), keys(g)
        ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
        got, want = jf(ours, *idx), fn(theirs, *idx)
        torch.testing.assert_close(got, want)
        ct = torch.randn(want.shape, generator=g)
        (got_grad,) = torch.autograd.grad(got, ours, ct)
        (want_grad,) = torch.autograd.grad(want, theirs, ct)
        torch.testing.assert_close(got_grad, want_grad)
        with torch.no_grad():
            torch.testing.assert_close(jf(x, *idx), fn(x, *idx))
    assert thunder.compile_stats(jf).eager_fallbacks == 0
    return jf


@pytest.mark.parametrize("name", sorted(KEYS))
def test_advanced_index_runs_whole_and_matches_eager(name: str) -> None:
    jf = _check(*KEYS[name])
    forward = str(thunder.last_traces(jf)[-1])
    assert "torch_ops.advanced_index(" in forward and "index_select" not in forward, forward


def test_a_lone_zero_dim_index_runs_decomposed() -> None:
    # torch's __getitem__ takes a lone 0-dim integer tensor for an int (a view of x): the
    # decomposition makes new memory, as the op says
    jf = _check(lambda x, i: x[i], (5, 4), lambda g: (torch.tensor(3),))
    assert "torch_ops.advanced_index(" not in str(thunder.last_traces(jf)[-1])


def _route(chosen: torch.Tensor, e: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.where(chosen == e)


def _gathered(x: torch.Tensor, w: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """Without writes: differentiated by thunder (a symbolic count per expert)."""
    outs = []
    for e in range(4):
        token_idx, slot = _route(chosen, e)
        outs.append((w[token_idx, slot, None] * x[token_idx]).sum(0))
    return torch.stack(outs)


def _written(x: torch.Tensor, w: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """``y[token_idx] += ...``: written where gradients flow."""
    y = torch.zeros_like(x)
    for e in range(4):
        token_idx, slot = _route(chosen, e)
        y[token_idx] += w[token_idx, slot, None] * x[token_idx]
    return y


def _index_added(x: torch.Tensor, w: torch.Tensor, chosen: torch.Tensor) -> torch.Tensor:
    """Mixtral's form: ``index_add_`` into zeros the program made."""
    y = torch.zeros_like(x)
    for e in range(4):
        token_idx, slot = _route(chosen, e)
        y.index_add_(0, token_idx, w[token_idx, slot, None] * x[token_idx])
    return y


@pytest.mark.parametrize("fn", [_gathered, _written, _index_added], ids=lambda f: f.__name__)
def test_routing_weights_are_picked_whole_for_every_routing(fn: Callable[..., Any]) -> None:
    def program(x: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        w, chosen = logits.softmax(-1).topk(2, -1)
        return fn(x, w, chosen)

    jf = thunder.jit(program)
    g = torch.Generator().manual_seed(1)
    for _ in range(4):  # a new routing each call, some experts with no token
        x, logits = torch.randn(10, 3, generator=g), torch.randn(10, 4, generator=g) * 3
        ours = [x.clone().requires_grad_(), logits.clone().requires_grad_()]
        theirs = [x.clone().requires_grad_(), logits.clone().requires_grad_()]
        got, want = jf(*ours), program(*theirs)
        torch.testing.assert_close(got, want)
        ct = torch.randn(want.shape, generator=g)
        for a, b in zip(torch.autograd.grad(got, ours, ct), torch.autograd.grad(want, theirs, ct)):
            torch.testing.assert_close(a, b)
    stats = thunder.compile_stats(jf)
    assert stats.compilations == 1 and stats.eager_fallbacks == 0, stats.last_eager_reason
    forward = str(thunder.last_traces(jf)[-1])
    assert forward.count("torch_ops.advanced_index(") >= 4, forward
    assert "index_select" not in forward and "check_data" not in forward, forward
    backward = thunder.last_backward_traces(jf)
    if backward:  # thunder's own backward: topk's as eager's, one scatter
        assert "torch_fallback_vjp" not in str(backward[-1]), backward[-1]


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.topk(2, -1)[0] * 2,
        lambda x: torch.topk(x, 3, dim=0)[0].exp(),
        lambda x: torch.topk(x, 2, 1, False)[0].sin(),
        lambda x: x.sort(1, descending=True)[0].cumsum(1),
        lambda x: torch.sort(x)[0] * x,
    ],
)
def test_gradients_of_topk_and_sort_scatter_back(fn: Callable[..., Any]) -> None:
    jf = thunder.jit(fn)
    g = torch.Generator().manual_seed(2)
    for _ in range(2):
        x = torch.randn(4, 5, generator=g)
        ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
        (got,) = torch.autograd.grad(jf(ours).square().sum(), ours)
        (want,) = torch.autograd.grad(fn(theirs).square().sum(), theirs)
        torch.testing.assert_close(got, want)
    assert "torch_fallback_vjp" not in str(thunder.last_backward_traces(jf)[-1])
