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
    fb = split_forward_backward(trace_function(lambda a: L.gelu(L.exp(a)), x))
    assert fb.n_saved > 1
    fb = remat.rematerialize(fb)
    assert [p.name for p in fb.backward.args[: fb.n_saved]] == [fb.forward.args[0].name]
    assert remat.saved_bytes(fb) == 0
