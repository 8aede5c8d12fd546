"""Dead code elimination."""

from __future__ import annotations

from thunder_ir import BoundSymbol, OpTag, Trace
from thunder_transforms.passes import run_pass

__all__ = ["dce"]

_KEEP = frozenset({OpTag.DONT_DCE, OpTag.IN_PLACE, OpTag.RETURN})


def _live_bound_symbols(trace: Trace) -> list[BoundSymbol]:
    needed: set[str] = set()
    kept: list[BoundSymbol] = []
    for bsym in reversed(trace.bound_symbols):
        if _KEEP.isdisjoint(bsym.sym.tags) and not any(
            p.name in needed for p in bsym.flat_proxy_outs
        ):
            continue
        kept.append(bsym)
        needed.update(p.name for p in bsym.flat_proxy_args)
    kept.reverse()
    return kept


def dce(trace: Trace) -> Trace:
    """Drops bound symbols none of whose outputs are used, unless they have effects."""
    return run_pass("dce", _live_bound_symbols, trace)
