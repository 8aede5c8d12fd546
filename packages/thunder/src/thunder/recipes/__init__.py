"""``thunder.compile`` and recipes: the high-level entry point.

``thunder.compile(model)`` picks the executors for this machine (``default_executors``);
``thunder.compile(model, recipe=[A(), B()])`` applies recipes in order (``base.compose``):

    import thunder

    compiled = thunder.compile(bert, recipe=[thunder.recipes.HFTransformers(),
                                             thunder.recipes.Quantize()])

Writing a recipe: subclass ``thunder.Recipe`` (this module's ``BaseRecipe``) and override
``validate(model)`` and the ``setup_*`` methods it needs (see ``base``).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from typing import Any

from thunder.recipes.base import BaseRecipe, Operator, RecipeSetup, compose, default_executors
from thunder.recipes.distributed import Distributed
from thunder.recipes.hf import HFTransformers
from thunder.recipes.quantize import Quantize, QuantizedLinear, QuantizedLinear4bit
from thunder_executors import OperatorExecutor

__all__ = [
    "BaseRecipe",
    "Distributed",
    "HFTransformers",
    "Operator",
    "Quantize",
    "QuantizedLinear",
    "QuantizedLinear4bit",
    "RecipeSetup",
    "compile",
    "compose",
    "default_executors",
]

_operator_executors = itertools.count()
log = logging.getLogger(__name__)

_WHY = {
    "nvfuser": "fusion regions compiled by nvFuser",
    "torchcompile_background": (
        "fusion regions compiled by torch.compile on a background thread; until a region is "
        "compiled it runs its torch calls one by one"
    ),
    "torchcompile": "fusion regions compiled by torch.compile on their first call",
    "torch_ops": "high-level ops kept whole, run by torch",
    "torch": "the remaining prims, run by torch",
}


class _RecipeOperators(OperatorExecutor):
    """A private executor claiming the recipes' one-op kernels (never registered globally).
    It pickles as its operators, so a compiled model pickles (``thunder.jit_copies``)."""

    def __init__(self, operators: Sequence[Operator]) -> None:
        super().__init__(f"recipe_operators{next(_operator_executors)}")
        self.operators = tuple(operators)
        for op in self.operators:
            self.register_implementation(op.symbol(), op.impl, checker=op.checker)

    def __reduce__(self) -> Any:
        return (_RecipeOperators, (self.operators,))


def compile(model_or_fn: Any, recipe: BaseRecipe | Sequence[BaseRecipe] | None = None) -> Any:
    """Compiles ``model_or_fn`` (an ``nn.Module`` or a function) with ``thunder.jit``, choosing
    executors, transforms, lookasides and options from ``recipe``: a recipe, a list of recipes
    (merged in order; a conflict between them is a ValueError) or None.

    Executors: the recipes' (in order), then ``default_executors()`` (a fusion executor where
    one runs here, then torch); kernels from ``setup_operators`` come first of all. The choice
    is logged (logger ``thunder.recipes``, level INFO).

    Without nvFuser the fusion executor is ``torchcompile_background``: the first call costs
    what ``thunder.jit``'s does (seconds), fusion regions are compiled by torch.compile on a
    background thread, and each runs its torch calls until its compiled program is ready; then
    a region of CPU tensors times both and keeps the compiled program where it is 5% faster.
    ``thunder_executors.background_compile.wait_for_background_compiles()`` waits for them.
    """
    if recipe is None:
        recipes: list[BaseRecipe] = []
    elif isinstance(recipe, BaseRecipe):
        recipes = [recipe]
    elif isinstance(recipe, (list, tuple)):
        recipes = list(recipe)
    else:
        raise TypeError(
            f"thunder.compile: recipe must be a thunder.Recipe, a list of them or None, "
            f"got {type(recipe).__name__}"
        )
    for r in recipes:
        if not isinstance(r, BaseRecipe):
            raise TypeError(f"thunder.compile: {r!r} is not a thunder.Recipe")
    parts = compose([r.setup(model_or_fn) for r in recipes])
    executors = list(parts.executors)
    executors += [e for e in default_executors() if e not in executors]
    if parts.operators:
        executors.insert(0, _RecipeOperators(parts.operators))
    log.info(
        "thunder.compile: executors %s",
        "; ".join(
            f"{getattr(e, 'name', e)} ({_WHY.get(getattr(e, 'name', e), 'from a recipe')})"
            for e in executors
        ),
    )
    from thunder import jit

    return jit(
        model_or_fn,
        executors=executors,
        transforms=list(parts.transforms),
        lookasides=list(parts.lookasides),
        **parts.config,
    )
