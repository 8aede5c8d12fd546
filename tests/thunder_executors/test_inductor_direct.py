"""Fusion regions compiled by inductor without dynamo (``thunder_executors.inductor_direct``):
the compiled code runs only on inputs laid out as it was compiled for, in the torch state it was
compiled in; every other call runs the region's torch calls. Results equal eager torch on fresh
inputs of every layout, and through thunder.jit forward and backward."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import thunder
from thunder_executors.inductor_direct import _ARM_ATTEMPTS, DirectProgram, compile_direct

_SCALE = torch.tensor([0.5, 2.0, -1.0, 3.0])  # a constant tensor read from globals, as regions do


def region(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = torch.add(a, b) * _SCALE
    return torch.tanh(x), torch.sum(torch.mul(x, x), 1)


class _Counting:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        self.calls += 1
        return region(*args)


@pytest.fixture(scope="module")
def compiled() -> tuple[DirectProgram, _Counting]:
    otherwise = _Counting()
    program = compile_direct(region, [torch.randn(3, 4), torch.randn(3, 4)], otherwise)
    assert isinstance(program, DirectProgram)
    return program, otherwise


def _check(program: DirectProgram, a: torch.Tensor, b: torch.Tensor) -> None:
    got, want = program(a, b), region(a, b)
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w)
        assert g.stride() == w.stride()


def test_the_compiled_code_runs_on_the_compiled_layout(compiled: Any) -> None:
    program, otherwise = compiled
    before = otherwise.calls
    for _ in range(3):
        _check(program, torch.randn(3, 4), torch.randn(3, 4))
    assert otherwise.calls == before  # all three ran the compiled code


@pytest.mark.parametrize(
    "change",
    ["transposed", "sliced", "dtype", "requires_grad", "no_grad", "autocast", "inference_mode"],
)
def test_any_other_layout_or_torch_state_runs_the_torch_calls(compiled: Any, change: str) -> None:
    program, otherwise = compiled
    _check(program, torch.randn(3, 4), torch.randn(3, 4))  # the guards are made by now
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    before = otherwise.calls
    if change == "transposed":  # same shape, other strides: thunder's prologue does not see it
        _check(program, torch.randn(4, 3).t(), b)
    elif change == "sliced":
        _check(program, torch.randn(3, 8)[:, ::2], b)
    elif change == "dtype":
        _check(program, a.double(), b.double())
    elif change == "requires_grad":
        a.requires_grad_()
        got, want = program(a, b), region(a, b)
        torch.testing.assert_close(got, want)
        assert got[0].requires_grad  # the torch calls recorded it for autograd
    elif change == "no_grad":
        with torch.no_grad():
            _check(program, a, b)
    elif change == "autocast":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            _check(program, a, b)
    else:
        with torch.inference_mode():
            _check(program, torch.randn(3, 4), torch.randn(3, 4))
    assert otherwise.calls == before + 1


@settings(max_examples=30, deadline=None)
@given(
    transpose=st.booleans(),
    step=st.sampled_from([1, 2]),
    offset=st.integers(0, 1),
    which=st.sampled_from(["a", "b", "both"]),
)
def test_every_layout_matches_eager(
    compiled: Any, transpose: bool, step: int, offset: int, which: str
) -> None:
    program, _ = compiled

    def make() -> torch.Tensor:
        base = torch.randn(4 * step + 1, 3 * step + 1)
        t = base[offset : offset + 4 * step : step, offset : offset + 3 * step : step]
        return t.t() if transpose else t.t().contiguous()

    a = make() if which in ("a", "both") else torch.randn(3, 4)
    b = make() if which in ("b", "both") else torch.randn(3, 4)
    _check(program, a, b)


def test_calls_that_keep_another_layout_stop_trying_to_arm_and_still_match_eager() -> None:
    otherwise = _Counting()
    program = compile_direct(region, [torch.randn(3, 4), torch.randn(3, 4)], otherwise)
    assert isinstance(program, DirectProgram)
    for _ in range(_ARM_ATTEMPTS + 3):  # transposed from the first call on: never armed
        _check(program, torch.randn(4, 3).t(), torch.randn(3, 4))
    assert otherwise.calls == _ARM_ATTEMPTS + 3
    # After the attempts, even the compiled layout runs the torch calls (no check is made).
    _check(program, torch.randn(3, 4), torch.randn(3, 4))
    assert otherwise.calls == _ARM_ATTEMPTS + 4


def test_what_it_does_not_take_stays_with_dynamo() -> None:
    def decides_on_data(x: torch.Tensor) -> tuple[torch.Tensor]:
        return (x * 2,) if x.sum() > 0 else (x - 1,)

    x = torch.randn(4)
    assert compile_direct(decides_on_data, [x], decides_on_data) is None
    assert compile_direct(region, [x, 2.0], region) is None  # a number argument
    assert compile_direct(region, [], region) is None


def test_thunder_regions_run_directly_and_match_eager_forward_and_backward() -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(x @ w) * 2 + 1
        return torch.tanh(h).sum(-1)

    jf = thunder.jit(f, executors=("torchcompile", "torch_ops", "torch"))
    for layout in ("contiguous", "transposed", "contiguous"):
        x = torch.randn(4, 8) if layout == "contiguous" else torch.randn(8, 4).t()
        w = torch.randn(8, 8, requires_grad=True)
        xe, we = x.detach().clone(), w.detach().clone().requires_grad_()
        out = jf(x, w)
        expected = f(xe, we)
        torch.testing.assert_close(out, expected)
        out.sum().backward()
        expected.sum().backward()
        torch.testing.assert_close(w.grad, we.grad)
    programs = [
        r.sym.impl._compiled
        for t in (thunder.last_traces(jf)[-1], thunder.last_backward_traces(jf)[-1])
        for r in t.fusion_regions
    ]
    assert programs and all(isinstance(p, DirectProgram) for p in programs), programs
    assert any(p.fallback_calls for p in programs)  # the transposed x ran the torch calls


def test_a_program_compiled_on_another_thread_under_its_settings_runs_here() -> None:
    """thunder.compile compiles on its background thread, whose settings of torch's compilers
    are its own while it compiles (the caller's, inductor's patches): the program's guards
    compare grad mode, autocast and device, not those settings, so it runs on the caller's
    thread."""
    import threading

    from torch._inductor import config

    otherwise = _Counting()
    made: list[Any] = []

    def compile_there() -> None:
        with config.patch(fx_graph_cache=False, compile_threads=1):
            made.append(compile_direct(region, [torch.randn(2, 4), torch.randn(2, 4)], otherwise))

    thread = threading.Thread(target=compile_there)
    thread.start()
    thread.join()
    (program,) = made
    assert isinstance(program, DirectProgram)
    for _ in range(3):
        _check(program, torch.randn(2, 4), torch.randn(2, 4))
    assert otherwise.calls == 0 and program.fallback_calls == 0
