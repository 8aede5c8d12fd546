"""A training step with fusion regions: eager's loss and gradients, and a backward that reads
from memory what eager's reads (the operands of its matmuls: normalized and GELU outputs), saved
by the forward, not computed again (rematerialization recomputes only what fusion makes free)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import thunder
from thunder.models import GPT, GPTConfig
from thunder_executors import transform_for_execution
from thunder_ir import BoundSymbol, Trace, check_trace, trace_function
from thunder_ir import ops as L
from thunder_transforms import checkpoint
from thunder_transforms.autodiff import make_differentiable, remat, split_forward_backward

_FUSED = ("torchcompile", "torch_ops", "torch")


def _walk(bsyms: list[BoundSymbol] | tuple[BoundSymbol, ...]) -> list[BoundSymbol]:
    out: list[BoundSymbol] = []
    for b in bsyms:
        out.append(b)
        out.extend(_walk(b.subsymbols))
    return out


def _saved(fb) -> set[str]:
    return {p.name for p in fb.backward.args[: fb.n_saved]}


def _step(model, params, idx, targets, vocab: int) -> torch.Tensor:
    for p in params:
        p.grad = None
    loss = F.cross_entropy(model(idx).view(-1, vocab), targets.view(-1))
    loss.backward()
    return loss


def test_gpt_step_with_fusion_gives_eagers_gradients_and_saves_matmul_operands() -> None:
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=64, block_size=16, n_layer=1, n_head=2, n_embd=32)
    model = GPT(config)
    params = list(model.parameters())
    jm = thunder.jit(model, executors=_FUSED)
    for _ in range(3):
        idx = torch.randint(0, config.vocab_size, (2, config.block_size))
        targets = torch.randint(0, config.vocab_size, (2, config.block_size))
        expected = _step(model, params, idx, targets, config.vocab_size)
        grads = [p.grad.clone() for p in params]
        loss = _step(jm, params, idx, targets, config.vocab_size)
        torch.testing.assert_close(loss, expected)
        for p, g in zip(params, grads, strict=True):
            torch.testing.assert_close(p.grad, g, atol=1e-5, rtol=1e-4)

    forward, backward = thunder.last_traces(jm)[-1], thunder.last_backward_traces(jm)[-1]
    assert forward.fusion_regions and backward.fusion_regions
    # The backward computes no GELU (only its gradient) and no normalized output again: it
    # reads the ones the forward computed for its matmuls.
    names = [b.sym.name for b in _walk(backward.bound_symbols)]
    assert "gelu" not in names and "native_layer_norm" not in names, names
    saved = {a.name for a in backward.args}
    for b in _walk(forward.bound_symbols):
        if b.sym.name in ("gelu", "native_layer_norm"):
            assert b.flat_proxy_outs[0].name in saved, b


# The choice itself, on traces (no compiler) --------------------------------------------------


def _block(x, g, beta, w1, b1, w2, b2):
    h = L.gelu(L.linear(L.layer_norm(x, (16,), g, beta), w1, b1))
    return L.sum(L.tanh(x + L.linear(h, w2, b2)))


def _block_inputs() -> list[torch.Tensor]:
    torch.manual_seed(1)
    shapes = [(16,), (16,), (64, 16), (64,), (16, 64), (16,)]
    return [torch.randn(3, 5, 16)] + [(torch.randn(s) * 0.3).requires_grad_() for s in shapes]


def _compile(trace: Trace):
    return transform_for_execution(trace, executors=("torch",)).python_callable()


def test_matmul_operands_are_saved_and_gradients_stay() -> None:
    inputs = _block_inputs()
    trace = trace_function(_block, *inputs)
    fb = split_forward_backward(trace)
    lean = remat.rematerialize(fb)
    fast = remat.rematerialize(fb, recompute_materialized=False)
    for t in (fast.forward, fast.backward):
        check_trace(t)
    for b in fast.forward.bound_symbols:
        if b.sym.name in ("native_layer_norm", "gelu"):  # read by the weights' gradient matmuls
            out = b.flat_proxy_outs[0].name
            assert out in _saved(fast) and out not in _saved(lean), b.sym.name
    assert "gelu" not in [b.sym.name for b in _walk(fast.backward.bound_symbols)]

    runner, _, _ = make_differentiable(trace, compile=_compile, recompute_materialized=False)
    ours = [p.detach().clone().requires_grad_() for p in inputs[1:]]
    runner(inputs[0], *ours).backward()
    eager = [p.detach().clone().requires_grad_() for p in inputs[1:]]
    x, (g, beta, w1, b1, w2, b2) = inputs[0], eager
    h = F.gelu(F.linear(F.layer_norm(x, (16,), g, beta), w1, b1))
    torch.sum(torch.tanh(x + F.linear(h, w2, b2))).backward()
    for a, e in zip(ours, eager, strict=True):
        torch.testing.assert_close(a.grad, e.grad, atol=1e-5, rtol=1e-4)


def test_elementwise_chain_still_recomputed_from_its_input() -> None:
    x = torch.randn(4, 8, requires_grad=True)
    fb = split_forward_backward(trace_function(lambda a: L.tanh(L.exp(L.sin(a))), x))
    fb = remat.rematerialize(fb, recompute_materialized=False)
    assert [p.name for p in fb.backward.args[: fb.n_saved]] == [fb.forward.args[0].name]


def test_checkpointed_regions_are_still_recomputed() -> None:
    inputs = _block_inputs()
    trace = trace_function(lambda *a: checkpoint(_block, *a), *inputs)
    fb = split_forward_backward(trace)
    assert fb.checkpointed
    fast = remat.rematerialize(fb, recompute_materialized=False)
    check_trace(fast.backward)
    assert not _saved(fast) & fb.checkpointed
