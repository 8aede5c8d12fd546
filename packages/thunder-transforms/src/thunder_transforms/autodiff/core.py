"""The forward/backward split: which values carry gradients, the backward trace recorded from the
grad rules, and the forward trace that also returns what the backward needs."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from thunder_ir import (
    BoundSymbol,
    NumberProxy,
    OpTag,
    PassRecord,
    Proxy,
    Symbol,
    TensorProxy,
    Trace,
    prims,
    tracectx,
)
from thunder_ir import higher_order as ho
from thunder_ir.aliasing import (
    AliasInfo,
    alias_info,
    writes_in_place,
    writes_where_gradients_flow,
    written_inputs,
    written_where_gradients_flow,
)
from thunder_ir.ops.fallback import FALLBACK_SYMBOLS
from thunder_ir.pytree import tree_flatten, tree_map
from thunder_ir.symbol import leaf_prims
from thunder_transforms.autodiff.fallback_saved import unreached_arguments
from thunder_transforms.autodiff.registry import (
    gives_no_gradient,
    rule_for,
    static_eq,
    zeros_like,
)
from thunder_transforms.checkpoint import checkpointed_values
from thunder_transforms.dce import dce
from thunder_transforms.functionalize import Functionalized, functionalize

__all__ = [
    "NONDIFFERENTIABLE",
    "ForwardBackward",
    "snapshot_written_inputs",
    "split_forward_backward",
    "writes_where_gradients_flow",
]

# Ops whose outputs never carry gradients although their inputs may (Tensor.detach).
NONDIFFERENTIABLE: frozenset[Symbol] = frozenset({prims.stop_gradient})


@dataclass(frozen=True)
class ForwardBackward:
    """The result of :func:`split_forward_backward`.

    ``forward`` takes the trace's inputs and returns ``(outputs, saved)``: the flat leaves of the
    original return value and the values the backward needs. ``backward`` takes ``*saved`` then
    one cotangent per differentiable output and returns one gradient per forward input (None for
    inputs that do not require grad or that the outputs do not depend on).
    """

    forward: Trace
    backward: Trace
    output_spec: Any  # pytree spec of the original return value, over ``forward``'s outputs
    differentiable_outputs: tuple[bool, ...]  # per flat output: whether it takes a cotangent
    requires_grad: tuple[bool, ...]  # per forward input
    n_saved: int
    mutated_inputs: frozenset[int] = frozenset()  # inputs the forward writes in place (copy_)
    # Forward values inside checkpointed regions: never saved, recomputed (see ``remat``).
    checkpointed: frozenset[str] = frozenset()
    # The last ``hidden_outputs`` flat outputs of ``forward`` are not the program's: inputs it
    # writes whose new values carry gradients, returned so that autograd records the write.
    hidden_outputs: int = 0
    # Mutated inputs written through a view of them (eager's error for a leaf names the view).
    written_through_views: frozenset[int] = frozenset()
    # Flat outputs that are views of an input taken under no_grad (eager's require grad): the
    # input (by index) each is a view of.
    no_grad_input_views: Mapping[int, int] = dataclasses.field(default_factory=dict, hash=False)


def _carries_grad(p: Any) -> bool:
    return isinstance(p, TensorProxy) and p.dtype.is_inexact


# Prims that only move data, whose grad rules read nothing but shapes and parameters.
_DATA_MOVEMENT = frozenset(
    {
        prims.transpose,
        prims.reshape,
        prims.slice_prim,
        prims.squeeze,
        prims.unsqueeze,
        prims.broadcast_in_dim,
        prims.shallow_copy,
    }
)


# Symbols whose grad rules give eager's gradients of complex values (the conjugate Wirtinger
# convention): maps that act alike on real and imaginary parts, mul and div with the conjugates
# (``rules_elementwise``), matmul with them (``rules_nn``), the linear pad and where, and the
# torch fallback, which torch.autograd differentiates.
_COMPLEX_GRAD_RULES = (
    _DATA_MOVEMENT
    | FALLBACK_SYMBOLS
    | {
        prims.add,
        prims.sub,
        prims.neg,
        prims.mul,
        prims.div,
        prims.sum,
        prims.cat,
        prims.convert_element_type,
        prims.matmul,
        prims.pad,  # linear: the gradient is a slice or a pad of it
        prims.where,  # linear in the values it selects
    }
)


def _refuse_complex_gradients(bsym: BoundSymbol, outs: Sequence[TensorProxy]) -> None:
    if bsym.sym not in _COMPLEX_GRAD_RULES and any(o.dtype.is_complex for o in outs):
        raise NotImplementedError(
            f"gradients of complex values ({bsym.sym.qualified_name}){bsym.where()}"
        )


def _moves_data_only(bsym: BoundSymbol) -> bool:
    """A view op (``OpTag.VIEW`` or ``OpTag.MAY_RETURN_VIEW``) whose decomposition only moves data."""
    if not bsym.subsymbols or not ({OpTag.VIEW, OpTag.MAY_RETURN_VIEW} & bsym.sym.tags):
        return False
    return all(b.sym in _DATA_MOVEMENT or _size_arithmetic(b) for b in leaf_prims(bsym))


def _size_arithmetic(bsym: BoundSymbol) -> bool:
    """A prim on numbers only (a symbolic size computed for the op's shapes)."""
    return not any(isinstance(p, TensorProxy) for p in (*bsym.flat_args, *bsym.flat_outs))


class _Linearizer:
    """Flattens the forward down to symbols with grad rules (composites without one are replaced
    by their subsymbols) wherever gradients flow, and records which proxies carry gradients."""

    def __init__(
        self, active: set[str], inputs: set[str] | None = None, seen: frozenset[int] = frozenset()
    ) -> None:
        self.active = active
        self.input_views = set(inputs or ())  # trace inputs and views of them kept whole
        # ids of top-level views whose result shares memory with a value the caller sees
        self.seen_views = seen
        self.forward: list[BoundSymbol] = []
        self.differentiated: list[BoundSymbol] = []
        self.checkpointed: set[str] = set()  # intermediates of checkpointed regions

    def visit(self, bsym: BoundSymbol) -> None:
        gets_grad = bsym.sym not in NONDIFFERENTIABLE and any(
            p.name in self.active for p in bsym.flat_proxy_args
        )
        if not gets_grad:
            self.forward.append(bsym)
            return
        rule = rule_for(bsym)
        if (
            rule is None
            and _moves_data_only(bsym)
            and (
                all(p.name in self.input_views for p in bsym.flat_proxy_args)
                or id(bsym) in self.seen_views
            )
        ):
            # A view of an input stays whole in the forward (the executor runs it as torch's own:
            # eager's strides, the caller's memory); it is differentiated through its
            # decomposition, whose grad rules need only shapes. Views of intermediates are
            # flattened like other composites (free to fuse).
            self.input_views.update(p.name for p in bsym.flat_proxy_outs)
            self.forward.append(bsym)
            self.differentiated.append(bsym)
            self.active |= _reached_in_decomposition(bsym, self.active)
            return
        if rule is None and bsym.subsymbols and not _gives_grad(bsym, self.active):
            # No gradient through it (zeros_like(x), rand_like(x), argmax): kept whole as in a
            # program without grad, so the executor runs torch's own (eager's strides, RNG draws).
            self.forward.append(bsym)
            return
        if rule is None and bsym.subsymbols:
            if bsym.has_tag(OpTag.CHECKPOINT):
                self.checkpointed.update(checkpointed_values(bsym))
            for sub in bsym.subsymbols:
                self.visit(sub)
            return
        outs = [o for o in bsym.flat_outs if isinstance(o, TensorProxy) and _carries_grad(o)]
        if bsym.sym in FALLBACK_SYMBOLS:
            outs = _fallback_grad_outputs(bsym, outs, self.active)
        elif bsym.subsymbols:
            # A tensor read for its metadata only (to(other), new_zeros) gives none.
            reached = _reached_in_decomposition(bsym, self.active)
            outs = [o for o in outs if o.name in reached]
        self.forward.append(bsym)
        if not outs:
            return  # comparisons, argmax...: integer or boolean results carry no gradient
        if rule is None:
            raise NotImplementedError(
                f"{bsym.sym.qualified_name}{bsym.where()} has no grad rule and no decomposition; "
                "register one with thunder_transforms.autodiff.register_vjp"
            )
        _refuse_complex_gradients(bsym, outs)
        self.differentiated.append(bsym)
        self.active.update(o.name for o in outs)
        if {OpTag.VIEW, OpTag.MAY_RETURN_VIEW} & bsym.sym.tags and all(
            p.name in self.input_views for p in bsym.flat_proxy_args
        ):
            self.input_views.update(p.name for p in bsym.flat_proxy_outs)  # unfold of an input


def _fallback_grad_outputs(
    bsym: BoundSymbol, outs: list[TensorProxy], active: set[str]
) -> list[TensorProxy]:
    """The outputs of a torch fallback that carry gradient: torch's own answer, from running it
    on fake tensors (``randint_like(w)`` carries none). Where none was flagged, the fake run is
    asked again with the inputs gradients reach flagged: a tensor the program wrote a value
    requiring grad into (``buf[:3] = x * w``, through a view) may have been flagged without
    grad when it ran, which would drop the gradient silently."""
    flagged = [o for o in outs if o.requires_grad]
    if flagged or not outs or bsym.sym.meta is None:
        return flagged

    reached = [p for p in bsym.flat_proxy_args if isinstance(p, TensorProxy) and p.name in active]
    if not reached:
        return flagged

    def with_grad(x: Any) -> Any:
        if isinstance(x, TensorProxy) and x.name in active:
            return x.replace(requires_grad=True)
        return x

    with tracectx(Trace()):  # (a scratch trace: the proxies made here are thrown away)
        args, kwargs = tree_map(with_grad, (bsym.args, bsym.kwargs))
        again = tree_flatten(bsym.sym.meta(*args, **kwargs))[0]
    names = [o.name for o in tree_flatten(bsym.output)[0] if isinstance(o, TensorProxy)]
    wanted = {
        name
        for name, o in zip(names, (o for o in again if isinstance(o, TensorProxy)))
        if o.requires_grad
    }
    return [o for o in outs if o.name in wanted]


def _gives_grad(bsym: BoundSymbol, active: set[str]) -> bool:
    """Whether a gradient reaches an output of the composite ``bsym`` from ``active``."""
    if bsym.has_tag(OpTag.CHECKPOINT) or OpTag.IN_PLACE in bsym.sym.tags:
        return True
    outs = [o for o in bsym.flat_outs if _carries_grad(o)]
    if not outs:
        return False
    reached = _reached_in_decomposition(bsym, active)
    return any(o.name in reached for o in outs)


def _reached_in_decomposition(bsym: BoundSymbol, active: set[str]) -> set[str]:
    """The floating-point values of ``bsym`` (its outputs, its decomposition's intermediates)
    whose values its decomposition computes from a value in ``active``: eager's outputs of one
    op that reads an input requiring grad require grad (a count of nonzeros too), but not one
    made without reading it (the second result of ``broadcast_tensors(x, c)``, ``i.to(x)``).
    An output no prim of the decomposition makes is taken to if any input is read."""
    read = {p.name for p in bsym.flat_proxy_args if p.name in active}
    reached: set[str] = set()
    made: set[str] = set()
    for leaf in leaf_prims(bsym):
        outs = leaf.flat_proxy_outs
        made.update(o.name for o in outs)
        if leaf.sym not in NONDIFFERENTIABLE and any(p.name in read for p in leaf.flat_proxy_args):
            read.update(o.name for o in outs)
            reached.update(o.name for o in outs if _carries_grad(o))
    arg_names = {p.name for p in bsym.flat_proxy_args}
    for o in bsym.flat_outs:
        if not _carries_grad(o):
            continue
        if o.name in arg_names:
            if o.name in active:
                reached.add(o.name)  # the input itself (``x.to(x.dtype)``)
        elif o.name not in made and read:
            reached.add(o.name)
    return reached


def _values_read(bsym: BoundSymbol) -> set[str]:
    """The arguments whose values ``bsym`` reads: by its decomposition where it has one (not
    ``p`` of ``x.to(p)``, read for its dtype: eager leaves its ``.grad`` None)."""
    if bsym.sym is ho.autograd_function:
        return _autograd_function_edges(bsym)
    names = {p.name for p in bsym.flat_proxy_args}
    if bsym.sym in FALLBACK_SYMBOLS:
        return names - unreached_arguments(bsym)  # a loss's target read by ``target == 1``
    if not bsym.subsymbols:
        return names
    read = {p.name for leaf in leaf_prims(bsym) for p in leaf.flat_proxy_args}
    read.update(p.name for p in bsym.flat_proxy_outs)  # an argument given back as it is
    return names & read


def _autograd_function_edges(bsym: BoundSymbol) -> set[str]:
    """The inputs a ``torch.autograd.Function``'s node has edges to: the tensors passed to
    ``apply`` for which its backward returns a gradient. What it saves or reads otherwise (a
    tensor inside a list argument, a parameter kept on ``ctx``) autograd never sees: eager leaves
    its ``.grad`` None."""
    backward, _, inputs, _ = bsym.args
    grads = backward.return_value
    return {
        a.name
        for a, g in zip(inputs, grads if isinstance(grads, tuple) else (grads,))
        if isinstance(a, Proxy) and g is not None
    }


def _reads(bsym: BoundSymbol) -> list[Proxy]:
    """What ``bsym`` reads: its arguments, and the symbolic sizes its decomposition reads
    without computing them (executed whole, an op's size arithmetic runs before it)."""
    reads = list(bsym.flat_proxy_args)
    inner: set[str] = set()

    def visit(subs: Sequence[BoundSymbol]) -> None:
        for sub in subs:
            if sub.subsymbols:
                visit(sub.subsymbols)
            reads.extend(
                p for p in sub.flat_proxy_args if isinstance(p, NumberProxy) and p.name not in inner
            )
            inner.update(p.name for p in sub.flat_proxy_outs)

    visit(bsym.subsymbols)
    return reads


def _shape_text(shape: Any) -> str:
    """A shape as text, symbolic sizes by name (printing their value would specialize them)."""
    return "(" + ", ".join(s.name if isinstance(s, Proxy) else str(s) for s in shape) + ")"


class _Backward:
    """Records the backward: cotangents accumulated per forward proxy, rules run in reverse."""

    def __init__(self) -> None:
        self.cotangents: dict[str, TensorProxy] = {}
        self.reached: set[str] = set()

    def accumulate(self, p: TensorProxy, g: Any, bsym: BoundSymbol | None) -> None:
        where = f"the grad rule of {bsym.sym.id}" if bsym is not None else "a cotangent"
        if not isinstance(g, TensorProxy):
            raise TypeError(f"{where} returned {g!r} for {p.name}; expected a tensor")
        if (
            len(g.shape) == len(p.shape)
            and all(
                static_eq(x, y) or isinstance(x, Proxy) or isinstance(y, Proxy)
                for x, y in zip(g.shape, p.shape)
            )
            and not all(static_eq(x, y) for x, y in zip(g.shape, p.shape))
        ):
            # A size the rule built from values read from data (split at ``lens.tolist()``: the
            # pieces' gradients joined), or a fixed size where the input's was read from data
            # (``x[mask].chunk(2)``: the forward's pieces have sizes checked on every call):
            # equal to the input's when the program runs, which torch's forward checked; the
            # reshape states it (and checks it again).
            g = prims.reshape(g, tuple(p.shape))
        if len(g.shape) != len(p.shape) or not all(
            static_eq(x, y) for x, y in zip(g.shape, p.shape)
        ):
            raise RuntimeError(
                f"{where} returned a gradient of shape {_shape_text(g.shape)} for {p.name} of "
                f"shape {_shape_text(p.shape)}"
            )
        if g.dtype != p.dtype:
            if g.dtype.is_complex and not p.dtype.is_complex:
                g = prims.real(g)  # eager's gradient of a real input to a complex op
            g = prims.convert_element_type(g, p.dtype) if g.dtype != p.dtype else g
        if g.device != p.device:
            g = prims.device_put(g, p.device)
        have = self.cotangents.get(p.name)
        self.cotangents[p.name] = g if have is None else prims.add(have, g)

    def run(self, differentiated: Sequence[BoundSymbol], active: set[str]) -> None:
        steps = [
            leaf
            for b in differentiated
            for leaf in ([b] if rule_for(b) is not None else leaf_prims(b))
        ]
        for bsym in reversed(steps):
            if gives_no_gradient(bsym):
                continue  # eager's backward gives undefined gradients, not zeros
            outs = [o for o in bsym.flat_outs if isinstance(o, TensorProxy)]
            cts = [self.cotangents.get(o.name) for o in outs]
            if all(c is None for c in cts):
                if any(o.name in self.reached for o in outs):
                    # Reached only through zero-gradient ops (sign(x * 2)): so are its inputs,
                    # whose gradient is then zero, as eager's chain of zeros gives.
                    self.reached.update(n for n in _values_read(bsym) if n in active)
                continue
            self.reached.update(n for n in _values_read(bsym) if n in active)
            rule = rule_for(bsym)
            assert rule is not None, bsym.sym.id
            for inp, grad in rule(bsym, *cts):
                if isinstance(inp, TensorProxy) and inp.name in active and grad is not None:
                    self.accumulate(inp, grad, bsym)


def _fresh_name(trace: Trace, prefix: str) -> str:
    return trace.make_name(prefix)


def split_forward_backward(
    trace: Trace, *, requires_grad: Sequence[bool] | None = None
) -> ForwardBackward:
    """Differentiates ``trace`` with respect to the inputs marked in ``requires_grad`` (by default
    the tensor inputs whose proxies say ``requires_grad``; only floating-point tensors can be).

    Composite ops without a grad rule are differentiated through their decompositions; the
    forward keeps composites that no gradient flows through as they are. A trace that writes in
    place where gradients flow is functionalized first (``thunder_transforms.functionalize``):
    gradients flow through the writes, and the forward writes the final values of written inputs
    back at its end (this takes inputs that do not share memory with each other)."""
    start = time.perf_counter()
    # Writes where gradients flow are functionalized; others run in place, in program order.
    relevant = written_where_gradients_flow(trace, requires_grad)
    fz = functionalize(trace, only=relevant) if relevant else Functionalized(trace, {}, frozenset())
    trace = fz.trace
    args = trace.args
    which = _differentiated_inputs(args, requires_grad)
    active = {a.name for a, w in zip(args, which) if w}
    lin = _linearize(trace, active)
    leaves, spec, n_hidden = _differentiated_outputs(trace, fz, active)
    diff_out = tuple(isinstance(x, TensorProxy) and x.name in active for x in leaves)
    bw, cotangent_inputs = _record_backward(trace, lin, leaves, diff_out, which, active)
    bw = _recast_in_backward(dce(bw), lin.forward)
    computed = {a.name for a in args if isinstance(a, Proxy)}
    for b in lin.forward:  # with the size arithmetic of its ops, bound before each runs whole
        computed.update(p.name for leaf in (b, *leaf_prims(b)) for p in leaf.flat_proxy_outs)
    saved = _saved_for_backward(bw, cotangent_inputs, computed)
    seconds = time.perf_counter() - start
    bw = bw.replace(
        args=(*saved, *cotangent_inputs),
        history=(*trace.history, PassRecord("autodiff backward", seconds)),
    )

    ret = prims.python_return.bind((tuple(leaves), tuple(saved)), output=None)
    fw = trace.derive([*lin.forward, ret], pass_name="autodiff forward", seconds=seconds)
    fw = dce(fw).replace(fn_name=f"{trace.fn_name}_forward")
    fw_aliases = alias_info(fw.bound_symbols)
    mutated = frozenset(
        i for i, a in enumerate(args) if isinstance(a, Proxy) and fw_aliases.is_written(a.name)
    )
    return ForwardBackward(
        fw,
        bw,
        spec,
        diff_out,
        which,
        len(saved),
        mutated,
        frozenset(lin.checkpointed),
        n_hidden,
        fz.through_views,
        _no_grad_input_views(trace, leaves),
    )


def _no_grad_input_views(trace: Trace, leaves: Sequence[Any]) -> dict[int, int]:
    """The flat outputs (``leaves``) that are views of an input, each view taken under no_grad
    (recorded with its gradient stopped), with the input (by index) each is a view of: eager's
    views of a tensor that requires grad do too, unlike ``x.detach()[1:]``."""
    inputs = {a.name: i for i, a in enumerate(trace.args) if isinstance(a, TensorProxy)}
    views: dict[str, int] = {}  # view: the input it is a view of
    for b in trace.bound_symbols:
        first = next(iter(b.flat_proxy_args), None)
        # (``detach`` is its stop alone; a view under no_grad is the view, then the stop)
        stops = [s.sym is prims.stop_gradient for s in b.subsymbols]
        if OpTag.VIEW not in b.sym.tags or first is None or stops == [True]:
            continue
        stopped = len(stops) > 1 and stops[-1]
        # (a view of such a view records no stop: its argument requires no grad here)
        source = inputs.get(first.name) if stopped else None
        source = views.get(first.name, source)
        if source is not None:
            views.update((o.name, source) for o in b.flat_proxy_outs)
    return {
        k: views[x.name]
        for k, x in enumerate(leaves)
        if isinstance(x, TensorProxy) and x.name in views and x.name not in inputs
    }


def _differentiated_inputs(
    args: Sequence[Any], requires_grad: Sequence[bool] | None
) -> tuple[bool, ...]:
    """Per input, whether gradients are computed for it (asked for, and it can carry one)."""
    if requires_grad is None:
        requires_grad = [isinstance(a, TensorProxy) and a.requires_grad for a in args]
    if len(requires_grad) != len(args):
        raise ValueError(f"requires_grad has {len(requires_grad)} entries for {len(args)} inputs")
    return tuple(bool(r) and _carries_grad(a) for r, a in zip(requires_grad, args))


def _linearize(trace: Trace, active: set[str]) -> _Linearizer:
    """The forward and the differentiated bound symbols of ``trace`` (see ``_Linearizer``)."""
    args = trace.args
    # Views sharing memory with what the caller sees (an input, an output) stay torch's views.
    observed = [a.name for a in args if isinstance(a, Proxy)]
    observed += [x.name for x in tree_flatten(trace.return_value)[0] if isinstance(x, Proxy)]
    info = alias_info(trace.bound_symbols, observed)
    seen_views = frozenset(
        id(b) for b in trace.bound_symbols if _moves_data_only(b) and info.in_observed_group(b)
    )
    lin = _Linearizer(active, {a.name for a in args}, seen_views)
    for bsym in trace.bound_symbols:
        if not bsym.has_tag(OpTag.RETURN):
            lin.visit(bsym)
    return lin


def _differentiated_outputs(
    trace: Trace, fz: Functionalized, active: set[str]
) -> tuple[list[Any], Any, int]:
    """The leaves of the return value, then the written inputs whose new values carry gradients
    (outputs too, hidden from the program: autograd must record the write for the caller's later
    uses of the input); the return value's structure; how many are hidden."""
    leaves, spec = tree_flatten(trace.return_value)
    returned = {x.name for x in leaves if isinstance(x, Proxy)}
    hidden = [
        t
        for _, t in sorted(fz.written_inputs.items())
        if t.name in active and t.name not in returned
    ]
    return [*leaves, *hidden], spec, len(hidden)


def _record_backward(
    trace: Trace,
    lin: _Linearizer,
    leaves: Sequence[Any],
    diff_out: Sequence[bool],
    which: Sequence[bool],
    active: set[str],
) -> tuple[Trace, list[TensorProxy]]:
    """The backward (cotangents of the differentiable outputs -> the inputs' gradients) before
    dead code elimination, without inputs yet, and its cotangent inputs."""
    bw = trace.replace(
        fn_name=f"{trace.fn_name}_backward", args=(), bound_symbols=(), constraints=(), docstring=""
    )
    cotangent_inputs = [
        TensorProxy(_fresh_name(bw, "ct"), shape=x.shape, dtype=x.dtype, device=x.device)
        for x, d in zip(leaves, diff_out)
        if d
    ]
    back = _Backward()
    with tracectx(bw):
        for x, ct in zip((x for x, d in zip(leaves, diff_out) if d), cotangent_inputs):
            back.accumulate(x, ct, None)
        back.run(lin.differentiated, active)
        grads: list[Any] = []
        for a, w in zip(trace.args, which):
            if not w:
                grads.append(None)
            elif a.name in back.cotangents:
                grads.append(back.cotangents[a.name])
            elif a.name in back.reached:
                assert isinstance(a, TensorProxy)
                grads.append(zeros_like(a))  # reached only through zero-gradient ops, as eager
            else:
                grads.append(None)
        prims.python_return(tuple(grads))
    return bw, cotangent_inputs


def _recast_in_backward(bw: Trace, forward: Sequence[BoundSymbol]) -> Trace:
    """``bw`` casting again the float16/bfloat16 values whose float32 casts it reads (the
    operands of a low-precision op's decomposition): the forward saves the low-precision tensor,
    as eager does, not a float32 copy of it twice its size. The cast is exact. Each cast is
    placed right before its first reader, so that the float32 copy lives no longer than there
    (``remat._just_in_time`` moves it again where the low-precision value is recomputed)."""
    casts: dict[str, BoundSymbol] = {}
    info: AliasInfo | None = None
    for b in forward:
        if b.sym is not prims.convert_element_type:
            continue
        src, out = b.args[0], b.output
        if not (
            isinstance(src, TensorProxy)
            and isinstance(out, TensorProxy)
            and src.dtype.is_low_precision
            and out.dtype.is_float
            and out.dtype.bytes > src.dtype.bytes
        ):
            continue
        if info is None:
            info = alias_info(forward)
        if not info.is_written(src.name):  # the value the backward reads is the one cast
            casts[out.name] = b
    if not casts:
        return bw
    defined: set[str] = set()
    body: list[BoundSymbol] = []
    for b in bw.bound_symbols:
        for p in b.flat_proxy_args:
            if p.name in casts and p.name not in defined:
                defined.add(p.name)
                body.append(casts[p.name])
        body.append(b)
        defined.update(p.name for p in b.flat_proxy_outs)
    if len(body) == len(bw.bound_symbols):
        return bw
    return bw.replace(bound_symbols=body)


def _size_names(values: Sequence[Any]) -> set[str]:
    """The names of the symbolic sizes of the tensors among ``values``."""
    return {
        n.name
        for t in values
        if isinstance(t, TensorProxy)
        for n in t.shape
        if isinstance(n, NumberProxy)
    }


def _saved_for_backward(
    bw: Trace, cotangent_inputs: Sequence[Proxy], computed: set[str]
) -> list[Proxy]:
    """The backward's free variables: what the forward must save, in the order it reads them.
    ``computed``: the names the forward's code binds (its inputs, its ops' outputs)."""
    defined = {p.name for p in cotangent_inputs}
    own_sizes = _size_names(cotangent_inputs)
    saved: list[Proxy] = []
    seen: set[str] = set()
    for bsym in bw.bound_symbols:
        for p in _reads(bsym):
            if p.name in defined or p.name in seen:
                continue
            if p.name not in computed and p.name in own_sizes:
                # A size of a tensor the backward makes (a slice of a cotangent), read by the
                # size arithmetic of an op it runs whole (``cat``): no value the forward has.
                continue
            seen.add(p.name)
            saved.append(p)
        defined.update(p.name for p in bsym.flat_proxy_outs)
        own_sizes.update(_size_names(bsym.flat_proxy_outs))
        # Sizes its decomposition computes (the shapes of a composite's outputs): computed by the
        # backward itself, before the op runs whole or as it decomposes, never saved.
        defined.update(
            p.name
            for leaf in leaf_prims(bsym)
            if _size_arithmetic(leaf)
            for p in leaf.flat_proxy_outs
        )
    return saved


def snapshot_written_inputs(fb: ForwardBackward) -> ForwardBackward:
    """``fb`` whose forward saves copies of the values that share memory with an input it writes
    (the input itself, views of it), taken before the first write: the backward needs them as
    they were. Run after rematerialization, which may choose to save inputs."""
    if not fb.mutated_inputs:
        return fb
    fw = fb.forward
    bsyms = fw.bound_symbols
    ret = bsyms[-1]
    if not ret.has_tag(OpTag.RETURN):
        return fb
    outputs, saved = ret.args[0]
    written = {fw.args[i].name for i in fb.mutated_inputs}
    info = alias_info(bsyms)
    roots = {info.root(n) for n in written}
    first = next(
        (
            i
            for i, b in enumerate(bsyms)
            if writes_in_place(b) and any(info.root(n) in roots for n in written_inputs(b))
        ),
        None,
    )
    if first is None:
        return fb
    defined = {a.name for a in fw.args} | {p.name for b in bsyms[:first] for p in b.flat_proxy_outs}
    risky = {
        s.name: s
        for s in saved
        if isinstance(s, TensorProxy) and s.name in defined and info.root(s.name) in roots
    }
    if not risky:
        return fb
    with fw.rerecord("snapshot written inputs") as new:
        for b in bsyms[:first]:
            new.record(b)
        copies = {name: prims.clone(s) for name, s in risky.items()}
        for b in bsyms[first:-1]:
            new.record(b)
        new_saved = tuple(copies.get(s.name, s) if isinstance(s, Proxy) else s for s in saved)
        new.record(ret.replace(args=((outputs, new_saved),)))
    return dataclasses.replace(fb, forward=new)
