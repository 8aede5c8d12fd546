"""``./dev bench models`` keeps running: its main on one model, and its measurement of a model
that compiles (figures) and of one that does not (a FAIL row)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import torch

BENCH_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "models.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_models", BENCH_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_main_on_one_model(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    bench = _bench()
    argv = ["models.py", "--models", "bert", "--repeat", "1", "--no-torch-compile", "--in-process"]
    monkeypatch.setattr(sys, "argv", argv)
    bench.main()
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("model"))
    assert "thunder first" in header and "ops alone" in header and "torch.compile" not in header
    row = next(line for line in lines if line.startswith("bert "))
    assert " ms " in row
    assert row.rstrip().endswith("ok") or "FAIL: " in row


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": torch.tanh(self.linear(x))}


class _Unsupported(_Tiny):
    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        out = torch.empty_like(x)
        torch.xlogy(x, x, out=out)  # thunder refuses out= of a callable it does not mirror
        return {"logits": self.linear(out)}


def _zoo(model_cls: type[torch.nn.Module]) -> SimpleNamespace:
    return SimpleNamespace(
        build=lambda name: model_cls().eval(),
        inputs=lambda name, seed: {
            "x": torch.randn(2, 4, generator=torch.Generator().manual_seed(seed))
        },
        logits=lambda out: out["logits"],
    )


def test_row_of_a_model_that_compiles() -> None:
    bench = _bench()
    row = bench.measure(_zoo(_Tiny), "tiny", ["thunder"], repeat=2)
    assert not row["error"], row["error"]
    assert row["first"]["thunder"] > 0 and row["ratio"]["thunder"] > 0
    assert row["ops"] > 0  # the computation alone
    bench.print_table([row], ["thunder"])


def test_row_of_a_model_that_fails(capsys: pytest.CaptureFixture) -> None:
    bench = _bench()
    row = bench.measure(_zoo(_Unsupported), "bad", ["thunder"], repeat=1)
    assert set(row["error"]) == {"thunder"}
    bench.print_table([row], ["thunder"])
    out = capsys.readouterr().out
    assert "FAIL: " in out and "(thunder)" in out
