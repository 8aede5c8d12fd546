"""When the interpreter compiles basic blocks, as the interpreter tests set it.

The interpreter compiles a function's basic blocks only once they have run often (compiling
pays off for hot code only), later than most snippets of these tests loop. The tests run with
blocks compiled after a couple of runs (``conftest.py``), so that the generated blocks and
superblocks, not only the single instruction ops, run the snippets.
"""

from __future__ import annotations

import pytest

import thunder_interp._blocks as _blocks
import thunder_interp._runtime as _runtime

__all__ = ["DEFAULT_THRESHOLDS", "EARLY_THRESHOLDS", "set_thresholds"]

# (WARM_THRESHOLD, HOT_THRESHOLD, SUPERBLOCK_THRESHOLD) as the interpreter sets them.
DEFAULT_THRESHOLDS = (
    _runtime.WARM_THRESHOLD,
    _blocks.HOT_THRESHOLD,
    _blocks.SUPERBLOCK_THRESHOLD,
)
# What the tests use: blocks found after two uses of their code, each compiled once it ran
# three times, the entry's superblock when the entry runs a third time (as with the defaults,
# the superblock may come before the blocks it holds are compiled on their own).
EARLY_THRESHOLDS = (2, 3, 3)


def set_thresholds(monkeypatch: pytest.MonkeyPatch, thresholds: tuple[int, int, int]) -> None:
    warm, hot, superblock = thresholds
    monkeypatch.setattr(_runtime, "WARM_THRESHOLD", warm)
    monkeypatch.setattr(_blocks, "HOT_THRESHOLD", hot)
    monkeypatch.setattr(_blocks, "SUPERBLOCK_THRESHOLD", superblock)
