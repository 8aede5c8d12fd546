"""Common subexpression elimination."""

from __future__ import annotations

from thunder_ir import BoundSymbol, OpTag, Proxy, Symbol, Trace
from thunder_ir.aliasing import alias_info, writes_in_place, written_inputs
from thunder_ir.codegen import Printer, value_to_python
from thunder_transforms.passes import run_pass, substitute_proxies

__all__ = ["cse"]

_NEVER = frozenset({OpTag.RANDOM, OpTag.IN_PLACE, OpTag.DONT_DCE, OpTag.RETURN, OpTag.PROLOGUE})


def _deduplicated(trace: Trace) -> list[BoundSymbol]:
    printer = Printer()
    seen: dict[tuple[Symbol, str, tuple[int, ...]], BoundSymbol] = {}
    renames: dict[str, Proxy] = {}
    out: list[BoundSymbol] = []
    # With in-place writes, a name holds different values before and after a write into its
    # alias group: reads are keyed by how many writes their arguments' groups have seen, and a
    # value that is written (or shares memory with one that is) is never merged with another.
    writes = any(writes_in_place(b) for b in trace.bound_symbols)
    info = alias_info(trace.bound_symbols) if writes else None
    versions: dict[str, int] = {}
    for bsym in trace.bound_symbols:
        bsym = substitute_proxies(bsym, renames)
        if info is not None and writes_in_place(bsym):
            for name in written_inputs(bsym):
                root = info.root(name)
                versions[root] = versions.get(root, 0) + 1
        if not _NEVER.isdisjoint(bsym.sym.tags) or writes_in_place(bsym):
            out.append(bsym)
            continue
        if info is not None and any(info.is_written(p.name) for p in bsym.flat_proxy_outs):
            out.append(bsym)
            continue
        epochs = (
            tuple(versions.get(info.root(p.name), 0) for p in bsym.flat_proxy_args)
            if info is not None
            else ()
        )
        key = (bsym.sym, value_to_python((bsym.args, bsym.kwargs), printer), epochs)
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

    Random and effectful ops are never merged, nor reads of a value before and after an in-place
    write into its memory, nor values that are written in place."""
    return run_pass("cse", _deduplicated, trace)
