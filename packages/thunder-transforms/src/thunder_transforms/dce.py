"""Dead code elimination."""

from __future__ import annotations

from thunder_ir import BoundSymbol, OpTag, Proxy, Trace
from thunder_ir.aliasing import alias_info
from thunder_transforms.passes import run_pass

__all__ = ["dce", "has_effects"]

_KEEP = frozenset({OpTag.DONT_DCE, OpTag.IN_PLACE, OpTag.RETURN})


def has_effects(bsym: BoundSymbol) -> bool:
    """Whether ``bsym`` must run even when its outputs are unused: it is tagged with an effect,
    or a composite whose decomposition has one (batch_norm updating running statistics)."""
    return not _KEEP.isdisjoint(bsym.sym.tags) or any(has_effects(s) for s in bsym.subsymbols)


def _raising_on_inputs(trace: Trace) -> set[int]:
    """The bound symbols that may raise for the memory layout of the caller's tensors (``view``
    of an input whose strides do not allow it): eager raises there even if the result is unused."""
    candidates = [b for b in trace.bound_symbols if OpTag.LAYOUT_ERRORS in b.sym.tags]
    if not candidates:
        return set()
    info = alias_info(trace.bound_symbols, (a.name for a in trace.args if isinstance(a, Proxy)))
    return {id(b) for b in candidates if any(info.is_observed(p.name) for p in b.flat_proxy_args)}


def _live_bound_symbols(trace: Trace) -> list[BoundSymbol]:
    needed: set[str] = set()
    kept: list[BoundSymbol] = []
    raising = _raising_on_inputs(trace)
    for bsym in reversed(trace.bound_symbols):
        if (
            not any(p.name in needed for p in bsym.flat_proxy_outs)
            and not has_effects(bsym)
            and id(bsym) not in raising
        ):
            continue
        kept.append(bsym)
        needed.update(p.name for p in bsym.flat_proxy_args)
    kept.reverse()
    return kept


def dce(trace: Trace) -> Trace:
    """Drops bound symbols none of whose outputs are used, unless they have effects or may raise
    for the memory layout of an input (``OpTag.LAYOUT_ERRORS``)."""
    return run_pass("dce", _live_bound_symbols, trace)
