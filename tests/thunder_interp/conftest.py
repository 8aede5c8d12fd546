"""Configuration of the interpreter tests: blocks are compiled early (see block_thresholds)."""

from __future__ import annotations

import pytest
from block_thresholds import EARLY_THRESHOLDS, set_thresholds


@pytest.fixture(autouse=True)
def _early_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    set_thresholds(monkeypatch, EARLY_THRESHOLDS)
