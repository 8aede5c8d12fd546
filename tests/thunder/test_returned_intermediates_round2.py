"""Returned intermediates cut into chained autograd nodes (``autodiff.chain``), round 2:

- a size the first part computes inside an op (``cat``'s symbolic length) is handed to the
  second part, so symbolic sizes (``cache="symbolic values"``, a KV cache grown on a module)
  still compile one program instead of falling back to constant sizes per length;
- a low-precision returned intermediate that the rest reads more than once keeps eager's
  gradient summation order (bitwise, as eager), the caller's cotangent first.

Each compares with eager on fresh random inputs over several calls, gradients included."""

from __future__ import annotations

import copy

import pytest
import torch

import thunder

CACHES = [{}, {"cache": "symbolic values"}]


def _grown(x, y):
    h = torch.cat([x, y], 0)
    return (h.sin() * 2).sum(0), h


@pytest.mark.parametrize("options", CACHES)
def test_symbolic_length_computed_inside_an_op_crosses_the_cut(options):
    jf = thunder.jit(_grown, **options)
    for call in range(5):
        x = torch.randn(2 + call, 3, requires_grad=True)
        y = torch.randn(3 + call, 3, requires_grad=True)
        grads = []
        for fn in (_grown, jf):
            xi, yi = x.detach().clone().requires_grad_(), y.detach().clone().requires_grad_()
            out, h = fn(xi, yi)
            seen = []
            h.register_hook(lambda g, seen=seen: seen.append(g.clone()))
            (out.square().sum() + h.sum()).backward()
            grads.append((out, h, seen, xi.grad, yi.grad))
        (oe, he, se, gxe, gye), (ot, ht, st, gxt, gyt) = grads
        torch.testing.assert_close(ot, oe)
        torch.testing.assert_close(ht, he)
        assert len(st) == len(se) == 1
        torch.testing.assert_close(st[0], se[0])  # the total gradient, through ``out`` too
        torch.testing.assert_close(gxt, gxe)
        torch.testing.assert_close(gyt, gye)
    stats = thunder.compile_stats(jf)
    # One program for every length (the default cache: after two constant-size ones).
    assert stats.compilations == (1 if options else 3), stats
    assert stats.eager_fallbacks == 0, stats


class _GrowingReturned(torch.nn.Module):
    """A KV cache grown on a module, returned along with an output computed from it."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.cache = torch.zeros(1, 0, 4)

    def forward(self, x):
        self.cache = torch.cat([self.cache, self.lin(x)], 1)
        return self.cache.softmax(1).sum(1), self.cache


@pytest.mark.parametrize("options", CACHES)
def test_grown_cache_returned_compiles_few_programs(options):
    torch.manual_seed(0)
    eager = _GrowingReturned()
    ours = copy.deepcopy(eager)
    jm = thunder.jit(ours, **options)
    outs = ([], [])
    for _ in range(10):
        x = torch.randn(1, 1, 4)
        for k, m in enumerate((eager, jm)):
            out, cache = m(x)
            outs[k].append(out.square().sum() + cache.sum())
        torch.testing.assert_close(ours.cache, eager.cache)
    stats = thunder.compile_stats(jm)
    assert stats.compilations <= 3, stats
    assert stats.eager_fallbacks == 0, stats
    for k in range(2):
        sum(outs[k]).backward()
    for p, q in zip(eager.parameters(), ours.parameters()):
        torch.testing.assert_close(q.grad, p.grad)


def _used_twice(x, w):
    y = x @ w
    return y, y * y + y.sin(), y @ w


def _used_twice_autocast(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        return y, y.float().sin() + y.float() @ w, y @ w


@pytest.mark.parametrize("options", CACHES)
@pytest.mark.parametrize(
    "fn, in_dtype",
    [
        (_used_twice, torch.bfloat16),
        (_used_twice, torch.float16),
        (_used_twice_autocast, torch.float32),
    ],
)
def test_low_precision_returned_intermediate_read_twice_bitwise(options, fn, in_dtype):
    jf = thunder.jit(fn, **options)
    for seed in range(3):
        g = torch.Generator().manual_seed(seed)
        x = (torch.randn(8, 8, generator=g) * 4).to(in_dtype)
        w = (torch.randn(8, 8, generator=g) * 4).to(in_dtype)
        results = []
        for f in (fn, jf):
            xi, wi = x.clone().requires_grad_(), w.clone().requires_grad_()
            outs = f(xi, wi)
            cots = [
                torch.randn(o.shape, generator=torch.Generator().manual_seed(7 + i)).to(o.dtype)
                for i, o in enumerate(outs)
            ]
            grads = torch.autograd.grad(outs, (xi, wi), cots)
            results.append((outs, grads))
        (oe, ge), (ot, gt) = results
        for a, b in zip((*ot, *gt), (*oe, *ge)):
            assert a.dtype == b.dtype
            assert torch.equal(a, b), (a.float() - b.float()).abs().max()
