"""Activation checkpointing: marking a region of a trace whose intermediates are never saved.

A checkpointed region is a composite bound symbol tagged ``OpTag.CHECKPOINT`` whose subsymbols
are the region (what ``torch.utils.checkpoint.checkpoint(fn, *args)`` ran). While recording,
``checkpoint(fn, *args)`` makes one: it records ``fn(*args)`` as the subsymbols of a fresh symbol
``checkpoint.<fn name>`` whose meta is ``fn`` (so a pass that replays the trace records the region
again). Executors run it as its subsymbols.

Autodiff (``split_forward_backward``) notes the intermediates of every region gradients flow
through in ``ForwardBackward.checkpointed``; ``remat.rematerialize`` never saves them and
recomputes the region from its inputs in the backward, as torch does. Random ops inside a region
are the exception: their outputs are saved rather than drawn again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from thunder_ir import BoundSymbol, OpTag, Symbol

__all__ = ["checkpoint", "checkpoint_symbol", "checkpointed_values"]


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
    return checkpoint_symbol(fn)(*args, **kwargs)


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
