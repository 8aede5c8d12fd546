"""Grad rules of the higher-order symbols (``thunder_ir.higher_order``).

Each rule differentiates the functions of the call with ``joint_vjp``: a sub-trace that runs the
function's forward again from its inputs and then its backward (``split_forward_backward`` of
the function), returning the gradient of every floating-point input. Nothing of a function's
inside is saved by the forward: the backward recomputes it, as torch does for its own
higher-order ops. The rules record:

- ``cond``: ``cond`` of the same predicate over the two branches' vector-Jacobian products;
- ``map``: ``map`` of the function's vector-Jacobian product over the slices and their
  cotangents (the gradients of unmapped inputs summed over the slices);
- ``autograd_function``: the user's backward, inlined;
- ``while_loop`` and ``scan``: ``while_loop_backward`` and ``scan_backward``, which run the loop
  again for every step's carried values and then the body's vector-Jacobian product from the last
  step to the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from thunder_ir import BoundSymbol, NumberProxy, TensorProxy, Trace, prims, tracectx
from thunder_ir import higher_order as ho
from thunder_ir.pytree import tree_flatten
from thunder_transforms.autodiff.core import split_forward_backward
from thunder_transforms.autodiff.registry import GradPairs, register_vjp, zeros_like
from thunder_transforms.dce import dce

__all__ = ["joint_vjp"]


def _float_leaves(value: Any) -> list[TensorProxy]:
    return [x for x in tree_flatten(value)[0] if ho.is_float(x)]


def joint_vjp(sub: Trace, operands: Sequence[Any], *, name: str) -> Trace:
    """A sub-trace ``(*sub.args, *cotangents, *captures) -> gradients``: one cotangent per
    floating-point tensor ``sub`` returns, one gradient per floating-point tensor input (zeros
    where the outputs do not depend on it), recorded into the current trace. ``operands``: the
    values the call passes for ``sub.args``. Its numbers (symbolic sizes, loop-invariant) are
    read as those values, not as fresh inputs: the tensors' shapes name them, and a fresh copy
    would be a second size the prologue cannot check. What the sub-trace reads of the
    enclosing trace (those sizes) are its ``captures``, inputs after the cotangents."""
    wanted = [ho.is_float(a) for a in sub.args]
    # Split in a scratch namespace: inlining below gives everything fresh names of this trace.
    with tracectx(Trace("scratch", names=sub.names)):
        fb = split_forward_backward(sub, requires_grad=wanted)
    leaves = tree_flatten(sub.return_value)[0]
    n_args = len(sub.args)

    def vjp(*values: Any) -> tuple[Any, ...]:
        inputs: list[Any] = [
            o if isinstance(o, NumberProxy) else v for o, v in zip(operands, values[:n_args])
        ]
        cotangents = iter(values[n_args:])
        outputs, saved = ho.inline(fb.forward, inputs)
        given = [next(cotangents) if ho.is_float(x) else None for x in leaves]
        backward_cts = [
            ct if ct is not None else zeros_like(out)
            for out, ct, d in zip(outputs, given, fb.differentiable_outputs)
            if d
        ]
        grads = ho.inline(fb.backward, (*saved, *backward_cts))
        return tuple(
            g if g is not None else zeros_like(a) for a, g, w in zip(inputs, grads, wanted) if w
        )

    prototypes = [*sub.args, *(x.replace(requires_grad=False) for x in _float_leaves(leaves))]
    return dce(ho.record_subtrace(vjp, prototypes, name=name, grad_enabled=True))


def _cotangents(outputs: Sequence[Any], given: Sequence[Any]) -> list[Any]:
    """One cotangent per floating-point output (zeros where none flowed)."""
    tensors = [o for o in outputs if isinstance(o, TensorProxy)]
    by_name = {o.name: ct for o, ct in zip(tensors, given)}
    return [
        by_name.get(o.name) if by_name.get(o.name) is not None else zeros_like(o)
        for o in outputs
        if ho.is_float(o)
    ]


def _pairs(inputs: Sequence[Any], grads: Sequence[Any]) -> GradPairs:
    return list(zip([x for x in inputs if ho.is_float(x)], grads))


@register_vjp(ho.cond)
def _cond_vjp(bsym: BoundSymbol, *cts: Any) -> GradPairs:
    pred, true_branch, false_branch, operands = bsym.args
    cotangents = _cotangents(bsym.flat_outs, cts)
    true_vjp = joint_vjp(true_branch, operands, name=f"{true_branch.fn_name}_vjp")
    false_vjp = joint_vjp(false_branch, operands, name=f"{false_branch.fn_name}_vjp")
    (true_vjp, false_vjp), caps = ho.shared_signature(
        [true_vjp, false_vjp], len(operands) + len(cotangents)
    )
    grads = ho.cond(pred, true_vjp, false_vjp, (*operands, *cotangents, *caps))
    return _pairs(operands, grads)


@register_vjp(ho.tensor_map)
def _map_vjp(bsym: BoundSymbol, *cts: Any) -> GradPairs:
    fn, xs, args = bsym.args
    cotangents = _cotangents(bsym.flat_outs, cts)
    fn_vjp = joint_vjp(fn, (*xs, *args), name=f"{fn.fn_name}_vjp")
    n_xs, n_cts = len(xs), len(cotangents)

    def per_slice(*values: Any) -> Any:  # map passes the mapped slices first
        slices, ct_slices, rest = values[:n_xs], values[n_xs : n_xs + n_cts], values[n_xs + n_cts :]
        return ho.inline(fn_vjp, (*slices, *rest, *ct_slices))

    mapped = (*xs, *cotangents)
    protos = [m.replace(shape=m.shape[1:], requires_grad=False) for m in mapped]
    body = ho.record_subtrace(per_slice, [*protos, *args], name=f"{fn.fn_name}_vjp_slices")
    stacked = ho.tensor_map(body, mapped, (*args, *ho.captures(body, len(protos) + len(args))))
    float_xs = sum(ho.is_float(x) for x in xs)
    grads = [g if i < float_xs else prims.sum(g, (0,)) for i, g in enumerate(stacked)]
    return _pairs((*xs, *args), grads)


@register_vjp(ho.while_loop)
def _while_loop_vjp(bsym: BoundSymbol, *cts: Any) -> GradPairs:
    cond_fn, body_fn, carried, extra = bsym.args
    cotangents = _cotangents(bsym.flat_outs, cts)
    body_vjp = joint_vjp(body_fn, (*carried, *extra), name=f"{body_fn.fn_name}_vjp")
    n_params = len(carried) + len(extra) + len(cotangents)
    grads = ho.while_loop_backward(
        cond_fn,
        body_fn,
        body_vjp,
        carried,
        extra,
        tuple(cotangents),
        ho.captures(body_vjp, n_params),
    )
    return _pairs((*carried, *extra), grads)


@register_vjp(ho.scan)
def _scan_vjp(bsym: BoundSymbol, *cts: Any) -> GradPairs:
    combine, init, xs, extra, reverse = bsym.args
    carry_out, ys = bsym.output
    by_name = dict(zip([o.name for o in bsym.flat_outs if isinstance(o, TensorProxy)], cts))
    carry_cts = _cotangents(carry_out, [by_name.get(o.name) for o in carry_out])
    y_cts = _cotangents(ys, [by_name.get(o.name) for o in ys])
    combine_vjp = joint_vjp(combine, (*init, *xs, *extra), name=f"{combine.fn_name}_vjp")
    n_params = len(init) + len(xs) + len(extra) + len(carry_cts) + len(y_cts)
    grads = ho.scan_backward(
        combine,
        combine_vjp,
        init,
        xs,
        extra,
        reverse,
        tuple(carry_cts),
        tuple(y_cts),
        ho.captures(combine_vjp, n_params),
    )
    return _pairs((*init, *xs, *extra), grads)


@register_vjp(ho.autograd_function)
def _autograd_function_vjp(bsym: BoundSymbol, *cts: Any) -> GradPairs:
    backward, outputs, inputs, saved = bsym.args
    cotangents = [ct if ct is not None else zeros_like(o) for o, ct in zip(outputs, cts)]
    grads = ho.inline(backward, (*cotangents, *saved))
    return list(zip(inputs, grads))
