"""Patterns over a trace's dataflow: which bound symbols computed a value, and how.

A pattern is matched against a value of the trace (a proxy, a number, a tuple of them) and yields
every way the value fits, as ``Match`` objects: the values it bound by name and the bound
symbols it went through. Patterns are built from a few combinators: ``op`` (the value is the
output of a given symbol whose operands match patterns), ``capture`` (any value a test accepts,
bound to a name: the same value wherever the name appears), ``where`` (a test that binds
nothing), ``number``, ``seq`` (a tuple or list, item by item) and ``either``. Matching is
depth first, the operands of an op left to right, so a test sees what the operands before it
bound (a slice's bounds checked against the size of the tensor sliced).

``thunder_transforms.rewrites`` applies (pattern, replacement) rules built from them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from thunder_ir import BoundSymbol, OpTag, Proxy, Symbol, TensorProxy
from thunder_ir.aliasing import alias_info, writes_in_place

__all__ = ["Graph", "Match", "Pattern", "capture", "either", "number", "op", "seq", "where"]


class Graph:
    """A trace's bound symbols as a dataflow graph: who produces each value, how often each is
    read, which are returned, where in-place writes run."""

    def __init__(self, bsyms: Sequence[BoundSymbol]) -> None:
        self.bsyms = bsyms
        self.index = {id(b): i for i, b in enumerate(bsyms)}
        self._producers: dict[str, BoundSymbol] = {}
        for b in bsyms:
            for p in b.flat_proxy_outs:
                self._producers.setdefault(p.name, b)
        self.reads: Counter[str] = Counter(p.name for b in bsyms for p in b.flat_proxy_args)
        self.returned = {
            p.name for b in bsyms if b.has_tag(OpTag.RETURN) for p in b.flat_proxy_args
        }
        self.writes = [i for i, b in enumerate(bsyms) if writes_in_place(b)]
        self._is_written: Callable[[str], bool] | None = None

    def producer(self, v: Any) -> BoundSymbol | None:
        """The bound symbol that computed the tensor ``v``; None for other values and inputs."""
        return self._producers.get(v.name) if isinstance(v, TensorProxy) else None

    def written(self, name: str) -> bool:
        """Whether something writes in place into the memory of the value ``name`` (or of a
        value it shares memory with)."""
        if self._is_written is None:  # the alias analysis runs only for traces that write
            self._is_written = alias_info(self.bsyms).is_written if self.writes else _never
        return self._is_written(name)


def _never(name: str) -> bool:
    return False


class Match:
    """What a pattern bound: values by name and the bound symbols it went through (the ops of
    the match, in the order they were matched). Immutable: binding returns a new match, so
    alternatives are tried from the same one."""

    __slots__ = ("bound", "members")

    def __init__(
        self, bound: Mapping[str, Any] | None = None, members: tuple[BoundSymbol, ...] = ()
    ) -> None:
        self.bound: Mapping[str, Any] = dict(bound or {})
        self.members = members

    def __getitem__(self, name: str) -> Any:
        return self.bound[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.bound.get(name, default)

    def bind(self, name: str, value: Any) -> Match:
        """This match with ``value`` bound to ``name``."""
        return Match({**self.bound, name: value}, self.members)

    def including(self, bsym: BoundSymbol) -> Match:
        """This match with ``bsym`` one of its ops."""
        return Match(self.bound, (*self.members, bsym))


# A pattern takes a value of the trace, the match so far and the graph, and yields each way the
# value extends the match. It never changes the match it is given.
Pattern = Callable[[Any, Match, Graph], Iterator[Match]]
Test = Callable[[Any, Match], bool]


def _same_value(a: Any, b: Any) -> bool:
    # A trace names each value once: two proxies of one name are one value.
    if isinstance(a, Proxy) and isinstance(b, Proxy):
        return a.name == b.name
    return a is b


def capture(name: str, accept: Test | None = None) -> Pattern:
    """Any value ``accept`` takes (any value without it), bound to ``name``; where ``name`` is
    bound already, that value only."""

    def match(v: Any, m: Match, g: Graph) -> Iterator[Match]:
        if name in m.bound:
            if _same_value(m[name], v):
                yield m
        elif accept is None or accept(v, m):
            yield m.bind(name, v)

    return match


def where(test: Test) -> Pattern:
    """Any value ``test`` takes; binds nothing."""

    def match(v: Any, m: Match, g: Graph) -> Iterator[Match]:
        if test(v, m):
            yield m

    return match


def number(value: float) -> Pattern:
    """A Python number (not a bool, not a proxy) equal to ``value`` to the last bit a double
    holds: a constant written to fewer digits is another function."""

    def equal(v: Any, m: Match) -> bool:
        return type(v) in (int, float) and math.isclose(v, value, rel_tol=1e-15, abs_tol=0.0)

    return where(equal)


def either(*alternatives: Pattern) -> Pattern:
    """The matches of each alternative, in order."""

    def match(v: Any, m: Match, g: Graph) -> Iterator[Match]:
        for alternative in alternatives:
            yield from alternative(v, m, g)

    return match


def seq(*items: Pattern) -> Pattern:
    """A tuple or list of exactly as many values, each matching its pattern (``cat``'s
    tensors)."""

    def match(v: Any, m: Match, g: Graph) -> Iterator[Match]:
        if isinstance(v, (tuple, list)) and len(v) == len(items):
            yield from _each(items, tuple(v), m, g)

    return match


def _each(
    patterns: Sequence[Pattern], values: Sequence[Any], m: Match, g: Graph
) -> Iterator[Match]:
    """The matches of ``values`` against ``patterns``, position by position, left to right."""
    if not patterns:
        yield m
        return
    for found in patterns[0](values[0], m, g):
        yield from _each(patterns[1:], values[1:], found, g)


def op(
    sym: Symbol,
    *operands: Pattern,
    keywords: Mapping[str, Pattern] | None = None,
    defaults: Mapping[str, Any] | None = None,
    commutative: bool = False,
    result: Test | None = None,
) -> Pattern:
    """A tensor computed by ``sym`` from positional arguments matching ``operands`` (in either
    order where ``commutative``) and, with ``keywords``, the parameters it names, passed
    positionally after those or by keyword (``defaults`` where absent: a parameter without one
    must be passed). Without ``keywords`` the call passes no keywords. ``result``, where given,
    tests the output once the operands matched."""
    names = tuple(keywords or {})
    patterns = (*operands, *(keywords or {}).values())
    given = defaults or {}

    def arguments(b: BoundSymbol) -> tuple[Any, ...] | None:
        n = len(operands)
        if not names:
            return b.args if not b.kwargs and len(b.args) == n else None
        if not n <= len(b.args) <= n + len(names):
            return None
        named = dict(zip(names, b.args[n:]))
        if set(b.kwargs) - set(names) or set(named) & set(b.kwargs):
            return None
        named.update(b.kwargs)
        if any(k not in named and k not in given for k in names):
            return None
        return (*b.args[:n], *(named.get(k, given.get(k)) for k in names))

    def match(v: Any, m: Match, g: Graph) -> Iterator[Match]:
        b = g.producer(v)
        if b is None or b.sym is not sym:
            return
        args = arguments(b)
        if args is None:
            return
        orders = [args]
        if commutative:
            orders.append((*reversed(args[: len(operands)]), *args[len(operands) :]))
        for values in orders:
            for found in _each(patterns, values, m, g):
                if result is None or result(v, found):
                    yield found.including(b)

    return match
