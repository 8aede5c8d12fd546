"""Tools that print or re-run a compiled program (``Trace.python(standalone=True)``,
``thunder.write_reproducer``, ``write_report(profile=True)``) on programs that: call a torch
callable of a dotted name (``torch.special.bessel_j0``), read a Tensor property (``x.T``), write
an input in place (torch.autograd runs their backward), or draw random numbers beside a
BatchNorm (the computation under a wrapper noting generator states). Each tool's output is run
and compared with eager."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import thunder
from thunder.reproducer import program_inputs

CACHES = [None, "symbolic values"]


def _jit(fn: Any, cache: str | None) -> Any:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


def _run_reproducer(folder: Path) -> str:
    done = subprocess.run(
        [sys.executable, "run.py", "--runs", "2"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "agree" in done.stdout
    return done.stdout


def _standalone_matches_eager(
    fn: Callable[..., Any], make: Callable[[], list[torch.Tensor]], cache: str | None
) -> None:
    """The last execution trace printed standalone and exec'd computes eager's outputs, on
    fresh inputs over several calls."""
    jf = _jit(fn, cache)
    for _ in range(3):
        inputs = make()
        torch.testing.assert_close(jf(*inputs), fn(*inputs))
        trace = thunder.last_traces(jf)[-1]
        namespace: dict[str, Any] = {}
        exec(trace.python(standalone=True), namespace)
        fresh = make()
        # (what the prologue unpacks: with symbolic values, the sizes too)
        values = program_inputs(thunder.compile_stats(jf), tuple(fresh), {})
        with torch.no_grad():
            got = namespace[trace.fn_name](*values)
        torch.testing.assert_close(got, fn(*fresh))


# -- torch callables of dotted names ------------------------------------------------------------

DOTTED = {
    "special.bessel_j0": (lambda x: torch.special.bessel_j0(x) * 2, (4,)),
    "special.erfcx": (lambda x: torch.special.erfcx(x) + x, (5,)),
    "topk": (lambda x: x.topk(2, -1).values * 2, (3, 5)),
    "interpolate_bilinear": (
        lambda x: F.interpolate(x, scale_factor=2, mode="bilinear") * 2,
        (1, 1, 4, 4),
    ),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", list(DOTTED))
def test_standalone_trace_with_dotted_torch_callable_runs(name: str, cache: str | None) -> None:
    fn, shape = DOTTED[name]
    _standalone_matches_eager(fn, lambda: [torch.randn(shape)], cache)


def test_standalone_trace_of_in_place_random_fill_runs() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.clone().uniform_() * 0 + x  # (the drawn values are multiplied away)

    _standalone_matches_eager(fn, lambda: [torch.randn(3)], None)


def test_standalone_keeps_torch_the_module() -> None:
    jf = thunder.jit(lambda x: torch.special.bessel_j0(x) * 2)
    jf(torch.randn(4))
    source = thunder.last_traces(jf)[-1].python(standalone=True)
    assert "torch = types.SimpleNamespace" not in source


def test_reproducer_of_dotted_torch_callable_runs(tmp_path: Path) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x.topk(2, -1).values.sin() + torch.special.bessel_j0(x).sum(-1, keepdim=True)

    jf = thunder.jit(fn)
    x = torch.randn(3, 5, requires_grad=True)
    jf(x).sum().backward()
    thunder.write_reproducer(jf, tmp_path, args=(x,))
    _run_reproducer(tmp_path)


# -- Tensor properties (x.T, x.mT, x.H, x.mH) ---------------------------------------------------


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("attr", ["T", "mT", "H", "mH"])
def test_standalone_trace_reading_tensor_property_runs(attr: str, cache: str | None) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return getattr(x, attr) * 2

    _standalone_matches_eager(fn, lambda: [torch.randn(3, 4)], cache)


def test_property_getter_imports_in_a_fresh_process() -> None:
    code = (
        "import thunder_executors.torch_views as v, torch\n"
        "x = torch.randn(2, 3)\n"
        "assert torch.equal(v.mT_attribute(x), x.mT)\n"
        "assert v.T_attribute is v.T_attribute\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_reproducer_of_tensor_property_runs(tmp_path: Path) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x.mT @ x).tanh()

    jf = thunder.jit(fn)
    x = torch.randn(2, 3, 4, requires_grad=True)
    jf(x).sum().backward()
    thunder.write_reproducer(jf, tmp_path, args=(x,))
    _run_reproducer(tmp_path)


# -- BatchNorm in training beside Dropout (the computation noting generator states) -------------


def _bn_models() -> dict[str, nn.Module]:
    return {
        "bn-drop": nn.Sequential(nn.Linear(4, 6), nn.BatchNorm1d(6), nn.Dropout(0.1)),
        "bn-relu-drop-lin": nn.Sequential(
            nn.Linear(4, 6), nn.BatchNorm1d(6), nn.ReLU(), nn.Dropout(0.1), nn.Linear(6, 2)
        ),
    }


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", ["bn-drop", "bn-relu-drop-lin"])
def test_reproducer_of_batchnorm_with_dropout_agrees(
    name: str, cache: str | None, tmp_path: Path
) -> None:
    model = _bn_models()[name]
    jm = _jit(model, cache)
    for _ in range(2):
        jm(torch.randn(5, 4)).sum().backward()
    x = torch.randn(5, 4)
    thunder.write_reproducer(jm, tmp_path, args=(x,))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["differentiable_outputs"] == [True]
    _run_reproducer(tmp_path)


# -- programs writing an input in place: torch.autograd runs their backward ---------------------


def _add_into_input(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.add_(y)
    return x * 2


def _index_add(x: torch.Tensor) -> torch.Tensor:
    y = x.clone()
    y[torch.tensor([0, 2])] += 1.0
    return y.sin()


@pytest.mark.parametrize("cache", CACHES)
def test_reproducer_of_program_writing_an_input_agrees(cache: str | None, tmp_path: Path) -> None:
    jf = _jit(_add_into_input, cache)
    for _ in range(2):
        x, y = torch.randn(4), torch.randn(4, requires_grad=True)
        jf(x, y).sum().backward()
    # x, written with y, now requires grad without being a leaf: reproduced as such.
    thunder.write_reproducer(jf, tmp_path, args=(x, y))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["backward_by_torch"] is True
    _run_reproducer(tmp_path)
    # And for inputs as a fresh call finds them.
    thunder.write_reproducer(
        jf, tmp_path, args=(torch.randn(4), torch.randn(4, requires_grad=True))
    )
    _run_reproducer(tmp_path)


def test_reproducer_compares_gradients_of_program_autograd_runs(tmp_path: Path) -> None:
    jf = thunder.jit(_index_add)
    x = torch.randn(4, 3, requires_grad=True)
    jf(x).sum().backward()
    thunder.write_reproducer(jf, tmp_path, args=(x,))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    if manifest["backward_by_torch"]:
        assert manifest["differentiable_outputs"] == [True]
        assert len(manifest["cotangents"]) == 1
    _run_reproducer(tmp_path)


def test_profiled_report_of_program_writing_an_input(tmp_path: Path) -> None:
    jf = thunder.jit(_add_into_input)
    x, y = torch.randn(3), torch.randn(3, requires_grad=True)
    ex, ey = x.detach().clone(), y.detach().clone().requires_grad_()
    out = jf(x, y)
    expected = _add_into_input(ex, ey)
    torch.testing.assert_close(out, expected)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(y.grad, ey.grad)
    thunder.write_report(jf, tmp_path / "report.html", args=(x, y), profile=True)
    assert "<html" in (tmp_path / "report.html").read_text()
