"""Cropping ``F.pad`` returns new memory as in eager; dce keeps the symbolic sizes a composite's
decomposition reads (a strided conv's output size that ``roll``/``chunk`` compute with)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder_ir import BoundSymbol, NumberProxy, Proxy, Trace

# None: the default, constant sizes until they keep changing, then symbolic ones.
CACHES = [None, "constant values", "symbolic values"]


def _reads(bsym: BoundSymbol) -> set[str]:
    """What ``bsym`` reads: its arguments and the numbers its decomposition reads without
    computing them (an executor may run that size arithmetic on its own)."""
    reads = {p.name for p in bsym.flat_proxy_args}
    inner: set[str] = set()

    def visit(subs: Any) -> None:
        for sub in subs:
            visit(sub.subsymbols)
            reads.update(
                p.name
                for p in sub.flat_proxy_args
                if isinstance(p, NumberProxy) and p.name not in inner
            )
            inner.update(p.name for p in sub.flat_proxy_outs)

    visit(bsym.subsymbols)
    return reads


def _assert_reads_defined(trace: Trace, *, executed: bool) -> None:
    """Every value a top-level symbol reads is an input or made before it: at the top level in
    the trace that runs, else also inside an earlier symbol's decomposition."""
    defined = {p.name for p in _flat(trace.args) if isinstance(p, Proxy)}
    for b in trace.bound_symbols:
        reads = {p.name for p in b.flat_proxy_args} if executed else _reads(b)
        missing = reads - defined
        assert not missing, (
            f"{sorted(missing)} read by {b.sym.qualified_name} never defined:\n{trace}"
        )
        defined.update(p.name for p in b.flat_proxy_outs)
        if not executed:
            defined |= _defined_inside(b)


def _defined_inside(bsym: BoundSymbol) -> set[str]:
    names: set[str] = set()
    for sub in bsym.subsymbols:
        names.update(p.name for p in sub.flat_proxy_outs)
        names |= _defined_inside(sub)
    return names


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in _flat(e)]
    if isinstance(x, dict):
        return [y for e in x.values() for y in _flat(e)]
    return [x]


def _assert_traces_read_defined(jf: Any) -> None:
    for traces in (thunder.last_traces(jf), thunder.last_backward_traces(jf) or []):
        for i, tr in enumerate(traces):
            _assert_reads_defined(tr, executed=i == len(traces) - 1)


# --- cropping pad -------------------------------------------------------------------------

CROPS: list[Callable[[torch.Tensor], torch.Tensor]] = [
    lambda x: F.pad(x, (0, 0, -2, -2)),
    lambda x: F.pad(x, (-1, 0)),
    lambda x: F.pad(x, (0, -1, -1, 0)),
    lambda x: F.pad(x, (0, 0, 0, 0)),
    lambda x: F.pad(x, (-1, -1, -1, -1, -1, -1)),
    lambda x: torch.constant_pad_nd(x, (0, -2)),
    lambda x: F.pad(x, (1, -1), value=3.0),
]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("i", range(len(CROPS)))
@pytest.mark.parametrize("requires_grad", [False, True])
def test_pad_crop_returns_new_memory(cache: str | None, i: int, requires_grad: bool) -> None:
    f = CROPS[i]
    jf = thunder.jit(f, cache=cache)
    for c in range(3):
        x = torch.randn(2, 3, 7 + c, 9, requires_grad=requires_grad)
        xe = x.detach().clone().requires_grad_(requires_grad)
        e, t = f(xe), jf(x)
        torch.testing.assert_close(t, e)
        assert t.stride() == e.stride()
        assert t.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
        with torch.no_grad():
            e.add_(1)
            t.add_(1)
        torch.testing.assert_close(x, xe)  # writing the result leaves the input alone
        e.mul_(2)
        t.mul_(2)  # not a view of a leaf: eager allows it
        if requires_grad:
            g = torch.randn_like(e)
            (ge,) = torch.autograd.grad(e, xe, g)
            (gt,) = torch.autograd.grad(t, x, g)
            torch.testing.assert_close(gt, ge)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_pad_crop_of_intermediate(cache: str | None, requires_grad: bool) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return F.pad(x.sin(), (0, -2, -1, 0))

    jf = thunder.jit(f, cache=cache)
    for c in range(3):
        x = torch.randn(2, 3, 6 + c, 7, requires_grad=requires_grad)
        xe = x.detach().clone().requires_grad_(requires_grad)
        e, t = f(xe), jf(x)
        torch.testing.assert_close(t, e)
        assert t.stride() == e.stride()
        if requires_grad:
            e.sum().backward()
            t.sum().backward()
            torch.testing.assert_close(x.grad, xe.grad)


# --- symbolic sizes read inside decompositions --------------------------------------------

AFTER_CONV: dict[str, Callable[[torch.Tensor], Any]] = {
    "roll_last": lambda y: torch.roll(y, 2, -1),
    "roll_h": lambda y: torch.roll(y, 1, 2),
    "roll_two": lambda y: torch.roll(y, (1, -1), (2, 3)),
    "chunk_c": lambda y: y.chunk(2, 1),
    "chunk_h": lambda y: y.chunk(2, 2)[0] * 2,
    "split_h": lambda y: y.split(3, 2),
    "flip": lambda y: torch.flip(y, (2,)),
    "pad": lambda y: F.pad(y, (1, -1, -1, 1)),
    "narrow": lambda y: y.narrow(2, 1, 2) + 1,
    "flatten": lambda y: y.flatten(2).softmax(-1),
    "avgpool": lambda y: F.adaptive_avg_pool2d(y, 1),
}


def _close(t: Any, e: Any) -> None:
    torch.testing.assert_close(t, e)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(AFTER_CONV))
@pytest.mark.parametrize("requires_grad", [False, True])
def test_ops_after_strided_conv_with_changing_sizes(
    cache: str | None, name: str, requires_grad: bool
) -> None:
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1)
    after = AFTER_CONV[name]

    def f(x: torch.Tensor) -> Any:
        return after(conv(x))

    jf = thunder.jit(f, cache=cache)
    for hw in [(12, 10), (14, 12), (16, 10), (13, 11), (18, 14)]:
        x = torch.randn(2, 3, *hw, requires_grad=requires_grad)
        xe = x.detach().clone().requires_grad_(requires_grad)
        e, t = f(xe), jf(x)
        _close(t, e)
        _assert_traces_read_defined(jf)
        if requires_grad:
            es = e if isinstance(e, tuple) else (e,)
            ts = t if isinstance(t, tuple) else (t,)
            gs = [torch.randn_like(o) for o in es]
            ge = torch.autograd.grad(es, (xe, *conv.parameters()), gs)
            gt = torch.autograd.grad(ts, (x, *conv.parameters()), gs)
            _close(gt, ge)


class _MobileBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.dw = torch.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.roll(self.dw(torch.relu(self.stem(x))), 1, -1)
        a, b = self.bn(y).chunk(2, 1)
        return a * b.sigmoid()


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("train", [False, True])
def test_mobilenet_like_block_with_changing_sizes(cache: str | None, train: bool) -> None:
    torch.manual_seed(0)
    m = _MobileBlock().train(train)
    me = _MobileBlock().train(train)
    me.load_state_dict(m.state_dict())
    jm = thunder.jit(m, cache=cache)
    for hw in [(16, 20), (20, 16), (24, 18), (17, 23)]:
        x = torch.randn(2, 3, *hw, requires_grad=train)
        xe = x.detach().clone().requires_grad_(train)
        e, t = me(xe), jm(x)
        _close(t, e)
        _assert_traces_read_defined(jm)
        if train:
            g = torch.randn_like(e)
            e.backward(g)
            t.backward(g)
            _close(x.grad, xe.grad)
            for pt, pe in zip(m.parameters(), me.parameters()):
                # the conv bias before train-mode batch norm gets a gradient of rounding noise
                torch.testing.assert_close(pt.grad, pe.grad, atol=1e-4, rtol=1e-4)
    _close(m.bn.running_mean, me.bn.running_mean)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_pad_crop_of_intermediate_torchcompile(requires_grad: bool) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return F.pad(x.sin(), (0, -2, -1, 0))

    jf = thunder.jit(f, executors=["torchcompile", "torch_ops", "torch"])
    for c in range(3):
        x = torch.randn(2, 3, 6 + c, 7, requires_grad=requires_grad)
        e, t = f(x), jf(x)
        torch.testing.assert_close(t, e)
        assert t.stride() == e.stride()
