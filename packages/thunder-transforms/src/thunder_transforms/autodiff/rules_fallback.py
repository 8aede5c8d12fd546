"""The grad rule of torch callables no op mirrors (``thunder_ir.ops.fallback``): the backward
runs ``torch.autograd.grad`` through the callable, re-run on the forward's saved arguments
(``ltorch.torch_fallback_vjp``). A random one is re-run from the generator state recorded
before its forward draw (``torch_fallback_random_replay``), so it draws the forward's numbers;
without that state it is refused: running it again would draw other numbers."""

from __future__ import annotations

from typing import Any

from thunder_ir import BoundSymbol
from thunder_ir import ops as ltorch
from thunder_ir.ops.fallback import torch_fallback_sized
from thunder_ir.pytree import tree_iter
from thunder_transforms.autodiff.registry import GradPairs, register_vjp

__all__: list[str] = []


@register_vjp(ltorch.torch_fallback, ltorch.torch_fallback_view, torch_fallback_sized)
def _torch_fallback(bsym: BoundSymbol, *cotangents: Any) -> GradPairs:
    if all(c is None for c in cotangents):
        return []
    qualified, *args = bsym.args
    grads = ltorch.torch_fallback_vjp(qualified, tuple(args), dict(bsym.kwargs), cotangents)
    leaves = list(tree_iter((tuple(args), dict(bsym.kwargs))))
    return [(x, g) for x, g in zip(leaves, grads) if g is not None]


@register_vjp(ltorch.torch_fallback_random_replay)
def _torch_fallback_random_replay(bsym: BoundSymbol, *cotangents: Any) -> GradPairs:
    if all(c is None for c in cotangents):
        return []
    qualified, state, device, *args = bsym.args
    grads = ltorch.torch_fallback_vjp(
        qualified, tuple(args), dict(bsym.kwargs), cotangents, state, device
    )
    leaves = list(tree_iter((tuple(args), dict(bsym.kwargs))))
    return [(x, g) for x, g in zip(leaves, grads) if g is not None]


@register_vjp(ltorch.torch_fallback_random)
def _torch_fallback_random(bsym: BoundSymbol, *cotangents: Any) -> GradPairs:
    if all(c is None for c in cotangents):
        return []
    raise NotImplementedError(
        f"gradients through {bsym.args[0]}, a torch operation that draws random numbers and "
        "that no thunder op mirrors: its backward would have to draw the same numbers again"
    )
