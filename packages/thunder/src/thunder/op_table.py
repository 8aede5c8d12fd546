"""Where every op is: ``./dev ops [NAME ...]`` (``python -m thunder.op_table``).

One row per op (every prim, torch-language op and higher-order symbol, and any other symbol a grad
rule or an operator executor is registered for): its name, where its meta function is (for a
composite op, its decomposition), its grad rule (where it is registered; "decomposition" for a
composite differentiated through its decomposition, "none" for a prim without one) and how each
executor takes it (``Executor.claim_of``: "runs", "runs if <checker>", "fuses"...; "-" where it
does not). Every lookup here is by the ``Symbol`` itself, as the executors and autodiff key them.

With names, only the ops of those names (``softmax``, ``ltorch.softmax``, ``add`` for
``ltorch.add`` and ``prims.add``), or where a name matches none exactly, those whose name holds it
(``./dev ops pool``).

This is the facade's: it sees the grad rules (``thunder_transforms``) and the executors
(``thunder_executors``) at once.
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# thunder imports every executor and grad rule; thunder.distributed the grad rules of its symbols
import thunder.distributed  # noqa: F401
from thunder_executors import get_all_executors
from thunder_executors.executor import Executor, OperatorExecutor
from thunder_ir import Symbol, prims
from thunder_ir import higher_order as ho
from thunder_ir import ops as ltorch
from thunder_transforms.autodiff import VJP_RULES
from thunder_transforms.autodiff.registry import registered_rule

__all__ = ["OpRow", "all_ops", "format_rows", "main", "op_rows", "source_location"]


@dataclass(frozen=True)
class OpRow:
    """One op: its id (``ltorch.softmax``), where its meta is, its grad rule, and each
    executor's claim by executor name ("" where it makes none)."""

    op: str
    meta: str
    grad: str
    claims: dict[str, str]


def source_location(fn: Callable[..., Any] | None) -> str:
    """``thunder_ir/ops/nn_activations.py:304``: where ``fn`` is defined (its first decorator's
    line), the path from the directory its top-level package is in; "-" for None, "?" where
    Python does not say."""
    if fn is None:
        return "-"
    fn = inspect.unwrap(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return "?"
    path = Path(code.co_filename)
    top = (getattr(fn, "__module__", None) or "").partition(".")[0]
    parts = path.parts
    if top and top in parts:
        path = Path(*parts[len(parts) - 1 - parts[::-1].index(top) :])
    return f"{path.as_posix()}:{code.co_firstlineno}"


def all_ops() -> list[Symbol]:
    """Every op: the prims, the torch-language ops, the higher-order symbols and any other symbol
    with a grad rule or an operator executor's implementation, sorted by id."""
    found: set[Symbol] = {*prims.ALL_PRIMS.values(), *ltorch.ALL_OPS.values()}
    found.update(v for v in vars(ho).values() if isinstance(v, Symbol))
    found.update(VJP_RULES)
    for ex in get_all_executors():
        if isinstance(ex, OperatorExecutor):
            found.update(ex.implementations)
    return sorted(found, key=lambda s: s.id)


def _grad(sym: Symbol) -> str:
    registered = registered_rule(sym)
    if registered is None:
        return "none" if sym.is_prim or sym.meta is None else "decomposition"
    rule, applies = registered
    where = source_location(rule)
    if applies is not None:  # other calls: through the decomposition
        where += f" if {applies.__name__}"
    return where


def _executors() -> list[Executor]:
    """Every registered executor, those running single ops first (in the order they registered),
    then the fusion executors."""
    exs = get_all_executors()
    return [e for e in exs if isinstance(e, OperatorExecutor)] + [
        e for e in exs if not isinstance(e, OperatorExecutor)
    ]


def _selected(ops: Sequence[Symbol], names: Iterable[str]) -> list[Symbol]:
    chosen: set[Symbol] = set()
    for name in names:
        exact = {s for s in ops if name in (s.name, s.id, s.qualified_name)}
        chosen |= exact or {s for s in ops if name in s.id}
    return [s for s in ops if s in chosen]


def op_rows(names: Iterable[str] = (), executors: Sequence[Executor] | None = None) -> list[OpRow]:
    """The rows of every op, or of the ops ``names`` select (see the module docstring)."""
    ops = all_ops()
    names = list(names)
    if names:
        ops = _selected(ops, names)
    exs = _executors() if executors is None else executors
    return [
        OpRow(
            op=sym.id,
            meta=source_location(sym.meta),
            grad=_grad(sym),
            claims={ex.name: ex.claim_of(sym) for ex in exs},
        )
        for sym in ops
    ]


def format_rows(rows: Sequence[OpRow]) -> str:
    """``rows`` as a table with a header, its columns aligned."""
    executors = list(rows[0].claims) if rows else [ex.name for ex in _executors()]
    table = [["op", "meta", "grad", *executors]]
    table += [[r.op, r.meta, r.grad, *(r.claims[e] or "-" for e in executors)] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(table[0]))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in table
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="./dev ops",
        description="Where each op's meta and grad rule are, and which executors take it.",
    )
    parser.add_argument("names", nargs="*", help="op names (ltorch.softmax, softmax, pool...)")
    args = parser.parse_args(argv)
    rows = op_rows(args.names)
    if not rows:
        print(f"no op named {' or '.join(args.names)}", file=sys.stderr)
        return 1
    try:
        print(format_rows(rows))
    except BrokenPipeError:  # ./dev ops | head: the reader is gone (Python's documented way out)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
