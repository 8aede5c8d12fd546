"""The backward computed from what eager saves, not from inputs eager's graph does not save.

A grad rule may compute, in the backward, values of the forward's inputs alone
(``cosine_similarity``'s ``w / |w|`` for ``x``'s gradient, ``pairwise_distance``'s ``x - w``),
where eager's graph saved those values and not the inputs. The caller may then write such an
input in place between the forward and the backward (an optimizer step): eager's backward runs,
thunder's would read the written input and refuse (``runner._saved_unchecked``). So those
computations move into the forward, which saves their results instead, where that saves no more
bytes than the inputs they replace (a float32 cast of a bfloat16 input stays in the backward,
recomputed there: ``core._recast_in_backward``)."""

from __future__ import annotations

import dataclasses
import time

from thunder_ir import BoundSymbol, OpTag, PassRecord, Proxy, TensorProxy, prims
from thunder_ir.proxies import IntegerProxy
from thunder_transforms.autodiff.core import ForwardBackward
from thunder_transforms.dce import dce

__all__ = ["forward_reads_of_unsaved_inputs"]

# Ops that stay where they are (what they write or draw, or their effects, belong there).
_PINNED = frozenset({OpTag.RANDOM, OpTag.IN_PLACE, OpTag.DONT_DCE})


def _bytes(p: Proxy) -> int | None:
    if not isinstance(p, TensorProxy):
        return 0
    n = 1
    for s in p.shape:
        if isinstance(s, IntegerProxy):
            if s.value is None:
                return None
            s = s.value
        n *= int(s)
    return n * p.dtype.bytes


def forward_reads_of_unsaved_inputs(
    fb: ForwardBackward, saved_by_eager: frozenset[int]
) -> ForwardBackward:
    """``fb`` whose backward reads none of the inputs eager's graph does not save (by position,
    ``saved_by_eager`` those it does) where it read them only through values computed from the
    saved ones alone: those computations run in the forward instead (see the module)."""
    start = time.perf_counter()
    fw, bw = fb.forward, fb.backward
    if fb.mutated_inputs or not bw.bound_symbols or not fw.bound_symbols:
        return fb
    ret = fw.bound_symbols[-1]
    if not ret.has_tag(OpTag.RETURN):
        return fb
    saved = list(bw.args[: fb.n_saved])
    cotangents = bw.args[fb.n_saved :]
    saved_names = {p.name for p in saved if isinstance(p, Proxy)}
    targets = {
        a.name
        for i, a in enumerate(fw.args)
        if isinstance(a, TensorProxy) and i not in saved_by_eager and a.name in saved_names
    }
    if not targets:
        return fb

    body, bw_ret = bw.bound_symbols[:-1], bw.bound_symbols[-1]
    # Values the cotangents reach, and values computed from a target without them.
    from_cotangents = {p.name for p in cotangents if isinstance(p, Proxy)}
    from_target: set[str] = set(targets)
    free: list[BoundSymbol] = []  # computed from saved values alone, in backward order
    for b in body:
        reads = {p.name for p in b.flat_proxy_args}
        outs = [o.name for o in b.flat_proxy_outs]
        if reads & from_cotangents or not _PINNED.isdisjoint(b.sym.tags) or not outs:
            from_cotangents.update(outs)
            continue
        free.append(b)
        if reads & from_target:
            from_target.update(outs)
    # A target read with a cotangent, or returned, stays saved: nothing moves.
    for b in body:
        reads = {p.name for p in b.flat_proxy_args}
        if reads & targets and any(o.name in from_cotangents for o in b.flat_proxy_outs):
            return fb
    if {p.name for p in bw_ret.flat_proxy_args} & targets:
        return fb

    # The ops to move: those computed from a target, with what they read that the backward
    # computes; each reads only saved values or values the moved ops compute.
    moved_names = set(from_target) - targets
    producer = {o.name: b for b in free for o in b.flat_proxy_outs}
    stack = [
        p.name for b in free if b.flat_proxy_outs[0].name in moved_names for p in b.flat_proxy_args
    ]
    while stack:
        n = stack.pop()
        made_by = producer.get(n)
        if made_by is None or n in moved_names:
            continue
        moved_names.update(o.name for o in made_by.flat_proxy_outs)
        stack.extend(p.name for p in made_by.flat_proxy_args)
    moved = [b for b in free if any(o.name in moved_names for o in b.flat_proxy_outs)]
    if any(o.name in fb.checkpointed for b in moved for o in b.flat_proxy_outs):
        return fb  # (a checkpointed region is recomputed, not saved)
    fw_names = {a.name for a in fw.args if isinstance(a, Proxy)} | {
        o.name for b in fw.bound_symbols for o in b.flat_proxy_outs
    }
    if any(o.name in fw_names for b in moved for o in b.flat_proxy_outs):
        return fb
    if any(
        p.name not in saved_names and p.name not in moved_names
        for b in moved
        for p in b.flat_proxy_args
    ):
        return fb

    # What the backward now reads: the saved values it still reads, and the moved values
    # read by the ops left in it (or returned).
    kept = [b for b in body if not any(o.name in moved_names for o in b.flat_proxy_outs)]
    read_after = {p.name for b in (*kept, bw_ret) for p in b.flat_proxy_args}
    new_saved: list[Proxy] = [p for p in saved if isinstance(p, Proxy) and p.name in read_after]
    seen = {p.name for p in new_saved}
    for b in moved:
        for o in b.flat_proxy_outs:
            if o.name in read_after and o.name not in seen:
                seen.add(o.name)
                new_saved.append(o)
    if any(p.name in targets for p in new_saved):
        return fb
    before = [_bytes(p) for p in saved if isinstance(p, Proxy)]
    after = [_bytes(p) for p in new_saved]
    if None in before or None in after or sum(after) > sum(before):  # type: ignore[arg-type]
        return fb

    record = PassRecord("forward reads of unsaved inputs", time.perf_counter() - start)
    outputs = ret.args[0][0]
    new_ret = prims.python_return.bind((tuple(outputs), tuple(new_saved)), output=None)
    fw_body = [b for b in fw.bound_symbols if not b.has_tag(OpTag.RETURN)]
    new_fw = fw.replace(bound_symbols=[*fw_body, *moved, new_ret], history=(*fw.history, record))
    new_bw = dce(
        bw.replace(
            args=(*new_saved, *cotangents),
            bound_symbols=[*kept, bw_ret],
            history=(*bw.history, record),
        )
    )
    return dataclasses.replace(fb, forward=dce(new_fw), backward=new_bw, n_saved=len(new_saved))
