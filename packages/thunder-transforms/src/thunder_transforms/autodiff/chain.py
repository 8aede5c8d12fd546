"""Programs that return an intermediate together with outputs computed from it (``return logits,
act``: Grad-CAM, ``output_hidden_states``), run as a chain of autograd nodes.

One node for the whole program makes its outputs siblings: a hook on ``act`` (or its
``retain_grad``, ``autograd.grad(loss, act)``) would see only ``act``'s own cotangent, never the
gradient flowing back from ``logits``, and a hook editing it would not change the inputs'
gradients. Eager's graph has ``act`` between the inputs and ``logits``. So the program is cut
after the last op that computes such an intermediate: the first part returns the outputs it
computes and the values the rest reads; the second takes the inputs and those values. Each part
is differentiated and run as its own node; a program without the pattern keeps one node."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from thunder_ir import NumberProxy, OpTag, Proxy, TensorProxy, Trace, prims, tracectx
from thunder_ir.aliasing import alias_info, writes_in_place, written_where_gradients_flow
from thunder_ir.pytree import tree_flatten, tree_unflatten
from thunder_transforms.autodiff.core import (
    NONDIFFERENTIABLE,
    _carries_grad,
    _differentiated_inputs,
    _reads,
)

__all__ = ["ChainedFunction", "Cut", "cut_at_returned_intermediates"]


class Cut:
    """A program cut in two: ``first`` (the program's inputs -> its outputs computed there, then
    the values ``second`` reads) and ``second`` (the inputs and those values -> the rest)."""

    def __init__(
        self,
        first: Trace,
        second: Trace,
        first_requires_grad: tuple[bool, ...],
        second_requires_grad: tuple[bool, ...],
        passed_at: list[int],
        sources: list[tuple[int, int]],
        spec: Any,
    ) -> None:
        self.first = first
        self.second = second
        self.first_requires_grad = first_requires_grad
        self.second_requires_grad = second_requires_grad
        self.passed_at = passed_at  # where among ``first``'s outputs each passed value is
        self.sources = sources  # per flat output of the program: (part, index in its outputs)
        self.spec = spec


def cut_at_returned_intermediates(trace: Trace, requires_grad: Sequence[bool] | None) -> Cut | None:
    """The cut of ``trace`` after the last op computing a returned tensor that carries gradient
    and that another returned tensor is computed from (differentiably); None where there is
    none, or where the program writes in place where gradients flow (it stays one node)."""
    bsyms = trace.bound_symbols
    if not bsyms or not bsyms[-1].has_tag(OpTag.RETURN):
        return None
    body = bsyms[:-1]
    # Writes gradients flow through are functionalized across the whole program: it stays one
    # node. Others (running statistics) run in place, in program order, in either part.
    writes = any(writes_in_place(b) for b in body)
    if writes and written_where_gradients_flow(trace, requires_grad):
        return None
    which = _differentiated_inputs(trace.args, requires_grad)
    active = {a.name for a, w in zip(trace.args, which) if w}
    producer: dict[str, int] = {}
    for i, b in enumerate(body):
        outs = b.flat_proxy_outs
        for p in outs:
            producer.setdefault(p.name, i)
        if b.sym not in NONDIFFERENTIABLE and any(p.name in active for p in b.flat_proxy_args):
            active.update(p.name for p in outs if _carries_grad(p))
    leaves, spec = tree_flatten(trace.return_value)
    returned = {x.name for x in leaves if isinstance(x, TensorProxy) and x.name in active}
    cut_after = -1
    # The last op computing such a tensor: the candidates from the last computed on.
    starts = sorted({producer[n] for n in returned if n in producer}, reverse=True)
    for start in starts:
        names = {p.name for p in body[start].flat_proxy_outs} & returned
        for name in names:
            reached = {name}
            for b in body[start + 1 :]:
                if b.sym not in NONDIFFERENTIABLE and any(
                    p.name in reached for p in b.flat_proxy_args
                ):
                    reached.update(p.name for p in b.flat_proxy_outs if p.name in active)
            if (reached - {name}) & returned:
                cut_after = start
                break
        if cut_after >= 0:
            break
    if cut_after < 0:
        return None
    first_body, second_body = body[: cut_after + 1], body[cut_after + 1 :]
    in_first = _produced(first_body)
    in_second = _produced(second_body) - in_first
    passed: dict[str, Proxy] = {}
    for b in second_body:
        for p in _reads(b):
            if p.name in in_first:
                passed.setdefault(p.name, p)
                # (the symbolic sizes of what is passed, where the first part computes them)
                if isinstance(p, TensorProxy):
                    for n in p.shape:
                        if isinstance(n, NumberProxy) and n.name in in_first:
                            passed.setdefault(n.name, n)
    for x in leaves:
        if isinstance(x, TensorProxy) and x.name in in_second:
            for n in x.shape:
                if isinstance(n, NumberProxy) and n.name in in_first:
                    passed.setdefault(n.name, n)
    first_leaves = [x for x in leaves if not (isinstance(x, Proxy) and x.name in in_second)]
    second_leaves = [x for x in leaves if isinstance(x, Proxy) and x.name in in_second]
    sources: list[tuple[int, int]] = []
    k_first = k_second = 0
    for x in leaves:
        if isinstance(x, Proxy) and x.name in in_second:
            sources.append((1, k_second))
            k_second += 1
        else:
            sources.append((0, k_first))
            k_first += 1
    passed_values = list(passed.values())
    if any(_sum_order_differs(p, returned, second_body) for p in passed_values):
        return None
    if writes:
        info = alias_info(body)
        if any(info.is_written(p.name) for p in passed_values):
            return None  # memory written in place handed between the parts: one node
    # A passed value the first part returns anyway is returned once (one output slot).
    at = {x.name: k for k, x in reversed(list(enumerate(first_leaves))) if isinstance(x, Proxy)}
    extra = [p for p in passed_values if p.name not in at]
    at.update((p.name, len(first_leaves) + k) for k, p in enumerate(extra))
    first = trace.replace(bound_symbols=list(first_body))
    with tracectx(first):
        prims.python_return((*first_leaves, *extra))
    second = trace.replace(args=(*trace.args, *passed_values), bound_symbols=list(second_body))
    with tracectx(second):
        prims.python_return(tuple(second_leaves))
    return Cut(
        first,
        second,
        which,
        (*which, *(isinstance(p, TensorProxy) and p.name in active for p in passed_values)),
        [at[p.name] for p in passed_values],
        sources,
        spec,
    )


def _sum_order_differs(value: Proxy, returned: set[str], second_body: Sequence[Any]) -> bool:
    """Whether eager's sum of ``value``'s gradient would round differently: eager adds the
    caller's cotangent of a returned value, then each later use's term one by one; the second
    node hands its uses' terms over already summed. Only low precision shows it (one bfloat16
    ulp); the program then stays one node."""
    if not (isinstance(value, TensorProxy) and value.name in returned):
        return False
    if not value.dtype.is_low_precision:
        return False
    reads = sum(1 for b in second_body for p in _reads(b) if p.name == value.name)
    return reads > 1


def _produced(bsyms: Sequence[Any]) -> set[str]:
    """Names ``bsyms`` compute, those of their decompositions included (a symbolic size such
    as ``cat``'s is computed inside the op that uses it)."""
    names: set[str] = set()
    for b in bsyms:
        names.update(p.name for p in b.flat_proxy_outs)
        names.update(_produced(b.subsymbols))
    return names


class ChainedFunction:
    """Runs the two parts of a ``Cut`` (each a differentiable callable): the outputs the first
    computes are inputs of the second's node, as in eager's graph."""

    def __init__(self, cut: Cut, first: Callable[..., Any], second: Callable[..., Any]) -> None:
        self.first = first
        self.second = second
        self.__wrapped__ = first  # (the part taking the program's inputs, for tools)
        self.first_trace = cut.first  # that part's program, before autodiff (for reproducers)
        self.passed_at = cut.passed_at
        self.sources = cut.sources
        self.spec = cut.spec

    def __call__(self, *args: Any) -> Any:
        first = tuple(self.first(*args))
        second = tuple(self.second(*args, *(first[k] for k in self.passed_at)))
        parts = (first, second)
        leaves = [parts[part][k] for part, k in self.sources]
        return tree_unflatten(leaves, self.spec)
