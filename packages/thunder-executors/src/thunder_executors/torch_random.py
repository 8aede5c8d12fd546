"""The torch executor's random draws and generator state: each is the torch call eager makes, so
one ``torch.manual_seed`` gives eager's numbers and leaves eager's state after the call."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from thunder_executors.torch_impls import drawn

__all__ = [
    "bernoulli",
    "bernoulli_like",
    "get_rng_state",
    "manual_seed",
    "randint",
    "replaying_rng",
    "set_rng_state",
]


def bernoulli(
    shape: Sequence[int],
    p: float,
    *,
    device: torch.device,
    dtype: torch.dtype,
    seed: Any = None,
    offset: Any = 0,
) -> torch.Tensor:
    """1 with probability ``p``: the draw of eager's CPU dropout (``bernoulli_`` in place)."""
    return drawn("bernoulli_", shape, (p,), device, dtype, seed, offset)


def bernoulli_like(like: torch.Tensor, p: float, *, dtype: torch.dtype) -> torch.Tensor:
    """Eager's CPU dropout draw: ``like``'s layout, filled in its memory order."""
    return torch.empty_like(like, dtype=dtype).bernoulli_(p)


def randint(
    shape: Sequence[int],
    low: int,
    high: int,
    *,
    device: torch.device,
    dtype: torch.dtype,
    seed: Any = None,
    offset: Any = 0,
) -> torch.Tensor:
    """Integers in [low, high): ``torch.randint``'s own kernel (``random_``)."""
    return drawn("random_", shape, (low, high), device, dtype, seed, offset)


def _default_generator(device: Any) -> torch.Generator:
    dev = torch.device(device)
    if dev.type == "cpu":
        return torch.default_generator
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    return torch.cuda.default_generators[index]


def get_rng_state(device: Any = "cpu") -> torch.Tensor:
    return _default_generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "cpu") -> None:
    _default_generator(device).set_state(new_state)


def manual_seed(seed: int) -> None:
    torch.manual_seed(seed)


@contextmanager
def replaying_rng(state: torch.Tensor | None, device: Any) -> Iterator[None]:
    """Draws made inside see ``state`` (the generator's state before the forward's draw), and the
    generator is left as it was: a backward that runs a random op again gets the forward's
    numbers without moving the program's stream."""
    if state is None:
        yield
        return
    gen = _default_generator(device)
    saved = gen.get_state()
    gen.set_state(state)
    try:
        yield
    finally:
        gen.set_state(saved)
