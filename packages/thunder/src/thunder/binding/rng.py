"""Random-generator state inside a jitted program.

``torch.random.fork_rng()`` records ``ltorch.get_rng_state`` on entering and
``ltorch.set_rng_state`` on leaving (the CPU generator and the CUDA devices fork_rng would
fork), so draws inside leave the outer stream as eager does; ``torch.manual_seed(n)`` is an op
run on every call. ``torch.get_rng_state``/``set_rng_state`` are ops themselves (their torch
names): the state is read when the program runs, never a constant of it. A ``torch.Generator``
found outside the program (an argument: an input; a global or attribute: guarded by
identity) is the object the compiled program draws from; one made inside is refused
(``refuse_generators``): it would be baked into the compiled program. A generator argument the
cache key covers (by type and device) is an input of the computation (``generators_as_inputs``):
one program serves a fresh generator on every call and holds none."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, Any

import torch

from thunder.binding.state import Guard, template_leaves
from thunder.errors import RandomStateError, RunsEagerly
from thunder_ir import ops as ltorch
from thunder_ir.ops.random_state import GUARDED_GENERATORS, draws_from_own_generator
from thunder_ir.proxies import GeneratorProxy
from thunder_ir.pytree import tree_iter, tree_map
from thunder_ir.symbol import BoundSymbol

if TYPE_CHECKING:
    from thunder.binding.binder import Binder

__all__ = [
    "drawing_from",
    "generators_as_inputs",
    "refuse_generator_state",
    "refuse_generators",
    "rng_lookasides",
]


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


@contextlib.contextmanager
def drawing_from(generators: AbstractSet[int]) -> Iterator[None]:
    """While tracing: the generators found outside the program (filled in as they are found)."""
    token = GUARDED_GENERATORS.set(generators)
    try:
        yield
    finally:
        GUARDED_GENERATORS.reset(token)


def refuse_generators(name: str, args: Any, kwargs: Any) -> None:
    """Raises ``RandomStateError`` where a random op is given a ``torch.Generator`` that is
    neither a default one nor one found outside the program (guarded by identity, so the
    compiled program draws from the caller's object): one made inside the program would be a
    constant of it."""
    if draws_from_own_generator(tree_iter((tuple(args), dict(kwargs)))):
        raise RandomStateError(
            f"thunder.jit: {name}(generator=...) with a torch.Generator made inside the "
            "jitted function is not supported: the compiled program would keep drawing "
            "from the generator seen when it was traced. Pass the generator in (or read it "
            "from a global or an attribute), draw from the default generator "
            "(seeded with torch.manual_seed, or saved and restored with torch.get_rng_state/"
            "set_rng_state or torch.random.fork_rng inside the function), or make the call "
            "outside the jitted function and pass its result in"
        )


# Methods of torch.Generator that read or set its seed or state (``torch.seed()``,
# ``torch.initial_seed()`` call them on the default generator).
_GENERATOR_STATE_METHODS = frozenset(
    {"seed", "initial_seed", "manual_seed", "get_state", "set_state", "graphsafe_get_state",
     "graphsafe_set_state", "clone_state", "get_offset", "set_offset"}
)  # fmt: skip


def refuse_generator_state(method: str) -> None:
    """Raises ``RunsEagerly`` for a method of a ``torch.Generator`` that reads or sets its seed
    or state: traced, its result would be a constant of the program and its write made once
    (torch.compile folds ``torch.seed()`` too), where eager makes them on every call."""
    if method in _GENERATOR_STATE_METHODS:
        raise RunsEagerly(
            f"calls torch.Generator.{method} (torch.seed(), torch.initial_seed() call it), "
            "which reads or sets a random generator's seed or state on every call"
        )


def generators_as_inputs(
    binder: Binder, recorded: list[BoundSymbol], template: Any
) -> list[BoundSymbol]:
    """Once the program is traced: each generator argument the cache key covers becomes an input
    of the computation (a ``GeneratorProxy`` the recorded draws take in its place), so the
    program draws from the generator each call passes and keeps none. One the program also
    reached another way (a global, returned or stored as an object) stays the object it drew
    from, its path guarded by identity. Returns ``recorded`` with the same replacements."""
    found = binder.inputs.generator_args
    if not found:
        return recorded
    trace = binder.trace
    kept = {id(g.expected) for g in binder.facts.guards.values() if g.kind == "is"}
    outside = [template, *(w.value for w in binder.effects.writes)]
    kept.update(id(x) for x in template_leaves(outside) if isinstance(x, torch.Generator))
    proxies: dict[int, GeneratorProxy] = {}
    for key, (generator, access) in found.items():
        if key in kept:
            binder.facts.guards[access] = Guard(access, "is", generator)
            continue
        proxy = GeneratorProxy(binder._name_for(access), device=generator.device)
        proxies[key] = proxy
        binder.inputs.in_order.append((proxy, access))
        binder.paths.access_of.pop(key, None)  # (the traced program's objects would hold it)
    if not proxies:
        return recorded
    trace.args = tuple(p for p, _ in binder.inputs.in_order)
    replaced: dict[int, BoundSymbol] = {}

    def swap(x: Any) -> Any:
        return proxies.get(id(x), x) if isinstance(x, torch.Generator) else x

    def rewrite(b: BoundSymbol) -> BoundSymbol:
        done = replaced.get(id(b))
        if done is not None:
            return done
        subsymbols = tuple(map(rewrite, b.subsymbols))
        if any(isinstance(x, torch.Generator) for x in b.flat_args) or any(
            s is not t for s, t in zip(subsymbols, b.subsymbols)
        ):
            new = b.replace(
                args=tree_map(swap, b.args), kwargs=tree_map(swap, b.kwargs), subsymbols=subsymbols
            )
        else:
            new = b
        replaced[id(b)] = new
        return new

    trace.bound_symbols[:] = map(rewrite, trace.bound_symbols)
    return list(map(rewrite, recorded))
