"""Fusion regions compiled in the background (``torchcompile_background``, thunder.compile's
choice without nvFuser): the first call does not wait for the compiler, every call matches eager
before and after the compiled program takes over, a failed compile leaves the torch calls
running with a warning, and the process exits cleanly with a compile still running."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

from thunder_executors import background_compile, transform_for_execution
from thunder_executors import torchcompile as tc_module
from thunder_executors.background_compile import Ambient, ExampleInputs
from thunder_executors.torchcompile import TorchCompileExecutor
from thunder_ir import prims, trace_function


def program(a: Any, b: Any) -> Any:
    x = prims.add(a, prims.broadcast_in_dim(b, (8, 16), (1,)))
    return prims.tanh(prims.mul(prims.exp(x), 0.5)), prims.sum(prims.mul(x, x), (1,))


def expected(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = a + b
    return torch.tanh(torch.exp(x) * 0.5), (x * x).sum(1)


def _compiled_callable(name: str) -> tuple[Callable[..., Any], Any]:
    ex = TorchCompileExecutor(name, background=True)
    extrace = transform_for_execution(
        trace_function(program, torch.randn(8, 16), torch.randn(16)), (ex,)
    )
    assert extrace.fusion_regions, extrace.python()
    return extrace.python_callable(), extrace.fusion_regions[0].sym.impl


class _GatedCompile:
    """Stands in for torch.compile: compiling waits until the test opens the gate, and the
    compiled function is recognisable (it counts its calls)."""

    def __init__(self, fail: bool = False, delay: float = 0.0) -> None:
        self.gate = threading.Event()
        self.compiled_calls = 0
        self.fail = fail
        self.delay = delay  # seconds each compiled call takes more than the torch calls
        self.grad_mode_seen: list[bool] = []

    def __call__(self, fn: Callable[..., Any], **options: Any) -> Callable[..., Any]:
        ran = False

        def compiled(*args: Any) -> Any:
            nonlocal ran
            # Its first call is the compile run, in the background thread (whether or not the
            # test opened the gate before the thread got there).
            first, ran = not ran, True
            if first:
                self.grad_mode_seen.append(torch.is_grad_enabled())
                assert self.gate.wait(timeout=60)
                if self.fail:
                    raise RuntimeError("the compiler gave up")
            else:
                self.compiled_calls += 1
                time.sleep(self.delay)
            return fn(*args)

        return compiled


def _stand_in(monkeypatch: Any, gated: _GatedCompile) -> None:
    """The stand-in compiles every region (inductor's direct compile is tested on its own)."""
    monkeypatch.setattr(tc_module, "compile_direct", lambda *args: None)
    monkeypatch.setattr(tc_module.torch, "compile", gated)


def test_first_calls_run_the_torch_calls_while_the_region_compiles(monkeypatch: Any) -> None:
    gated = _GatedCompile()
    _stand_in(monkeypatch, gated)
    fn, region = _compiled_callable("torchcompile_bg_gated")
    assert region.status == "not called"
    for _ in range(3):  # the compiler is blocked: these calls cannot be waiting for it
        a, b = torch.randn(8, 16), torch.randn(16)
        with torch.no_grad():
            torch.testing.assert_close(fn(a, b), expected(a, b))
    assert region.status == "pending" and gated.compiled_calls == 0
    gated.gate.set()
    assert background_compile.wait_for_background_compiles(timeout=60)
    assert region.status == "compiled"
    assert gated.grad_mode_seen == [False]  # compiled under the caller's torch.no_grad()
    a, b = torch.randn(8, 16), torch.randn(16)
    torch.testing.assert_close(fn(a, b), expected(a, b))
    assert gated.compiled_calls == 1  # the compiled program runs from now on


@pytest.mark.parametrize("compiled_is_slower", [False, True])
def test_the_faster_of_compiled_and_torch_calls_runs_once_measured(
    monkeypatch: Any, compiled_is_slower: bool
) -> None:
    # A compiled program slower than the torch calls (dynamo's cost per call over a small
    # region) is measured as such and left; a faster one runs.
    gated = _GatedCompile(delay=0.005 if compiled_is_slower else 0.0)
    gated.gate.set()
    _stand_in(monkeypatch, gated)
    fn, region = _compiled_callable(f"torchcompile_bg_measured_{compiled_is_slower}")
    a, b = torch.randn(8, 16), torch.randn(16)
    fn(a, b)
    assert background_compile.wait_for_background_compiles(timeout=60)
    if not compiled_is_slower:  # the torch calls made slower instead (compiled kept its own)
        torch_calls = region.torch_calls

        def slowed(*args: Any) -> Any:
            time.sleep(0.005)
            return torch_calls(*args)

        region.torch_calls = slowed
    measured = 2 * (region.MEASURED_CALLS + 1)
    for _ in range(measured):
        a, b = torch.randn(8, 16), torch.randn(16)
        torch.testing.assert_close(fn(a, b), expected(a, b))
    assert region.runs_compiled is (not compiled_is_slower)
    before = gated.compiled_calls
    for _ in range(3):
        a, b = torch.randn(8, 16), torch.randn(16)
        torch.testing.assert_close(fn(a, b), expected(a, b))
    assert gated.compiled_calls == before + (0 if compiled_is_slower else 3)
    if compiled_is_slower:
        assert region.status.startswith("compiled; its torch calls measured faster")


def test_no_call_is_measured_while_another_region_compiles(monkeypatch: Any) -> None:
    # The compile thread competes for the CPU: a region compiled first runs its compiled program
    # without timing it until the other compiles are done, then measures.
    gated = _GatedCompile()
    gated.gate.set()
    _stand_in(monkeypatch, gated)
    fn, region = _compiled_callable("torchcompile_bg_measured_after_others")
    a, b = torch.randn(8, 16), torch.randn(16)
    fn(a, b)
    assert background_compile.wait_for_background_compiles(timeout=60)
    other = threading.Event()
    background_compile.submit(lambda examples: other.wait(timeout=60), ())
    before = gated.compiled_calls
    try:
        for _ in range(2 * (region.MEASURED_CALLS + 1) + 3):
            a, b = torch.randn(8, 16), torch.randn(16)
            torch.testing.assert_close(fn(a, b), expected(a, b))
        assert region._times == ([], []) and region.runs_compiled is None
        assert gated.compiled_calls == before + 2 * (region.MEASURED_CALLS + 1) + 3
    finally:
        other.set()
    assert background_compile.wait_for_background_compiles(timeout=60)
    for _ in range(2 * (region.MEASURED_CALLS + 1)):
        a, b = torch.randn(8, 16), torch.randn(16)
        torch.testing.assert_close(fn(a, b), expected(a, b))
    assert region.runs_compiled is not None


def test_a_failed_compile_warns_and_keeps_the_torch_calls(monkeypatch: Any) -> None:
    gated = _GatedCompile(fail=True)
    _stand_in(monkeypatch, gated)
    fn, region = _compiled_callable("torchcompile_bg_failing")
    a, b = torch.randn(8, 16), torch.randn(16)
    torch.testing.assert_close(fn(a, b), expected(a, b))
    with pytest.warns(RuntimeWarning, match="could not compile a fusion region.*gave up"):
        gated.gate.set()
        assert background_compile.wait_for_background_compiles(timeout=60)
    assert region.status.startswith("failed: RuntimeError: the compiler gave up")
    a, b = torch.randn(8, 16), torch.randn(16)
    torch.testing.assert_close(fn(a, b), expected(a, b))
    assert gated.compiled_calls == 0


def test_with_torch_compile_itself() -> None:
    fn, region = _compiled_callable("torchcompile_bg_real")
    a, b = torch.randn(8, 16), torch.randn(16)
    torch.testing.assert_close(fn(a, b), expected(a, b))
    assert background_compile.wait_for_background_compiles(timeout=600)
    assert region.status == "compiled", region.status
    assert region.compile_seconds > 0
    for _ in range(2):
        a, b = torch.randn(8, 16), torch.randn(16)
        torch.testing.assert_close(fn(a, b), expected(a, b))


def test_example_inputs_keep_no_tensor_alive_and_read_no_stale_index() -> None:
    x = torch.randn(4, 6).t()  # strided
    idx = torch.tensor([3, 1])
    examples = ExampleInputs((x, idx, x, 2.5))
    got = examples.materialize()
    # the live float tensor's storage and layout, detached (its autograd state is the caller's);
    # aliases stay aliases
    assert got[0] is not x and got[0].data_ptr() == x.data_ptr() and got[2] is got[0]
    assert got[0].stride() == x.stride() and torch.equal(got[0], x)
    # ones, never zeros: a zero divisor traps compiled integer division (SIGFPE)
    assert got[1] is not idx and torch.equal(got[1], torch.ones(2, dtype=torch.long))
    assert got[3] == 2.5
    del x, got
    revived = examples.materialize()[0]  # the caller dropped it: zeros of the same layout
    assert revived.shape == (6, 4) and revived.stride() == (1, 6) and not revived.any()
    freed = torch.randn(5)
    examples = ExampleInputs((freed,))
    freed.untyped_storage().resize_(0)  # as sharded training frees a gathered parameter
    assert examples.materialize()[0] is not freed


def test_ambient_state_is_carried_to_the_compile_thread() -> None:
    seen: dict[str, Any] = {}
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        ambient = Ambient.of_this_thread()

    def look() -> None:
        with ambient.entered():
            seen["grad"] = torch.is_grad_enabled()
            seen["autocast"] = torch.is_autocast_enabled("cpu")
            seen["dtype"] = torch.get_autocast_dtype("cpu")

    t = threading.Thread(target=look)
    t.start()
    t.join()
    assert seen == {"grad": False, "autocast": True, "dtype": torch.bfloat16}


_EXIT_DURING_COMPILE = textwrap.dedent(
    """
    import time, torch
    from thunder_executors import background_compile

    def busy_compile(_examples):  # torch's C++ taking and releasing the GIL, as inductor does
        a = torch.randn(200, 200)
        end = time.monotonic() + 120
        while time.monotonic() < end:
            a = (a @ a).tanh()

    background_compile.submit(busy_compile, ())
    time.sleep(0.5)
    print("exiting", flush=True)
    """
)


def test_the_process_exits_cleanly_while_a_compile_runs() -> None:
    # Without the interruption at exit the interpreter shuts down under the running thread and
    # the process aborts ("terminate called without an active exception", status 134).
    done = subprocess.run(
        [sys.executable, "-c", _EXIT_DURING_COMPILE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "exiting" and "terminate" not in done.stderr


_IDLE_COMPILE_THREAD = textwrap.dedent(
    """
    import os, threading, time
    import torch
    from thunder_executors import background_compile
    from thunder_executors.background_compile import import_compile_stack

    def os_threads():
        return len(os.listdir("/proc/self/task"))

    import_compile_stack()
    torch.mm(torch.randn(256, 256), torch.randn(256, 256))  # this thread's OpenMP team
    before = os_threads()
    ran = []

    def job(examples):
        ran.append(threading.current_thread())
        torch.mm(torch.randn(256, 256), torch.randn(256, 256))  # a team of the compile thread

    for _ in range(2):  # a job after the thread ended starts another
        background_compile.submit(job, ())
        assert background_compile.wait_for_background_compiles(timeout=60)
        ran[-1].join(timeout=60)
        assert not ran[-1].is_alive(), "the compile thread outlived its queue"
        deadline = time.monotonic() + 30  # (the OS's threads end after Python's)
        while os_threads() != before and time.monotonic() < deadline:
            time.sleep(0.01)
        assert os_threads() == before, (os_threads(), before)
    assert len(ran) == 2 and ran[0] is not ran[1]
    print("ok", flush=True)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts threads in /proc")
def test_the_compile_thread_and_its_openmp_threads_end_when_nothing_is_queued() -> None:
    # While a thread that ran a parallel op lives, so do its OpenMP threads: with more of them
    # than cores, the program's own OpenMP threads sleep between parallel regions and its small
    # ops ran up to twice as slow for as long as the process lived. Fresh process: the count of
    # the OS's threads is this program's alone.
    done = subprocess.run(
        [sys.executable, "-c", _IDLE_COMPILE_THREAD], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


def _fx_patch_held_by_a_compile() -> threading.Event:
    """While a background compile runs, another of the program's threads holds torch.fx's
    tracer's patch of nn.Module's methods (as its make_fx does while it traces) until the
    returned event is set. (The compile thread's own traces patch nothing:
    ``compile_thread_isolation.thread_private_fx_tracing``.)"""
    from torch.fx.experimental.proxy_tensor import make_fx

    compiling, inside, release = threading.Event(), threading.Event(), threading.Event()
    traced_done = threading.Event()

    def compile_job(_: Any) -> None:
        compiling.set()
        traced_done.wait(timeout=60)  # the compile runs until the patch is gone

    def trace() -> None:
        try:
            make_fx(traced, tracing_mode="fake")(torch.randn(3))
        finally:
            traced_done.set()

    def traced(x: torch.Tensor) -> torch.Tensor:
        inside.set()
        assert release.wait(timeout=60)
        return x * 2

    background_compile.submit(compile_job, ())
    assert compiling.wait(timeout=60)
    threading.Thread(target=trace, daemon=True).start()
    assert inside.wait(timeout=60)
    assert background_compile.fx_tracer_patching()
    return release


def test_a_call_during_a_compiles_fx_patch_waits_for_it_and_recompiles_nothing() -> None:
    import thunder

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    jm = thunder.jit(model)
    x = torch.randn(3, 4)
    torch.testing.assert_close(jm(x), model(x))
    other = torch.nn.Sequential(torch.nn.Linear(4, 4))
    fresh = thunder.jit(other)
    release = _fx_patch_held_by_a_compile()
    results: dict[str, Any] = {}

    def call() -> None:
        results["cached"] = jm(x)  # its guards read nn.Module.__call__: it waits for the patch
        results["traced"] = fresh(x)  # traced after it, not through the tracer's stand-ins

    caller = threading.Thread(target=call)
    caller.start()
    try:
        caller.join(timeout=0.5)
        assert caller.is_alive()  # waiting, not failing or retracing under the patch
    finally:
        release.set()
    caller.join(timeout=60)
    assert background_compile.wait_for_background_compiles(timeout=60)
    torch.testing.assert_close(results["cached"], model(x))
    torch.testing.assert_close(results["traced"], other(x))
    assert thunder.compile_stats(jm).cache_misses == 1
    for _ in range(2):  # its program's guards hold now the tracer is done
        torch.testing.assert_close(fresh(x), other(x))
    assert thunder.compile_stats(fresh).cache_misses == 1


def test_lookups_tell_the_fx_tracers_stand_ins_from_a_replaced_method() -> None:
    from thunder.guards import Lookups, PatchedByFxTracer
    from thunder_ir.prims.prologue import GuardFailure

    class Holder:
        def method(self) -> int:
            return 1

    module_call = (torch.nn.Module, "__call__", torch.nn.Module.__call__)
    lookups = Lookups([(Holder, "method", Holder.method), module_call])
    lookups.check()
    release = _fx_patch_held_by_a_compile()
    try:
        with pytest.raises(PatchedByFxTracer):
            lookups.check()
        traced_under_patch = Lookups([(torch.nn.Module, "__call__", torch.nn.Module.__call__)])
    finally:
        release.set()
        assert background_compile.wait_for_background_compiles(timeout=60)
    with pytest.raises(PatchedByFxTracer):
        traced_under_patch.check()
    original = Holder.method
    Holder.method = lambda self: 2  # type: ignore[method-assign]
    try:
        with pytest.raises(GuardFailure) as failure:
            lookups.check()
        assert not isinstance(failure.value, PatchedByFxTracer)
    finally:
        Holder.method = original  # type: ignore[method-assign]
