"""Devices of the IR and their mapping to torch's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Device", "cpu", "default_device", "to_device", "to_torch_device"]

_KNOWN_TYPES = ("cpu", "cuda", "meta", "mps", "xpu")


@dataclass(frozen=True, slots=True)
class Device:
    """A device: a type ("cpu", "cuda", "meta", ...) and an index (None for cpu and meta)."""

    type: str
    index: int | None = None

    def __post_init__(self) -> None:
        if self.type not in _KNOWN_TYPES:
            raise ValueError(f"unknown device type {self.type!r}; known: {', '.join(_KNOWN_TYPES)}")

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return (
            f'devices.Device("{self}")'
            if self.index is None
            else f'devices.Device("{self.type}", {self.index})'
        )


cpu = Device("cpu")


def to_device(x: Any) -> Device:
    """Normalizes a string ("cuda:0"), a torch.device or a Device."""
    if isinstance(x, Device):
        return x
    if isinstance(x, torch.device):
        return Device(x.type, x.index if x.type not in ("cpu", "meta") else None)
    if isinstance(x, str):
        typ, _, idx = x.partition(":")
        if typ == "cuda" and not idx:
            return Device("cuda", 0)
        return Device(typ, int(idx) if idx else None)
    if isinstance(x, int):  # the current accelerator's index; torch raises when there is none
        return to_device(torch.device(x))
    raise TypeError(f"expected a device, got {x!r}")


def default_device() -> Device:
    """torch's default device now (``torch.set_default_device``, ``with torch.device(...)``): where
    a factory given no device puts its tensor, as in eager. The jit keys its cache on it."""
    if not torch._C._len_torch_function_stack():  # (both set it with a torch function mode)
        return cpu
    return to_device(torch.get_default_device())


def to_torch_device(device: Device | str | torch.device) -> torch.device:
    d = to_device(device)
    return torch.device(d.type) if d.index is None else torch.device(d.type, d.index)
