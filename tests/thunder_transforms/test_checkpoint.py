"""Activation checkpointing: regions marked with ``thunder_transforms.checkpoint`` save none of
their intermediates; gradients equal eager ``torch.utils.checkpoint``'s."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from autodiff_harness import compile_trace, fresh
from test_autodiff_memory import _saved_storage_bytes

from thunder_ir import OpTag, check_trace, trace_function
from thunder_ir import ops as L
from thunder_transforms import checkpoint
from thunder_transforms.autodiff import make_differentiable, remat, split_forward_backward


class _TorchNS:
    def __getattr__(self, name):
        return getattr(torch, name, None) or getattr(F, name)


def _layer(ns, x, w1, w2, g, beta):
    h = ns.layer_norm(x, (16,), g, beta)
    return x + ns.linear(ns.gelu(ns.linear(h, w1)), w2)


def _model(ns, ckpt, x, *params):
    for i in range(0, len(params), 4):
        x = ckpt(lambda *a: _layer(ns, *a), x, *params[i : i + 4])
    return ns.sum(ns.tanh(x))


def _inputs() -> list[torch.Tensor]:
    torch.manual_seed(0)
    params = []
    for _ in range(3):
        params += [
            torch.randn(64, 16) * 0.2,
            torch.randn(16, 64) * 0.2,
            torch.ones(16),
            torch.zeros(16),
        ]
    return [torch.randn(4, 8, 16)] + [p.requires_grad_() for p in params]


def _ours(ckpt: bool):
    use = checkpoint if ckpt else (lambda fn, *a: fn(*a))
    return trace_function(lambda *a: _model(L, use, *a), *_inputs())


def _eager_checkpoint(fn, *a):
    return torch.utils.checkpoint.checkpoint(fn, *a, use_reentrant=False)


def test_region_is_one_tagged_bound_symbol_and_runs() -> None:
    trace = _ours(True)
    check_trace(trace)
    regions = [b for b in trace.bound_symbols if b.has_tag(OpTag.CHECKPOINT)]
    assert len(regions) == 3 and all(b.subsymbols for b in regions)
    assert "checkpoint.region(" in trace.python() or "checkpoint.<lambda>" not in trace.python()
    inputs = _inputs()
    plain = compile_trace(_ours(False))(*inputs)
    torch.testing.assert_close(compile_trace(trace)(*inputs), plain)


def test_gradients_equal_eager_checkpoint() -> None:
    inputs = _inputs()
    for rematerialize in (True, False):
        runner, fw, bw = make_differentiable(
            _ours(True), compile=compile_trace, rematerialize=rematerialize
        )
        check_trace(fw)
        check_trace(bw)
        ours_in, eager_in = fresh(inputs), fresh(inputs)
        runner(*ours_in).backward()
        _model(_TorchNS(), _eager_checkpoint, *eager_in).backward()
        for a, b in zip(ours_in[1:], eager_in[1:]):
            torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4)


def test_checkpointed_intermediates_are_not_saved() -> None:
    fb = split_forward_backward(_ours(True))
    assert fb.checkpointed
    for method in ("min_cut", "checkpointed_only"):
        smaller = remat.rematerialize(fb, method=method)
        check_trace(smaller.forward)
        check_trace(smaller.backward)
        saved = {p.name for p in smaller.backward.args[: smaller.n_saved]}
        assert not saved & fb.checkpointed, method
    plain = remat.rematerialize(split_forward_backward(_ours(False)))
    ckpt = remat.rematerialize(fb)
    assert remat.saved_bytes(ckpt) < remat.saved_bytes(plain)
    # what remains are the regions' outputs (4 * 8 * 16 floats each: the inputs of layers 2 and
    # 3, and tanh's output in place of the last one's), as with torch.utils.checkpoint
    assert remat.saved_bytes(ckpt) == 3 * 4 * 8 * 16 * 4


def test_saved_storage_drops_like_eager_checkpoint() -> None:
    inputs = _inputs()
    with_ckpt, _, _ = make_differentiable(_ours(True), compile=compile_trace)
    without, _, _ = make_differentiable(_ours(False), compile=compile_trace)
    ours_ckpt = _saved_storage_bytes(lambda: with_ckpt(*fresh(inputs)))
    ours_plain = _saved_storage_bytes(lambda: without(*fresh(inputs)))
    eager_ckpt = _saved_storage_bytes(lambda: _model(_TorchNS(), _eager_checkpoint, *fresh(inputs)))
    assert ours_ckpt < ours_plain
    assert ours_ckpt <= eager_ckpt, (ours_ckpt, eager_ckpt)


def _writing_layer(ns, x, w1, w2, g, beta):
    """A layer that writes into its own intermediates in place, as transformers' MoE experts
    do (``out.add_(bias[ids])``): the writes carry gradients to the parameters they add."""
    h = ns.layer_norm(x, (16,), g, beta)
    up = ns.linear(h, w1)
    up.add_(beta.repeat(4))
    out = ns.linear(ns.gelu(up), w2)
    out.mul_(g)
    return x + out


def _writing_model(ns, ckpt, x, *params):
    for i in range(0, len(params), 4):
        x = ckpt(lambda *a: _writing_layer(ns, *a), x, *params[i : i + 4])
    return ns.sum(ns.tanh(x))


def test_a_region_writing_its_intermediates_in_place_gets_eagers_gradients_and_stays_a_region() -> (
    None
):
    inputs = _inputs()
    trace = trace_function(lambda *a: _writing_model(L, checkpoint, *a), *inputs)
    fb = split_forward_backward(trace)
    assert fb.checkpointed  # functionalized inside: the regions stay regions
    smaller = remat.rematerialize(fb, method="checkpointed_only")
    saved = {p.name for p in smaller.backward.args[: smaller.n_saved]}
    assert not saved & fb.checkpointed
    runner, fw, bw = make_differentiable(trace, compile=compile_trace)
    check_trace(fw)
    check_trace(bw)
    ours_in, eager_in = fresh(inputs), fresh(inputs)
    runner(*ours_in).backward()
    _writing_model(_TorchNS(), _eager_checkpoint, *eager_in).backward()
    for a, b in zip(ours_in[1:], eager_in[1:]):
        assert a.grad is not None, "a gradient through an in-place write was lost"
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4)
