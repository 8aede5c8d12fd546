"""Property tests of higher-order operators through the whole jit pipeline (tracing, DCE,
autodiff, rematerialization, executors): random differentiable programs as the branches of
``torch.cond``, the function of ``map`` and the combine function of ``scan``, against eager on
random inputs, outputs and gradients."""

from __future__ import annotations

from typing import Any

import torch
from autodiff_strategies import TORCH, DiffProgram, diff_programs
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._higher_order_ops import map as hop_map
from torch._higher_order_ops import scan

import thunder


def _scalars(program: DiffProgram, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """The program's outputs, each summed to a scalar (branches must agree on metadata)."""
    return tuple(o.sum() for o in program.run(TORCH, *args))


def _same_interface(first: DiffProgram, second: DiffProgram) -> DiffProgram:
    n = len(first.outputs)
    outputs = (second.outputs * n)[:n]
    return DiffProgram(first.shapes, first.requires_grad, second.steps, outputs)


def _compare(fn: Any, inputs: list[torch.Tensor]) -> None:
    jf = thunder.jit(fn)
    ref_inputs = [x.detach().clone().requires_grad_(x.requires_grad) for x in inputs]
    out, ref = jf(*inputs), fn(*ref_inputs)
    torch.testing.assert_close(out, ref)
    weights = [torch.randn_like(r) for r in ref]
    live = [(o, r, w) for o, r, w in zip(out, ref, weights) if r.requires_grad]
    if live:
        sum((o * w).sum() for o, _, w in live).backward()
        sum((r * w).sum() for _, r, w in live).backward()
    for x, r in zip(inputs, ref_inputs):
        if r.grad is not None:
            torch.testing.assert_close(x.grad, r.grad)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


@settings(max_examples=25, deadline=None)
@given(diff_programs(), diff_programs(), st.integers(0, 2**16), st.floats(-1.0, 1.0))
def test_cond_of_random_branches(
    first: DiffProgram, second: DiffProgram, seed: int, threshold: float
) -> None:
    other = _same_interface(first, second)

    def fn(*args: torch.Tensor) -> Any:
        return torch.cond(
            args[0].mean() > threshold,
            lambda *a: _scalars(first, a),
            lambda *a: _scalars(other, a),
            tuple(args),
        )

    _compare(fn, first.inputs(seed))


@settings(max_examples=15, deadline=None)
@given(diff_programs(), st.integers(0, 2**16))
def test_map_of_a_random_function(program: DiffProgram, seed: int) -> None:
    inputs = program.inputs(seed)
    stacked = [
        torch.stack([x.detach() * 0.5, x.detach()]).requires_grad_(x.requires_grad) for x in inputs
    ]

    def fn(*xs: torch.Tensor) -> Any:
        return hop_map(lambda sl: _scalars(program, tuple(sl)), list(xs))

    _compare(fn, stacked)


@settings(max_examples=15, deadline=None)
@given(diff_programs(), st.integers(0, 2**16), st.booleans())
def test_scan_with_a_random_combine(program: DiffProgram, seed: int, reverse: bool) -> None:
    inputs = program.inputs(seed)
    n = len(program.outputs)

    def combine(carry: torch.Tensor, xs: list[torch.Tensor]) -> Any:
        values = _scalars(program, tuple(x * carry.tanh() for x in xs))
        total = torch.stack(values).sum()
        return carry + total, torch.stack(values)

    def fn(init: torch.Tensor, *xs: torch.Tensor) -> Any:
        return scan(combine, init, list(xs), reverse=reverse)

    stacked = [
        torch.stack([x.detach(), -x.detach(), x.detach() * 2]).requires_grad_(x.requires_grad)
        for x in inputs
    ]
    init = torch.tensor(0.3, dtype=torch.float64, requires_grad=True)
    assert n >= 1
    _compare(fn, [init, *stacked])
