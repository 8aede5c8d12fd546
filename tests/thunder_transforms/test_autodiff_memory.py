"""Rematerialization: fewer saved bytes, same gradients; on an MLP, no more saved than eager."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from autodiff_harness import compile_trace

from thunder_ir import check_trace, trace_function
from thunder_ir import ops as L
from thunder_transforms.autodiff import make_differentiable, remat, split_forward_backward


def _saved_storage_bytes(run) -> int:
    """Bytes of the distinct storages autograd saves while ``run()`` records the graph."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()
        storages[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = run()
    out.backward()
    return sum(storages.values())


def _mlp(x, t, w1, b1, g, beta, w2, b2, w3, b3):
    h = L.gelu(L.linear(x, w1, b1))
    h = L.layer_norm(h, (w1.shape[0],), g, beta)
    h = L.tanh(L.linear(h, w2, b2))
    return L.cross_entropy(L.linear(h, w3, b3), t)


def _mlp_eager(x, t, w1, b1, g, beta, w2, b2, w3, b3):
    h = F.gelu(F.linear(x, w1, b1))
    h = F.layer_norm(h, (w1.shape[0],), g, beta)
    h = torch.tanh(F.linear(h, w2, b2))
    return F.cross_entropy(F.linear(h, w3, b3), t)


def _mlp_inputs() -> list[torch.Tensor]:
    torch.manual_seed(0)
    d, hidden, classes, batch = 32, 64, 10, 16
    params = [
        torch.randn(hidden, d) * 0.1, torch.zeros(hidden), torch.ones(hidden), torch.zeros(hidden),
        torch.randn(hidden, hidden) * 0.1, torch.zeros(hidden), torch.randn(classes, hidden) * 0.1,
        torch.zeros(classes),
    ]  # fmt: skip
    return [
        torch.randn(batch, d),
        torch.randint(0, classes, (batch,)),
        *(p.requires_grad_() for p in params),
    ]


def test_rematerialization_saves_less_and_keeps_gradients() -> None:
    inputs = _mlp_inputs()
    trace = trace_function(_mlp, *inputs)
    fb = split_forward_backward(trace)
    smaller = remat.rematerialize(fb)
    check_trace(smaller.forward)
    check_trace(smaller.backward)
    assert remat.saved_bytes(smaller) < remat.saved_bytes(fb)
    assert smaller.forward.history[-2].name == "rematerialize"

    grads = []
    for flag in (False, True):
        runner, _, _ = make_differentiable(trace, compile=compile_trace, rematerialize=flag)
        params = [p.detach().clone().requires_grad_() for p in inputs[2:]]
        runner(*inputs[:2], *params).backward()
        grads.append([p.grad for p in params])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


def test_mlp_saves_no_more_than_eager() -> None:
    inputs = _mlp_inputs()
    runner, _, _ = make_differentiable(trace_function(_mlp, *inputs), compile=compile_trace)
    ours = _saved_storage_bytes(lambda: runner(*inputs))
    ours_grads = [p.grad.clone() for p in inputs[2:]]
    for p in inputs[2:]:
        p.grad = None
    eager = _saved_storage_bytes(lambda: _mlp_eager(*inputs))
    for a, p in zip(ours_grads, inputs[2:]):
        torch.testing.assert_close(a, p.grad, atol=1e-5, rtol=1e-4)
    assert ours <= eager, f"saved {ours} bytes, eager saves {eager}"


def test_elementwise_chain_is_recomputed_from_its_input() -> None:
    x = torch.randn(4, 8, requires_grad=True)
    # Each op's gradient reads a value of the chain (sin's its input, exp's and tanh's their
    # outputs): split alone saves several, rematerialization only the input.
    fb = split_forward_backward(trace_function(lambda a: L.tanh(L.exp(L.sin(a))), x))
    assert fb.n_saved > 1
    fb = remat.rematerialize(fb)
    assert [p.name for p in fb.backward.args[: fb.n_saved]] == [fb.forward.args[0].name]
    assert remat.saved_bytes(fb) == 0


# Min-cut rematerialization ------------------------------------------------------------------


class _TorchNS:
    def __getattr__(self, name):
        return getattr(torch, name, None) or getattr(F, name)


def _block(ns, x, w, b, g, beta, w2, b2, w3):
    h = ns.layer_norm(x, (16,), g, beta)
    q = ns.reshape(ns.linear(h, w, b), (2, 5, 2, 8)).transpose(1, 2)
    a = ns.scaled_dot_product_attention(q, ns.tanh(q), q * 0.5, is_causal=True)
    x = x + ns.reshape(a.transpose(1, 2), (2, 5, 16))
    h = ns.gelu(ns.linear(ns.layer_norm(x, (16,), g, beta), w2, b2))
    return ns.sum(x + ns.matmul(h, w3))


def _block_inputs() -> list[torch.Tensor]:
    torch.manual_seed(0)
    shapes = [(16, 16), (16,), (16,), (16,), (64, 16), (64,), (64, 16)]
    return [torch.randn(2, 5, 16)] + [
        (torch.randn(s) * 0.2).requires_grad_() for s in shapes
    ]  # fmt: skip


def _three_ways(trace):
    fb = split_forward_backward(trace)
    greedy = remat.rematerialize(fb, method="greedy")
    min_cut = remat.rematerialize(fb, method="min_cut")
    for t in (greedy.forward, greedy.backward, min_cut.forward, min_cut.backward):
        check_trace(t)
    return [remat.saved_bytes(x) for x in (fb, greedy, min_cut)]


def _grads_with(trace, inputs, first_param: int, method):
    from thunder_transforms.autodiff import runner as runner_mod

    fb = split_forward_backward(trace)
    if method is not None:
        fb = remat.rematerialize(fb, method=method)
    fn = runner_mod.DifferentiableFunction(
        fb, compile_trace(fb.forward), compile_trace(fb.backward)
    )
    params = [p.detach().clone().requires_grad_() for p in inputs[first_param:]]
    fn(*inputs[:first_param], *params).backward()
    return [p.grad for p in params]


def test_min_cut_saves_no_more_than_greedy_on_mlp_and_block() -> None:
    mlp = trace_function(_mlp, *_mlp_inputs())
    block = trace_function(lambda *a: _block(L, *a), *_block_inputs())
    for trace in (mlp, block):
        none, greedy, min_cut = _three_ways(trace)
        assert min_cut <= greedy <= none, (min_cut, greedy, none)
        assert min_cut < none


def test_min_cut_keeps_gradients() -> None:
    for trace, inputs, first in (
        (trace_function(_mlp, *_mlp_inputs()), _mlp_inputs(), 2),
        (trace_function(lambda *a: _block(L, *a), *_block_inputs()), _block_inputs(), 1),
    ):
        want = _grads_with(trace, inputs, first, None)
        for method in ("greedy", "min_cut"):
            for a, b in zip(_grads_with(trace, inputs, first, method), want):
                torch.testing.assert_close(a, b)


def test_block_saves_no_more_than_eager() -> None:
    inputs = _block_inputs()
    runner, _, _ = make_differentiable(
        trace_function(lambda *a: _block(L, *a), *inputs), compile=compile_trace
    )
    ours = _saved_storage_bytes(lambda: runner(*inputs))
    ours_grads = [p.grad.clone() for p in inputs[1:]]
    for p in inputs[1:]:
        p.grad = None
    eager = _saved_storage_bytes(lambda: _block(_TorchNS(), *inputs))
    for a, p in zip(ours_grads, inputs[1:]):
        torch.testing.assert_close(a, p.grad, atol=1e-5, rtol=1e-4)
    assert ours <= eager, f"saved {ours} bytes, eager saves {eager}"


def test_min_cut_beats_all_or_nothing_clusters() -> None:
    """A cluster where one saved value is cheap to recompute (a broadcast scalar) and another is
    not (a sum of two matmuls): greedy keeps both, the min cut recomputes only the first."""

    def f(x, w1, w2):
        m3, m4 = L.matmul(x, w1), L.matmul(x, w2)
        a = L.expand(L.sum(m3), m3.shape)
        return L.sum(L.mul(a, L.add(m3, m4)))

    x = torch.randn(32, 32)
    ws = [torch.randn(32, 32, requires_grad=True) for _ in range(2)]
    none, greedy, min_cut = _three_ways(trace_function(f, x, *ws))
    assert (none, greedy, min_cut) == (2 * 4096, 2 * 4096, 4096 + 4)


def test_min_cut_on_a_12_layer_gpt_saves_memory() -> None:
    # (How long the pass takes is measured by ``./dev bench remat``, not asserted here.)
    def gpt(x, *params):
        B, T, C = x.shape
        for i in range(12):
            g1, b1, wqkv, wo, g2, b2, w1, w2 = params[8 * i : 8 * i + 8]
            q, k, v = L.split(L.linear(L.layer_norm(x, (C,), g1, b1), wqkv), C, 2)
            q, k, v = (L.transpose(L.reshape(t, (B, T, 4, C // 4)), 1, 2) for t in (q, k, v))
            a = L.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + L.linear(L.reshape(L.transpose(a, 1, 2), (B, T, C)), wo)
            x = x + L.linear(L.gelu(L.linear(L.layer_norm(x, (C,), g2, b2), w1)), w2)
        return L.sum(x)

    C = 32
    layer = [(C,), (C,), (3 * C, C), (C, C), (C,), (C,), (4 * C, C), (C, 4 * C)]
    params = [torch.randn(s, requires_grad=True) for _ in range(12) for s in layer]
    fb = split_forward_backward(trace_function(gpt, torch.randn(2, 8, C), *params))
    smaller = remat.rematerialize(fb)
    assert remat.saved_bytes(smaller) < remat.saved_bytes(fb)
    check_trace(smaller.backward)


def test_block_with_fused_ops_saves_less_than_eager() -> None:
    """With layer_norm, sdpa and gelu recorded as the fused-backward ops, the normalized outputs
    are recomputed from the inputs and the (small) mean and rstd, and gelu's output from its
    input, so the block saves strictly less than eager, with the same gradients."""
    inputs = _block_inputs()
    trace = trace_function(lambda *a: _block(L, *a), *inputs)
    fb = remat.rematerialize(split_forward_backward(trace))
    names = [b.sym.name for b in fb.forward.bound_symbols]
    assert {"native_layer_norm", "sdpa_flash", "gelu"} <= set(names), names
    saved = {p.name for p in fb.backward.args[: fb.n_saved]}
    for b in fb.forward.bound_symbols:
        if b.sym.name in ("native_layer_norm", "gelu"):
            assert b.flat_proxy_outs[0].name not in saved, b.sym.name
    check_trace(fb.backward)

    runner, _, _ = make_differentiable(trace, compile=compile_trace)
    ours = _saved_storage_bytes(lambda: runner(*inputs))
    ours_grads = [p.grad.clone() for p in inputs[1:]]
    for p in inputs[1:]:
        p.grad = None
    eager = _saved_storage_bytes(lambda: _block(_TorchNS(), *inputs))
    for a, p in zip(ours_grads, inputs[1:]):
        torch.testing.assert_close(a, p.grad, atol=1e-5, rtol=1e-4)
    assert ours < 0.8 * eager, f"saved {ours} bytes, eager saves {eager}"
