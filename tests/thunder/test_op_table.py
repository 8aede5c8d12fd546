"""``./dev ops`` (``python -m thunder.op_table``): one row per op, with where its meta and grad rule
are and how each executor takes it."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

from thunder.op_table import all_ops, op_rows, source_location
from thunder_ir import ops as ltorch
from thunder_ir import prims
from thunder_transforms.autodiff import VJP_RULES


def _line_of(location: str) -> tuple[str, int]:
    path, _, line = location.rpartition(":")
    return path, int(line)


def _source_line(module_file: str, location: str, offset: int = 0) -> str:
    """The text at ``location`` (plus ``offset`` lines) in the file ``module_file`` names."""
    path, line = _line_of(location)
    assert Path(module_file).as_posix().endswith(path), (module_file, path)
    return Path(module_file).read_text().splitlines()[line - 1 + offset]


def test_dev_ops_prints_softmax_row() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "thunder.op_table", "softmax"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    header, *rows = out.splitlines()
    assert header.split()[:3] == ["op", "meta", "grad"]
    assert {"torch", "torch_ops", "triton", "torchcompile", "nvfuser"} <= set(header.split())
    (row,) = [r for r in rows if r.split()[0] == "ltorch.softmax"]
    cells = row.split()
    meta, grad = cells[1], cells[2]
    assert meta.startswith("thunder_ir/ops/nn_activations.py:")
    assert grad.startswith("thunder_transforms/autodiff/rules_nn.py:")
    assert "runs if softmax_checker" in row  # torch_ops keeps it whole
    assert "runs if _softmax_checker" in row  # triton's kernel


def test_softmax_row_points_at_its_definitions() -> None:
    (row,) = op_rows(["ltorch.softmax"])
    assert row.op == "ltorch.softmax"
    meta_file = inspect.getsourcefile(inspect.unwrap(ltorch.softmax.meta))
    assert meta_file is not None
    # the line of its declaration: ``@torchop(...)`` then ``def softmax``
    assert _source_line(meta_file, row.meta).startswith("@torchop(")
    assert any(_source_line(meta_file, row.meta, k).startswith("def softmax(") for k in range(1, 4))
    rule = VJP_RULES[ltorch.softmax]
    rule_file = inspect.getsourcefile(rule)
    assert rule_file is not None
    assert "register_vjp(ltorch.softmax" in _source_line(rule_file, row.grad)
    assert row.claims["torch_ops"] == "runs if softmax_checker"
    assert row.claims["triton"] == "runs if _softmax_checker"
    assert row.claims["torch"] == ""  # a composite: the torch executor runs its prims
    assert row.claims["torchcompile"] == "fuses its decomposition"
    assert row.claims["nvfuser"] == ""


def test_prims_and_composites_rows() -> None:
    rows = {r.op: r for r in op_rows(["add", "exp", "gelu", "abs"])}
    assert {"prims.add", "ltorch.add", "prims.exp", "ltorch.exp", "ltorch.gelu"} <= set(rows)
    add = rows["prims.add"]
    assert add.meta == source_location(prims.add.meta)
    assert add.meta.startswith("thunder_ir/prims/elementwise.py:")
    assert add.grad.startswith("thunder_transforms/autodiff/rules_elementwise.py:")
    assert add.claims["torch"] == "runs"
    assert add.claims["nvfuser"] == "fuses (CUDA tensors)"
    assert add.claims["torchcompile"] == "fuses"
    assert rows["ltorch.abs"].grad == "decomposition"  # no rule of its own
    # a rule that applies only when its checker says so (add with alpha rounds as eager does)
    assert rows["ltorch.add"].grad.endswith(" if _scaled_by_alpha")
    assert rows["ltorch.gelu"].claims["torch_ops"] == "runs if gelu_checker"
    # a prim with effects: the torch executor runs it, no fusion region takes it
    (copy,) = op_rows(["prims.copy_"])
    assert copy.claims["torch"] == "runs" and copy.claims["torchcompile"] == ""


def test_every_op_has_a_row_and_names_select_by_substring() -> None:
    ops = set(all_ops())
    assert set(prims.ALL_PRIMS.values()) <= ops
    assert set(ltorch.ALL_OPS.values()) <= ops
    assert set(VJP_RULES) <= ops
    pools = {r.op for r in op_rows(["max_pool"])}  # no op is named that: those whose name holds it
    assert {"ltorch.max_pool1d", "ltorch.max_pool2d", "ltorch.max_pool3d"} <= pools
    assert all("max_pool" in op for op in pools)
    assert op_rows(["no_such_op"]) == []
