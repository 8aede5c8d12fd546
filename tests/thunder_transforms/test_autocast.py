"""Autocast: forward outputs, dtypes and gradients against eager ``torch.autocast("cpu")``."""

from __future__ import annotations

import pytest
import torch
from autodiff_harness import compile_trace, fresh
from autodiff_strategies import TORCH, DiffProgram, diff_programs
from hypothesis import given, settings
from hypothesis import strategies as st

from thunder_ir import check_trace, dtypes, trace_function
from thunder_ir import ops as L
from thunder_transforms import autocast
from thunder_transforms.autodiff import make_differentiable


def _flat(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _close(ours, eager, tol: float = 2e-2) -> None:
    assert len(ours) == len(eager)
    for o, e in zip(ours, eager):
        assert o.dtype == e.dtype, (o.dtype, e.dtype)
        assert o.shape == e.shape
        # Absolute tolerance on the tensor's scale: bfloat16 rounds each element relative to
        # the values it was computed from, and small elements of a large tensor inherit it.
        scale = max(1.0, e.double().abs().max().item()) if e.numel() else 1.0
        torch.testing.assert_close(o.double(), e.double(), atol=tol * scale, rtol=tol)


def _mlp(ns, x, t, w1, b1, g, beta, w2, b2):
    h = ns.layer_norm(ns.gelu(ns.linear(x, w1, b1)), (16,), g, beta)
    logits = ns.linear(h, w2, b2)
    return logits, ns.cross_entropy(logits, t)


def _attention(ns, x, w, b, g, beta, w2):
    h = ns.layer_norm(x, (8,), g, beta)
    q = ns.reshape(ns.linear(h, w, b), (2, 3, 2, 4)).transpose(1, 2)
    a = ns.scaled_dot_product_attention(q, q * 0.5, q, is_causal=True)
    x = x + ns.gelu(ns.reshape(a.transpose(1, 2), (2, 3, 8)))
    return ns.softmax(ns.matmul(x, w2), -1), ns.matmul(x, w2) * x


def _randn(g, *shape, grad=False):
    return torch.randn(shape, generator=g).requires_grad_(grad)


CASES = {
    "linear": (lambda ns, x, w, b: ns.linear(x, w, b), lambda g: [_randn(g, 2, 3, 4), _randn(g, 5, 4), _randn(g, 5)]),
    "matmul": (lambda ns, a, b: ns.matmul(a, b), lambda g: [_randn(g, 2, 3, 4), _randn(g, 4, 5)]),
    "matmul_vector": (lambda ns, a, b: ns.matmul(a, b), lambda g: [_randn(g, 4), _randn(g, 4, 5)]),
    "mixed_float64": (lambda ns, a, b: ns.matmul(a, b) + a.sum(), lambda g: [_randn(g, 3, 3).double(), _randn(g, 3, 3).double()]),
    "conv1d": (lambda ns, x, w: ns.conv1d(x, w), lambda g: [_randn(g, 2, 3, 8), _randn(g, 4, 3, 3)]),
    "einsum": (lambda ns, a, b: ns.einsum("bij,kj->bik", a, b), lambda g: [_randn(g, 2, 3, 4), _randn(g, 5, 4)]),
    "bmm_then_mse": (lambda ns, a, b: ns.mse_loss(ns.bmm(a, b), ns.bmm(a, b) * 0.5), lambda g: [_randn(g, 2, 3, 4), _randn(g, 2, 4, 5)]),
    "prod_of_bf16": (lambda ns, a: ns.prod(ns.matmul(a, a), 1), lambda g: [_randn(g, 3, 3)]),
    "mlp": (_mlp, lambda g: [_randn(g, 5, 8), torch.tensor([0, 2, 1, 1, 0]), _randn(g, 16, 8), _randn(g, 16), _randn(g, 16), _randn(g, 16), _randn(g, 3, 16), _randn(g, 3)]),
    "attention_block": (_attention, lambda g: [_randn(g, 2, 3, 8), _randn(g, 8, 8), _randn(g, 8), _randn(g, 8), _randn(g, 8), _randn(g, 8, 8)]),
}  # fmt: skip


def _eager(fn, *args):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return _flat(fn(TORCH, *args))


@pytest.mark.parametrize("name", sorted(CASES))
@settings(max_examples=3, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_forward_matches_eager_autocast(name: str, seed: int) -> None:
    fn, make = CASES[name]
    inputs = make(torch.Generator().manual_seed(seed))
    trace = autocast(trace_function(lambda *a: fn(L, *a), *inputs))
    check_trace(trace)
    assert trace.history[-1].name == "autocast"
    ours = _flat(compile_trace(trace)(*inputs))
    _close(ours, _eager(fn, *inputs))


def test_lists_are_applied_as_the_trace_says() -> None:
    fn, make = CASES["mlp"]
    trace = autocast(trace_function(lambda *a: fn(L, *a), *make(torch.Generator())))
    text = trace.python()
    assert "ltorch.linear(" in text and 'bf16[5, 16]"' in text  # linear runs in bfloat16
    assert "ltorch.cross_entropy(" in text and 'f32[]"' in text  # the loss in float32
    untouched = trace_function(lambda a: L.exp(a), torch.randn(3))
    assert autocast(untouched).bound_symbols == untouched.bound_symbols


@pytest.mark.parametrize("name", ["linear", "matmul", "mlp", "attention_block", "conv1d"])
def test_gradients_match_eager_autocast(name: str) -> None:
    fn, make = CASES[name]
    inputs = [
        x.requires_grad_() if x.is_floating_point() else x
        for x in make(torch.Generator().manual_seed(3))
    ]
    trace = autocast(trace_function(lambda *a: fn(L, *a), *inputs))
    runner, fw, bw = make_differentiable(trace, compile=compile_trace)
    check_trace(fw)
    check_trace(bw)
    ours_in, eager_in = fresh(inputs), fresh(inputs)
    ours, eager = _flat(runner(*ours_in)), _eager(fn, *eager_in)
    _close(ours, eager)
    g = torch.Generator().manual_seed(7)
    cts = [torch.randn(e.shape, generator=g).to(e.dtype) for e in eager]
    diff_o = [x for x in ours_in if x.requires_grad]
    diff_e = [x for x in eager_in if x.requires_grad]
    got = torch.autograd.grad(ours, diff_o, cts)
    want = torch.autograd.grad(eager, diff_e, cts)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        # bfloat16 rounding: errors scale with the gradient's magnitude (both sides are as far
        # from a float64 reference)
        scale = float(b.abs().max())
        torch.testing.assert_close(a, b, atol=2e-2 * scale, rtol=5e-2)


@settings(max_examples=40, deadline=None)
@given(diff_programs(), st.integers(0, 2**16))
def test_random_programs_have_eager_autocast_dtypes(program: DiffProgram, seed: int) -> None:
    inputs = [x.detach().float() for x in program.inputs(seed)]
    trace = autocast(trace_function(lambda *a: program.run(L, *a), *inputs))
    check_trace(trace)
    ours = compile_trace(trace)(*inputs)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        eager = program.eager(*inputs)
    assert [o.dtype for o in ours] == [e.dtype for e in eager]
    assert [o.shape for o in ours] == [e.shape for e in eager]


def test_float16_and_errors() -> None:
    trace = trace_function(lambda a, b: L.matmul(a, b), torch.randn(2, 2), torch.randn(2, 2))
    out = compile_trace(autocast(trace, dtype=torch.float16))(torch.randn(2, 2), torch.randn(2, 2))
    assert out.dtype == torch.float16
    with pytest.raises(NotImplementedError, match="'cpu', 'cuda'"):
        autocast(trace, device_type="xpu")
    # CUDA autocast leaves CPU tensors as they are
    assert autocast(trace, device_type="cuda").bound_symbols == trace.bound_symbols
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        autocast(trace, dtype=dtypes.float64)
