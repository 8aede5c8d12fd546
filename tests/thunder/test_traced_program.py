"""``trace_program``'s result, the contract between tracing and the stages after it: frozen, and
holding all that the prologue and the epilogue are built from (compiled programs built from it
match eager on fresh inputs)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import torch

from thunder import DEFAULT_EXECUTORS
from thunder.binding import TracedProgram, trace_program
from thunder.compile_entry import parameter_names
from thunder.options import JitOptions
from thunder.prologue import build_epilogue, build_prologue
from thunder_executors import transform_for_execution

SCALE = 2.0
LOG: list[float] = []


def program(x: torch.Tensor, w: torch.Tensor) -> dict[str, Any]:
    y = torch.relu(x @ w) * SCALE
    LOG.append(SCALE)
    return {"y": y, "log": LOG}


def _traced(fn: Any, *args: Any) -> TracedProgram:
    options = JitOptions.from_kwargs(None, None, False, {})
    return trace_program(fn, args, {}, options, parameter_names(fn))


def test_the_result_is_frozen_and_read_only() -> None:
    traced = _traced(program, torch.randn(3, 4), torch.randn(4, 5))
    with pytest.raises(dataclasses.FrozenInstanceError):
        traced.writes = ()  # type: ignore[misc]
    with pytest.raises(TypeError):
        traced.guards[next(iter(traced.guards))] = None  # type: ignore[index]
    with pytest.raises(TypeError):
        traced.input_tensors["x"] = torch.zeros(1)  # type: ignore[index]


def test_the_result_holds_inputs_guards_and_writes() -> None:
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    LOG.clear()
    traced = _traced(program, x, w)
    assert LOG == []  # tracing left no effect behind
    assert [p.name for p, _ in traced.inputs] == [a.name for a in traced.trace.args]
    assert traced.input_tensors["x"] is x and traced.input_tensors["w"] is w
    assert any("SCALE" in g.access.describe(traced.param_names) for g in traced.guards.values())
    assert [w_.kind for w_ in traced.writes] == ["call"]  # LOG.append
    assert traced.needs_epilogue  # the return value refers to LOG
    assert dict(traced.autocast_at_start) == {}


def test_prologue_computation_and_epilogue_built_from_it_match_eager() -> None:
    x, w = torch.randn(3, 4), torch.randn(4, 5)
    LOG.clear()
    traced = _traced(program, x, w)
    prologue_trace, ctx = build_prologue(traced, 2, traced.trace.constraint())
    prologue = prologue_trace.python_callable(ctx)
    computation = transform_for_execution(traced.trace, DEFAULT_EXECUTORS).python_callable()
    _, epilogue = build_epilogue(traced)
    for _ in range(2):
        x, w = torch.randn(3, 4), torch.randn(4, 5)
        LOG.clear()
        out = epilogue((x, w), {}, computation(*prologue((x, w), {})))
        assert out["log"] is LOG and LOG == [SCALE]  # the write replayed
        LOG.clear()
        torch.testing.assert_close(out["y"], program(x, w)["y"])
        LOG.clear()
