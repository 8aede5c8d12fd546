"""Rematerialization: recompute cheap forward values in the backward instead of saving them.

The forward's cheap ops (elementwise, shape and non-random factory prims) form connected
clusters. For each cluster, the backward's saved values inside it can be either saved, or
recomputed from the cluster's inputs; the cheaper choice in bytes is taken (an input the forward
saves anyway, or a trace input, costs nothing). An activation chain such as GELU then saves its
input alone instead of three intermediates.
"""

from __future__ import annotations

import dataclasses
import time

from thunder_ir import BoundSymbol, OpTag, PassRecord, Proxy, TensorProxy, Trace, prims
from thunder_ir.proxies import IntegerProxy
from thunder_transforms.autodiff.core import ForwardBackward
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


def rematerialize(fb: ForwardBackward) -> ForwardBackward:
    """``fb`` with cheap saved values recomputed in the backward where that saves bytes."""
    start = time.perf_counter()
    fw, bw = fb.forward, fb.backward
    producer: dict[str, BoundSymbol] = {}
    clusters = _Clusters()
    for bsym in fw.bound_symbols:
        if not is_cheap(bsym):
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
    cotangents = bw.args[fb.n_saved :]
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
    if not recompute:
        return fb

    new_saved = _in_forward_order(fw, kept)
    new_bw = bw.derive(_just_in_time(bw.bound_symbols, recompute), pass_name="rematerialize")
    new_bw.args = (*new_saved, *cotangents)
    new_bw = dce(new_bw)
    leaves_of_fw = list(fw.return_value[0])
    ret = prims.python_return.bind((tuple(leaves_of_fw), tuple(new_saved)), output=None)
    body = [b for b in fw.bound_symbols if not b.has_tag(OpTag.RETURN)]
    new_fw = dce(fw.derive([*body, ret], pass_name="rematerialize"))
    seconds = time.perf_counter() - start
    for t in (new_fw, new_bw):  # the timing, on the record of this pass
        t.history = tuple(
            PassRecord(r.name, seconds) if r.name == "rematerialize" else r for r in t.history
        )
    return dataclasses.replace(fb, forward=new_fw, backward=new_bw, n_saved=len(new_saved))


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


def _in_forward_order(fw: Trace, names: set[str]) -> list[Proxy]:
    out: list[Proxy] = []
    seen: set[str] = set()
    for p in fw.args:
        if p.name in names and p.name not in seen:
            seen.add(p.name)
            out.append(p)
    for b in fw.bound_symbols:
        for p in b.flat_proxy_outs:
            if p.name in names and p.name not in seen:
                seen.add(p.name)
                out.append(p)
    return out


def _just_in_time(
    backward: list[BoundSymbol], recompute: dict[str, BoundSymbol]
) -> list[BoundSymbol]:
    """The backward with each recomputed value's ops placed right before its first use, so it
    is not alive longer than needed."""
    out: list[BoundSymbol] = []
    emitted: set[int] = set()

    def emit(name: str) -> None:
        b = recompute.get(name)
        if b is None or id(b) in emitted:
            return
        emitted.add(id(b))
        for a in b.flat_proxy_args:
            emit(a.name)
        out.append(b)

    for bsym in backward:
        for a in bsym.flat_proxy_args:
            emit(a.name)
        out.append(bsym)
    return out
