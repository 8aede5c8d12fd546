"""While thunder's background thread compiles a region through dynamo, the program's own threads
see torch.compiler's flags as they are (False in eager code), and the compile thread sees them as
dynamo sets them.

Dynamo holds ``torch.compiler.is_compiling()`` True for its whole compile (tens of seconds on a
CPU) and the flag was the process's: meanwhile a ``ThunderModule`` called on the main thread
concluded dynamo was tracing it and ran the module it wraps (without its recipe's lookasides),
and eager code branching on ``is_compiling()`` computed its compiled branch. The window is forced
here: the compile thread is held inside dynamo's compile (a start callback of dynamo's) while the
main thread runs.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch._dynamo
import torch._dynamo.external_utils
from torch._dynamo.callback import callback_handler

import thunder
from thunder_executors import background_compile

_offsets = iter(range(1, 1000))


def _act(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x)


class _TanhAct(thunder.Recipe):
    def validate(self, model: Any) -> None:
        pass

    def setup_lookasides(self) -> list[thunder.Lookaside]:
        return [thunder.Lookaside(_act, torch.tanh)]


class _Net(torch.nn.Module):
    """One region of data-dependent size (compiled through dynamo). ``offset`` makes its source
    new: a region compiled before (same source) would not compile again."""

    def __init__(self, act: Any) -> None:
        super().__init__()
        self.offset = next(_offsets) * 1e-3
        self.w = torch.nn.Parameter(torch.randn(8))
        self.act = act

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.act(x * self.w)
        picked = y[y.abs() > 0.25]  # data-dependent size
        return y * 2, (picked.sin() * 2 + picked.cos() + self.offset).sum()


def _flags() -> dict[str, bool]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch._utils.is_compiling is deprecated
        return {
            "torch.compiler.is_compiling": torch.compiler.is_compiling(),
            "torch.compiler.is_exporting": torch.compiler.is_exporting(),
            "torch.compiler.is_dynamo_compiling": torch.compiler.is_dynamo_compiling(),
            "torch._dynamo.is_compiling": torch._dynamo.is_compiling(),
            "external_utils.is_compiling": torch._dynamo.external_utils.is_compiling(),
            "torch._utils.is_compiling": torch._utils.is_compiling(),
        }


_NONE_SET = dict.fromkeys(_flags(), False)


class _Held:
    inside: threading.Event
    flags: dict[str, bool]


class _Released(Exception):
    """Ends the held compile once the test is done: its result is not what is tested."""


@pytest.fixture
def compile_thread_held_in_dynamo() -> Iterator[_Held]:
    """Holds the compile thread inside its next dynamo compile (where dynamo has set its flags)
    until the test is done (or 300 s); ``inside`` is set once it is there, ``flags`` is what the
    compile thread saw there."""
    assert background_compile.wait_for_background_compiles(300)
    held = _Held()
    held.inside, held.flags = threading.Event(), {}
    release = threading.Event()

    def hold(args: Any) -> None:
        if threading.current_thread().name != "thunder-compile" or held.inside.is_set():
            return
        held.flags = _flags()
        held.inside.set()
        release.wait(300)
        raise _Released

    callback_handler.register_start_callback(hold)
    try:
        with warnings.catch_warnings():
            # The released compile fails: its region keeps its torch calls, with a warning.
            warnings.filterwarnings("ignore", "torch.compile could not compile")
            yield held
            release.set()
            assert background_compile.wait_for_background_compiles(300)
    finally:
        release.set()
        callback_handler.remove_start_callback(hold)


def _eager_reference(
    net: _Net, x: torch.Tensor, act: Any
) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor, torch.Tensor]:
    """``net``'s outputs with ``act`` as its activation, and the gradients of their sum."""
    w = net.w.detach().clone().requires_grad_()
    x = x.detach().clone().requires_grad_()
    y = act(x * w)
    picked = y[y.abs() > 0.25]
    out = (y * 2, (picked.sin() * 2 + picked.cos() + net.offset).sum())
    (out[0].sum() + out[1]).backward()
    assert x.grad is not None and w.grad is not None
    return out, x.grad, w.grad


def _check_module_like_eager(model: Any, net: _Net, act: Any) -> None:
    for _ in range(3):
        x = torch.randn(6, 8, requires_grad=True)
        net.w.grad = None
        out = model(x)
        (out[0].sum() + out[1]).backward()
        expected, x_grad, w_grad = _eager_reference(net, x, act)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(x.grad, x_grad)
        torch.testing.assert_close(net.w.grad, w_grad)


def _user_code(x: torch.Tensor) -> torch.Tensor:
    return x * 3 + (1 if torch.compiler.is_compiling() else 0)


def _compiled_until_held(held: _Held) -> tuple[_Net, Any]:
    """A module and its ``thunder.compile``, called until its region's compile is held."""
    net = _Net(_act)
    model = thunder.compile(net, recipe=_TanhAct())
    _check_module_like_eager(model, net, torch.tanh)  # queues the region's compile
    assert held.inside.wait(300), "no region compiled through dynamo"
    return net, model


def test_main_thread_sees_no_flag_while_a_region_compiles_in_dynamo(
    compile_thread_held_in_dynamo: _Held,
) -> None:
    net, model = _compiled_until_held(compile_thread_held_in_dynamo)

    # The compile thread is inside dynamo's compile now, and sees dynamo's flag there.
    assert compile_thread_held_in_dynamo.flags["torch.compiler.is_compiling"]
    # The ThunderModule runs its program (the recipe's tanh), not the module it wraps (relu).
    _check_module_like_eager(model, net, torch.tanh)
    assert _flags() == _NONE_SET
    for _ in range(3):
        x = torch.randn(5)
        torch.testing.assert_close(_user_code(x), x * 3)
    # So does another one, compiled meanwhile.
    other = _Net(_act)
    _check_module_like_eager(thunder.compile(other, recipe=_TanhAct()), other, torch.tanh)
    # And on another of the program's threads.
    seen: list[dict[str, bool]] = []
    worker = threading.Thread(target=lambda: seen.append(_flags()))
    worker.start()
    worker.join(60)
    assert seen == [_NONE_SET]


def test_thread_private_compiler_flags_keep_each_threads_own() -> None:
    from thunder_executors.compile_thread_isolation import thread_private_compiler_flags

    inside, release, done = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def private_thread() -> None:
        with thread_private_compiler_flags():
            seen["before"] = torch.compiler.is_compiling()
            with torch.compiler._compile_session_context():
                seen["during"] = torch.compiler.is_compiling()
                inside.set()
                release.wait(60)
                seen["main's session"] = torch.compiler.is_compiling()
            seen["after"] = torch.compiler.is_compiling()
        done.set()

    thread = threading.Thread(target=private_thread)
    thread.start()
    try:
        assert inside.wait(60)
        assert _flags() == _NONE_SET
        torch.testing.assert_close(_user_code(x := torch.randn(4)), x * 3)
        with torch.compiler._compile_session_context():  # the main thread's own session
            assert torch.compiler.is_compiling()
            release.set()
            assert done.wait(60)
            assert torch.compiler.is_compiling()
        assert not torch.compiler.is_compiling()
    finally:
        release.set()
        thread.join(60)
    assert seen == {"before": False, "during": True, "main's session": True, "after": False}
    assert _flags() == _NONE_SET


def _branches(x: torch.Tensor) -> torch.Tensor:
    return x * 2 if torch.compiler.is_compiling() else x * 3


class _Branches(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _branches(x) + 1


def _thunder_programs() -> list[tuple[Any, Any]]:
    """Jitted functions and modules branching on ``is_compiling()``, with what they compute:
    thunder answers it with True while it traces (libraries take their compile-friendly paths),
    and a ThunderModule called inside a traced function is traced into it."""
    inner = thunder.jit(_Branches())
    return [
        (thunder.jit(_branches), lambda x: x * 2),
        (inner, lambda x: x * 2 + 1),
        (thunder.jit(lambda x: inner(x) * 5), lambda x: (x * 2 + 1) * 5),
    ]


def _check_thunder_programs(programs: list[tuple[Any, Any]]) -> None:
    for _ in range(3):
        x = torch.randn(4)
        for program, expected in programs:
            torch.testing.assert_close(program(x), expected(x))
        torch.testing.assert_close(_branches(x), x * 3)  # eager


def test_thunder_tracing_still_sees_is_compiling() -> None:
    _check_thunder_programs(_thunder_programs())


def test_thunder_tracing_sees_is_compiling_while_a_region_compiles(
    compile_thread_held_in_dynamo: _Held,
) -> None:
    before = _thunder_programs()
    _check_thunder_programs(before)
    misses = [thunder.cache_misses(program) for program, _ in before]
    net = _Net(_act)
    thunder.compile(net)(torch.randn(6, 8))
    assert compile_thread_held_in_dynamo.inside.wait(300), "no region compiled through dynamo"
    _check_thunder_programs(before)
    # A compile starting on the compile thread traces no program again.
    assert [thunder.cache_misses(program) for program, _ in before] == misses
    _check_thunder_programs(_thunder_programs())


def test_torch_compile_and_script_see_the_flags_as_before() -> None:
    # Dynamo folds is_compiling() to True in the frames it traces; TorchScript compiles its
    # source (False there).
    compiled = torch.compile(_branches, backend="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(_branches)
    for _ in range(3):
        x = torch.randn(4)
        torch.testing.assert_close(compiled(x), x * 2)
        torch.testing.assert_close(scripted(x), x * 3)
        torch.testing.assert_close(_branches(x), x * 3)


def _graph_module_cls() -> type:
    return torch.fx._lazy_graph_module._get_graph_module_cls()


class _Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x))


def _check_strict_export() -> None:
    """What the flag broke on the program's threads: a strict ``torch.export`` (dynamo's graph
    came out a ``_LazyGraphModule`` without ``_in_spec``), of a module and of a jitted one."""
    model = _Small().eval()
    x = torch.randn(2, 4)
    for exported in (model, thunder.jit(model)):
        ep = torch.export.export(exported, (x,), strict=True)
        torch.testing.assert_close(ep.module()(x), model(x))


def test_main_thread_builds_graph_modules_while_a_region_compiles_in_dynamo(
    compile_thread_held_in_dynamo: _Held,
) -> None:
    net, model = _compiled_until_held(compile_thread_held_in_dynamo)
    # Dynamo has set the lazy graph module flag on the compile thread, not on this one. (A
    # strict export here would wait for the compile: it resets dynamo under its compile lock.)
    assert _graph_module_cls() is torch.fx.GraphModule
    assert not isinstance(
        torch.fx.symbolic_trace(_Small()), torch.fx._lazy_graph_module._LazyGraphModule
    )
    _check_module_like_eager(model, net, torch.tanh)


def test_thread_private_graph_module_flags_keep_each_threads_own() -> None:
    """The context managers nested from two threads, exited out of order: each restored what it
    saw when it entered, which left the process's flag set for good."""
    from torch.fx._lazy_graph_module import (
        _force_skip_lazy_graph_module,
        _LazyGraphModule,
        _use_lazy_graph_module,
    )

    from thunder_executors.compile_thread_isolation import thread_private_compiler_flags

    inside, release, done = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, type] = {}

    def private_thread() -> None:
        with thread_private_compiler_flags():
            seen["before"] = _graph_module_cls()
            with _use_lazy_graph_module(True):
                seen["during"] = _graph_module_cls()
                inside.set()
                release.wait(60)
                seen["main's context left"] = _graph_module_cls()
                with _force_skip_lazy_graph_module(), _use_lazy_graph_module(True):
                    seen["forced off"] = _graph_module_cls()
            seen["after"] = _graph_module_cls()
        done.set()

    thread = threading.Thread(target=private_thread)
    thread.start()
    try:
        assert inside.wait(60)
        assert _graph_module_cls() is torch.fx.GraphModule
        _check_strict_export()
        with _use_lazy_graph_module(True):  # the main thread's own
            assert _graph_module_cls() is _LazyGraphModule
        release.set()
        assert done.wait(60)
        assert _graph_module_cls() is torch.fx.GraphModule
    finally:
        release.set()
        thread.join(60)
    assert seen == {
        "before": torch.fx.GraphModule,
        "during": _LazyGraphModule,
        "main's context left": _LazyGraphModule,
        "forced off": torch.fx.GraphModule,
        "after": torch.fx.GraphModule,
    }
    assert not torch.fx._lazy_graph_module._use_lazy_graph_module_flag


def test_the_callers_compiler_settings_reach_the_compile_thread() -> None:
    """torch's compiler configurations are set per thread: a setting made on the caller's thread
    (an assignment, or a ``config.patch`` around the call that queues the compile) is what the
    region's compile sees, as a ``torch.compile`` on that thread would."""
    import torch._inductor.config as inductor_config

    assert background_compile.wait_for_background_compiles(300)
    seen: list[tuple[bool, int]] = []

    def job(examples: list[Any]) -> None:
        seen.append((inductor_config.fx_graph_cache, torch._dynamo.config.recompile_limit))

    default = (inductor_config.fx_graph_cache, torch._dynamo.config.recompile_limit)
    with (
        inductor_config.patch(fx_graph_cache=not default[0]),
        torch._dynamo.config.patch(recompile_limit=default[1] + 3),
    ):
        background_compile.submit(job, ())
    background_compile.submit(job, ())  # after the patch: the defaults again
    assert background_compile.wait_for_background_compiles(300)
    assert seen == [(not default[0], default[1] + 3), default]
    # The compile thread's own settings are left as they were.
    background_compile.submit(job, ())
    assert background_compile.wait_for_background_compiles(300)
    assert seen[-1] == default
