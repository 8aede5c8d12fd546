"""The consistency table: every op, traced into IR, executed by the torch executor, equals torch on
fresh random inputs; error inputs raise an error like torch's."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

import thunder_ir
from opinfos import ALL_OPINFOS, OpInfo, SampleInput
from thunder_executors import transform_for_execution
from thunder_ir import check_trace, trace_function

CASES = [(oi, dt) for oi in ALL_OPINFOS for dt in oi.dtypes]


def _id(case: tuple[OpInfo, torch.dtype]) -> str:
    oi, dt = case
    return f"{oi.name}-{str(dt).removeprefix('torch.')}"


def run_traced(oi: OpInfo, sample: SampleInput) -> tuple[Any, thunder_ir.Trace]:
    trace = trace_function(lambda *a, **k: oi.op(*a, **k), *sample.args, **sample.kwargs)
    check_trace(trace)
    # Decompositions are what this checks: views and in-place ops are not run as torch's own.
    extrace = transform_for_execution(trace, eager_aliasing=False)
    fn = extrace.python_callable()
    tensors = [x for x in _leaves((sample.args, sample.kwargs)) if isinstance(x, torch.Tensor)]
    return fn(*tensors), extrace


def _leaves(x: Any) -> list[Any]:
    from thunder_ir.pytree import tree_flatten

    return tree_flatten(x)[0]


def _tolerances(oi: OpInfo, dtype: torch.dtype) -> dict[str, float]:
    if oi.atol is not None or oi.rtol is not None:
        return {"atol": oi.atol or 0.0, "rtol": oi.rtol or 0.0}
    if dtype in (torch.bfloat16, torch.float16):
        return {"atol": 1e-2, "rtol": 1.6e-2}
    return {}


def _clone(sample: SampleInput) -> SampleInput:
    from thunder_ir.pytree import tree_map

    def c(x: Any) -> Any:
        return x.detach().clone() if isinstance(x, torch.Tensor) else x

    return SampleInput(tree_map(c, sample.args), tree_map(c, sample.kwargs), sample.name)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_op_matches_torch(case: tuple[OpInfo, torch.dtype]) -> None:
    oi, dtype = case
    # Twice: fresh random inputs each time (the second draw is a new sample set).
    for _ in range(2):
        samples = list(oi.sample_inputs(dtype, False))
        assert samples, f"{oi.name} has no samples for {dtype}"
        for sample in samples:
            expected = oi.ref(*_clone(sample).args, **_clone(sample).kwargs)
            got, extrace = run_traced(oi, _clone(sample))
            try:
                if oi.compare is not None:
                    oi.compare(got, expected)
                else:
                    torch.testing.assert_close(
                        got, expected, equal_nan=True, **_tolerances(oi, dtype)
                    )
            except AssertionError as e:
                raise AssertionError(f"{oi.name} on {sample}:\n{e}\n{extrace.python()}") from None


ERROR_CASES = [
    (oi, i, ei) for oi in ALL_OPINFOS if oi.error_inputs for i, ei in enumerate(oi.error_inputs())
]


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda c: f"{c[0].name}-{c[1]}")
def test_op_error_inputs(case: Any) -> None:
    oi, _, ei = case
    # torch itself rejects the input, with a message of the same kind.
    with pytest.raises(Exception) as torch_err:
        oi.ref(*ei.sample.args, **ei.sample.kwargs)
    with pytest.raises(ei.exc_type) as err:
        run_traced(oi, ei.sample)
    assert re.search(ei.match, str(err.value)), (
        f"message {str(err.value)!r} does not match {ei.match!r}"
    )
    del torch_err


def test_consistency_table_covers_at_least_150_torch_callables() -> None:
    covered = {name for oi in ALL_OPINFOS for name in oi.torch_names}
    resolvable = {n for n in covered if thunder_ir.ops.resolve_torch_name(n) is not None}
    assert len(resolvable) >= 150, f"only {len(resolvable)} torch callables in the table"
