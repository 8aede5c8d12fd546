"""Dead code elimination."""

from __future__ import annotations

from thunder_ir import BoundSymbol, NumberProxy, OpTag, Trace
from thunder_ir.aliasing import alias_info, writes_where_gradients_flow
from thunder_ir.higher_order import map_subtraces
from thunder_ir.symbol import raises_on_values
from thunder_transforms.passes import run_pass

__all__ = ["dce", "has_effects"]

# A random op whose result is unused still advances the generator, as in eager.
_KEEP = frozenset({OpTag.DONT_DCE, OpTag.IN_PLACE, OpTag.RANDOM, OpTag.RETURN})
_HIGHER_ORDER = OpTag.HIGHER_ORDER


def has_effects(bsym: BoundSymbol) -> bool:
    """Whether ``bsym`` must run even when its outputs are unused: it is tagged with an effect,
    or a composite whose decomposition has one (batch_norm updating running statistics)."""
    return not _KEEP.isdisjoint(bsym.sym.tags) or any(has_effects(s) for s in bsym.subsymbols)


def _kept_unused(trace: Trace) -> set[int]:
    """The bound symbols that run even when their results are unused, because eager may raise
    there: ``view`` of a tensor whose strides do not allow it (``OpTag.LAYOUT_ERRORS``); an op
    whose kernel checks its inputs' values (``raises_on_values``: an index out of range, a
    matrix not positive-definite); and, in a
    program that writes in place where gradients flow (torch.autograd records it), every read of
    memory that is written in place: autograd checks written views when they are used, and
    whether it raises depends on which uses happened (torch rebuilds a view's history when it is
    read after a write through another view of its base)."""
    kept = {
        id(b)
        for b in trace.bound_symbols
        if OpTag.LAYOUT_ERRORS in b.sym.tags or raises_on_values(b)
    }
    if writes_where_gradients_flow(trace):
        info = alias_info(trace.bound_symbols)
        kept.update(
            id(b)
            for b in trace.bound_symbols
            if any(info.is_written(p.name) for p in b.flat_proxy_args)
        )
    return kept


def _live_bound_symbols(trace: Trace) -> list[BoundSymbol]:
    live = _live(trace.bound_symbols, set(), _kept_unused(trace))
    # The functions of higher-order symbols lose their dead code too (their inputs stay).
    return [map_subtraces(b, dce) if _HIGHER_ORDER in b.sym.tags else b for b in live]


def _live(bsyms: list[BoundSymbol], needed: set[str], raising: set[int]) -> list[BoundSymbol]:
    """The live bound symbols of ``bsyms`` (in order); ``needed`` holds the names used after them
    and gains the names they use."""
    kept: list[BoundSymbol] = []
    for bsym in reversed(bsyms):
        if (
            not any(p.name in needed for p in bsym.flat_proxy_outs)
            and not has_effects(bsym)
            and id(bsym) not in raising
        ):
            if bsym.subsymbols and not needed.isdisjoint(_defined_inside(bsym)):
                # Dead, but its decomposition computes a value used later (a symbolic size read
                # from the shape of an unused tensor): what computes that value stays.
                kept.extend(reversed(_live(list(bsym.subsymbols), needed, raising)))
            continue
        kept.append(bsym)
        needed.update(p.name for p in bsym.flat_proxy_args)
        needed |= _sizes_read_inside(bsym)
    kept.reverse()
    return kept


def _sizes_read_inside(bsym: BoundSymbol) -> set[str]:
    """The numbers ``bsym``'s decomposition reads without computing them: symbolic sizes made
    before it (the output size of a strided conv that ``roll`` computes with). An executor that
    runs the decomposition, or only its size arithmetic, reads them although ``bsym``'s own
    arguments do not name them."""
    reads: set[str] = set()
    inner: set[str] = set()

    def visit(subs: list[BoundSymbol]) -> None:
        for sub in subs:
            if sub.subsymbols:
                visit(list(sub.subsymbols))
            reads.update(
                p.name
                for p in sub.flat_proxy_args
                if isinstance(p, NumberProxy) and p.name not in inner
            )
            inner.update(p.name for p in sub.flat_proxy_outs)

    visit(list(bsym.subsymbols))
    return reads


def _defined_inside(bsym: BoundSymbol) -> set[str]:
    names: set[str] = set()
    for sub in bsym.subsymbols:
        names.update(p.name for p in sub.flat_proxy_outs)
        names |= _defined_inside(sub)
    return names


def dce(trace: Trace) -> Trace:
    """Drops bound symbols none of whose outputs are used, unless they have effects or eager may
    raise there (see ``_kept_unused``)."""
    return run_pass("dce", _live_bound_symbols, trace)
