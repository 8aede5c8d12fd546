"""``torch._foreach_*_`` writes (EMA and optimizer steps, ``clip_grad_norm_``): every tensor of the
list is written as in eager. Fake tensors show no write for them, so they were recorded as views
and dropped: the lists came back unchanged."""

from __future__ import annotations

import pytest
import torch

import thunder


def _lists(seed: int, n: int = 3) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(2 + i, 3, generator=g) for i in range(n)]


def _ema(ema, params, decay):
    torch._foreach_mul_(ema, decay)
    torch._foreach_add_(ema, params, alpha=1 - decay)


def _lerp_and_addcmul(a, b, c):
    torch._foreach_lerp_(a, b, 0.3)
    torch._foreach_addcmul_(a, b, c, [0.5, -1.0, 2.0])
    torch._foreach_sqrt_(torch._foreach_abs(b))  # on values the program made: no effect
    return torch._foreach_norm(a)


def _zero_then_copy(a, b, c):
    torch._foreach_zero_(a)
    torch._foreach_copy_(b, c)
    return [x + 1 for x in a]


@pytest.mark.parametrize("fn", [_ema, _lerp_and_addcmul, _zero_then_copy])
def test_foreach_writes_reach_every_tensor_as_in_eager(fn):
    jf = thunder.jit(fn)
    for seed in range(3):  # fresh values, one program
        ours = [_lists(seed), _lists(seed + 10), _lists(seed + 20)]
        theirs = [[t.clone() for t in lst] for lst in ours]
        extra = (0.9,) if fn is _ema else ()
        got = jf(*ours[: 2 if fn is _ema else 3], *extra)
        want = fn(*theirs[: 2 if fn is _ema else 3], *extra)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(ours, theirs)
    assert thunder.compile_stats(jf).compilations == 1


def test_clip_grad_norm_and_value_clip_as_in_eager():
    def clip(m):
        torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        torch.nn.utils.clip_grad_value_(m.parameters(), 0.05)

    def model():
        torch.manual_seed(0)
        m = torch.nn.Linear(4, 3)
        m(torch.randn(2, 4)).pow(2).sum().backward()
        return m

    ours, theirs = model(), model()
    thunder.jit(clip)(ours)
    clip(theirs)
    for p, q in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    assert max(p.grad.abs().max() for p in ours.parameters()) <= 0.05 + 1e-6


def _sgd_foreach(params, grads, lr):
    with torch.no_grad():
        torch._foreach_add_(params, grads, alpha=-lr)


def _sgd_loop(params, grads, lr):
    # (a write under no_grad reading what requires grad: the trace torch.autograd records, whose
    # reads are detached, was taken for autodiff's split forward: an internal error)
    with torch.no_grad():
        for p, g in zip(params, grads):
            p.add_(g, alpha=-lr)


@pytest.mark.parametrize("step", [_sgd_foreach, _sgd_loop])
def test_an_sgd_step_on_parameters_under_no_grad(step):

    ours = [torch.nn.Parameter(t) for t in _lists(1)]
    theirs = [torch.nn.Parameter(t.clone()) for t in _lists(1)]
    grads = _lists(2)
    thunder.jit(step)(ours, grads, 0.1)
    step(theirs, grads, 0.1)
    torch.testing.assert_close(ours, theirs)
    assert all(isinstance(p, torch.nn.Parameter) and p.grad_fn is None for p in ours)


def test_foreach_writes_where_gradients_flow():
    def f(xs, w):
        ys = [x * w for x in xs]
        torch._foreach_mul_(ys, 2.0)
        torch._foreach_add_(ys, xs)
        return sum(y.sum() for y in ys)

    xs = _lists(3)
    w = torch.randn(3, requires_grad=True)
    w2 = w.detach().clone().requires_grad_()
    got, want = thunder.jit(f)(xs, w), f(xs, w2)
    torch.testing.assert_close(got, want)
    got.backward()
    want.backward()
    torch.testing.assert_close(w.grad, w2.grad)


def test_a_foreach_write_eager_refuses_raises_as_in_eager():
    def f(a):
        torch._foreach_mul_(a, 0.5)

    ints = [torch.arange(3), torch.arange(4)]
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        f([t.clone() for t in ints])
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        thunder.jit(f)([t.clone() for t in ints])
