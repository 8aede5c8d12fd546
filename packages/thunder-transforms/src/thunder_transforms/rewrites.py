"""Torch-language trace rewrites as (pattern, replacement) rules: what a program spells out in
many ops, recorded as fewer.

A rule's pattern (``thunder_transforms.patterns``) is matched at the output of each bound symbol,
the last first (a match is never part of a bigger one). The first of its matches that passes the
checks below is rewritten: the bound symbols it went through are dropped and the rule's
replacement, recorded where the last of them was, stands for its output. The first rule that
applies at a bound symbol wins.

A match is only rewritten when nothing else sees its intermediates: each is read by the match
alone (as often as its ops read it), none is returned, and no in-place write runs between the
match's first op and its last (the ops would otherwise read their operands at different times).
What the replacement reads (the values the pattern captured) is computed outside the match. A
rule may refuse a match on top of that (``Rule.accept``).

Two rule lists, each one pass of the jit: ``COMPOSITES`` (``recognize_composites``) and, after it,
``ROTARY`` (``sign_flipped_rotary``).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from thunder_ir import BoundSymbol, Proxy, Symbol, TensorProxy, Trace, dtypes
from thunder_ir import ops as ltorch
from thunder_ir.sizes import same_size
from thunder_transforms.passes import substitute
from thunder_transforms.patterns import (
    Graph,
    Match,
    Pattern,
    capture,
    either,
    number,
    op,
    seq,
    where,
)

__all__ = [
    "COMPOSITES",
    "ROTARY",
    "Rerecording",
    "Rule",
    "recognize_composites",
    "rewrite",
    "sign_flipped_rotary",
]


class Rerecording:
    """What a rule's replacement sees while the trace is re-recorded: the graph of the trace
    being rewritten, the replacements of the outputs rewritten so far, and ``memo``, values a
    rule records once per pass and reuses (rotary's ``sin_signed``)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.renamed: dict[str, Any] = {}
        self.memo: dict[Any, Any] = {}

    def new(self, v: Any) -> Any:
        """``v`` in the re-recorded trace: its replacement where ``v`` was a rewritten output."""
        return self.renamed.get(v.name, v) if isinstance(v, Proxy) else v


def _always(m: Match, g: Graph) -> bool:
    return True


@dataclass(frozen=True)
class Rule:
    """Where ``pattern`` matches (and ``accept`` takes the match), the bound symbols matched are
    replaced by what ``replace`` records, given the match; it returns the new output."""

    pattern: Pattern
    replace: Callable[[Match, Rerecording], Any]
    accept: Callable[[Match, Graph], bool] = _always


def _private(members: Sequence[BoundSymbol], root: BoundSymbol, g: Graph) -> bool:
    """Whether the match's intermediates are its own: read by its bound symbols only (as often
    as they read them), none returned."""
    inside: Counter[str] = Counter(p.name for b in members for p in b.flat_proxy_args)
    for b in members:
        if b is root:
            continue
        for p in b.flat_proxy_outs:
            if p.name in g.returned or g.reads[p.name] != inside[p.name]:
                return False
    return True


def _captured_outside(m: Match, members: Sequence[BoundSymbol]) -> bool:
    """Whether the values the pattern captured are computed outside the match: the replacement
    reads them after the match's bound symbols are dropped."""
    outs = {p.name for b in members for p in b.flat_proxy_outs}
    return not any(isinstance(v, Proxy) and v.name in outs for v in m.bound.values())


def _members(m: Match, i: int, g: Graph, rule: Rule, taken: set[int]) -> set[int] | None:
    """The indices of the bound symbols that match ``m`` rooted at bound symbol ``i`` replaces,
    where it passes the checks; None where it does not."""
    members = {g.index[id(b)] for b in m.members}
    if members & taken or any(min(members) < w < i for w in g.writes):
        return None
    ops = [g.bsyms[j] for j in sorted(members)]
    if not _private(ops, g.bsyms[i], g) or not _captured_outside(m, ops):
        return None
    return members if rule.accept(m, g) else None


def _applied(
    rules: Sequence[Rule], i: int, g: Graph, taken: set[int]
) -> tuple[Rule, Match, set[int]] | None:
    """The rule that applies at bound symbol ``i``, its match and the indices of the bound
    symbols it replaces: the first rule with a match that passes the checks, its first such."""
    for rule in rules:
        for m in rule.pattern(g.bsyms[i].output, Match(), g):
            members = _members(m, i, g, rule, taken)
            if members is not None:
                return rule, m, members
    return None


def _find(g: Graph, rules: Sequence[Rule]) -> tuple[dict[int, tuple[Rule, Match]], set[int]]:
    """Per root index, the rule and match rewritten there; and the indices of every bound symbol
    the rewrites replace."""
    taken: set[int] = set()
    found: dict[int, tuple[Rule, Match]] = {}
    # outermost first: a match is never part of a bigger one
    for i in reversed(range(len(g.bsyms))):
        if i in taken or not isinstance(g.bsyms[i].output, TensorProxy):
            continue
        applied = _applied(rules, i, g, taken)
        if applied is not None:
            rule, m, members = applied
            found[i] = (rule, m)
            taken |= members
    return found, taken


def rewrite(trace: Trace, rules: Sequence[Rule], pass_name: str) -> Trace:
    """``trace`` with each match of ``rules`` replaced (see the module docstring), recorded as
    the pass ``pass_name``; ``trace`` itself where nothing matches."""
    start = time.perf_counter()
    bsyms = trace.bound_symbols
    g = Graph(bsyms)
    found, taken = _find(g, rules)
    if not found:
        return trace
    r = Rerecording(g)
    with trace.rerecord(pass_name, start=start) as new:
        for i, b in enumerate(bsyms):
            if i in found:
                rule, m = found[i]
                r.renamed[b.output.name] = rule.replace(m, r)
            elif i not in taken:
                new.record(substitute(b, r.renamed))
    return new


# -- Composite ops written out in elementary ones, recorded as the op itself --------------------
#
# Libraries spell some activations out: GPT-2's ``NewGELUActivation`` is
# ``0.5 * x * (1.0 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))``, eight torch calls, each
# reading and writing the whole tensor. Recorded as ``ltorch.gelu(x, approximate="tanh")`` it is
# one kernel where an executor keeps it whole (torch_ops) and one fusible op elsewhere; its
# gradient is the op's own rule. The values agree to rounding, as those of any fusion do; in
# bfloat16 and float16 a spelled-out form stays as written (eager's rounding after every op).
# Recognized: GELU (tanh and erf forms, in the groupings people write) and SiLU written as
# ``x * sigmoid(x)``. The constants must be the op's own, exactly: a truncated ``0.79788456`` is
# another function, and stays as written.

# In bfloat16 and float16 eager rounds after every op of the spelled-out form and the op's kernel
# rounds once: results move by units in the last place (more where ``1 + tanh`` cancels), which a
# user comparing with eager sees. In float32 and float64 the two agree to the dtype's rounding.
_FULL_PRECISION = (dtypes.float32, dtypes.float64)


def _full_precision(v: Any, m: Match) -> bool:
    return isinstance(v, TensorProxy) and v.dtype.strong() in _FULL_PRECISION


# The operand of the composite: one float tensor, the same wherever it appears.
_X = capture("x", _full_precision)


def _same_kind(v: TensorProxy, x: TensorProxy | None, reduced: bool = False) -> bool:
    if x is None or v.dtype != x.dtype:
        return False
    shape = (*x.shape[:-1], 1) if reduced and x.ndim else tuple(x.shape)
    return v.ndim == len(shape) and all(same_size(a, b) for a, b in zip(v.shape, shape))


def _like_x(v: Any, m: Match) -> bool:
    return _same_kind(v, m.get("x"))


def _reduced_like_x(v: Any, m: Match) -> bool:
    """Of ``x``'s dtype and shape with the last dimension kept as 1."""
    return _same_kind(v, m.get("x"), reduced=True)


def _op(
    sym: Symbol, *operands: Pattern, commutative: bool = False, reduced: bool = False
) -> Pattern:
    """``sym`` of exactly these positional operands, its result of ``x``'s dtype and shape
    (``reduced``: with the last dimension kept as 1)."""
    result = _reduced_like_x if reduced else _like_x
    return op(sym, *operands, commutative=commutative, result=result)


def _mul(a: Pattern, b: Pattern) -> Pattern:
    return _op(ltorch.mul, a, b, commutative=True)


def _add(a: Pattern, b: Pattern, reduced: bool = False) -> Pattern:
    return _op(ltorch.add, a, b, commutative=True, reduced=reduced)


def _half_x_times(factor: Pattern) -> Pattern:
    """``0.5 * x * factor`` in the groupings people write: ``(0.5 * x) * f``, ``0.5 * (x * f)``,
    ``x * (0.5 * f)`` (a product's operands in either order)."""
    half = number(0.5)
    return either(
        _mul(_mul(half, _X), factor),
        _mul(half, _mul(_X, factor)),
        _mul(_X, _mul(half, factor)),
    )


_CUBE = either(_op(ltorch.pow, _X, number(3)), _mul(_mul(_X, _X), _X))

# 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))
_GELU_TANH = _half_x_times(
    _add(
        number(1.0),
        _op(
            ltorch.tanh,
            _mul(number(math.sqrt(2.0 / math.pi)), _add(_X, _mul(number(0.044715), _CUBE))),
        ),
    )
)

# 0.5 * x * (1 + erf(x / sqrt(2)))
_GELU_ERF = _half_x_times(
    _add(
        number(1.0),
        _op(
            ltorch.erf,
            either(
                _op(ltorch.true_divide, _X, number(math.sqrt(2.0))),
                _op(ltorch.div, _X, number(math.sqrt(2.0))),
                _mul(_X, number(1.0 / math.sqrt(2.0))),
            ),
        ),
    )
)

# x * sigmoid(x) (swish)
_SILU = _mul(_X, _op(ltorch.sigmoid, _X))


def _recorded(sym: Symbol, **kwargs: Any) -> Callable[[Match, Rerecording], Any]:
    """The replacement ``sym(x, **kwargs)``."""

    def replace(m: Match, r: Rerecording) -> Any:
        return sym(r.new(m["x"]), **kwargs)

    return replace


# -- RMSNorm -------------------------------------------------------------------------------------
#
# RMSNorm as Llama, Mistral, Qwen, Gemma and T5 write it,
# ``w * (x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))``, the weight one value per feature,
# or none, becomes ``ltorch.rms_norm``: on the CPU ``torch.rms_norm`` computes the same ops in
# the same order, in one call. Only in float32 and float64, as the activations above.

# Conversions that return their input itself where they change nothing.
_CONVERSIONS = frozenset({ltorch.to, ltorch.type_as, ltorch.float})


def _unchanged(operand: Pattern) -> Pattern:
    """``operand``, or a conversion of it that changes nothing (``h.to(torch.float32)`` of a
    float32 ``h``): torch returns the tensor itself."""

    def match(v: Any, m: Match, g: Graph) -> Iterator[Match]:
        yield from operand(v, m, g)
        b = g.producer(v)
        if b is None or b.sym not in _CONVERSIONS:
            return
        a = b.args[0] if b.args else None
        if isinstance(a, TensorProxy) and (a.dtype, a.device) == (v.dtype, v.device):
            for found in operand(a, m, g):
                yield found.including(b)

    return match


def _last_dim_of_x(dim: Any, m: Match) -> bool:
    """``dim`` names ``x``'s last dimension: ``-1`` or ``ndim - 1``, alone or in a sequence."""
    dims = tuple(dim) if isinstance(dim, (list, tuple)) else (dim,)
    return len(dims) == 1 and type(dims[0]) is int and dims[0] in (-1, m["x"].ndim - 1)


def _number(v: Any, m: Match) -> bool:
    return type(v) in (int, float)


def _norm_weight(v: Any, m: Match) -> bool:
    """A weight ``torch.rms_norm`` takes as it is: one value per element of ``x``'s last
    dimension, of ``x``'s dtype and device."""
    x = m.get("x")
    return (
        isinstance(v, TensorProxy)
        and x is not None
        and v is not x
        and (v.dtype, v.device) == (x.dtype, x.device)
        and v.ndim == 1
        and x.ndim > 0
        and same_size(v.shape[0], x.shape[-1])
    )


def _rms_normalized() -> Pattern:
    """``x * rsqrt(mean(x ** 2, -1, keepdim=True) + eps)`` (``x * x`` for the square; T5 squares
    ``x.to(torch.float32)`` of a float32 ``x``, which is ``x`` itself)."""
    square = either(_op(ltorch.pow, _unchanged(_X), number(2)), _mul(_X, _X))
    # the mean's dim and keepdim positional or by keyword
    last = {"dim": where(_last_dim_of_x), "keepdim": where(lambda v, m: v is True)}
    mean_square = op(ltorch.mean, square, keywords=last, result=_reduced_like_x)
    eps = capture("eps", _number)
    rstd = _op(ltorch.rsqrt, _add(mean_square, eps, reduced=True), reduced=True)
    return _mul(_X, rstd)


# the weight times the normalized x
_RMS_NORM = _mul(_unchanged(_rms_normalized()), capture("weight", _norm_weight))
_RMS_NORM_UNWEIGHTED = _rms_normalized()


def _rms_norm(m: Match, r: Rerecording) -> Any:
    x = m["x"]
    weight = r.new(m.get("weight"))
    return ltorch.rms_norm(r.new(x), (x.shape[-1],), weight, r.new(m["eps"]))


# A weighted RMSNorm holds an unweighted one: the bigger pattern first.
COMPOSITES: tuple[Rule, ...] = (
    Rule(_GELU_TANH, _recorded(ltorch.gelu, approximate="tanh")),
    Rule(_GELU_ERF, _recorded(ltorch.gelu)),
    Rule(_SILU, _recorded(ltorch.silu)),
    Rule(_RMS_NORM, _rms_norm),
    Rule(_RMS_NORM_UNWEIGHTED, _rms_norm),
)


def recognize_composites(trace: Trace) -> Trace:
    """``trace`` with the composite ops it spells out (GELU, SiLU, RMSNorm: ``COMPOSITES``)
    recorded as the ops themselves; ``trace`` itself where there are none."""
    return rewrite(trace, COMPOSITES, "recognize_composites")


# -- Rotary embeddings: ``rotate_half(x) * sin`` as ``roll(x) * sin_signed`` ----------------------
#
# Llama, Mistral, Qwen, Gemma, Phi-3 and GPT-NeoX rotate queries and keys with::
#
#     def rotate_half(x):
#         x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
#         return torch.cat((-x2, x1), dim=-1)
#
#     q_embed = q * cos + rotate_half(q) * sin
#
# ``rotate_half(x) * sin`` is four torch calls before the product (two slices, a negation, a cat),
# in every layer, for queries and keys. It equals ``roll(x, h, -1) * sin_signed``, where
# ``sin_signed`` is ``sin`` with its first half negated, bit for bit: element ``j < h`` is
# ``(-x[j + h]) * sin[j]`` in one and ``x[j + h] * (-sin[j])`` in the other, and negation
# commutes with rounding. ``sin_signed`` is made once per ``sin`` the model computes (before the
# per-layer ``unsqueeze`` that broadcasts it over the heads), so each rotation costs one ``roll``
# instead of four calls. Gradients are equal too, term by term. In every float dtype.
#
# On top of the checks of every rule, nothing may write into the memory of ``sin`` or of the
# tensor it was unsqueezed from (its negated half is made once, where the first rotation reads
# it).


def _rotatable(x: Any, m: Match) -> bool:
    """A float tensor whose last dimension is a known even size."""
    return (
        isinstance(x, TensorProxy)
        and x.ndim > 0
        and type(x.shape[-1]) is int
        and x.shape[-1] % 2 == 0
        and x.dtype.is_float
    )


def _half_slice(key: Any, first: bool, h: int) -> bool:
    """``(..., slice(None, h))`` (``first``) or ``(..., slice(h, None))``."""
    if not (isinstance(key, tuple) and len(key) == 2 and key[0] is Ellipsis):
        return False
    s = key[1]
    if not isinstance(s, slice) or s.step not in (None, 1):
        return False
    if first:
        return s.start in (None, 0) and s.stop == h
    return s.start == h and s.stop in (None, 2 * h)


def _first_half(key: Any, m: Match) -> bool:
    return _half_slice(key, True, m["x"].shape[-1] // 2)


def _second_half(key: Any, m: Match) -> bool:
    return _half_slice(key, False, m["x"].shape[-1] // 2)


def _last_dim(dim: Any, m: Match) -> bool:
    return type(dim) is int and dim in (-1, m["x"].ndim - 1)


def _of_x_dtype(v: Any, m: Match) -> bool:
    return isinstance(v, TensorProxy) and v.dtype == m["x"].dtype


def _sin_like(v: Any, m: Match) -> bool:
    """A tensor of ``x``'s dtype and last dimension (broadcast over the others)."""
    x = m["x"]
    return (
        isinstance(v, TensorProxy)
        and v.ndim > 0
        and type(v.shape[-1]) is int
        and v.shape[-1] == x.shape[-1]
        and v.dtype == x.dtype
    )


def _rotated_like_x(v: Any, m: Match) -> bool:
    x = m["x"]
    return v.dtype == x.dtype and tuple(v.shape[-1:]) == (x.shape[-1],)


_ROTATED_X = capture("x", _rotatable)
# torch.cat((-x[..., h:], x[..., :h]), dim=-1), the halves of one x
_ROTATE_HALF = op(
    ltorch.cat,
    seq(
        op(ltorch.neg, op(ltorch.getitem, _ROTATED_X, where(_second_half))),
        op(ltorch.getitem, _ROTATED_X, where(_first_half)),
    ),
    keywords={"dim": where(_last_dim)},  # positional or by keyword, 0 where absent
    defaults={"dim": 0},
    result=_of_x_dtype,
)
# rotate_half(x) * sin, the product's operands in either order
_ROTATE_HALF_TIMES_SIN = op(
    ltorch.mul,
    _ROTATE_HALF,
    capture("sin", _sin_like),
    commutative=True,
    result=_rotated_like_x,
)


def _broadcast_chain(sin: TensorProxy, g: Graph) -> tuple[TensorProxy, list[BoundSymbol]]:
    """``sin`` as a tensor the model computed once and the ``unsqueeze`` calls (new leading
    dimensions, the last one kept) that made ``sin`` from it."""
    chain: list[BoundSymbol] = []
    v = sin
    while True:
        b = g.producer(v)
        if b is None or b.sym is not ltorch.unsqueeze:
            break
        src, dim = b.args[0], b.args[1] if len(b.args) > 1 else b.kwargs.get("dim")
        if not isinstance(src, TensorProxy) or type(dim) is not int or dim in (-1, v.ndim - 1):
            break
        chain.append(b)
        v = src
    return v, list(reversed(chain))


def _sin_not_written(m: Match, g: Graph) -> bool:
    base, _ = _broadcast_chain(m["sin"], g)
    return not g.written(m["sin"].name) and not g.written(base.name)


def _sin_signed(sin: TensorProxy, h: int, r: Rerecording) -> Any:
    """``sin`` with its first half negated: made once from the tensor ``sin`` was unsqueezed
    from, where the first rotation reads it, then unsqueezed as ``sin`` was; one value per
    ``sin`` for every rotation that reads it."""
    if ("sin_signed", sin.name) in r.memo:
        return r.memo["sin_signed", sin.name]
    base, chain = _broadcast_chain(sin, r.graph)
    out = r.memo.get(("sin_signed", base.name))
    if out is None:
        b = r.new(base)
        first = ltorch.getitem(b, (Ellipsis, slice(None, h, None)))
        second = ltorch.getitem(b, (Ellipsis, slice(h, None, None)))
        out = r.memo["sin_signed", base.name] = ltorch.cat((ltorch.neg(first), second), -1)
    for u in chain:
        out = ltorch.unsqueeze(out, *u.args[1:], **u.kwargs)
    r.memo["sin_signed", sin.name] = out
    return out


def _roll_times_signed_sin(m: Match, r: Rerecording) -> Any:
    x, sin = m["x"], m["sin"]
    h = x.shape[-1] // 2
    rolled = ltorch.roll(r.new(x), h, -1)
    return ltorch.mul(rolled, _sin_signed(sin, h, r))


ROTARY: tuple[Rule, ...] = (
    Rule(_ROTATE_HALF_TIMES_SIN, _roll_times_signed_sin, accept=_sin_not_written),
)


def sign_flipped_rotary(trace: Trace) -> Trace:
    """``trace`` with each ``rotate_half(x) * sin`` computed as ``roll(x) * sin_signed`` (the
    ``ROTARY`` rule); ``trace`` itself where there is none."""
    return rewrite(trace, ROTARY, "sign_flipped_rotary")
