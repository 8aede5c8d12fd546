"""Calls whose eager backward gives their inputs an undefined gradient (None), not zeros:
``registry.register_no_gradient``. An input reached only through them keeps ``.grad`` None, as
in eager, where a zero-gradient op (``sign``, ``round``) gives zeros."""

from __future__ import annotations

from thunder_ir import BoundSymbol
from thunder_ir import ops as ltorch
from thunder_transforms.autodiff.registry import bound_arguments, register_no_gradient

__all__: list[str] = []


def _counts_nonzeros(bsym: BoundSymbol) -> bool:
    # linalg_vector_norm_backward returns an undefined gradient for ord=0 (a count of nonzeros).
    return bool(bound_arguments(bsym)["ord"] == 0)


def _pairwise_counts_nonzeros(bsym: BoundSymbol) -> bool:
    # the norm of x1 - x2 + eps with p=0: the same undefined gradient
    return bool(bound_arguments(bsym)["p"] == 0)


register_no_gradient(ltorch.vector_norm, _counts_nonzeros)
register_no_gradient(ltorch.pairwise_distance, _pairwise_counts_nonzeros)
