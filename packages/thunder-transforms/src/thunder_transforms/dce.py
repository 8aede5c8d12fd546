"""Dead code elimination."""

from __future__ import annotations

from thunder_ir import BoundSymbol, OpTag, Trace
from thunder_transforms.passes import run_pass

__all__ = ["dce", "has_effects"]

_KEEP = frozenset({OpTag.DONT_DCE, OpTag.IN_PLACE, OpTag.RETURN})


def has_effects(bsym: BoundSymbol) -> bool:
    """Whether ``bsym`` must run even when its outputs are unused: it is tagged with an effect,
    or a composite whose decomposition has one (batch_norm updating running statistics)."""
    return not _KEEP.isdisjoint(bsym.sym.tags) or any(has_effects(s) for s in bsym.subsymbols)


def _live_bound_symbols(trace: Trace) -> list[BoundSymbol]:
    needed: set[str] = set()
    kept: list[BoundSymbol] = []
    for bsym in reversed(trace.bound_symbols):
        if not any(p.name in needed for p in bsym.flat_proxy_outs) and not has_effects(bsym):
            continue
        kept.append(bsym)
        needed.update(p.name for p in bsym.flat_proxy_args)
    kept.reverse()
    return kept


def dce(trace: Trace) -> Trace:
    """Drops bound symbols none of whose outputs are used, unless they have effects."""
    return run_pass("dce", _live_bound_symbols, trace)
