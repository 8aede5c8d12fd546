"""Which values of a trace may share memory when it runs, and which of those are written in place.

In the IR every op is functional, but a trace with in-place writes (``prims.copy_``, and the
``OpTag.IN_PLACE`` ops built on it) is only right when the values that share memory with the
written one do so when it runs exactly as they do in eager torch. This module computes that
relation, for passes and executors to respect:

- ``aliased_inputs(bsym)``: for each tensor output of a bound symbol, the tensor inputs it may
  share memory with when it runs. For a prim that is a fixed table (``MAY_ALIAS_PRIMS``: the
  prims executors may run as a view of their input, such as ``transpose`` as ``torch.permute``,
  or as the input itself, such as ``convert_element_type`` to the same dtype); for a composite
  it follows the aliasing through its decomposition; an op tagged ``OpTag.VIEW`` whose
  decomposition does not show it (``unfold``, which gathers) aliases all its tensor inputs.
  ``prims.copy_`` returns its destination.
- ``AliasInfo``: the values of a sequence of bound symbols partitioned into alias groups (the
  outputs of a bound symbol joined with the inputs they may alias), the groups written in place
  (some member is the destination of a ``prims.copy_``, at any depth of a composite) and the
  groups the caller observes (holding an input or an output of the trace).

This is a may-alias relation: a group can hold values that end up in separate memory (reshape of a
non-contiguous tensor copies), never miss two that share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from thunder_ir import prims
from thunder_ir.proxies import Proxy, TensorProxy
from thunder_ir.pytree import tree_flatten
from thunder_ir.symbol import BoundSymbol
from thunder_ir.tags import OpTag

if TYPE_CHECKING:
    from thunder_ir.trace import Trace

__all__ = [
    "MAY_ALIAS_PRIMS",
    "AliasInfo",
    "alias_info",
    "aliased_and_written",
    "aliased_inputs",
    "flag_aliases_requiring_grad",
    "with_writes_exposed",
    "writes_in_place",
    "writes_where_gradients_flow",
    "written_inputs",
    "written_intermediates",
    "written_where_gradients_flow",
]

# Prims whose executors may return a view of their first argument, or that argument itself. Every
# other prim returns new memory when it runs (``prims.copy_`` returns its destination).
MAY_ALIAS_PRIMS = frozenset(
    {
        prims.transpose,
        prims.reshape,
        prims.slice_prim,
        prims.squeeze,
        prims.unsqueeze,
        prims.broadcast_in_dim,
        prims.shallow_copy,
        prims.stop_gradient,
        prims.real,
        prims.imag,
        prims.convert_element_type,  # to the same dtype: torch's Tensor.to returns the tensor itself
        prims.device_put,  # to the same device
    }
)

_VIEW_TAGS = frozenset({OpTag.VIEW, OpTag.MAY_RETURN_VIEW})


def _tensor_args(bsym: BoundSymbol) -> list[TensorProxy]:
    return [a for a in bsym.flat_args if isinstance(a, TensorProxy)]


def _prim_aliases(bsym: BoundSymbol) -> list[tuple[Proxy, Proxy]]:
    """(output, input) pairs of a prim (or of a symbol without decomposition) that may share
    memory when it runs."""
    sym = bsym.sym
    if sym is prims.copy_:
        dst = bsym.args[1] if len(bsym.args) > 1 else bsym.kwargs.get("dst")
        outs = bsym.flat_proxy_outs
        return [(o, dst) for o in outs if isinstance(dst, TensorProxy)]
    tensors = _tensor_args(bsym)
    if not tensors:
        return []
    if sym.is_prim:
        if sym not in MAY_ALIAS_PRIMS:
            return []
        a = tensors[0]
        if sym is prims.convert_element_type and bsym.args[1] != a.dtype:
            return []
        if sym is prims.device_put and bsym.args[1] != a.device:
            return []
        return [(o, a) for o in bsym.flat_proxy_outs if isinstance(o, TensorProxy)]
    if _VIEW_TAGS & sym.tags or OpTag.IN_PLACE in sym.tags:
        return [(o, t) for o in bsym.flat_proxy_outs if isinstance(o, TensorProxy) for t in tensors]
    return []


def _flow(bsym: BoundSymbol, env: dict[str, set[str]], written: set[str]) -> None:
    """Propagates ``env`` (inner value -> the outer inputs it may alias) through ``bsym``, adding
    to ``written`` the outer inputs a ``prims.copy_`` inside writes into."""
    if bsym.sym.is_prim or not bsym.subsymbols:
        if bsym.sym is prims.copy_ and len(bsym.args) > 1:
            dst = bsym.args[1]
            if isinstance(dst, Proxy):
                written.update(env.get(dst.name, ()))
        for out, inp in _prim_aliases(bsym):
            source = env.get(inp.name)
            if source:
                env.setdefault(out.name, set()).update(source)
        return
    for sub in bsym.subsymbols:
        _flow(sub, env, written)


def _analyze(bsym: BoundSymbol) -> tuple[list[tuple[Proxy, Proxy]], set[str]]:
    """(output, input) pairs of ``bsym`` that may share memory, and the names of the inputs it
    writes into."""
    if bsym.sym.is_prim or not bsym.subsymbols:
        written: set[str] = set()
        if bsym.sym is prims.copy_ and len(bsym.args) > 1:
            dst = bsym.args[1]
            if isinstance(dst, Proxy):
                written.add(dst.name)
        return _prim_aliases(bsym), written
    tensors = {a.name: a for a in _tensor_args(bsym)}
    env = {name: {name} for name in tensors}
    written = set()
    for sub in bsym.subsymbols:
        _flow(sub, env, written)
    pairs: list[tuple[Proxy, Proxy]] = []
    # A view whose decomposition computes its values (unfold gathers) still shares memory when
    # torch runs it; a MAY_RETURN_VIEW op whose decomposition makes new memory (``to`` another
    # dtype) does not.
    view_tagged = OpTag.VIEW in bsym.sym.tags
    for out in bsym.flat_proxy_outs:
        if not isinstance(out, TensorProxy):
            continue
        sources = env.get(out.name, set())
        if out.name in tensors and out.name not in sources:
            sources = {out.name}
        if not sources and view_tagged and tensors:
            sources = {next(iter(tensors))}  # a view's base is its first tensor, never an index
        pairs.extend((out, tensors[s]) for s in sorted(sources) if s in tensors)
    return pairs, written


def aliased_inputs(bsym: BoundSymbol) -> list[tuple[Proxy, Proxy]]:
    """(output, input) pairs of ``bsym``: each tensor output with each tensor input it may share
    memory with when the bound symbol runs."""
    return _analyze(bsym)[0]


def aliased_and_written(bsym: BoundSymbol) -> tuple[list[tuple[Proxy, Proxy]], set[str]]:
    """``aliased_inputs(bsym)`` and ``written_inputs(bsym)`` in one analysis."""
    return _analyze(bsym)


def written_inputs(bsym: BoundSymbol) -> set[str]:
    """The names of the inputs of ``bsym`` it writes into (through views of them too)."""
    return _analyze(bsym)[1]


def with_writes_exposed(
    bsyms: Iterable[BoundSymbol], only: frozenset[str] | None = None
) -> list[BoundSymbol]:
    """``bsyms`` with every composite that writes in place replaced by its decomposition, down to
    the ``prims.copy_`` calls (batch_norm's update of its running statistics then stands apart
    from its output). With ``only``, a composite that writes none of those names stays whole:
    it runs as the op itself, with the op's own rules (``fill_`` into an expanded tensor)."""
    out: list[BoundSymbol] = []
    for b in bsyms:
        is_copy = b.sym is prims.copy_
        if is_copy or not b.subsymbols or not writes_in_place(b):
            out.append(b)
        elif only is not None and not written_inputs(b) & only:
            out.append(b)  # kept whole
        else:
            out.extend(with_writes_exposed(b.subsymbols, only))
    return out


def writes_in_place(bsym: BoundSymbol) -> bool:
    """Whether ``bsym`` writes into memory in place: tagged ``OpTag.IN_PLACE`` or a composite
    with a ``prims.copy_`` in its decomposition (batch_norm updating running statistics)."""
    if OpTag.IN_PLACE in bsym.sym.tags:
        return True
    return any(writes_in_place(s) for s in bsym.subsymbols)


class AliasInfo:
    """Alias groups of the values of a sequence of bound symbols: which groups are written in
    place, and which hold an observed value (an input or output of the trace, whose memory the
    caller sees).

    ``root(name)`` names a value's group (a value no bound symbol relates to another is alone in
    its own); ``is_written(name)`` says whether some member of its group is written in place.
    """

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}
        self._written: set[str] = set()
        self._observed: set[str] = set()
        self._roots: dict[str, frozenset[str]] = {}  # memo: "written"/"observed" -> their roots
        self.pairs: dict[int, list[tuple[Proxy, Proxy]]] = {}  # id(bsym) -> aliased_inputs

    def root(self, name: str) -> str:
        parent = self._parent
        r = name
        while parent.get(r, r) != r:
            r = parent[r]
        while parent.get(name, name) != r:  # path compression
            parent[name], name = r, parent[name]
        return r

    def union(self, a: str, b: str) -> None:
        ra, rb = self.root(a), self.root(b)
        if ra != rb:
            self._parent[ra] = rb
            self._roots.clear()

    def mark_written(self, name: str) -> None:
        self._written.add(name)
        self._roots.clear()

    def mark_observed(self, name: str) -> None:
        self._observed.add(name)
        self._roots.clear()

    def _group_roots(self, which: str) -> frozenset[str]:
        roots = self._roots.get(which)
        if roots is None:
            names = self._written if which == "written" else self._observed
            roots = self._roots[which] = frozenset(self.root(n) for n in names)
        return roots

    def is_written(self, name: str) -> bool:
        """Whether ``name`` shares a group with a value written in place."""
        return self.root(name) in self._group_roots("written")

    def is_observed(self, name: str) -> bool:
        """Whether ``name`` shares a group with an input or an output of the trace."""
        return self.root(name) in self._group_roots("observed")

    def any_written(self) -> bool:
        """Whether anything is written in place."""
        return bool(self._written)

    def written_names(self) -> frozenset[str]:
        """The destinations of the in-place writes (outer names)."""
        return frozenset(self._written)

    def aliases_of(self, bsym: BoundSymbol) -> list[tuple[Proxy, Proxy]]:
        """``aliased_inputs(bsym)`` for a bound symbol of the analyzed sequence."""
        return self.pairs.get(id(bsym), [])

    def in_written_group(self, bsym: BoundSymbol) -> bool:
        """Whether ``bsym`` produces a value that may alias one of its inputs inside a group that
        is written in place (it must then run as eager torch runs it: as a view, or a copy)."""
        return any(self.is_written(out.name) for out, _ in self.aliases_of(bsym))

    def in_observed_group(self, bsym: BoundSymbol) -> bool:
        """Whether ``bsym`` produces a value that may alias one of its inputs inside a group
        holding an input or output of the trace (whether it is a view, and its strides, are then
        seen by the caller)."""
        return any(self.is_observed(out.name) for out, _ in self.aliases_of(bsym))


def alias_info(
    bsyms: Sequence[BoundSymbol] | Iterable[BoundSymbol], observed: Iterable[str] = ()
) -> AliasInfo:
    """The alias groups of ``bsyms`` (top-level bound symbols of a trace, in order);
    ``observed`` names the values the caller sees (the trace's inputs and outputs)."""
    info = AliasInfo()
    for bsym in bsyms:
        pairs, written = _analyze(bsym)
        if pairs:
            info.pairs[id(bsym)] = pairs
        for out, inp in pairs:
            info.union(out.name, inp.name)
        for name in written:
            info.mark_written(name)
    for name in observed:
        info.mark_observed(name)
    return info


def flag_aliases_requiring_grad(dst: TensorProxy) -> None:
    """Marks every floating value of the trace being recorded that may share ``dst``'s memory as
    requiring grad, as eager's base and views of a tensor written with a value requiring grad
    do from then on (``v[:3].copy_(x * w)`` makes ``v`` and its other views require grad)."""
    from thunder_ir.tracectx import get_tracectx

    trace = get_tracectx()
    if trace is None:
        return
    bsyms = [b for scope in trace.scopes for b in scope]
    info = alias_info(bsyms)
    group = info.root(dst.name)
    for bsym in bsyms:
        for p in (*bsym.flat_proxy_args, *bsym.flat_proxy_outs):
            if (
                isinstance(p, TensorProxy)
                and not p.requires_grad
                and p.dtype.is_inexact
                and info.root(p.name) == group
            ):
                p.requires_grad = True


def _carries_grad(p: object) -> bool:
    return isinstance(p, TensorProxy) and p.dtype.is_inexact


def written_where_gradients_flow(
    trace: Trace, requires_grad: Sequence[bool] | None = None
) -> frozenset[str]:
    """The values of ``trace`` (all members of their alias groups) whose memory is written in
    place where gradients flow: a group that holds a value carrying a gradient, is written with
    one, or is read by an op computing one (its old or new contents may be what the backward
    needs). Writes elsewhere (batch_norm's running statistics, counters) leave differentiation
    alone. ``requires_grad`` per input; by default the proxies' flags."""
    if not any(writes_in_place(b) for b in trace.bound_symbols):
        return frozenset()
    args = trace.args
    if requires_grad is None:
        requires_grad = [isinstance(a, TensorProxy) and a.requires_grad for a in args]
    active = {a.name for a, r in zip(args, requires_grad) if r and _carries_grad(a)}
    if not active:
        return frozenset()
    bsyms = with_writes_exposed(trace.bound_symbols)
    info = alias_info(bsyms)
    roots: set[str] = set()
    names: set[str] = {a.name for a in args if isinstance(a, TensorProxy)}
    for b in bsyms:
        if b.has_tag(OpTag.RETURN):
            continue
        tensors = [p for p in b.flat_proxy_args if isinstance(p, TensorProxy)]
        names.update(p.name for p in b.flat_proxy_outs if isinstance(p, TensorProxy))
        # A value whose memory was written with a gradient-carrying value carries one from then
        # on (``c.add_(w); a.add_(c)``: the second write carries w's gradient into a).
        reads_active = b.sym is not prims.stop_gradient and any(
            p.name in active or info.root(p.name) in roots for p in tensors
        )
        if not reads_active:
            continue
        if writes_in_place(b):
            roots.update(info.root(n) for n in written_inputs(b))
        else:
            roots.update(info.root(p.name) for p in tensors if info.is_written(p.name))
        active.update(
            o.name for o in b.flat_outs if isinstance(o, TensorProxy) and _carries_grad(o)
        )
    roots.update(info.root(n) for n in active if info.is_written(n))
    return frozenset(n for n in names if info.root(n) in roots)


def writes_where_gradients_flow(trace: Trace, requires_grad: Sequence[bool] | None = None) -> bool:
    """Whether ``trace`` writes in place where gradients flow (see
    ``written_where_gradients_flow``)."""
    return bool(written_where_gradients_flow(trace, requires_grad))


def written_intermediates(trace: Trace) -> frozenset[str]:
    """The values of ``trace`` (all members of their alias groups) whose memory is written in
    place and that only the program sees: no member of the group is an input of the trace or
    returned by it (``y = bn(x); y += r`` writes into memory the program made for itself)."""
    if not any(writes_in_place(b) for b in trace.bound_symbols):
        return frozenset()
    bsyms = with_writes_exposed(trace.bound_symbols)
    observed = [a.name for a in trace.args if isinstance(a, Proxy)]
    observed += [p.name for p in tree_flatten(trace.return_value)[0] if isinstance(p, Proxy)]
    info = alias_info(bsyms, observed)
    names = {p.name for b in bsyms for p in b.flat_proxy_outs if isinstance(p, TensorProxy)}
    return frozenset(n for n in names if info.is_written(n) and not info.is_observed(n))
