"""``python -m benchmarks training`` keeps running: a row per configuration, gradients checked
against eager, and ``thunder.compile``'s row timed once each of its regions has chosen between
its compiled program and its torch calls (before that, half its calls run the torch calls); each
configuration in a process of its own."""

from __future__ import annotations

import importlib
import re
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.slow
def test_thunder_compile_is_timed_after_its_regions_chose(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Importable by name: each configuration runs in a spawned process, which imports it.
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    bench = importlib.import_module("training")
    argv = ["training.py", "--quick", "--layers", "1", "--batch", "1", "--threads", "1"]
    monkeypatch.setattr(sys, "argv", argv)
    bench.main()
    rows = {
        cells[0]: cells[1:]
        for line in capsys.readouterr().out.splitlines()
        if len(cells := re.split(r"\s{2,}", line.strip())) > 2 and cells[0] != "ms/step"
    }
    assert "eager" in rows and "thunder (torch)" in rows, rows
    for name, (ms, ratio, *_) in rows.items():
        assert float(ms) > 0 and float(ratio) > 0, (name, ms, ratio)
    if "thunder.compile" not in rows:
        pytest.skip("thunder.compile has no background-compiling executor here")
    note = rows["thunder.compile"][-1]
    chose = re.search(r"regions chose after \d+ more steps: (.*)$", note)
    assert chose, note
    kinds = {re.sub(r" x\d+$", "", kind) for kind in chose.group(1).split(", ")}
    assert kinds <= {"compiled", "torch calls"}, note
