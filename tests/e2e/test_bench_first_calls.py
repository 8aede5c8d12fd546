"""``python -m benchmarks first_calls`` keeps running: a row per configuration and cache state,
each process's logits checked against eager (a mismatch is a FAIL row)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "first_calls.py"


def test_rows_for_thunder_compile_cold_and_warm_and_thunder_jit(
    capsys: pytest.CaptureFixture,
) -> None:
    spec = importlib.util.spec_from_file_location("bench_first_calls", BENCH_PATH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    bench.main(["--layers", "1", "--hidden", "64", "--seq", "8", "--repeat", "3",
                "--configs", "thunder.compile,thunder.jit"])  # fmt: skip
    rows = [
        line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("llama")
    ]
    assert [(r[3], r[4]) for r in rows] == [
        ("thunder.compile", "cold"), ("thunder.compile", "warm"), ("thunder.jit", "cold")
    ], rows  # fmt: skip
    for r in rows:
        first, new_seq, fused, settled, steady = r[5:10]
        assert float(first) > 0 and float(new_seq) > 0 and steady.endswith("x"), r
        assert (fused == "-") == (settled == "-") == (r[3] == "thunder.jit"), r
        assert settled == "-" or int(settled) >= 0, r
