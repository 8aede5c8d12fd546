"""Torch calls the execution trace leaves out (``thunder_executors/peephole.py`` and the
conversions of ``assignment.py``): each program's results, bit for bit, with eager's strides and
eager's sharing of memory, on values that tell a dropped call from a kept one (``-0.0``, NaN,
infinities); and the call is gone from the trace where it may be."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import thunder

_SPECIAL = [0.0, -0.0, 1.5, -2.25, float("inf"), float("-inf"), float("nan"), 1e-40]


def _values(dtype: torch.dtype, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        x = torch.randn(4, 6, generator=g, dtype=torch.float64)
        x.view(-1)[: len(_SPECIAL)] = torch.tensor(_SPECIAL, dtype=torch.float64)
        return x.to(dtype)
    low = 0 if dtype == torch.uint8 else -50
    return torch.randint(low, 50, (4, 6), generator=g, dtype=dtype)


def _same_bits(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    if expected.dtype.is_floating_point:  # -0.0 stays -0.0 (a NaN's sign is no number's)
        numbers = ~expected.isnan()
        assert torch.equal(torch.signbit(actual)[numbers], torch.signbit(expected)[numbers])


def _run(fn: Callable[..., Any], *args: torch.Tensor) -> tuple[Any, Any, str]:
    jf = thunder.jit(fn)
    with torch.no_grad():
        actual = jf(*args)
    expected = fn(*args)
    return actual, expected, str(thunder.last_traces(jf)[-1])


# (program, whether the arithmetic call may be dropped): its operand is made by the program and
# read by it alone.
_DROPPED: list[tuple[Callable[[torch.Tensor], Any], str]] = [
    (lambda x: x.exp() * 1.0, "mul"),
    (lambda x: x.exp() * 1, "mul"),
    (lambda x: x.exp() / 1.0, "true_divide"),
    (lambda x: x.exp() - 0.0, "sub"),
    (lambda x: x.exp() + -0.0, "add"),
]
_KEPT: list[tuple[Callable[[torch.Tensor], Any], str]] = [
    (lambda x: x.exp() + 0.0, "add"),  # -0.0 + 0.0 is 0.0
    (lambda x: x.exp() - -0.0, "sub"),  # so is -0.0 - -0.0
    (lambda x: x * 1.0, "mul"),  # the input itself: the result must be new memory
    (lambda x: x.t() * 1.0, "mul"),  # a view of the input
    (lambda x: (lambda y: (y * 1.0, y))(x.exp()), "mul"),  # the operand is returned as well
    (lambda x: (lambda y: y * 1.0 + y)(x.exp()), "mul"),  # the operand is read again
    (lambda x: x.exp().t().contiguous() * 1.0, "mul"),  # contiguous may return its operand
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize(("fn", "op"), _DROPPED + _KEPT)
def test_identity_arithmetic_matches_eager_bit_for_bit(
    fn: Callable[[torch.Tensor], Any], op: str, dtype: torch.dtype
) -> None:
    x = _values(dtype, 0)
    actual, expected, trace = _run(fn, x)
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for a, e in zip(actual, expected, strict=True):
        _same_bits(a, e)
        assert a.data_ptr() != x.data_ptr()
    if len(actual) == 2:
        assert actual[0] is not actual[1] and actual[0].data_ptr() != actual[1].data_ptr()
    # bfloat16 runs as float32 ops between conversions: the product's operand is a conversion
    dropped = (fn, op) in _DROPPED and dtype != torch.bfloat16
    assert (f"torch.{op}(" not in trace) == dropped, trace


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
def test_integer_offsets_of_zero_are_dropped_and_others_kept(dtype: torch.dtype) -> None:
    x = _values(dtype, 1)

    def f(x: torch.Tensor) -> Any:
        positions = torch.arange(6, dtype=dtype) + 0
        return x + positions, (x * 3) - 0, (x * 3) + 1

    actual, expected, trace = _run(f, x)
    for a, e in zip(actual, expected, strict=True):
        _same_bits(a, e)
    assert trace.count("torch.add(") == 2 and "torch.sub(" not in trace, trace


def test_complex_products_by_one_are_kept() -> None:
    # (inf + 1j) * (1 + 0j) has a NaN in it: not the operand
    z = torch.tensor([complex(float("inf"), 1.0), complex(-0.0, -1.0)], dtype=torch.complex64)
    actual, expected, trace = _run(lambda z: z.exp() * 1.0, z)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
    assert "torch.mul(" in trace


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(["mul", "div", "sub", "add"]),
    st.sampled_from([0, 1, 0.0, -0.0, 1.0, 2.0]),
    st.sampled_from([torch.float32, torch.float16, torch.int64]),
    st.booleans(),
    st.integers(0, 2**16),
)
def test_scalar_arithmetic_on_fresh_tensors_matches_eager(
    op: str, c: float, dtype: torch.dtype, reuse: bool, seed: int
) -> None:
    """Any scalar operand, dropped or not: eager's bits, strides and distinct results."""
    if op == "div" and not dtype.is_floating_point:
        c = 1  # integer true division is float: the dtype changes, nothing is dropped
    x = _values(dtype, seed)

    def f(x: torch.Tensor) -> Any:
        y = x * 2
        z = getattr(torch, op)(y, c)
        return (z, y) if reuse else z

    actual, expected, _ = _run(f, x)
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for a, e in zip(actual, expected, strict=True):
        _same_bits(a, e)
    if reuse:
        assert actual[0].data_ptr() != actual[1].data_ptr()


def test_conversions_that_change_nothing_return_the_tensor_itself_as_eager() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> Any:
        return (
            x.to(torch.float32),
            x.float(),
            w.to(x),
            x.cpu(),
            x.type_as(w),
            x.to("cpu", torch.float32),
        )

    x, w = torch.randn(2, 3), torch.randn(3)
    actual, expected, trace = _run(f, x, w)
    for a, e in zip(actual, expected, strict=True):
        assert (a is x) == (e is x) and (a is w) == (e is w)
        _same_bits(a, e)
    assert ".to(" not in trace and "float(" not in trace and "cpu(" not in trace, trace


def test_a_conversion_asking_for_a_layout_copies_as_eager() -> None:
    def f(x: torch.Tensor) -> Any:
        return x.to(torch.float32, memory_format=torch.channels_last), x.to(torch.float64)

    x = torch.randn(2, 3, 4, 5)
    actual, expected, _ = _run(f, x)
    for a, e in zip(actual, expected, strict=True):
        _same_bits(a, e)
        assert a.data_ptr() != x.data_ptr()


@pytest.mark.parametrize("grad", [False, True])
def test_the_indices_of_a_max_nobody_reads_are_not_computed(grad: bool) -> None:
    """``x.max(dim).values`` (GPT-OSS's router): the decomposition's ``argmax`` is dropped when
    only the values are read, and kept when the indices are (with the torch executor alone:
    without gradients the default executors keep ``max`` whole, one torch call as in eager)."""

    def values_only(x):
        return x.max(-1, keepdim=True).values * 2, torch.min(x, 0)[0]

    def both(x):
        r = x.max(-1)
        return r.values, r.indices

    x = torch.randn(3, 4, requires_grad=grad)
    # Differentiated, the values' gradient goes to the indices max chose (eager's, at ties):
    # the forward computes them for the backward.
    with torch.set_grad_enabled(grad):
        for fn, argmax_calls in ((values_only, 2 if grad else 0), (both, 1)):
            jf = thunder.jit(fn, executors=("torch",))
            for g, w in zip(jf(x), fn(x)):
                assert torch.equal(g, w)
            text = str(thunder.last_traces(jf)[-1])
            assert text.count("torch.argmax(") + text.count("torch.argmin(") == argmax_calls
            kept = thunder.jit(fn)
            for g, w in zip(kept(x), fn(x)):
                assert torch.equal(g, w)
            if not grad:  # differentiated, max goes through its decomposition (argmax routes)
                text = str(thunder.last_traces(kept)[-1])
                assert "torch.argmax(" not in text and "torch_ops.max(" in text


def _residual_grads(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor) -> torch.Tensor:
    """A residual stream: the backward sums the gradients of ``x``, then of ``h``."""
    h = x + torch.tanh(x @ w1)
    h = h + torch.sin(h @ w2)
    return (h * h).sum()


def test_gradient_sums_are_written_into_a_dead_operand_and_match_eager() -> None:
    torch.manual_seed(0)
    for _ in range(3):  # fresh data each call, one program
        x, w1, w2 = (torch.randn(5, 5, dtype=torch.float64, requires_grad=True) for _ in range(3))
        jf = thunder.jit(_residual_grads)
        actual = torch.autograd.grad(jf(x, w1, w2), (x, w1, w2))
        expected = torch.autograd.grad(_residual_grads(x, w1, w2), (x, w1, w2))
        for a, e in zip(actual, expected):  # the backward's order of sums is not eager's
            torch.testing.assert_close(a, e)
    backward = str(thunder.last_backward_traces(jf)[-1])
    assert "torch.Tensor.add_(" in backward, backward


def _sum_then_read(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a = x.exp()
    v = a.view(-1)  # a view of the operand, read after the sum: the sum must not write into it
    s = a + x
    return s * 2, v + 1


def _sum_returned(x: torch.Tensor) -> torch.Tensor:
    return x.exp() + x  # the caller sees the sum: torch.add's result, with its strides


def _sum_of_a_view_pair(x: torch.Tensor) -> torch.Tensor:
    a = x.exp()
    return (a + a.t()) * 2  # the operand read through another layout


@pytest.mark.parametrize("fn", [_sum_then_read, _sum_returned, _sum_of_a_view_pair])
def test_sums_whose_operands_are_read_later_or_seen_stay_new_memory(fn: Callable[..., Any]) -> None:
    x = torch.randn(4, 4)
    actual, expected, trace = _run(fn, x)
    for a, e in zip(
        torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected)
    ):
        _same_bits(a, e)
    assert "add_(" not in trace, trace


def test_sums_are_written_in_place_without_grad_and_not_where_autograd_records() -> None:
    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (x.exp() + y) * 2

    x, y = torch.randn(3, 4), torch.randn(3, 4)
    _, _, trace = _run(fn, x, y)
    assert "torch.Tensor.add_(" in trace, trace
    # Grad mode on, nothing requiring grad: torch.autograd could record the program, so no write.
    jf = thunder.jit(fn)
    torch.testing.assert_close(jf(x, y), fn(x, y), rtol=0, atol=0)
    assert "add_(" not in str(thunder.last_traces(jf)[-1])


def _heads_concatenated(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """The gradient of a fused projection split in heads: each (batch, heads, time, dim) tensor
    back to (batch, time, heads * dim), concatenated along the last dimension."""
    b, h, t, d = q.shape
    parts = [x.exp().transpose(1, 2).reshape(b, t, h * d) for x in (q, k, v)]
    return torch.cat(parts, dim=-1)


def _flattened_read_twice(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    b, h, t, d = q.shape
    fq = q.exp().transpose(1, 2).reshape(b, t, h * d)
    fk = k.exp().transpose(1, 2).reshape(b, t, h * d)
    return torch.cat([fq, fk], 2), fq * 2  # fq is read again: its copy is made anyway


def test_a_cat_of_flattened_heads_is_one_stack_with_eager_values_and_layout() -> None:
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    actual, expected, trace = _run(_heads_concatenated, q, k, v)
    _same_bits(actual, expected)
    assert "torch.stack(" in trace and "torch.cat(" not in trace, trace
    actual, expected, trace = _run(_flattened_read_twice, q, k)
    for a, e in zip(actual, expected):
        _same_bits(a, e)
    assert "torch.cat(" in trace, trace


def test_gradients_through_concatenated_heads_match_eager() -> None:
    for _ in range(2):
        q, k, v = (torch.randn(2, 3, 5, 4, requires_grad=True) for _ in range(3))
        w = torch.randn(36, 6)
        jf = thunder.jit(lambda q, k, v: (_heads_concatenated(q, k, v) @ w).tanh().sum())
        actual = torch.autograd.grad(jf(q, k, v), (q, k, v))
        expected = torch.autograd.grad((_heads_concatenated(q, k, v) @ w).tanh().sum(), (q, k, v))
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e)


# Random programs over a pool of values: new memory (exp, products), views that share it
# (transpose, reshape, a slice), and sums; some of everything returned. Under no_grad every sum
# whose operand is dead may be written into it: the results must be eager's, bit for bit, with
# eager's strides, whatever reads the operands' memory later.
_STEP = st.tuples(
    st.sampled_from(["exp", "mul2", "t", "flat", "slice", "add", "add", "add_rev", "add_rev"]),
    st.integers(0, 3),  # operands counted back from the newest value: chains, reads after sums
    st.integers(0, 3),
)


def _program(steps: list[tuple[str, int, int]], returned: list[int]) -> Callable[..., Any]:
    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        values = [x, y, x.exp(), y * 2]  # inputs, and new memory to sum into
        for op, i, j in steps:
            a, b = values[-1 - i % len(values)], values[-1 - j % len(values)]
            if op == "exp":
                values.append(a.exp())
            elif op == "mul2":
                values.append(a * 2)
            elif op == "t":
                values.append(a.t())
            elif op == "flat":
                values.append(a.reshape(-1).reshape(a.shape))
            elif op == "slice":
                values.append(a[1:].contiguous() if a.shape[0] == 4 else a)
            elif a.shape == b.shape:
                values.append(a + b if op == "add" else b + a)
        # The last value, so that earlier ones feed it, and maybe others.
        return (values[-1], *(values[k % len(values)] for k in returned))

    return fn


@settings(max_examples=40, deadline=None)
@given(
    st.lists(_STEP, min_size=2, max_size=12), st.lists(st.integers(0, 12), min_size=0, max_size=2)
)
@pytest.mark.parametrize("shape", [(4, 4), (1, 4), (4, 1)])
def test_random_sums_and_views_match_eager_bit_for_bit(
    shape: tuple[int, int], steps: list[tuple[str, int, int]], returned: list[int]
) -> None:
    fn = _program(steps, returned)
    x, y = torch.randn(shape), torch.randn(shape)
    actual, expected, _ = _run(fn, x, y)
    for a, e in zip(actual, expected):
        _same_bits(a, e)
    # Nothing the caller passed was written.
    assert torch.equal(x, x.clone()) and not x._version and not y._version
