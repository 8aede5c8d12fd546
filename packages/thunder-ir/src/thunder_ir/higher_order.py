"""Higher-order symbols: ops whose arguments include sub-traces.

``torch.cond``, ``while_loop``, ``map`` and ``scan`` take Python functions. Each function is
recorded into a sub-trace (``record_subtrace``): a ``Trace`` of its own, with its own inputs and
return, that shares the names of the trace it is recorded from (so every name stays unique and a
sub-trace can be inlined). A sub-trace is closed: a value of the enclosing trace that the
function reads (a closure over a tensor, a parameter) becomes an extra input of the sub-trace and
an explicit operand of the higher-order bound symbol. Dataflow therefore stays visible in
``flat_proxy_args``: a pass that knows nothing of sub-traces treats the bound symbol as one
opaque, functional op and keeps it intact. Passes that do know (dead code elimination, the
executors) apply themselves to each sub-trace with ``map_subtraces``.

Printed, each sub-trace is a local function defined just before the call that uses it::

    def cond_true0(t1, x):
      t2 = ltorch.cos(t1)
      return (t2,)
    def cond_false0(t3, x):
      ...
    (t5,) = higher_order.cond(t0, cond_true0, cond_false0, (t1, x))

and what is printed runs: the symbols' implementations (``impl``) are the Python control flow
(``if``, ``while``, a loop and ``torch.stack``) over the compiled sub-traces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from thunder_ir.codegen import HIGHER_ORDER_MODULE
from thunder_ir.proxies import NumberProxy, Proxy, TensorProxy
from thunder_ir.pytree import tree_flatten, tree_iter, tree_map, tree_unflatten
from thunder_ir.symbol import BoundSymbol, Symbol, call_again
from thunder_ir.tags import OpTag
from thunder_ir.trace import Trace
from thunder_ir.tracectx import get_tracectx, tracectx
from thunder_ir.utils import check

__all__ = [
    "HigherOrderError",
    "autograd_function",
    "cond",
    "free_proxies",
    "fresh_like",
    "inline",
    "map_subtraces",
    "outputs_like",
    "record_subtrace",
    "scan",
    "scan_backward",
    "tensor_map",
    "while_loop",
    "while_loop_backward",
]


class HigherOrderError(ValueError):
    """A function handed to a higher-order op breaks its contract (branches that return
    different shapes, a loop body that changes its carried values' metadata...)."""


def _higher_order(name: str, meta: Callable[..., Any], impl: Callable[..., Any]) -> Symbol:
    """A higher-order symbol: printed as ``higher_order.<name>``, tagged ``OpTag.HIGHER_ORDER``
    (its sub-traces print as local functions and passes map over them)."""
    return Symbol(
        name, meta, module=HIGHER_ORDER_MODULE, is_prim=True, impl=impl, tags=(OpTag.HIGHER_ORDER,)
    )


# -- sub-traces ---------------------------------------------------------------------------------


def map_subtraces(bsym: BoundSymbol, fn: Callable[[Trace], Trace]) -> BoundSymbol:
    """``bsym`` with every sub-trace argument replaced by ``fn(sub_trace)``."""
    if not any(isinstance(a, Trace) for a in bsym.flat_args):
        return bsym

    def swap(x: Any) -> Any:
        return fn(x) if isinstance(x, Trace) else x

    return bsym.replace(args=tree_map(swap, bsym.args), kwargs=tree_map(swap, bsym.kwargs))


def fresh_like(x: Any) -> Any:
    """A new proxy with ``x``'s metadata (a fresh name in the current trace); constants as is."""
    if isinstance(x, (TensorProxy, NumberProxy)):
        return x.replace()
    return x


def free_proxies(bsyms: Sequence[BoundSymbol], defined: set[str]) -> list[Proxy]:
    """The proxies ``bsyms`` read without defining them (and not in ``defined``), in order;
    reads inside composites count (a checkpointed region's function may close over a value)."""
    free: dict[str, Proxy] = {}

    def visit(scope: Sequence[BoundSymbol], known: set[str]) -> None:
        for bsym in scope:
            for p in bsym.flat_proxy_args:
                if p.name not in known:
                    free.setdefault(p.name, p)
            if bsym.subsymbols:
                visit(bsym.subsymbols, set(known))
            known.update(p.name for p in bsym.flat_proxy_outs)

    visit(bsyms, set(defined))
    return list(free.values())


def record_subtrace(
    fn: Callable[..., Any],
    inputs: Sequence[Any],
    *,
    name: str,
    grad_enabled: bool | None = None,
    fresh_outputs: bool = False,
) -> Trace:
    """Records ``fn(*params)`` into a new sub-trace of the trace being recorded, where ``params``
    are fresh proxies like ``inputs`` (constants stay constants). The sub-trace's inputs are the
    params, then the values of the enclosing trace that ``fn`` read (its captures). The
    constraints its recording relied on become constraints of the enclosing trace. With
    ``fresh_outputs``, a returned tensor that may share memory with an input (the input itself,
    a view of it) is returned as a copy: the outputs of torch's higher-order ops are new
    tensors, so writing into one never writes into an operand."""
    outer = get_tracectx()
    check(outer is not None, "record_subtrace needs a trace being recorded")
    assert outer is not None
    sub = outer.nested(outer.make_name(name))  # one namespace: names stay unique
    if grad_enabled is not None:
        sub.grad_enabled = grad_enabled
    sub.intercept = outer.intercept  # its calls are recorded as the enclosing trace's are
    from thunder_ir.prims import python_return

    with tracectx(sub):
        params = [fresh_like(x) for x in inputs]
        out = fn(*params)
        if fresh_outputs:
            out = _copies_of_aliased_inputs(sub.bound_symbols, out)
        python_return(out)
    bound = [p for p in params if isinstance(p, Proxy)]
    captured = free_proxies(sub.bound_symbols, {p.name for p in bound})
    outer.constraints.extend(sub.constraints)  # the enclosing trace, still being recorded
    return sub.replace(args=(*bound, *captured), constraints=())


def _copies_of_aliased_inputs(bsyms: Sequence[BoundSymbol], out: Any) -> Any:
    from thunder_ir.aliasing import alias_info
    from thunder_ir.prims import clone

    info = alias_info(bsyms)
    defined = {p.name for b in bsyms for p in b.flat_proxy_outs}
    used = {p.name for b in bsyms for p in b.flat_proxy_args}
    outside = {info.root(n) for n in used if n not in defined}

    def fresh(x: Any) -> Any:
        if isinstance(x, TensorProxy) and (x.name not in defined or info.root(x.name) in outside):
            return clone(x)
        return x

    return tree_map(fresh, out)


def captures(sub: Trace, n_params: int) -> tuple[Proxy, ...]:
    """The values of the enclosing trace that ``sub`` reads (its inputs after the params)."""
    return sub.args[n_params:]


def with_args(sub: Trace, args: Sequence[Proxy]) -> Trace:
    """``sub`` taking ``args`` (a superset of what it reads): branches share one signature."""
    return sub.replace(args=tuple(args))


def shared_signature(subs: Sequence[Trace], n_params: int) -> tuple[list[Trace], list[Proxy]]:
    """The sub-traces taking one list of inputs (as ``cond``'s branches must): their params,
    then every capture of any (in order of first capture); and those captures."""
    captured: dict[str, Proxy] = {}
    for sub in subs:
        for p in captures(sub, n_params):
            captured.setdefault(p.name, p)
    caps = list(captured.values())
    return [with_args(s, (*s.args[:n_params], *caps)) for s in subs], caps


def inline(sub: Trace, args: Sequence[Any]) -> Any:
    """Records ``sub``'s bound symbols into the current trace with its inputs bound to ``args``
    (fresh names for everything it computes); returns its return value."""
    env: dict[str, Any] = {p.name: a for p, a in zip(sub.args, args)}

    def lookup(x: Any) -> Any:
        return env.get(x.name, x) if isinstance(x, Proxy) else x

    for bsym in sub.bound_symbols:
        if bsym.has_tag(OpTag.RETURN):
            return tree_map(lookup, bsym.args[0] if bsym.args else None)
        out = call_again(bsym, tree_map(lookup, bsym.args), tree_map(lookup, bsym.kwargs))
        for old, new in zip(bsym.flat_outs, tree_iter(out)):
            if isinstance(old, Proxy):
                env[old.name] = new
    raise HigherOrderError(f"sub-trace {sub.fn_name} has no return")


def outputs_like(value: Any, requires_grad: bool = False) -> Any:
    """Fresh proxies shaped like ``value`` (the outputs of a higher-order call); the
    floating-point tensors require grad when ``requires_grad``."""

    def fresh(x: Any) -> Any:
        if isinstance(x, TensorProxy):
            return x.replace(requires_grad=requires_grad and x.dtype.is_inexact)
        return fresh_like(x)

    return tree_map(fresh, value)


def describe(value: Any) -> str:
    """A value's structure and metadata for error messages: ``(f32[2, 3], i64[])``."""
    leaves, _ = tree_flatten(value)
    parts = []
    for x in leaves:
        if isinstance(x, TensorProxy):
            parts.append(x.type_string())
        elif isinstance(x, NumberProxy):
            parts.append(x.python_type.__name__)
        else:
            parts.append(repr(x))
    return f"({', '.join(parts)})"


def same_metadata(a: Any, b: Any) -> bool:
    """Whether two output trees have one structure and equal tensor shapes, dtypes, devices."""
    la, sa = tree_flatten(a)
    lb, sb = tree_flatten(b)
    if sa != sb or len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if isinstance(x, TensorProxy) != isinstance(y, TensorProxy):
            return False
        if isinstance(x, TensorProxy):
            assert isinstance(y, TensorProxy)
            if (x.shape, x.dtype, x.device) != (y.shape, y.dtype, y.device):
                return False
        elif isinstance(x, Proxy) or isinstance(y, Proxy) or x != y:
            return False
    return True


def _any_requires_grad(operands: Sequence[Any]) -> bool:
    return any(isinstance(o, TensorProxy) and o.requires_grad for o in tree_iter(operands))


# -- the ops --------------------------------------------------------------------------------


def _cond_meta(
    pred: Any, true_branch: Trace, false_branch: Trace, operands: tuple[Any, ...]
) -> Any:
    check(
        isinstance(pred, TensorProxy) and pred.numel() == 1,
        lambda: f"cond: the predicate must be a one-element tensor, got {pred!r}",
        HigherOrderError,
    )
    for branch in (true_branch, false_branch):
        check(
            len(branch.args) == len(operands),
            lambda: f"cond: {branch.fn_name} takes {len(branch.args)} inputs, got {len(operands)}",
            HigherOrderError,
        )
    if not same_metadata(true_branch.return_value, false_branch.return_value):
        raise HigherOrderError(
            "torch.cond: the branches return different structures or metadata: "
            f"{true_branch.fn_name} returns {describe(true_branch.return_value)}, "
            f"{false_branch.fn_name} returns {describe(false_branch.return_value)}"
        )
    return outputs_like(true_branch.return_value, _any_requires_grad(operands))


def _cond_impl(pred: Any, true_branch: Any, false_branch: Any, operands: tuple[Any, ...]) -> Any:
    return true_branch(*operands) if pred else false_branch(*operands)


cond = _higher_order("cond", _cond_meta, _cond_impl)
"""``cond(pred, true_branch, false_branch, operands)``: ``true_branch(*operands)`` if the
one-element tensor ``pred`` is true, else ``false_branch(*operands)``. Both branches take the same
inputs and return the same structure and metadata."""


def _while_loop_meta(
    cond_fn: Trace, body_fn: Trace, carried: tuple[Any, ...], extra: tuple[Any, ...]
) -> Any:
    n = len(carried) + len(extra)
    for fn in (cond_fn, body_fn):
        check(
            len(fn.args) == n,
            lambda: f"while_loop: {fn.fn_name} takes {len(fn.args)} inputs, got {n}",
            HigherOrderError,
        )
    pred = cond_fn.return_value
    check(
        isinstance(pred, TensorProxy) and pred.numel() == 1 and pred.dtype.is_boolean,
        lambda: f"while_loop: cond_fn must return a one-element bool tensor, got {describe(pred)}",
        HigherOrderError,
    )
    if not same_metadata(tuple(body_fn.return_value), tuple(carried)):
        raise HigherOrderError(
            "while_loop: body_fn must return values with the metadata of the carried values: "
            f"carried {describe(tuple(carried))}, {body_fn.fn_name} returns "
            f"{describe(body_fn.return_value)}"
        )
    return outputs_like(tuple(carried))


def _while_loop_impl(
    cond_fn: Any, body_fn: Any, carried: tuple[Any, ...], extra: tuple[Any, ...]
) -> Any:
    while cond_fn(*carried, *extra):
        carried = tuple(body_fn(*carried, *extra))
    return tuple(carried)


while_loop = _higher_order("while_loop", _while_loop_meta, _while_loop_impl)
"""``while_loop(cond_fn, body_fn, carried, extra)``: while ``cond_fn(*carried, *extra)``,
``carried = body_fn(*carried, *extra)``; returns the final carried values."""


def _map_meta(fn: Trace, xs: tuple[TensorProxy, ...], args: tuple[Any, ...]) -> Any:
    check(len(xs) > 0, "map: needs at least one mapped tensor", HigherOrderError)
    n = xs[0].shape[0] if xs[0].ndim else None
    check(
        all(x.ndim > 0 and x.shape[0] == n for x in xs),
        lambda: f"map: the mapped tensors must share their leading size, got {describe(xs)}",
        HigherOrderError,
    )
    check(n != 0, "map: the leading size of the mapped tensors cannot be 0", HigherOrderError)
    check(
        len(fn.args) == len(xs) + len(args),
        lambda: f"map: {fn.fn_name} takes {len(fn.args)} inputs, got {len(xs) + len(args)}",
        HigherOrderError,
    )

    rg = _any_requires_grad((*xs, *args))

    def stacked(y: Any) -> Any:
        if isinstance(y, TensorProxy):
            return y.replace(shape=(n, *y.shape), requires_grad=rg and y.dtype.is_inexact)
        raise HigherOrderError(f"map: {fn.fn_name} must return tensors, got {y!r}")

    return tree_map(stacked, fn.return_value)


def _map_impl(fn: Any, xs: tuple[torch.Tensor, ...], args: tuple[Any, ...]) -> Any:
    results = [fn(*(x[i] for x in xs), *args) for i in range(xs[0].shape[0])]
    if not results:
        raise HigherOrderError("map over a leading size of 0 is not supported")
    _, spec = tree_flatten(results[0])
    columns = zip(*(tree_flatten(r)[0] for r in results))
    return tree_unflatten([torch.stack(column) for column in columns], spec)


tensor_map = _higher_order("map", _map_meta, _map_impl)
"""``map(fn, xs, args)``: ``fn`` applied to the slices ``x[i]`` of every tensor of ``xs`` (and
to ``args`` unchanged), the results stacked along a new leading dimension."""


def _scan_meta(
    combine: Trace,
    init: tuple[TensorProxy, ...],
    xs: tuple[TensorProxy, ...],
    extra: tuple[Any, ...],
    reverse: bool,
) -> Any:
    check(len(xs) > 0, "scan: needs at least one scanned tensor", HigherOrderError)
    n = xs[0].shape[0] if xs[0].ndim else None
    check(
        all(x.ndim > 0 and x.shape[0] == n for x in xs),
        lambda: f"scan: the scanned tensors must share their leading size, got {describe(xs)}",
        HigherOrderError,
    )
    check(n != 0, "scan: the scanned dimension cannot have size 0", HigherOrderError)
    ret = combine.return_value
    check(
        isinstance(ret, tuple) and len(ret) == 2,
        lambda: f"scan: {combine.fn_name} must return (next carry, output), got {describe(ret)}",
        HigherOrderError,
    )
    carry, y = ret
    if not same_metadata(tuple(carry), tuple(init)):
        raise HigherOrderError(
            f"scan: the carry must keep its metadata: init {describe(tuple(init))}, "
            f"{combine.fn_name} returns {describe(carry)}"
        )
    rg = _any_requires_grad((*init, *xs, *extra))
    return (
        outputs_like(tuple(init), rg),
        tuple(t.replace(shape=(n, *t.shape), requires_grad=rg and t.dtype.is_inexact) for t in y),
    )


def _scan_impl(
    combine: Any,
    init: tuple[torch.Tensor, ...],
    xs: tuple[torch.Tensor, ...],
    extra: tuple[Any, ...],
    reverse: bool,
) -> Any:
    n = xs[0].shape[0]
    carry = tuple(init)
    ys: list[tuple[torch.Tensor, ...]] = []
    for i in reversed(range(n)) if reverse else range(n):
        carry, y = combine(*carry, *(x[i] for x in xs), *extra)
        carry = tuple(carry)
        ys.append(tuple(y))
    if reverse:
        ys.reverse()
    if not ys:
        raise HigherOrderError("scan over a leading size of 0 is not supported")
    return carry, tuple(torch.stack(column) for column in zip(*ys))


scan = _higher_order("scan", _scan_meta, _scan_impl)
"""``scan(combine, init, xs, extra, reverse)``: ``carry, y_i = combine(*carry, *x_i, *extra)``
over the slices of ``xs`` along dimension 0 (last to first when ``reverse``); returns the final
carry and the stacked ``y``."""


# -- backward symbols (recorded by the grad rules of thunder_transforms) ----------------------


def is_float(x: Any) -> bool:
    """Whether ``x`` (a proxy or a tensor) is a floating-point tensor: one that takes gradients."""
    if isinstance(x, TensorProxy):
        return bool(x.dtype.is_float)
    return isinstance(x, torch.Tensor) and x.is_floating_point()


def _floats(values: Sequence[Any]) -> list[Any]:
    return [v for v in values if is_float(v)]


def _grads_like(values: Sequence[Any]) -> tuple[Any, ...]:
    return tuple(fresh_like(v).replace(requires_grad=False) for v in _floats(values))


def _while_loop_backward_meta(
    cond_fn: Trace,
    body_fn: Trace,
    body_vjp: Trace,
    carried: tuple[Any, ...],
    extra: tuple[Any, ...],
    cotangents: tuple[Any, ...],
    vjp_captures: tuple[Any, ...] = (),
) -> Any:
    check(
        len(body_vjp.args) == len(carried) + len(extra) + len(cotangents) + len(vjp_captures),
        lambda: f"while_loop_backward: {body_vjp.fn_name} takes {len(body_vjp.args)} inputs",
        HigherOrderError,
    )
    return _grads_like((*carried, *extra))


def _while_loop_backward_impl(
    cond_fn: Any,
    body_fn: Any,
    body_vjp: Any,
    carried: tuple[Any, ...],
    extra: tuple[Any, ...],
    cotangents: tuple[Any, ...],
    vjp_captures: tuple[Any, ...] = (),
) -> Any:
    history = []
    while cond_fn(*carried, *extra):  # the forward again: the carried values of every step
        history.append(carried)
        carried = tuple(body_fn(*carried, *extra))
    n_carried = len(_floats(carried))
    grads = list(cotangents)
    extra_grads = [torch.zeros_like(e) for e in _floats(extra)]
    for step in reversed(history):
        out = body_vjp(*step, *extra, *grads, *vjp_captures)
        grads = list(out[:n_carried])
        extra_grads = [a + b for a, b in zip(extra_grads, out[n_carried:])]
    return (*grads, *extra_grads)


while_loop_backward = _higher_order(
    "while_loop_backward", _while_loop_backward_meta, _while_loop_backward_impl
)
"""The gradients of ``while_loop`` with respect to its floating-point carried and extra inputs:
the loop runs again to find every step's carried values, then ``body_vjp(*carried, *extra,
*cotangents, *vjp_captures)`` (the body's vector-Jacobian product) runs from the last step to the
first. ``vjp_captures``: the values of the enclosing trace ``body_vjp`` reads (sizes its backward
needs), its inputs after the cotangents."""


def _scan_backward_meta(
    combine: Trace,
    combine_vjp: Trace,
    init: tuple[Any, ...],
    xs: tuple[Any, ...],
    extra: tuple[Any, ...],
    reverse: bool,
    carry_cotangents: tuple[Any, ...],
    y_cotangents: tuple[Any, ...],
    vjp_captures: tuple[Any, ...] = (),
) -> Any:
    n = len(init) + len(xs) + len(extra) + len(carry_cotangents) + len(y_cotangents)
    check(
        len(combine_vjp.args) == n + len(vjp_captures),
        lambda: f"scan_backward: {combine_vjp.fn_name} takes {len(combine_vjp.args)} inputs",
        HigherOrderError,
    )
    return _grads_like((*init, *xs, *extra))


def _scan_backward_impl(
    combine: Any,
    combine_vjp: Any,
    init: tuple[Any, ...],
    xs: tuple[Any, ...],
    extra: tuple[Any, ...],
    reverse: bool,
    carry_cotangents: tuple[Any, ...],
    y_cotangents: tuple[Any, ...],
    vjp_captures: tuple[Any, ...] = (),
) -> Any:
    n = xs[0].shape[0]
    order = list(reversed(range(n))) if reverse else list(range(n))
    carries = []
    carry = tuple(init)
    for i in order:  # the forward again: the carry before every step
        carries.append(carry)
        carry = tuple(combine(*carry, *(x[i] for x in xs), *extra)[0])
    n_carry, n_xs = len(_floats(init)), len(_floats(xs))
    grads = list(carry_cotangents)
    x_grads: list[list[Any]] = [[None] * n for _ in range(n_xs)]
    extra_grads = [torch.zeros_like(e) for e in _floats(extra)]
    for step in reversed(range(n)):
        i = order[step]
        out = combine_vjp(
            *carries[step],
            *(x[i] for x in xs),
            *extra,
            *grads,
            *(ct[i] for ct in y_cotangents),
            *vjp_captures,
        )
        grads = list(out[:n_carry])
        for column, g in zip(x_grads, out[n_carry : n_carry + n_xs]):
            column[i] = g
        extra_grads = [a + b for a, b in zip(extra_grads, out[n_carry + n_xs :])]
    return (*grads, *(torch.stack(column) for column in x_grads), *extra_grads)


scan_backward = _higher_order("scan_backward", _scan_backward_meta, _scan_backward_impl)
"""The gradients of ``scan`` with respect to its floating-point init, scanned and extra inputs:
the scan runs again for the carry before every step, then ``combine_vjp`` runs from the last step
to the first, carrying the carry's cotangent; ``vjp_captures`` are ``combine_vjp``'s inputs after
the cotangents (values of the enclosing trace it reads)."""


# -- torch.autograd.Function ----------------------------------------------------------------


def _autograd_function_meta(
    backward: Trace,
    outputs: tuple[TensorProxy, ...],
    inputs: tuple[Any, ...],
    saved: tuple[Any, ...],
    once_differentiable: bool = False,
) -> Any:
    check(
        len(backward.args) == len(outputs) + len(saved),
        lambda: (
            f"autograd_function: {backward.fn_name} takes {len(backward.args)} inputs, "
            f"expected {len(outputs)} gradients and {len(saved)} saved values"
        ),
        HigherOrderError,
    )
    return tuple(o.replace(requires_grad=True) for o in outputs)


class _UserBackward(torch.autograd.Function):
    """Where torch.autograd records the program (thunder_transforms' eager autograd), the
    outputs get the user's backward as their grad_fn. In the ``setup_context`` form, so that it
    also runs under torch.func's transforms (a jitted program differentiated at a grad level)."""

    @staticmethod
    def forward(backward: Any, once: bool, n_outputs: int, n_inputs: int, *tensors: Any) -> Any:
        inputs = tensors[n_outputs : n_outputs + n_inputs]
        # Returned as it is, an argument would become a view autograd refuses in-place writes
        # into; eager's output is one only where it shares an input's memory (``x.view_as(x)``).
        return tuple(
            t.view_as(t) if any(_shares_memory(t, i) for i in inputs) else t.detach()
            for t in tensors[:n_outputs]
        )

    @staticmethod
    def setup_context(ctx: Any, args: tuple[Any, ...], output: Any) -> None:
        backward, once, n_outputs, n_inputs, *tensors = args
        ctx.backward, ctx.n_outputs, ctx.n_inputs = backward, n_outputs, n_inputs
        ctx.once_differentiable = once
        # A saved output of the Function (``ctx.save_for_backward(y)`` of the ``y`` it returns)
        # is, as in eager, the output this node returns: differentiated again (create_graph),
        # the gradient through it flows back through this node; the value computed before it
        # would be a constant. An input returned as it is stays the input when saved, as eager's.
        inputs = {id(t) for t in tensors[n_outputs : n_outputs + n_inputs]}
        given_outputs = {id(t): k for k, t in enumerate(tensors[:n_outputs]) if id(t) not in inputs}
        saved = [
            output[given_outputs[id(t)]] if id(t) in given_outputs else t
            for t in tensors[n_outputs + n_inputs :]
        ]
        # Saved as eager's ctx.save_for_backward saves them: a later in-place write into one
        # raises in the backward.
        ctx.saved_layout = [None if isinstance(t, torch.Tensor) else (t,) for t in saved]
        ctx.save_for_backward(*(t for t in saved if isinstance(t, torch.Tensor)))

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        tensors = iter(ctx.saved_tensors)
        saved = [next(tensors) if s is None else s[0] for s in ctx.saved_layout]
        if not ctx.once_differentiable:
            input_grads = ctx.backward(*grads, *saved)
        else:
            # As @once_differentiable's wrapper: computed without a graph, behind a node that
            # raises only where a gradient given requires grad.
            with torch.no_grad():
                input_grads = ctx.backward(*grads, *saved)
            if torch.is_grad_enabled() and any(
                isinstance(g, torch.Tensor) and g.requires_grad for g in grads
            ):
                input_grads = _raising_when_differentiated(input_grads)
        return (
            None,
            None,
            None,
            None,
            *([None] * ctx.n_outputs),
            *input_grads,
            *([None] * len(saved)),
        )


def _shares_memory(a: Any, b: Any) -> bool:
    try:
        return bool(a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):  # no storage (a subclass): as a view
        return True


def _raising_when_differentiated(results: Any) -> tuple[Any, ...]:
    """``results`` behind a node that raises if differentiated, as ``@once_differentiable``'s."""
    grads: tuple[Any, ...] = tuple(results)
    at = [i for i, g in enumerate(grads) if isinstance(g, torch.Tensor)]
    if not at:
        return grads
    error = torch._C._functions.DelayedError(
        b"trying to differentiate twice a function that was marked with @once_differentiable",
        len(at),
    )

    def fake_requires_grad(g: torch.Tensor) -> torch.Tensor:
        g = g.detach()
        g.requires_grad = True
        return g

    wrapped = error(*(fake_requires_grad(grads[i]) for i in at))
    wrapped = (wrapped,) if isinstance(wrapped, torch.Tensor) else wrapped
    out = list(grads)
    for i, w in zip(at, wrapped, strict=True):
        out[i] = w
    return tuple(out)


def _autograd_function_impl(
    backward: Any,
    outputs: tuple[Any, ...],
    inputs: tuple[Any, ...],
    saved: tuple[Any, ...],
    once_differentiable: bool = False,
) -> Any:
    if torch.is_grad_enabled() and any(getattr(i, "requires_grad", False) for i in inputs):
        apply: Any = _UserBackward.apply
        return apply(
            backward, once_differentiable, len(outputs), len(inputs), *outputs, *inputs, *saved
        )
    return tuple(outputs)  # thunder's autodiff differentiates it with its grad rule


autograd_function = _higher_order(
    "autograd_function", _autograd_function_meta, _autograd_function_impl
)
"""``autograd_function(backward, outputs, inputs, saved)``: the differentiable ``outputs`` of a
``torch.autograd.Function`` (computed before it, with gradients stopped), returned as they are;
their gradients with respect to ``inputs`` are ``backward(*output_gradients, *saved)``: the
user's own backward, recorded as a sub-trace. ``once_differentiable``: the backward was marked
``@once_differentiable``; where torch's autograd records the program, its gradients raise if
differentiated."""
