"""``thunder.write_reproducer``: a folder whose ``run.py`` runs a compiled program in a fresh
process (inputs of the recorded shapes, dtypes and strides), compares it with the recorded
program run by eager torch, and times both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import thunder
from thunder.models.gpt import GPT, GPTConfig


def _run(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "run.py", "--runs", "2", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _gpt() -> torch.nn.Module:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32))


def test_a_training_program_reproduces_in_a_fresh_process(tmp_path: Path) -> None:
    jm = thunder.jit(_gpt())
    idx = torch.randint(0, 64, (2, 8))
    jm(idx).sum().backward()
    folder = thunder.write_reproducer(jm, tmp_path / "repro", args=(idx,))
    names = {p.name for p in folder.iterdir()}
    assert {"run.py", "forward.py", "backward.py", "eager.py", "manifest.json"} <= names
    assert {"README.md", "inputs.pt", "traces"} <= names
    stages = sorted(p.name for p in (folder / "traces").iterdir())
    assert "computation_00_recorded.py" in stages and "prologue_00_recorded.py" in stages
    assert any(s.startswith("backward_") for s in stages)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["name"] == "GPT" and manifest["differentiated"]
    assert manifest["inputs"][0] == {
        "name": "idx",
        "kind": "tensor",
        "shape": [2, 8],
        "stride": [8, 1],
        "dtype": "torch.int64",
        "device": "cpu",
        "requires_grad": False,
        "int_high": manifest["inputs"][0]["int_high"],
    }
    assert torch.equal(torch.load(folder / "inputs.pt")["idx"], idx)  # indices kept as they were
    assert len(manifest["cotangents"]) == 1 and manifest["versions"]["torch"] == torch.__version__
    done = _run(folder)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "OK: thunder's results agree with eager's" in done.stdout
    assert "forward + backward on cpu" in done.stdout


def test_an_inference_program_without_recorded_inputs(tmp_path: Path) -> None:
    """No call given: integers are random below the smallest dimension of the float inputs
    (valid token ids here), tensors contiguous."""
    model = _gpt()
    trained = thunder.jit(model)
    idx = torch.randint(0, 64, (1, 5))
    trained(idx).sum().backward()
    thunder.write_reproducer(trained, tmp_path / "repro", args=(idx,))  # replaced below
    jm = thunder.jit(model)
    with torch.no_grad():
        jm(idx)
    folder = thunder.write_reproducer(jm, tmp_path / "repro")
    assert not (folder / "backward.py").exists() and not (folder / "inputs.pt").exists()
    assert not any(p.name.startswith("backward_") for p in (folder / "traces").iterdir())
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["inputs"][0]["stride"] is None and manifest["inputs"][0]["int_high"] <= 64
    done = _run(folder)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "OK" in done.stdout and "forward on cpu" in done.stdout


def test_strides_of_the_call_are_reproduced(tmp_path: Path) -> None:
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a * b).sum(0) + a.contiguous().view(-1)[:6]

    jf = thunder.jit(f)
    a = torch.randn(6, 4).t()  # not contiguous
    jf(a, torch.randn(4, 6))
    folder = thunder.write_reproducer(jf, tmp_path / "repro", args=(a, torch.randn(4, 6)))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["inputs"][0]["stride"] == [1, 4]
    done = _run(folder)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]


def test_a_program_that_differs_from_eager_is_reported(tmp_path: Path) -> None:
    jf = thunder.jit(lambda x: torch.sin(x) + x)
    jf(torch.randn(3))
    folder = thunder.write_reproducer(jf, tmp_path / "repro")
    forward = folder / "forward.py"
    text = forward.read_text()
    assert "torch.add(" in text
    forward.write_text(text.replace("torch.add(", "torch.sub(", 1))  # a wrong execution trace
    done = _run(folder)
    assert done.returncode == 1
    assert "MISMATCH" in done.stdout and "output 0" in done.stdout


def test_a_gradient_that_differs_from_eager_is_reported(tmp_path: Path) -> None:
    """Gradients beyond the tolerance are judged against a float64 run of the reference: a
    wrong one is further from it than eager's and still reported."""
    jf = thunder.jit(lambda x, w: torch.tanh(x @ w).sum())
    jf(torch.randn(4, 3), torch.randn(3, 5, requires_grad=True))
    folder = thunder.write_reproducer(jf, tmp_path / "repro")
    backward = folder / "backward.py"
    text = backward.read_text()
    last = text.rindex("return (")
    # a returned gradient 1% off: beyond the tolerance, and far less accurate than eager's
    body, returned = text[:last], text[last:]
    names = returned[len("return (") : returned.index(")")].split(", ")
    wrong = next(n for n in names if n != "None")
    indent = body[body.rindex("\n") + 1 :]
    backward.write_text(f"{body}{wrong} = {wrong} * 1.01\n{indent}{returned}")
    done = _run(folder)
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    assert "MISMATCH" in done.stdout and "gradient of input" in done.stdout


def test_refuses_what_it_cannot_write() -> None:
    jf = thunder.jit(lambda x: x + 1)
    with pytest.raises(ValueError, match="nothing compiled yet"):
        thunder.write_reproducer(jf, "unused")
    jf(torch.randn(3))
    with pytest.raises(ValueError, match="does not serve this call"):
        thunder.write_reproducer(jf, "unused", args=(torch.randn(3, 3),))
