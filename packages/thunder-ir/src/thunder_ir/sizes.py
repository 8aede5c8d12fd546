"""What is known about symbolic sizes without looking at their values.

Passes over a trace (autodiff, peepholes) ask whether two sizes are the same; with symbolic sizes
the answer must not come from this call's values, which may differ on the next call. Two sizes
are known equal when their expressions are equal after normalizing sums of integer multiples
(``(a + b) - a`` is ``b``), or when a constraint the trace relies on says so (broadcasting
``x + y`` relies on ``x_size1 == y_size1``; the prologue checks it on every call).

``SizeFacts`` collects, for one compilation, every constraint recorded in any of its traces: the
equalities for ``same_size``, and all of them for the prologue, so that a constraint a pass
records after the prologue was built is still checked (``constraints_since``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from thunder_ir import constraints as C

__all__ = [
    "SizeFacts",
    "current_size_facts",
    "note_constraint",
    "note_data_fact",
    "same_size",
    "size_facts",
]

_facts: ContextVar[SizeFacts | None] = ContextVar("thunder_ir_size_facts", default=None)

# A linear form: (sorted ((variable expression key, coefficient), ...), constant).
Linear = tuple[tuple[tuple[Any, int], ...], int]


def _linear(e: C.Expr) -> Linear | None:
    """``e`` as a sum of integer multiples of non-linear parts plus a constant (None when it
    is not an integer expression of that kind)."""
    terms: dict[Any, tuple[C.Expr, int]] = {}
    const = 0

    def add(x: C.Expr, k: int) -> bool:
        nonlocal const
        if isinstance(x, C.Const):
            if type(x.value) is not int:
                return False
            const += k * x.value
            return True
        if isinstance(x, C.BinOp) and x.op in ("+", "-"):
            return add(x.lhs, k) and add(x.rhs, k if x.op == "+" else -k)
        if isinstance(x, C.UnaryOp) and x.op in ("-", "+"):
            return add(x.operand, -k if x.op == "-" else k)
        if isinstance(x, C.BinOp) and x.op == "*":
            for c, other in ((x.lhs, x.rhs), (x.rhs, x.lhs)):
                if isinstance(c, C.Const) and type(c.value) is int:
                    return add(other, k * c.value)
        if isinstance(x, C.BinOp) and x.op == "//" and x.rhs == C.Const(1):
            return add(x.lhs, k)
        key = (*x._key(), type(x).__name__)
        _, old = terms.get(key, (x, 0))
        terms[key] = (x, old + k)
        return True

    if not add(e, 1):
        return None
    items = tuple(sorted(((repr(k), c) for k, (_, c) in terms.items() if c != 0)))
    return items, const


def _expr(x: Any) -> C.Expr | None:
    expr = getattr(x, "expr", None)
    if isinstance(expr, C.Expr):
        return expr
    if type(x) is int:
        return C.Const(x)
    return None


class SizeFacts:
    """The constraints recorded during one compilation, and the size equalities among them."""

    def __init__(self) -> None:
        self.constraints: list[C.Expr] = []
        self._parent: dict[Linear, Linear] = {}

    def note(self, expr: C.Expr) -> None:
        self.constraints.append(expr)
        self.note_fact(expr)

    def note_fact(self, expr: C.Expr) -> None:
        """Learns the equality ``expr`` states (if it is one) without making it a prologue
        constraint: a decision on data values, checked where the program reads them."""
        negated = expr.operand if isinstance(expr, C.Not) else None
        if isinstance(negated, C.Compare) and negated.op == "!=":  # not (a != b)
            expr = C.Compare("==", negated.lhs, negated.rhs)
        if isinstance(expr, C.Compare) and expr.op == "==":
            a, b = _linear(expr.lhs), _linear(expr.rhs)
            if a is not None and b is not None:
                self._union(a, b)

    def _find(self, x: Linear) -> Linear:
        root = x
        while root in self._parent:
            root = self._parent[root]
        return root

    def _union(self, a: Linear, b: Linear) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self._parent[ra] = rb

    def _canonical(self, x: Linear) -> Linear:
        """``x`` with each variable replaced by what it is known to equal."""
        acc: dict[Any, int] = {}
        const = x[1]
        for key, coef in x[0]:
            rep = self._find((((key, 1),), 0))
            for k, c in rep[0]:
                acc[k] = acc.get(k, 0) + coef * c
            const += coef * rep[1]
        return tuple(sorted((k, c) for k, c in acc.items() if c)), const

    def equal(self, a: Linear, b: Linear) -> bool:
        return a == b or self._find(a) == self._find(b) or self._canonical(a) == self._canonical(b)

    def constraints_since(self, count: int) -> C.Expr:
        """The conjunction of the constraints recorded after the first ``count``."""
        return C.conjunction(self.constraints[count:])


def current_size_facts() -> SizeFacts | None:
    return _facts.get()


@contextmanager
def size_facts() -> Iterator[SizeFacts]:
    """Collects the constraints recorded inside the block, in any trace."""
    facts = SizeFacts()
    token = _facts.set(facts)
    try:
        yield facts
    finally:
        _facts.reset(token)


def note_constraint(expr: C.Expr) -> None:
    facts = _facts.get()
    if facts is not None:
        facts.note(expr)


def note_data_fact(expr: C.Expr) -> None:
    """An equality on data-dependent sizes the program checks at run time (``check_data``):
    known to passes (``same_size``), never a prologue constraint."""
    facts = _facts.get()
    if facts is not None:
        facts.note_fact(expr)


def same_size(a: Any, b: Any) -> bool:
    """Whether two sizes (ints or symbolic ints) are known to be equal on every call the
    program runs for, without looking at this call's values and without recording anything."""
    if a is b:
        return True
    if type(a) is int and type(b) is int:
        return a == b
    ea, eb = _expr(a), _expr(b)
    if ea is None or eb is None:
        return False
    if ea == eb:
        return True
    pa = C.int_poly(ea)
    if pa is not None and pa == C.int_poly(eb):
        return True  # (a * b) // b is a
    la, lb = _linear(ea), _linear(eb)
    if la is None or lb is None:
        return False
    if la == lb:
        return True
    facts = _facts.get()
    return facts is not None and facts.equal(la, lb)
