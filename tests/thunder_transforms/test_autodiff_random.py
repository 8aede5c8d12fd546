"""Random programs differentiated and compared with eager autograd; forward and backward traces
verified; the DCE/CSE strategies' programs differentiated too."""

from __future__ import annotations

import torch
from autodiff_harness import compile_trace, fresh
from autodiff_strategies import DiffProgram, diff_programs
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import RandomProgram, random_programs

from thunder_ir import check_trace
from thunder_transforms import cse, dce
from thunder_transforms.autodiff import make_differentiable


def _compare(trace, eager, inputs, seed: int) -> None:
    check_trace(trace)
    requires_grad = [x.requires_grad for x in inputs]
    runner, fw, bw = make_differentiable(trace, compile=compile_trace, requires_grad=requires_grad)
    check_trace(fw)
    check_trace(bw)
    ours_in, eager_in = fresh(inputs), fresh(inputs)
    ours, want = runner(*ours_in), eager(*eager_in)
    g = torch.Generator().manual_seed(seed)
    outs_o, outs_e, cts = [], [], []
    for o, e in zip(ours, want):
        torch.testing.assert_close(o, e)
        assert o.requires_grad == e.requires_grad
        if e.requires_grad:
            outs_o.append(o)
            outs_e.append(e)
            cts.append(torch.randn(e.shape, generator=g, dtype=torch.float64).to(e.dtype))
    diff_o = [x for x in ours_in if x.requires_grad]
    diff_e = [x for x in eager_in if x.requires_grad]
    if not outs_e:
        return
    all_float64 = all(x.dtype == torch.float64 for x in (*inputs, *want) if x.is_floating_point())
    got = torch.autograd.grad(outs_o, diff_o, cts, allow_unused=True)
    exp = torch.autograd.grad(outs_e, diff_e, cts, allow_unused=True)
    for a, b in zip(got, exp):
        if b is None:
            assert a is None or not a.any()
        else:
            assert a is not None
            # float32: cancellation (x / x) leaves rounding noise relative to the terms' size,
            # also in the gradient of a float64 input that took part in a float32 computation
            tol = 1e-6 if all_float64 else 1e-4
            # equal_nan: a gradient that is NaN in eager (0 / 0) must be NaN here too
            torch.testing.assert_close(a, b, atol=tol, rtol=tol * 10, equal_nan=True)


@settings(max_examples=60, deadline=None)
@given(diff_programs(), st.integers(0, 2**16))
def test_random_programs_grads_match_eager(program: DiffProgram, seed: int) -> None:
    inputs = program.inputs(seed)
    _compare(program.trace(seed), program.eager, inputs, seed)


@settings(max_examples=30, deadline=None)
@given(random_programs(), st.integers(0, 2**16))
def test_dce_cse_programs_differentiate_after_the_passes(program: RandomProgram, seed: int) -> None:
    inputs = [x.requires_grad_() for x in program.inputs(seed)]
    trace = dce(cse(program.trace(seed)))
    # float32 inputs: looser tolerances for their gradients (see _compare)
    _compare(trace, program.eager, inputs, seed)


@settings(max_examples=40, deadline=None)
@given(diff_programs())
def test_min_cut_saves_no_more_than_greedy_on_random_programs(program: DiffProgram) -> None:
    from thunder_transforms.autodiff import remat, split_forward_backward

    fb = split_forward_backward(program.trace())
    greedy = remat.rematerialize(fb, method="greedy")
    min_cut = remat.rematerialize(fb, method="min_cut")
    for t in (min_cut.forward, min_cut.backward):
        check_trace(t)
    assert remat.saved_bytes(min_cut) <= remat.saved_bytes(greedy) <= remat.saved_bytes(fb)
