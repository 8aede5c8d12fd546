"""The prologue's fast forms (submodules and parameters read from the module's dicts, reads and
checks inlined) decide exactly what the ordinary forms decide: every change recompiles or
raises as eager does, never a stale result."""

from __future__ import annotations

import pytest
import torch

import thunder


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.scale = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.scale


def _check(jm: torch.nn.Module, m: torch.nn.Module) -> None:
    x = torch.randn(3, 4)
    torch.testing.assert_close(jm(x), m(x))


def test_prologue_reads_members_directly_and_inlines_checks() -> None:
    m = Net()
    jm = thunder.jit(m)
    _check(jm, m)
    source = str(thunder.last_prologue_traces(jm)[-1])
    assert "thunder_guards.unpack_module_attr(fn, 'lin')" in source
    assert "if type(" in source and "prims.check_value(" in source  # inline test, failing call


def test_replaced_submodule_and_parameter_recompile() -> None:
    m = Net()
    jm = thunder.jit(m)
    _check(jm, m)
    m.lin = torch.nn.Linear(4, 4)
    _check(jm, m)
    m.lin.weight = torch.nn.Parameter(torch.randn(4, 4))
    _check(jm, m)
    m.lin.bias = None
    _check(jm, m)
    # New modules and weights of the same metadata are read afresh without compiling again.
    assert thunder.compile_stats(jm).compilations == 2


def test_instance_dict_shadowing_a_submodule_is_read_like_getattr() -> None:
    m = Net()
    jm = thunder.jit(m)
    _check(jm, m)
    other = torch.nn.Linear(4, 4)
    m.__dict__["lin"] = other  # bypasses Module.__setattr__: plain lookup now finds this one
    assert m.lin is other
    _check(jm, m)


def test_deleted_attribute_raises_as_eager() -> None:
    m = Net()
    jm = thunder.jit(m)
    _check(jm, m)
    del m.scale
    with pytest.raises(AttributeError, match="scale"):
        m(torch.randn(3, 4))
    with pytest.raises(AttributeError, match="scale"):
        jm(torch.randn(3, 4))
    m.scale = 3.0
    _check(jm, m)


def test_changed_plain_values_recompile() -> None:
    m = Net()
    jm = thunder.jit(m)
    _check(jm, m)
    for value in (3, 2.5, True):
        m.scale = value
        _check(jm, m)
