"""Running a pass: time it, record it on the trace it produced."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from thunder_ir import BoundSymbol, Proxy, Trace
from thunder_ir.pytree import tree_map

__all__ = ["run_pass", "substitute", "substitute_proxies"]


def run_pass(name: str, fn: Callable[[Trace], Iterable[BoundSymbol]], trace: Trace) -> Trace:
    """Runs ``fn`` (which returns the new bound symbols) and derives the resulting trace."""
    start = time.perf_counter()
    bsyms = list(fn(trace))
    return trace.derive(bsyms, pass_name=name, seconds=time.perf_counter() - start)


def substitute_proxies(bsym: BoundSymbol, mapping: dict[str, Proxy]) -> BoundSymbol:
    """``bsym`` with every proxy argument named in ``mapping`` replaced (subsymbols included)."""
    return substitute(bsym, mapping)


def substitute(bsym: BoundSymbol, mapping: Mapping[str, Any]) -> BoundSymbol:
    """``bsym`` with every proxy argument named in ``mapping`` replaced by the mapped value, a
    proxy or a constant (subsymbols included)."""
    if not mapping or not any(p.name in mapping for p in bsym.flat_proxy_args):
        return bsym

    def swap(x: Any) -> Any:
        return mapping.get(x.name, x) if isinstance(x, Proxy) else x

    return bsym.replace(
        args=tree_map(swap, bsym.args),
        kwargs=tree_map(swap, bsym.kwargs),
        subsymbols=tuple(substitute(s, mapping) for s in bsym.subsymbols),
    )
