"""The verifier catches broken traces."""

from __future__ import annotations

import pytest
import torch

from thunder_ir import Trace, TraceCheckError, check_trace, dtypes, prims, trace_function, tracectx
from thunder_ir import ops as ltorch
from thunder_ir.proxies import TensorProxy


def _trace() -> Trace:
    return trace_function(
        lambda a, b: ltorch.mul(ltorch.add(a, b), a), torch.randn(2, 3), torch.randn(2, 3)
    )


def test_accepts_a_recorded_trace() -> None:
    check_trace(_trace())


def test_use_before_definition() -> None:
    t = _trace()
    bad = t.derive([t.bound_symbols[1], t.bound_symbols[0], t.bound_symbols[2]], pass_name="swap")
    with pytest.raises(TraceCheckError, match="before it is defined"):
        check_trace(bad)


def test_defined_twice() -> None:
    t = _trace()
    bad = t.derive([t.bound_symbols[0], t.bound_symbols[0], *t.bound_symbols[1:]], pass_name="dup")
    with pytest.raises(TraceCheckError, match="already defined"):
        check_trace(bad)


def test_missing_return() -> None:
    t = _trace()
    with pytest.raises(TraceCheckError, match="does not end in a return"):
        check_trace(t.derive(t.bound_symbols[:-1], pass_name="drop_return"))


def test_metadata_disagrees_with_meta() -> None:
    t = Trace()
    with tracectx(t):
        a = TensorProxy(shape=(2, 3), dtype=dtypes.float32, device="cpu")
        t.args = (a,)
        wrong = TensorProxy(shape=(3,), dtype=dtypes.float32, device="cpu")
        t.bound_symbols.append(prims.sum.bind(a, (1,), output=wrong))
        prims.python_return(wrong)
    with pytest.raises(TraceCheckError, match="disagree with its meta function"):
        check_trace(t)


def test_inconsistent_metadata_for_a_name() -> None:
    t = Trace()
    with tracectx(t):
        a = TensorProxy(shape=(2,), dtype=dtypes.float32, device="cpu")
        t.args = (a,)
    impostor = TensorProxy("t0", shape=(5,), dtype=dtypes.float32, device="cpu")
    with tracectx(t):
        out = prims.neg(impostor)
        prims.python_return(out)
    with pytest.raises(TraceCheckError, match="with metadata"):
        check_trace(t)


def test_derive_records_the_pass() -> None:
    t = _trace().derive(_trace().bound_symbols, pass_name="identity", seconds=0.5)
    assert t.history[-1].name == "identity" and t.history[-1].seconds == 0.5
    assert t.python().startswith("# produced by: identity")
