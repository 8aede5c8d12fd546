"""``./dev bench ops`` keeps running: its main on a few ops and a layer (the overhead line, the
table, the summary), and broken entries that become failure rows instead of stopping the run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

BENCH_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "ops.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_ops", BENCH_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_main_on_a_few_ops(capsys: pytest.CaptureFixture) -> None:
    bench = _bench()
    threads = torch.get_num_threads()
    bench.main(["--quick", "--all", "--repeat", "5", "--size", "4096", "--ops",
                "sin,add,relu,nn.LayerNorm"])  # fmt: skip
    assert torch.get_num_threads() == threads  # restored
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("per-call overhead: ") and " us " in line for line in lines)
    header = next(line for line in lines if line.startswith("op "))
    for column in ("eager us", "thunder us", "ratio", "ovh us", "adj", "calls", "check"):
        assert column in header
    for name in ("sin", "add", "relu", "nn.LayerNorm"):
        row = next(line for line in lines if line.startswith(f"{name} "))
        assert row.rstrip().endswith("ok") and " vs " in row, row
    assert lines[-1].startswith("summary: 4 measured (3 ops, 1 layers)"), lines[-1]
    assert lines[-1].endswith("0 failed")


def test_unknown_op_name_exits() -> None:
    bench = _bench()
    with pytest.raises(SystemExit, match="unknown op"):
        bench.main(["--quick", "--ops", "no_such_op"])


def _wrong_under_thunder(x: torch.Tensor) -> torch.Tensor:
    # libraries take their torch.compile paths while thunder traces: a wrong result on purpose
    return x + 2 if torch.compiler.is_compiling() else x + 1


def _untraceable(x: torch.Tensor) -> torch.Tensor:
    out = x.new_empty(0)
    torch.xlogy(x, x, out=out)  # thunder refuses an out= that eager resizes (it runs split)
    return out


def _broken_in_eager(x: torch.Tensor) -> torch.Tensor:
    return torch.mm(x[0], x)


def _wrong_when_scaled(x: torch.Tensor) -> torch.Tensor:
    return x + 2 if torch.compiler.is_compiling() and x.shape[0] >= 5 else x + 1


def test_broken_entries_are_failures_not_aborts(
    capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = _bench()
    # The scaled samples are always tried: on a loaded machine an eager call over the time
    # budget would skip them, and "scaled_only" would never meet its failing scale.
    monkeypatch.setattr(bench, "EAGER_BUDGET_S", 60.0)
    x = torch.randn(16, 16)

    def case(name: str, fn: object) -> object:
        return bench.Case(name, lambda: (fn, fn), lambda k: ((x,), {}))

    def no_sample() -> object:
        raise RuntimeError("no samples")

    cases = [
        case("wrong", _wrong_under_thunder),
        case("untraceable", _untraceable),
        case("broken_eager", _broken_in_eager),
        bench.Case("no_sample", lambda: (torch.sin, torch.sin), lambda k: no_sample()),
        bench.Case(  # wrong on the scaled sample only: measured on the unscaled one
            "scaled_only",
            lambda: (_wrong_when_scaled, _wrong_when_scaled),
            lambda k: ((torch.randn(3 * k, 3 * k),), {}),
            lambda: [4, 1],
        ),
        *bench.select(bench.op_cases(bench.load_opinfos(), 4096), "neg"),
    ]
    options = bench.parse_args(["--quick", "--repeat", "5", "--all"])
    rows = {r.name: r for r in bench.run(cases, options)}
    assert rows["wrong"].error.startswith("check: "), rows["wrong"].error
    assert rows["untraceable"].error.startswith("thunder: "), rows["untraceable"].error
    assert rows["broken_eager"].error.startswith("eager: RuntimeError"), rows["broken_eager"]
    assert rows["no_sample"].error.startswith("sample: RuntimeError: no samples")
    assert not rows["neg"].failed and rows["neg"].thunder > 0 and rows["neg"].calls >= 1
    scaled_only = rows["scaled_only"]
    assert not scaled_only.failed and scaled_only.input == "f32[3,3]", scaled_only
    assert scaled_only.note.startswith("unscaled sample; scaled: check: "), scaled_only.note
    out = capsys.readouterr().out
    assert "failures (4):" in out
    assert "  wrong f32[16,16]: check: " in out
    assert out.rstrip().splitlines()[-1].startswith("summary: 2 measured (2 ops, 0 layers)")
    assert out.rstrip().endswith("4 failed")


def test_scaling_keeps_indices_in_range_and_broadcasting() -> None:
    bench = _bench()
    a, index, b = torch.randn(3, 4), torch.tensor([[0, 2], [1, 0]]), torch.randn(1, 4)
    # the tensor that reaches the size first decides: 3k * 4k <= 1200
    assert bench._max_scale(((a, index, b), {}), 1200) == 10
    assert bench._scales(10) == [10, 5, 2, 1]
    big_a, big_index, big_b = bench.scale(((a, index, b), {}), 3)[0]
    assert big_a.shape == (9, 12) and big_b.shape == (1, 12) and big_index.shape == (6, 6)
    assert int(big_index.max()) == 2
