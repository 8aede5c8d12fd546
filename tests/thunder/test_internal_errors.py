"""A failure inside thunder's compiler, after tracing, is never the user's crash: the call runs
eagerly (torch's result, its effects once) with an ``InternalErrorWarning`` naming what to
report. The suite itself turns that warning into an error (``tests/conftest.py``)."""

import warnings

import pytest
import torch
from runs_by_torch import call_split

import thunder
import thunder.compile_entry
from thunder.errors import InternalErrorWarning


def _broken_pass(trace):
    raise KeyError("a pass lost a proxy")


SCALE = 3.0


def _program(log):
    def f(x, y):
        log.append(len(log))
        return torch.nn.functional.gelu(x @ y).sum(-1)

    return f


def test_a_failing_pass_runs_the_call_eagerly_with_a_warning(monkeypatch):
    monkeypatch.setattr(thunder.compile_entry, "recognize_composites", _broken_pass)
    log = []
    jf = thunder.jit(_program(log))
    x, y = torch.randn(4, 8), torch.randn(8, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        with pytest.warns(InternalErrorWarning, match="KeyError.*a pass lost a proxy.*report"):
            out = jf(x, y)
    torch.testing.assert_close(out, _program([])(x, y))
    assert log == [0]  # the program's effect happened once: tracing's is undone
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 1
    assert "KeyError" in stats.last_eager_reason
    assert "_broken_pass" in stats.last_eager_reason  # where thunder raised


def test_the_same_inputs_are_not_retraced_on_every_call(monkeypatch):
    calls = []

    def counting(trace):
        calls.append(1)
        raise KeyError("lost")

    monkeypatch.setattr(thunder.compile_entry, "recognize_composites", counting)
    jf = thunder.jit(_program([]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(5):
            x, y = torch.randn(4, 8), torch.randn(8, 3)
            torch.testing.assert_close(jf(x, y), _program([])(x, y))
    assert len(calls) == 1


def test_as_an_error_it_keeps_thunders_traceback(monkeypatch):
    monkeypatch.setattr(thunder.compile_entry, "recognize_composites", _broken_pass)
    jf = thunder.jit(_program([]))
    with warnings.catch_warnings():
        warnings.simplefilter("error", InternalErrorWarning)
        with pytest.raises(InternalErrorWarning) as info:
            jf(torch.randn(2, 8), torch.randn(8, 3))
    assert isinstance(info.value.__cause__, KeyError)


def test_thunders_refusals_run_split_through_torch(monkeypatch):
    # A refusal is not a bug to report: torch runs the program, split, with a warning.
    def refusing(trace):
        raise thunder.errors.JitError("thunder.jit: refused on purpose")

    monkeypatch.setattr(thunder.compile_entry, "recognize_composites", refusing)
    log: list[int] = []
    jf = thunder.jit(_program(log))
    x, y = torch.randn(2, 8), torch.randn(8, 3)
    out = call_split(jf, x, y, match="refused on purpose")
    torch.testing.assert_close(out, _program([])(x, y))
    assert log == [0]  # the program's effect happened once


def test_errors_the_options_ask_for_propagate():
    def reads_a_global(x):
        return x * SCALE

    jf = thunder.jit(reads_a_global, sharp_edges="error")
    with pytest.raises(thunder.errors.SharpEdgeError):
        jf(torch.randn(2))


def test_tracing_while_another_thread_is_importing_dynamo(monkeypatch):
    # A background torch.compile imports torch._dynamo; tracing meanwhile sees the module
    # half-initialized (no is_compiling yet). Found by the warning above, in a fresh process.
    import sys
    import types

    monkeypatch.setitem(sys.modules, "torch._dynamo", types.ModuleType("torch._dynamo"))
    jf = thunder.jit(_program([]))
    x, y = torch.randn(2, 8), torch.randn(8, 3)
    torch.testing.assert_close(jf(x, y), _program([])(x, y))
    assert thunder.compile_stats(jf).eager_fallbacks == 0
