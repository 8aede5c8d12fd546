"""A program that returns an intermediate together with outputs computed from it (Grad-CAM's
``return logits, act``, ``output_hidden_states``): as in eager, the intermediate sits between
the inputs and those outputs in autograd's graph, so its hooks, ``retain_grad``,
``autograd.grad`` with respect to it and hooks editing its gradient see (and change) the
total gradient flowing back through the outputs computed from it."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

import thunder

CACHES = ["constant values", "symbolic values"]


def _jit(fn, cache):
    return thunder.jit(fn, cache=cache)


def _close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return torch.allclose(a, b, rtol=1e-4, atol=1e-5)


class _GradCam(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(4, 5)

    def forward(self, x):
        act = self.features(x)
        logits = self.head(act.mean((2, 3)))
        return logits, act


@pytest.mark.parametrize("cache", CACHES)
def test_hook_and_retain_grad_of_returned_activation(cache):
    torch.manual_seed(0)
    m = _GradCam()
    jm = _jit(copy.deepcopy(m), cache)
    for call in range(3):
        x = torch.randn(2 + call % 2, 3, 6, 6)
        got = []
        for mod in (m, jm):
            mod.zero_grad()
            logits, act = mod(x)
            seen = []
            act.register_hook(lambda g, seen=seen: seen.append(g.clone()))
            act.retain_grad()
            logits[:, 1].sum().backward()
            got.append((seen, act.grad, [p.grad.clone() for p in mod.parameters()]))
        (se, ge, pe), (sj, gj, pj) = got
        assert len(se) == len(sj) == 1
        assert _close(se[0], sj[0])
        assert _close(ge, gj)
        assert all(_close(a, b) for a, b in zip(pe, pj))


@pytest.mark.parametrize("cache", CACHES)
def test_hook_editing_intermediate_gradient_changes_input_gradient(cache):
    def f(x, w):
        h = x @ w
        return h.tanh(), h

    jf = _jit(f, cache)
    for call in range(3):
        n = 3 + call
        x, w = torch.randn(n, 3), torch.randn(3, 4)
        grads = []
        for fn in (f, jf):
            xx, ww = x.clone().requires_grad_(), w.clone().requires_grad_()
            a, h = fn(xx, ww)
            h.register_hook(lambda g: g * 10)
            (a.sum() + h.sum()).backward()
            grads.append((xx.grad, ww.grad))
        (xe, we), (xj, wj) = grads
        assert _close(xe, xj) and _close(we, wj)


@pytest.mark.parametrize("cache", CACHES)
def test_autograd_grad_with_respect_to_returned_hidden_state(cache):
    def f(x, w1, w2):
        h = (x @ w1).relu()
        return h @ w2, h

    jf = _jit(f, cache)
    for call in range(3):
        x = torch.randn(4 + call, 3, requires_grad=True)
        w1, w2 = torch.randn(3, 5), torch.randn(5, 2)
        res = []
        for fn in (f, jf):
            out, h = fn(x, w1, w2)
            (g,) = torch.autograd.grad(out.sum(), h, retain_graph=True)
            (gx,) = torch.autograd.grad((out * 2).sum() + h.sum(), x)
            res.append((g, gx))
        assert _close(res[0][0], res[1][0]) and _close(res[0][1], res[1][1])


@pytest.mark.parametrize("cache", CACHES)
def test_multi_grad_hook_sees_total_gradient(cache):
    def f(x, w):
        h = torch.sin(x @ w)
        return h * 3, h

    jf = _jit(f, cache)
    for _call in range(3):
        x, w = torch.randn(4, 3), torch.randn(3, 3)
        res = []
        for fn in (f, jf):
            xx = x.clone().requires_grad_()
            out, h = fn(xx, w)
            seen = []
            torch.autograd.graph.register_multi_grad_hook(
                (out, h), lambda gs, seen=seen: seen.append(gs)
            )
            out.sum().backward()
            res.append((seen, xx.grad))
        (se, xe), (sj, xj) = res
        assert len(se) == len(sj) == 1
        assert all(_close(a, b) for a, b in zip(se[0], sj[0]))
        assert _close(xe, xj)


class _Hidden(nn.Module):
    """``output_hidden_states``: every layer's output returned, the last also used by a head;
    an activation from before the first returned one is used after it too."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(4, 6)
        self.layers = nn.ModuleList(nn.Linear(6, 6) for _ in range(3))
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        a = self.inp(x)
        h = a
        hidden = []
        for layer in self.layers:
            h = torch.tanh(layer(h))
            hidden.append(h)
        return {"logits": self.head(h) + a[:, :2], "hidden": tuple(hidden)}


@pytest.mark.parametrize("cache", CACHES)
def test_hidden_states_chain(cache):
    torch.manual_seed(1)
    m = _Hidden()
    jm = _jit(copy.deepcopy(m), cache)
    for call in range(3):
        x = torch.randn(3 + call, 4, requires_grad=True)
        res = []
        for mod in (m, jm):
            mod.zero_grad()
            x.grad = None
            out = mod(x)
            for h in out["hidden"]:
                h.retain_grad()
            calls = []
            out["hidden"][0].register_hook(lambda g, calls=calls: calls.append(1) or g * 2)
            (out["logits"].pow(2).sum() + out["hidden"][1].sum()).backward()
            res.append(
                (
                    out["logits"].detach(),
                    [h.grad for h in out["hidden"]],
                    x.grad,
                    [p.grad for p in mod.parameters()],
                    len(calls),
                )
            )
        (le, he, xe, pe, ce), (lj, hj, xj, pj, cj) = res
        assert _close(le, lj)
        assert all(_close(a, b) for a, b in zip(he, hj))
        assert _close(xe, xj)
        assert all(_close(a, b) for a, b in zip(pe, pj))
        assert ce == cj == 1


@pytest.mark.parametrize("cache", CACHES)
def test_gradients_without_hooks_and_values_across_the_cut(cache):
    def f(x, w, b):
        a = x * 2 + b
        h = a.relu()
        y = h @ w
        return y + a.sum(1, keepdim=True), h, y.exp()

    jf = _jit(f, cache)
    for call in range(3):
        args = [torch.randn(3 + call, 4), torch.randn(4, 2), torch.randn(4)]
        res = []
        for fn in (f, jf):
            leaves = [t.clone().requires_grad_() for t in args]
            outs = fn(*leaves)
            loss = outs[0].pow(2).sum() + outs[1].sum() * 0.5 + outs[2].sum()
            loss.backward()
            res.append(([o.detach() for o in outs], [t.grad for t in leaves]))
        assert all(_close(a, b) for a, b in zip(res[0][0], res[1][0]))
        assert all(_close(a, b) for a, b in zip(res[0][1], res[1][1]))


@pytest.mark.parametrize("cache", CACHES)
def test_returned_view_of_intermediate(cache):
    def f(x):
        h = x.sin() * 2
        return h, h[0], h.sum()

    jf = _jit(f, cache)
    for call in range(3):
        x = torch.randn(3 + call, 4)
        res = []
        for fn in (f, jf):
            xx = x.clone().requires_grad_()
            h, row, s = fn(xx)
            seen = []
            h.register_hook(lambda g, seen=seen: seen.append(g.clone()))
            (row.sum() * 3 + s).backward()
            res.append((seen, xx.grad))
        (se, xe), (sj, xj) = res
        assert len(se) == len(sj) == 1 and _close(se[0], sj[0])
        assert _close(xe, xj)


def test_double_backward_through_returned_intermediate():
    def f(x, w):
        h = torch.tanh(x @ w)
        return (h * h).sum(1), h

    jf = _jit(f, "constant values")
    for call in range(3):
        x, w = torch.randn(3 + call, 4), torch.randn(4, 4)
        res = []
        for fn in (f, jf):
            xx, ww = x.clone().requires_grad_(), w.clone().requires_grad_()
            out, h = fn(xx, ww)
            (gx,) = torch.autograd.grad(out.sum() + h.sum(), xx, create_graph=True)
            gx.pow(2).sum().backward()
            res.append((xx.grad, ww.grad))
        assert _close(res[0][0], res[1][0]) and _close(res[0][1], res[1][1])


def test_graph_shape_like_eager():
    def f(x, w):
        h = x @ w
        return h.exp(), h

    def g(x):
        return x.sin(), x.cos()

    x = torch.randn(3, 3, requires_grad=True)
    w = torch.randn(3, 3)
    out, h = thunder.jit(f)(x, w)
    assert out.grad_fn is not h.grad_fn
    # h's node is reached from out's: h lies between the inputs and out
    seen, todo = set(), [out.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        todo.extend(n for n, _ in node.next_functions)
    assert h.grad_fn in seen
    # a program without a returned intermediate keeps one node
    a, b = thunder.jit(g)(x)
    assert a.grad_fn is b.grad_fn


def test_no_grad_call_values():
    def f(x, w):
        h = x @ w
        return h.exp(), h

    jf = thunder.jit(f)
    for call in range(2):
        x, w = torch.randn(2 + call, 3, requires_grad=True), torch.randn(3, 3)
        with torch.no_grad():
            e = f(x, w)
            j = jf(x, w)
        assert all(_close(a, b) for a, b in zip(e, j))
        assert not j[0].requires_grad


class _GradCamBatchNorm(nn.Module):
    """Training-mode batch norm: writes into running statistics, which no gradient flows
    through, on both sides of the returned activation."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.head = nn.Sequential(nn.BatchNorm1d(4), nn.Linear(4, 5))

    def forward(self, x):
        act = self.features(x)
        return self.head(act.mean((2, 3))), act


@pytest.mark.parametrize("cache", CACHES)
def test_hook_of_returned_activation_with_running_statistics(cache):
    torch.manual_seed(2)
    m = _GradCamBatchNorm()
    jm = _jit(copy.deepcopy(m), cache)
    for call in range(3):
        x = torch.randn(3 + call, 3, 6, 6)
        res = []
        for mod in (m, jm):
            mod.zero_grad()
            logits, act = mod(x)
            seen = []
            act.register_hook(lambda g, seen=seen: seen.append(g.clone()))
            logits[:, 1].sum().backward()
            res.append((seen, [p.grad for p in mod.parameters()], list(mod.buffers())))
        (se, pe, be), (sj, pj, bj) = res
        assert len(se) == len(sj) == 1 and _close(se[0], sj[0])
        assert all(_close(a, b) for a, b in zip(pe, pj))
        assert all(torch.equal(a, b) or _close(a, b) for a, b in zip(be, bj))


def test_reproducer_of_chained_program(tmp_path):
    import json
    import subprocess
    import sys

    def f(x, w1, w2):
        h = (x @ w1).relu()
        return h @ w2, h

    jf = thunder.jit(f)
    args = (torch.randn(4, 3, requires_grad=True), torch.randn(3, 5), torch.randn(5, 2))
    jf(*args)
    out = thunder.write_reproducer(jf, tmp_path / "repro", args=args, runs=1)
    manifest = json.loads((out / "manifest.json").read_text())
    assert any("chain" in n for n in manifest["notes"])
    run = subprocess.run(
        [sys.executable, str(out / "run.py")], capture_output=True, text=True, cwd=out
    )
    assert run.returncode == 0, run.stderr[-2000:]
