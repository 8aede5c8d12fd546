"""torch.compile over code that calls a jitted function or module (``torch.compile(f)`` where
``f`` calls ``thunder.jit(g)``, ``jm.compile()``, ``torch.compile(jm)``): dynamo runs thunder's
program as it is. It must not trace thunder's own compiler frame by frame (a minute of graph
breaks for one small module, and warnings about the builtins thunder calls); values and
gradients equal eager's, and thunder compiles once."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import thunder

_THUNDER_SOURCES = tuple(
    str(Path(m.__file__).parent)
    for m in (thunder, __import__("thunder_ir"), __import__("thunder_transforms"))
)


@pytest.fixture
def compiled_frames() -> Iterator[list[str]]:
    """The files of the frames dynamo compiles meanwhile."""
    import torch._dynamo

    frames: list[str] = []
    handle = torch._dynamo.convert_frame.register_bytecode_hook(
        lambda code, new_code: frames.append(f"{code.co_filename}:{code.co_name}")
    )
    torch._dynamo.reset()
    warned_before = set(torch._dynamo.utils.warn_once_cache)
    torch._dynamo.utils.warn_once_cache.clear()  # (each of dynamo's warnings once a process)
    try:
        yield frames
    finally:
        handle.remove()
        torch._dynamo.reset()
        torch._dynamo.utils.warn_once_cache.update(warned_before)


def _thunder_frames(frames: list[str]) -> list[str]:
    # (but the wrapper's own call: under torch.compile it calls the wrapped module)
    wrapper_call = f"{Path(thunder.__file__).parent}/module.py:__call__"
    return [f for f in frames if f.startswith(_THUNDER_SOURCES) and f != wrapper_call]


def _tanh_scaled(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 2 + x.sin()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_jitted_function_inside_torch_compile(backend: str, compiled_frames: list[str]) -> None:
    jg = thunder.jit(_tanh_scaled)

    def f(x: torch.Tensor, g: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        y = x * 3 + 1
        return (g(y) * y).sum()

    cf = torch.compile(f, backend=backend)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(5, 3)
            xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
            expected, got = f(xe, _tanh_scaled), cf(xc, jg)
            torch.testing.assert_close(got, expected)
            expected.backward()
            got.backward()
            torch.testing.assert_close(xc.grad, xe.grad)
    # (it warned of the builtins thunder calls, as it traced them)
    assert [str(w.message) for w in caught if "Dynamo does not know" in str(w.message)] == []
    assert thunder.compile_stats(jg).compilations == 1
    assert compiled_frames, "dynamo compiled nothing: the test no longer checks it"
    assert _thunder_frames(compiled_frames) == []


def _block() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.GELU(), torch.nn.Linear(6, 4))


@pytest.mark.parametrize("how", ["Module.compile", "torch.compile"])
def test_a_jitted_module_compiled_again(how: str, compiled_frames: list[str]) -> None:
    eager = _block()
    jm: Any = thunder.jit(copy.deepcopy(eager))
    if how == "Module.compile":
        jm.compile(backend="eager")
        run: Any = jm
    else:
        run = torch.compile(jm, backend="eager")
    for _ in range(3):
        x = torch.randn(2, 4)
        expected, got = eager(x), run(x)
        torch.testing.assert_close(got, expected)
        expected.square().sum().backward()
        got.square().sum().backward()
    for pe, pj in zip(eager.parameters(), jm.parameters(), strict=True):
        torch.testing.assert_close(pj.grad, pe.grad)
    if how == "Module.compile":  # (torch.compile(jm) compiles the wrapped module: torch_tracers)
        assert thunder.compile_stats(jm).compilations == 1
    assert _thunder_frames(compiled_frames) == []
