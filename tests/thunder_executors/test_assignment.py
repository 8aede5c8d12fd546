"""The assignment pass: executor priority, checkers, decomposition of unclaimed composites, and
fusion regions formed by dataflow."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
import torch

from thunder_executors import (
    FusionExecutor,
    OperatorExecutor,
    executor_availability,
    get_available_executors,
    get_executor,
    transform_for_execution,
)
from thunder_executors.torch_executor import torch_executor
from thunder_executors.torchcompile import region_trace
from thunder_ir import BoundSymbol, Proxy, Symbol, check_trace, dtypes, prims, trace_function
from thunder_ir.devices import cpu
from thunder_ir.tags import OpTag


class EagerElementwiseFuser(FusionExecutor):
    """Fuses elementwise prims into regions run eagerly (tests the grouping, not a compiler)."""

    def __init__(self) -> None:
        super().__init__("ew_fuser")

    def can_fuse(self, bsym: BoundSymbol) -> bool:
        return bsym.has_tag(OpTag.ELEMENTWISE) and bsym.sym.is_prim and bool(bsym.flat_proxy_outs)

    def fuse(
        self,
        region: Sequence[BoundSymbol],
        inputs: Sequence[Proxy],
        outputs: Sequence[Proxy],
        *,
        index: int,
    ) -> BoundSymbol:
        translated = [torch_executor.translate(b) for b in region]
        fn = region_trace(f"region{index}", translated, inputs, outputs).python_callable(
            {"torch": torch}
        )
        sym = Symbol(f"region{index}", None, module="ew_fuser", impl=fn)
        return BoundSymbol(sym, tuple(inputs), {}, tuple(outputs), subsymbols=tuple(translated))


def regions_of(extrace: Any) -> list[list[str]]:
    return [[s.sym.name for s in r.subsymbols] for r in extrace.fusion_regions]


def test_a_non_fusible_op_on_the_path_splits_the_region_and_says_why() -> None:
    a, w = torch.randn(4, 4), torch.randn(4, 4)

    def f(a: Any, w: Any) -> Any:
        x = prims.exp(prims.add(a, a))
        y = prims.matmul(x, w)  # not fusible (two matrices: torch.mm)
        return prims.sin(prims.mul(y, x))

    trace = trace_function(f, a, w)
    extrace = transform_for_execution(trace, (EagerElementwiseFuser(), "torch"))
    check_trace(extrace, rerun_meta=False)
    assert regions_of(extrace) == [["add", "exp"], ["mul", "sin"]]
    assert len(extrace.fusion_notes) == 1
    assert "through torch.mm (t4)" in extrace.fusion_notes[0]
    assert "through torch.mm" in extrace.python()
    torch.testing.assert_close(
        extrace.python_callable()(a, w), torch.sin((torch.exp(a + a) @ w) * torch.exp(a + a))
    )


def test_the_execution_trace_is_the_trace_with_its_executors_fields() -> None:
    a, w = torch.randn(4, 4), torch.randn(4, 4)

    def f(a: Any, w: Any) -> Any:
        return prims.sin(prims.matmul(prims.exp(a), w))

    trace = trace_function(f, a, w).replace(docstring="the program")
    extrace = transform_for_execution(trace, (EagerElementwiseFuser(), "torch"))
    assert extrace.args == trace.args and extrace.docstring == "the program"
    assert extrace.names >= trace.names
    assert [r.name for r in extrace.history] == ["transform_for_execution"]
    assert [e.name for e in extrace.executors][0] == "ew_fuser"
    # replace keeps the execution trace's own fields, and knows them.
    renamed = extrace.replace(fn_name="renamed")
    assert type(renamed) is type(extrace) and renamed.fusion_regions == extrace.fusion_regions
    assert renamed.executors == extrace.executors and renamed.fusion_notes == extrace.fusion_notes
    with pytest.raises(TypeError, match="'fusion'"):
        extrace.replace(fusion=[])


def test_an_independent_op_after_a_non_fusible_one_joins_the_earlier_region() -> None:
    a, w = torch.randn(4, 4), torch.randn(4, 4)

    def f(a: Any, w: Any) -> Any:
        x = prims.exp(a)
        y = prims.matmul(x, w)  # not fusible; z does not depend on it
        z = prims.cos(a)
        return prims.add(y, z), x

    extrace = transform_for_execution(trace_function(f, a, w), (EagerElementwiseFuser(), "torch"))
    check_trace(extrace, rerun_meta=False)
    # exp and cos in one region (not consecutive in the trace); add depends on the matmul.
    assert regions_of(extrace)[0] == ["exp", "cos"]
    out, x = extrace.python_callable()(a, w)
    torch.testing.assert_close(out, torch.exp(a) @ w + torch.cos(a))
    torch.testing.assert_close(x, torch.exp(a))


def test_joining_never_creates_a_cycle_through_a_later_region_ancestor() -> None:
    # r0 = {p}, then m depends on r0; q (indep.) joins r0; s depends on m and must not join r0.
    a = torch.randn(3, 3)

    def f(a: Any) -> Any:
        p = prims.neg(a)
        m = prims.matmul(p, a)
        q = prims.abs(a)
        s = prims.add(m, q)
        return prims.mul(s, p)

    extrace = transform_for_execution(trace_function(f, a), (EagerElementwiseFuser(), "torch"))
    check_trace(extrace, rerun_meta=False)
    assert regions_of(extrace) == [["neg", "abs"], ["add", "mul"]]
    torch.testing.assert_close(extrace.python_callable()(a), ((-a) @ a + a.abs()) * -a)


_UNARY = ["exp", "neg", "sin", "tanh", "abs"]
_BINARY = ["add", "mul", "sub", "maximum"]


def _random_program(rng: random.Random, n_ops: int) -> Any:
    def f(*inputs: Any) -> Any:
        values = list(inputs)
        for _ in range(n_ops):
            kind = rng.random()
            if kind < 0.2:
                values.append(prims.matmul(rng.choice(values), rng.choice(values)))
            elif kind < 0.3:
                v = prims.sum(rng.choice(values), (1,))
                values.append(prims.broadcast_in_dim(v, (4, 4), (0,)))
            elif kind < 0.6:
                values.append(prims.ALL_PRIMS[rng.choice(_UNARY)](rng.choice(values)))
            else:
                values.append(
                    prims.ALL_PRIMS[rng.choice(_BINARY)](rng.choice(values), rng.choice(values))
                )
        return tuple(values[len(inputs) :])

    return f


@pytest.mark.parametrize("seed", range(30))
def test_random_programs_fuse_into_valid_traces_with_the_same_results(seed: int) -> None:
    rng = random.Random(seed)
    inputs = [torch.randn(4, 4) * 0.5 for _ in range(3)]
    trace = trace_function(_random_program(rng, 25), *inputs)
    fused = transform_for_execution(trace, (EagerElementwiseFuser(), "torch"))
    check_trace(fused, rerun_meta=False)
    plain = transform_for_execution(trace)
    for got, want in zip(fused.python_callable()(*inputs), plain.python_callable()(*inputs)):
        torch.testing.assert_close(got, want, equal_nan=True)


def test_in_place_and_random_ops_keep_their_order() -> None:
    a, buf = torch.randn(3), torch.zeros(3)

    def f(a: Any, buf: Any) -> Any:
        before = prims.exp(buf)  # reads buf before the copy
        written = prims.copy_(a, buf)
        after = prims.exp(written)
        r1 = prims.uniform((3,), 0.0, 1.0, device=cpu, dtype=dtypes.float32)
        r2 = prims.uniform((3,), 0.0, 1.0, device=cpu, dtype=dtypes.float32)
        return before, after, r1, r2

    extrace = transform_for_execution(trace_function(f, a, buf), (EagerElementwiseFuser(), "torch"))
    torch.manual_seed(0)
    before, after, r1, r2 = extrace.python_callable()(a, buf)
    torch.testing.assert_close(before, torch.ones(3))
    torch.testing.assert_close(after, torch.exp(a))
    torch.manual_seed(0)
    torch.testing.assert_close((r1, r2), (torch.rand(3), torch.rand(3)))


def _composite_meta(a: Any, b: Any) -> Any:
    return prims.mul(prims.add(a, b), b)


COMPOSITE = Symbol("add_then_mul", _composite_meta, module="testops")


def test_an_unclaimed_composite_runs_as_its_subsymbols() -> None:
    a, b = torch.randn(3), torch.randn(3)
    extrace = transform_for_execution(trace_function(COMPOSITE, a, b))
    text = extrace.python()
    assert "torch.add(t0, t1)" in text and "torch.mul(t2, t1)" in text and "testops" not in text
    torch.testing.assert_close(extrace.python_callable()(a, b), (a + b) * b)


def test_operator_executors_claim_by_priority_and_checkers_can_refuse() -> None:
    fast = OperatorExecutor("fast_composite")
    calls: list[str] = []

    def impl(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        calls.append("fast")
        return (a + b) * b

    # Claims the composite, but only for float64 inputs.
    fast.register_implementation(COMPOSITE, impl, checker=lambda a, b: a.dtype == dtypes.float64)
    x32, x64 = torch.randn(3), torch.randn(3, dtype=torch.float64)

    ex64 = transform_for_execution(trace_function(COMPOSITE, x64, x64), (fast, "torch"))
    assert "fast_composite.add_then_mul(t0, t1)" in ex64.python()
    torch.testing.assert_close(ex64.python_callable()(x64, x64), (x64 + x64) * x64)
    assert calls == ["fast"]

    ex32 = transform_for_execution(trace_function(COMPOSITE, x32, x32), (fast, "torch"))
    assert "fast_composite" not in ex32.python()  # refused by the checker: decomposed instead
    # Listed after torch, the torch executor (which decomposes it) is not asked first: the
    # composite is not a prim, so torch does not claim it and "fast" still gets it.
    ex_order = transform_for_execution(trace_function(COMPOSITE, x64, x64), ("torch", fast))
    assert "fast_composite.add_then_mul" in ex_order.python()


def test_executors_by_name_and_availability() -> None:
    assert get_executor("torch") is torch_executor
    assert get_executor("torchcompile").name == "torchcompile"
    names = {e.name for e in get_available_executors()}
    assert {"torch", "torchcompile"} <= names
    availability = executor_availability()
    assert availability["torch"] == (True, "")
    for name in ("triton", "nvfuser"):
        assert name in availability
        ok, why = availability[name]
        assert ok or why  # unavailable executors say why
    with pytest.raises(KeyError, match="unknown executor"):
        get_executor("no_such_executor")
    from thunder_executors import recommended_executors

    recommended = recommended_executors()
    assert recommended[-2:] == ("torch_ops", "torch")
    assert all(get_executor(n).is_available() for n in recommended)


@pytest.mark.parametrize("name", ["my.fuser", "my-fuser", "2fast", "", "class"])
def test_an_executor_name_that_is_no_identifier_is_refused_at_creation(name: str) -> None:
    # The name is a module name in the generated code: refused when made, not by an internal
    # error (and an eager run) at the first call.
    from thunder_executors.executor import OperatorExecutor
    from thunder_executors.torchcompile import TorchCompileExecutor

    for make in (OperatorExecutor, TorchCompileExecutor):
        with pytest.raises(ValueError, match="Python identifier"):
            make(name)
