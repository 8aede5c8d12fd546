"""Rotary embeddings with fewer torch calls: ``rotate_half(x) * sin`` as ``roll(x) * sin_signed``.

Llama, Mistral, Qwen, Gemma, Phi-3 and GPT-NeoX rotate queries and keys with::

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    q_embed = q * cos + rotate_half(q) * sin

``rotate_half(x) * sin`` is four torch calls before the product (two slices, a negation, a cat),
in every layer, for queries and keys. It equals ``roll(x, h, -1) * sin_signed``, where
``sin_signed`` is ``sin`` with its first half negated, bit for bit: element ``j < h`` is
``(-x[j + h]) * sin[j]`` in one and ``x[j + h] * (-sin[j])`` in the other, and negation commutes
with rounding. ``sin_signed`` is made once per ``sin`` the model computes (before the per-layer
``unsqueeze`` that broadcasts it over the heads), so each rotation costs one ``roll`` instead of
four calls. Gradients are equal too, term by term.

A match is rewritten only when its intermediates are its own (read by the match alone, none
returned), no in-place write runs between its first op and its last, and nothing writes into the
memory of ``sin`` (its negated half is made once, where the first rotation reads it).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from thunder_ir import BoundSymbol, OpTag, Proxy, Symbol, TensorProxy, Trace
from thunder_ir import ops as ltorch
from thunder_ir.aliasing import alias_info, writes_in_place
from thunder_transforms.passes import substitute

__all__ = ["sign_flipped_rotary"]


@dataclass
class _Rotation:
    root: int  # index of the product
    members: set[int]  # the slices, negation, cat and product it replaces
    x: TensorProxy
    half: int
    sin: TensorProxy


def _last_dim(dim: Any, ndim: int) -> bool:
    return type(dim) is int and dim in (-1, ndim - 1)


def _half_slice(key: Any, first: bool, h: int) -> bool:
    """``(..., slice(None, h))`` (``first``) or ``(..., slice(h, None))``."""
    if not (isinstance(key, tuple) and len(key) == 2 and key[0] is Ellipsis):
        return False
    s = key[1]
    if not isinstance(s, slice) or s.step not in (None, 1):
        return False
    if first:
        return s.start in (None, 0) and s.stop == h
    return s.start == h and s.stop in (None, 2 * h)


class _Finder:
    def __init__(self, bsyms: Sequence[BoundSymbol]) -> None:
        self.bsyms = bsyms
        self.index: dict[str, int] = {}
        for i, b in enumerate(bsyms):
            for p in b.flat_proxy_outs:
                self.index.setdefault(p.name, i)
        self.reads: Counter[str] = Counter(p.name for b in bsyms for p in b.flat_proxy_args)
        self.returned = {
            p.name for b in bsyms if b.has_tag(OpTag.RETURN) for p in b.flat_proxy_args
        }
        self.writes = [i for i, b in enumerate(bsyms) if writes_in_place(b)]

    def producer(self, v: Any, op: Symbol) -> tuple[int, BoundSymbol] | None:
        if not isinstance(v, TensorProxy) or v.name not in self.index:
            return None
        i = self.index[v.name]
        b = self.bsyms[i]
        return (i, b) if b.sym is op else None

    def private(self, v: TensorProxy, reads: int = 1) -> bool:
        return self.reads[v.name] == reads and v.name not in self.returned

    def rotation(self, i: int) -> _Rotation | None:
        """The rotation whose product is bound symbol ``i``, if it is one."""
        b = self.bsyms[i]
        if b.sym is not ltorch.mul or b.kwargs or len(b.args) != 2:
            return None
        for r, sin in (b.args, tuple(reversed(b.args))):
            found = self._rotated(r, sin, b.output)
            if found is not None:
                members, x, h = found
                members.add(i)
                if any(min(members) < w < i for w in self.writes):
                    return None
                return _Rotation(i, members, x, h, sin)
        return None

    def _rotated(self, r: Any, sin: Any, out: Any) -> tuple[set[int], TensorProxy, int] | None:
        cat = self.producer(r, ltorch.cat)
        if cat is None or not isinstance(sin, TensorProxy) or not isinstance(out, TensorProxy):
            return None
        ci, cb = cat
        parts = cb.args[0] if cb.args else None
        dim = cb.args[1] if len(cb.args) > 1 else cb.kwargs.get("dim", 0)
        if set(cb.kwargs) - {"dim"} or not isinstance(parts, (tuple, list)) or len(parts) != 2:
            return None
        neg = self.producer(parts[0], ltorch.neg)
        if neg is None or not _last_dim(dim, r.ndim):
            return None
        ni, nb = neg
        x2, x1 = nb.args[0], parts[1]
        s2, s1 = self.producer(x2, ltorch.getitem), self.producer(x1, ltorch.getitem)
        if s1 is None or s2 is None or s1[1].args[0] is not s2[1].args[0]:
            return None
        x = s1[1].args[0]
        if not isinstance(x, TensorProxy) or not x.ndim or type(x.shape[-1]) is not int:
            return None
        n = x.shape[-1]
        h = n // 2
        if n % 2 or not _half_slice(s1[1].args[1], True, h):
            return None
        if not _half_slice(s2[1].args[1], False, h):
            return None
        if not (sin.ndim and type(sin.shape[-1]) is int and sin.shape[-1] == n):
            return None
        same = {x.dtype, sin.dtype, r.dtype, out.dtype}
        if len(same) != 1 or not x.dtype.is_float:
            return None
        if tuple(out.shape[-1:]) != (n,) or not all(self.private(v) for v in (r, parts[0], x1, x2)):
            return None
        return {ci, ni, s1[0], s2[0]}, x, h


def _broadcast_chain(sin: TensorProxy, finder: _Finder) -> tuple[TensorProxy, list[BoundSymbol]]:
    """``sin`` as a tensor the model computed once and the ``unsqueeze`` calls (new leading
    dimensions, the last one kept) that made ``sin`` from it."""
    chain: list[BoundSymbol] = []
    v = sin
    while True:
        found = finder.producer(v, ltorch.unsqueeze)
        if found is None:
            return v, list(reversed(chain))
        b = found[1]
        src, dim = b.args[0], b.args[1] if len(b.args) > 1 else b.kwargs.get("dim")
        if not isinstance(src, TensorProxy) or type(dim) is not int or dim in (-1, v.ndim - 1):
            return v, list(reversed(chain))
        chain.append(b)
        v = src


def sign_flipped_rotary(trace: Trace) -> Trace:
    """``trace`` with each ``rotate_half(x) * sin`` computed as ``roll(x) * sin_signed`` (see the
    module docstring); ``trace`` itself where there is none."""
    start = time.perf_counter()
    bsyms = trace.bound_symbols
    finder = _Finder(bsyms)
    written = alias_info(bsyms).is_written if finder.writes else (lambda name: False)
    rotations: dict[int, _Rotation] = {}
    taken: set[int] = set()
    for i in range(len(bsyms)):
        rot = finder.rotation(i)
        if rot is None or rot.members & taken:
            continue
        base, _ = _broadcast_chain(rot.sin, finder)
        if not written(rot.sin.name) and not written(base.name):
            rotations[i] = rot
            taken |= rot.members
    if not rotations:
        return trace
    renamed: dict[str, Proxy] = {}
    signed: dict[str, Any] = {}  # per sin (and per tensor it was broadcast from): sin_signed

    def get(v: Any) -> Any:
        return renamed.get(v.name, v) if isinstance(v, Proxy) else v

    def sign_flipped(sin: TensorProxy, h: int) -> Any:
        if sin.name in signed:
            return signed[sin.name]
        base, chain = _broadcast_chain(sin, finder)
        out = signed.get(base.name)
        if out is None:
            b = get(base)
            first = ltorch.getitem(b, (Ellipsis, slice(None, h, None)))
            second = ltorch.getitem(b, (Ellipsis, slice(h, None, None)))
            out = signed[base.name] = ltorch.cat((ltorch.neg(first), second), -1)
        for u in chain:
            out = ltorch.unsqueeze(out, *u.args[1:], **u.kwargs)
        signed[sin.name] = out
        return out

    with trace.rerecord("sign_flipped_rotary", start=start) as new:
        for i, b in enumerate(bsyms):
            rot = rotations.get(i)
            if rot is not None:
                rolled = ltorch.roll(get(rot.x), rot.half, -1)
                renamed[b.output.name] = ltorch.mul(rolled, sign_flipped(rot.sin, rot.half))
            elif i not in taken:
                new.record(substitute(b, renamed))
    return new
