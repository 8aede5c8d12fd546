"""Views that eager refuses for their strides, where a fusion region takes them.

``view`` (``view_as``, ``as_strided``) raises in eager when the strides of what it reads do not
allow it. Run as torch's own call, it raises in the compiled program too; but a fusion executor
that takes it into a region computes it without strides (splitting the regions at every view
instead costs torch.compile's regions, see ``thunder_executors.assignment``). So where a fusion
executor takes one, the program is run once at compile time as eager runs it, op by op on fake
tensors laid out as this call's inputs (no data, no compute): a view that eager refuses raises
its error (the call then runs eagerly and the caller sees eager's). The strides of the inputs
that lead to such a view decide whether it passes, and the cache key holds no strides: the
prologue checks them (``check_strides``), so inputs laid out otherwise are compiled anew.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from thunder.guards import check_contiguous, check_strides
from thunder_executors import FusionExecutor, transform_for_execution
from thunder_executors.assignment import resolve_executors
from thunder_executors.channels_last import fake_value
from thunder_ir import BoundSymbol, OpTag, Proxy, TensorProxy, Trace, prims
from thunder_ir import ops as ltorch

__all__ = ["EagerViewError", "check_fused_views", "contiguity_checks", "stride_checks"]

# torch's messages for a view its input's strides do not allow (its kernel's; its meta
# function's, on fake tensors).
_VIEW_REFUSED = (
    "view size is not compatible with input tensor's size and stride",
    "Cannot view a tensor with shape",
)


class EagerViewError(Exception):
    """Eager refuses a view the compiled program would have computed (``.error`` is eager's)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def _fused_views(trace: Trace, executors: Sequence[Any]) -> list[BoundSymbol]:
    fusers = [e for e in resolve_executors(executors) if isinstance(e, FusionExecutor)]
    if not fusers:
        return []
    return [
        b
        for b in trace.bound_symbols
        if OpTag.LAYOUT_ERRORS in b.sym.tags and any(f.can_fuse(b) for f in fusers)
    ]


# Ops whose results torch lays out anew (contiguous), whatever the strides of their inputs: the
# layout of what follows them does not depend on the inputs before them.
# (Not convolutions: a channels-last input gives a channels-last result.)
_FRESH_LAYOUT = frozenset(
    {
        ltorch.linear, ltorch.matmul, ltorch.mm, ltorch.bmm, ltorch.addmm, ltorch.baddbmm,
        ltorch.embedding, prims.linear, prims.matmul, prims.embedding,
    }
)  # fmt: skip


def _inputs_leading_to(trace: Trace, views: list[BoundSymbol]) -> list[TensorProxy]:
    """The tensor inputs of ``trace`` whose strides the views' inputs' strides depend on."""
    needed = {p.name for b in views for p in b.flat_proxy_args}
    for b in reversed(trace.bound_symbols):
        if b.sym in _FRESH_LAYOUT or not any(o.name in needed for o in b.flat_proxy_outs):
            continue
        is_view = OpTag.VIEW in b.sym.tags
        for p in b.flat_proxy_args:
            # A result torch computes is dense, laid out in the order of its inputs' strides: a
            # tensor of one dimension has no order to give (a view of it keeps its strides).
            if is_view or not isinstance(p, TensorProxy) or p.ndim >= 2:
                needed.add(p.name)
    return [a for a in trace.args if isinstance(a, TensorProxy) and a.name in needed]


def check_fused_views(
    trace: Trace, executors: Sequence[Any], values: Mapping[str, Any]
) -> list[tuple[TensorProxy, tuple[int, ...]]]:
    """Raises ``EagerViewError`` where eager refuses a view of ``trace`` that a fusion executor
    takes, for this call's inputs (``values``: input name -> the caller's tensor or number).
    Returns the inputs whose strides decided it, with those strides (empty: nothing to check)."""
    views = _fused_views(trace, executors)
    if not views:
        return []
    inputs = _inputs_leading_to(trace, views)
    if any(not isinstance(values.get(p.name), torch.Tensor) for p in inputs):
        return []  # an input the call does not hand over as a tensor: nothing to lay out
    from torch._subclasses.fake_tensor import FakeTensorMode

    operators = [e for e in resolve_executors(executors) if not isinstance(e, FusionExecutor)]
    as_eager = transform_for_execution(trace, operators).python_callable()
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    args = [
        fake_value(mode, values.get(a.name, a)) if isinstance(a, Proxy) else a for a in trace.args
    ]
    try:
        with mode:
            as_eager(*args)
    except Exception as e:
        if any(m in str(e) for m in _VIEW_REFUSED):
            raise EagerViewError(e) from e
    return [(p, tuple(values[p.name].stride())) for p in inputs]


def stride_checks(
    checked: list[tuple[TensorProxy, tuple[int, ...]]],
) -> list[BoundSymbol]:
    """Prologue checks that the inputs are laid out as when the views were checked."""
    return [
        check_strides.bind(p, strides, output=None).replace(
            header=f"guard: strides of {p.name} (a fused view of it was checked as eager)"
        )
        for p, strides in checked
    ]


def contiguity_checks(checked: list[TensorProxy]) -> list[BoundSymbol]:
    """Prologue checks that the inputs are contiguous, as when the execution trace chose the
    layouts of its convolutions (``thunder_executors.channels_last``)."""
    return [
        check_contiguous.bind(p, output=None).replace(
            header=f"guard: {p.name} is contiguous (its convolutions run channels-last)"
        )
        for p in checked
    ]
