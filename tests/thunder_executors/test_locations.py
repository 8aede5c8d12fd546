"""The calls an execution trace makes carry the user's line of the op each one runs
(``BoundSymbol.location``), as the torch-language calls they come from do; a fusion region spans
many lines and has none, its members keep theirs."""

from __future__ import annotations

from typing import Any

import torch

import thunder
from thunder_executors import transform_for_execution


def program(x: torch.Tensor, w: torch.Tensor) -> Any:
    y = x * 2  # line 1: torch.mul
    z = torch.nn.functional.gelu(y)  # line 2: torch_ops keeps it whole
    v = z.view(-1)  # line 3: a view, run as torch's own
    x.add_(1)  # line 4: an in-place write, run as torch's own
    return v.sin() @ w, x.sum()  # line 5


def _line(n: int) -> str:
    return f"{__file__}:{program.__code__.co_firstlineno + n}"


_EXPECTED = {
    "mul": _line(1),
    "gelu": _line(2),
    "view": _line(3),
    "add_": _line(4),
    "sin": _line(5),
    "matmul": _line(5),
    "sum": _line(5),
}


def _jitted() -> Any:
    jf = thunder.jit(program)
    x, w = torch.randn(3, 4), torch.randn(12, 2)
    got = jf(x.clone(), w)
    want = program(x.clone(), w)
    for g, e in zip(got, want, strict=True):
        torch.testing.assert_close(g, e)
    return jf


def test_translated_calls_carry_the_users_line() -> None:
    execution = thunder.last_traces(_jitted())[-1]
    located = {b.sym.name: b.location for b in execution.bound_symbols if b.sym.name in _EXPECTED}
    assert located == _EXPECTED, execution


def test_fusion_region_members_carry_the_users_line() -> None:
    before_execution = thunder.last_traces(_jitted())[-2]
    execution = transform_for_execution(before_execution, ("torchcompile", "torch"))
    regions = [b for b in execution.bound_symbols if b.sym.module == "torchcompile"]
    assert regions and all(r.location is None for r in regions), execution
    members = [(s.sym.name, s.location) for r in regions for s in r.subsymbols]
    lines = {**_EXPECTED, "reshape": _line(3)}  # the view, in a region: its decomposition
    assert members and all(line == lines[name] for name, line in members), members
    assert {"mul", "gelu", "sin"} <= {name for name, _ in members}
    written = [b for b in execution.bound_symbols if b.sym.name == "add_"]
    assert [b.location for b in written] == [_line(4)], execution
