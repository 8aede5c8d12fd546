"""Editing traces without assigning their fields (``Trace.replace``, ``rerecord``, ``nested``),
bound symbols' source locations, and the IR's typed refusal of options it does not implement."""

from __future__ import annotations

import pytest
import torch

from thunder_ir import (
    PassRecord,
    Trace,
    UnsupportedOptionError,
    get_tracectx,
    prims,
    trace_function,
)
from thunder_ir import ops as ltorch
from thunder_ir.symbol import leaf_prims


def _program(x: torch.Tensor) -> torch.Tensor:
    y = ltorch.mul(x, 2.0)  # the line of y
    return ltorch.gelu(y)  # the line of the gelu


def _line_of(marker: str) -> int:
    import inspect

    lines, first = inspect.getsourcelines(_program)
    return first + next(i for i, line in enumerate(lines) if marker in line)


def _trace() -> Trace:
    return trace_function(_program, torch.randn(3))


def test_replace_changes_fields_and_keeps_the_rest() -> None:
    t = _trace()
    t2 = t.replace(fn_name="renamed", docstring="doc", history=(PassRecord("p", 0.1),))
    assert t2 is not t and t2.fn_name == "renamed" and t2.docstring == "doc"
    assert t2.args == t.args and t2.bound_symbols == t.bound_symbols
    assert t2.history == (PassRecord("p", 0.1),) and t.fn_name == "computation"
    assert '"""doc"""' in t2.python() and "def renamed(" in t2.python()
    assert t.docstring == "" and t.history == ()  # the original is untouched


def test_replace_rejects_unknown_fields() -> None:
    t = _trace()
    with pytest.raises(TypeError, match="'arguments'"):
        t.replace(arguments=())
    with pytest.raises(TypeError, match="_counters"):
        t.replace(_counters={})


def test_replace_copies_the_namespace() -> None:
    t = _trace()
    t2 = t.replace()
    assert t2.names == t.names and t2.names is not t.names
    made = t2.make_name("t")
    assert made not in t.names  # the copy's counters continue past the original's names
    assert made not in {p.name for b in t.bound_symbols for p in b.flat_proxy_outs}


def test_derive_keeps_names_constraints_and_records_the_pass() -> None:
    t = _trace()
    d = t.derive(t.bound_symbols[:-1], pass_name="drop", seconds=0.25)
    assert d.history[-1] == PassRecord("drop", 0.25) and d.args == t.args
    assert d.names == t.names and len(d.bound_symbols) == len(t.bound_symbols) - 1


def test_rerecord_records_a_new_version_under_the_pass_name() -> None:
    t = _trace()
    with t.rerecord("double") as new:
        assert get_tracectx() is new
        (x,) = new.args
        out = ltorch.mul(x, 4.0)  # fresh names: the namespace continues the original's
        prims.python_return(out)
    assert get_tracectx() is None
    assert new.args == t.args and new.fn_name == t.fn_name
    assert new.history[-1].name == "double" and new.history[:-1] == t.history
    assert out.name not in t.names
    assert [b.sym for b in new.bound_symbols] == [ltorch.mul, prims.python_return]


def test_nested_shares_the_namespace() -> None:
    outer = Trace()
    sub = outer.nested("sub")
    name = sub.make_name("t")
    assert name in outer.names and outer.make_name("t") != name


def test_bound_symbols_carry_the_users_line() -> None:
    t = _trace()
    here = __file__
    mul, gelu, _ = t.bound_symbols
    assert mul.location == f"{here}:{_line_of('the line of y')}"
    assert gelu.location == f"{here}:{_line_of('the line of the gelu')}"
    # The calls a composite decomposes into share its line; replace keeps it.
    assert gelu.subsymbols and all(s.location == gelu.location for s in leaf_prims(gelu))
    assert gelu.replace(header="h").location == gelu.location
    assert gelu.where() == f" at {gelu.location}"
    assert mul.replace(location=None).where() == ""


def test_leaf_prims_are_the_decompositions_leaves_in_order() -> None:
    t = _trace()
    gelu = t.bound_symbols[1]
    leaves = leaf_prims(gelu)
    assert leaves and all(not b.subsymbols for b in leaves)
    assert leaf_prims(t.bound_symbols[0].subsymbols[0]) == [t.bound_symbols[0].subsymbols[0]]


def test_an_op_refusing_an_option_raises_a_typed_refusal() -> None:
    def reflect(x: torch.Tensor) -> torch.Tensor:
        return ltorch.pad(x, (1, 1), mode="reflect")

    with pytest.raises(UnsupportedOptionError, match="mode='reflect'") as info:
        trace_function(reflect, torch.randn(2, 3))
    assert isinstance(info.value, NotImplementedError)  # what eager code catches still catches it
