"""What a program reads that the cache once missed: the sign of a zero, the class of the jitted
module, the code of the jitted function; and what eager answers for tensors inside the program:
their Python type (a Parameter is one), identity through in-place ops, parameter containers."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
from torch import nn

import thunder


def _no_eager_fallback(jf):
    assert thunder.compile_stats(jf).eager_fallbacks == 0, thunder.compile_stats(jf)


def test_signed_zero_arguments_are_different_programs():
    def f(x, s):
        return x / s

    for first, second in ((0.0, -0.0), (-0.0, 0.0)):
        jf = thunder.jit(f)
        x = torch.ones(2)
        for s in (first, second, first):
            torch.testing.assert_close(jf(x, s), f(x, s))


@pytest.mark.parametrize("cache", [None, "constant values"])
def test_signed_zero_and_nan_attributes(cache):
    class Divide(nn.Module):
        def __init__(self):
            super().__init__()
            self.s = 0.0

        def forward(self, x):
            return x / self.s

    m = Divide()
    jm = thunder.jit(m, cache=cache)
    x = torch.ones(2)
    for s in (0.0, -0.0, float("nan"), float("nan"), 0.0):
        m.s = s
        torch.testing.assert_close(jm(x), m(x), equal_nan=True)
    if cache is None:  # changed once: read as a symbolic value, one program for the others
        assert thunder.compile_stats(jm).cache_misses == 2
    else:  # nan is one program, not one per call
        assert thunder.compile_stats(jm).cache_misses == 3


def test_the_jitted_module_changing_class():
    class A(nn.Module):
        def forward(self, x):
            return x + 1

    class B(nn.Module):
        def forward(self, x):
            return x + 5

    m = A()
    jm = thunder.jit(m)
    x = torch.zeros(2)
    torch.testing.assert_close(jm(x), m(x))
    m.__class__ = B
    torch.testing.assert_close(jm(x), m(x))


def test_the_jitted_function_changing_code():
    def f(x):
        return x + 1

    jf = thunder.jit(f)
    x = torch.zeros(2)
    torch.testing.assert_close(jf(x), f(x))
    f.__code__ = (lambda x: x + 9).__code__
    torch.testing.assert_close(jf(x), f(x))


def test_type_and_class_of_tensors_as_eager():
    def f(x, w):
        y = x * 2
        return (
            type(x) is torch.Tensor,
            type(w) is nn.Parameter,
            w.__class__ is nn.Parameter,
            isinstance(w, nn.Parameter),
            isinstance(y, nn.Parameter),
            type(y) is torch.Tensor,
            type(x).__name__,
        )

    jf = thunder.jit(f)
    x, w = torch.randn(2), nn.Parameter(torch.randn(2))
    assert jf(x, w) == f(x, w) == (True, True, True, True, False, True, "Tensor")


def test_in_place_ops_keep_identity():
    def f(x):
        y = x.clone()
        z = y
        z += 1
        a = y.add_(1)
        return z is y, a is y, y.mul_(2) is a, (y * 1) is y, y

    jf = thunder.jit(f)
    x = torch.randn(3)
    got, want = jf(x), f(x)
    assert got[:4] == want[:4] == (True, True, True, False)
    torch.testing.assert_close(got[4], want[4])


@pytest.mark.parametrize("container", ["list", "dict", "get_parameter"])
def test_parameter_containers_compile(container):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            if container == "list":
                self.p = nn.ParameterList([nn.Parameter(torch.randn(3)) for _ in range(2)])
            elif container == "dict":
                self.p = nn.ParameterDict({"a": nn.Parameter(torch.randn(3))})
            else:
                self.w = nn.Parameter(torch.randn(3))

        def forward(self, x):
            if container == "list":
                return x * self.p[0] + sum(p.sum() for p in self.p) * self.p[-1]
            if container == "dict":
                return x * self.p["a"] + len(self.p)
            return x * self.get_parameter("w")

    m = M()
    e = copy.deepcopy(m)
    jm = thunder.jit(m)
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager fallback, no internal error
        out = jm(x)
    torch.testing.assert_close(out, e(x))
    out.sum().backward()
    e(x).sum().backward()
    for p, q in zip(m.parameters(), e.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad)
    _no_eager_fallback(jm)


def test_a_leaf_made_inside_the_program():
    def f(x):
        y = x.detach().clone().requires_grad_()
        z = (y * y).sum()
        return z, y.requires_grad, z.requires_grad, y

    jf = thunder.jit(f)
    results = []
    for fn in (f, jf):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the jitted call runs split
            z, *flags, y = fn(torch.arange(3.0))
        z.backward()
        results.append((z.detach(), flags, y.grad))
    torch.testing.assert_close(results[1][0], results[0][0])
    assert results[1][1] == results[0][1] == [True, True]
    torch.testing.assert_close(results[1][2], results[0][2])


def test_a_split_program_sees_hooks_added_to_submodules_later():
    # A call that runs split is guarded by dynamo, whose default leaves module hooks unguarded.
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            y = self.lin(x)
            if y.is_contiguous():  # a layout query: the call runs split
                y = y + 1
            return y

    m = M()
    jm = thunder.jit(m)
    x = torch.randn(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            torch.testing.assert_close(jm(x), m(x))
        handles = [
            m.lin.register_forward_hook(lambda mod, i, o: o * 0),
            m.lin.register_forward_pre_hook(lambda mod, i: (i[0] * 2,)),
        ]
        for h in handles:
            torch.testing.assert_close(jm(x), m(x))
            h.remove()
            torch.testing.assert_close(jm(x), m(x))
    assert thunder.compile_stats(jm).split_calls > 0
