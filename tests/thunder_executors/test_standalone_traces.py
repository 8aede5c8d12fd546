"""Traces printed as programs that run on their own (``Trace.python(standalone=True)``): the
imports and bindings of executor symbols by importable paths, fusion regions re-created from
their source, and a clear error for what has no path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import thunder
from thunder_executors.executor import OperatorExecutor, get_all_executors
from thunder_executors.torch_ops_executor import RUNNERS
from thunder_executors.torch_views import torch_callable_symbols
from thunder_ir import Symbol, TensorProxy, Trace, prims
from thunder_ir.ops import ALL_OPS
from thunder_ir.standalone import StandaloneError, importable_expression, standalone_python


def _executor_symbols() -> dict[str, Symbol]:
    """Every executor symbol an operator executor translates to. They are held by the
    translators' closures (``same_arguments(exsym)``), read here for the test only, and made
    per op for the torch callables it mirrors (``torch_callable_symbols``: ``torch_ex.T_attribute``)."""
    found: dict[str, Symbol] = {s.id: s for s in RUNNERS}
    for op in ALL_OPS.values():
        for sym in torch_callable_symbols(op):
            if sym.impl is not None:
                found[sym.id] = sym
    for ex in get_all_executors():
        if not isinstance(ex, OperatorExecutor):
            continue
        for info in ex.implementations.values():
            for cell in info.translate.__closure__ or ():
                value = cell.cell_contents
                if isinstance(value, Symbol) and value.impl is not None:
                    found[value.id] = value
    return found


def test_every_executor_symbol_has_an_importable_path() -> None:
    symbols = _executor_symbols()
    assert len(symbols) > 100
    missing = [
        f"{k}: {s.impl!r} ({getattr(s.impl, '__module__', None)}.{getattr(s.impl, '__qualname__', None)})"
        for k, s in sorted(symbols.items())
        if importable_expression(s.impl) is None
    ]
    assert missing == []
    expr, modules = importable_expression(symbols["torch_ops::sdpa_flash"].impl)  # type: ignore[misc]
    assert expr == "thunder_executors.torch_ops_executor._sdpa_flash"
    assert modules == {"thunder_executors.torch_ops_executor"}
    assert importable_expression(symbols["torch_views::T"].impl) == (
        "thunder_executors.torch_views.T_attribute",
        frozenset({"thunder_executors.torch_views"}),
    )


def _model(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    y = torch.nn.functional.linear(x, w).relu()
    return torch.nn.functional.layer_norm(y + 1, (y.shape[-1],)).softmax(-1)


def _run_fresh(tmp_path: Path, source: str, fn_name: str, inputs: list[torch.Tensor]) -> object:
    """Runs ``source`` in a new interpreter on ``inputs``: what its function returns."""
    (tmp_path / "program.py").write_text(source)
    torch.save(inputs, tmp_path / "inputs.pt")
    code = (
        "import runpy, torch\n"
        f"fn = runpy.run_path('program.py')[{fn_name!r}]\n"
        "with torch.no_grad():\n"
        "    out = fn(*torch.load('inputs.pt'))\n"
        "torch.save(out, 'out.pt')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(tmp_path / "out.pt")


def test_the_execution_trace_runs_on_its_own(tmp_path: Path) -> None:
    jf = thunder.jit(_model)
    x, w = torch.randn(3, 4), torch.randn(5, 4)
    with torch.no_grad():
        expected = jf(x, w)
    trace = thunder.last_traces(jf)[-1]
    source = trace.python(standalone=True)
    assert "torch_ops = types.SimpleNamespace(" in source  # bound, not left to a context
    assert source.rstrip().endswith(trace.python(subsymbol_depth=0).rstrip())
    torch.testing.assert_close(_run_fresh(tmp_path, source, trace.fn_name, [x, w]), expected)


def test_forward_and_backward_traces_run_on_their_own(tmp_path: Path) -> None:
    jf = thunder.jit(_model)
    x, w = torch.randn(3, 4), torch.randn(5, 4, requires_grad=True)
    out = jf(x, w)
    (grad,) = torch.autograd.grad(out, w, torch.ones_like(out))
    forward, backward = thunder.last_traces(jf)[-1], thunder.last_backward_traces(jf)[-1]
    (tmp_path / "forward.py").write_text(forward.python(standalone=True))
    (tmp_path / "backward.py").write_text(backward.python(standalone=True))
    torch.save([x, w.detach()], tmp_path / "inputs.pt")
    code = (
        "import runpy, torch\n"
        f"fw = runpy.run_path('forward.py')[{forward.fn_name!r}]\n"
        f"bw = runpy.run_path('backward.py')[{backward.fn_name!r}]\n"
        "with torch.no_grad():\n"
        "    (out,), saved = fw(*torch.load('inputs.pt'))\n"
        "    grads = bw(*saved, torch.ones_like(out))\n"
        "torch.save((out, grads), 'out.pt')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got_out, got_grads = torch.load(tmp_path / "out.pt")
    torch.testing.assert_close(got_out, out.detach())
    torch.testing.assert_close(got_grads[1], grad)


def test_fusion_regions_are_recreated_from_their_source() -> None:
    """A region prints as its function and, by default, its ``torch.compile`` wrapping; with
    ``compile_regions=False`` as the plain function (run by its torch calls)."""
    from thunder_executors.torchcompile import CompiledRegion

    def region(a: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.sin(a),)

    region.__thunder_source__ = "def region(a):\n  return (torch.sin(a),)\n"  # type: ignore[attr-defined]
    compiled = CompiledRegion("", region, {"dynamic": False}, background=False)
    a = TensorProxy("a", shape=(2,), dtype=torch.float32, device="cpu")
    out = TensorProxy("t0", shape=(2,), dtype=torch.float32, device="cpu")
    sym = Symbol("fusion0", None, module="torchcompile", impl=compiled, id="torchcompile::fusion0")
    body = [sym.bind(a, output=(out,)), prims.python_return.bind((out,), output=None)]
    trace = Trace("program", args=(a,), bound_symbols=body)
    text = standalone_python(trace)
    assert "def torchcompile_fusion0(a):" in text
    assert (
        "fusion0=torch.compile(torchcompile_fusion0, dynamic=False, "
        "options={'emulate_precision_casts': True})" in text
    )
    plain = standalone_python(trace, compile_regions=False)
    assert "fusion0=torchcompile_fusion0," in plain and "torch.compile" not in plain
    namespace: dict[str, object] = {}
    exec(plain, namespace)
    x = torch.randn(2)
    (y,) = namespace["program"](x)  # type: ignore[operator]
    torch.testing.assert_close(y, torch.sin(x))


def test_a_value_without_an_importable_path_is_named() -> None:
    a = TensorProxy("a", shape=(2,), dtype=torch.float32, device="cpu")
    out = TensorProxy("t0", shape=(2,), dtype=torch.float32, device="cpu")
    sym = Symbol("twice", None, module="my_ex", impl=lambda t: t * 2, id="my_ex::twice")
    body = [sym.bind(a, output=out), prims.python_return.bind(out, output=None)]
    trace = Trace("program", args=(a,), bound_symbols=body)
    with pytest.raises(StandaloneError, match=r"my_ex\.twice .*<lambda>.* no importable path"):
        trace.python(standalone=True)
    assert "my_ex.twice(a)" in trace.python()  # printing as before is unaffected


def test_an_nvfuser_region_prints_as_its_torch_calls() -> None:
    """nvFuser builds its fusion from bound symbols at run time: a printed program runs the
    region's torch calls (checked here on CPU prims: nothing of nvFuser is needed)."""
    from thunder_executors.nvfuser_executor import NvFuserRegion
    from thunder_ir import ops as ltorch
    from thunder_ir import trace_function

    traced = trace_function(lambda x: ltorch.mul(ltorch.sin(x), 2.0), torch.randn(3))
    region = NvFuserRegion(traced.bound_symbols[:-1], traced.args, [traced.return_value])
    fn, wrapper = region.__thunder_standalone__()
    assert wrapper is None and "run here by its torch calls" in fn.__thunder_source__  # type: ignore[attr-defined]
    x = torch.randn(3)
    (y,) = fn(x)
    torch.testing.assert_close(y, torch.sin(x) * 2)
    a = TensorProxy("a", shape=(3,), dtype=torch.float32, device="cpu")
    out = TensorProxy("out", shape=(3,), dtype=torch.float32, device="cpu")
    sym = Symbol("nvFusion0", None, module="nvfuser", impl=region, id="nvfuser::nvFusion0")
    body = [sym.bind(a, output=(out,)), prims.python_return.bind((out,), output=None)]
    text = standalone_python(Trace("program", args=(a,), bound_symbols=body))
    assert "nvFusion0=nvfuser_nvFusion0," in text
    namespace: dict[str, object] = {}
    exec(text, namespace)
    (y,) = namespace["program"](x)  # type: ignore[operator]
    torch.testing.assert_close(y, torch.sin(x) * 2)
