"""Composite ops written out in elementary ones, recognized and recorded as the op itself.

Libraries spell some activations out: GPT-2's ``NewGELUActivation`` is
``0.5 * x * (1.0 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))``, eight torch calls, each
reading and writing the whole tensor. Recorded as ``ltorch.gelu(x, approximate="tanh")`` it is one
kernel where an executor keeps it whole (torch_ops) and one fusible op elsewhere; its gradient is
the op's own rule. The values agree to rounding, as those of any fusion do; in bfloat16 and
float16 a spelled-out form stays as written (eager's rounding after every op). Recognized: GELU
(tanh and erf forms, in the groupings people write), SiLU written as ``x * sigmoid(x)``, and
RMSNorm as Llama, Mistral, Qwen, Gemma and T5 write it
(``w * (x * rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))``, the weight one value per feature,
or none): on the CPU ``torch.rms_norm`` computes the same ops in the same order, in one call.

A match is only rewritten when nothing else sees its intermediates: each is read by the match
alone, none is returned, and no in-place write runs between the match's first op and its last
(the ops would otherwise read ``x`` at different times). The constants must be the op's own,
exactly: a truncated ``0.79788456`` is another function, and stays as written.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from thunder_ir import BoundSymbol, OpTag, Proxy, Symbol, TensorProxy, Trace, dtypes
from thunder_ir import ops as ltorch
from thunder_ir.aliasing import writes_in_place
from thunder_ir.sizes import same_size
from thunder_transforms.passes import substitute

__all__ = ["recognize_composites"]


@dataclass
class _Match:
    """What a pattern bound: the tensor ``x``, the bound symbols it went through and the other
    values it captured by name (a norm's weight and epsilon)."""

    x: TensorProxy | None = None
    bsyms: list[BoundSymbol] = field(default_factory=list)
    captured: dict[str, Any] = field(default_factory=dict)

    def copy(self) -> _Match:
        return _Match(self.x, list(self.bsyms), dict(self.captured))


# A pattern takes a value of the trace and the match so far, and returns the extended match or
# None. Patterns never change the match they are given (alternatives are tried on copies).
Pattern = Callable[[Any, _Match, "_Graph"], "_Match | None"]


class _Graph:
    def __init__(self, bsyms: Sequence[BoundSymbol]) -> None:
        self.producer: dict[str, BoundSymbol] = {}
        for b in bsyms:
            for p in b.flat_proxy_outs:
                self.producer.setdefault(p.name, b)


# In bfloat16 and float16 eager rounds after every op of the spelled-out form and the op's kernel
# rounds once: results move by units in the last place (more where ``1 + tanh`` cancels), which a
# user comparing with eager sees. In float32 and float64 the two agree to the dtype's rounding.
_FULL_PRECISION = (dtypes.float32, dtypes.float64)


def _x() -> Pattern:
    """The operand of the activation: one float tensor, the same wherever it appears."""

    def match(v: Any, m: _Match, g: _Graph) -> _Match | None:
        if not isinstance(v, TensorProxy) or v.dtype.strong() not in _FULL_PRECISION:
            return None
        if m.x is None:
            m = m.copy()
            m.x = v
            return m
        return m if v.name == m.x.name else None

    return match


def _const(value: float) -> Pattern:
    """A Python number equal to ``value`` (to the last bit a double holds)."""

    def match(v: Any, m: _Match, g: _Graph) -> _Match | None:
        if type(v) not in (int, float) or isinstance(v, bool):
            return None
        return m if math.isclose(v, value, rel_tol=1e-15, abs_tol=0.0) else None

    return match


def _op(
    op: Symbol, *operands: Pattern, commutative: bool = False, reduced: bool = False
) -> Pattern:
    """The torch-language op ``op`` with exactly these positional operands and no keywords (the
    operands in either order when ``commutative``), its result of ``x``'s dtype and shape
    (``reduced``: of ``x``'s shape with the last dimension kept as 1)."""

    def match(v: Any, m: _Match, g: _Graph) -> _Match | None:
        if not isinstance(v, TensorProxy):
            return None
        b = g.producer.get(v.name)
        if b is None or b.sym is not op or b.kwargs or len(b.args) != len(operands):
            return None
        orders = [list(b.args)]
        if commutative:
            orders.append(list(reversed(b.args)))
        for args in orders:
            trial: _Match | None = m.copy()
            for pattern, a in zip(operands, args, strict=True):
                trial = pattern(a, trial, g) if trial is not None else None
            if trial is not None and _same_kind(v, trial.x, reduced):
                trial.bsyms.append(b)
                return trial
        return None

    return match


def _same_kind(v: TensorProxy, x: TensorProxy | None, reduced: bool = False) -> bool:
    if x is None or v.dtype != x.dtype:
        return False
    shape = (*x.shape[:-1], 1) if reduced and x.ndim else tuple(x.shape)
    return v.ndim == len(shape) and all(same_size(a, b) for a, b in zip(v.shape, shape))


def _either(*alternatives: Pattern) -> Pattern:
    def match(v: Any, m: _Match, g: _Graph) -> _Match | None:
        for alternative in alternatives:
            found = alternative(v, m, g)
            if found is not None:
                return found
        return None

    return match


def _mul(a: Pattern, b: Pattern) -> Pattern:
    return _op(ltorch.mul, a, b, commutative=True)


def _add(a: Pattern, b: Pattern, reduced: bool = False) -> Pattern:
    return _op(ltorch.add, a, b, commutative=True, reduced=reduced)


def _half_x_times(factor: Pattern) -> Pattern:
    """``0.5 * x * factor`` in the groupings people write: ``(0.5 * x) * f``, ``0.5 * (x * f)``,
    ``x * (0.5 * f)`` (a product's operands in either order)."""
    x = _x()
    half = _const(0.5)
    return _either(
        _mul(_mul(half, x), factor),
        _mul(half, _mul(x, factor)),
        _mul(x, _mul(half, factor)),
    )


def _cube() -> Pattern:
    x = _x()
    return _either(
        _op(ltorch.pow, x, _const(3)),
        _mul(_mul(x, x), x),
    )


# 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)))
_GELU_TANH = _half_x_times(
    _add(
        _const(1.0),
        _op(
            ltorch.tanh,
            _mul(_const(math.sqrt(2.0 / math.pi)), _add(_x(), _mul(_const(0.044715), _cube()))),
        ),
    )
)

# 0.5 * x * (1 + erf(x / sqrt(2)))
_GELU_ERF = _half_x_times(
    _add(
        _const(1.0),
        _op(
            ltorch.erf,
            _either(
                _op(ltorch.true_divide, _x(), _const(math.sqrt(2.0))),
                _op(ltorch.div, _x(), _const(math.sqrt(2.0))),
                _mul(_x(), _const(1.0 / math.sqrt(2.0))),
            ),
        ),
    )
)

# x * sigmoid(x) (swish)
_SILU = _mul(_x(), _op(ltorch.sigmoid, _x()))


def _mean_of_last_dim(operand: Pattern) -> Pattern:
    """``ltorch.mean(p, -1, keepdim=True)`` (the last dimension by any spelling, positional or
    keyword), ``p`` matching ``operand``."""

    def match(v: Any, m: _Match, g: _Graph) -> _Match | None:
        b = g.producer.get(v.name) if isinstance(v, TensorProxy) else None
        if b is None or b.sym is not ltorch.mean or not b.args:
            return None
        named = dict(zip(("a", "dim", "keepdim"), b.args))
        if len(b.args) > 3 or set(b.kwargs) - {"dim", "keepdim"} or set(named) & set(b.kwargs):
            return None
        named.update(b.kwargs)
        p, dim = named["a"], named.get("dim")
        if not isinstance(p, TensorProxy) or named.get("keepdim") is not True:
            return None
        dims = tuple(dim) if isinstance(dim, (list, tuple)) else (dim,)
        if len(dims) != 1 or type(dims[0]) is not int or dims[0] not in (-1, p.ndim - 1):
            return None
        found = operand(p, m, g)
        if found is None or not _same_kind(v, found.x, reduced=True):
            return None
        found.bsyms.append(b)
        return found

    return match


def _capture(name: str, accept: Callable[[Any, _Match], bool]) -> Pattern:
    """Any value ``accept`` takes, bound to ``name`` (the same value wherever it appears)."""

    def match(v: Any, m: _Match, g: _Graph) -> _Match | None:
        if name in m.captured:
            return m if m.captured[name] is v else None
        if not accept(v, m):
            return None
        m = m.copy()
        m.captured[name] = v
        return m

    return match


# Conversions that return their input itself where they change nothing.
_CONVERSIONS = frozenset({ltorch.to, ltorch.type_as, ltorch.float})


def _unchanged(operand: Pattern) -> Pattern:
    """``operand``, or a conversion of it that changes nothing (``h.to(torch.float32)`` of a
    float32 ``h``): torch returns the tensor itself."""

    def match(v: Any, m: _Match, g: _Graph) -> _Match | None:
        found = operand(v, m, g)
        if found is not None:
            return found
        b = g.producer.get(v.name) if isinstance(v, TensorProxy) else None
        if b is None or b.sym not in _CONVERSIONS:
            return None
        a = b.args[0] if b.args else None
        if not isinstance(a, TensorProxy) or (a.dtype, a.device) != (v.dtype, v.device):
            return None
        found = operand(a, m, g)
        if found is not None:
            found.bsyms.append(b)
        return found

    return match


def _number(v: Any, m: _Match) -> bool:
    return type(v) in (int, float)


def _norm_weight(v: Any, m: _Match) -> bool:
    """A weight ``torch.rms_norm`` takes as it is: one value per element of ``x``'s last
    dimension, of ``x``'s dtype and device."""
    x = m.x
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
    x = _x()
    square = _either(_op(ltorch.pow, _unchanged(x), _const(2)), _mul(x, x))
    mean_square = _mean_of_last_dim(square)
    rstd = _op(
        ltorch.rsqrt, _add(mean_square, _capture("eps", _number), reduced=True), reduced=True
    )
    return _mul(x, rstd)


# RMSNorm (Llama, Mistral, Qwen, Gemma, T5 write it out): the weight times the normalized x
_RMS_NORM = _mul(_unchanged(_rms_normalized()), _capture("weight", _norm_weight))
_RMS_NORM_UNWEIGHTED = _rms_normalized()


def _rms_norm_arguments(m: _Match) -> tuple[tuple[Any, ...], dict[str, Any]]:
    assert m.x is not None
    return (m.x, (m.x.shape[-1],), m.captured.get("weight"), m.captured["eps"]), {}


def _with(**kwargs: Any) -> Callable[[_Match], tuple[tuple[Any, ...], dict[str, Any]]]:
    def arguments(m: _Match) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (m.x,), kwargs

    return arguments


# (op, pattern, the op's arguments from the match), outermost patterns first
_COMPOSITES: tuple[tuple[Symbol, Pattern, Callable[[_Match], Any]], ...] = (
    (ltorch.gelu, _GELU_TANH, _with(approximate="tanh")),
    (ltorch.gelu, _GELU_ERF, _with()),
    (ltorch.silu, _SILU, _with()),
    (ltorch.rms_norm, _RMS_NORM, _rms_norm_arguments),
    (ltorch.rms_norm, _RMS_NORM_UNWEIGHTED, _rms_norm_arguments),
)


def _private(match: _Match, root: BoundSymbol, reads: Counter[str], returned: set[str]) -> bool:
    """Whether the match's intermediates are its own: read by its bound symbols only (as often
    as they read them), none returned."""
    inside: Counter[str] = Counter(p.name for b in match.bsyms for p in b.flat_proxy_args)
    for b in match.bsyms:
        if b is root:
            continue
        for p in b.flat_proxy_outs:
            if p.name in returned or reads[p.name] != inside[p.name]:
                return False
    return True


_Found = tuple[Symbol, tuple[Any, ...], dict[str, Any], set[int]]


def _find(bsyms: Sequence[BoundSymbol]) -> dict[int, _Found]:
    """Per root index: the op, its operand, its keywords and the indices of the bound symbols
    the op replaces."""
    g = _Graph(bsyms)
    index = {id(b): i for i, b in enumerate(bsyms)}
    reads: Counter[str] = Counter(p.name for b in bsyms for p in b.flat_proxy_args)
    returned = {p.name for b in bsyms if b.has_tag(OpTag.RETURN) for p in b.flat_proxy_args}
    writes = [i for i, b in enumerate(bsyms) if writes_in_place(b)]
    taken: set[int] = set()
    found: dict[int, _Found] = {}
    for i in reversed(range(len(bsyms))):  # outermost first: a match is never part of a bigger one
        b = bsyms[i]
        if i in taken or not isinstance(b.output, TensorProxy):
            continue
        for op, pattern, arguments in _COMPOSITES:
            m = pattern(b.output, _Match(), g)
            if m is None or m.x is None or not _private(m, b, reads, returned):
                continue
            members = {index[id(s)] for s in m.bsyms}
            if members & taken or any(min(members) < w < i for w in writes):
                continue
            taken |= members
            args, kwargs = arguments(m)
            found[i] = (op, args, kwargs, members)
            break
    return found


def recognize_composites(trace: Trace) -> Trace:
    """``trace`` with the composite ops it spells out (see the module docstring) recorded as the
    ops themselves; ``trace`` itself where there are none."""
    start = time.perf_counter()
    bsyms = trace.bound_symbols
    found = _find(bsyms)
    if not found:
        return trace
    dropped = {j for _, _, _, members in found.values() for j in members}
    renamed: dict[str, Proxy] = {}
    with trace.rerecord("recognize_composites", start=start) as new:
        for i, b in enumerate(bsyms):
            if i in found:
                op, args, kwargs, _ = found[i]
                args = tuple(renamed.get(a.name, a) if isinstance(a, Proxy) else a for a in args)
                renamed[b.output.name] = op(*args, **kwargs)
            elif i not in dropped:
                new.record(substitute(b, renamed))
    return new
