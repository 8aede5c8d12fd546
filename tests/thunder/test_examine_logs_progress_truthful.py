"""What thunder says about a call matches what it did: ``thunder.examine`` lists the torch
fallback's calls as the trace records them and examines a jitted function with its options;
``THUNDER_LOGS`` names the user's line for the graphs of a split call; ``THUNDER_PROGRESS`` says
whether a program was compiled; a recompile reason says what the changed tensor is now."""

import io
import logging
import subprocess
import sys
import time
import warnings

import pytest
import torch
import torch.nn.functional as F

import thunder


def _fallback_names(jitted):
    trace = thunder.last_traces(jitted)[0]
    return {b.args[0] for b in trace.bound_symbols if "torch_fallback" in b.sym.name}


_FALLBACK_CASES = {
    "avg_pool2d_ceil_mode": (lambda x: F.avg_pool2d(x, 3, ceil_mode=True), (1, 2, 5, 5)),
    "repeat_interleave_tensor_repeats": (
        lambda x: x.repeat_interleave(torch.tensor([1, 2, 1])),
        (3,),
    ),
    "cdist": (lambda x: torch.cdist(x, x), (3, 5)),
    "interpolate": (lambda x: F.interpolate(x, scale_factor=2.0, mode="bilinear"), (1, 1, 3, 3)),
}


@pytest.mark.parametrize("name", sorted(_FALLBACK_CASES))
def test_examine_lists_the_fallback_calls_the_trace_records(name):
    fn, shape = _FALLBACK_CASES[name]
    report = thunder.examine(fn, torch.randn(shape), show=False)
    jitted = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(shape, requires_grad=True)
        expected = fn(x)
        actual = jitted(x)
        torch.testing.assert_close(actual, expected)
        grad = torch.randn_like(expected)
        torch.testing.assert_close(
            torch.autograd.grad(actual, x, grad), torch.autograd.grad(expected, x, grad)
        )
    assert set(report.fallback) == _fallback_names(jitted)
    assert not any("has_torch_function" in n for n in (*report.fallback, *report.supported))
    for fallback in report.fallback:  # not listed as supported too
        assert fallback.rpartition(".")[2] not in {n.rpartition(".")[2] for n in report.supported}


SCALE = 2.0


def _reads_a_global(x):
    return x * SCALE


def test_examine_of_a_jitted_function_uses_its_options():
    strict = thunder.jit(_reads_a_global, sharp_edges="error")
    report = thunder.examine(strict, torch.randn(3), show=False)
    assert report.eager_reason and "SCALE" in report.eager_reason
    with pytest.raises(thunder.SharpEdgeError):
        strict(torch.randn(3))
    lenient = thunder.jit(_reads_a_global)
    assert thunder.examine(lenient, torch.randn(3), show=False).eager_reason is None
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(lenient(x), _reads_a_global(x))


@thunder.run_natively
def _native(h):
    return h + 1


def _split(x):
    return _native(x.sin()).cos()


def test_compile_log_of_a_split_call_names_the_users_line():
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    logging.getLogger("thunder").addHandler(handler)
    thunder.set_logs("compiles")
    try:
        jitted = thunder.jit(_split)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for _ in range(3):
                x = torch.randn(3)
                torch.testing.assert_close(jitted(x), _split(x))
    finally:
        thunder.set_logs("")
        logging.getLogger("thunder").removeHandler(handler)
    sites = [line for line in buf.getvalue().splitlines() if "for the call at" in line]
    assert sites
    assert all(__file__ in line and "_dynamo" not in line for line in sites), sites


def _slow_eager(x):
    for i in range(150):  # (a sleep would be a call run natively: the call would run split)
        x = x * 1.01 + i
    g = torch.Generator().manual_seed(0)  # the call runs eagerly
    return x + torch.rand(3, generator=g)


def _slow_split(x):
    time.sleep(0.3)
    return _native(x.sin()).cos()


class _Slow(thunder.Transform):
    def transform_traces_pre_prologue(self, prologue, computation, epilogue):
        time.sleep(0.3)
        return prologue, computation, epilogue


def _progress_lines(capsys, monkeypatch, jitted, fn):
    monkeypatch.setenv("THUNDER_PROGRESS", "1")
    monkeypatch.setenv("THUNDER_PROGRESS_AFTER", "0.01")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = torch.randn(3)
        torch.testing.assert_close(jitted(x), fn(x))
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("[thunder]")]


def test_progress_of_a_call_run_eagerly_says_nothing_was_compiled(capsys, monkeypatch):
    lines = _progress_lines(capsys, monkeypatch, thunder.jit(_slow_eager), _slow_eager)
    assert lines and not any("compiled _slow_eager" in line for line in lines), lines
    assert "was not compiled" in lines[-1] and "eagerly" in lines[-1], lines


def test_progress_of_a_split_call_says_it_ran_split(capsys, monkeypatch):
    lines = _progress_lines(capsys, monkeypatch, thunder.jit(_slow_split), _slow_split)
    assert "ran split" in lines[-1], lines
    assert not any("compiled _slow_split" in line for line in lines), lines


def test_progress_of_a_compiled_call_says_compiled(capsys, monkeypatch):
    def sine(x):
        return torch.sin(x)

    lines = _progress_lines(capsys, monkeypatch, thunder.jit(sine, transforms=[_Slow()]), sine)
    assert "[thunder] compiled" in lines[-1] and "sine in " in lines[-1], lines
    assert "transforms" in lines[-1], lines


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 4))

    def forward(self, x):
        return x @ self.weight.to(x.dtype)


@pytest.mark.parametrize("cache", [None, "symbolic values"])
@pytest.mark.parametrize(
    ("change", "now"),
    [
        (lambda m: m.weight.requires_grad_(False), "requires_grad=False"),
        (lambda m: setattr(m, "weight", torch.nn.Parameter(m.weight.double())), "float64"),
    ],
    ids=["requires_grad", "dtype"],
)
def test_recompile_reason_says_what_the_parameter_is_now(cache, change, now):
    model = _Scaled()
    jitted = thunder.jit(model, **({"cache": cache} if cache else {}))
    x = torch.randn(2, 4, requires_grad=True)
    torch.testing.assert_close(jitted(x), model(x))
    change(model)
    for _ in range(3):
        x = torch.randn(2, 4, requires_grad=True)
        actual, expected = jitted(x), model(x)
        torch.testing.assert_close(actual, expected)
        grad = torch.randn_like(expected)
        torch.testing.assert_close(
            torch.autograd.grad(actual, x, grad), torch.autograd.grad(expected, x, grad)
        )
    reason = thunder.compile_stats(jitted).last_recompile_reason
    assert reason and now in reason.partition("got")[2], reason


_EXIT_DURING_A_BACKGROUND_COMPILE = """
import threading, weakref
from thunder_executors import background_compile

class Holder:
    pass

started = threading.Event()

def busy_in_weakref_callbacks(_examples):  # where an interruption at exit is "ignored"
    def callback(_ref):
        for _ in range(5000):
            pass
    started.set()
    while True:
        held = Holder()
        ref = weakref.ref(held, callback)
        del held

background_compile.submit(busy_in_weakref_callbacks, ())
started.wait(300)
"""


@pytest.mark.slow
def test_exit_during_a_background_compile_prints_nothing():
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_DURING_A_BACKGROUND_COMPILE],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    assert "Exception ignored" not in done.stderr and "_Interrupted" not in done.stderr, done.stderr


def _slow_before_native(x):
    for i in range(150):
        x = x * 1.01 + i
    return _native(x.sin()).cos()


@pytest.mark.parametrize(
    "fn, how",
    [
        (_slow_before_native, "as thunder's own segments"),  # split at a function run natively
        (_slow_split, "by torch.compile"),  # (the sleep: dynamo's split runs it)
    ],
)
def test_progress_of_a_split_call_says_how_it_ran_split(capsys, monkeypatch, fn, how):
    lines = _progress_lines(capsys, monkeypatch, thunder.jit(fn), fn)
    assert f"ran split {how}" in lines[-1], lines
