"""Peephole rewrites of execution traces: expands that torch's own broadcasting makes
unnecessary are dropped, unread tensor factories are removed; values never change."""

from __future__ import annotations

from typing import Any

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from thunder_executors import transform_for_execution
from thunder_ir import ops as ltorch
from thunder_ir import trace_function


def _calls(extrace: Any) -> list[str]:
    return [f"{b.sym.module}.{b.sym.name}" for b in extrace.bound_symbols]


def test_weight_broadcast_is_left_to_torch() -> None:
    def rms_like(x: Any, w: Any) -> Any:
        return ltorch.mul(w, ltorch.mul(x, ltorch.rsqrt(ltorch.mean(x, -1, keepdim=True))))

    x, w = torch.rand(2, 8, 32) + 0.5, torch.randn(32)
    extrace = transform_for_execution(trace_function(rms_like, x, w), ("torch_ops", "torch"))
    assert "torch_ex.broadcast_in_dim" not in _calls(extrace)
    assert "torch_ops.mean" in _calls(extrace)  # kept whole: one call, not sum + divide
    fn = extrace.python_callable()
    for _ in range(2):
        x, w = torch.rand(2, 8, 32) + 0.5, torch.randn(32)
        torch.testing.assert_close(fn(x, w), w * (x * torch.rsqrt(x.mean(-1, keepdim=True))))


def test_an_expand_that_is_returned_or_read_by_other_ops_stays() -> None:
    def f(x: Any, w: Any) -> Any:
        e = ltorch.expand(w, (3, 4))
        return ltorch.add(x, e), ltorch.matmul(e, ltorch.transpose(x, 0, 1)), e

    x, w = torch.randn(3, 4), torch.randn(4)
    extrace = transform_for_execution(trace_function(f, x, w))
    out = extrace.python_callable()(x, w)
    e = w.expand(3, 4)
    for got, want in zip(out, (x + e, e @ x.T, e), strict=True):
        torch.testing.assert_close(got, want)
    assert tuple(out[2].shape) == (3, 4)


def test_unread_empty_tensor_of_a_cat_is_not_made() -> None:
    def f(x: Any) -> Any:
        empty = ltorch.tensor([], dtype=torch.float32)
        return ltorch.cat([empty, x], 0)

    x = torch.randn(3)
    extrace = transform_for_execution(trace_function(f, x))
    assert "torch_ex.tensor" not in _calls(extrace)
    torch.testing.assert_close(extrace.python_callable()(x), x)


_OPS = {
    "add": (ltorch.add, torch.add),
    "mul": (ltorch.mul, torch.mul),
    "sub": (ltorch.sub, torch.sub),
    "maximum": (ltorch.maximum, torch.maximum),
    "lt": (ltorch.lt, torch.lt),
}


@st.composite
def _broadcastable(draw: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    ndim = draw(st.integers(1, 4))
    full = draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim))
    a = [draw(st.sampled_from([d, 1])) for d in full]
    b = [draw(st.sampled_from([d, 1])) for d in full]
    a = a[draw(st.integers(0, ndim - 1)) :]  # fewer leading dims on one side
    return tuple(a), tuple(b)


@settings(max_examples=40, deadline=None)
@given(
    shapes=_broadcastable(),
    op=st.sampled_from(sorted(_OPS)),
    dtypes=st.sampled_from([(torch.float32, torch.float32), (torch.float32, torch.float64)]),
    zero_dim=st.booleans(),
)
def test_broadcasting_ops_match_eager(
    shapes: tuple[tuple[int, ...], tuple[int, ...]], op: str, dtypes: Any, zero_dim: bool
) -> None:
    """Property: whatever expands are dropped, every broadcasting op gives eager's values,
    dtype and shape (a 0-dimensional operand and mixed dtypes included)."""
    ir_op, torch_op = _OPS[op]
    shape_a, shape_b = shapes
    if zero_dim:
        shape_a = ()
    a, b = torch.randn(shape_a, dtype=dtypes[0]), torch.randn(shape_b, dtype=dtypes[1])

    def f(x: Any, y: Any) -> Any:
        return ir_op(ltorch.mul(x, 2.0), y)

    fn = transform_for_execution(trace_function(f, a, b), ("torch_ops", "torch")).python_callable()
    got, want = fn(a, b), torch_op(a * 2.0, b)
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want)


def test_an_int_in_an_index_is_one_select() -> None:
    # x[:, 1] is a narrow and a squeeze in the IR: eager's one view, torch.select
    def f(x: Any) -> Any:
        y = ltorch.mul(x, 2.0)
        return ltorch.add(y[:, 1], y[0])

    extrace = transform_for_execution(trace_function(f, torch.randn(3, 3)), ("torch_ops", "torch"))
    calls = _calls(extrace)
    assert calls.count("torch.select") == 2 and "torch.narrow" not in calls, calls
    fn = extrace.python_callable()
    for _ in range(2):
        x = torch.randn(3, 3)
        torch.testing.assert_close(fn(x), (x * 2)[:, 1] + (x * 2)[0])


def test_a_narrow_read_elsewhere_stays() -> None:
    def f(x: Any) -> Any:
        y = ltorch.mul(x, 2.0)
        return y[:, 1:2], y[:, 1]

    x = torch.randn(3, 4)
    extrace = transform_for_execution(trace_function(f, x), ("torch_ops", "torch"))
    got = extrace.python_callable()(x)
    for a, b in zip(got, ((x * 2)[:, 1:2], (x * 2)[:, 1]), strict=True):
        torch.testing.assert_close(a, b)
        assert a.stride() == b.stride()


def test_gradient_rows_are_added_into_zeros_in_place() -> None:
    from thunder_ir import prims

    def f(v: Any, i: Any, returned: bool) -> Any:
        z = prims.full((5, 3), 0.0, device=v.device, dtype=v.dtype)
        out = prims.index_put(z, [i], v, True)
        return (out, z) if returned else out

    v, i = torch.randn(4, 3), torch.tensor([0, 2, 0, 4])
    want = torch.zeros(5, 3).index_put_((i,), v, accumulate=True)
    inplace = transform_for_execution(trace_function(lambda v, i: f(v, i, False), v, i))
    assert "torch_ex.index_put_" in _calls(inplace)
    torch.testing.assert_close(inplace.python_callable()(v, i), want)
    kept = transform_for_execution(trace_function(lambda v, i: f(v, i, True), v, i))
    assert "torch_ex.index_put_" not in _calls(kept)  # the zeros are returned: not written
    out, z = kept.python_callable()(v, i)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(z, torch.zeros(5, 3))


def test_broadcast_over_a_size_read_from_data_is_left_to_torch() -> None:
    import thunder

    def f(x: Any) -> Any:
        rows = x[x.sum(1) > 0]
        return rows.sum(1, keepdim=True) * rows  # (n, 1) * (n, 4), n read from data

    jf = thunder.jit(f)
    g = torch.Generator().manual_seed(0)
    one = -torch.ones(6, 4)
    one[2] = 1.0
    for x in [torch.randn(6, 4, generator=g) for _ in range(3)] + [one, -torch.ones(6, 4)]:
        torch.testing.assert_close(jf(x), f(x))
    text = str(thunder.last_traces(jf)[-1])
    assert ".expand(" not in text, text  # torch.mul broadcasts (n, 1) itself
    assert thunder.compile_stats(jf).compilations == 1
