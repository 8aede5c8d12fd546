"""Running a forward/backward pair under ``torch.autograd``: one ``torch.autograd.Function`` whose
forward runs the compiled forward trace and saves what the backward trace takes."""

from __future__ import annotations

import functools
import os
import sys
import threading
import types
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch._C._functorch import TransformType, is_functorch_wrapped_tensor, unwrap_if_dead
from torch._compile import _disable_dynamo
from torch._functorch.pyfunctorch import retrieve_current_functorch_interpreter

from thunder_ir import BoundSymbol, OpTag, Proxy, TensorProxy, Trace, prims
from thunder_ir import higher_order as ho
from thunder_ir.aliasing import alias_info, writes_in_place, written_inputs
from thunder_ir.pytree import tree_flatten, tree_unflatten
from thunder_transforms.autodiff.core import ForwardBackward
from thunder_transforms.autodiff.eager_graph import EagerGraph, EagerNode
from thunder_transforms.autodiff.functorch_backward import run_below_transforms, under_transforms

__all__ = ["DifferentiableFunction", "hide_from_dynamo"]

_NO_VIEWS: Mapping[int, int] = types.MappingProxyType({})


class DifferentiableFunction:
    """Calls the compiled forward on the trace's inputs; when an input requires grad (and grad
    mode is on) the call is recorded by autograd, and ``backward()`` runs the compiled backward.

    ``forward_trace``/``backward_trace`` are the traces the callables were compiled from.
    """

    def __init__(
        self,
        fb: ForwardBackward,
        forward_fn: Callable[..., Any],
        backward_fn: Callable[..., Any],
        eager: EagerGraph | None = None,
    ) -> None:
        self.forward_trace: Trace = fb.forward
        self.backward_trace: Trace = fb.backward
        self.forward_fn = forward_fn
        self.backward_fn = backward_fn
        self.output_spec = fb.output_spec
        self.differentiable_outputs = fb.differentiable_outputs
        self.requires_grad = fb.requires_grad
        self.mutated_inputs = fb.mutated_inputs
        self.hidden_outputs = fb.hidden_outputs
        self.written_through_views = fb.written_through_views
        self.gets_grad = _inputs_with_gradients(fb.backward, len(fb.requires_grad))
        self.cotangents_read = _cotangents_read(fb.backward, sum(fb.differentiable_outputs))
        self.draws_random = any(b.has_tag(OpTag.RANDOM) for b in fb.forward.bound_symbols)
        self.through_custom_functions = _outputs_through_custom_functions(fb.forward)
        self.no_grad_input_views = fb.no_grad_input_views
        self.in_place_written_inputs = _in_place_written_inputs(fb.forward)
        self.kernel_written_inputs = _kernel_written_inputs(fb.forward) & fb.mutated_inputs
        # The model of eager's graph, for the checks eager's backward makes (eager_graph.py).
        self.eager = eager
        self.eager_saved_inputs = tuple(sorted(eager.saved_inputs)) if eager is not None else ()
        self.eager_read_inputs = eager.read_inputs if eager is not None else frozenset()
        self.eager_saved_outputs = (
            frozenset().union(*(n.saved_outputs for n in eager.nodes))
            if eager is not None
            else frozenset()
        )
        # Flat output index of each cotangent.
        self.cotangent_outputs = tuple(i for i, d in enumerate(fb.differentiable_outputs) if d)
        self.hook_order = _hook_order(eager, self.cotangent_outputs)
        self._saved_needed: dict[frozenset[int], frozenset[int]] = {}
        self._saved_inputs_read: list[frozenset[int]] | None = None

    def saved_needed(self, present: frozenset[int]) -> frozenset[int]:
        """The positions among the saved values that the gradients of the cotangents
        ``present`` (by index) are computed from (the others meet only zero cotangents)."""
        found = self._saved_needed.get(present)
        if found is None:
            found = self._saved_needed[present] = _saved_needed(
                self.backward_trace, len(self.cotangent_outputs), present
            )
        return found

    def saved_inputs_read(self) -> list[frozenset[int]]:
        """Per saved value, the inputs (by index) the forward computes it from."""
        if self._saved_inputs_read is None:
            self._saved_inputs_read = _saved_inputs_read(self.forward_trace)
        return self._saved_inputs_read

    def __call__(self, *args: Any) -> Any:
        if self.in_place_written_inputs and under_transforms():
            _refuse_captured_writes(self.in_place_written_inputs, args)
        wants_grad = False
        for a, declared in zip(args, self.requires_grad):
            if isinstance(a, torch.Tensor) and a.requires_grad:
                if not declared:
                    raise RuntimeError(
                        "an input requires grad that was traced as not requiring it; the "
                        "backward would miss its gradient. Recompile with requires_grad set."
                    )
                wants_grad = True
        if not (wants_grad and torch.is_grad_enabled()):
            outs, _saved = self.forward_fn(*args)
        else:
            self._check_writes(args)
            self._check_inference(args)
            returned_inputs: dict[int, int] = {}
            # An input no gradient flows to (an unused tensor from an earlier call, say) is not
            # linked into the graph: backward must not reach its history (which may be freed).
            # One eager's graph reads is (``vector_norm(x, 0)``: its output requires grad).
            linked = [
                a.detach()
                if i not in self.gets_grad
                and i not in self.mutated_inputs
                and i not in self.eager_read_inputs
                and isinstance(a, torch.Tensor)
                and a.requires_grad
                else a
                for i, a in enumerate(args)
            ]
            call = _Call(returned_inputs)
            outs = _apply(self, call, linked)
            if self.mutated_inputs:
                _versions_after_dirty_bumps(outs, call)
            outs = list(outs)
            for out_index, arg_index in returned_inputs.items():
                # An input returned unchanged is the caller's tensor itself, as in eager (not a
                # new tensor autograd made for the function's output).
                outs[out_index] = args[arg_index]
            for out_index, arg_index in call.input_views.items():
                # A view of an input, made again by autograd from the caller's tensor: a view
                # eager's autograd knows (in-place writes into it, or into its base, rebase the
                # graph as eager's do), where a custom Function's output view refuses them.
                o = outs[out_index]
                with torch.set_grad_enabled(out_index not in self.no_grad_input_views):
                    outs[out_index] = args[arg_index].as_strided(
                        o.size(), o.stride(), o.storage_offset()
                    )
            for out_index, base_index in call.output_views.items():
                # A view of another output (``return y, y[1:]``), made again from it: the caller
                # may write into either, as into eager's.
                o = outs[out_index]
                outs[out_index] = outs[base_index].as_strided(
                    o.size(), o.stride(), o.storage_offset()
                )
            for out_index in call.alias_views:
                # (a view, as eager's, of the detached alias it is returned as)
                o = outs[out_index]
                outs[out_index] = o.as_strided(o.size(), o.stride(), o.storage_offset())
        outs = list(outs)
        if self.hidden_outputs:
            outs = outs[: len(outs) - self.hidden_outputs]
        return tree_unflatten(outs, self.output_spec)

    def _check_inference(self, args: Sequence[Any]) -> None:
        """Eager refuses to save an inference tensor for the backward when the call is recorded."""
        for i in self.eager_saved_inputs:
            a = args[i]
            if isinstance(a, torch.Tensor) and a.is_inference():
                raise RuntimeError(
                    "Inference tensors cannot be saved for backward: input "
                    f"{i} of this thunder.jit program was made under torch.inference_mode() and "
                    "the program's backward needs it, as eager's would. Please do not use "
                    "Tensors created in inference mode in computation tracked by autograd: make a "
                    "clone of it, or use torch.no_grad() instead of torch.inference_mode()."
                )

    def _check_writes(self, args: Sequence[Any]) -> None:
        """Eager refuses to write in place into a leaf that requires grad (or a view of one)."""
        for i in sorted(self.mutated_inputs):
            a = args[i]
            if isinstance(a, torch.Tensor) and a.requires_grad and a.is_leaf:
                view = "a view of " if i in self.written_through_views else ""
                raise RuntimeError(
                    f"{view}a leaf Variable that requires grad is being used in an in-place "
                    "operation."
                )


def _in_place_written_inputs(forward: Trace) -> dict[int, str]:
    """The inputs (by index) a torch in-place op of the program writes (``add_``, ``copy_``,
    through a view too), with that op's name; not those an op's kernel updates (batch norm's
    running statistics, a top-level ``prims.copy_``), which functorch does not see."""
    info = alias_info(forward.bound_symbols)
    roots: dict[str, list[int]] = {}
    for i, a in enumerate(forward.args):
        if isinstance(a, TensorProxy):
            roots.setdefault(info.root(a.name), []).append(i)
    found: dict[int, str] = {}
    for bsym in forward.bound_symbols:
        if OpTag.IN_PLACE in bsym.sym.tags and not bsym.sym.is_prim and writes_in_place(bsym):
            for name in written_inputs(bsym):
                for i in roots.get(info.root(name), ()):
                    found.setdefault(i, bsym.sym.name)
    return found


def _kernel_written_inputs(forward: Trace) -> frozenset[int]:
    """The inputs (by index) only an op's kernel writes (``prims.copy_`` that leaves the
    version counter as it was: batch norm's running statistics), no torch in-place op."""
    info = alias_info(forward.bound_symbols)
    roots: dict[str, list[int]] = {}
    for i, a in enumerate(forward.args):
        if isinstance(a, TensorProxy):
            roots.setdefault(info.root(a.name), []).append(i)
    by_kernel: set[int] = set()
    bumped: set[int] = set()
    for bsym in forward.bound_symbols:
        if not writes_in_place(bsym):
            continue
        kernel = bsym.sym is prims.copy_ and bsym.kwargs.get("bumps_version") is False
        for name in written_inputs(bsym):
            (by_kernel if kernel else bumped).update(roots.get(info.root(name), ()))
    return frozenset(by_kernel - bumped)


def _kernel_written(fn: DifferentiableFunction, j: int, a: torch.Tensor) -> bool:
    """Whether input ``a``, returned as it is, keeps its version counter (no ``mark_dirty``):
    as eager's, whose kernel writes it without bumping the version (it carries no gradient)."""
    return j in fn.kernel_written_inputs and not a.requires_grad


def _refuse_captured_writes(written: dict[int, str], args: Sequence[Any]) -> None:
    """Under a torch.func grad transform, eager refuses an in-place op on a tensor the
    transformed function captured (one that is not its input, so not wrapped at its level)."""
    level = torch._C._functorch.maybe_current_level()
    for i, op in written.items():
        a = args[i]
        if isinstance(a, torch.Tensor) and torch._C._functorch.maybe_get_level(a) != level:
            raise RuntimeError(
                "During a grad (vjp, jvp, grad, etc) transform, the function provided attempted "
                f"to call in-place operation ({op}) that would mutate a captured Tensor. This is "
                "not supported; please rewrite the function being transformed to explicitly "
                "accept the mutated Tensor(s) as inputs."
            )


def _apply(fn: DifferentiableFunction, call: _Call, args: list[Any]) -> Any:
    """``_ThunderFunction.apply``. Outside torch.func's transforms it is the C++ apply itself:
    ``Function.apply``'s Python layer binds default arguments through ``inspect.signature``
    (``forward`` has none) and unwraps dead functorch wrappers, which only a tensor that
    escaped a transform can be; that layer cost more than the rest of a small program's call."""
    if torch._C._are_functorch_transforms_active():
        return _ThunderFunction.apply(fn, call, *args)  # type: ignore[no-untyped-call]
    unwrap = torch._C._functorch.unwrap_if_dead
    return _C_APPLY(fn, call, *[unwrap(a) if isinstance(a, torch.Tensor) else a for a in args])  # type: ignore[no-untyped-call]


def _versions_after_dirty_bumps(outs: Sequence[Any], call: _Call) -> None:
    """autograd bumps the version of each input the program wrote and returned (marked dirty)
    after ``setup_context`` recorded the versions: that write is the program's own, as eager's
    op saves what it writes after writing it, so the backward checks against the versions the
    call leaves (a view sharing the version counter included)."""
    found = next(
        (o.grad_fn for o in outs if isinstance(o, torch.Tensor) and o.grad_fn is not None), None
    )
    if type(found) is not _ThunderFunction._backward_cls:  # type: ignore[attr-defined]
        return
    node: Any = found  # (the ctx of setup_context)
    node.versions = [
        a._version if v is not None else None for a, v in zip(node.inputs, node.versions)
    ]
    node.output_versions = {
        k: (ref, out._version if (out := ref()) is not None else v)
        for k, (ref, v) in node.output_versions.items()
    }
    saved = iter(s for s in call.saved if isinstance(s, torch.Tensor))
    node.saved_versions = [
        None if v is None else _current_version(next(saved), v) for v in node.saved_versions
    ]


def _current_version(t: torch.Tensor, recorded: int) -> int:
    return recorded if t.is_inference() else t._version


def _private_views_detached(
    outs: Sequence[Any],
    args: Sequence[Any],
    call: _Call,
    differentiable: Sequence[bool],
    through_custom_functions: frozenset[int] = frozenset(),
    no_grad_views: Mapping[int, int] = _NO_VIEWS,
) -> list[Any]:
    """The outputs with each view of memory only it can reach (a view of an intermediate,
    ``(x * 2).view(-1)``, or of what an op made inside, ``repeat_interleave``) detached from
    its base. autograd refuses in-place writes into views a custom Function returns, where eager
    allows them on such a view; nothing else sees its base, so no view relation is lost. The
    detached tensor shares the version counter: a write still invalidates saved tensors.
    A view of an input (``a[0]``, written by the program or not, also where other inputs share
    its memory) goes to ``call.input_views``: the caller gets it made again from that input
    (``__call__``); one the program stopped the gradient of (``a.detach()[1:]``) is detached and
    goes to ``call.alias_views``, to be made a view of that detached alias, as eager's; one of
    another output (``y = x.detach(); return y, y[1:]``), or of its memory that no input shares
    (``return y, y[1:]``), is detached and goes to ``call.output_views``, to be made again from
    that output, when both are differentiable (a view remade from ``y.detach()`` would lose its
    gradient) or neither is (a write into either rebases the other, as in eager)."""
    views = [
        i
        for i, o in enumerate(outs)
        if isinstance(o, torch.Tensor) and (o._is_view() or i in no_grad_views)
    ]
    if not views:
        return list(outs)
    outs = list(outs)
    tensors = [t for t in (*outs, *args) if isinstance(t, torch.Tensor)]
    try:
        for i in views:
            o = outs[i]
            storage = o.untyped_storage()
            low = storage.data_ptr()
            if low == 0:  # no memory (meta, empty): nothing to tell apart
                continue
            high = low + storage.nbytes()
            # Another tensor whose first element lies in this memory shares it (a memory-range
            # test: also catches two storages over one buffer, as from_numpy makes).
            # (``o`` itself is among them: a second one is another tensor, or ``o`` returned twice)
            if sum(low <= t.data_ptr() < high for t in tensors) == 1:
                outs[i] = o.detach()
                continue
            if any(o is a for a in args):  # an input (itself a view) returned as it is
                continue
            owners = [
                j
                for j, a in enumerate(args)
                if isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr() == low
            ]
            # The inputs ``o`` is a view of: one the trace says it took under no_grad (it may be
            # a detached view), else those of its base, as autograd tracks views (overlapping
            # views of one tensor passed as several inputs share it: any of them will do).
            source = no_grad_views.get(i)
            if source is not None:
                of = [source] if source in owners else []
            else:
                of = [j for j in owners if _view_base(args[j]) is o._base]
            # Not made again: a view of a custom Function's output (it keeps its backward), nor
            # one the program stopped the gradient of (``x.detach()[1:]``) from an input that
            # requires grad (a view of the caller's would require grad), but a view taken under
            # no_grad (made again under no_grad: it requires grad, as eager's).
            stopped = not (i < len(differentiable) and differentiable[i]) and i not in no_grad_views
            made_from = next(
                (
                    j
                    for j in of
                    if i not in through_custom_functions
                    and not (stopped and args[j].requires_grad)
                    and _kind(args[j]) == _kind(o)
                ),
                None,
            )
            if made_from is not None:
                call.input_views[i] = made_from
                continue
            # The output ``o`` is a view of (``y = x.detach(); return y, y[1:]``), else one
            # sharing only its memory (``return y, y[1:]`` of an intermediate ``y``).
            if owners:
                bases = [k for k, b in enumerate(outs) if k not in views and b is o._base]
            else:
                bases = [
                    k
                    for k, b in enumerate(outs)
                    if k not in views
                    and isinstance(b, torch.Tensor)
                    and b.untyped_storage().data_ptr() == low
                ]
            if (
                len(bases) == 1
                and _remade_from_output(o, outs[bases[0]], i, bases[0], differentiable)
                and _kind(outs[bases[0]]) == _kind(o)
            ):
                # Detached here, made again from its base in ``__call__``.
                outs[i] = o.detach()
                call.output_views[i] = bases[0]
            elif owners and not of and stopped and i not in through_custom_functions:
                # A view of an input's alias made inside (``x.detach()[1:]``): eager's is a view
                # of a detached alias no one else sees, which a write into the input does not
                # rebase; a custom Function's output view would refuse it. Detached here, a view
                # of that detached alias in ``__call__``.
                outs[i] = o.detach()
                call.alias_views.add(i)
    except (RuntimeError, NotImplementedError):  # a tensor without storage (sparse, a subclass)
        return list(outs)
    return outs


def _remade_from_output(
    o: torch.Tensor, b: torch.Tensor, i: int, k: int, differentiable: Sequence[bool]
) -> bool:
    """Whether output ``o`` (index ``i``), sharing only output ``b``'s memory (index ``k``), is
    made again from ``b``: where both carry gradients, or neither and ``o`` is a view of ``b``
    itself (not of ``b.detach()``, which a write into ``b`` does not rebase)."""
    d_o, d_b = (j < len(differentiable) and differentiable[j] for j in (i, k))
    return (d_o and d_b) or (not d_o and not d_b and o._base is b)


def _kind(t: torch.Tensor) -> tuple[Any, ...]:
    """What a view made again by ``as_strided`` keeps of the tensor it is made from."""
    return (t.dtype, t.device, t.layout, t.is_conj(), t.is_neg())


def _view_base(t: torch.Tensor) -> torch.Tensor:
    """The tensor autograd tracks ``t``'s views against: its base, or ``t`` itself."""
    base = t._base
    return t if base is None else base


def _cotangents_read(backward: Trace, n_cotangents: int) -> list[frozenset[int]] | None:
    """Per gradient the backward trace returns, the cotangents (the last ``n_cotangents``
    arguments, by index) it is computed from; None where the trace's form is not known."""
    ret = backward.bound_symbols[-1] if backward.bound_symbols else None
    grads = ret.args[0] if ret is not None and ret.args else None
    if not isinstance(grads, (tuple, list)) or n_cotangents > len(backward.args):
        return None
    first = len(backward.args) - n_cotangents
    reads: dict[str, frozenset[int]] = {}
    for k, a in enumerate(backward.args[first:]):
        if isinstance(a, Proxy):
            reads[a.name] = frozenset((k,))
    for bsym in backward.bound_symbols[:-1]:
        found = frozenset().union(*(reads.get(p.name, frozenset()) for p in bsym.flat_proxy_args))
        for out in bsym.flat_proxy_outs:
            reads[out.name] = found
    return [reads.get(g.name, frozenset()) if isinstance(g, Proxy) else frozenset() for g in grads]


def _outputs_through_custom_functions(forward: Trace) -> frozenset[int]:
    """The flat outputs of the forward trace computed from a custom ``torch.autograd.Function``'s
    output: one that aliases an input (``Copy.apply(x)``, ``GradReverse.apply(x)[1:]``) must
    not be handed back as, or made again from, the caller's tensor, which would drop the user's
    backward."""
    ret = forward.bound_symbols[-1] if forward.bound_symbols else None
    if ret is None or not ret.args or not isinstance(ret.args[0], (tuple, list)) or not ret.args[0]:
        return frozenset()

    def custom(bsym: BoundSymbol) -> bool:
        return bsym.sym is ho.autograd_function or any(custom(s) for s in bsym.subsymbols)

    derived: set[str] = set()
    for bsym in forward.bound_symbols[:-1]:
        if custom(bsym) or any(p.name in derived for p in bsym.flat_proxy_args):
            derived.update(p.name for p in bsym.flat_proxy_outs)
    outs, _spec = tree_flatten(ret.args[0][0])
    return frozenset(i for i, o in enumerate(outs) if isinstance(o, Proxy) and o.name in derived)


def _inputs_with_gradients(backward: Trace, n: int) -> frozenset[int]:
    """Which inputs the backward trace can return a gradient for (the others return None)."""
    ret = backward.bound_symbols[-1] if backward.bound_symbols else None
    grads = ret.args[0] if ret is not None and ret.args else None
    if not isinstance(grads, (tuple, list)) or len(grads) != n:
        return frozenset(range(n))  # unknown: all of them
    return frozenset(i for i, g in enumerate(grads) if g is not None)


class _Call:
    """What one ``_ThunderFunction.apply`` passes from ``forward`` to ``setup_context``: the
    outputs that are inputs returned unchanged, and what the backward trace takes."""

    __slots__ = (
        "alias_views",
        "aliased_inputs",
        "input_views",
        "output_views",
        "returned_inputs",
        "saved",
    )

    def __init__(self, returned_inputs: dict[int, int]) -> None:
        self.returned_inputs = returned_inputs
        self.aliased_inputs: set[int] = set()  # the inputs returned as they are (by index)
        self.input_views: dict[int, int] = {}  # output index: the input it is a view of
        self.output_views: dict[int, int] = {}  # output index: the output it is a view of
        self.alias_views: set[int] = set()  # outputs that are views of an input's detached alias
        self.saved: list[Any] = []


class _ThunderFunction(torch.autograd.Function):
    # forward without ctx plus setup_context: the form torch.func's grad/vjp transforms accept
    # (their forward runs on the unwrapped tensors, then setup_context sees the wrapped ones).
    @staticmethod
    def forward(fn: DifferentiableFunction, call: _Call, *args: Any) -> Any:
        outs, saved = fn.forward_fn(*args)
        for i, o in enumerate(outs):
            for j, a in enumerate(args):
                if (
                    o is a
                    and isinstance(o, torch.Tensor)
                    and (j not in fn.mutated_inputs or _kernel_written(fn, j, a))
                ):
                    call.aliased_inputs.add(j)
                    # (one a custom Function returned, ``Copy.apply(x)``, gets its backward)
                    if i not in fn.through_custom_functions:
                        call.returned_inputs[i] = j
                    break
        call.saved = list(saved)
        return tuple(
            _private_views_detached(
                outs,
                args,
                call,
                fn.differentiable_outputs,
                fn.through_custom_functions,
                fn.no_grad_input_views,
            )
        )

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        fn: DifferentiableFunction = inputs[0]
        call: _Call = inputs[1]
        # Under torch.func.grad it runs twice: for the unwrapped call, then for the wrapped one.
        args, outs, saved = inputs[2:], output, call.saved
        # An inference tensor cannot be saved; the backward may read one where eager's saves a
        # tensor computed from it (a KV cache made under inference mode, then ``cat``): its copy
        # holds the same values, as nothing outside inference mode can write into it.
        # An input returned as it is cannot be saved with setup_context: a detached alias can
        # (same memory and version counter).
        returned = {id(args[j]) for j in call.aliased_inputs}
        tensors = []
        saved_layout: list[Any] = []
        for s in saved:
            if not isinstance(s, torch.Tensor):
                saved_layout.append((s,))
                continue
            saved_layout.append(None)
            if s.is_inference():
                s = s.clone()
            elif returned and id(s) in returned:
                s = s.detach()
            tensors.append(s)
        ctx.save_for_backward(*tensors)
        # Versions of what was saved: a write eager's graph would not see is told from one the
        # backward reads (_saved_unchecked).
        versions = iter([t._version for t in tensors])
        ctx.saved_versions = [next(versions) if s is None else None for s in saved_layout]
        # The outputs eager's graph saves (an ``exp`` returned): a weak reference (the output
        # holds this node) and the version to check in the backward.
        ctx.output_versions = {
            k: (weakref.ref(outs[k]), outs[k]._version)
            for k in fn.eager_saved_outputs
            if k < len(outs) and isinstance(outs[k], torch.Tensor)
        }
        ctx.freed_nodes = set()
        if fn.hook_order is not None:  # (for _register_hook_dict)
            ctx.output_refs = {
                k: weakref.ref(outs[k])
                for k in fn.hook_order
                if k < len(outs) and isinstance(outs[k], torch.Tensor)
            }
        # An output the caller's graph does not use gets None, not zeros: the inputs reached only
        # through such outputs get None too, as eager's autograd never reaches them.
        ctx.set_materialize_grads(False)
        ctx.cotangent_shapes = [
            (o.shape, o.dtype, o.device) if isinstance(o, torch.Tensor) else None
            for o, d in zip(outs, fn.differentiable_outputs)
            if d
        ]
        ctx.saved_layout = saved_layout
        ctx.fn = fn
        # For a backward that is itself differentiated (create_graph=True): the inputs, which
        # the forward is run again from under autograd (_differentiable_backward).
        ctx.inputs = args
        # (an inference tensor has no version counter; nothing outside inference mode writes it)
        ctx.versions = [
            a._version if isinstance(a, torch.Tensor) and not a.is_inference() else None
            for a in args
        ]
        frozen = [
            o
            for o, d in zip(outs, fn.differentiable_outputs)
            if isinstance(o, torch.Tensor) and not d
        ]
        if frozen:
            ctx.mark_non_differentiable(*frozen)
        if fn.mutated_inputs:
            # Inputs written in place and returned: autograd must know they changed.
            written = [args[i] for i in fn.mutated_inputs if i not in call.aliased_inputs]
            dirty = [o for o in outs if any(o is w for w in written)]
            if dirty:
                ctx.mark_dirty(*dirty)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        if torch.compiler.is_compiling() and not getattr(_OUTSIDE_DYNAMO, "active", False):
            # compiled autograd tracing this backward (dynamo takes functorch's interpreter
            # stack for active): it runs as it is, a graph break in the compiled backward
            return _backward_outside_dynamo(ctx, *grads)
        if under_transforms():
            if torch.is_grad_enabled() and _differentiated_at_grad_level():
                return (None, None, *_grads_at_grad_level(ctx, grads))
            # torch.func: below the transforms, differentiable there as eager's (_backward)
            return _ThunderFunction._backward(ctx, grads)
        _as_eager_graph(ctx, grads)
        if torch.is_grad_enabled():
            again = _differentiable_backward(ctx, grads)
            if again is not None:
                return (None, None, *again)
            # Not from the inputs (a fusion region outside autograd; torch.func's vjp function of
            # a program with effects, create_graph by default): the compiled backward, whose
            # results raise if differentiated, never a silently constant gradient.
            with torch.no_grad():
                first = _ThunderFunction._backward(ctx, grads)
            plain = [unwrap_if_dead(a) if isinstance(a, torch.Tensor) else a for a in ctx.inputs]
            return _not_differentiable(first) if _any_requires_grad(*plain, *grads) else first
        with torch.no_grad():
            return _ThunderFunction._backward(ctx, grads)

    @staticmethod
    def _backward(ctx: Any, grads: Sequence[Any]) -> Any:
        fn: DifferentiableFunction = ctx.fn
        cts = [g for g, d in zip(grads, fn.differentiable_outputs) if d]
        missing = {k for k, g in enumerate(cts) if g is None}
        present = frozenset(k for k, g in enumerate(cts) if g is not None)
        try:
            tensors = iter(ctx.saved_tensors)
        except RuntimeError as e:
            kept = getattr(ctx, "kept_saved", None)
            if _BACKWARD_TWICE in str(e) and kept is not None:
                # Freed by an earlier backward through another output; kept where needed.
                saved = _saved_unchecked(ctx, present, kept)
            elif _BACKWARD_TWICE in str(e):
                saved = _saved_again(ctx, present)
            elif _MODIFIED in str(e) or _VIEW_MODIFIED in str(e):
                raw = iter(t.data for t in ctx._raw_saved_tensors)
                at_hand = {j: next(raw) for j, s in enumerate(ctx.saved_layout) if s is None}
                saved = _saved_unchecked(ctx, present, at_hand)
            else:
                raise
        else:
            saved = [next(tensors) if s is None else s[0] for s in ctx.saved_layout]
        _keep_for_other_outputs(ctx, saved)
        for k in missing:
            shape, dtype, device = ctx.cotangent_shapes[k]
            cts[k] = torch.zeros(shape, dtype=dtype, device=device)
        if under_transforms():  # torch.func (grad, vjp, jacrev): functorch's tensors
            below = functools.partial(_input_grads_below_transforms, ctx, len(saved))
            input_grads: Sequence[Any] = run_below_transforms(below, [*saved, *cts, *ctx.inputs])
        else:
            input_grads = fn.backward_fn(*saved, *cts)
        if missing and fn.cotangents_read is not None:
            input_grads = [
                None if read and read <= missing else g
                for g, read in zip(input_grads, fn.cotangents_read)
            ]
        return (None, None, *input_grads)


def _check_inputs_unchanged(ctx: Any) -> None:
    for i, (a, v) in enumerate(zip(ctx.inputs, ctx.versions)):
        if v is not None and a._version != v:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: input {i} of a thunder.jit program is at version "
                f"{a._version}; expected version {v} instead"
            )


_BACKWARD_TWICE = "Trying to backward through the graph a second time"
_MODIFIED = "has been modified by an inplace operation"
# autograd's refusal of a saved view (made under the forward's no_grad) whose base was written
# since: a saved value written in place, as _MODIFIED
_VIEW_MODIFIED = "A view was created in no_grad mode and its base or another view"


def _backward_twice() -> RuntimeError:
    return RuntimeError(
        f"{_BACKWARD_TWICE} (or directly access saved tensors after they have already been "
        "freed). Saved intermediate values of the graph are freed when you call .backward() or "
        "autograd.grad(). Specify retain_graph=True if you need to backward through the graph a "
        "second time or if you need to access saved tensors after calling backward."
    )


def _modified(what: str, version: int, expected: int) -> RuntimeError:
    return RuntimeError(
        f"one of the variables needed for gradient computation {_MODIFIED}: {what} of a "
        f"thunder.jit program is at version {version}; expected version {expected} instead."
    )


def _as_eager_graph(ctx: Any, grads: Sequence[Any]) -> None:
    """Raises where eager's backward would (see ``eager_graph``): through a node an earlier
    backward freed that saved a tensor, or one whose saved input or output was since written in
    place; in the order eager's engine visits them, the last op first. Then marks those nodes
    freed unless the graph is retained."""
    fn: DifferentiableFunction = ctx.fn
    graph = fn.eager
    if graph is None:
        return
    outputs = frozenset(
        i for i, (g, d) in enumerate(zip(grads, fn.differentiable_outputs)) if d and g is not None
    )
    nodes = graph.nodes_of(outputs)
    freed: set[int] = ctx.freed_nodes
    if not freed:  # the first backward: one check per saved input and output
        _check_saved_versions(ctx, graph.saved_by(outputs))
    for n in nodes if freed else ():
        node = graph.nodes[n]
        if node.saves and n in freed:
            raise _backward_twice()
        _check_saved_versions(ctx, node)
    if not torch._C._autograd._get_current_graph_task_keep_graph():
        freed.update(nodes)


def _check_saved_versions(ctx: Any, node: EagerNode) -> None:
    if node.overwritten is not None:  # by the program itself, on every call
        raise RuntimeError(
            f"one of the variables needed for gradient computation {_MODIFIED}: {node.overwritten}."
        )
    for i in node.saved_inputs:
        expected = ctx.versions[i]
        if expected is not None and ctx.inputs[i]._version != expected:
            raise _modified(f"input {i}", ctx.inputs[i]._version, expected)
    for k in node.saved_outputs:
        ref, expected = ctx.output_versions.get(k, (None, None))
        out = ref() if ref is not None else None
        if out is not None and out._version != expected:
            raise _modified(f"output {k}", out._version, expected)


def _keep_for_other_outputs(ctx: Any, saved: Sequence[Any]) -> None:
    """Before a backward that does not retain the graph frees the saved values, keeps those the
    gradients of the other outputs read (detached: no reference to this node) where eager's
    graph of such an output holds no freed node that saved a tensor (``a, b = f(x)``,
    ``a.backward()``, ``b.backward()``, outputs whose eager graphs share none): eager's later
    backward through it reads what its nodes saved, not values computed again from inputs an
    optimizer step may have changed. Dropped once no output is left so."""
    fn: DifferentiableFunction = ctx.fn
    graph = fn.eager
    if (
        graph is None
        or under_transforms()
        or torch._C._autograd._get_current_graph_task_keep_graph()
    ):
        return
    freed: set[int] = ctx.freed_nodes
    live = frozenset(
        c
        for c, k in enumerate(fn.cotangent_outputs)
        if not any(graph.nodes[n].saves and n in freed for n in graph.nodes_of(frozenset((k,))))
    )
    if not live:
        ctx.kept_saved = None
    else:  # (what the outputs left need: fewer after each backward)
        needed = fn.saved_needed(live)
        ctx.kept_saved = {
            j: saved[j].detach() for j in needed if isinstance(saved[j], torch.Tensor)
        }
        ctx.kept_shapes = {
            j: (t.shape, t.dtype, t.device)
            for j, t in enumerate(saved)
            if j not in needed and isinstance(t, torch.Tensor)
        }


def _saved_unchecked(ctx: Any, present: frozenset[int], tensors: dict[int, Any]) -> list[Any]:
    """The saved values where autograd refuses them because one was written in place, or freed
    them, and eager's graph raises for neither (``_as_eager_graph`` passed): an input an
    optimizer step changed that only another output's gradient reads (``a, b = f(x)``,
    ``a.backward()``, ``opt.step()``, ``b.backward()``). ``tensors``: the saved tensors at hand
    (unchecked), by position. Only the values this backward's cotangents need must be as saved
    (the others meet only zero cotangents): one not at hand, or written in place (an output the
    caller wrote, ``y = x / x.norm(); y.mul_(2)``, where eager saved the operands), is computed
    again with the rest (``_saved_again``) where the inputs it is computed from are unchanged;
    else it raises."""
    fn: DifferentiableFunction = ctx.fn
    needed = fn.saved_needed(present)
    layout = ctx.saved_layout
    if any(j not in tensors and layout[j] is None for j in needed):
        return _saved_again(ctx, present)
    for j in needed:
        t = tensors.get(j)
        expected = ctx.saved_versions[j]
        if t is not None and t._version != expected:
            if _computable_again(ctx, needed):
                return _saved_again(ctx, present)
            raise _modified(
                "a tensor the compiled backward reads, where eager's graph saves another "
                f"(thunder.jit cannot compute eager's gradient): saved value {j}",
                t._version,
                expected,
            )
    if any(j not in tensors for j, s in enumerate(layout) if s is None):
        tensors = {**_stand_ins(ctx), **tensors}
    return [tensors[j] if s is None else s[0] for j, s in enumerate(layout)]


def _stand_ins(ctx: Any) -> dict[int, Any]:
    """Values for the saved ones only zero cotangents meet, which were not kept: the forward's
    again (real values keep those products zero), or ones where it cannot run again (finite and
    nonzero, also where the backward divides by them)."""
    fn: DifferentiableFunction = ctx.fn
    if not (fn.mutated_inputs or fn.draws_random):
        with torch.no_grad():
            _outs, again = fn.forward_fn(*ctx.inputs)
        return dict(enumerate(again))
    shapes = getattr(ctx, "kept_shapes", {})
    return {
        j: torch.ones(shape, dtype=dtype, device=device)
        for j, (shape, dtype, device) in shapes.items()
    }


def _computable_again(ctx: Any, needed: frozenset[int]) -> bool:
    """Whether the forward run again gives the saved values ``needed``: it has no effects, and
    the inputs they are computed from are unchanged since it ran."""
    fn: DifferentiableFunction = ctx.fn
    if fn.mutated_inputs or fn.draws_random:
        return False
    reads = fn.saved_inputs_read()
    return not any(
        (expected := ctx.versions[i]) is not None and ctx.inputs[i]._version != expected
        for j in needed
        for i in (reads[j] if j < len(reads) else range(len(ctx.inputs)))
    )


def _saved_again(ctx: Any, present: frozenset[int]) -> list[Any]:
    """What the forward saved for the backward, computed again from the inputs after an earlier
    backward freed it: a program without effects gives the same values where the inputs the
    needed ones are computed from are unchanged. Otherwise no gradient this backward could
    give is eager's, and it says so."""
    fn: DifferentiableFunction = ctx.fn
    if fn.mutated_inputs or fn.draws_random:
        effect = "writes into its inputs" if fn.mutated_inputs else "draws random numbers"
        raise RuntimeError(
            f"{_BACKWARD_TWICE} through another output of a thunder.jit program: its saved "
            f"values were freed by an earlier backward, and the program {effect}, so they "
            "cannot be computed again. Pass retain_graph=True to the earlier backward."
        )
    reads = fn.saved_inputs_read()
    for j in fn.saved_needed(present):
        for i in reads[j] if j < len(reads) else range(len(ctx.inputs)):
            expected = ctx.versions[i]
            if expected is not None and ctx.inputs[i]._version != expected:
                raise RuntimeError(
                    f"{_BACKWARD_TWICE} through another output of a thunder.jit program: its "
                    "saved values were freed by an earlier backward and would be computed again "
                    f"from input {i}, which was since modified by an inplace operation (at "
                    f"version {ctx.inputs[i]._version}; expected version {expected}). Pass "
                    "retain_graph=True to the earlier backward."
                )
    with torch.no_grad():
        _outs, saved = fn.forward_fn(*ctx.inputs)
    return list(saved)


def _saved_needed(backward: Trace, n_cotangents: int, present: frozenset[int]) -> frozenset[int]:
    """The positions among ``backward``'s saved arguments that a value computed from the
    cotangents ``present`` reads (the backward is linear in the cotangents: a value read from
    missing ones only is zero, and what it was computed with does not matter)."""
    args = backward.args
    first = len(args) - n_cotangents
    reads: dict[str, frozenset[int]] = {}
    for k, a in enumerate(args[first:]):
        if isinstance(a, Proxy):
            reads[a.name] = frozenset((k,))
    body = backward.bound_symbols[:-1]
    for bsym in body:
        found = frozenset().union(*(reads.get(p.name, frozenset()) for p in bsym.flat_proxy_args))
        for out in bsym.flat_proxy_outs:
            reads[out.name] = found

    def zero(name: str) -> bool:
        r = reads.get(name, frozenset())
        return bool(r) and not (r & present)

    ret = backward.bound_symbols[-1] if backward.bound_symbols else None
    needed = {p.name for p in (ret.flat_proxy_args if ret is not None else ()) if not zero(p.name)}
    for bsym in reversed(body):
        if any(o.name in needed for o in bsym.flat_proxy_outs):
            needed.update(p.name for p in bsym.flat_proxy_args if not zero(p.name))
    return frozenset(
        j for j, a in enumerate(args[:first]) if isinstance(a, Proxy) and a.name in needed
    )


def _saved_inputs_read(forward: Trace) -> list[frozenset[int]]:
    """Per value the forward saves, the inputs (by index) it is computed from."""
    reads: dict[str, frozenset[int]] = {}
    for i, a in enumerate(forward.args):
        if isinstance(a, Proxy):
            reads[a.name] = frozenset((i,))
    for bsym in forward.bound_symbols[:-1]:
        found = frozenset().union(*(reads.get(p.name, frozenset()) for p in bsym.flat_proxy_args))
        for out in bsym.flat_proxy_outs:
            reads[out.name] = reads.get(out.name, frozenset()) | found
    ret = forward.bound_symbols[-1] if forward.bound_symbols else None
    if ret is None or not ret.args or not isinstance(ret.args[0], (tuple, list)):
        return []
    saved = ret.args[0][1] if len(ret.args[0]) > 1 else ()
    return [reads.get(s.name, frozenset()) if isinstance(s, Proxy) else frozenset() for s in saved]


def _not_differentiable(results: Sequence[Any]) -> tuple[Any, ...]:
    """``results`` with each tensor behind a node that raises when it is differentiated."""
    tensors = [i for i, r in enumerate(results) if isinstance(r, torch.Tensor)]
    if not tensors:
        return tuple(results)
    error = torch._C._functions.DelayedError(
        b"thunder.jit: differentiating the gradient of this compiled program "
        b"(create_graph=True) is not supported here: its forward could not run again under "
        b"autograd (a torch.func transform, a fusion region); compute the higher derivative "
        b"outside thunder.jit",
        len(tensors),
    )
    # (as ``once_differentiable``: the node exists only where an input requires grad)
    wrapped = error(*(_requiring_grad(results[i]) for i in tensors))
    wrapped = (wrapped,) if isinstance(wrapped, torch.Tensor) else wrapped
    out = list(results)
    for i, w in zip(tensors, wrapped, strict=True):
        out[i] = w
    return tuple(out)


def _any_requires_grad(*values: Any) -> bool:
    return any(isinstance(t, torch.Tensor) and t.requires_grad for t in values)


def _requiring_grad(t: torch.Tensor) -> torch.Tensor:
    if t.requires_grad or not (t.is_floating_point() or t.is_complex()):
        return t
    return t.detach().requires_grad_()


def _differentiable_backward(ctx: Any, grads: Sequence[Any]) -> list[Any] | None:
    """The input gradients as tensors autograd can differentiate again (``create_graph=True``:
    a gradient penalty, a Hessian-vector product). The compiled backward reads values the forward
    computed inside the program, which autograd never saw: its result would be constant in them
    and the second derivative wrong. So the forward's torch calls run again from the inputs under
    autograd, and torch's autograd differentiates them, with ``create_graph`` (the values are
    the first run's; only a program without effects can run twice). None where the forward does
    not run under autograd from the inputs."""
    fn: DifferentiableFunction = ctx.fn
    # torch.func's vjp function, called after its level ended: the inputs are its dead wrappers
    # (whose torch calls run on the tensors they wrap, which autograd records, not the wrappers).
    after_transform = any(
        isinstance(a, torch.Tensor) and is_functorch_wrapped_tensor(a) for a in ctx.inputs
    )
    if fn.mutated_inputs or fn.draws_random:
        if after_transform:  # (vjp's default create_graph, which a first derivative needs not)
            return None
        effect = "writes into its inputs" if fn.mutated_inputs else "draws random numbers"
        raise RuntimeError(
            f"thunder.jit: differentiating the gradient of a compiled program that {effect} "
            "(create_graph=True) is not supported: its forward would run again. Compute the "
            "gradient penalty or higher derivative outside thunder.jit (eager), or call the "
            "program in eval mode / without dropout"
        )
    _check_inputs_unchanged(ctx)
    args = [unwrap_if_dead(a) if isinstance(a, torch.Tensor) else a for a in ctx.inputs]
    return _grads_from_forward_again(ctx, args, grads)


def _grads_from_forward_again(
    ctx: Any, args: Sequence[Any], grads: Sequence[Any]
) -> list[Any] | None:
    """The gradients of the inputs the caller's graph wants (``ctx.needs_input_grad``),
    differentiable in whatever requires grad among ``args`` and ``grads`` (plain tensors): the
    forward run again under autograd, then torch's autograd. None where the forward does not
    run under autograd."""
    fn: DifferentiableFunction = ctx.fn
    wanted = [
        i
        for i, a in enumerate(args)
        if i in fn.gets_grad and ctx.needs_input_grad[2 + i] and isinstance(a, torch.Tensor)
    ]
    # Differentiable only where something the caller has requires grad: the leaves made below
    # are no part of its graphs (torch.func's vjp function of constants returns plain tensors).
    differentiable = _any_requires_grad(*args, *grads)
    # An input the caller's graph wants but autograd does not track here (one torch.func
    # wrapped, whose plain tensor needs no grad): a leaf of its own, no part of outer graphs.
    leaves = {
        i: args[i] if args[i].requires_grad else args[i].detach().requires_grad_() for i in wanted
    }
    args = [leaves.get(i, a) for i, a in enumerate(args)]
    result: list[Any] = [None] * len(args)
    with torch.enable_grad():
        outs, _saved = fn.forward_fn(*args)
        pairs = [
            (o, g)
            for o, g, d in zip(outs, grads, fn.differentiable_outputs)
            if d and g is not None and isinstance(o, torch.Tensor)
        ]
        if not pairs or not wanted:
            return result
        if any(not o.requires_grad for o, _g in pairs):
            return None
        found = torch.autograd.grad(
            [o for o, _g in pairs],
            [leaves[i] for i in wanted],
            [g for _o, g in pairs],
            create_graph=differentiable,
            allow_unused=True,
        )
    for i, g in zip(wanted, found, strict=True):
        result[i] = g
    return result


def _differentiated_at_grad_level() -> bool:
    """Whether the gradient a backward computes under a torch.func grad level may be
    differentiated again at that level: a ``torch.autograd.grad(..., create_graph=True)`` inside
    the function ``torch.func.grad`` (or ``vjp``, ``jacrev``) transforms, whose result the
    transform differentiates (a PINN residual, a gradient penalty). torch.func's own gradient
    call (``_autograd_grad``) is differentiated at no level it can see; where the caller cannot
    be seen (a backward on autograd's device threads) it may be."""
    if retrieve_current_functorch_interpreter().key() != TransformType.Grad:
        return False
    frame: types.FrameType | None = sys._getframe(2)  # above backward: autograd, then its caller
    while frame is not None and frame.f_code.co_filename.startswith(_AUTOGRAD_ENTRY):
        frame = frame.f_back
    if frame is None:
        return True
    code = frame.f_code
    return not (code.co_name == "_autograd_grad" and code.co_filename == _FUNCTORCH_TRANSFORMS)


def _grads_at_grad_level(ctx: Any, grads: Sequence[Any]) -> list[Any]:
    """The input gradients differentiable at the active grad level: the gradient computed below
    the level (the compiled backward) is constant there, and its derivative would be silently
    zero. So the forward runs again at the level, under autograd, and torch differentiates it;
    a program that cannot run twice, or whose forward runs outside autograd, raises."""
    fn: DifferentiableFunction = ctx.fn
    if fn.mutated_inputs or fn.draws_random:
        effect = "writes into its inputs" if fn.mutated_inputs else "draws random numbers"
    else:
        _check_inputs_unchanged(ctx)
        again = _grads_from_forward_again(ctx, ctx.inputs, grads)
        if again is not None:
            return again
        effect = "runs outside autograd (a fusion region)"
    raise RuntimeError(
        f"thunder.jit: differentiating, under a torch.func transform, the gradient of a compiled "
        f"program that {effect} (torch.autograd.grad(..., create_graph=True) inside the "
        "transformed function) is not supported. Compute that gradient outside thunder.jit "
        "(eager), or call the program without dropout / in-place writes"
    )


_TORCH_DIR = os.path.dirname(torch.__file__)
_FUNCTORCH_TRANSFORMS = os.path.join(_TORCH_DIR, "_functorch", "eager_transforms.py")
# torch.autograd.grad / Tensor.backward, the engine's entry and functorch's call of a backward.
_AUTOGRAD_ENTRY = (
    os.path.join(_TORCH_DIR, "autograd") + os.sep,
    os.path.join(_TORCH_DIR, "_tensor.py"),
    os.path.join(_TORCH_DIR, "_functorch", "autograd_function.py"),
)


def _input_grads_below_transforms(ctx: Any, n_saved: int, *flat: Any) -> Sequence[Any]:
    """Under torch.func's transforms, on plain tensors (``run_below_transforms``): the saved
    values, cotangents and inputs. Eager's gradient is differentiable below the transform (a
    gradient penalty on ``grad(D)(x)`` reaches D's parameters): so is this one where anything
    here requires grad, from the forward run again; else the compiled backward."""
    fn: DifferentiableFunction = ctx.fn
    n_inputs = len(ctx.inputs)
    saved, cts = flat[:n_saved], flat[n_saved : len(flat) - n_inputs]
    args = [unwrap_if_dead(a) if isinstance(a, torch.Tensor) else a for a in flat[-n_inputs:]]
    tracked = torch.is_grad_enabled() and _any_requires_grad(*args, *cts)
    if tracked and not (fn.mutated_inputs or fn.draws_random):
        again = _grads_from_forward_again(ctx, args, cts)
        if again is not None:
            return again
    with torch.no_grad():
        first = fn.backward_fn(*saved, *cts)
    # (a forward with effects, or one outside autograd: raises if differentiated)
    return _not_differentiable(first) if tracked else first


def _skipped_by_dynamo(code: Any) -> None:
    """torch.compile's frame evaluator skips ``code``'s frames and the frames they call, as for
    ``torch._dynamo.disable`` (without importing dynamo, about a second). A split call's regions
    run from code dynamo evaluates: a ``torch.autograd.grad`` there runs thunder's backward,
    which dynamo would try (and fail) to compile, printing its traceback."""
    eval_frame = torch._C._dynamo.eval_frame
    skip = eval_frame._FrameAction.SKIP
    eval_frame.set_code_exec_strategy(code, eval_frame._FrameExecStrategy(skip, skip))


def hide_from_dynamo(function: Any, why: str) -> None:
    """torch.compile runs ``function`` as it is, as for ``torch._dynamo.skip`` but without a
    wrapper on every call: its frames are skipped (``_skipped_by_dynamo``) and dynamo's inliner
    stops at a call of it (the attributes it reads), a graph break that says ``why``."""
    _skipped_by_dynamo(function.__code__)
    function._torchdynamo_disable = True
    function._torchdynamo_disable_msg = why


_skipped_by_dynamo(_ThunderFunction.backward.__code__)
# Set while ``_backward_outside_dynamo`` runs the backward: ``is_compiling()`` may still answer
# True there, which would recurse. (The body stays in ``backward``: a grad-level check counts
# the frames above it.)
_OUTSIDE_DYNAMO = threading.local()


@_disable_dynamo
def _backward_outside_dynamo(ctx: Any, *grads: Any) -> Any:
    was = getattr(_OUTSIDE_DYNAMO, "active", False)
    _OUTSIDE_DYNAMO.active = True
    try:
        return _ThunderFunction.backward(ctx, *grads)
    finally:
        _OUTSIDE_DYNAMO.active = was


# The C++ ``apply`` of ``torch.autograd.Function``, bound to ``_ThunderFunction`` (see ``_apply``).
_C_APPLY = super(torch.autograd.Function, _ThunderFunction).apply


class _OneOutputHooks(OrderedDict):  # type: ignore[type-arg]
    """The ``register_hook`` hooks of one output of a program. Its outputs share one autograd
    node, which runs when any of them gets a gradient, calling every output's hooks, with None
    for the outputs the loss does not use; eager's outputs have a node each, and a hook of an
    unused one is never called. So a hook is skipped when its gradient is missing, but torch's
    own hooks (``register_multi_grad_hook``'s), which expect None from nodes with several
    outputs."""

    def __setitem__(self, key: Any, hook: Any) -> None:
        if not str(getattr(hook, "__module__", "")).startswith("torch."):
            hook = _skipped_when_missing(hook)
        super().__setitem__(key, hook)


def _skipped_when_missing(hook: Callable[[Any], Any]) -> Callable[[Any], Any]:
    @functools.wraps(hook)
    def run(grad: Any) -> Any:
        return None if grad is None else hook(grad)

    return run


def _register_hook_dict(node: Any, tensor: torch.Tensor) -> None:
    # ``Tensor.register_hook``'s first hook on an output: its dict, then the node's pre-hook
    # reading it (so only a program whose output gets a hook pays for this). The node runs its
    # outputs' hooks in the order their dicts were registered; eager runs each output's hooks
    # with the node of the op computing it, the last op first: so every output's dict is
    # registered now, in that order (``DifferentiableFunction.hook_order``).
    refs = getattr(node, "output_refs", None)
    outputs = [tensor]
    if refs is not None:
        found = [ref() for ref in refs.values()]
        outputs = [
            o
            for o in found
            if o is tensor or (o is not None and o._backward_hooks is None and o.grad_fn is node)
        ]
        if not any(o is tensor for o in outputs):
            outputs = [tensor]
    for o in outputs:
        o._backward_hooks = _OneOutputHooks()
        torch._C._FunctionBase._register_hook_dict(node, o)


def _hook_order(eager: EagerGraph | None, outputs: Sequence[int]) -> tuple[int, ...] | None:
    """The differentiable outputs (flat indices) in the order eager runs their hooks: by the
    last op computing each, the last first. None where that is the order of registration
    (one output; two computed by the same op, whose node runs their hooks so)."""
    if eager is None or len(outputs) < 2:
        return None
    last = {k: max(eager.reach[k]) for k in outputs if k < len(eager.reach) and eager.reach[k]}
    if len(last) < 2 or len(set(last.values())) < len(last):
        return None
    return tuple(sorted(last, key=lambda k: -last[k]))


_ThunderFunction._backward_cls._register_hook_dict = _register_hook_dict  # type: ignore[attr-defined]
