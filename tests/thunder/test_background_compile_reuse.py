"""What a fusion region compiled in the background is reused as compiled: the caller's calls run
that program, not a recompile of it on the caller's thread (dynamo guards on a parameter's type
and on a view's base, so the example inputs must have the caller's), and inductor's on-disk
caches serve a region compiled without dynamo (another process compiling it again loads it)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch
from torch._dynamo.utils import counters

import thunder
from thunder.recipes import default_executors
from thunder_executors import background_compile
from thunder_executors.background_compile import ExampleInputs
from thunder_executors.inductor_direct import compile_direct


class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(12)
        self.a = torch.nn.Linear(12, 24)
        self.b = torch.nn.Linear(24, 12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.nn.functional.gelu(self.a(self.norm(x)))) * 0.5 + x


def test_examples_keep_the_parameter_type_and_are_no_views() -> None:
    weight = torch.nn.Parameter(torch.randn(3, 4))
    base = torch.randn(5, 4)
    view = base[1:4]
    dead = torch.randn(2, 3).t()
    examples = ExampleInputs((weight, view, dead, weight))
    del dead  # its storage is gone: a stand-in of its layout is made
    got = examples.materialize()
    assert type(got[0]) is torch.nn.Parameter and got[0].requires_grad
    assert got[3] is got[0]
    assert type(got[1]) is torch.Tensor and got[1]._base is None
    assert torch.equal(got[1], view)
    assert type(got[2]) is torch.Tensor and got[2]._base is None
    assert got[2].shape == (3, 2) and got[2].stride() == (1, 3)
    assert not got[2].any()


@pytest.mark.parametrize("cache", ["symbolic values"])
def test_background_compiled_regions_run_without_recompiling_on_the_callers_thread(
    cache: str,
) -> None:
    if "torchcompile_background" not in default_executors():
        pytest.skip("thunder.compile fuses with nvFuser here")
    torch.manual_seed(0)
    model = _Mlp()
    reference = copy.deepcopy(model)
    compiled = thunder.jit(model, executors=default_executors(), cache=cache)

    def step(batch: int) -> None:
        x = torch.randn(batch, 12)
        for m in (model, reference):
            m.zero_grad(set_to_none=True)
        out, expected = compiled(x), reference(x)
        torch.testing.assert_close(out, expected)
        weights = torch.randn_like(expected)
        (out * weights).sum().backward()
        (expected * weights).sum().backward()
        for (name, p), q in zip(model.named_parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, msg=name)

    step(3)  # the regions (forward and backward, parameters among their inputs) are queued
    assert background_compile.wait_for_background_compiles(timeout=900)
    compiles = counters["stats"]["unique_graphs"]
    for batch in (3, 5, 3, 4):
        step(batch)
    assert counters["stats"]["unique_graphs"] == compiles, "recompiled on the caller's thread"
    assert not background_compile.compiling()


def _region(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.tanh(x * w + 0.25).exp() - x,)


def test_direct_compiles_are_served_by_inductors_cache() -> None:
    x, w = torch.randn(6, 7), torch.randn(7)
    bypassed = counters["inductor"]["fxgraph_cache_bypass"]
    hits = counters["inductor"]["fxgraph_cache_hit"]
    programs: list[Any] = []
    with torch._inductor.config.patch(fx_graph_cache=True):
        for _ in range(2):  # the second compile of the same graph is a cache hit
            program = compile_direct(_region, [x, w], _region)
            assert program is not None
            programs.append(program)
    assert counters["inductor"]["fxgraph_cache_bypass"] == bypassed
    assert counters["inductor"]["fxgraph_cache_hit"] > hits
    for program in programs:
        for _ in range(3):
            x, w = torch.randn(6, 7), torch.randn(7)
            torch.testing.assert_close(program(x, w), _region(x, w))
            assert program.fallback_calls == 0
