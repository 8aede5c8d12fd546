"""Activation checkpointing: marking a region of a trace whose intermediates are never saved.

A checkpointed region is a composite bound symbol tagged ``OpTag.CHECKPOINT`` whose subsymbols
are the region (what ``torch.utils.checkpoint.checkpoint(fn, *args)`` ran). While recording,
``checkpoint(fn, *args)`` makes one: it records ``fn(*args)`` as the subsymbols of a fresh symbol
``checkpoint.<fn name>`` whose meta is ``fn`` (so a pass that replays the trace records the region
again). Executors run it as its subsymbols.

What the region reads from outside that is not among its arguments (a tensor held by a closure
or a ``functools.partial``: transformers passes the rotary embeddings to its checkpointed layers
that way) is added to the bound symbol as the keyword ``captured``, so that every pass that
reads a bound symbol's arguments (dead code elimination first) sees the region read it.

Autodiff (``split_forward_backward``) notes the intermediates of every region gradients flow
through in ``ForwardBackward.checkpointed``; ``remat.rematerialize`` never saves them and
recomputes the region from its inputs in the backward, as torch does. Random ops inside a region
are the exception: their outputs are saved rather than drawn again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thunder_ir import BoundSymbol, OpTag, Proxy, Symbol
from thunder_ir.tracectx import require_tracectx

__all__ = ["checkpoint", "checkpoint_symbol", "checkpointed_values", "record_region"]

CAPTURED = "captured"  # the keyword of a region's bound symbol listing what it reads from outside


def checkpoint_symbol(fn: Callable[..., Any], name: str | None = None) -> Symbol:
    """A composite symbol for the region ``fn``: calling it while recording records ``fn``'s ops
    as the subsymbols of one bound symbol tagged ``OpTag.CHECKPOINT``."""
    base = name or getattr(fn, "__name__", "") or "region"
    if not base.isidentifier():
        base = "region"
    return Symbol(base, fn, module="checkpoint", tags=(OpTag.CHECKPOINT,))


def checkpoint(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Records ``fn(*args, **kwargs)`` as a checkpointed region of the trace being recorded (the
    IR's ``torch.utils.checkpoint.checkpoint``) and returns its result."""
    return record_region(checkpoint_symbol(fn), *args, **kwargs)


def record_region(region: Symbol, *args: Any, **kwargs: Any) -> Any:
    """``region(*args, **kwargs)``, its bound symbol listing what its ops read from outside
    beyond its arguments (keyword ``captured``; see the module docstring)."""
    if CAPTURED in kwargs:
        raise TypeError(f"a checkpointed region takes no keyword argument named {CAPTURED!r}")
    trace = require_tracectx("checkpoint")
    scope = trace.scopes[-1]
    before = len(scope)
    out = region(*args, **kwargs)
    if len(scope) != before + 1:  # nothing recorded (the region computed nothing)
        return out
    bsym = scope[-1]
    captured = _read_from_outside(bsym)
    if captured:
        scope[-1] = bsym.replace(kwargs={**bsym.kwargs, CAPTURED: tuple(captured)})
    return out


def _read_from_outside(bsym: BoundSymbol) -> list[Proxy]:
    """The proxies ``bsym``'s subsymbols (at any depth) read that neither they produce nor its
    arguments hold, in the order first read."""
    known = {p.name for p in bsym.flat_proxy_args}
    found: dict[str, Proxy] = {}

    def visit(subs: tuple[BoundSymbol, ...]) -> None:
        for s in subs:
            for p in s.flat_proxy_args:
                if p.name not in known and p.name not in found:
                    found[p.name] = p
            visit(s.subsymbols)
            known.update(p.name for p in s.flat_proxy_outs)

    visit(bsym.subsymbols)
    return list(found.values())


def checkpointed_values(bsym: BoundSymbol) -> set[str]:
    """Names of the intermediates of a region: the outputs of its subsymbols (at any depth) that
    are not outputs of the region itself."""
    outs = {p.name for p in bsym.flat_proxy_outs}
    names: set[str] = set()
    stack = list(bsym.subsymbols)
    while stack:
        s = stack.pop()
        names.update(p.name for p in s.flat_proxy_outs if p.name not in outs)
        stack.extend(s.subsymbols)
    return names
