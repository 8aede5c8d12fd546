"""When a program that writes in place is differentiated by torch.autograd instead of by thunder.

Thunder differentiates a program with in-place writes by functionalizing it
(``thunder_transforms.functionalize``): gradients are then those of the values the program
computes, which is what eager computes too wherever eager can. Eager can not always: autograd
refuses to use a tensor it saved for the backward once it has been written (``c = w.exp();
c.add_(1)`` raises in ``backward``), refuses writes into a leaf that requires grad, and it knows
which inputs share memory, which a trace does not. Where one of those may matter, the program's
execution trace (every op the torch call eager makes) is recorded by torch.autograd instead
(``make_differentiable``), and everything is eager's by construction:

- a group written where gradients flow (``written_where_gradients_flow``) holds a trace input:
  when, whether and how the caller's memory is written is then eager's (also if the write
  raises half-way, or inputs share memory);
- an op that computes a value carrying a gradient (other than a view, whose backward keeps only
  sizes) reads a member of a group written after it (torch may have saved what it read), or
  produces one and is an op whose backward torch computes from its result (exp, sigmoid, tanh,
  relu, softmax, ...; also their in-place forms);
- an in-place op reads, through another view, memory it writes (``a.add_(a[:, :1])``: the
  values it reads depend on the order torch writes in);
- functionalization refuses the program (a write through a reshape, as_strided, detach...).

Otherwise (``relu_`` on an activation, ``+=`` of a residual, buffers) thunder's autodiff runs,
with rematerialization and fusion in the backward.
"""

from __future__ import annotations

from collections.abc import Sequence

from thunder_ir import OpTag, Symbol, TensorProxy, Trace, prims
from thunder_ir import ops as ltorch
from thunder_ir.aliasing import (
    alias_info,
    writes_in_place,
    written_inputs,
    written_where_gradients_flow,
)
from thunder_transforms.functionalize import functionalize

__all__ = ["RESULT_SAVING_OPS", "needs_eager_autograd"]

# Ops whose backward torch computes from their result, which autograd saves: torch-language ops,
# their in-place forms, and the prims of the same computation.
RESULT_SAVING_OPS: frozenset[Symbol] = frozenset(
    {
        ltorch.exp, ltorch.exp2, ltorch.expm1, ltorch.sigmoid, ltorch.tanh, ltorch.relu,
        ltorch.sqrt, ltorch.rsqrt, ltorch.reciprocal, ltorch.softmax, ltorch.log_softmax,
        ltorch.cumprod, ltorch.prod, ltorch.std, ltorch.norm, ltorch.logsumexp, ltorch.pow,
        ltorch.elu, ltorch.celu, ltorch.selu,
        ltorch.exp_, ltorch.exp2_, ltorch.expm1_, ltorch.sigmoid_, ltorch.tanh_, ltorch.sqrt_,
        ltorch.rsqrt_, ltorch.reciprocal_, ltorch.cumprod_, ltorch.pow_,
        prims.exp, prims.exp2, prims.expm1, prims.sigmoid, prims.tanh, prims.sqrt, prims.rsqrt,
        prims.reciprocal, prims.cumprod, prims.prod, prims.pow,
    }
)  # fmt: skip


_VIEWS = frozenset({OpTag.VIEW, OpTag.MAY_RETURN_VIEW})


def _saves_result(sym: Symbol) -> bool:
    return sym in RESULT_SAVING_OPS


def needs_eager_autograd(trace: Trace, requires_grad: Sequence[bool] | None = None) -> bool:
    """Whether torch.autograd, rather than thunder, must differentiate ``trace`` (see the module
    docstring)."""
    relevant = written_where_gradients_flow(trace, requires_grad)
    if not relevant:
        return False
    if any(isinstance(a, TensorProxy) and a.name in relevant for a in trace.args):
        return True  # the caller's memory: when, whether and how it is written is eager's
    args = trace.args
    if requires_grad is None:
        requires_grad = [isinstance(a, TensorProxy) and a.requires_grad for a in args]
    active = {
        a.name
        for a, r in zip(args, requires_grad)
        if r and isinstance(a, TensorProxy) and a.dtype.is_inexact
    }
    # Whole ops: an in-place op's reads of what it writes are its own (torch saves what it needs
    # before writing).
    bsyms = trace.bound_symbols
    info = alias_info(bsyms)
    touched: set[str] = set()  # groups an op computing a gradient-carrying value read or made
    for b in bsyms:
        if b.has_tag(OpTag.RETURN):
            continue
        tensors = [p for p in b.flat_proxy_args if isinstance(p, TensorProxy)]
        reads_active = b.sym is not prims.stop_gradient and any(p.name in active for p in tensors)
        outs = [o for o in b.flat_outs if isinstance(o, TensorProxy) and o.dtype.is_inexact]
        if writes_in_place(b):
            written = set(written_inputs(b))
            groups = {info.root(n) for n in written}
            if groups & touched:
                return True  # a value autograd may have saved is overwritten
            if any(p.name not in written and info.root(p.name) in groups for p in tensors):
                # It reads memory it writes through another view (``a.add_(a[:, :1])``): what it
                # reads depends on the order torch writes in, which only running it shows.
                return True
            if reads_active:
                active.update(o.name for o in outs)
                if _saves_result(b.sym):
                    touched |= groups
            continue
        if reads_active:
            if not _VIEWS & b.sym.tags:  # a view's backward keeps only sizes
                touched.update(info.root(p.name) for p in tensors if info.is_written(p.name))
            if _saves_result(b.sym):
                touched.update(info.root(o.name) for o in outs if info.is_written(o.name))
            active.update(o.name for o in outs)
    try:
        functionalize(trace, only=relevant)
    except (NotImplementedError, RuntimeError):
        return True
    return False
