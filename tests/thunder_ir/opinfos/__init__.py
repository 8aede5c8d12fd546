"""The OpInfo table: every torch-language op under test, gathered from the family modules."""

from __future__ import annotations

import importlib
import pkgutil

from opinfos._base import ErrorInput, OpInfo, SampleInput, make_tensor

__all__ = ["ALL_OPINFOS", "ErrorInput", "OpInfo", "SampleInput", "make_tensor"]


def _collect() -> list[OpInfo]:
    out: list[OpInfo] = []
    for mod in pkgutil.iter_modules(__path__):
        if mod.name.startswith("_"):
            continue
        m = importlib.import_module(f"opinfos.{mod.name}")
        out.extend(m.OPINFOS)
    return out


ALL_OPINFOS = _collect()
