"""The background compile leaves the program's random streams, its tensors' autograd state and
torch's functions alone, whatever the timing; and a lazy import of torch's internals while
tracing does not break the call.

- torch's compilers save the default generators' state when a compile starts and write it back
  when it ends (inductor's ``preserve_rng_state``, dynamo's ``preserve_global_state`` and its C++
  save of Python's ``random``). On thunder's compile thread that rewound the caller's streams by
  whatever its threads drew meanwhile: ``torch.rand`` repeated values once a compile finished
  and dropout training under ``thunder.compile`` drew other masks than eager. The window is
  forced here: the compile thread is held after its compilers saved the state while the caller
  draws.
- The compile ran the region on the caller's live tensors: a view of a Parameter made under
  ``no_grad`` whose base the training step then wrote in place made autograd refuse it ("A view
  was created in no_grad mode ..."), and the region stayed uncompiled.
- ``torch.manual_seed(s)`` then an op traced by a fake run (``randperm``): the fake tensor mode
  imports ``torch._dynamo`` mid-trace, which wraps ``torch.manual_seed``; the program's own check
  then failed on its first call (JitError "... please report this").
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch._dynamo.convert_frame
import torch._functorch.config
import torch._inductor.config

import thunder
from thunder.recipes import default_executors
from thunder_executors import background_compile, torchcompile
from thunder_executors.background_compile import ExampleInputs, wait_for_background_compiles

_FRESH_ENV = {k: v for k, v in os.environ.items() if not k.startswith("THUNDER_")}


class _HeldCompile:
    """Holds the compile thread once, right after its first read of the CPU generator's state
    (torch's compilers read it when a compile starts, to write it back when it ends), until
    ``release`` is set."""

    def __init__(self) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()

    def hold(self) -> None:
        if threading.current_thread().name == "thunder-compile" and not self.inside.is_set():
            self.inside.set()
            self.release.wait(300)

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if (
            event == "c_return"
            and getattr(arg, "__self__", None) is torch.default_generator
            and getattr(arg, "__name__", None) == "get_state"
        ):
            self.hold()


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[_HeldCompile]:
    assert wait_for_background_compiles(300)
    hold = _HeldCompile()
    # Inductor's save, seen by a profile of the compile thread (the one running now, or the
    # next: the thread ends when nothing is queued); dynamo's (which runs no profile), by a call
    # it makes after it.
    threading.setprofile(hold.profile)
    background_compile.submit(lambda examples: sys.setprofile(hold.profile), ())
    setup_compile_debug = torch._dynamo.convert_frame.setup_compile_debug

    def held_setup_compile_debug(*args: Any, **kwargs: Any) -> Any:
        hold.hold()
        return setup_compile_debug(*args, **kwargs)

    monkeypatch.setattr(
        torch._dynamo.convert_frame, "setup_compile_debug", held_setup_compile_debug
    )
    try:
        # A compile found in torch's caches does not save the state: every compile compiles.
        with (
            torch._inductor.config.patch(fx_graph_cache=False),
            torch._functorch.config.patch(enable_autograd_cache=False),
        ):
            yield hold
    finally:
        hold.release.set()
        threading.setprofile(None)  # type: ignore[arg-type]
        background_compile.submit(lambda examples: sys.setprofile(None), ())
        assert wait_for_background_compiles(300)


def _jit(fn: Any, cache: str | None) -> Any:
    if cache is None:
        return thunder.compile(fn)
    # thunder.compile's executors, symbolic sizes: the region compiles through dynamo
    return thunder.jit(fn, executors=default_executors(), cache=cache)


def _assert_streams(torch_drawn: list[torch.Tensor], py_drawn: list[float], seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    expected = [torch.rand(t.shape, generator=g) for t in torch_drawn]
    for i, (got, want) in enumerate(zip(torch_drawn, expected)):
        assert torch.equal(got, want), f"torch's CPU stream differs at draw {i}"
    py = random.Random(seed)
    assert py_drawn == [py.random() for _ in py_drawn], "Python's random stream differs"


@pytest.mark.parametrize("path", ["inductor", "dynamo"])
def test_draws_while_a_region_compiles_are_not_rewound(
    path: str, held: _HeldCompile, monkeypatch: pytest.MonkeyPatch
) -> None:
    if path == "dynamo":  # regions of static CPU shapes skip dynamo: make this one use it
        monkeypatch.setattr(torchcompile, "compile_direct", lambda *a, **k: None)

    def region(x: torch.Tensor) -> torch.Tensor:
        return (x.sin() * 3.25 + (1.5 if path == "dynamo" else 0.5)).cos()

    f = thunder.compile(region)
    x = torch.randn(16)
    torch.testing.assert_close(f(x), region(x))
    assert held.inside.wait(300), "the region never compiled on the compile thread"

    # The compile thread has saved the generators' state: the caller draws meanwhile.
    torch.manual_seed(1234)
    random.seed(1234)
    drawn = [torch.rand(3) for _ in range(4)]
    py_drawn = [random.random() for _ in range(4)]
    held.release.set()
    assert wait_for_background_compiles(300)
    drawn += [torch.rand(3) for _ in range(4)]
    py_drawn += [random.random() for _ in range(4)]
    _assert_streams(drawn, py_drawn, 1234)
    for _ in range(3):
        x = torch.randn(16)
        torch.testing.assert_close(f(x), region(x))


def test_compile_jobs_save_and_restore_no_generator_of_the_caller() -> None:
    # What torch's compilers do on the compile thread (CPU, CUDA where present, Python's
    # random): their restore must not reach the generators the caller draws from.
    assert wait_for_background_compiles(300)
    torch.manual_seed(7)
    random.seed(7)
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.manual_seed(7)
    inside, drawn_meanwhile, errors = threading.Event(), threading.Event(), []

    def compile_job(examples: list[Any]) -> None:
        try:
            saved, py_saved = torch.get_rng_state(), random.getstate()
            cuda_saved = torch.cuda.get_rng_state() if cuda else None
            inside.set()
            drawn_meanwhile.wait(60)
            torch.random.set_rng_state(saved)
            random.setstate(py_saved)
            if cuda:
                torch.cuda.set_rng_state(cuda_saved)
            assert torch.equal(torch.random.get_rng_state(), saved)  # as the thread left it
        except BaseException as e:
            errors.append(e)

    background_compile.submit(compile_job, ())
    assert inside.wait(300)
    drawn = [torch.rand(2) for _ in range(3)]
    py_drawn = [random.random() for _ in range(3)]
    cuda_drawn = [torch.rand(2, device="cuda") for _ in range(3)] if cuda else []
    drawn_meanwhile.set()
    assert wait_for_background_compiles(300)
    assert not errors, errors
    drawn += [torch.rand(2) for _ in range(3)]
    py_drawn += [random.random() for _ in range(3)]
    _assert_streams(drawn, py_drawn, 7)
    if cuda:
        cuda_drawn += [torch.rand(2, device="cuda") for _ in range(3)]
        g = torch.Generator("cuda").manual_seed(7)
        for got in cuda_drawn:
            assert torch.equal(got, torch.rand(2, device="cuda", generator=g))
    # Outside the compile thread they are torch's and Python's own.
    state = torch.get_rng_state()
    a = torch.rand(4)
    torch.set_rng_state(state)
    assert torch.equal(torch.rand(4), a)
    state = random.getstate()
    b = random.random()
    random.setstate(state)
    assert random.random() == b


class _DropoutNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(12, 24)
        self.b = torch.nn.Linear(24, 6)
        self.drop = torch.nn.Dropout(0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.drop(torch.nn.functional.gelu(self.a(x)) * 1.25))


def _train(model: torch.nn.Module, steps: int, on_step: Any = None) -> list[Any]:
    torch.manual_seed(99)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    seen = []
    for i in range(steps):
        if on_step is not None:
            on_step(i)
        x = torch.randn(5, 12)
        loss = model(x).square().mean()
        loss.backward()
        seen.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
        opt.step()
        opt.zero_grad()
    return seen


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_dropout_training_while_regions_compile_matches_eager(
    cache: str | None, held: _HeldCompile
) -> None:
    torch.manual_seed(0)
    eager = _DropoutNet()
    jitted_model = _DropoutNet()
    jitted_model.load_state_dict(eager.state_dict())
    expected = _train(eager, 8)

    jm = _jit(jitted_model, cache)

    def on_step(i: int) -> None:
        if i == 1:
            assert held.inside.wait(300), "no region compiled on the compile thread"
        if i == 4:  # the compile thread writes the state it saved back now
            held.release.set()
            assert wait_for_background_compiles(300)

    got = _train(jm, 8, on_step)
    for i, ((loss, grads), (eloss, egrads)) in enumerate(zip(got, expected)):
        torch.testing.assert_close(loss, eloss, msg=f"loss of step {i}")
        for g, eg in zip(grads, egrads):
            torch.testing.assert_close(g, eg, msg=f"a gradient of step {i}")


def test_example_inputs_do_not_carry_the_callers_autograd_state() -> None:
    p = torch.nn.Parameter(torch.randn(1, 1, 4))
    with torch.no_grad():
        view = p.expand(3, -1, -1)  # as a ViT's class token in an evaluation step
    examples = ExampleInputs((view, p))
    with torch.no_grad():
        p.mul_(2)  # the optimizer's step
    v, q = examples.materialize()
    assert v.requires_grad and q.requires_grad
    assert v.shape == view.shape and v.stride() == view.stride()
    assert v.untyped_storage().data_ptr() == p.untyped_storage().data_ptr()
    (v * q).sum().backward()  # autograd takes it: no history of the caller's
    assert p.grad is None


def _with_token(tok: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return (torch.cat([tok, x], 1) * 0.75 + 0.125).sin().sum(1)


def test_region_compiled_from_a_view_whose_base_the_step_wrote(
    held: _HeldCompile, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Through dynamo, whose fake tensors read the example's autograd state.
    monkeypatch.setattr(torchcompile, "compile_direct", lambda *a, **k: None)
    torch.manual_seed(3)
    p = torch.nn.Parameter(torch.randn(1, 1, 8))
    jf = thunder.compile(_with_token)
    x = torch.randn(3, 3, 8)
    torch.testing.assert_close(jf(p.expand(3, -1, -1), x), _with_token(p.expand(3, -1, -1), x))
    assert held.inside.wait(300)  # a first region holds the compile thread; the next queue
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with torch.no_grad():
            tok = p.expand(2, -1, -1)  # the caller's view, made in no_grad (a class token)
        x = torch.randn(2, 3, 8)
        out = jf(tok, x)  # its region queues, on the live view
        expected = _with_token(tok, x)
        torch.testing.assert_close(out, expected)
        with torch.no_grad():
            p.mul_(0.5)  # the optimizer's step writes the view's base
        held.release.set()
        assert wait_for_background_compiles(300)
    failed = [str(w.message) for w in seen if "could not compile" in str(w.message)]
    assert not failed, failed
    for _ in range(3):
        x = torch.randn(2, 3, 8)
        q = p.detach().clone().requires_grad_()
        out, expected = jf(p.expand(2, -1, -1), x), _with_token(q.expand(2, -1, -1), x)
        torch.testing.assert_close(out, expected)
        (gp,) = torch.autograd.grad(out.sum(), p)
        (gq,) = torch.autograd.grad(expected.sum(), q)
        torch.testing.assert_close(gp, gq)


def _run_fresh(program: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        timeout=600,
        env=_FRESH_ENV,
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), (
        done.stdout[-2000:] + done.stderr[-4000:]
    )


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_seed_then_fake_run_op_imports_dynamo_mid_trace(cache: str | None) -> None:
    # In a fresh process: torch._dynamo not imported yet, as in a plain training script.
    _run_fresh(
        f"""
        import sys, torch, thunder
        assert "torch._dynamo" not in sys.modules
        def f(labels):
            torch.manual_seed(123)
            pos = torch.where(labels >= 1)[0]
            return pos[torch.randperm(pos.numel())[:2]], torch.rand(3)
        jf = thunder.jit(f, cache={cache!r})
        for i in range(4):
            x = torch.randint(-1, 3, (20,))
            e, j = f(x), jf(x)
            assert all(torch.equal(a, b) for a, b in zip(e, j)), (e, j)
        print("OK")
        """
    )


def test_torch_function_wrapped_while_tracing_is_traced_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The class: any torch function a trace read, wrapped by torch while tracing (here as the
    # fake run's mode is made, where torch._dynamo's import wraps torch.manual_seed).
    import functools

    import torch.nn.functional as F
    from torch._subclasses.fake_tensor import FakeTensorMode

    original, real_init = F.softsign, FakeTensorMode.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        if F.softsign is original:
            wrapper = functools.wraps(original)(lambda *a, **k: original(*a, **k))
            monkeypatch.setattr(F, "softsign", wrapper)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(FakeTensorMode, "__init__", init)

    def f(x: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(5)
        y = F.softsign(x) * 2
        return y, labels[torch.randperm(labels.numel())[:3]]

    jf = thunder.jit(f)
    for _ in range(3):
        x, labels = torch.randn(4), torch.randint(0, 9, (10,))
        for got, want in zip(jf(x, labels), f(x, labels)):
            torch.testing.assert_close(got, want)
    assert F.softsign is not original  # it was wrapped, during the first trace
