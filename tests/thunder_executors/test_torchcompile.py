"""The torch.compile executor: regions compiled by inductor give eager torch's results, are
reused across calls and traces, and report their compile time."""

from __future__ import annotations

from typing import Any

import torch

from thunder_executors import get_executor, transform_for_execution
from thunder_executors.torchcompile import TorchCompileExecutor
from thunder_ir import prims, trace_function


def program(a: Any, b: Any, w: Any) -> Any:
    x = prims.add(a, prims.broadcast_in_dim(b, (16, 32), (1,)))
    y = prims.tanh(prims.mul(prims.exp(x), 0.5))
    z = prims.matmul(y, w)
    s = prims.sum(prims.mul(y, y), (1,))
    return prims.sigmoid(prims.sub(z, 1.0)), s


def test_regions_match_eager_torch_on_fresh_inputs() -> None:
    ex = TorchCompileExecutor("torchcompile_test")
    inputs = (torch.randn(16, 32), torch.randn(32), torch.randn(32, 8))
    extrace = transform_for_execution(trace_function(program, *inputs), (ex,))
    assert extrace.fusion_regions, extrace.python()
    assert "torchcompile_test.fusion0(" in extrace.python()
    fn = extrace.python_callable()
    for _ in range(3):
        a, b, w = torch.randn(16, 32), torch.randn(32), torch.randn(32, 8)
        y = torch.tanh(torch.exp(a + b) * 0.5)
        expected = (torch.sigmoid(y @ w - 1.0), (y * y).sum(1))
        torch.testing.assert_close(fn(a, b, w), expected)
    # Compiled once (on the first call), timed separately from the calls after it.
    assert extrace.compile_seconds() > 0
    assert all(r.sym.impl.compile_seconds > 0 for r in extrace.fusion_regions)


def test_compiled_regions_are_reused_across_traces_by_source() -> None:
    ex = TorchCompileExecutor("torchcompile_cache_test")
    inputs = (torch.randn(16, 32), torch.randn(32), torch.randn(32, 8))
    first = transform_for_execution(trace_function(program, *inputs), (ex,))
    n = ex.cached_regions()
    first.python_callable()(*inputs)
    spent = first.compile_seconds()
    second = transform_for_execution(trace_function(program, *inputs), (ex,))
    assert ex.cached_regions() == n
    assert [r.sym.impl for r in second.fusion_regions] == [r.sym.impl for r in first.fusion_regions]
    second.python_callable()(*inputs)
    assert second.compile_seconds() == spent  # nothing compiled again


def test_random_and_number_symbols_stay_outside_regions() -> None:
    from thunder_ir import dtypes
    from thunder_ir.devices import cpu

    def f(a: Any) -> Any:
        r = prims.uniform((4,), 0.0, 1.0, device=cpu, dtype=dtypes.float32)
        return prims.mul(prims.exp(a), prims.add(r, 1.0))

    extrace = transform_for_execution(trace_function(f, torch.randn(4)), ("torchcompile",))
    text = extrace.python()
    assert "torch_ex.uniform(" in text
    assert all("uniform" not in s.sym.name for r in extrace.fusion_regions for s in r.subsymbols)


def test_registered_by_name() -> None:
    assert isinstance(get_executor("torchcompile"), TorchCompileExecutor)


def test_equal_regions_with_different_names_share_one_compiled_program() -> None:
    from thunder_ir import dtypes
    from thunder_ir.devices import cpu

    ex = TorchCompileExecutor("torchcompile_canonical_test")

    def block(a: Any, b: Any) -> Any:
        return prims.sin(prims.add(prims.exp(a), b))

    def shifted(a: Any, b: Any) -> Any:
        # A random draw (never fused) first: every name after it differs from block's trace.
        r = prims.uniform((3,), 0.0, 1.0, device=cpu, dtype=dtypes.float32)
        return r, block(a, b)

    a, b = torch.randn(3), torch.randn(3)
    first = transform_for_execution(trace_function(block, a, b), (ex,))
    second = transform_for_execution(trace_function(shifted, a, b), (ex,))
    assert [p.name for p in first.fusion_regions[0].flat_proxy_outs] != [
        p.name for p in second.fusion_regions[0].flat_proxy_outs
    ]
    assert first.fusion_regions[0].sym.impl is second.fusion_regions[0].sym.impl
    assert ex.cached_regions() == 1
    torch.testing.assert_close(second.python_callable()(a, b)[1], torch.sin(torch.exp(a) + b))


def test_a_lone_fusible_composite_too_small_to_fuse_runs_decomposed() -> None:
    from thunder_ir import ops as ltorch

    a = torch.randn(5)
    extrace = transform_for_execution(trace_function(ltorch.exp, a), ("torchcompile",))
    assert extrace.fusion_regions == []
    assert "torch.exp(t0)" in extrace.python()
    torch.testing.assert_close(extrace.python_callable()(a), torch.exp(a))


def test_a_region_compiled_through_dynamo_runs_once_on_its_first_call(monkeypatch: Any) -> None:
    # dynamo compiles on a call: that call's result is the first call's, not run again.
    from thunder_executors.torchcompile import CompiledRegion

    runs = []
    real_compile = torch.compile

    def counting_compile(fn: Any, **options: Any) -> Any:
        compiled = real_compile(fn, **options)

        def run(*args: Any) -> Any:
            runs.append(1)
            return compiled(*args)

        return run

    monkeypatch.setattr(torch, "compile", counting_compile)

    def region(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.tanh(a + b) * 2,)

    compiled = CompiledRegion("", region, {"dynamic": True}, background=False)
    for calls in (1, 2):
        a, b = torch.randn(5, 3), torch.randn(5, 3)
        (got,) = compiled(a, b)
        torch.testing.assert_close(got, torch.tanh(a + b) * 2)
        assert len(runs) == calls
