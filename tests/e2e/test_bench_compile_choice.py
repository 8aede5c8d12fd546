"""``python -m benchmarks compile_choice`` keeps running: a row per model, the logits checked
against eager, the prologue's time per call, and for each fusion region what it runs after the
measurement."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def test_a_row_for_bert(capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    spec = importlib.util.spec_from_file_location(
        "bench_compile_choice", BENCHMARKS / "compile_choice.py"
    )
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.main(["--models", "bert", "--repeat", "3", "--no-torch-compile"])
    rows = [
        line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("bert")
    ]
    assert len(rows) == 1, rows
    _, compiled, jitted, torch_compiled, against_torch_compile, prologue_us, *runs = rows[0]
    assert compiled.endswith("x") and jitted.endswith("x")
    assert 0 < float(prologue_us) < 1e5
    assert torch_compiled == against_torch_compile == "-"  # left out: torch.compile takes ~20 s
    assert runs and set(" ".join(runs).split(", ")) <= {"compiled", "torch calls"}, runs
