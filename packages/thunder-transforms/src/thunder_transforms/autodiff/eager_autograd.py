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

from thunder_ir import BoundSymbol, OpTag, Symbol, TensorProxy, Trace, prims
from thunder_ir import higher_order as ho
from thunder_ir import ops as ltorch
from thunder_ir.aliasing import (
    alias_info,
    writes_in_place,
    written_inputs,
    written_where_gradients_flow,
)
from thunder_ir.ops.data_shapes import mask_of_column
from thunder_transforms.autodiff.eager_graph import (
    SAVES_RESULT_IN_PLACE,
    saved_other_arguments,
    writes_in_place_here,
)
from thunder_transforms.autodiff.registry import differentiable_inputs, stopped_inside
from thunder_transforms.functionalize import functionalize
from thunder_transforms.passes import substitute

__all__ = [
    "RESULT_SAVING_OPS",
    "masked_reads_as_eager",
    "needs_eager_autograd",
    "no_grad_reads_detached",
]

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


def _saves_result(bsym: BoundSymbol) -> bool:
    sym = bsym.sym
    if sym in SAVES_RESULT_IN_PLACE:  # ``leaky_relu(y, inplace=True)``
        return writes_in_place_here(bsym)
    return sym in RESULT_SAVING_OPS


def _saved_function_outputs(bsym: BoundSymbol) -> list[TensorProxy]:
    """The outputs of an ``autograd.Function`` its forward saved for the backward
    (``ctx.save_for_backward(y)`` of the ``y`` it returns): autograd refuses them once written."""
    if bsym.sym is not ho.autograd_function or len(bsym.args) < 4:
        return []
    outputs, saved = bsym.args[1], bsym.args[3]
    saved_names = {p.name for p in saved if isinstance(p, TensorProxy)}
    outs = [o for o in bsym.flat_outs if isinstance(o, TensorProxy)]
    return [o for o, made in zip(outs, outputs) if made.name in saved_names]


def needs_eager_autograd(trace: Trace, requires_grad: Sequence[bool] | None = None) -> bool:
    """Whether torch.autograd, rather than thunder, must differentiate ``trace`` (see the module
    docstring)."""
    relevant = written_where_gradients_flow(trace, requires_grad)
    if not relevant:
        return False
    if any(isinstance(a, TensorProxy) and a.name in relevant for a in trace.args):
        return True  # the caller's memory: when, whether and how it is written is eager's
    active = differentiable_inputs(trace, requires_grad)
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
            if reads_active and any(
                info.root(n) in groups for n in saved_other_arguments(b, active)
            ):
                return True  # it saves a tensor it then overwrites (``y.mul_(y)``)
            if reads_active:
                active.update(o.name for o in outs)
                if _saves_result(b):
                    touched |= groups
            continue
        if reads_active:
            if not _VIEWS & b.sym.tags:  # a view's backward keeps only sizes
                touched.update(info.root(p.name) for p in tensors if info.is_written(p.name))
            if _saves_result(b):
                touched.update(info.root(o.name) for o in outs if info.is_written(o.name))
            touched.update(
                info.root(o.name) for o in _saved_function_outputs(b) if info.is_written(o.name)
            )
            active.update(o.name for o in outs)
    try:
        functionalize(trace, only=relevant)
    except (NotImplementedError, RuntimeError):
        return True
    return False


def no_grad_reads_detached(trace: Trace) -> Trace:
    """``trace`` with each call recorded under ``no_grad`` that reads tensors requiring grad
    (``registry.stopped_inside``) reading them through ``prims.stop_gradient``: torch.autograd
    records the torch calls an executor makes, and one that runs such a call whole (``add(e, w,
    alpha=0.1)``, ``lerp_``) would otherwise give its result, and what it writes, a gradient."""
    if not any(_reads_grad(b) for b in trace.bound_symbols):
        return trace
    with trace.rerecord("no_grad_reads_detached") as new:
        for b in trace.bound_symbols:
            new.record(_detached(b, new))
    return new


def _reads_grad(bsym: BoundSymbol) -> bool:
    return any(isinstance(p, TensorProxy) and p.requires_grad for p in bsym.flat_proxy_args)


def _detached(bsym: BoundSymbol, trace: Trace) -> BoundSymbol:
    """``bsym`` reading what requires grad detached where it stops the gradient inside (the
    ``stop_gradient`` calls are recorded into ``trace``'s current scope, before it), else with
    its subsymbols so changed."""
    if not bsym.subsymbols or not _reads_grad(bsym):
        return bsym
    if stopped_inside(bsym):
        kept = written_inputs(bsym)  # a written tensor keeps its place in the graph
        mapping: dict[str, TensorProxy] = {}
        for p in bsym.flat_proxy_args:
            if (
                isinstance(p, TensorProxy)
                and p.requires_grad
                and p.name not in kept
                and p.name not in mapping
            ):
                mapping[p.name] = prims.stop_gradient(p)
        return substitute(bsym, mapping)
    trace.push_scope()
    try:
        for sub in bsym.subsymbols:
            trace.record(_detached(sub, trace))
    finally:
        subsymbols = tuple(trace.pop_scope())
    if _same(subsymbols, bsym.subsymbols):
        return bsym
    return bsym.replace(subsymbols=subsymbols)


def _same(a: Sequence[BoundSymbol], b: Sequence[BoundSymbol]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def masked_reads_as_eager(trace: Trace) -> Trace:
    """``trace`` with each read through a boolean mask (``x[m]``, ``masked_select(x, m)``),
    which the trace makes at the columns of the mask's nonzero indices, made as eager makes it,
    with the mask: torch.autograd then saves the mask, as eager's, and a write into it before
    the backward raises as in eager."""
    new = [_read_with_mask(b) for b in trace.bound_symbols]
    if _same(new, trace.bound_symbols):
        return trace
    return trace.derive(new, pass_name="masked_reads_as_eager")


def _read_with_mask(bsym: BoundSymbol) -> BoundSymbol:
    if bsym.sym is ltorch.masked_select_at and len(bsym.args) == 2:
        a, columns = bsym.args
        masks = [mask_of_column(c) if isinstance(c, TensorProxy) else None for c in columns]
        mask = masks[0] if masks else None
        if mask is None or any(m is not mask for m in masks) or len(masks) != mask.ndim:
            return bsym
        return _torch_call(bsym, "torch.masked_select", (a, mask))
    if bsym.sym is not ltorch.getitem or len(bsym.args) != 2:
        return bsym
    a, key = bsym.args
    entries = key if isinstance(key, tuple) else (key,)
    new: list[object] = []
    found = False
    i = 0
    while i < len(entries):
        e = entries[i]
        mask = mask_of_column(e) if isinstance(e, TensorProxy) else None
        if mask is None:
            new.append(e)
            i += 1
            continue
        # (a mask of k dimensions is its k columns, in order)
        columns = entries[i : i + mask.ndim]
        if len(columns) != mask.ndim or any(
            not isinstance(c, TensorProxy) or mask_of_column(c) is not mask for c in columns
        ):
            return bsym
        new.append(mask)
        found = True
        i += mask.ndim
    if not found:
        return bsym
    return _torch_call(bsym, "torch.Tensor.__getitem__", (a, tuple(new)))


def _torch_call(bsym: BoundSymbol, name: str, args: tuple[object, ...]) -> BoundSymbol:
    """``bsym`` as a call of the torch callable ``name`` (same output)."""
    return BoundSymbol(
        ltorch.torch_fallback, (name, *args), {}, bsym.output, location=bsym.location
    )
