"""Recipes: what to give ``thunder.jit`` for a model, packaged in a reusable class.

A recipe says which lookasides, transforms, executors, one-op kernels and jit options a model
needs; ``thunder.compile(model, recipe=...)`` applies one or a list of them. Composition merges
each part in list order and refuses conflicts instead of letting one recipe silently override
another: two values for one jit option, two replacements for one function, transforms whose
declared order (``Transform.must_follow`` / ``must_precede``) the list violates.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from thunder.lookasides import Lookaside
from thunder_ir import Symbol, Transform

__all__ = ["BaseRecipe", "Operator", "RecipeSetup", "compose", "default_executors"]


class Operator:
    """A one-op kernel for one compile: ``op`` (an IR symbol, or a torch callable an IR op
    mirrors) runs as ``impl`` wherever ``checker`` (given the IR call's arguments) accepts the
    call. Returned by ``Recipe.setup_operators``; nothing is registered globally."""

    __slots__ = ("checker", "impl", "op")

    def __init__(
        self, op: Any, impl: Callable[..., Any], checker: Callable[..., bool] | None = None
    ) -> None:
        if not callable(impl):
            raise TypeError(f"Operator: impl must be callable, got {impl!r}")
        self.op, self.impl, self.checker = op, impl, checker

    def symbol(self) -> Symbol:
        """The IR symbol this kernel implements."""
        if isinstance(self.op, Symbol):
            return self.op
        from thunder_ir.ops import torch_symbol_map

        sym = torch_symbol_map().get(self.op)
        if sym is None:
            raise ValueError(
                f"Operator: {self.op!r} is neither an IR symbol nor a torch callable an IR op "
                "mirrors"
            )
        return sym


@dataclass(frozen=True)
class RecipeSetup:
    """What a recipe (or a composition of recipes) gives the jit."""

    lookasides: tuple[Lookaside, ...] = ()
    transforms: tuple[Transform, ...] = ()
    executors: tuple[Any, ...] = ()
    operators: tuple[Operator, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    sources: tuple[str, ...] = ()  # the recipes it came from, for error messages


class BaseRecipe:
    """A recipe: override ``validate`` and the ``setup_*`` methods you need. Each ``setup_*``
    returns a list (empty or None: nothing); ``setup_config`` a dict of ``thunder.jit`` options
    (``cache``, ``recompile_limit``, ...).

    ``setup(model)`` is the one method a recipe must not override: it validates the model and
    collects the parts (overriding it is an error when the class is created).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "setup" in cls.__dict__:
            raise TypeError(
                f"{cls.__qualname__} overrides Recipe.setup, which recipes must not override; "
                "override validate() and the setup_* methods instead"
            )

    def validate(self, model: Any) -> None:
        """Raises (with a message saying why) when this recipe does not apply to ``model``."""

    def setup_lookasides(self) -> Sequence[Lookaside] | None:
        return None

    def setup_transforms(self) -> Sequence[Transform] | None:
        return None

    def setup_executors(self) -> Sequence[Any] | None:
        return None

    def setup_operators(self) -> Sequence[Operator] | None:
        return None

    def setup_config(self) -> dict[str, Any] | None:
        return None

    def setup(self, model: Any) -> RecipeSetup:
        """Validates ``model`` and returns this recipe's parts. Not to be overridden."""
        self.validate(model)
        name = type(self).__qualname__
        parts = RecipeSetup(
            lookasides=_checked(self.setup_lookasides(), Lookaside, name, "setup_lookasides"),
            transforms=_checked(self.setup_transforms(), Transform, name, "setup_transforms"),
            executors=tuple(self.setup_executors() or ()),
            operators=_checked(self.setup_operators(), Operator, name, "setup_operators"),
            config=dict(self.setup_config() or {}),
            sources=(name,),
        )
        if any(e is None for e in parts.executors):
            raise TypeError(f"{name}.setup_executors returned None among its executors")
        return parts

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}()"


def _checked(values: Sequence[Any] | None, kind: type, recipe: str, method: str) -> tuple[Any, ...]:
    out = tuple(values or ())
    for v in out:
        if not isinstance(v, kind):
            raise TypeError(f"{recipe}.{method} returned {v!r}; expected {kind.__name__} values")
    return out


def _names(t: Transform) -> set[str]:
    return {c.__name__ for c in type(t).__mro__}


def _matches(t: Transform, ref: type | str) -> bool:
    return isinstance(t, ref) if isinstance(ref, type) else ref in _names(t)


def _check_order(transforms: Sequence[Transform]) -> None:
    for (i, a), (j, b) in itertools.permutations(enumerate(transforms), 2):
        if i < j and any(_matches(b, ref) for ref in a.must_follow):
            raise ValueError(
                f"transform order: {a!r} must follow {b!r}, but the recipes list it before"
            )
        if i > j and any(_matches(b, ref) for ref in a.must_precede):
            raise ValueError(
                f"transform order: {a!r} must precede {b!r}, but the recipes list it after"
            )


def compose(setups: Sequence[RecipeSetup]) -> RecipeSetup:
    """The parts of several recipes merged in order; a conflict is a ValueError."""
    lookasides: dict[int, tuple[Lookaside, str]] = {}
    transforms: list[Transform] = []
    executors: list[Any] = []
    operators: list[Operator] = []
    config: dict[str, tuple[Any, str]] = {}
    for part in setups:
        source = ", ".join(part.sources)
        for la in part.lookasides:
            have = lookasides.get(id(la.fn))
            if have is not None and have[0].replace_with is not la.replace_with:
                raise ValueError(
                    f"recipes {have[1]} and {source} replace {la.fn!r} differently "
                    f"({have[0].replace_with!r}, {la.replace_with!r})"
                )
            lookasides.setdefault(id(la.fn), (la, source))
        transforms.extend(t for t in part.transforms if not any(t is u for u in transforms))
        executors.extend(e for e in part.executors if not any(e is f or e == f for f in executors))
        operators.extend(part.operators)
        for key, value in part.config.items():
            have_cfg = config.get(key)
            if have_cfg is not None and have_cfg[0] != value:
                raise ValueError(
                    f"recipes {have_cfg[1]} and {source} set the jit option {key!r} differently "
                    f"({have_cfg[0]!r}, {value!r})"
                )
            config.setdefault(key, (value, source))
    _check_order(transforms)
    return RecipeSetup(
        lookasides=tuple(la for la, _ in lookasides.values()),
        transforms=tuple(transforms),
        executors=tuple(executors),
        operators=tuple(operators),
        config={k: v for k, (v, _) in config.items()},
        sources=tuple(s for part in setups for s in part.sources),
    )


def default_executors() -> tuple[str, ...]:
    """The executors ``thunder.compile`` uses when no recipe names any: a fusion executor first
    (nvFuser where it runs, else torch.compile compiling regions in the background), then
    high-level ops kept whole by torch, then prims by torch; only executors that can run on
    this machine, so a CPU-only machine without a working torch.compile gets ``torch_ops,
    torch``.

    Measured on the 2-core CPU machine (``python -m benchmarks first_calls``), a 2-layer Llama
    (hidden 256): torch.compile compiling before the first call returns made that call take
    23 to 45 s (cold caches); in the background the first call takes 0.4 s, the regions are
    compiled 23 s later (5 s with torch.compile's on-disk cache warm), and the steady forward
    is then torch.compile's own (0.62x eager; ``thunder.jit`` 0.80x)."""
    from thunder_executors import executor_availability
    from thunder_executors.assignment import recommended_executors

    available = executor_availability()
    return tuple(e for e in recommended_executors() if available.get(e, (True, ""))[0])
