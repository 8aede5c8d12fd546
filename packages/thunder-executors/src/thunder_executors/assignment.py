"""The assignment pass: which executor runs each bound symbol, and the fusion regions.

Each bound symbol goes to the first executor in the list that claims it. An operator executor
claims it by translating it into a call of one of its symbols; a fusion executor marks it fusible.
A composite op nobody claims is replaced by its subsymbols (recursively). Fusible symbols are then
grouped into regions by dataflow: one may join a region unless a symbol outside the region sits
between them on a dependency path (joining would create a cycle). Groups are emitted in a
topological order that stays as close as possible to the original one, and every intermediate
is deleted after its last use (``del t3, t4``) so memory is freed as early as in eager code.

Memory is shared as in eager torch. The values of the trace are split into alias groups
(``thunder_ir.aliasing``); an op whose output may share memory with an input runs as the torch
callable it mirrors (``torch.Tensor.diagonal(y)``), never decomposed and never in a fusion region,
when its group is written in place (a decomposition computes the view's values in new memory and
the write would miss the base) or holds an input or an output of the trace (the caller sees
whether it is a view of the input, its strides, and torch's errors: ``view`` of a tensor whose
strides do not allow it; ``view`` runs as torch's own wherever no fusion region takes it). Torch then makes the same views and copies as eager (reshape of a
transposed tensor copies) whatever the strides of the inputs when it runs. Ops that set a layout
(``contiguous()``, a ``memory_format``) run as torch's own too, where no fusion region takes
them: the elementwise ops after them take the layout they give. In-place ops run as
torch's own (``torch.Tensor.add_``: torch's checks of the memory written, the written tensor as
result), and every write is a barrier that keeps program order. Views of intermediates nobody
writes stay free to decompose and fuse. ``eager_aliasing=False`` keeps only what writes need
(views in written groups) and decomposes the rest (the OpInfo suite checks decompositions).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from thunder_executors.executor import Executor, FusionExecutor, OperatorExecutor, get_executor
from thunder_executors.onednn_matmul import onednn_matmul_products
from thunder_executors.peephole import (
    accumulate_in_place,
    drop_identity_arithmetic,
    drop_implicit_broadcasts,
    drop_unread_factories,
    drop_unread_numbers,
    index_put_into_fresh,
    select_for_int_indices,
    stack_flattened_for_cat,
)
from thunder_executors.torch_views import torch_call
from thunder_ir import BoundSymbol, PassRecord, Proxy, Symbol, TensorProxy, Trace, prims
from thunder_ir import ops as ltorch
from thunder_ir.aliasing import AliasInfo, alias_info, writes_in_place
from thunder_ir.higher_order import map_subtraces
from thunder_ir.symbol import leaf_prims
from thunder_ir.tags import OpTag

__all__ = [
    "ExecutionTrace",
    "ExecutorLike",
    "resolve_executors",
    "transform_for_execution",
    "with_deletes",
]

ExecutorLike = str | Executor


class ExecutionTrace(Trace):
    """A trace whose symbols all belong to executors: what runs is what prints.

    ``fusion_notes`` says, for every fusion region, why it starts where it does (a split from
    another region, with the symbol that forced it). ``fusion_regions`` are the fused bound
    symbols; the compile time of regions compiled lazily is ``compile_seconds()``.
    """

    FIELDS = (*Trace.FIELDS, "fusion_notes", "fusion_regions", "executors")

    def __init__(
        self,
        *args: Any,
        fusion_notes: Iterable[str] = (),
        fusion_regions: Iterable[BoundSymbol] = (),
        executors: Iterable[Executor] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fusion_notes: list[str] = list(fusion_notes)
        self.fusion_regions: list[BoundSymbol] = list(fusion_regions)
        self.executors: tuple[Executor, ...] = tuple(executors)

    def python_callable(self, ctx: dict[str, Any] | None = None) -> Callable[..., Any]:
        # Executor symbols printed under ``torch`` are exactly torch's functions, so the real
        # module can stand in for the namespace: constants like torch.float32 then cost a dict
        # lookup, not a fallback __getattr__.
        return super().python_callable({"torch": torch, **(ctx or {})})

    def compile_seconds(self) -> float:
        """Time spent compiling fusion regions so far (they compile on their first call)."""
        return float(sum(getattr(b.sym.impl, "compile_seconds", 0.0) for b in self.fusion_regions))


def resolve_executors(executors: Iterable[ExecutorLike]) -> tuple[Executor, ...]:
    """Executors by name or object, with the torch executor appended as the last resort. An
    executor asked for that cannot run here is an error that says why."""
    out = [get_executor(e) if isinstance(e, str) else e for e in executors]
    for e in out:
        ok, why = e.availability()
        if not ok:
            raise RuntimeError(f"executor {e.name!r} is not available here: {why}")
    if not any(e.name == "torch" for e in out):
        out.append(get_executor("torch"))
    return tuple(out)


def recommended_executors() -> tuple[str, ...]:
    """A good executor list for this machine: a fusion executor (nvFuser when it can run here,
    else torch.compile compiling regions in the background, so first calls cost what tracing
    costs), high-level ops kept whole by torch, then prims by torch."""
    fusion = "nvfuser" if get_executor("nvfuser").is_available() else "torchcompile_background"
    return (fusion, "torch_ops", "torch")


@dataclass
class _Node:
    """One bound symbol after claiming: translated (operator executor), kept, or fusible."""

    bsym: BoundSymbol
    fusion: FusionExecutor | None = None
    tags: frozenset[OpTag] = frozenset()  # the IR symbol's (an executor symbol has none)


@dataclass
class _Group:
    """A node of the dependency graph: one symbol, or a fusion region of one executor."""

    first: int
    fusion: FusionExecutor | None
    members: list[_Node] = field(default_factory=list)
    preds: set[int] = field(default_factory=set)
    note: str = ""


def _bits(mask: int) -> Iterable[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


class _Assigner:
    def __init__(
        self,
        executors: Sequence[Executor],
        aliases: AliasInfo,
        eager_aliasing: bool = True,
        first_region: int = 0,
    ) -> None:
        self.executors = executors
        self.first_region = first_region
        self.sub_regions: list[BoundSymbol] = []  # fusion regions of higher-order functions
        self.nodes: list[_Node] = []
        self.aliases = aliases
        self.eager_aliasing = eager_aliasing

    def _as_torch_runs_it(self, bsym: BoundSymbol) -> BoundSymbol | None:
        """``bsym`` as one call of the torch callable it mirrors, where memory sharing needs it."""
        if not ltorch.is_torch_op(bsym.sym) or _stops_gradients(bsym) or _returns_its_input(bsym):
            return None
        if OpTag.IN_PLACE in bsym.sym.tags:
            return torch_call(bsym) if self.eager_aliasing else None
        if self.eager_aliasing and _sets_layout(bsym) and not self._fusible(bsym):
            # torch copies where the strides ask for it, and the results of the elementwise ops
            # after it take the layout it gives, as in eager (returned: the caller sees them)
            return torch_call(bsym)
        if writes_in_place(bsym):
            # An op that writes by an argument (relu(x, inplace=True), batch_norm's statistics)
            # runs as its decomposition, or whole where an operator executor keeps it: its
            # writes go into real tensors.
            return None
        if self.aliases.in_written_group(bsym) or (
            self.eager_aliasing and self.aliases.in_observed_group(bsym)
        ):
            return torch_call(bsym)
        if self.eager_aliasing and any(
            isinstance(o, TensorProxy) and o.requires_grad and self.aliases.is_written(o.name)
            for o in bsym.flat_outs
        ):
            # A result carrying a gradient, written in place later: torch computes it (what its
            # backward saves, and the error autograd raises once that is overwritten, are then
            # eager's where torch records the program)
            return torch_call(bsym)
        if self.eager_aliasing and OpTag.LAYOUT_ERRORS in bsym.sym.tags and not self._fusible(bsym):
            # view raises where the strides do not allow it; its decomposition would copy.
            return torch_call(bsym)
        return None

    def _fusible(self, bsym: BoundSymbol) -> bool:
        """Whether a fusion executor takes ``bsym`` (it lays out its region's tensors itself)."""
        return any(isinstance(e, FusionExecutor) and e.can_fuse(bsym) for e in self.executors)

    def claim(self, bsyms: Iterable[BoundSymbol], defined: set[str]) -> None:
        for bsym in bsyms:
            # A higher-order symbol's functions run on the same executors.
            bsym = map_subtraces(bsym, self._for_execution)
            call = self._as_torch_runs_it(bsym)
            if call is not None:
                # The numbers its decomposition computes (symbolic sizes) may be read after it.
                self.claim(_number_computations(bsym, defined), defined)
                self.nodes.append(_Node(call, tags=bsym.sym.tags))
                defined.update(p.name for p in call.flat_proxy_outs)
                continue
            node = self._claim_one(bsym)
            if node is not None:
                if bsym.subsymbols:  # run whole: the sizes its decomposition computes, too
                    self.claim(_number_computations(bsym, defined), defined)
                    if node.fusion is None and writes_in_place(bsym):
                        # Kept whole (torch_ops' relu(x, inplace=True)), its write stays in
                        # program order, as the copy_ of its decomposition would.
                        node.tags = node.tags | {OpTag.IN_PLACE}
                self.nodes.append(node)
                defined.update(p.name for p in node.bsym.flat_proxy_outs)
                continue
            if bsym.subsymbols:
                self.claim(bsym.subsymbols, defined)
                continue
            if all(p.name in defined for p in bsym.flat_proxy_outs):
                continue  # a composite that returned one of its inputs: nothing to run
            raise NotImplementedError(
                f"no executor among {[e.name for e in self.executors]} can run {bsym.sym.id}, "
                "and it has no decomposition"
            )

    def _for_execution(self, sub: Trace) -> Trace:
        ex = transform_for_execution(
            sub,
            self.executors,
            eager_aliasing=self.eager_aliasing,
            first_region=self.first_region + len(self.sub_regions),
        )
        self.sub_regions.extend(ex.fusion_regions)  # region names stay unique in the program
        return ex

    def _claim_one(self, bsym: BoundSymbol) -> _Node | None:
        tags = bsym.sym.tags
        if OpTag.RETURN in tags or OpTag.PROLOGUE in tags:
            return _Node(bsym, tags=tags)
        for ex in self.executors:
            if isinstance(ex, FusionExecutor):
                if ex.can_fuse(bsym):
                    return _Node(bsym, fusion=ex, tags=tags)
            elif isinstance(ex, OperatorExecutor):
                info = ex.implementation_for(bsym)
                if info is not None:
                    return _Node(info.translated(bsym), tags=tags)
        if bsym.sym.impl is not None and not bsym.subsymbols:
            return _Node(bsym, tags=tags)  # already runnable as it is
        return None

    def translate_unfused(self, bsym: BoundSymbol) -> list[BoundSymbol]:
        """A fusible symbol left out of any region: the first operator executor that claims it,
        else (a composite) its subsymbols that way."""
        for ex in (*self.executors, get_executor("torch")):
            if isinstance(ex, OperatorExecutor):
                info = ex.implementation_for(bsym)
                if info is not None:
                    return [info.translated(bsym)]
        if bsym.subsymbols:
            return [t for sub in bsym.subsymbols for t in self.translate_unfused(sub)]
        raise NotImplementedError(
            f"no operator executor can run {bsym.sym.id} outside a fusion region"
        )


# Conversions that torch answers with the tensor itself when they change nothing.
_CONVERSIONS = frozenset(
    {ltorch.to, ltorch.type_as, ltorch.type, ltorch.float, ltorch.double, ltorch.half,
     ltorch.bfloat16, ltorch.int, ltorch.long, ltorch.short, ltorch.char, ltorch.byte,
     ltorch.bool, ltorch.cpu}
)  # fmt: skip


def _returns_its_input(bsym: BoundSymbol) -> bool:
    """A conversion that changes nothing (``x.to(x.dtype)``, ``x.cpu()`` on the CPU): torch
    returns ``x`` itself, and so does its decomposition (one ``shallow_copy``, printed as
    ``y = x``), without a torch call. A ``memory_format`` may ask for a copy: torch decides."""
    if bsym.sym not in _CONVERSIONS or len(bsym.subsymbols) != 1:
        return False
    (sub,) = bsym.subsymbols
    if sub.sym is not prims.shallow_copy:
        return False
    return bsym.kwargs.get("memory_format") in (None, torch.preserve_format)


def _sets_layout(bsym: BoundSymbol) -> bool:
    """``contiguous()``, or an op given a ``memory_format`` other than "preserve": its
    decomposition keeps the values and knows nothing of strides."""
    if bsym.sym is ltorch.contiguous:
        return True
    return bsym.kwargs.get("memory_format") not in (None, torch.preserve_format)


def _stops_gradients(bsym: BoundSymbol) -> bool:
    """Whether ``bsym``'s decomposition stops gradients where the torch callable it mirrors
    would not (a write recorded in a no-grad region): it must run as its decomposition."""
    if bsym.sym is ltorch.detach or bsym.sym is ltorch.data:  # torch's own stops them too
        return False
    return any(_STOPS_GRADIENT in leaf.sym.tags for leaf in leaf_prims(bsym))


_STOPS_GRADIENT = OpTag.STOPS_GRADIENT  # read once: it is tested for every leaf


def _number_computations(bsym: BoundSymbol, defined: set[str]) -> list[BoundSymbol]:
    """The calls of ``bsym``'s decomposition that compute only numbers from numbers and from
    defined tensors (the sizes of its outputs, when they are symbolic)."""
    out: list[BoundSymbol] = []
    for sub in leaf_prims(bsym):
        outs = sub.flat_proxy_outs
        if not outs or any(isinstance(p, TensorProxy) or p.name in defined for p in outs):
            continue
        if all(p.name in defined for p in sub.flat_proxy_args if isinstance(p, TensorProxy)):
            out.append(sub)
    return out


def _prim_count(bsym: BoundSymbol) -> int:
    if not bsym.subsymbols:
        return 1
    return sum(_prim_count(s) for s in bsym.subsymbols)


def _describe(group: _Group) -> str:
    b = group.members[0].bsym
    outs = ", ".join(p.name for p in b.flat_proxy_outs)
    what = f"{b.sym.qualified_name}" + (f" ({outs})" if outs else "")
    if group.fusion is not None:
        return f"{group.fusion.name} region that starts with {what}"
    return what


def _group_nodes(nodes: Sequence[_Node]) -> list[_Group]:
    """Dataflow grouping. ``anc[g]`` is the bitset of the transitive ancestors of group g and,
    for regions only, ``desc[g]`` of their transitive descendants; both stay exact as regions
    grow (a join adds ancestors to the region and to everything after it), so every join is
    checked against the true dependency graph."""
    groups: list[_Group] = []
    anc: list[int] = []
    desc: list[int] = []
    regions = 0  # bitset of the groups that are fusion regions
    producer: dict[str, int] = {}
    last_region: dict[int, int] = {}  # id(fusion executor) -> its most recent region
    last_barrier: int | None = None
    last_random: int | None = None

    def add_group(g: _Group, ancestors: int) -> int:
        gi = len(groups)
        groups.append(g)
        anc.append(ancestors)
        desc.append(0)
        for a in _bits(ancestors & regions):
            desc[a] |= 1 << gi
        return gi

    for i, node in enumerate(nodes):
        bsym = node.bsym
        preds = {producer[p.name] for p in bsym.flat_proxy_args if p.name in producer}
        tags = node.tags
        barrier = OpTag.IN_PLACE in tags or (OpTag.DONT_DCE in tags and OpTag.RETURN not in tags)
        if last_barrier is not None:
            preds.add(last_barrier)
        if barrier:
            # Effects stay in program order: after everything since the previous barrier (which
            # itself comes after everything before it).
            preds.update(range(0 if last_barrier is None else last_barrier + 1, len(groups)))
        if OpTag.RANDOM in tags and last_random is not None:
            preds.add(last_random)  # draws from the ambient generator stay in order
        ancestors = 0
        for p in preds:
            ancestors |= anc[p] | (1 << p)

        joined: int | None = None
        note = ""
        if node.fusion is not None and not barrier:
            key = id(node.fusion)
            candidates = sorted((p for p in preds if groups[p].fusion is node.fusion), reverse=True)
            if key in last_region and last_region[key] not in candidates:
                candidates.append(last_region[key])
            for r in candidates:
                blocker = next((p for p in preds if p != r and (anc[p] >> r) & 1), None)
                if blocker is None:
                    joined = r
                    break
                if not note:
                    note = (
                        f"split from the {_describe(groups[r])}: {bsym.sym.qualified_name} depends on it "
                        f"through {_describe(groups[blocker])}"
                    )
        if joined is not None:
            r = joined
            groups[r].members.append(node)
            groups[r].preds |= preds - {r}
            new = ancestors & ~anc[r] & ~(1 << r)
            if new:
                for d in _bits(desc[r]):
                    anc[d] |= new
                anc[r] |= new
                for a in _bits(new & regions):
                    desc[a] |= desc[r] | (1 << r)
            gi = r
        else:
            gi = add_group(_Group(i, node.fusion, [node], preds, note), ancestors)
            if node.fusion is not None:
                last_region[id(node.fusion)] = gi
                regions |= 1 << gi
        if barrier:
            last_barrier = gi
        if OpTag.RANDOM in tags:
            last_random = gi
        for out in bsym.flat_proxy_outs:
            producer[out.name] = gi
    return groups


def _topological_order(groups: Sequence[_Group]) -> list[int]:
    succs: list[list[int]] = [[] for _ in groups]
    indegree = [0] * len(groups)
    for gi, g in enumerate(groups):
        for p in g.preds:
            succs[p].append(gi)
            indegree[gi] += 1
    ready = [(g.first, gi) for gi, g in enumerate(groups) if indegree[gi] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, gi = heapq.heappop(ready)
        order.append(gi)
        for s in succs[gi]:
            indegree[s] -= 1
            if indegree[s] == 0:
                heapq.heappush(ready, (groups[s].first, s))
    if len(order) != len(groups):
        raise AssertionError("fusion grouping produced a cycle")  # a bug in _group_nodes
    return order


def _region_interface(
    group: _Group,
    readers: dict[str, set[int]],
    gi: int,
    returned: set[str],
    position: dict[str, int],
) -> tuple[list[Proxy], list[Proxy]]:
    """A region's inputs (in the order they are defined: trace arguments first) and outputs (the
    values it produces that anything outside it reads)."""
    produced: dict[str, Proxy] = {}
    inputs: dict[str, Proxy] = {}
    for node in group.members:
        for p in node.bsym.flat_proxy_args:
            if p.name not in produced and p.name not in inputs:
                inputs[p.name] = p
        for p in node.bsym.flat_proxy_outs:
            produced[p.name] = p
    outputs = [
        p for name, p in produced.items() if name in returned or readers.get(name, set()) - {gi}
    ]
    ordered_inputs = sorted(inputs.values(), key=lambda p: position.get(p.name, -1))
    return ordered_inputs, outputs


# ``del a, b``: frees intermediates after their last use, as eager code does by rebinding names.
_DELETE = Symbol("del", None, module="python", tags=(OpTag.DELETE,), id="python::del")


def _dict_key_proxies(x: Any) -> Iterator[Proxy]:
    """The proxies among the keys of the dicts in ``x`` (leaves are the values only)."""
    if isinstance(x, dict):
        for k, v in x.items():
            if isinstance(k, Proxy):
                yield k
            yield from _dict_key_proxies(v)
    elif isinstance(x, (tuple, list)):
        for v in x:
            yield from _dict_key_proxies(v)


def with_deletes(bsyms: Sequence[BoundSymbol], keep: set[str]) -> list[BoundSymbol]:
    """``bsyms`` with a ``del`` after the last use of every name not in ``keep``."""
    last_use: dict[str, int] = {}
    for i, b in enumerate(bsyms):
        for p in b.flat_proxy_args:
            last_use[p.name] = i
        if b.has_tag(OpTag.RETURN):
            for p in _dict_key_proxies(b.args):  # ``return {i0: t1}``: a number read from data
                last_use[p.name] = i
        for p in b.flat_proxy_outs:
            last_use.setdefault(p.name, i)  # never read: dies where it is made
    out: list[BoundSymbol] = []
    for i, b in enumerate(bsyms):
        out.append(b)
        if b.has_tag(OpTag.RETURN):
            continue
        dying: dict[str, Proxy] = {}
        for p in (*b.flat_proxy_args, *b.flat_proxy_outs):
            if last_use.get(p.name) == i and p.name not in keep:
                dying.setdefault(p.name, p)
        if dying:
            out.append(_DELETE.bind(*dying.values(), output=None))
    return out


def transform_for_execution(
    trace: Trace,
    executors: Iterable[ExecutorLike] = ("torch",),
    *,
    eager_aliasing: bool = True,
    first_region: int = 0,
    seen_outputs: Any = None,
    unseen_inputs: Iterable[str] = (),
    sums_in_place: bool = False,
) -> ExecutionTrace:
    """The execution trace of ``trace``: every bound symbol assigned to an executor (in list
    order; the torch executor is always the last resort), fusible runs grouped into regions.
    ``.python_callable()`` of the result runs the computation. Memory is shared as in eager torch
    (see the module docstring); ``eager_aliasing=False`` keeps only what in-place writes need.
    ``seen_outputs``: the part of the return value the caller sees, whose memory sharing must be
    eager's (default: all of it; a forward trace's values saved for its backward are read by
    the backward alone, so any memory may hold them); ``unseen_inputs``: names of inputs only
    this trace reads (a backward's saved values), likewise. Fusion regions are numbered from
    ``first_region`` (the functions of higher-order symbols are transformed the same way, their
    regions numbered first and listed in ``fusion_regions``). ``sums_in_place``: the program
    runs where torch.autograd does not record it (a backward, the forward of thunder's autodiff,
    grad mode off), so a sum may be written into a dead operand (``peephole.accumulate_in_place``)."""
    start = time.perf_counter()
    exs = resolve_executors(executors)
    unseen = set(unseen_inputs)
    observed = [a.name for a in trace.args if isinstance(a, Proxy) and a.name not in unseen]
    seen = trace.return_value if seen_outputs is None else seen_outputs
    observed += [p.name for p in _proxies(seen)]
    # What a view that may raise on its strides reads is laid out as eager lays it out (a
    # decomposed unfold before it would copy into strides that let the view pass), where that
    # view runs as torch runs it (a fusion executor that takes it lays out its region itself).
    observed += [
        p.name
        for b in trace.bound_symbols
        if OpTag.LAYOUT_ERRORS in b.sym.tags
        and not any(isinstance(e, FusionExecutor) and e.can_fuse(b) for e in exs)
        for p in b.flat_proxy_args
    ]
    aliases = alias_info(trace.bound_symbols, observed)
    assigner = _Assigner(exs, aliases, eager_aliasing, first_region)
    assigner.claim(trace.bound_symbols, {a.name for a in trace.args})
    groups = _group_nodes(assigner.nodes)

    readers: dict[str, set[int]] = {}
    for gi, g in enumerate(groups):
        for node in g.members:
            for p in node.bsym.flat_proxy_args:
                readers.setdefault(p.name, set()).add(gi)
    returned = {p.name for p in _proxies(trace.return_value)}
    position = {a.name: i for i, a in enumerate(trace.args)}
    for node in assigner.nodes:
        for p in node.bsym.flat_proxy_outs:
            position.setdefault(p.name, len(position))

    out: list[BoundSymbol] = []
    regions: list[BoundSymbol] = list(assigner.sub_regions)
    notes: list[str] = []
    for gi in _topological_order(groups):
        g = groups[gi]
        if g.fusion is None:
            out.append(g.members[0].bsym)
            continue
        if sum(_prim_count(n.bsym) for n in g.members) < g.fusion.min_region_size():
            out.extend(t for n in g.members for t in assigner.translate_unfused(n.bsym))
            continue
        inputs, outputs = _region_interface(g, readers, gi, returned, position)
        if not outputs:
            continue  # nothing of it is used
        index = first_region + len(regions)
        fused = g.fusion.fuse([n.bsym for n in g.members], inputs, outputs, index=index)
        header = f"{g.fusion.name} region {index}: {len(g.members)} symbols"
        if g.note:
            header += f"; {g.note}"
            notes.append(f"region {index}: {g.note}")
        # No location: a region runs many lines of the program; its members keep theirs.
        fused = fused.replace(header=header)
        regions.append(fused)
        out.append(fused)

    out = drop_unread_factories(drop_implicit_broadcasts(out, returned), returned)
    out = index_put_into_fresh(select_for_int_indices(out, returned), returned)
    out = stack_flattened_for_cat(out, returned)
    out = drop_unread_numbers(drop_identity_arithmetic(out, returned), returned, aliases.is_written)
    if sums_in_place:
        out = accumulate_in_place(out, returned)
    out = onednn_matmul_products(out)
    out = with_deletes(out, returned | {a.name for a in trace.args})
    seconds = time.perf_counter() - start
    return ExecutionTrace.like(
        trace,
        bound_symbols=out,
        history=(*trace.history, PassRecord("transform_for_execution", seconds)),
        fusion_notes=notes,
        fusion_regions=regions,
        executors=exs,
    )


def _proxies(x: Any) -> list[Proxy]:
    from thunder_ir.pytree import tree_iter

    return [p for p in tree_iter(x) if isinstance(p, Proxy)]
