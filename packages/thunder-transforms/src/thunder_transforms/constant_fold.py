"""Constant folding: number computations whose inputs are all constants are done at transform
time, and their results replace the proxies that held them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from thunder_ir import BoundSymbol, NumberProxy, OpTag, Proxy, TensorProxy, Trace, tracectx
from thunder_ir.pytree import tree_flatten
from thunder_transforms.passes import run_pass, substitute

__all__ = ["constant_fold"]

_IMPURE = frozenset({OpTag.RANDOM, OpTag.IN_PLACE, OpTag.DONT_DCE, OpTag.PROLOGUE, OpTag.RETURN})


def _pure(bsym: BoundSymbol) -> bool:
    return _IMPURE.isdisjoint(bsym.sym.tags) and all(_pure(s) for s in bsym.subsymbols)


def _sizes(trace: Trace) -> set[str]:
    """Names of the numbers that size tensors: folding them would change tensor metadata."""
    out: set[str] = set()

    def visit(p: Proxy) -> None:
        if isinstance(p, TensorProxy):
            out.update(s.name for s in p.shape if isinstance(s, Proxy))

    for a in trace.args:
        visit(a)
    for b in trace.bound_symbols:
        for p in (*b.flat_proxy_args, *b.flat_proxy_outs):
            visit(p)
    return out


def _evaluate(bsym: BoundSymbol) -> dict[str, Any] | None:
    """The values of ``bsym``'s number outputs, computed by its meta function on its constant
    inputs (prims on numbers compute with Python, as the executors do); None if it does not fold."""
    if bsym.sym.meta is None:
        return None
    try:
        with tracectx(Trace("constant_fold")):
            value = bsym.sym.meta(*bsym.args, **bsym.kwargs)
    except Exception:
        return None  # left for run time, where it raises as the unfolded trace would
    got, _ = tree_flatten(value)
    want, _ = tree_flatten(bsym.output)
    if len(got) != len(want):
        return None
    folded: dict[str, Any] = {}
    for w, g in zip(want, got):
        if isinstance(g, Proxy):
            return None
        if isinstance(w, Proxy):
            if not isinstance(w, NumberProxy) or type(g) is not w.python_type:
                return None
            folded[w.name] = g
    return folded


def _folded(trace: Trace, constants: Mapping[str, Any]) -> Iterable[BoundSymbol]:
    sizes = _sizes(trace)
    env: dict[str, Any] = {k: v for k, v in constants.items() if k not in sizes}
    for bsym in trace.bound_symbols:
        bsym = substitute(bsym, env)
        foldable = (
            not bsym.flat_proxy_args
            and _pure(bsym)
            and not any(isinstance(o, TensorProxy) for o in bsym.flat_proxy_outs)
            and not any(o.name in sizes for o in bsym.flat_proxy_outs)
        )
        if foldable:
            values = _evaluate(bsym)
            if values is not None:
                env.update(values)
                continue
        yield bsym


def constant_fold(trace: Trace, *, constants: Mapping[str, Any] | None = None) -> Trace:
    """Evaluates the pure bound symbols whose inputs are all constants and whose outputs are
    numbers (number prims, and composites computing numbers), and substitutes the results for
    their outputs everywhere after. Random, in-place, effectful and prologue ops are left alone,
    and so are ops producing tensors (a factory of a constant shape stays a call).

    ``constants`` specializes number inputs: ``{"n0": 3}`` replaces the input ``n0`` by 3 in the
    computation (the input stays in the signature; checking that it is 3 is the caller's guard).
    Numbers that size tensors (symbolic shapes) are never replaced.
    """
    known = {a.name for a in trace.args}
    unknown = set(constants or {}) - known
    if unknown:
        raise ValueError(f"constant_fold: {sorted(unknown)} are not inputs of the trace")
    return run_pass("constant_fold", lambda t: _folded(t, constants or {}), trace)
