"""Constant folding: number computations on constants are done at transform time; results are
bitwise those of the unfolded trace; random, effectful and tensor-producing ops are left alone."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import NumberProgram, RandomProgram, number_programs, random_programs

from thunder_executors import transform_for_execution
from thunder_ir import (
    FloatProxy,
    IntegerProxy,
    TensorProxy,
    Trace,
    check_trace,
    devices,
    dtypes,
    prims,
    trace_function,
    tracectx,
)
from thunder_ir import ops as ltorch
from thunder_ir.tracing import proxy_for_tensor
from thunder_transforms import constant_fold, dce


def _run(trace, *args):
    return transform_for_execution(trace).python_callable()(*args)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b) or bool((a.isnan() == b.isnan()).all())
    return type(a) is type(b) and (a == b or (a != a and b != b))


@settings(max_examples=60, deadline=None)
@given(number_programs(), st.integers(0, 2**16))
def test_folding_number_programs_is_bitwise_equivalent(program: NumberProgram, seed: int) -> None:
    trace = program.trace()
    check_trace(trace)
    x = torch.randn(2, 3, generator=torch.Generator().manual_seed(seed))
    args = (x, program.int_input, program.float_input)
    want = _run(trace, *args)
    for folded in (
        constant_fold(trace),
        constant_fold(trace, constants={"n": program.int_input}),
        constant_fold(trace, constants={"n": program.int_input, "f": program.float_input}),
    ):
        check_trace(folded)
        assert folded.history[-1].name == "constant_fold"
        got = _run(folded, *args)
        assert len(got) == len(want)
        assert all(_same(g, w) for g, w in zip(got, want)), (got, want)
    everything = constant_fold(trace, constants={"n": program.int_input, "f": program.float_input})
    assert [b.sym.name for b in everything.bound_symbols if not b.flat_proxy_outs] == [
        "python_return"
    ]  # every number computation was folded


@settings(max_examples=30, deadline=None)
@given(random_programs(), st.integers(0, 2**16))
def test_folding_tensor_programs_changes_nothing(program: RandomProgram, seed: int) -> None:
    trace = program.trace()
    folded = constant_fold(trace)
    check_trace(folded)
    args = program.inputs(seed)
    for g, w in zip(_run(folded, *args), _run(trace, *args)):
        assert _same(g, w)


def test_number_prims_on_constants_fold_and_leave_no_call() -> None:
    trace = Trace()
    with tracectx(trace):
        x = proxy_for_tensor(torch.randn(3))
        n, f = IntegerProxy("n", value=7), FloatProxy("f", value=0.5)
        trace.args = (x, n, f)
        m = prims.mul(prims.add(n, 3), 2)
        h = prims.mul(f, prims.convert_element_type(prims.floor_divide(m, 3), dtypes.float32))
        prims.add(2, 3)  # a constant computation whose result is unused
        prims.python_return((ltorch.mul(x, h), m, h))
    folded = constant_fold(trace, constants={"n": 7})
    check_trace(folded)
    text = folded.python()
    assert "f1 = prims.mul(f, 6.0)" in text and "return (t1, 20, f1)" in text
    assert "prims.add(2, 3)" not in text
    assert "prims.add" not in constant_fold(trace).python().split("i1 =")[1]  # the dead one
    xs = torch.randn(3)
    for t in (trace, folded, constant_fold(trace, constants={"n": 7, "f": 0.5})):
        out = _run(t, xs, 7, 0.5)
        assert torch.equal(out[0], xs * 3.0) and out[1:] == (20, 3.0)
    fully = constant_fold(trace, constants={"n": 7, "f": 0.5})
    assert "t1 = ltorch.mul(t0, 3.0)" in fully.python()


def test_random_effectful_and_tensor_ops_are_not_folded() -> None:
    def f(a):
        r = prims.uniform((3,), 0.0, 1.0, device=a.device, dtype=a.dtype)
        z = ltorch.full((3,), 2.0, device=a.device, dtype=a.dtype)
        prims.copy_(ltorch.add(a, r), a)
        return ltorch.mul(z, r)

    trace = trace_function(f, torch.randn(3))
    folded = constant_fold(trace)
    check_trace(folded)
    assert [b.sym.name for b in folded.bound_symbols] == [
        b.sym.name for b in dce(trace).bound_symbols
    ]


def test_numbers_that_size_tensors_stay_symbolic() -> None:
    trace = Trace()
    with tracectx(trace):
        n = IntegerProxy("n", value=4)
        x = TensorProxy("x", shape=(n, 3), dtype=dtypes.float32, device=devices.cpu)
        trace.args = (x, n)
        k = prims.mul(n, 3)
        y = prims.reshape(x, (k,))
        prims.python_return((y, prims.add(k, 1)))
    folded = constant_fold(trace, constants={"n": 4})
    check_trace(folded)
    assert "i0 = prims.mul(n, 3)" in folded.python()
    xs = torch.randn(4, 3)
    got, want = _run(folded, xs, 4), _run(trace, xs, 4)
    assert torch.equal(got[0], want[0]) and got[1] == want[1] == 13


def test_unknown_constants_are_refused() -> None:
    import pytest

    trace = trace_function(lambda a: ltorch.exp(a), torch.randn(2))
    with pytest.raises(ValueError, match="not inputs"):
        constant_fold(trace, constants={"nope": 1})
