"""Every ``python`` block of README.md runs as written, in a fresh interpreter from a temporary
directory (``readme_blocks.py``; ``.ci/install_check`` runs the same blocks in a venv holding
only torch and the built wheels)."""

from __future__ import annotations

import sys

import pytest
from readme_blocks import NOT_RUN, README, python_blocks, run_blocks

BLOCKS = python_blocks(README.read_text())


def test_the_readme_blocks_are_found() -> None:
    codes = [b.code for b in BLOCKS]
    assert len(codes) >= 5, codes
    for expected in ("thunder.jit(", "thunder.compile(", "thunder.distributed.", "thunder.Recipe"):
        assert any(expected in c for c in codes), expected


def test_blocks_not_run_say_why_and_are_few() -> None:
    not_run = [b for b in BLOCKS if b.not_run_reason is not None]
    assert all(b.not_run_reason for b in not_run), f"{NOT_RUN} needs a reason"
    assert len(not_run) <= 1, [b.line for b in not_run]


def test_blocks_are_parsed_with_their_not_run_marker() -> None:
    text = "x\n```python\n# not run: needs 2 ranks\nprint(1)\n```\n```python\nprint(2)\n```\n"
    first, second = python_blocks(text)
    assert (first.line, first.not_run_reason, second.not_run_reason) == (2, "needs 2 ranks", None)
    assert second.code == "print(2)\n"


@pytest.mark.slow
def test_every_readme_block_runs() -> None:
    failures = run_blocks(BLOCKS, sys.executable)
    assert not failures, "\n".join(failures)
