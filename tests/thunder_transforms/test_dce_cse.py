"""DCE and CSE: equivalence on random traces (bitwise), plus the cases they must not touch."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import RandomProgram, random_programs

from thunder_executors import transform_for_execution
from thunder_ir import check_trace, prims, trace_function
from thunder_ir import ops as ltorch
from thunder_transforms import cse, dce


def _run(trace, args):
    return transform_for_execution(trace).python_callable()(*args)


@settings(max_examples=40)
@given(random_programs(), st.integers(0, 2**16))
def test_dce_and_cse_preserve_results_bitwise(program: RandomProgram, seed: int) -> None:
    trace = program.trace()
    check_trace(trace)
    args = program.inputs(seed)
    want = _run(trace, args)
    eager = program.eager(*args)
    for got_trace in (dce(trace), cse(trace), dce(cse(trace))):
        check_trace(got_trace)
        assert len(got_trace.bound_symbols) <= len(trace.bound_symbols)
        got = _run(got_trace, args)
        for g, w in zip(got, want):
            assert torch.equal(g, w) or (g.isnan() == w.isnan()).all()
    for w, e in zip(want, eager):
        torch.testing.assert_close(w, e, equal_nan=True)


def test_dce_drops_unused_and_keeps_effects() -> None:
    def f(a, b):
        ltorch.exp(a)  # dead
        c = ltorch.mul(a, b)
        prims.copy_(c, b)  # in place: kept even though its output is unused
        return c

    trace = trace_function(f, torch.randn(3), torch.randn(3))
    names = [b.sym.name for b in dce(trace).bound_symbols]
    assert names == ["mul", "copy_", "python_return"]
    assert dce(trace).history[-1].name == "dce"


def test_cse_merges_repeats_but_not_random_ops() -> None:
    def f(a):
        x = ltorch.exp(a)
        y = ltorch.exp(a)
        r1 = prims.uniform((3,), 0.0, 1.0, device=a.device, dtype=a.dtype)
        r2 = prims.uniform((3,), 0.0, 1.0, device=a.device, dtype=a.dtype)
        return ltorch.add(x, y), r1, r2

    trace = dce(cse(trace_function(f, torch.randn(3))))
    check_trace(trace)
    names = [b.sym.name for b in trace.bound_symbols]
    assert names.count("exp") == 1 and names.count("uniform") == 2
