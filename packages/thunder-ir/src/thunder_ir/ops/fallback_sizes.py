"""Symbolic sizes for the fake run of a torch fallback (``fallback._FakeRun``).

A torch callable that no op mirrors gets its outputs' shapes from one run on fake tensors. Where
its tensor arguments have symbolic sizes (``cache="symbolic values"``, or the default cache once
it compiles symbolically), or it takes symbolic ints, that run uses torch's own symbolic shapes:
a ``ShapeEnv`` with one symbol for each size expression of the trace (and each symbolic int
argument), so the outputs' sizes come back as expressions in those symbols (``s0 - 1`` for
``torch.diff``), computed in the trace as ops compute theirs (number prims on the sizes). What
torch's shape code decided on the way (``Ne(s0, 2)``, ``s0 <= 25``, ``Eq(s0, 7)`` where it
specializes) are its guards: each becomes a constraint of the trace, which the prologue checks,
so the program serves every size for which torch would have computed the same.

A size or guard the IR cannot state (a node of torch's sympy functions this module does not
translate, a symbol torch made for a data-dependent size) makes ``NotExpressible``: the caller
runs the call again on this call's sizes, specialized to them, as before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from thunder_ir import constraints as C
from thunder_ir.proxies import IntegerProxy, NumberProxy, TensorProxy
from thunder_ir.pytree import tree_iter
from thunder_ir.tracectx import get_tracectx

__all__ = ["NotExpressible", "SymbolicSizes", "has_symbolic_sizes"]


class NotExpressible(Exception):
    """A size or guard of the symbolic fake run that the IR cannot state."""


# A sympy expression or symbol (sympy has no type information; imported where used).
Sympy = Any


def _data_dependent(x: NumberProxy) -> bool:
    trace = get_tracectx()
    return trace is not None and not x.expr.variables().isdisjoint(trace.data_values)


def _symbolic_int(x: Any) -> bool:
    return isinstance(x, IntegerProxy) and x.python_type is int and not _data_dependent(x)


def _symbolic_size(s: Any) -> bool:
    return _symbolic_int(s) and s.value >= 2


def has_symbolic_sizes(args: Any, kwargs: Any) -> bool:
    """Whether a call has a symbolic size among its tensors' (2 or more) or a symbolic int
    among its arguments (neither read from data): its fake run may then be symbolic."""
    return any(
        _symbolic_int(x) or (isinstance(x, TensorProxy) and any(map(_symbolic_size, x.shape)))
        for x in tree_iter((args, kwargs))
    )


@functools.cache
def _source_type() -> type:
    import dataclasses

    from torch._guards import Source

    @dataclasses.dataclass(frozen=True)
    class ProxySource(Source):  # type: ignore[misc]
        """The trace's number a symbol stands for (its name, for torch's messages)."""

        proxy_name: str

        @property
        def _name_template(self) -> str:
            return self.proxy_name

    return ProxySource


class SymbolicSizes:
    """The symbols of one fake run: made for the sizes and ints of the call's arguments
    (``size``, ``number``), then read back (``accept``: the guards as constraints; ``shape``:
    an output's sizes as numbers of the trace)."""

    def __init__(self) -> None:
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        # Data-dependent outputs raise as on fake tensors without symbols (the caller reads
        # them from data); no duck sizing: equal values are not equal sizes.
        self.shape_env = ShapeEnv(
            allow_scalar_outputs=False, allow_dynamic_output_shape_ops=False, duck_shape=False
        )
        self._symbols: dict[C.Expr, Sympy] = {}  # a number's expression: its symbol
        self._proxies: dict[Sympy, NumberProxy] = {}
        self._hints: dict[Sympy, Sympy] = {}  # a symbol: this call's value
        # What making the symbols assumed (a size is 2 or more): constraints with the guards.
        self._assumed: list[C.Expr] = []

    def _symbol(self, x: NumberProxy, size: bool) -> torch.SymInt:
        import sympy  # type: ignore[import-untyped]
        from torch.fx.experimental.symbolic_shapes import DimDynamic

        symbol = self._symbols.get(x.expr)
        if symbol is None:
            source = _source_type()(x.name)
            if size:
                # torch takes a symbolic size to be 2 or more (0 and 1 are constants, as in the
                # trace): a constraint like the guards (the prologue checks it for the inputs').
                symbol = self.shape_env.create_symbol(x.value, source, DimDynamic.DYNAMIC)
                self._assumed.append(C.Compare(">=", x.expr, C.Const(2)))
            else:
                symbol = self.shape_env.create_unspecified_symbol(
                    x.value, source, DimDynamic.DYNAMIC
                )
            self._symbols[x.expr] = symbol
            self._proxies[symbol] = x
            self._hints[symbol] = sympy.Integer(x.value)
        out = self.shape_env.create_symintnode(symbol, hint=x.value)
        assert isinstance(out, torch.SymInt)
        return out

    def size(self, s: Any, specialize: Callable[[Any], Any]) -> Any:
        """The fake tensor's size for the proxy's size ``s``: a symbol for a symbolic size,
        this call's value (``specialize``) for one read from data, 0 or 1."""
        if not isinstance(s, NumberProxy):
            return s
        if not _symbolic_size(s):
            return int(specialize(s))
        return self._symbol(s, size=True)

    def number(self, x: Any, specialize: Callable[[Any], Any]) -> Any:
        """The fake run's argument for ``x``: a symbol for a symbolic int, this call's value
        (``specialize``) for another number."""
        if _symbolic_int(x):
            return self._symbol(x, size=False)
        return specialize(x)

    def accept(self, out: Any) -> None:
        """Records the run's guards (and what its symbols assumed) as constraints of the trace.
        Raises ``NotExpressible``, recording nothing, where a guard or a size of the result
        ``out`` has no expression in the IR, where a result is a symbolic number, or where a
        result is empty (whether torch's kernel returns it is found on this call's sizes:
        ``fallback._kernel_structure``)."""
        env = self.shape_env
        if env.deferred_runtime_asserts and any(env.deferred_runtime_asserts.values()):
            raise NotExpressible("runtime asserts")
        if set(env.var_to_range) - set(self._proxies):
            raise NotExpressible("symbols of its own (data-dependent sizes)")
        constraints = list(self._assumed)
        for leaf in tree_iter(out):
            if isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                raise NotExpressible("a symbolic number among the results")
            if isinstance(leaf, torch.Tensor):
                for s in leaf.shape:
                    if isinstance(s, torch.SymInt):
                        if self._hint(s.node.expr) <= 0:
                            raise NotExpressible("an empty result")  # (its kernel is run)
                        self._translate(s.node.expr, self._expr_of, constraints)
                    elif s == 0:
                        raise NotExpressible("an empty result")
        for guard in env.guards:
            constraints.append(self._translate(guard.expr, self._expr_of, constraints))
        kept = []
        for c in constraints:
            c = C.simplify(c)
            if c == C.Const(False):
                raise NotExpressible(f"a guard false for this call: {c.python()}")
            if c != C.Const(True):
                kept.append(c)
        for c in kept:  # (as a decision on any of the numbers would)
            next(iter(self._proxies.values()))._constrain(c)

    def shape(self, t: torch.Tensor) -> tuple[Any, ...]:
        """The sizes of the fake result ``t`` as the trace's numbers (number prims on the
        arguments' sizes, recorded in the current trace)."""
        env = {p.name: p for p in self._proxies.values()}
        shape: list[Any] = []
        for s in t.shape:
            if not isinstance(s, torch.SymInt):
                shape.append(int(s))
                continue
            expr = self._translate(s.node.expr, self._var_of, [])
            n = expr.evaluate(env)
            value = n.value if isinstance(n, NumberProxy) else n
            assert value == self._hint(s.node.expr), (expr, value)
            shape.append(n)
        return tuple(shape)

    # sympy to the IR's expressions -----------------------------------------------------------

    def _expr_of(self, symbol: Sympy) -> C.Expr:
        """A symbol as the prologue states it: the expression of its proxy."""
        proxy = self._proxies.get(symbol)
        if proxy is None:
            raise NotExpressible(f"a symbol of torch's own: {symbol}")
        return proxy.expr

    def _var_of(self, symbol: Sympy) -> C.Expr:
        """A symbol as the trace computes with it: its proxy."""
        return C.Var(self._proxies[symbol].name, integer=True)

    def _hint(self, e: Sympy) -> int:
        """The int ``e`` is for this call."""
        import sympy  # type: ignore[import-untyped]

        value = e.xreplace(self._hints)
        if not isinstance(value, sympy.Integer):
            raise NotExpressible(f"no value for {e}")
        return int(value)

    def _translate(
        self, e: Sympy, leaf: Callable[[Sympy], C.Expr], assumed: list[C.Expr]
    ) -> C.Expr:
        """``e`` (an int or a condition in the run's symbols) in the IR's expressions, the
        symbols by ``leaf``. ``max``/``min``, which the IR does not have, are the argument that is
        largest (smallest) for this call, with the constraint that it stays so (in ``assumed``)."""
        import sympy  # type: ignore[import-untyped]
        from torch.utils._sympy import functions as F

        def go(e: Sympy) -> C.Expr:
            if isinstance(e, sympy.Integer):
                return C.Const(int(e))
            if isinstance(e, sympy.logic.boolalg.BooleanAtom):
                return C.Const(bool(e))
            if isinstance(e, sympy.Symbol):
                return leaf(e)
            if isinstance(e, sympy.Add):
                return _sum(e, go)
            if isinstance(e, sympy.Mul):
                return _fold("*", [go(a) for a in e.args])
            if isinstance(e, (sympy.Pow, F.PowByNatural)):
                base, exp = e.args
                if not (isinstance(exp, sympy.Integer) and 1 <= int(exp) <= 8):
                    raise NotExpressible(f"a power: {e}")
                return _fold("*", [go(base)] * int(exp))
            if isinstance(e, F.FloorDiv):  # (CleanDiv too: an exact division)
                return C.BinOp("//", go(e.args[0]), go(e.args[1]))
            if isinstance(e, (F.Mod, F.PythonMod, sympy.Mod)):
                # (torch's Mod is taken only of a non-negative number by a positive one)
                return C.BinOp("%", go(e.args[0]), go(e.args[1]))
            if isinstance(e, F.Identity):
                return go(e.args[0])
            if isinstance(e, (F.Max, F.Min, sympy.Max, sympy.Min)):
                largest = isinstance(e, (F.Max, sympy.Max))
                hints = [self._hint(a) for a in e.args]
                pick = hints.index(max(hints) if largest else min(hints))
                chosen = go(e.args[pick])
                for i, a in enumerate(e.args):
                    if i != pick:
                        assumed.append(C.Compare(">=" if largest else "<=", chosen, go(a)))
                return chosen
            if isinstance(e, sympy.core.relational.Relational) and e.rel_op in _COMPARISONS:
                return C.Compare(e.rel_op, go(e.lhs), go(e.rhs))
            if isinstance(e, sympy.And):
                return C.And(go(a) for a in e.args)
            if isinstance(e, sympy.Or):
                return C.Or(go(a) for a in e.args)
            if isinstance(e, sympy.Not):
                return C.Not(go(e.args[0]))
            raise NotExpressible(f"{type(e).__name__}: {e}")

        return go(e)


_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})


def _fold(op: str, terms: list[C.Expr]) -> C.Expr:
    out = terms[0]
    for t in terms[1:]:
        out = C.BinOp(op, out, t)
    return out


def _sum(e: Sympy, go: Callable[[Sympy], C.Expr]) -> C.Expr:
    """A sum with its symbolic terms first and negative terms subtracted (``s0 - 1``)."""
    parts: list[tuple[int, C.Expr]] = []  # (sign, magnitude)
    constant = 0
    for a in e.args:
        coeff, rest = a.as_coeff_Mul()
        if rest == 1:
            if not coeff.is_Integer:
                raise NotExpressible(f"a sum: {e}")
            constant += int(coeff)
        elif coeff.is_Integer and coeff < 0:
            parts.append((-1, go(-a)))
        else:
            parts.append((1, go(a)))
    parts.sort(key=lambda p: -p[0])  # (a positive term first)
    out: C.Expr | None = None
    for sign, term in parts:
        if out is None:
            out = term if sign > 0 else C.UnaryOp("-", term)
        else:
            out = C.BinOp("+" if sign > 0 else "-", out, term)
    if out is None:
        return C.Const(constant)
    if constant:
        out = C.BinOp("+" if constant > 0 else "-", out, C.Const(abs(constant)))
    return out
