"""Writes into an input followed by a decision on data are deferred past it, and the program
still does what eager does on the input: results keep eager's strides and storage offsets,
returned views alias the input (``reshape``/``flatten`` a view or a copy by the input's strides),
and a backward that eager refuses (a saved tensor written since) raises as eager's. Each input
layout (transposed, stepped, with a storage offset) on fresh values, several calls per program."""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder

CACHES = [None, "symbolic values"]
LAYOUTS = ["contiguous", "transposed", "stepped", "offset", "transposed_stepped", "contiguous"]


def make_input(layout: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(the storage's base tensor, a (3, 4) input in ``layout`` over it)."""
    g = torch.Generator().manual_seed(seed)
    if layout == "contiguous":
        base = torch.randn(3, 4, generator=g)
        return base, base
    if layout == "transposed":
        base = torch.randn(4, 3, generator=g)
        return base, base.t()
    if layout == "stepped":
        base = torch.randn(3, 8, generator=g)
        return base, base[:, ::2]
    if layout == "offset":
        base = torch.randn(15, generator=g)
        return base, base[3:].view(3, 4)
    assert layout == "transposed_stepped"
    base = torch.randn(8, 3, generator=g)
    return base, base[::2].t()


def describe(out: object, base: torch.Tensor, a: torch.Tensor) -> list[object]:
    outs = out if isinstance(out, tuple) else (out,)
    storage = base.untyped_storage().data_ptr()
    return [
        (
            o.detach().clone(),
            o.stride(),
            o.storage_offset(),
            o.untyped_storage().data_ptr() == storage,
            o is a,
        )
        for o in outs
    ]


def backward(out: object, w: torch.Tensor) -> object:
    """w's gradient, or the error eager's backward raises."""
    outs = out if isinstance(out, tuple) else (out,)
    loss = sum(o.sum() for o in outs if o.requires_grad)
    if not isinstance(loss, torch.Tensor):
        return None
    try:
        return torch.autograd.grad(loss, w)[0]
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
        return "modified by an inplace operation"


def assert_like_eager(fn, cache: str | None, layouts=LAYOUTS) -> None:
    jf = thunder.jit(fn, **({} if cache is None else {"cache": cache}))
    for i, layout in enumerate(layouts):
        results = []
        for f in (fn, jf):
            base, a = make_input(layout, seed=i)
            w = torch.randn(3, 4, generator=torch.Generator().manual_seed(100 + i))
            w.requires_grad_()
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no split, no eager run
                out = f(a, w)
            results.append((describe(out, base, a), backward(out, w), base.clone(), a.stride()))
        want, got = results
        for (e, es, eo, ea, ei), (g, gs, go, ga, gi) in zip(want[0], got[0], strict=True):
            torch.testing.assert_close(g, e)
            assert (gs, go, ga, gi) == (es, eo, ea, ei), layout
        if isinstance(want[1], torch.Tensor):
            torch.testing.assert_close(got[1], want[1])
        else:
            assert got[1] == want[1], layout
        torch.testing.assert_close(got[2], want[2])  # the caller's memory after the call
        assert got[3] == want[3]
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0 and stats.last_split_reason is None


def _compute_after(a, w):
    a.add_(1.5)
    if a.sum() > 0:  # a decision on data after a write: the write is deferred past it
        a.mul_(2)
    return a * w, a.exp(), a.t(), a[1:], a


def _written_through_views(a, w):
    a[0].mul_(3)
    a.t()[1:].add_(1.0)
    if a.max() > 1:
        a.sub_(0.5)
    return a.sum(0) * w[0], a[:, 1], (a + w).t()


def _flatten_and_reshape_returned(a, w):
    # a view of the input (contiguous) or a copy (stepped, transposed), as eager's
    a.add_(1.0)
    if a.sum() > 0:
        a.mul_(2)
    return a.flatten(), a.reshape(2, -1), a.contiguous(), a.reshape(4, 3) * w.reshape(4, 3)


def _saved_then_written(a, w):
    # eager's mul saves the written input; the write after it makes eager's backward raise
    a.copy_(w)
    a.mul_(2)
    if a.sum() > 0:
        a.add_(1)
    c = w * a
    a.mul_(0.5)
    return c


def _saved_then_decision(a, w):
    # the write comes before what saves it: eager's backward runs
    a.copy_(w)
    if a.sum() > 0:
        a.add_(1)
    c = w * a
    return c, a


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn",
    [
        _compute_after,
        _written_through_views,
        _flatten_and_reshape_returned,
        _saved_then_written,
        _saved_then_decision,
    ],
)
def test_writes_deferred_past_a_decision_keep_eagers_results(fn, cache):
    assert_like_eager(fn, cache)


def test_returned_views_of_a_deferred_write_alias_the_input():
    def f(a):
        a.add_(1.0)
        if a.sum() > 0:
            a.mul_(2)
        return a.flatten(), a[1:], a.t()

    jf = thunder.jit(f)
    for i, layout in enumerate(LAYOUTS):
        (base_e, a_e), (base_j, a_j) = make_input(layout, i), make_input(layout, i)
        want, got = f(a_e), jf(a_j)
        for o_e, o_j in zip(want, got):
            o_e.add_(10.0)  # reaches the input where the result is a view of it
            o_j.add_(10.0)
            torch.testing.assert_close(base_j, base_e)
        for o_e, o_j in zip(want, got):
            torch.testing.assert_close(o_j, o_e)


@pytest.mark.parametrize("layout", [*LAYOUTS[:-1], "expanded", "empty"])
def test_clone_layout_keeps_the_strides_of_any_input(layout):
    from thunder_executors.torch_impls import clone_layout

    if layout == "expanded":
        a = torch.randn(1, 4).expand(3, 4)
    elif layout == "empty":
        a = torch.randn(3, 8)[:, 2:2]
    else:
        a = make_input(layout, 0)[1]
    c = clone_layout(a)
    assert c.stride() == a.stride()
    assert c.untyped_storage().data_ptr() != a.untyped_storage().data_ptr()
    torch.testing.assert_close(c, a)
