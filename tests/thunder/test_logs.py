"""``THUNDER_LOGS`` / ``thunder.set_logs``: what thunder does, through ``logging``, at the user's
lines; the short summary ``compile_stats`` prints; the progress of a long compile."""

import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

import thunder
from thunder.logs import CHANNELS


@pytest.fixture
def logs(caplog):
    yield caplog
    thunder.set_logs("")


def _messages(caplog, channel):
    return [r.getMessage() for r in caplog.records if r.name == f"thunder.{channel}"]


def _decide(x):
    return x * 2 if x.sum() > 0 else x - 1


def _line_of(marker: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line)


def test_recompiles_say_why_at_the_users_line(logs):
    thunder.set_logs("recompiles")
    jf = thunder.jit(lambda x: x.sin())
    jf(torch.randn(3))
    jf(torch.randn(5))  # CALL-5
    (message,) = _messages(logs, "recompiles")
    assert f"{__file__}:{_line_of('# CALL-5')}" in message
    assert "(3,) -> (5,)" in message
    assert _messages(logs, "compiles") == []  # only the channels asked for


def test_compiles_guards_fallbacks_traces_and_data(logs):
    thunder.set_logs("all")
    jf = thunder.jit(_decide, recompile_limit=2)
    jf(torch.ones(3))
    jf(torch.ones(4))
    with pytest.warns(UserWarning, match="recompile limit"):
        jf(-torch.ones(4))  # CALL-GUARD
    compiles = _messages(logs, "compiles")
    assert len(compiles) == 2 and all(
        "compiled in" in m and "interpretation" in m for m in compiles
    )
    guards = _messages(logs, "guards")
    assert any(f":{_line_of('# CALL-GUARD')}" in m and "decision on data" in m for m in guards)
    fallbacks = _messages(logs, "fallbacks")
    assert any("recompile limit (2)" in m for m in fallbacks)
    traces = "\n".join(_messages(logs, "traces"))
    assert "execution trace" in traces and "def computation" in traces
    assert any("decides" in m for m in _messages(logs, "data"))


def test_a_call_that_runs_eagerly_is_logged_with_its_reason(logs):
    thunder.set_logs(fallbacks=True)

    def f(x):
        x.sum().backward()
        return x * 2

    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jf(torch.ones(2, requires_grad=True))
    (message,) = _messages(logs, "fallbacks")
    assert "torch.autograd.backward" in message and __file__ in message


def test_a_call_split_around_a_native_function_is_logged_with_its_reason(logs):
    thunder.set_logs(splits=True)

    @torch.compiler.disable
    def helper(x):
        return x + 1

    jf = thunder.jit(lambda x: helper(x) * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jf(torch.ones(2))
    (message,) = _messages(logs, "splits")
    assert "torch.compiler.disable" in message and __file__ in message
    assert not _messages(logs, "fallbacks")


def test_a_modules_calls_are_the_users_lines(logs):
    thunder.set_logs("compiles")
    jm = thunder.jit(torch.nn.Linear(3, 2))
    jm(torch.randn(4, 3))  # CALL-MODULE
    (message,) = _messages(logs, "compiles")
    assert f"{__file__}:{_line_of('# CALL-MODULE')}" in message


def test_the_recompile_limit_warning_names_the_users_line():
    jf = thunder.jit(lambda x: x + 1, recompile_limit=1)
    jf(torch.ones(1))
    with pytest.warns(UserWarning, match="recompile limit") as record:
        jf(torch.ones(2))
    assert record[0].filename == __file__


def test_unknown_channels_are_an_error_that_lists_them():
    with pytest.raises(ValueError, match="recompiles"):
        thunder.set_logs("recompile")
    with pytest.raises(ValueError, match="unknown channel 'shapes'"):
        thunder.set_logs(shapes=True)


def test_the_environment_variable_switches_channels_on():
    script = textwrap.dedent(
        """
        import torch, thunder
        f = thunder.jit(lambda x: x.cos())
        f(torch.ones(2)); f(torch.ones(3))
        """
    )
    env = {**os.environ, "THUNDER_LOGS": "recompiles"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert "[thunder.recompiles]" in done.stderr and "(2,) -> (3,)" in done.stderr
    assert "[thunder.compiles]" not in done.stderr
    assert set(CHANNELS) >= {"recompiles", "guards", "fallbacks", "traces"}


def test_compile_stats_print_a_short_summary():
    jm = thunder.jit(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.GELU()))
    jm(torch.randn(2, 4, requires_grad=True)).sum().backward()
    jm(torch.randn(3, 4))
    stats = thunder.compile_stats(jm)
    text = repr(stats)
    assert len(text.splitlines()) <= 6
    assert "compilations=2" in text and "(2, 4) -> (3, 4)" in text
    assert ".last_traces" in text and "def computation" not in text
    assert stats.last_traces  # the traces are its attributes


_SLOW_COMPILE = textwrap.dedent(
    """
    import time, torch, thunder

    class Slow(thunder.Transform):
        def transform_traces_pre_prologue(self, prologue, computation, epilogue):
            time.sleep(0.8)
            return prologue, computation, epilogue

    f = thunder.jit(lambda x: x.sin() * 2, transforms=[Slow()])
    f(torch.ones(3))
    f(torch.ones(3))
    """
)


@pytest.mark.parametrize(("switch", "shown"), [("1", True), ("0", False)])
def test_a_long_compile_shows_its_progress_on_stderr(switch, shown):
    env = {**os.environ, "THUNDER_PROGRESS": switch, "THUNDER_PROGRESS_AFTER": "0.2"}
    done = subprocess.run(
        [sys.executable, "-c", _SLOW_COMPILE], env=env, capture_output=True, text=True, check=True
    )
    lines = done.stderr.splitlines()
    progress = [line for line in lines if line.startswith("[thunder] compiling <lambda>: ")]
    finished = [line for line in lines if line.startswith("[thunder] compiled <lambda> in ")]
    if shown:
        assert progress and "transforms" in progress[0]
        assert len(finished) == 1 and "transforms" in finished[0]  # once: a cache hit after
    else:
        assert progress == [] and finished == []


def test_a_short_compile_shows_nothing():
    # A user's settings: the suite's guard-tree settings (conftest.py) build the tree on the
    # first call, which imports torch._dynamo (2-3 s here) inside that call's timer.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("THUNDER_GUARD_TREE_AFTER", "THUNDER_VERIFY_GUARD_TREE")
    }
    env["THUNDER_PROGRESS"] = "1"
    script = "import torch, thunder; thunder.jit(lambda x: x + 1)(torch.ones(2))"
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert "[thunder]" not in done.stderr


def test_compile_stats_count_the_fusion_regions_compile_time():
    # Regions compile on their first call or in the background: their time is the execution
    # traces' (ExecutionTrace.compile_seconds), forward and backward, summed when asked.
    class Compiled:
        def __init__(self, seconds):
            self.seconds = seconds

        def compile_seconds(self):
            return self.seconds

    stats = thunder.CompileStats(
        compilations=1,
        last_traces=[object(), Compiled(2.5)],
        last_backward_traces=[Compiled(1.25)],
        last_timings={"interpretation": 0.5, "total": 0.5},
        last_compile_seconds=0.5,
    )
    assert stats.fusion_compile_seconds == 3.75
    assert "fusion regions 3.750 s so far" in repr(stats)
