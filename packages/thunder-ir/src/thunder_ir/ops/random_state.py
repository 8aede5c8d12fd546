"""Reading and setting the state of torch's default random generators.

``torch.get_rng_state()`` is an op whose output is the state *when the program runs*, never a
constant of the trace; ``torch.set_rng_state(s)`` is an effect kept in program order with every
draw (``OpTag.RANDOM``). Executors run them as torch's own functions. ``torch.random.fork_rng``
is these two around its block (the jit's lookaside)."""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import Any

import torch

from thunder_ir import dtypes
from thunder_ir.devices import to_device
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.ops._registry import torchop
from thunder_ir.proxies import TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import check

__all__ = ["GUARDED_GENERATORS", "draws_from_own_generator"]

# The torch.Generator objects (by id) that the tracing run now in progress found outside the
# program and checks to be the same object on every call: a recorded call may draw from them
# (the compiled program then draws from the caller's object). Any other generator would be a
# constant of the program, and is refused.
GUARDED_GENERATORS: contextvars.ContextVar[AbstractSet[int]] = contextvars.ContextVar(
    "thunder_guarded_generators", default=frozenset()
)


def draws_from_own_generator(values: Iterable[Any]) -> bool:
    """Whether ``values`` hold a torch.Generator neither default nor guarded (see above)."""
    guarded = GUARDED_GENERATORS.get()
    return any(
        isinstance(x, torch.Generator) and not _is_default(x) and id(x) not in guarded
        for x in values
    )


def _is_default(g: torch.Generator) -> bool:
    if g is torch.default_generator:
        return True
    return torch.cuda.is_available() and any(g is d for d in torch.cuda.default_generators)


# Bytes of a generator's state: the CPU Mersenne twister, CUDA's Philox seed and offset.
_STATE_BYTES = {"cpu": 5056, "cuda": 16}


def _state_meta(device: Any) -> TensorProxy:
    dev = to_device(device)
    check(
        dev.type in _STATE_BYTES,
        lambda: f"thunder records the random state of CPU and CUDA generators only, not {dev}",
        UnsupportedOptionError,
    )
    size = _STATE_BYTES[dev.type]
    return TensorProxy(shape=(size,), dtype=dtypes.uint8, device=to_device("cpu"))


@torchop("torch.get_rng_state", "torch.random.get_rng_state", tags=(OpTag.RANDOM,))
def get_rng_state(device: Any = "cpu") -> TensorProxy:
    """The default generator's state of ``device`` (a CPU uint8 tensor, as torch returns it)."""
    return _state_meta(device)


@torchop("torch.cuda.get_rng_state", tags=(OpTag.RANDOM,))
def cuda_get_rng_state(device: Any = "cuda") -> TensorProxy:
    dev = to_device(device if not isinstance(device, int) else f"cuda:{device}")
    return get_rng_state(dev)  # type: ignore[no-any-return]


@torchop("torch.set_rng_state", "torch.random.set_rng_state", tags=(OpTag.RANDOM, OpTag.DONT_DCE))
def set_rng_state(new_state: Any, device: Any = "cpu") -> None:
    """Sets the default generator's state of ``device`` (what ``get_rng_state`` returned)."""
    check(
        isinstance(new_state, TensorProxy) and new_state.dtype == dtypes.uint8,
        "set_rng_state expects the uint8 tensor that get_rng_state returned",
        TypeError,
    )
    _state_meta(device)


@torchop("torch.cuda.set_rng_state", tags=(OpTag.RANDOM, OpTag.DONT_DCE))
def cuda_set_rng_state(new_state: Any, device: Any = "cuda") -> None:
    dev = to_device(device if not isinstance(device, int) else f"cuda:{device}")
    set_rng_state(new_state, dev)


@torchop(name="manual_seed", tags=(OpTag.RANDOM, OpTag.DONT_DCE))
def manual_seed(seed: Any) -> None:
    """``torch.manual_seed(seed)`` when the program runs: every device's default generator."""
    check(
        not isinstance(seed, TensorProxy),
        "manual_seed expects an integer seed, not a tensor",
        TypeError,
    )
