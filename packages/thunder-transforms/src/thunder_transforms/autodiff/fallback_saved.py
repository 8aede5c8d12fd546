"""What eager's autograd graph of a torch callable run through a fallback op saves, read from the
graph torch builds: the callable is run once on fake tensors (shapes and dtypes of the call's
arguments, those carrying a gradient requiring grad) with a ``saved_tensors_hooks`` that sees
every tensor a node saves. A saved tensor that shares memory with an argument or a result is
that argument or result being saved (``linalg.inv`` saves its result; ``nn.LSTM`` with
``batch_first=True`` saves a copy of its input, not the input). The hooks see only what a node
saves through ``save_for_backward``: a node torch does not generate (a custom op's or an
``autograd.Function``'s, a C++ custom function's) may keep tensors on its ctx, in closures or in
``saved_data``, which its backward reads unseen (``reads_unsaved``). The same graph says which
arguments the results are computed from (``reached``): torch gives the others no gradient (a
loss's target read only by ``target == 1``), not zeros."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from thunder_ir import BoundSymbol, TensorProxy
from thunder_ir import ops as ltorch
from thunder_ir.devices import to_torch_device
from thunder_ir.dtypes import to_torch_dtype
from thunder_ir.ops.fallback import resolve_fallback
from thunder_ir.proxies import NumberProxy
from thunder_ir.pytree import tree_iter, tree_map

__all__ = ["FallbackSaved", "fallback_saved", "unreached_arguments"]


@dataclass(frozen=True)
class FallbackSaved:
    """``saves``: whether any node saves a tensor; ``arguments``: the positions (among the
    tensor arguments, in flattening order) of those saved; ``outputs``: the positions (among
    the tensor results) of those saved; ``reads_unsaved``: whether the graph holds a node whose
    backward may read tensors it did not save (its arguments and results, for all one knows);
    ``reached``: the positions (among the tensor arguments) of those carrying a gradient that
    the results' graph reaches."""

    saves: bool
    arguments: frozenset[int]
    outputs: frozenset[int]
    reads_unsaved: bool = False
    reached: frozenset[int] = frozenset()


def _size(s: Any) -> int:
    return int(s.value) if isinstance(s, NumberProxy) else int(s)


def _sized_as_value(x: Any) -> Any:
    """A symbolic int argument (a size passed as a number) as its value, as the tensors' sizes
    are: what torch saves does not depend on them. Other numbers stay (their ``repr`` in the
    cache key holds the program to their values)."""
    if isinstance(x, NumberProxy) and x.python_type is int:
        return x.value
    return x


def fallback_saved(
    torch_name: str, args: tuple[Any, ...], kwargs: dict[str, Any], carries: Callable[[Any], bool]
) -> FallbackSaved | None:
    """What eager saves for ``torch_name(*args, **kwargs)`` where the tensor arguments for which
    ``carries`` holds require grad; None where the fake run fails (the caller assumes the
    arguments are saved)."""
    tensors = [x for x in tree_iter((args, kwargs)) if isinstance(x, TensorProxy)]
    try:
        key = (
            torch_name,
            tuple(
                (tuple(_size(s) for s in x.shape), x.dtype, str(x.device), carries(x))
                for x in tensors
            ),
            repr(
                tree_map(
                    lambda x: None if isinstance(x, TensorProxy) else _sized_as_value(x),
                    (args, kwargs),
                )
            ),
        )
    except Exception:  # an argument without a usable description: not cached
        return _run(torch_name, args, kwargs, carries)
    if key not in _CACHE:
        if len(_CACHE) > 1024:
            _CACHE.clear()
        _CACHE[key] = _run(torch_name, args, kwargs, carries)
    return _CACHE[key]


_CACHE: dict[Any, FallbackSaved | None] = {}


def _inexact(p: Any) -> bool:
    return isinstance(p, TensorProxy) and p.dtype.is_inexact


def unreached_arguments(bsym: BoundSymbol) -> set[str]:
    """The names of the floating-point tensor arguments of a ``torch_fallback`` or
    ``torch_fallback_view`` call that torch's graph of the callable does not reach (a loss's
    target read only by ``target == 1``): eager gives them no gradient, not zeros. Empty where
    the fake run cannot tell."""
    if bsym.sym not in (ltorch.torch_fallback, ltorch.torch_fallback_view):
        return set()
    name, *args = bsym.args
    found = fallback_saved(name, tuple(args), dict(bsym.kwargs), _inexact)
    if found is None:
        return set()
    tensors = [x for x in tree_iter((tuple(args), dict(bsym.kwargs))) if isinstance(x, TensorProxy)]
    return {x.name for i, x in enumerate(tensors) if _inexact(x) and i not in found.reached}


@functools.cache
def _fake_mode_type() -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode


def _run(
    torch_name: str, args: tuple[Any, ...], kwargs: dict[str, Any], carries: Callable[[Any], bool]
) -> FallbackSaved | None:
    mode = _fake_mode_type()(allow_fallback_kernels=False, allow_non_fake_inputs=True)
    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    try:
        fn = resolve_fallback(torch_name)
        with torch.inference_mode(False), mode:
            fakes: list[torch.Tensor] = []

            def fake(x: Any) -> Any:
                if not isinstance(x, TensorProxy):
                    return _sized_as_value(x)
                t = torch.empty(
                    tuple(_size(s) for s in x.shape),
                    dtype=to_torch_dtype(x.dtype),
                    device=to_torch_device(x.device),
                )
                if carries(x) and (t.is_floating_point() or t.is_complex()):
                    with torch.enable_grad():
                        t = t.requires_grad_(True).clone()
                fakes.append(t)
                return t

            fargs, fkwargs = tree_map(fake, (tuple(args), dict(kwargs)))
            with (
                torch.enable_grad(),
                torch.autocast("cpu", enabled=False),
                torch.autocast("cuda", enabled=False),
                torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t),
            ):
                out = fn(*fargs, **fkwargs)
    except Exception:  # no fake run: the caller's safe default
        return None
    outs = [o for o in tree_iter(out) if isinstance(o, torch.Tensor)]

    def aliased(group: list[torch.Tensor]) -> frozenset[int]:
        return frozenset(
            i
            for i, t in enumerate(group)
            if any(torch._C._is_alias_of(s, t) for s in saved)  # type: ignore[attr-defined]
        )

    opaque, reached = _walk_graph(outs, fakes)
    return FallbackSaved(bool(saved), aliased(fakes), aliased(outs), opaque, reached)


def _walk_graph(outs: list[torch.Tensor], fakes: list[torch.Tensor]) -> tuple[bool, frozenset[int]]:
    """Whether the graph from ``outs`` back to the arguments holds a node torch did not generate
    (generated nodes keep tensors only as saved variables, which the hooks saw), and the
    positions of the arguments it reaches."""
    stop = {f.grad_fn: i for i, f in enumerate(fakes) if f.grad_fn is not None}
    todo: list[Any] = [o.grad_fn for o in outs if o.grad_fn is not None]
    seen: set[Any] = set()
    opaque = False
    reached: set[int] = set()
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if node in stop:
            reached.add(stop[node])
            continue
        if _counts_nonzeros(node):
            continue  # its backward gives an undefined gradient: nothing is reached through it
        kind = type(node)
        if getattr(torch._C._functions, kind.__name__, None) is not kind:
            opaque = True
        todo.extend(n for n, _ in node.next_functions)
    return opaque, frozenset(reached)


def _counts_nonzeros(node: Any) -> bool:
    """A vector norm of ord 0 (``torch.linalg.norm(x, ord=0)``): a count, whose backward
    (norm_backward) returns no gradient."""
    return type(node).__name__ == "LinalgVectorNormBackward0" and node._saved_ord == 0
