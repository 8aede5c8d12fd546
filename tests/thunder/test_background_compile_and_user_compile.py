"""The program's own torch.compile, make_fx and FX tracing keep working while thunder.compile's
background thread imports torch's compile stack or compiles a region, whatever the timing.

Two kinds of process-wide state leaked from the compile thread: the first import of
torch._dynamo/torch._inductor (a user's torch.compile on the main thread meanwhile raised
"cannot import name ... from partially initialized module" or a _DeadlockError, and the compile
thread's import failed too), and torch.fx's tracing state (a user's compiled function raised
"Detected that you are using FX to symbolically trace a dynamo-optimized function" while a region
traced; a region compiled on the main thread meanwhile ran uncompiled). The windows are forced
here: the compile thread (or a user thread) is held inside an import or a trace while the other
side runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Iterator
from typing import Any, NamedTuple

import pytest
import torch
import torch._dynamo  # noqa: F401  (the imports are tested in fresh processes below)
import torch._inductor.compile_fx  # noqa: F401
from torch.fx.experimental.proxy_tensor import PythonKeyTracer, make_fx

import thunder
from thunder.recipes import default_executors
from thunder_executors import background_compile

_FRESH_ENV = {k: v for k, v in os.environ.items() if not k.startswith("THUNDER_")}


def _run_fresh(program: str, **env: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**_FRESH_ENV, **env},
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), (
        done.stdout[-2000:] + done.stderr[-4000:]
    )


_CHECKS = """
import sys, threading, time, warnings
import torch, thunder
from thunder_executors.background_compile import wait_for_background_compiles

torch.testing.assert_close(torch.ones(1), torch.ones(1))  # its own first imports, done now
seen = []
warnings.simplefilter("always")
warnings.showwarning = lambda m, *a, **k: seen.append(str(m))

def region(x, w):
    return (x * w).sin().cos() + x

def user(x):
    return (x.sin() * 2).cos()

def check_user_compile(g):
    for _ in range(3):
        x = torch.randn(5)
        torch.testing.assert_close(g(x), user(x))

def check_thunder(f):
    for i in range(3):
        x, w = torch.randn(4 + i, 8), torch.randn(8)
        torch.testing.assert_close(f(x, w), region(x, w))

def start_user_compile():
    # The user's torch.compile on a thread of its own ("user-thread"): the thread and its errors.
    errors = []
    def run():
        try:
            check_user_compile(torch.compile(user))
        except BaseException as e:
            errors.append(e)
    t = threading.Thread(target=run, name="user-thread")
    t.start()
    return t, errors

class HoldImport:
    # Holds a thread inside the import of `name` once: until `other` is set (`patience` seconds
    # at most), then for `seconds`.
    def __init__(self, name, thread_name, seconds=0.0, other=None, patience=300.0):
        self.name, self.thread_name, self.seconds = name, thread_name, seconds
        self.other, self.patience = other, patience
        self.inside = threading.Event()
    def find_spec(self, name, path=None, target=None):
        if (name == self.name and threading.current_thread().name == self.thread_name
                and not self.inside.is_set()):
            self.inside.set()
            if self.other is not None:
                self.other.wait(self.patience)
            time.sleep(self.seconds)
        return None
"""


# The interleaving that deadlocked: the compile thread is inside torch._dynamo's import; the
# user's torch.compile imports inductor's modules (torch._dynamo is in sys.modules, half
# initialized, so its submodules import) and holds torch._inductor.utils while the compile thread
# asks for one of them; then it asks for torch._dynamo and Python finds the cycle.


def test_user_torch_compile_while_the_compile_thread_imports_dynamo() -> None:
    _run_fresh(
        _CHECKS
        + """
user_starts = threading.Event()
in_user = HoldImport("torch._inductor.analysis", "MainThread", seconds=2.0)
in_compile_thread = HoldImport(
    "torch._dynamo.config", "thunder-compile", seconds=0.2, other=user_starts
)
sys.meta_path[:0] = [in_user, in_compile_thread]
f = thunder.compile(region)
x, w = torch.randn(4, 8), torch.randn(8)
torch.testing.assert_close(f(x, w), region(x, w))  # the compile thread starts importing
assert in_compile_thread.inside.wait(300), "the compile thread never imported dynamo's config"
user_starts.set()
check_user_compile(torch.compile(user))  # while the compile thread is inside the import
assert wait_for_background_compiles(300)
check_thunder(f)
assert not [s for s in seen if "could not compile" in s], seen
print("OK")
"""
    )


def test_thunder_compile_while_a_user_thread_imports_inductor() -> None:
    _run_fresh(
        _CHECKS
        + """
in_compile_thread = HoldImport("torch._dynamo.config", "thunder-compile", seconds=1.0)
in_user = HoldImport(
    "torch._inductor.utils", "user-thread", other=in_compile_thread.inside, patience=3.0
)
sys.meta_path[:0] = [in_user, in_compile_thread]
t, errors = start_user_compile()
assert in_user.inside.wait(300), "the user thread never imported torch._inductor.utils"
f = thunder.compile(region)
check_thunder(f)  # the compile thread's import starts while the user thread's runs
t.join(300)
assert not errors, errors
assert wait_for_background_compiles(300)
check_thunder(f)
assert not [s for s in seen if "could not compile" in s], seen
print("OK")
"""
    )


def test_user_and_thunder_compiles_register_inductors_patterns_in_turn() -> None:
    # Inductor registers its post-grad patterns on a compile's first use of them: a user's
    # first torch.compile and the compile thread's both ran that registration, and the second
    # to register a pattern failed its compile ("Duplicate pattern"). Here the user's thread is
    # held inside the registration until the compile thread registers too (or 5 s went by).
    _run_fresh(
        _CHECKS
        + """
import torch._inductor.fx_passes.post_grad as post_grad
user_inside, compile_thread_inside, failed = threading.Event(), threading.Event(), []
register = post_grad.register_replacement
def held_register(*args, **kwargs):
    name = threading.current_thread().name
    if name == "thunder-compile":
        compile_thread_inside.set()
    elif name == "user-thread" and not user_inside.is_set():
        user_inside.set()
        if compile_thread_inside.wait(5.0):
            time.sleep(1.0)  # the compile thread's registration runs meanwhile
    try:
        return register(*args, **kwargs)
    except Exception as e:
        failed.append((name, e))
        raise
post_grad.register_replacement = held_register
t, errors = start_user_compile()
assert user_inside.wait(300), "the user's compile never registered inductor's patterns"
f = thunder.compile(region)
check_thunder(f)  # the compile thread compiles while the user's thread registers
t.join(300)
assert not errors, errors
assert wait_for_background_compiles(300)
check_thunder(f)
assert not failed, failed
assert not [s for s in seen if "could not compile" in s], seen
print("OK")
""",
        # A compile served from the on-disk caches registers nothing (set in the environment:
        # torch's compiler configs set in code are the setting thread's own).
        TORCHINDUCTOR_FORCE_DISABLE_CACHES="1",
    )


def test_first_imports_of_unrelated_modules_are_not_serialized() -> None:
    # Only torch's own modules take turns; a user's other imports never wait for them.
    from thunder_executors import compile_thread_isolation as iso

    assert iso._serialized("torch._inductor.utils") and iso._serialized("functorch")
    assert not iso._serialized("torchvision") and not iso._serialized("numpy.linalg")


# ---------------------------------------------------------------------------------------------
# FX tracing while a region compiles


_eps = iter(range(1, 1000))


def _block() -> Any:
    """A region of its own (the compiled regions are shared by source: one already compiled
    would not be compiled again)."""
    eps = next(_eps) * 1e-6

    def blk(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w
        return torch.nn.functional.silu(h) + x

    return blk


def _user(x: torch.Tensor) -> torch.Tensor:
    return (x.sin() * 2).cos()


class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(6, 6)
        self.b = torch.nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


class _HeldTrace(NamedTuple):
    inside: threading.Event  # set once the compile thread is held
    release: threading.Event  # set to let it go on


@pytest.fixture
def compile_thread_held_in_a_trace(monkeypatch: pytest.MonkeyPatch) -> Iterator[_HeldTrace]:
    """Holds the compile thread inside its first FX trace until released (at the latest when the
    test is done, or after 120 s)."""
    assert background_compile.wait_for_background_compiles(300)
    inside, release = threading.Event(), threading.Event()
    create_arg = PythonKeyTracer.create_arg

    def holding_create_arg(self: Any, a: Any) -> Any:
        if threading.current_thread().name == "thunder-compile" and not inside.is_set():
            inside.set()
            release.wait(120)
        return create_arg(self, a)

    monkeypatch.setattr(PythonKeyTracer, "create_arg", holding_create_arg)
    # A compile served from torch's on-disk caches would not trace.
    no_caches = (
        torch._inductor.config.patch(fx_graph_cache=False),
        torch._functorch.config.patch(enable_autograd_cache=False),
    )
    try:
        with no_caches[0], no_caches[1]:
            yield _HeldTrace(inside, release)
    finally:
        release.set()
        assert background_compile.wait_for_background_compiles(300)


def _assert_no_tracing_state_visible() -> None:
    st = torch.fx._symbolic_trace
    assert not st._is_fx_tracing_flag
    assert st.CURRENT_PATCHER is None
    assert torch.nn.Module.__call__ is st._orig_module_call
    assert torch.nn.Module.__getattr__ is st._orig_module_getattr


@pytest.mark.parametrize("cache", [None])  # "symbolic values": see the report (no AOT trace seen)
def test_user_compile_and_tracing_while_a_region_traces(
    cache: str | None, compile_thread_held_in_a_trace: _HeldTrace
) -> None:
    # Compiled (and run once) before the region started tracing.
    compiled_before = torch.compile(lambda x: _user(x))
    compiled_before(torch.randn(5))
    mlp = _Mlp()
    compiled_mlp = torch.compile(mlp)
    compiled_mlp(torch.randn(4, 6))
    blk = _block()
    if cache is None:
        cf = thunder.compile(blk)
    else:  # thunder.compile's executors, symbolic sizes: the region compiles through dynamo
        cf = thunder.jit(blk, executors=default_executors(), cache=cache)
    x, w = torch.randn(3, 8), torch.randn(8)
    torch.testing.assert_close(cf(x, w), blk(x, w))
    assert compile_thread_held_in_a_trace.inside.wait(300), "no region traced on the compile thread"

    # The compile thread is inside a trace now.
    _assert_no_tracing_state_visible()
    for _ in range(3):
        x = torch.randn(5)
        torch.testing.assert_close(compiled_before(x), _user(x))
        x = torch.randn(4, 6)
        torch.testing.assert_close(compiled_mlp(x), mlp(x))
        torch.testing.assert_close(mlp(x), mlp.b(torch.relu(mlp.a(x))))
    gm = make_fx(lambda x: (x.sin() + 1).cos())(torch.randn(3))
    x = torch.randn(3)
    torch.testing.assert_close(gm(x), (x.sin() + 1).cos())
    traced = torch.fx.symbolic_trace(mlp)  # module calls are recorded as such
    assert [n.target for n in traced.graph.nodes if n.op == "call_module"] == ["a", "b"]
    torch.testing.assert_close(traced(x := torch.randn(2, 6)), mlp(x))
    _assert_no_tracing_state_visible()
    if cache is not None:
        # The region compiles through dynamo, whose compiles take turns (its own lock): a new
        # torch.compile here would wait for the held one.
        return

    g = torch.compile(lambda x: _user(x))  # compiled while the region traces
    for _ in range(3):
        x = torch.randn(5)
        torch.testing.assert_close(g(x), _user(x))
    # A region compiled on this thread meanwhile compiles (no fallback warning).
    jf = thunder.jit(lambda x: (x.sin() * 2).cos() - 1, executors=["torchcompile"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(7)
            torch.testing.assert_close(jf(x), (x.sin() * 2).cos() - 1)
    assert not [str(c.message) for c in caught if "could not compile" in str(c.message)]
    _assert_no_tracing_state_visible()


def test_thunder_compile_results_after_held_traces(
    compile_thread_held_in_a_trace: _HeldTrace,
) -> None:
    blk = _block()
    cf = thunder.compile(blk)
    for i in range(3):  # three regions (three shapes) to compile
        x, w = torch.randn(2 + i, 8), torch.randn(8)
        torch.testing.assert_close(cf(x, w), blk(x, w))
    assert compile_thread_held_in_a_trace.inside.wait(300)
    # A user's compile and trace on this thread while the region traces there.
    torch.testing.assert_close(torch.compile(lambda x: _user(x))(x := torch.randn(4)), _user(x))
    make_fx(_user)(torch.randn(4))
    # Released: every region compiles, and the results stay eager's.
    compile_thread_held_in_a_trace.release.set()
    assert background_compile.wait_for_background_compiles(300)
    for _ in range(3):
        for i in range(3):
            x, w = torch.randn(2 + i, 8), torch.randn(8)
            torch.testing.assert_close(cf(x, w), blk(x, w))


def test_regions_compile_while_user_code_traces_and_compiles() -> None:
    """Not forced: user code compiling and tracing in a loop for as long as regions compile."""
    assert background_compile.wait_for_background_compiles(300)
    blk = _block()
    cf = thunder.compile(blk)
    for i in range(3):
        x, w = torch.randn(5 + i, 8), torch.randn(8)
        torch.testing.assert_close(cf(x, w), blk(x, w))
    failures: list[str] = []
    g = torch.compile(_user)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        while background_compile.compiling():
            try:
                x = torch.randn(3)
                torch.testing.assert_close(g(x), _user(x))
                make_fx(lambda x: (x.sin() + 1).cos())(x)
            except Exception as e:
                failures.append(f"{type(e).__name__}: {e}")
    assert not failures, failures[:3]
    assert not [str(c.message) for c in caught if "could not compile" in str(c.message)]
    _assert_no_tracing_state_visible()
    for i in range(3):
        x, w = torch.randn(5 + i, 8), torch.randn(8)
        torch.testing.assert_close(cf(x, w), blk(x, w))


def test_import_turns_give_way_where_waiting_would_deadlock(tmp_path: Any) -> None:
    # A user module whose import imports a torch module, imported on one thread while another
    # thread's torch import (holding the turn) imports that user module: waiting for the turn
    # would never end; the first thread goes on without it.
    (tmp_path / "user_module.py").write_text(
        "import time\ntime.sleep(0.5)\nimport torch.utils.show_pickle\n"
    )
    _run_fresh(
        f"""
import importlib.abc, importlib.util, sys, threading, time
sys.path.insert(0, {str(tmp_path)!r})
import torch
from thunder_executors.compile_thread_isolation import serialize_torch_imports
serialize_torch_imports()
class ImportsUserModule(importlib.abc.Loader):
    # A torch module whose import imports the user module (not in find_spec: finders run
    # under the interpreter's global import lock).
    def find_spec(self, name, path=None, target=None):
        if name == "torch.thunder_test_module":
            return importlib.util.spec_from_loader(name, self)
        return None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        import user_module
sys.meta_path.insert(0, ImportsUserModule())
b = threading.Thread(target=lambda: __import__("user_module"), name="b", daemon=True)
a = threading.Thread(target=lambda: __import__("torch.thunder_test_module"), name="a",
                     daemon=True)
b.start(); time.sleep(0.1); a.start()
a.join(60); b.join(60)
assert not a.is_alive() and not b.is_alive(), "deadlocked"
print("OK")
"""
    )


def test_a_child_forked_while_another_thread_imports_can_import() -> None:
    _run_fresh(
        """
import importlib.abc, importlib.util, os, sys, threading, time
import torch
from thunder_executors.compile_thread_isolation import serialize_torch_imports
serialize_torch_imports()
inside = threading.Event()
class Slow(importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name == "torch.thunder_test_module":
            return importlib.util.spec_from_loader(name, self)
        return None
    def create_module(self, spec):
        return None
    def exec_module(self, module):
        inside.set()
        time.sleep(3)
sys.meta_path.insert(0, Slow())
threading.Thread(target=lambda: __import__("torch.thunder_test_module"), name="slow").start()
assert inside.wait(60)
pid = os.fork()
if pid == 0:
    import torch.utils.show_pickle  # the turn's holder does not exist here
    os._exit(0)
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        assert os.waitstatus_to_exitcode(status) == 0
        print("OK")
        break
    time.sleep(0.05)
else:
    os.kill(pid, 9)
    raise AssertionError("the child never imported")
"""
    )


def test_a_region_compiled_while_the_programs_thread_bundles_kernels() -> None:
    # Inductor gathers the Triton kernels of the compile in progress in one bundle for the whole
    # process (TritonBundler's class attributes). A region compiled on the compile thread while
    # the program's thread was inside a compile of its own failed on the bundle's assertion, and
    # cleared that compile's bundle.
    import random

    from torch._inductor import config as inductor_config
    from torch._inductor.triton_bundler import TritonBundler

    from thunder_executors.torchcompile import TorchCompileExecutor

    n = random.randrange(9, 10**6)  # a graph inductor's cache has not seen: it compiles

    def program(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (x * w).sin().cos() + x

    executor = TorchCompileExecutor("torchcompile_bg_bundle", background=True)
    with inductor_config.patch(bundle_triton_into_fx_graph_cache=True, fx_graph_cache=True):
        TritonBundler.begin_compile()  # the program's thread's own compile, in progress
        try:
            f = thunder.jit(program, executors=(executor, "torch"))
            x, w = torch.randn(2, n), torch.randn(n)
            torch.testing.assert_close(f(x, w), program(x, w))
            assert background_compile.wait_for_background_compiles(timeout=120)
            (region,) = thunder.last_traces(f)[-1].fusion_regions
            assert region.sym.impl.error is None, region.sym.impl.status
            assert region.sym.impl.status.startswith("compiled")
            assert TritonBundler._entries == []  # the program's bundle, untouched
        finally:
            TritonBundler.end_compile()
    for _ in range(3):
        x, w = torch.randn(2, n), torch.randn(n)
        torch.testing.assert_close(f(x, w), program(x, w))
