"""Common subexpression elimination."""

from __future__ import annotations

from thunder_ir import BoundSymbol, OpTag, Proxy, Trace
from thunder_ir.codegen import Printer, value_to_python
from thunder_transforms.passes import run_pass, substitute_proxies

__all__ = ["cse"]

_NEVER = frozenset({OpTag.RANDOM, OpTag.IN_PLACE, OpTag.DONT_DCE, OpTag.RETURN, OpTag.PROLOGUE})


def _deduplicated(trace: Trace) -> list[BoundSymbol]:
    printer = Printer()
    seen: dict[tuple[str, str], BoundSymbol] = {}
    renames: dict[str, Proxy] = {}
    out: list[BoundSymbol] = []
    for bsym in trace.bound_symbols:
        bsym = substitute_proxies(bsym, renames)
        if not _NEVER.isdisjoint(bsym.sym.tags):
            out.append(bsym)
            continue
        key = (bsym.sym.id, value_to_python((bsym.args, bsym.kwargs), printer))
        earlier = seen.get(key)
        if earlier is None:
            seen[key] = bsym
            out.append(bsym)
            continue
        for new, old in zip(bsym.flat_outs, earlier.flat_outs):
            if isinstance(new, Proxy) and isinstance(old, Proxy):
                renames[new.name] = old
    return out


def cse(trace: Trace) -> Trace:
    """Replaces a call that repeats an earlier one (same op, same arguments) by the earlier result.

    Random and effectful ops are never merged."""
    return run_pass("cse", _deduplicated, trace)
