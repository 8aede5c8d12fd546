"""Random-generator state inside a jitted program.

``torch.random.fork_rng()`` records ``ltorch.get_rng_state`` on entering and
``ltorch.set_rng_state`` on leaving (the CPU generator and the CUDA devices fork_rng would
fork), so draws inside leave the outer stream as eager does; ``torch.manual_seed(n)`` is an op
run on every call. ``torch.get_rng_state``/``set_rng_state`` are ops themselves (their torch
names): the state is read when the program runs, never a constant of it. A ``torch.Generator``
object other than the default ones is refused (``generator_refusal``): it would be baked into
the compiled program."""

from __future__ import annotations

from typing import Any

import torch

from thunder.errors import RandomStateError
from thunder_ir import ops as ltorch
from thunder_ir.pytree import tree_iter

__all__ = ["refuse_generators", "rng_lookasides"]


class _ForkedRng:
    """The context manager ``torch.random.fork_rng`` returns, recording instead of running."""

    def __init__(self, devices: list[str] | None) -> None:
        self.devices = devices  # None: not forked (enabled=False or the meta device)
        self.states: list[tuple[str, Any]] = []

    def __enter__(self) -> None:
        if self.devices is not None:
            self.states = [(d, ltorch.get_rng_state(d)) for d in self.devices]

    def __exit__(self, *exc: Any) -> None:
        for device, state in self.states:
            ltorch.set_rng_state(state, device)


def _fork_rng(
    devices: Any = None,
    enabled: bool = True,
    _caller: str = "fork_rng",
    _devices_kw: str = "devices",
    device_type: Any = None,
) -> _ForkedRng:
    if not enabled or device_type == "meta":
        return _ForkedRng(None)
    if device_type not in (None, "cuda"):
        raise RandomStateError(
            f"thunder.jit: torch.random.fork_rng(device_type={device_type!r}) is not supported "
            "inside a jitted function (CPU and CUDA generators only); fork outside the function"
        )
    if devices is None:
        devices = range(torch.cuda.device_count()) if torch.cuda.is_available() else ()
    return _ForkedRng(["cpu", *(f"cuda:{int(d)}" for d in devices)])


def _manual_seed(seed: Any) -> torch.Generator:
    ltorch.manual_seed(seed)
    return torch.default_generator


def rng_lookasides() -> dict[Any, Any]:
    return {
        torch.random.fork_rng: _fork_rng,
        torch.manual_seed: _manual_seed,
        torch.random.manual_seed: _manual_seed,
    }


def _is_default_generator(g: torch.Generator) -> bool:
    if g is torch.default_generator:
        return True
    return torch.cuda.is_available() and any(g is d for d in torch.cuda.default_generators)


def refuse_generators(name: str, args: Any, kwargs: Any) -> None:
    """Raises ``RandomStateError`` where a random op is given a ``torch.Generator`` of its own:
    the recorded call would keep that object (and a later call's generator would be ignored)."""
    for x in tree_iter((tuple(args), dict(kwargs))):
        if isinstance(x, torch.Generator) and not _is_default_generator(x):
            raise RandomStateError(
                f"thunder.jit: {name}(generator=...) with a torch.Generator object is not "
                "supported inside a jitted function: the compiled program would keep drawing "
                "from the generator seen when it was traced. Draw from the default generator "
                "(seeded with torch.manual_seed, or saved and restored with torch.get_rng_state/"
                "set_rng_state or torch.random.fork_rng inside the function), or make the call "
                "outside the jitted function and pass its result in"
            )
