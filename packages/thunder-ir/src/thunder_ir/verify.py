"""The trace verifier: run after every pass in tests."""

from __future__ import annotations

from thunder_ir.proxies import NumberProxy, Proxy, TensorProxy
from thunder_ir.symbol import BoundSymbol
from thunder_ir.tags import OpTag
from thunder_ir.trace import Trace
from thunder_ir.tracectx import tracectx

__all__ = ["TraceCheckError", "check_trace"]


class TraceCheckError(Exception):
    """A trace broke an invariant; the message names the bound symbol and the proxy."""


def _meta_key(p: Proxy) -> tuple[object, ...]:
    if isinstance(p, TensorProxy):
        return ("tensor", p.shape, p.dtype, p.device)
    if isinstance(p, NumberProxy):
        return ("number", p.python_type)
    return (type(p).__name__,)


def check_trace(trace: Trace, *, rerun_meta: bool = True) -> None:
    """Every proxy is defined (as an input or an output) before use and exactly once; a name always
    denotes the same metadata; the trace ends in a return; and, with ``rerun_meta``, every prim's
    meta function, run again on its inputs, agrees with the recorded outputs."""
    defined: dict[str, Proxy] = {}
    for a in trace.args:
        if not isinstance(a, Proxy):
            raise TraceCheckError(f"trace input {a!r} is not a proxy")
        if a.name in defined:
            raise TraceCheckError(f"trace input {a.name} appears twice")
        defined[a.name] = a
    returned = False
    for i, bsym in enumerate(trace.bound_symbols):
        where = f"bound symbol {i} ({bsym.sym.qualified_name})"
        if returned:
            raise TraceCheckError(f"{where} follows the return")
        for p in bsym.flat_proxy_args:
            known = defined.get(p.name)
            if known is None:
                raise TraceCheckError(f"{where} uses {p.name} before it is defined")
            if _meta_key(known) != _meta_key(p):
                raise TraceCheckError(
                    f"{where} uses {p.name} with metadata {p.type_string()}, defined as {known.type_string()}"
                )
        for p in bsym.flat_proxy_outs:
            if p.name in defined:
                raise TraceCheckError(f"{where} defines {p.name}, which is already defined")
            defined[p.name] = p
        for sub in bsym.flat_args:
            if isinstance(sub, Trace):  # a higher-order symbol's function: a trace of its own
                try:
                    check_trace(sub, rerun_meta=rerun_meta)
                except TraceCheckError as e:
                    raise TraceCheckError(f"{where}, in {sub.fn_name}: {e}") from e
        if rerun_meta and bsym.sym.is_prim and not bsym.has_tag(OpTag.PROLOGUE):
            _check_meta(bsym, where)
        if bsym.has_tag(OpTag.RETURN):
            returned = True
    if not returned:
        raise TraceCheckError("trace does not end in a return")


def _check_meta(bsym: BoundSymbol, where: str) -> None:
    assert bsym.sym.meta is not None
    scratch = Trace("scratch")
    with tracectx(scratch):
        try:
            out = bsym.sym.meta(*bsym.args, **bsym.kwargs)
        except Exception as e:
            raise TraceCheckError(
                f"{where}: its meta function rejects the recorded inputs: {e}"
            ) from e
    from thunder_ir.pytree import tree_iter

    got = [_meta_key(p) for p in tree_iter(out) if isinstance(p, Proxy)]
    want = [_meta_key(p) for p in bsym.flat_proxy_outs]
    if got != want:
        raise TraceCheckError(
            f"{where}: recorded outputs {want} disagree with its meta function {got}"
        )
