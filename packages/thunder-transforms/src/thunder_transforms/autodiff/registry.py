"""The grad-rule registry and the helpers rules are written with.

A VJP rule is registered for a symbol (keyed by the ``Symbol`` itself) and is called, while the backward trace
is recorded, with the forward bound symbol and one cotangent per tensor output (None where that
output received none). It returns ``(input, grad)`` pairs: the proxy among the bound symbol's
arguments and the gradient flowing to it. Pairs whose input is not a tensor, or whose grad is None,
are ignored, and a proxy that appears twice among the arguments simply gets two pairs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from thunder_ir import BoundSymbol, NumberProxy, OpTag, Symbol, TensorProxy, prims
from thunder_ir.ops import own_arguments
from thunder_ir.sizes import current_size_facts, same_size
from thunder_ir.symbol import leaf_prims

__all__ = [
    "VJP_RULES",
    "GradPairs",
    "VJPRule",
    "bound_arguments",
    "expand_reduced",
    "gives_no_gradient",
    "register_no_gradient",
    "register_vjp",
    "registered_rule",
    "rule_for",
    "static_eq",
    "stopped_inside",
    "sum_to_shape",
    "zeros_like",
]

GradPairs = Iterable[tuple[Any, Any]]
VJPRule = Callable[..., GradPairs]

# Symbol -> VJP rule. Written only when rule modules are imported (import time), read-only after.
VJP_RULES: dict[Symbol, VJPRule] = {}
# Symbol -> which calls its rule takes; the others are differentiated through their
# decomposition (an activation given ``inplace=True`` writes its input inside it).
_APPLIES: dict[Symbol, Callable[[BoundSymbol], bool]] = {}


# Symbol -> which of its calls give their inputs no gradient at all: eager's backward returns an
# undefined one (not zeros), so an input reached only through them keeps ``.grad`` None.
_NO_GRADIENT: dict[Symbol, Callable[[BoundSymbol], bool]] = {}


def register_no_gradient(sym: Symbol, when: Callable[[BoundSymbol], bool]) -> None:
    """Marks the calls of ``sym`` that ``when`` accepts as giving no gradient (see above)."""
    _NO_GRADIENT[sym] = when


def gives_no_gradient(bsym: BoundSymbol) -> bool:
    """Whether eager's backward of this call gives its inputs an undefined gradient."""
    when = _NO_GRADIENT.get(bsym.sym)
    return when is not None and when(bsym)


def rule_for(bsym: BoundSymbol) -> VJPRule | None:
    """The VJP rule that differentiates this call, or None (then its decomposition is)."""
    rule = VJP_RULES.get(bsym.sym)
    if rule is None:
        return None
    applies = _APPLIES.get(bsym.sym)
    if (applies is None or applies(bsym)) and not stopped_inside(bsym):
        return rule
    return None


def stopped_inside(bsym: BoundSymbol) -> bool:
    """Whether ``bsym`` reads a tensor that requires grad but its decomposition stops the
    gradient before its floating-point outputs (a call recorded under ``no_grad``, where each
    call inside it was recorded without gradient): its rule, or the torch callable it mirrors
    run whole, would give those outputs one that eager does not."""
    if not bsym.subsymbols or OpTag.STOPS_GRADIENT in bsym.sym.tags:
        return False
    if not any(isinstance(p, TensorProxy) and p.requires_grad for p in bsym.flat_proxy_args):
        return False
    outs = [o for o in bsym.flat_outs if isinstance(o, TensorProxy) and o.dtype.is_inexact]
    if not outs or any(o.requires_grad for o in outs):
        return False
    stops = [OpTag.STOPS_GRADIENT in leaf.sym.tags for leaf in leaf_prims(bsym)]
    return any(stops) and not all(stops)  # detach itself is torch's own stop


def registered_rule(sym: Symbol) -> tuple[VJPRule, Callable[[BoundSymbol], bool] | None] | None:
    """The VJP rule registered for ``sym`` and the test of which calls it takes (None: all), or
    None where ``sym`` has no rule (a composite is then differentiated through its
    decomposition)."""
    rule = VJP_RULES.get(sym)
    return None if rule is None else (rule, _APPLIES.get(sym))


def register_vjp(
    *symbols: Symbol, applies: Callable[[BoundSymbol], bool] | None = None
) -> Callable[[VJPRule], VJPRule]:
    """Registers the decorated function as the VJP rule of ``symbols``; with ``applies``, for
    the calls it accepts only."""

    def decorate(fn: VJPRule) -> VJPRule:
        for sym in symbols:
            if sym in VJP_RULES:
                raise ValueError(f"a VJP rule for {sym.id} is already registered")
            VJP_RULES[sym] = fn
            if applies is not None:
                _APPLIES[sym] = applies
        return fn

    return decorate


_SIGNATURES: dict[int, tuple[Callable[..., Any], inspect.Signature]] = {}


def signature_of(fn: Callable[..., Any]) -> inspect.Signature:
    """``fn``'s signature, computed once per op's meta function."""
    known = _SIGNATURES.get(id(fn))
    if known is None or known[0] is not fn:  # (an id reused by another function)
        known = _SIGNATURES[id(fn)] = (fn, inspect.signature(fn))
    return known[1]


def bound_arguments(bsym: BoundSymbol) -> dict[str, Any]:
    """The call's arguments by parameter name, defaults included (rules read ``padding_idx=`` the
    same way whether it was passed by position or by keyword)."""
    fn = bsym.sym.meta
    assert fn is not None
    sig = signature_of(fn)
    # A call recorded with torch's keyword names (``torch.mul(x, other=w)``) binds by the op's.
    args, kwargs = own_arguments(fn, tuple(bsym.args), dict(bsym.kwargs))
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def is_real_number(x: Any) -> bool:
    """A real Python number argument (not a bool), a concrete one or a symbolic one: a rule that
    branches on a symbolic one decides on its value on this call (a constraint the prologue
    checks, so another value gets its own program)."""
    if isinstance(x, NumberProxy):
        return x.python_type in (int, float)
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def static_eq(a: Any, b: Any) -> bool:
    """Whether two sizes are known to be equal without recording a constraint."""
    return same_size(a, b)


def was_one(size: Any) -> bool:
    """Whether a size is 1 on every call the program serves. A symbolic size counts only when a
    recorded decision says so (a broadcast's ``size == 1`` constraint, or a data check for a
    data-dependent count): being 1 on this call alone says nothing about the next one."""
    if isinstance(size, int):
        return size == 1
    if getattr(size, "value", None) != 1:
        return False
    if current_size_facts() is None:  # no record of decisions to consult (traced elsewhere)
        return True
    return same_size(size, 1)


def zeros_like(p: TensorProxy) -> TensorProxy:
    """A zero tensor of ``p``'s shape, dtype and device."""
    zero: Any = False if p.dtype.is_boolean else (0.0 if p.dtype.is_inexact else 0)
    return prims.full(p.shape, zero, device=p.device, dtype=p.dtype)  # type: ignore[no-any-return]


def sum_to_shape(g: TensorProxy, shape: Sequence[Any]) -> TensorProxy:
    """``g`` summed over the dimensions that broadcasting ``shape`` to ``g.shape`` created or
    expanded: the adjoint of broadcasting."""
    lead = g.ndim - len(shape)
    dims = list(range(lead))
    for i, s in enumerate(shape):
        if was_one(s) and not static_eq(g.shape[lead + i], s):
            dims.append(lead + i)
    out = prims.sum(g, tuple(dims)) if dims else g
    if len(out.shape) != len(shape) or not all(static_eq(x, y) for x, y in zip(out.shape, shape)):
        out = prims.reshape(out, tuple(shape))
    return out  # type: ignore[no-any-return]


def expand_reduced(t: TensorProxy, shape: Sequence[Any], dims: Sequence[int]) -> TensorProxy:
    """A reduction's result (``dims`` of ``shape`` removed) broadcast back to ``shape``."""
    ndim = len(shape)
    reduced = {d % ndim for d in dims} if ndim else set()
    kept = tuple(i for i in range(ndim) if i not in reduced)
    return prims.broadcast_in_dim(t, tuple(shape), kept)  # type: ignore[no-any-return]


def differentiable_inputs(trace: Any, requires_grad: Sequence[bool] | None = None) -> set[str]:
    """Names of ``trace``'s floating-point tensor arguments that require grad (``requires_grad``,
    one flag per argument, overrides the proxies' own flags)."""
    args = trace.args
    if requires_grad is None:
        requires_grad = [isinstance(a, TensorProxy) and a.requires_grad for a in args]
    return {
        a.name
        for a, r in zip(args, requires_grad)
        if r and isinstance(a, TensorProxy) and a.dtype.is_inexact
    }
