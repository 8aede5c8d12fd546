"""Rematerialization: recompute forward values in the backward instead of saving them.

The default, ``method="min_cut"``, is the min-cut partitioning of AOTAutograd/functorch. The
forward values that lie between what must be saved and what the backward needs form a flow
network: each value is a node split into ``in -> out`` whose capacity is its size in bytes (free
for trace inputs, which stay alive anyway; infinite for values that may never be saved), every op
that may be recomputed links its inputs' ``out`` to its outputs' ``in``, values that cannot be
recomputed (outputs of matmuls, reductions, random and effectful ops: see ``is_cheap``) hang off
the source, and the values the backward reads are joined to the sink. A minimum cut is a set of
values to save of least total size from which everything the backward reads can be recomputed
with cheap ops; it is found with a max-flow (``maxflow.FlowGraph``). Among minimum cuts, the one
closest to the backward is taken, so that no more is recomputed than needed.

Composite ops count as cheap where their decomposition is: a one-output composite made of cheap
prims (``gelu``) is recomputed as one op, and an output of a composite that cannot be recomputed
as a whole is recomputed with the cheap part of its decomposition where it has one, from the
composite's inputs and other outputs (``native_layer_norm``'s output, from its input, weight,
bias and the small mean and rstd, which the fused backward reads anyway). The intermediates of
such a part exist only in the decomposition: they are never saved.

With ``recompute_materialized=False`` (what ``thunder.jit`` runs with a fusion executor), a
value the backward must hold in memory, because an op no fusion region takes reads it there (a
matmul's operand: a normalized output, an activation before a linear layer), directly or through
shape ops, is never recomputed (``_materialized_in_backward``): recomputing it is not free, the
backward computes it once more and writes it out where it would read a saved one (GELU's erf
twice per layer). The backward then reads it as eager's does, saved by the forward that wrote it
anyway: more bytes saved, at most eager's, for a faster step. The default saves fewest bytes.

Values listed in ``ForwardBackward.checkpointed`` (activation checkpointing, see
``thunder_transforms.checkpoint``) are never saved: any non-random op producing them may be
recomputed and their capacity is infinite, so the backward recomputes such a region from its
inputs. ``method="checkpointed_only"`` recomputes those and the outputs of ops tagged
``OpTag.RECOMPUTE`` (ZeRO-3's parameter gathers) and nothing else: what thunder.jit runs when no
fusion executor makes recomputing free.

``method="greedy"`` is the older heuristic (kept for comparison; it ignores checkpointed
regions): the cheap ops form connected clusters, and each cluster either saves what the backward
reads from it or its inputs, whichever is smaller.

An op that reads memory the forward writes in place (a buffer it updates) is never recomputed:
in the backward that memory holds the written values.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable
from typing import Literal

from thunder_ir import BoundSymbol, OpTag, PassRecord, Proxy, TensorProxy, Trace, prims
from thunder_ir.aliasing import alias_info, writes_in_place
from thunder_ir.proxies import IntegerProxy
from thunder_transforms.autodiff.core import ForwardBackward
from thunder_transforms.autodiff.maxflow import INF, FlowGraph
from thunder_transforms.dce import dce

__all__ = ["is_cheap", "rematerialize", "saved_bytes"]

_CHEAP_TAGS = frozenset({OpTag.ELEMENTWISE, OpTag.SHAPE_OP})
_NEVER = frozenset({OpTag.RANDOM, OpTag.IN_PLACE, OpTag.DONT_DCE, OpTag.RETURN, OpTag.PROLOGUE})


def is_cheap(bsym: BoundSymbol) -> bool:
    """A prim worth recomputing rather than keeping: elementwise, shape or non-random factory."""
    tags = bsym.sym.tags
    if not bsym.sym.is_prim or not _NEVER.isdisjoint(tags):
        return False
    return not _CHEAP_TAGS.isdisjoint(tags) or OpTag.FACTORY in tags


def _cheap_composite(bsym: BoundSymbol) -> bool:
    """A one-output composite (``gelu``, ``silu``) whose decomposition is all cheap prims:
    recomputed as one op, as its executor runs it."""
    if bsym.sym.is_prim or not bsym.subsymbols or len(bsym.flat_proxy_outs) != 1:
        return False
    if not _NEVER.isdisjoint(bsym.sym.tags):
        return False
    return all(is_cheap(s) or _cheap_composite(s) for s in bsym.subsymbols)


def _cheap_parts(bsym: BoundSymbol) -> dict[str, BoundSymbol]:
    """For a composite that cannot be recomputed as a whole (``native_layer_norm``: its mean and
    rstd come from a reduction), the cheap ops of its decomposition that compute some of its
    outputs from its inputs and its other outputs (the normalized output from the input, mean,
    rstd, weight and bias), by the name of each value they produce (outputs and intermediates)."""
    if bsym.sym.is_prim or not bsym.subsymbols:
        return {}
    outer = {p.name for p in bsym.flat_proxy_args}
    outs = {p.name for p in bsym.flat_proxy_outs}
    inner: dict[str, BoundSymbol] = {}
    for s in bsym.subsymbols:
        for o in s.flat_proxy_outs:
            inner[o.name] = s
    parts: dict[str, BoundSymbol] = {}
    memo: dict[tuple[str, str], bool] = {}

    def computable(name: str, target: str) -> bool:  # from outer values and other outputs
        if name in outer or (name in outs and name != target):
            return True
        key = (name, target)
        if key not in memo:
            memo[key] = False  # no cycles in a trace; guards the recursion all the same
            s = inner.get(name)
            memo[key] = (
                s is not None
                and len(s.flat_proxy_outs) == 1
                and (is_cheap(s) or _cheap_composite(s))
                and all(computable(a.name, target) for a in s.flat_proxy_args)
            )
        return memo[key]

    for out in bsym.flat_proxy_outs:
        if not computable(out.name, out.name):
            continue
        stack = [out.name]
        while stack:
            name = stack.pop()
            if name in parts or name in outer or (name in outs and name != out.name):
                continue
            s = inner[name]
            parts[name] = s
            stack.extend(a.name for a in s.flat_proxy_args)
    return parts


def _bytes(p: Proxy) -> int:
    if not isinstance(p, TensorProxy):
        return 0
    n = 1
    for s in p.shape:
        n *= int(s.value) if isinstance(s, IntegerProxy) else int(s)
    return n * p.dtype.bytes


def saved_bytes(fb: ForwardBackward) -> int:
    """Bytes of the tensors the forward saves for the backward, trace inputs excluded."""
    inputs = {a.name for a in fb.forward.args}
    return sum(_bytes(p) for p in fb.backward.args[: fb.n_saved] if p.name not in inputs)


def rematerialize(
    fb: ForwardBackward,
    *,
    method: Literal["min_cut", "checkpointed_only", "greedy"] = "min_cut",
    saved_by_eager: frozenset[int] | None = None,
    recompute_materialized: bool = True,
) -> ForwardBackward:
    """``fb`` with forward values recomputed in the backward where that saves bytes (and the
    values of checkpointed regions always recomputed). Gradients are unchanged.

    ``saved_by_eager``: the trace inputs (by position) eager's graph saves. Only those are free to
    save (min-cut); recomputing from another would make the backward read an input eager's does
    not, which the caller may write between forward and backward (``tanh(x)`` saves its result).

    ``recompute_materialized=False``: values the backward reads from memory (a matmul's operand)
    are saved, not recomputed (min-cut; see the module's docstring)."""
    start = time.perf_counter()
    if method in ("min_cut", "checkpointed_only"):
        kept, recompute = _min_cut_choice(
            fb,
            cheap_ops=method == "min_cut",
            saved_by_eager=saved_by_eager,
            recompute_materialized=recompute_materialized,
        )
    elif method == "greedy":
        kept, recompute = _greedy_choice(fb)
    else:
        raise ValueError(f"unknown rematerialization method {method!r}")
    if not recompute:
        return fb
    return _rebuild(fb, kept, recompute, time.perf_counter() - start)


# The min-cut choice ---------------------------------------------------------------------------


def _recomputable(bsym: BoundSymbol, checkpointed: frozenset[str], cheap_ops: bool) -> bool:
    outs = bsym.flat_proxy_outs
    if OpTag.RECOMPUTE in bsym.sym.tags:
        return bool(outs)
    if any(a.name in checkpointed for a in bsym.flat_proxy_args) and not all(
        o.name in checkpointed for o in outs
    ):
        return False  # a region's output: kept, as torch keeps it, not recomputed from inside
    if cheap_ops and (is_cheap(bsym) or _cheap_composite(bsym)):
        return len(outs) == 1
    return (
        bool(outs)
        and all(o.name in checkpointed for o in outs)
        and _NEVER.isdisjoint(bsym.sym.tags)
        and not any(s.has_tag(OpTag.RANDOM) for s in _flat_subsymbols(bsym))
    )


_FUSIBLE_TAGS = frozenset({OpTag.ELEMENTWISE, OpTag.SHAPE_OP, OpTag.REDUCTION, OpTag.FACTORY})


def _fusible(bsym: BoundSymbol) -> bool:
    """Whether a fusion region can compute ``bsym`` with the ops that produce its inputs:
    elementwise, shape, reduction and factory prims, and composites of them (``gelu_backward``,
    ``layer_norm_backward``). A matmul, attention or an indexing op reads its inputs from memory."""
    tags = bsym.sym.tags
    if bsym.sym.is_prim:
        return not _FUSIBLE_TAGS.isdisjoint(tags) and OpTag.MATMUL not in tags
    return bool(bsym.subsymbols) and all(_fusible(s) for s in bsym.subsymbols)


def _materialized_in_backward(fw: Trace, bw: Trace) -> set[str]:
    """The forward values that the backward must hold in memory: read there by an op that is not
    ``_fusible``, directly or through shape ops of one tensor (of either trace: a reshape or a
    transpose holds the same elements; a value made by one is a view, free to recompute, and is
    not listed). A ``cat`` joins its inputs into new memory: its readers are not theirs."""

    def passes_through(b: BoundSymbol) -> bool:
        tensors = [a for a in b.flat_proxy_args if isinstance(a, TensorProxy)]
        return OpTag.SHAPE_OP in b.sym.tags and len(tensors) == 1

    readers: dict[str, list[tuple[BoundSymbol, bool]]] = {}
    for in_backward, trace in ((False, fw), (True, bw)):
        for b in trace.bound_symbols:
            if b.has_tag(OpTag.DELETE) or (not in_backward and b.has_tag(OpTag.RETURN)):
                continue
            for a in b.flat_proxy_args:
                readers.setdefault(a.name, []).append((b, in_backward))
    memo: dict[str, bool] = {}

    def materialized(name: str) -> bool:
        if name not in memo:
            memo[name] = False  # no cycles in a trace; guards the recursion all the same
            memo[name] = any(
                any(materialized(o.name) for o in b.flat_proxy_outs)
                if passes_through(b)
                else in_backward and not _fusible(b)
                for b, in_backward in readers.get(name, ())
            )
        return memo[name]

    return {
        o.name
        for b in fw.bound_symbols
        if not passes_through(b)
        for o in b.flat_proxy_outs
        if isinstance(o, TensorProxy) and materialized(o.name)
    }


def _reads_written_memory(fw: Trace) -> Callable[[BoundSymbol], bool]:
    """Whether a forward op reads memory the forward writes in place (a batch_norm buffer, an
    input written at its end): the value it read is not there any more in the backward, so it is
    never recomputed, only saved."""
    if not any(writes_in_place(b) for b in fw.bound_symbols):
        return lambda bsym: False
    info = alias_info(fw.bound_symbols)
    return lambda bsym: any(info.is_written(p.name) for p in bsym.flat_proxy_args)


def _flat_subsymbols(bsym: BoundSymbol) -> Iterable[BoundSymbol]:
    for s in bsym.subsymbols:
        yield s
        yield from _flat_subsymbols(s)


def _min_cut_choice(
    fb: ForwardBackward,
    *,
    cheap_ops: bool,
    saved_by_eager: frozenset[int] | None = None,
    recompute_materialized: bool = True,
) -> tuple[set[str], dict[str, BoundSymbol]]:
    fw, bw = fb.forward, fb.backward
    checkpointed = fb.checkpointed
    producer: dict[str, BoundSymbol] = {}
    internal: set[str] = set()  # values of decompositions: recomputed, never saved
    for bsym in fw.bound_symbols:
        for o in bsym.flat_proxy_outs:
            producer[o.name] = bsym
        if (
            cheap_ops
            and not _recomputable(bsym, checkpointed, cheap_ops)
            and not any(
                p.name in checkpointed for p in (*bsym.flat_proxy_args, *bsym.flat_proxy_outs)
            )
        ):
            parts = _cheap_parts(bsym)
            producer.update(parts)
            top = {o.name for o in bsym.flat_proxy_outs}
            internal.update(n for n in parts if n not in top)
    inputs = {a.name for a in fw.args}
    free = (
        inputs
        if saved_by_eager is None
        else {a.name for i, a in enumerate(fw.args) if i in saved_by_eager}
    )
    needed = list(bw.args[: fb.n_saved])
    reads_written = _reads_written_memory(fw)
    materialized = (
        _materialized_in_backward(fw, bw) if cheap_ops and not recompute_materialized else set()
    )

    # The values that matter: what the backward reads and, through recomputable ops, what those
    # are computed from, up to values that cannot be recomputed.
    recomputable: dict[str, bool] = {}
    values: dict[str, Proxy] = {}
    stack = list(needed)
    while stack:
        p = stack.pop()
        if p.name in values:
            continue
        values[p.name] = p
        b = producer.get(p.name)
        ok = (
            b is not None
            and p.name not in inputs
            and _recomputable(b, checkpointed, cheap_ops)
            and not reads_written(b)
            and (
                p.name not in materialized
                or p.name in checkpointed
                or OpTag.RECOMPUTE in b.sym.tags
            )
        )
        recomputable[p.name] = ok
        if ok:
            assert b is not None
            stack.extend(b.flat_proxy_args)

    graph = FlowGraph()
    source, sink = graph.add_node(), graph.add_node()
    node_in: dict[str, int] = {}
    node_out: dict[str, int] = {}
    for name in values:
        node_in[name], node_out[name] = graph.add_node(), graph.add_node()
    for name, p in values.items():
        if name in free:
            capacity = 0
        elif name in inputs:
            capacity = _bytes(p)  # what eager saves instead costs as much, and is closer
        elif name in internal or (
            recomputable[name]
            and (name in checkpointed or OpTag.RECOMPUTE in producer[name].sym.tags)
        ):
            capacity = INF
        else:
            capacity = _bytes(p)
        graph.add_edge(node_in[name], node_out[name], capacity)
        if recomputable[name]:
            for a in producer[name].flat_proxy_args:
                graph.add_edge(node_out[a.name], node_in[name], INF)
        else:
            graph.add_edge(source, node_in[name], INF)
    for p in needed:
        graph.add_edge(node_out[p.name], sink, INF)
    graph.max_flow(source, sink)
    near_sink = graph.sink_side(sink)
    kept = {n for n in values if node_in[n] not in near_sink and node_out[n] in near_sink}

    recompute: dict[str, BoundSymbol] = {}
    seen: set[str] = set()
    stack = list(needed)
    while stack:
        p = stack.pop()
        if p.name in seen or p.name in kept:
            continue
        seen.add(p.name)
        assert recomputable[p.name], p.name
        b = producer[p.name]
        for o in b.flat_proxy_outs:
            recompute[o.name] = b
        stack.extend(b.flat_proxy_args)
    return kept, recompute


# The greedy choice ----------------------------------------------------------------------------


class _Clusters:
    """Union-find over the outputs of cheap forward ops, joined along cheap-op edges."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def add(self, x: str) -> None:
        self.parent.setdefault(x, x)

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)


def _greedy_choice(fb: ForwardBackward) -> tuple[set[str], dict[str, BoundSymbol]]:
    fw, bw = fb.forward, fb.backward
    producer: dict[str, BoundSymbol] = {}
    clusters = _Clusters()
    reads_written = _reads_written_memory(fw)
    for bsym in fw.bound_symbols:
        if not is_cheap(bsym) or reads_written(bsym):
            continue
        outs = bsym.flat_proxy_outs
        for o in outs:
            producer[o.name] = bsym
            clusters.add(o.name)
        for a in bsym.flat_proxy_args:
            if a.name in producer:
                for o in outs:
                    clusters.union(a.name, o.name)

    saved = list(bw.args[: fb.n_saved])
    inputs = {a.name for a in fw.args}
    by_cluster: dict[str, list[Proxy]] = {}
    for p in saved:
        if p.name in producer:
            by_cluster.setdefault(clusters.find(p.name), []).append(p)

    kept = {p.name for p in saved}
    recompute: dict[str, BoundSymbol] = {}
    for members in by_cluster.values():
        ops, leaves = _recompute_closure(members, producer)
        extra = [x for x in leaves.values() if x.name not in kept and x.name not in inputs]
        if sum(_bytes(x) for x in extra) < sum(_bytes(m) for m in members):
            for m in members:
                kept.discard(m.name)
            kept.update(leaves)
            for b in ops:
                for o in b.flat_proxy_outs:
                    recompute[o.name] = b
    return kept, recompute


def _recompute_closure(
    members: list[Proxy], producer: dict[str, BoundSymbol]
) -> tuple[list[BoundSymbol], dict[str, Proxy]]:
    """The cheap ops that recompute ``members`` and the values they start from."""
    ops: dict[int, BoundSymbol] = {}
    leaves: dict[str, Proxy] = {}
    stack = list(members)
    seen: set[str] = set()
    while stack:
        p = stack.pop()
        if p.name in seen:
            continue
        seen.add(p.name)
        b = producer.get(p.name)
        if b is None:
            leaves[p.name] = p
            continue
        ops[id(b)] = b
        stack.extend(b.flat_proxy_args)
    return list(ops.values()), leaves


# Building the new pair ------------------------------------------------------------------------


def _rebuild(
    fb: ForwardBackward, kept: set[str], recompute: dict[str, BoundSymbol], seconds: float
) -> ForwardBackward:
    fw, bw = fb.forward, fb.backward
    cotangents = bw.args[fb.n_saved :]
    new_saved = _in_forward_order(fw, kept)
    record = PassRecord("rematerialize", seconds)
    new_bw = bw.replace(
        args=(*new_saved, *cotangents),
        bound_symbols=_just_in_time(bw.bound_symbols, recompute, {p.name for p in new_saved}),
        history=(*bw.history, record),
    )
    new_bw = dce(new_bw)
    _check_defined_before_use(new_bw)
    leaves_of_fw = list(fw.return_value[0])
    ret = prims.python_return.bind((tuple(leaves_of_fw), tuple(new_saved)), output=None)
    body = [b for b in fw.bound_symbols if not b.has_tag(OpTag.RETURN)]
    new_fw = dce(fw.replace(bound_symbols=[*body, ret], history=(*fw.history, record)))
    return dataclasses.replace(fb, forward=new_fw, backward=new_bw, n_saved=len(new_saved))


def _in_forward_order(fw: Trace, names: set[str]) -> list[Proxy]:
    out: list[Proxy] = []
    seen: set[str] = set()
    for p in fw.args:
        if p.name in names and p.name not in seen:
            seen.add(p.name)
            out.append(p)
    for b in fw.bound_symbols:
        # A symbolic size may be computed inside an op's decomposition (run before the op
        # when it executes whole).
        for p in (*_nested_numbers(b), *b.flat_proxy_outs):
            if p.name in names and p.name not in seen:
                seen.add(p.name)
                out.append(p)
    return out


def _nested_numbers(bsym: BoundSymbol) -> list[Proxy]:
    return [
        p
        for sub in _flat_subsymbols(bsym)
        for p in sub.flat_proxy_outs
        if not isinstance(p, TensorProxy)
    ]


def _just_in_time(
    backward: list[BoundSymbol], recompute: dict[str, BoundSymbol], saved: set[str]
) -> list[BoundSymbol]:
    """The backward with each recomputed value's ops placed right before its first use, so it
    is not alive longer than needed."""
    out: list[BoundSymbol] = []
    emitted: set[int] = set()

    # A backward op computing a forward value (``core._recast_in_backward``'s float32 casts of
    # saved low-precision values) is dropped where that value is saved or recomputed: a
    # recomputed chain may read it before the backward's op would run (a checkpointed region's
    # later values are computed from it), so it is emitted as the recomputed ops are, on demand.
    def computed_otherwise(b: BoundSymbol) -> bool:
        outs = b.flat_proxy_outs
        return bool(outs) and all(o.name in recompute or o.name in saved for o in outs)

    def emit(name: str) -> None:  # iterative post-order: recompute chains can be long
        root = recompute.get(name)
        if root is None or id(root) in emitted:
            return
        stack: list[tuple[BoundSymbol, bool]] = [(root, False)]
        while stack:
            b, ready = stack.pop()
            if id(b) in emitted:
                continue
            if ready:
                emitted.add(id(b))
                out.append(b)
                continue
            stack.append((b, True))
            for a in reversed(b.flat_proxy_args):
                dep = recompute.get(a.name)
                if dep is not None and id(dep) not in emitted:
                    stack.append((dep, False))

    for bsym in backward:
        if computed_otherwise(bsym):
            continue
        for a in bsym.flat_proxy_args:
            emit(a.name)
        out.append(bsym)
    return out


def _check_defined_before_use(bw: Trace) -> None:
    """A backward reading a value before it is defined would fail only when run (an
    UnboundLocalError in the compiled function): refused here, where the cause is."""
    defined = {p.name for p in bw.args if isinstance(p, Proxy)}
    for b in bw.bound_symbols:
        for p in b.flat_proxy_args:
            if p.name not in defined:
                raise AssertionError(
                    f"rematerialize: the backward reads {p.name} in {b.sym.name} before defining it"
                )
        defined.update(p.name for p in b.flat_proxy_outs)
