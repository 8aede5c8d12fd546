"""Closure cells and default values of outside functions the program reaches without a path (a
method looked up on its class, a hook, a lambda stored on a module) are outside state: changes to
them between calls are seen, writes into them are eager's, and what they receive is real tensors,
never the program's proxies."""

from __future__ import annotations

import copy

import torch
from torch import nn

import thunder


def _scaled_module_class():
    scale = [1.0]
    offset = torch.zeros(2)

    class Scaled(nn.Module):
        def forward(self, x):
            return x * scale[0] + offset

    return Scaled, scale, offset


def test_closure_of_a_method_is_read_on_every_call():
    Scaled, scale, offset = _scaled_module_class()
    m = Scaled()
    jm = thunder.jit(m)
    for v in (1.0, 2.0, -3.5):
        scale[0] = v
        offset.add_(1)
        x = torch.randn(2)
        torch.testing.assert_close(jm(x), m(x))


def test_closure_of_a_nested_helper_and_a_submodule():
    k = 2

    def helper(x):
        return x * k

    class Inner(nn.Module):
        def forward(self, x):
            return helper(x) + k

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x)

    m = Outer()
    jm = thunder.jit(m)
    for v in (2, 3, 5):
        k = v  # noqa: F841 - read by the closures
        x = torch.randn(3)
        torch.testing.assert_close(jm(x), m(x))


def test_defaults_of_a_method_are_guarded():
    class WithDefaults(nn.Module):
        def forward(self, x, opts={"k": 2.0}, shift=1.0):  # noqa: B006 - mutated below
            return x * opts["k"] + shift

    m = WithDefaults()
    jm = thunder.jit(m)
    x = torch.randn(2)
    torch.testing.assert_close(jm(x), m(x))
    WithDefaults.forward.__defaults__[0]["k"] = 5.0
    torch.testing.assert_close(jm(x), m(x))
    WithDefaults.forward.__defaults__ = ({"k": -1.0}, 4.0)
    torch.testing.assert_close(jm(x), m(x))


def test_writes_into_closure_containers_are_eager():
    log: list[torch.Tensor] = []

    class Logged(nn.Module):
        def forward(self, x):
            log.append(x * 2)
            return x + 1

    jm = thunder.jit(Logged())
    xs = [torch.randn(2) for _ in range(3)]
    for x in xs:
        jm(x)
    assert len(log) == 3
    for got, x in zip(log, xs, strict=True):
        assert type(got) is torch.Tensor
        torch.testing.assert_close(got, x * 2)


def test_nonlocal_counter_of_a_method():
    calls = 0

    class Counted(nn.Module):
        def forward(self, x):
            nonlocal calls
            calls += 1
            return x * calls

    m = Counted()
    jm = thunder.jit(m)
    x = torch.randn(2)
    for n in (1, 2, 3):
        torch.testing.assert_close(jm(x), x * n)  # the counter read, then written, as eager
    assert calls == 3


def test_forward_hook_capturing_features():
    feats: dict[str, torch.Tensor] = {}
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    e = copy.deepcopy(m)
    m[1].register_forward_hook(lambda mod, inp, out: feats.__setitem__("relu", out))
    jm = thunder.jit(m)
    for _ in range(2):
        x = torch.randn(2, 3)
        torch.testing.assert_close(jm(x), e(x))
        assert type(feats["relu"]) is torch.Tensor
        torch.testing.assert_close(feats["relu"], e[1](e[0](x)))


def test_a_stored_lambda_writing_into_its_closure():
    store: dict[str, torch.Tensor] = {}
    holder = nn.Module()
    holder.act = lambda x: (store.__setitem__("v", x * 2), x)[1]

    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.h = holder

        def forward(self, x):
            return self.h.act(x) + 1

    jm = thunder.jit(Wrapper())
    x = torch.randn(2)
    torch.testing.assert_close(jm(x), x + 1)
    assert type(store["v"]) is torch.Tensor
    torch.testing.assert_close(store["v"], x * 2)


def test_cells_the_program_makes_are_its_own():
    def f(x):
        acc = []

        def add(v):
            acc.append(v)
            return len(acc)

        n = add(x) + add(x * 2)
        return sum(acc) * n

    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(jf(x), f(x))
    assert thunder.compile_stats(jf).cache_misses == 1


def test_requires_grad_of_values_computed_under_no_grad():
    def f(x, w):
        y = x * w
        return (x.requires_grad, w.requires_grad, y.requires_grad, (y + 1).requires_grad)

    jf = thunder.jit(f)
    x, w = torch.randn(2, requires_grad=True), torch.randn(2)
    with torch.no_grad():
        assert jf(x, w) == f(x, w) == (True, False, False, False)
    assert jf(x, w) == f(x, w) == (True, False, True, True)
