"""A small expression language over NumberProxies, for the facts a traced path relied on.

A symbolic ``NumberProxy`` carries the ``Expr`` that produced it. When Python branches on a value
derived from it, the branch taken becomes a constraint (an ``Expr`` that must be true); the
prologue checks the conjunction of all constraints before reusing the traced program. Expressions
print as Python (``python()``), evaluate against concrete values (``evaluate``) and simplify
(``x > 5 and x > 3`` is ``x > 5``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = [
    "PYTHON_NAMES",
    "And",
    "BinOp",
    "Compare",
    "Const",
    "Expr",
    "Not",
    "Or",
    "UnaryOp",
    "Var",
    "conjunction",
    "int_poly",
    "never_nan",
    "poly_expr",
    "simplify",
    "single_variable",
    "value_is",
]

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
    "**": operator.pow,
    "&": operator.and_,
    "|": operator.or_,
    "^": operator.xor,
    "<<": operator.lshift,
    ">>": operator.rshift,
}
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
    "!=": operator.ne,
}
_UNARY: dict[str, Callable[[Any], Any]] = {
    "-": operator.neg,
    "+": operator.pos,
    "~": operator.invert,
    "abs": abs,
    "int": int,
    "float": float,
    "bool": bool,
    "floor": math.floor,
    "ceil": math.ceil,
    "round": round,
    "isnan": math.isnan,
    "signbit": lambda x: math.copysign(1.0, x) < 0,
}
# Unary operators whose result is an int (or bool) whatever their operand: never NaN.
_INTEGER_RESULT = {"int", "floor", "ceil", "round", "bool", "isnan", "signbit", "~"}
# The global names the printed Python of an expression may use (``math.ceil``).
PYTHON_NAMES: dict[str, Any] = {"math": math}
_NEGATED = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}
_MIRRORED = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


class Expr:
    """Base of all expressions. Immutable, hashable, compared structurally."""

    __slots__ = ()

    def python(self) -> str:
        raise NotImplementedError

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def children(self) -> tuple[Expr, ...]:
        return ()

    def _key(self) -> tuple[Any, ...]:
        raise NotImplementedError

    def variables(self) -> set[str]:
        out: set[str] = set()
        stack: list[Expr] = [self]
        while stack:
            e = stack.pop()
            if isinstance(e, Var):
                out.add(e.name)
            stack.extend(e.children())
        return out

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __repr__(self) -> str:
        return f"Expr({self.python()})"


class Var(Expr):
    """A named input value (the name of the NumberProxy in the trace)."""

    __slots__ = ("integer", "name")

    def __init__(self, name: str, integer: bool = False) -> None:
        self.name = name
        self.integer = integer  # an int (a size): integer arithmetic on it is exact

    def python(self) -> str:
        return self.name

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        return env[self.name]

    def _key(self) -> tuple[Any, ...]:
        return (self.name,)


class Const(Expr):
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def python(self) -> str:
        v = self.value
        if isinstance(v, float) and not math.isfinite(v):
            return f"float('{v}')"
        return repr(v)

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        return self.value

    def _key(self) -> tuple[Any, ...]:
        return (type(self.value).__name__, self.value)


class BinOp(Expr):
    __slots__ = ("lhs", "op", "rhs")

    def __init__(self, op: str, lhs: Expr, rhs: Expr) -> None:
        if op not in _BINARY:
            raise ValueError(f"unknown binary operator {op!r}")
        self.op, self.lhs, self.rhs = op, lhs, rhs

    def python(self) -> str:
        return f"({self.lhs.python()} {self.op} {self.rhs.python()})"

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        return _BINARY[self.op](self.lhs.evaluate(env), self.rhs.evaluate(env))

    def children(self) -> tuple[Expr, ...]:
        return (self.lhs, self.rhs)

    def _key(self) -> tuple[Any, ...]:
        return (self.op, self.lhs, self.rhs)


class UnaryOp(Expr):
    __slots__ = ("op", "operand")

    def __init__(self, op: str, operand: Expr) -> None:
        if op not in _UNARY:
            raise ValueError(f"unknown unary operator {op!r}")
        self.op, self.operand = op, operand

    def python(self) -> str:
        if self.op in ("-", "+", "~"):
            return f"({self.op}{self.operand.python()})"
        if self.op == "signbit":
            return f"(math.copysign(1.0, {self.operand.python()}) < 0)"
        fn = f"math.{self.op}" if self.op in ("floor", "ceil", "isnan") else self.op
        return f"{fn}({self.operand.python()})"

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        return _UNARY[self.op](self.operand.evaluate(env))

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def _key(self) -> tuple[Any, ...]:
        return (self.op, self.operand)


class Compare(Expr):
    __slots__ = ("lhs", "op", "rhs")

    def __init__(self, op: str, lhs: Expr, rhs: Expr) -> None:
        if op not in _COMPARE:
            raise ValueError(f"unknown comparison {op!r}")
        self.op, self.lhs, self.rhs = op, lhs, rhs

    def python(self) -> str:
        return f"({self.lhs.python()} {self.op} {self.rhs.python()})"

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        return _COMPARE[self.op](self.lhs.evaluate(env), self.rhs.evaluate(env))

    def children(self) -> tuple[Expr, ...]:
        return (self.lhs, self.rhs)

    def _key(self) -> tuple[Any, ...]:
        return (self.op, self.lhs, self.rhs)


class Not(Expr):
    __slots__ = ("operand",)

    def __init__(self, operand: Expr) -> None:
        self.operand = operand

    def python(self) -> str:
        return f"(not {self.operand.python()})"

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        return not self.operand.evaluate(env)

    def children(self) -> tuple[Expr, ...]:
        return (self.operand,)

    def _key(self) -> tuple[Any, ...]:
        return (self.operand,)


class _Junction(Expr):
    __slots__ = ("terms",)
    _word = ""

    def __init__(self, terms: Iterable[Expr]) -> None:
        self.terms = tuple(terms)

    def python(self) -> str:
        if not self.terms:
            return "True" if isinstance(self, And) else "False"
        if len(self.terms) == 1:
            return self.terms[0].python()
        return "(" + f" {self._word} ".join(t.python() for t in self.terms) + ")"

    def children(self) -> tuple[Expr, ...]:
        return self.terms

    def _key(self) -> tuple[Any, ...]:
        return self.terms


class And(_Junction):
    __slots__ = ()
    _word = "and"

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        return all(t.evaluate(env) for t in self.terms)


class Or(_Junction):
    __slots__ = ()
    _word = "or"

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        return any(t.evaluate(env) for t in self.terms)


def conjunction(terms: Iterable[Expr]) -> Expr:
    """The simplified conjunction of ``terms``."""
    return simplify(And(terms))


# Simplification ------------------------------------------------------------------------------


def simplify(e: Expr) -> Expr:
    """Constant-folds, removes double negations, flattens and/or, and merges bounds on a variable."""
    if isinstance(e, (Var, Const)):
        return e
    if isinstance(e, (BinOp, UnaryOp, Compare)):
        kids = [simplify(c) for c in e.children()]
        if all(isinstance(k, Const) for k in kids):
            try:
                return Const(type(e)(e.op, *kids).evaluate({}))  # type: ignore[arg-type]
            except (ArithmeticError, ValueError, TypeError):
                pass
        rebuilt: Expr = type(e)(e.op, *kids)  # type: ignore[arg-type]
        if isinstance(rebuilt, (BinOp, UnaryOp)):
            poly = int_poly(rebuilt)
            if poly is not None:
                return poly_expr(poly)  # ((a * b) // b) is a
        if isinstance(rebuilt, Compare):
            if rebuilt.lhs == rebuilt.rhs and never_nan(rebuilt.lhs):
                return Const(rebuilt.op in ("==", "<=", ">="))
            difference = _constant_difference(rebuilt.lhs, rebuilt.rhs)
            if difference is not None:
                return Const(_COMPARE[rebuilt.op](difference, 0))
            rebuilt = _solve_linear(rebuilt)
        if (
            isinstance(rebuilt, Compare)
            and isinstance(rebuilt.lhs, Const)
            and not isinstance(rebuilt.rhs, Const)
        ):
            rebuilt = Compare(_MIRRORED[rebuilt.op], rebuilt.rhs, rebuilt.lhs)
        return rebuilt
    if isinstance(e, Not):
        inner = simplify(e.operand)
        if isinstance(inner, Const):
            return Const(not inner.value)
        if isinstance(inner, Not):
            return inner.operand
        if isinstance(inner, Compare) and (
            inner.op in ("==", "!=") or (never_nan(inner.lhs) and never_nan(inner.rhs))
        ):
            # A float may be NaN: ``not (v > 0)`` holds for NaN, ``v <= 0`` does not.
            return Compare(_NEGATED[inner.op], inner.lhs, inner.rhs)
        return Not(inner)
    if isinstance(e, And):
        return _simplify_and(e)
    if isinstance(e, Or):
        return _simplify_or(e)
    raise TypeError(f"cannot simplify {e!r}")


def never_nan(e: Expr) -> bool:
    """Whether ``e`` is an int or bool whatever its variables' values (so never NaN)."""
    if isinstance(e, Var):
        return e.integer
    if isinstance(e, Const):
        return isinstance(e.value, int)
    if isinstance(e, UnaryOp):
        return e.op in _INTEGER_RESULT or (e.op in ("-", "+", "abs") and never_nan(e.operand))
    if isinstance(e, BinOp):
        return e.op != "/" and never_nan(e.lhs) and never_nan(e.rhs)
    return isinstance(e, (Compare, Not, And, Or))


def value_is(e: Expr, value: Any) -> Expr:
    """The condition that ``e`` has exactly ``value``: what a program that baked the value in
    (``str(v)``, ``float(v)``) relies on. ``==`` does not tell ``-0.0`` from ``0.0`` and never
    holds for NaN, so a float zero also checks its sign and NaN is checked with ``isnan``."""
    if isinstance(value, float) and not isinstance(value, bool):
        if math.isnan(value):
            return UnaryOp("isnan", e)
        if value == 0.0:
            sign: Expr = UnaryOp("signbit", e)
            return And(
                (
                    Compare("==", e, Const(value)),
                    sign if math.copysign(1.0, value) < 0 else Not(sign),
                )
            )
    return Compare("==", e, Const(value))


# Integer polynomials: monomial (sorted variable names, repeated for powers) -> coefficient.
Poly = dict[tuple[str, ...], int]


def int_poly(e: Expr) -> Poly | None:
    """``e`` as a polynomial when it is integer arithmetic on int variables (``+``, ``-``, ``*``,
    and ``//``/``%`` by a monomial that divides it exactly), else None."""
    if isinstance(e, Var):
        return {(e.name,): 1} if e.integer else None
    if isinstance(e, Const):
        return ({(): e.value} if e.value else {}) if type(e.value) is int else None
    if isinstance(e, UnaryOp) and e.op in ("-", "+"):
        inner = int_poly(e.operand)
        if inner is None or e.op == "+":
            return inner
        return {m: -c for m, c in inner.items()}
    if not isinstance(e, BinOp) or e.op not in ("+", "-", "*", "//", "%"):
        return None
    a, b = int_poly(e.lhs), int_poly(e.rhs)
    if a is None or b is None:
        return None
    if e.op in ("+", "-"):
        out = dict(a)
        for m, c in b.items():
            out[m] = out.get(m, 0) + (c if e.op == "+" else -c)
        return {m: c for m, c in out.items() if c}
    if e.op == "*":
        prod: Poly = {}
        for ma, ca in a.items():
            for mb, cb in b.items():
                m = tuple(sorted(ma + mb))
                prod[m] = prod.get(m, 0) + ca * cb
        return {m: c for m, c in prod.items() if c}
    quotient = _divide_exactly(a, b)
    if quotient is None:
        return None
    return quotient if e.op == "//" else {}


def _divide_exactly(a: Poly, b: Poly) -> Poly | None:
    """``a / b`` when ``b`` is one monomial dividing every term of ``a`` exactly."""
    if len(b) != 1:
        return None
    ((mb, cb),) = b.items()
    out: Poly = {}
    for m, c in a.items():
        rest = list(m)
        for v in mb:
            if v not in rest:
                return None
            rest.remove(v)
        if c % cb:
            return None
        out[tuple(rest)] = c // cb
    return out


def poly_expr(p: Poly) -> Expr:
    """The canonical expression of a polynomial (terms in a fixed order)."""
    terms: list[Expr] = []
    const = p.get((), 0)
    for m in sorted(k for k in p if k):
        c = p[m]
        term: Expr = Var(m[0], integer=True)
        for v in m[1:]:
            term = BinOp("*", term, Var(v, integer=True))
        if c == -1:
            term = UnaryOp("-", term)
        elif c != 1:
            term = BinOp("*", Const(c), term)
        terms.append(term)
    if not terms:
        return Const(const)
    out = terms[0]
    for t in terms[1:]:
        out = BinOp("+", out, t)
    if const:
        out = BinOp("+", out, Const(const))
    return out


def _integer_linear(e: Expr) -> tuple[dict[str, int], int] | None:
    """``e`` as ``sum(coef * var) + const`` when its polynomial has degree 1 at most."""
    p = int_poly(e)
    if p is None or any(len(m) > 1 for m in p):
        return None
    return {m[0]: c for m, c in p.items() if m}, p.get((), 0)


def single_variable(e: Expr) -> str | None:
    """The name of the int variable that integer arithmetic ``e`` equals (``(n + 1) - 1``)."""
    if isinstance(e, Var):
        return None
    lin = _integer_linear(e)
    if lin is None or lin[1] != 0 or len(lin[0]) != 1:
        return None
    ((name, coef),) = lin[0].items()
    return name if coef == 1 else None


def _sum_of_parts(e: Expr) -> tuple[dict[Expr, int], int] | None:
    """``e`` as a sum of integer multiples of parts that are not sums (``1 // (n + 1)``,
    ``min``-like clamps kept whole) plus an int constant, when ``e`` is integer arithmetic."""
    parts: dict[Expr, int] = {}
    const = 0

    def add(x: Expr, k: int) -> bool:
        nonlocal const
        if isinstance(x, Const):
            if type(x.value) is not int:
                return False
            const += k * x.value
            return True
        if isinstance(x, BinOp) and x.op in ("+", "-"):
            return add(x.lhs, k) and add(x.rhs, k if x.op == "+" else -k)
        if isinstance(x, UnaryOp) and x.op in ("-", "+"):
            return add(x.operand, -k if x.op == "-" else k)
        if isinstance(x, BinOp) and x.op == "*":
            for c, other in ((x.lhs, x.rhs), (x.rhs, x.lhs)):
                if isinstance(c, Const) and type(c.value) is int:
                    return add(other, k * c.value)
        if not never_nan(x):
            return False
        parts[x] = parts.get(x, 0) + k
        return True

    if not add(e, 1):
        return None
    return {x: c for x, c in parts.items() if c}, const


def _constant_difference(a: Expr, b: Expr) -> int | None:
    """``a - b`` where it is the same int whatever the values (``(6 - (k - c)) - c + k`` and
    ``6``: the sizes of two slices at one bound read from data, summed), else None."""
    sa, sb = _sum_of_parts(a), _sum_of_parts(b)
    if sa is None or sb is None:
        return None
    parts = dict(sa[0])
    for x, c in sb[0].items():
        parts[x] = parts.get(x, 0) - c
    if any(parts.values()):
        return None
    return sa[1] - sb[1]


def _solve_linear(e: Compare) -> Expr:
    """``(x + 1) - 1 != 1`` as ``x != 1``: a comparison of integer arithmetic on one size,
    solved for it (so that bounds on the same size merge)."""
    a, b = _integer_linear(e.lhs), _integer_linear(e.rhs)
    if a is None or b is None:
        return e
    terms = dict(a[0])
    for v, x in b[0].items():
        terms[v] = terms.get(v, 0) - x
    terms = {v: x for v, x in terms.items() if x}
    const = b[1] - a[1]  # sum(terms) op const
    if not terms:
        return Const(_COMPARE[e.op](0, const))
    if len(terms) != 1:
        return e
    ((name, coef),) = terms.items()
    op = e.op
    if coef < 0:  # -k * x op c  is  k * x (mirrored op) -c
        coef, const, op = -coef, -const, _MIRRORED[op]
    var = Var(name, integer=True)
    if op in ("==", "!="):
        if const % coef:
            return Const(op == "!=")
        return Compare(op, var, Const(const // coef))
    floor, ceil = const // coef, -(-const // coef)
    bound = {">": floor, ">=": ceil, "<": ceil, "<=": floor}[op]
    return Compare(op, var, Const(bound))


def _flatten(terms: Iterable[Expr], kind: type[_Junction]) -> list[Expr]:
    out: list[Expr] = []
    for t in terms:
        t = simplify(t)
        if isinstance(t, kind):
            out.extend(t.terms)
        else:
            out.append(t)
    return out


def _dedupe(terms: Iterable[Expr]) -> list[Expr]:
    seen: set[Expr] = set()
    out = []
    for t in terms:
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


class _Bounds:
    """What a conjunction of comparisons against constants says about one expression."""

    def __init__(self) -> None:
        self.lo: tuple[Any, bool] | None = None  # (value, strict)
        self.hi: tuple[Any, bool] | None = None
        self.eq: Any = None
        self.has_eq = False
        self.ne: list[Any] = []
        self.empty = False

    def add(self, op: str, c: Any) -> None:
        if op == "==":
            if self.has_eq and self.eq != c:
                self.empty = True
            self.eq, self.has_eq = c, True
        elif op == "!=":
            self.ne.append(c)
        elif op in (">", ">="):
            cand = (c, op == ">")
            if self.lo is None or c > self.lo[0] or (c == self.lo[0] and cand[1]):
                self.lo = cand
        else:
            cand = (c, op == "<")
            if self.hi is None or c < self.hi[0] or (c == self.hi[0] and cand[1]):
                self.hi = cand

    def terms(self, subject: Expr) -> list[Expr] | None:
        """The minimal comparisons, or None if they cannot all hold."""
        if self.empty:
            return None
        lo, hi = self.lo, self.hi
        if lo and hi and (lo[0] > hi[0] or (lo[0] == hi[0] and (lo[1] or hi[1]))):
            return None
        if self.has_eq:
            v = self.eq
            ok = (lo is None or v > lo[0] or (v == lo[0] and not lo[1])) and (
                hi is None or v < hi[0] or (v == hi[0] and not hi[1])
            )
            if not ok or v in self.ne:
                return None
            return [Compare("==", subject, Const(v))]
        if lo and hi and lo[0] == hi[0]:
            return [Compare("==", subject, Const(lo[0]))] if lo[0] not in self.ne else None
        out: list[Expr] = []
        if lo:
            out.append(Compare(">" if lo[1] else ">=", subject, Const(lo[0])))
        if hi:
            out.append(Compare("<" if hi[1] else "<=", subject, Const(hi[0])))
        for v in _dedupe(Const(v) for v in self.ne):
            assert isinstance(v, Const)
            excluded = (lo and (v.value < lo[0] or (v.value == lo[0] and lo[1]))) or (
                hi and (v.value > hi[0] or (v.value == hi[0] and hi[1]))
            )
            if not excluded:
                out.append(Compare("!=", subject, v))
        return out


def _simplify_and(e: And) -> Expr:
    bounds: dict[Expr, _Bounds] = {}
    rest: list[Expr] = []
    for t in _flatten(e.terms, And):
        if isinstance(t, Const):
            if not t.value:
                return Const(False)
            continue
        if isinstance(t, Compare) and isinstance(t.rhs, Const) and not isinstance(t.lhs, Const):
            bounds.setdefault(t.lhs, _Bounds()).add(t.op, t.rhs.value)
        else:
            rest.append(t)
    out: list[Expr] = []
    for subject, b in bounds.items():
        ts = b.terms(subject)
        if ts is None:
            return Const(False)
        out.extend(ts)
    out.extend(_dedupe(rest))
    if not out:
        return Const(True)
    return out[0] if len(out) == 1 else And(out)


def _simplify_or(e: Or) -> Expr:
    terms: list[Expr] = []
    for t in _flatten(e.terms, Or):
        if isinstance(t, Const):
            if t.value:
                return Const(True)
            continue
        terms.append(t)
    terms = _dedupe(terms)
    # x > 5 or x > 3 is x > 3: keep the weakest one-sided bound on each subject.
    weakest: dict[tuple[Expr, str], Compare] = {}
    rest: list[Expr] = []
    for t in terms:
        if isinstance(t, Compare) and isinstance(t.rhs, Const) and t.op in ("<", "<=", ">", ">="):
            side = "lo" if t.op in (">", ">=") else "hi"
            key = (t.lhs, side)
            cur = weakest.get(key)
            if cur is None or _weaker(t, cur):
                weakest[key] = t
        else:
            rest.append(t)
    out: list[Expr] = [*weakest.values(), *rest]
    if not out:
        return Const(False)
    return out[0] if len(out) == 1 else Or(out)


def _weaker(a: Compare, b: Compare) -> bool:
    """True if ``a`` admits every value ``b`` admits (both bound the same side)."""
    assert isinstance(a.rhs, Const) and isinstance(b.rhs, Const)
    av, bv = a.rhs.value, b.rhs.value
    if a.op in (">", ">="):
        return bool(av < bv or (av == bv and a.op == ">="))
    return bool(av > bv or (av == bv and a.op == "<="))
