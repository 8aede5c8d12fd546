"""Reverse-mode autodiff: grad rules, the forward/backward split and its ``torch.autograd`` runner.

The API the jit facade calls::

    fn, fw_trace, bw_trace = make_differentiable(
        trace,
        compile=lambda t: transform_for_execution(t, executors=...).python_callable(),
        requires_grad=None,  # per trace input; default: the proxies' requires_grad flags
    )
    out = fn(*tensor_inputs)  # same outputs as the trace; loss.backward() fills the inputs' .grad

A program returning an intermediate that other returned outputs are computed from runs as a
chain of such parts (``chain``), each compiled (forward, then backward) with ``compile`` in turn,
the part taking the program's inputs last.

``compile`` turns a trace into a callable (this package does not import executors). The
forward trace takes the trace's inputs and returns ``(flat_outputs, saved)``; the backward trace
takes ``(*saved, *cotangents)`` (one cotangent per floating-point output that depends on an input
requiring grad) and returns one gradient per input (None where there is none).

Grad rules are VJP rules keyed by symbol in ``VJP_RULES`` and registered with
``register_vjp(symbol)``; see ``registry`` for the calling convention. Every differentiable prim
has one; a composite op without a rule is differentiated through its subsymbols, and a few
composites (softmax, log_softmax, embedding) have their own cheaper rule. Ops whose outputs are
integer or boolean (comparisons, argmax) carry no gradient; ``prims.stop_gradient`` stops it.

The compiled backward is not itself differentiable: it reads values the forward computed inside
the program, which autograd never saw. A backward run with ``create_graph=True`` (a gradient
penalty, a Hessian-vector product) therefore runs the forward's torch calls again from the inputs
under autograd and lets torch differentiate them (``runner._differentiable_backward``); a
program that writes into its inputs or draws random numbers cannot run twice and says so. A call whose inputs require grad in a way the trace did not declare is an
error (the facade should key its cache on ``requires_grad``).

The program runs as one autograd node where eager records one per torch call; the checks eager's
backward makes (a second backward through a node that saved a tensor, a saved tensor written in
place, an inference tensor saved) are made from a model of eager's graph (``eager_graph``), and
a backward through one output keeps what the other outputs' gradients read where their eager
graphs survive it (``runner``).

``split_forward_backward(trace)`` is the pure trace transform underneath (a ``ForwardBackward``
of the two traces); ``remat.rematerialize`` recomputes cheap forward values in the backward
instead of saving them, where that saves bytes (a min-cut over the forward graph), and always
recomputes the intermediates of checkpointed regions (``thunder_transforms.checkpoint``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from thunder_ir import Trace, prims, tracectx
from thunder_transforms.autodiff import (  # noqa: F401
    remat,
    rules_distributed,
    rules_elementwise,
    rules_fallback,
    rules_fused,
    rules_higher_order,
    rules_low_precision,
    rules_nn,
    rules_no_gradient,
    rules_reductions,
    rules_shape,
)
from thunder_transforms.autodiff.chain import ChainedFunction, cut_at_returned_intermediates
from thunder_transforms.autodiff.core import (
    NONDIFFERENTIABLE,
    ForwardBackward,
    snapshot_written_inputs,
    split_forward_backward,
    writes_where_gradients_flow,
)
from thunder_transforms.autodiff.eager_autograd import (
    masked_reads_as_eager,
    needs_eager_autograd,
    no_grad_reads_detached,
)
from thunder_transforms.autodiff.eager_graph import eager_graph
from thunder_transforms.autodiff.forward_reads import forward_reads_of_unsaved_inputs
from thunder_transforms.autodiff.registry import VJP_RULES, VJPRule, register_vjp
from thunder_transforms.autodiff.runner import DifferentiableFunction

__all__ = [
    "NONDIFFERENTIABLE",
    "VJP_RULES",
    "DifferentiableFunction",
    "ForwardBackward",
    "VJPRule",
    "backward_run_by_torch",
    "make_differentiable",
    "needs_eager_autograd",
    "register_vjp",
    "remat",
    "snapshot_written_inputs",
    "split_forward_backward",
    "writes_where_gradients_flow",
]


def make_differentiable(
    trace: Trace,
    *,
    compile: Callable[[Trace], Callable[..., Any]],
    requires_grad: Sequence[bool] | None = None,
    rematerialize: bool = True,
    recompute_materialized: bool = True,
) -> tuple[Callable[..., Any], Trace, Trace]:
    """Splits ``trace`` into forward and backward traces, compiles both with ``compile`` and wires
    them to ``torch.autograd``. Returns the callable (it takes the trace's inputs in order) and
    the forward and backward traces. With ``rematerialize``, cheap values are recomputed in the
    backward where that saves memory (min-cut, see ``remat``); checkpointed regions (see
    ``thunder_transforms.checkpoint``) and ops tagged ``OpTag.RECOMPUTE`` (ZeRO-3's parameter
    gathers) are recomputed either way. With ``recompute_materialized=False`` values the backward
    reads from memory (a matmul's operand) are saved, not recomputed (``remat``).

    A trace that writes in place where only torch.autograd can do what eager does
    (``eager_autograd.needs_eager_autograd``: a written input, a tensor autograd may have saved
    written later...) is compiled whole instead, and torch.autograd records its torch calls as
    it records eager ones: the callable is the compiled trace, the backward trace a placeholder
    that says so. Other writes are functionalized (``split_forward_backward``)."""
    if needs_eager_autograd(trace, requires_grad):
        return _recorded_by_torch(trace, compile)
    cut = cut_at_returned_intermediates(trace, requires_grad)
    if cut is not None:  # a returned intermediate other outputs are computed from (``chain``)
        # The first part compiled last: the last traces are those of the part taking the
        # program's inputs.
        second, _fw, _bw = make_differentiable(
            cut.second,
            compile=compile,
            requires_grad=cut.second_requires_grad,
            rematerialize=rematerialize,
            recompute_materialized=recompute_materialized,
        )
        first, fw, bw = make_differentiable(
            cut.first,
            compile=compile,
            requires_grad=cut.first_requires_grad,
            rematerialize=rematerialize,
            recompute_materialized=recompute_materialized,
        )
        return ChainedFunction(cut, first, second), fw, bw
    fb = split_forward_backward(trace, requires_grad=requires_grad)
    eager = eager_graph(trace, requires_grad)
    if rematerialize:
        fb = remat.rematerialize(
            fb, saved_by_eager=eager.saved_inputs, recompute_materialized=recompute_materialized
        )
    else:  # what must be recomputed still is: checkpointed regions, OpTag.RECOMPUTE (gathers)
        fb = remat.rematerialize(fb, method="checkpointed_only")
    fb = forward_reads_of_unsaved_inputs(fb, eager.saved_inputs)
    fb = snapshot_written_inputs(fb)
    fn = DifferentiableFunction(fb, compile(fb.forward), compile(fb.backward), eager)
    return fn, fb.forward, fb.backward


_RUN_BY_TORCH = (
    "The program writes in place where only torch.autograd does what eager does: it "
    "records the forward's torch calls and runs their backward; thunder runs none."
)


def backward_run_by_torch(backward: Trace) -> bool:
    """Whether ``backward`` is the placeholder of a program torch.autograd differentiates
    (``_recorded_by_torch``): its forward returns plain outputs that autograd recorded, nothing
    saved for a backward trace."""
    return backward.docstring == _RUN_BY_TORCH


def _recorded_by_torch(
    trace: Trace, compile: Callable[[Trace], Callable[..., Any]]
) -> tuple[Callable[..., Any], Trace, Trace]:
    """The program runs as compiled, and torch.autograd records its torch calls as it records
    eager ones: views, writes and the checks autograd makes (a leaf written in place, a saved
    tensor overwritten) are then exactly eager's, also for inputs that share memory, which no
    trace can know. Its backward is torch's: the backward trace only says so."""
    trace = no_grad_reads_detached(masked_reads_as_eager(trace))
    fn = compile(trace)
    backward = Trace(
        f"{trace.fn_name}_backward",
        docstring=_RUN_BY_TORCH,
    )
    with tracectx(backward):
        prims.python_return(None)
    compile(backward)
    return fn, trace, backward
