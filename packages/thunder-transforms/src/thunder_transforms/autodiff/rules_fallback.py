"""The grad rule of torch callables no op mirrors (``thunder_ir.ops.fallback``): the backward
runs ``torch.autograd.grad`` through the callable, re-run on the forward's saved arguments
(``ltorch.torch_fallback_vjp``). A random one is re-run from the generator state recorded
before its forward draw (``torch_fallback_random_replay``), so it draws the forward's numbers;
without that state it is refused: running it again would draw other numbers. ``topk`` and
``sort`` scatter the cotangent of their values back, as eager's backward does."""

from __future__ import annotations

from typing import Any

from thunder_ir import BoundSymbol, TensorProxy
from thunder_ir import ops as ltorch
from thunder_ir.ops.fallback import torch_fallback_sized, torch_fallback_sized_random
from thunder_ir.pytree import tree_iter, tree_map
from thunder_transforms.autodiff.fallback_saved import fallback_saved, unreached_arguments
from thunder_transforms.autodiff.registry import GradPairs, register_vjp, zeros_like

__all__: list[str] = []


# Selections returning (values, indices) along ``dim``, by the position of ``dim`` among their
# arguments: the values' gradient goes back to the positions the indices name (eager's backward,
# one scatter, where running the callable again under autograd costs hundreds of microseconds).
_SELECTIONS = {"torch.topk": 2, "torch.Tensor.topk": 2, "torch.sort": 1, "torch.Tensor.sort": 1}


def _selection_grad(bsym: BoundSymbol, g: Any) -> GradPairs | None:
    at = _SELECTIONS.get(bsym.args[0])
    if bsym.sym is not ltorch.torch_fallback or at is None or g is None or len(bsym.args) < 2:
        return None
    _, a, *rest = bsym.args
    if not isinstance(a, TensorProxy) or a.ndim == 0:
        return None
    dim = rest[at - 1] if len(rest) >= at else bsym.kwargs.get("dim", -1)
    _, indices = bsym.output
    # eager's scatter into zeros: a scatter_add would turn a -0 gradient into +0
    return [(a, ltorch.scatter(zeros_like(a), dim % a.ndim, indices, g))]


@register_vjp(
    ltorch.torch_fallback,
    ltorch.torch_fallback_view,
    torch_fallback_sized,
    torch_fallback_sized_random,
)
def _torch_fallback(bsym: BoundSymbol, *cotangents: Any) -> GradPairs:
    if all(c is None for c in cotangents):
        return []
    selected = _selection_grad(bsym, cotangents[0])
    if selected is not None:
        return selected
    qualified, *args = bsym.args
    run_on = _values_read(bsym, qualified, tuple(args), dict(bsym.kwargs))
    grads = ltorch.torch_fallback_vjp(qualified, *run_on, cotangents)
    leaves = list(tree_iter((tuple(args), dict(bsym.kwargs))))
    # the re-run's autograd.grad gives zeros where eager's graph gives none
    unreached = unreached_arguments(bsym)
    return [
        (x, g)
        for x, g in zip(leaves, grads)
        if g is not None and not (isinstance(x, TensorProxy) and x.name in unreached)
    ]


def _values_read(
    bsym: BoundSymbol, qualified: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments the backward re-runs the callable on: where torch's graph of it saves no
    tensor (``x.trace()`` keeps sizes), zeros of their shapes, so the backward reads none of
    them and a write into one after the forward does not raise where eager's does not. Where
    a node may read tensors it did not save (a custom op keeping its input on ctx), or where
    it cannot be told, the arguments themselves."""
    if bsym.sym is not ltorch.torch_fallback:
        return args, kwargs
    found = fallback_saved(qualified, args, kwargs, _inexact)
    if found is None or found.saves or found.reads_unsaved:
        return args, kwargs
    # Integer tensors stay: never differentiated, they may have to be valid (lu_unpack's pivots).
    zeros = tree_map(lambda p: _zeros_as(p) if _inexact(p) else p, (args, kwargs))
    return tuple(zeros[0]), dict(zeros[1])


def _inexact(p: Any) -> bool:
    return isinstance(p, TensorProxy) and p.dtype.is_inexact


def _zeros_as(p: TensorProxy) -> TensorProxy:
    zeros = zeros_like(p)
    zeros.requires_grad = p.requires_grad  # (the re-run differentiates what required grad)
    return zeros


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
