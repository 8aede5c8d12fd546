"""The main job (``./dev demo``) runs: inference and a training step checked against eager."""

from __future__ import annotations

import sys

from thunder import demo


def test_demo_runs(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["demo", "--layers", "1", "--calls", "1"])
    demo.main()
    out = capsys.readouterr().out
    assert "def computation(idx" in out
    assert "match eager PyTorch" in out
    assert "def computation_backward(" in out
    assert "train step" in out
