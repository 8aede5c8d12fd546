"""Functionalization (writes into alias groups become new values) and the passes that must respect
in-place writes (CSE). Each functionalized trace is valid, writes only its inputs, at its end, and
computes what eager torch computes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from thunder_executors import transform_for_execution
from thunder_ir import OpTag, check_trace, trace_function
from thunder_ir import ops as ltorch
from thunder_ir.aliasing import alias_info
from thunder_transforms import cse
from thunder_transforms.functionalize import functionalize


def _diag_mul(x: Any) -> Any:
    h = ltorch.mul(x, 1)
    ltorch.mul_(ltorch.diagonal(h), 3)
    return ltorch.sum(h)


def _view_then_write(x: Any) -> Any:
    v = ltorch.getitem(x, (slice(1, None), slice(None, None, 2)))
    ltorch.add_(x, 1)
    return ltorch.mul(v, 2)


def _write_input_through_chain(x: Any) -> Any:
    v = ltorch.select(ltorch.t(x), 0, 1)
    ltorch.fill_(v, 5.0)
    w = ltorch.unsqueeze(x, 0)
    ltorch.sub_(w, 1)
    return ltorch.t(x)


def _setitem_twice(x: Any) -> Any:
    h = ltorch.add(x, 0.5)
    ltorch.setitem_(h, (slice(None), 0), 2.0)
    ltorch.setitem_(ltorch.narrow(h, 0, 1, 2), 1, ltorch.getitem(h, 0))
    return h


def _eager(name: str) -> Callable[[torch.Tensor], Any]:
    def diag_mul(x):
        h = x * 1
        h.diagonal().mul_(3)
        return h.sum()

    def view_then_write(x):
        v = x[1:, ::2]
        x.add_(1)
        return v * 2

    def write_input_through_chain(x):
        x.t().select(0, 1).fill_(5.0)
        x.unsqueeze(0).sub_(1)
        return x.t()

    def setitem_twice(x):
        h = x + 0.5
        h[:, 0] = 2.0
        h.narrow(0, 1, 2)[1] = h[0]
        return h

    return locals()[name]


PROGRAMS = {
    "diag_mul": _diag_mul,
    "view_then_write": _view_then_write,
    "write_input_through_chain": _write_input_through_chain,
    "setitem_twice": _setitem_twice,
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_functionalized_trace_computes_what_eager_does(name: str, layout: str) -> None:
    x = torch.randn(4, 4)
    if layout == "transposed":
        x = x.t()
    trace = trace_function(PROGRAMS[name], x)
    fz = functionalize(trace)
    check_trace(fz.trace)
    inputs = {a.name for a in fz.trace.args}
    for b in fz.trace.bound_symbols:
        if b.has_tag(OpTag.IN_PLACE):  # only the final write-back into an input is left
            assert b.args[1].name in inputs
    fn = transform_for_execution(fz.trace).python_callable()
    x_j, x_e = x.clone(), x.clone()
    if layout == "transposed":
        x_j, x_e = x_j.t().contiguous().t(), x_e.t().contiguous().t()
    got, want = fn(x_j), _eager(name)(x_e)
    torch.testing.assert_close(got, want)  # a sum may add in another order: not bit-exact
    torch.testing.assert_close(x_j, x_e, rtol=0, atol=0)


def test_written_inputs_are_reported_with_how_they_were_written() -> None:
    fz = functionalize(trace_function(_write_input_through_chain, torch.randn(3, 3)))
    assert set(fz.written_inputs) == {0}
    assert fz.through_views == frozenset({0})
    fz = functionalize(trace_function(lambda x: ltorch.add_(x, 1), torch.randn(3)))
    assert fz.through_views == frozenset()


def test_a_trace_without_writes_is_returned_as_it_is() -> None:
    trace = trace_function(lambda x: ltorch.diagonal(ltorch.mul(x, 2)), torch.randn(3, 3))
    assert functionalize(trace).trace is trace


def test_writes_through_stride_dependent_views_are_refused() -> None:
    def f(x):
        h = ltorch.mul(x, 1)
        ltorch.add_(ltorch.reshape(h, (9,)), 1)
        return h

    with pytest.raises(NotImplementedError, match="ltorch.reshape"):
        functionalize(trace_function(f, torch.randn(3, 3)))


def test_reads_after_a_write_of_a_stride_dependent_view_are_refused() -> None:
    def f(x):
        h = ltorch.mul(x, 1)
        flat = ltorch.flatten(h)
        ltorch.add_(h, 1)
        return flat

    with pytest.raises(NotImplementedError, match="ltorch.flatten"):
        functionalize(trace_function(f, torch.randn(3, 3)))


def test_writes_through_expanded_views_raise_torchs_error() -> None:
    def add(x):
        h = ltorch.mul(x, 1)
        ltorch.add_(ltorch.expand(ltorch.getitem(h, slice(0, 1)), 3, 3), 1)
        return h

    def fill(x):
        h = ltorch.mul(x, 1)
        ltorch.fill_(ltorch.expand(ltorch.getitem(h, slice(0, 1)), 3, 3), 1.0)
        return h

    for f in (add, fill):  # eager's backward of either raises this
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            functionalize(trace_function(f, torch.randn(3, 3)))


def test_cse_keeps_reads_before_and_after_a_write_apart() -> None:
    def f(x):
        a = ltorch.sum(x)
        ltorch.add_(ltorch.diagonal(x), 1)
        b = ltorch.sum(x)
        r1 = ltorch.reshape(x, (9,))
        r2 = ltorch.reshape(x, (9,))  # a separate copy when x's strides do not allow a view
        ltorch.add_(r1, 1)
        c = ltorch.mul(x, 2)
        d = ltorch.mul(x, 2)
        return a, b, r2, c, d

    x = torch.randn(3, 3).t()
    trace = cse(trace_function(f, x))
    names = [b.sym.name for b in trace.bound_symbols]
    assert names.count("sum") == 2 and names.count("reshape") == 2
    assert names.count("mul") == 1  # reads after the last write still merge
    check_trace(trace)
    x_j, x_e = x.clone().t().contiguous().t(), x.clone().t().contiguous().t()
    got = transform_for_execution(trace).python_callable()(x_j)
    a = x_e.sum()
    x_e.diagonal().add_(1)
    b = x_e.sum()
    r1, r2 = x_e.reshape(9), x_e.reshape(9)
    r1.add_(1)
    for g, w in zip(got, (a, b, r2, x_e * 2, x_e * 2)):
        torch.testing.assert_close(g, w, rtol=0, atol=0)


def test_alias_groups_follow_views_through_decompositions() -> None:
    def f(x, y):
        d = ltorch.diagonal(x)  # transpose, reshape, slice: may share x's memory
        e = ltorch.exp(y)  # new memory
        u = ltorch.unfold(e, 0, 2, 1)  # a view by its tag, though it gathers
        ltorch.add_(d, 1)
        return d, u

    trace = trace_function(f, torch.randn(3, 3), torch.randn(3))
    x, y = trace.args
    info = alias_info(trace.bound_symbols, [y.name])
    d, u = trace.return_value
    assert info.root(d.name) == info.root(x.name) and info.is_written(x.name)
    assert info.root(u.name) != info.root(y.name) and not info.is_written(u.name)
    assert info.is_observed(y.name) and not info.is_observed(u.name)
