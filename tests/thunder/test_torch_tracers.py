"""PyTorch's tracers given a ``ThunderModule`` record the module it wraps (thunder/torch_tracers.py):
``torch.jit.trace`` (and so ``SummaryWriter.add_graph``), ``torch.export.export`` (strict or not,
parameters under the names of ``jm.state_dict()``) and ``torch.compile``. Thunder compiles
nothing while they run, and the jitted module is unchanged afterwards."""

from __future__ import annotations

import pytest
import torch

import thunder


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.GELU())


def _still_jitted(jm: torch.nn.Module, model: torch.nn.Module) -> None:
    misses = thunder.cache_misses(jm)
    x = torch.randn(4, 8)
    torch.testing.assert_close(jm(x), model(x))
    assert thunder.cache_misses(jm) + thunder.cache_hits(jm) > misses
    assert [n for n, _ in jm.named_modules()] == [n for n, _ in model.named_modules()]


def test_torch_jit_trace_records_the_wrapped_module() -> None:
    model = _model().eval()
    jm = thunder.jit(model)
    x = torch.randn(4, 8)
    traced = torch.jit.trace(jm, x, check_trace=False)
    assert thunder.cache_misses(jm) == 0  # thunder compiled nothing while traced
    torch.testing.assert_close(traced(x), model(x))
    assert "aten::linear" in str(traced.inlined_graph)
    _still_jitted(jm, model)


@pytest.mark.parametrize("strict", [False, True], ids=["non-strict", "strict"])
def test_torch_export_exports_the_wrapped_module(strict: bool) -> None:
    model = _model().eval()
    jm = thunder.jit(model)
    x = torch.randn(4, 8)
    ep = torch.export.export(jm, (x,), strict=strict)
    assert thunder.cache_misses(jm) == 0
    assert set(ep.state_dict) == set(jm.state_dict()) == set(model.state_dict())
    signature = ep.graph_signature
    assert set(signature.parameters) == {n for n, _ in model.named_parameters()}
    assert {"1.running_mean", "1.running_var"} <= set(signature.buffers)
    assert set(signature.buffers) <= {n for n, _ in model.named_buffers()}
    torch.testing.assert_close(ep.module()(x), model(x))
    _still_jitted(jm, model)


def test_torch_compile_compiles_the_wrapped_module() -> None:
    model = _model().eval()
    jm = thunder.jit(model)
    compiled = torch.compile(jm, backend="eager", fullgraph=True)  # dynamo, without inductor
    x = torch.randn(4, 8)
    torch.testing.assert_close(compiled(x), model(x))
    assert thunder.cache_misses(jm) == 0
    _still_jitted(jm, model)


def test_summary_writer_add_graph(tmp_path: object) -> None:
    tensorboard = pytest.importorskip("torch.utils.tensorboard")
    model = _model().eval()
    jm = thunder.jit(model)
    with tensorboard.SummaryWriter(str(tmp_path)) as writer:
        writer.add_graph(jm, torch.randn(4, 8))
    _still_jitted(jm, model)
