"""``torch.autograd.Function`` subclasses inside a jitted function.

``MyFn.apply(*args)`` interprets ``forward`` (and ``setup_context``) into the trace with grad
mode off, as eager runs it, so no gradient flows through what it computes. When an input
requires grad, the user's ``backward`` is interpreted too, into a sub-trace taking one gradient
per differentiable output, and the ``higher_order.autograd_function`` symbol attaches it to the
outputs: autodiff uses it as the grad rule of that region. ``ctx`` supports
``save_for_backward``/``saved_tensors``, attributes, ``needs_input_grad``,
``mark_non_differentiable`` and ``set_materialize_grads`` (the traced backward gets zeros for a
missing output gradient; a call with ``set_materialize_grads(False)`` and several tensor outputs
runs eagerly, as its backward may take None); ``@once_differentiable`` backwards work
(differentiating their gradients raises, as eager's). As eager's ``apply``, only tensors returned
directly or in a top-level tuple are differentiable (not those in a list or dict). A backward
eager would reject (too many gradients, one for a non-tensor argument, of a wrong shape) makes
the call run eagerly: eager raises in the backward, after a forward that ran. A call whose backward writes to outside state (a
counter, a list) runs split: eager makes that write on each backward. A gradient of a
broadcast shape is summed to its input's, one of another dtype converted, as eager's engine
does. ``mark_dirty`` (in-place forwards) is refused. What eager's ``ctx`` rejects (a non-tensor
saved, marked non-differentiable or dirty; a non-bool ``set_materialize_grads``) raises eager's
error, as eager raises it (``_check_ctx_like_eager``).
A class statement defining such a subclass in the program runs its metaclass natively.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from thunder.binding.higher_order import HigherOrderMixin
from thunder.errors import (
    RunsEagerly,
    UnsupportedOperationError,
)
from thunder_ir import Proxy, TensorProxy, get_tracectx
from thunder_ir import higher_order as ho
from thunder_ir import ops as ltorch
from thunder_ir.pytree import tree_iter

__all__ = ["AutogradFunctionMixin", "TracedFunctionCtx"]


def _stand_in(value: Any) -> Any:
    """A concrete value of ``value``'s type (a proxy's value), for torch to judge."""
    if isinstance(value, TensorProxy):
        return torch.empty(0)
    if isinstance(value, Proxy):
        return getattr(value, "value", value)
    return value


def _check_ctx_like_eager(ctx: TracedFunctionCtx, executable: bool) -> None:
    """Raises what eager's ``apply`` raises after ``forward`` for what ``ctx`` was given: a
    non-tensor saved (only where a gradient is recorded), marked non-differentiable or dirty.
    A probe Function with the same calls lets torch raise its own error."""
    saves = executable and any(
        v is not None and not isinstance(v, (TensorProxy, torch.Tensor)) for v in ctx.to_save
    )
    marks = any(not isinstance(v, (TensorProxy, torch.Tensor)) for v in ctx.non_differentiable)
    if not (saves or marks or ctx.dirty):
        return
    to_save = [_stand_in(v) for v in ctx.to_save] if saves else []
    non_differentiable = [_stand_in(v) for v in ctx.non_differentiable]
    dirty = [_stand_in(v) for v in ctx.dirty]

    class _EagerCtxCheck(torch.autograd.Function):
        @staticmethod
        def forward(probe_ctx: Any, x: torch.Tensor) -> torch.Tensor:
            probe_ctx.save_for_backward(*to_save)
            probe_ctx.mark_non_differentiable(*non_differentiable)
            probe_ctx.mark_dirty(*dirty)
            return x.clone()

        @staticmethod
        def backward(probe_ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            return grad

    with torch.enable_grad():
        _EagerCtxCheck.apply(torch.zeros((), requires_grad=executable))  # type: ignore[no-untyped-call]
    if ctx.dirty:
        raise UnsupportedOperationError(
            "ctx.mark_dirty in a torch.autograd.Function",
            "forwards that write their inputs in place are not supported; return a new tensor",
        )


class TracedFunctionCtx:
    """The ``ctx`` a traced ``torch.autograd.Function`` sees."""

    def __init__(self, needs_input_grad: tuple[bool, ...]) -> None:
        self.needs_input_grad = needs_input_grad
        self.to_save: tuple[Any, ...] = ()
        self.non_differentiable: list[Any] = []
        self.materialize_grads = True
        self.dirty: tuple[Any, ...] = ()

    def save_for_backward(self, *tensors: Any) -> None:
        self.to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        return tuple(self.to_save)

    def mark_non_differentiable(self, *tensors: Any) -> None:
        self.non_differentiable = list(tensors)  # a later call replaces, as eager's ctx

    def set_materialize_grads(self, value: bool) -> None:
        if type(value) is not bool and not isinstance(value, Proxy):
            # eager's ctx rejects anything but a bool, with its own TypeError
            torch._C._FunctionBase().materialize_grads = value
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors: Any) -> None:
        if any(not isinstance(t, (TensorProxy, torch.Tensor)) for t in tensors):
            self.dirty = tensors  # eager's error, after forward (_check_ctx_like_eager)
            return
        raise UnsupportedOperationError(
            "ctx.mark_dirty in a torch.autograd.Function",
            "forwards that write their inputs in place are not supported; return a new tensor",
        )

    def save_for_forward(self, *tensors: Any) -> None:
        raise UnsupportedOperationError(
            "ctx.save_for_forward in a torch.autograd.Function", "forward-mode AD"
        )


def _has_setup_context(cls: Any) -> bool:
    base = torch.autograd.function._SingleLevelFunction.setup_context
    return getattr(cls.setup_context, "__func__", cls.setup_context) is not getattr(
        base, "__func__", base
    )


_FunctionMeta = type(torch.autograd.Function)


def _define_function_class(cls: Any, name: str, bases: Any, attrs: Any) -> None:
    """A ``class MyFn(torch.autograd.Function)`` statement the program runs (torch.masked makes
    one per call): the metaclass runs natively. It only sets up the new class, drawing a fresh
    id from torch's global counter (``next`` on it, refused when the program itself calls it,
    would be an outside iterator); the id just tells classes apart, so one drawn at trace time
    serves every call."""
    _FunctionMeta.__init__(cls, name, bases, attrs)  # type: ignore[no-untyped-call]


def _zeros(like: TensorProxy) -> Any:
    return ltorch.zeros_like(like)


class AutogradFunctionMixin(HigherOrderMixin):
    """The lookaside of ``torch.autograd.Function.apply``."""

    def _autograd_function_lookasides(self, table: dict[Any, Any]) -> dict[Any, Any]:
        apply = torch.autograd.Function.__dict__["apply"].__func__
        return {
            apply: functools.partial(self._function_apply, table),
            _FunctionMeta.__init__: _define_function_class,
        }

    def _program_grad_mode(self, on: bool, record_stop_gradient: bool) -> Any:
        """Sets the grad mode the program sees (and, with ``record_stop_gradient``, that of the
        trace being recorded); returns what restores both."""
        trace = get_tracectx()
        assert trace is not None
        old = (self.regions.grad_mode, trace.grad_enabled)
        self.regions.grad_mode = on
        if record_stop_gradient:
            trace.grad_enabled = on

        def restore() -> None:
            self.regions.grad_mode, trace.grad_enabled = old

        return restore

    def _function_apply(self, table: dict[Any, Any], cls: Any, *args: Any, **kwargs: Any) -> Any:
        grad_on = self._grad_mode()
        needs = tuple(
            bool(grad_on and isinstance(a, TensorProxy) and a.requires_grad) for a in args
        )
        ctx = TracedFunctionCtx(needs)
        restore = self._program_grad_mode(False, record_stop_gradient=True)
        try:
            if _has_setup_context(cls):
                out = self._interpreted(table, cls.forward)(*args, **kwargs)
                self._interpreted(table, cls.setup_context)(ctx, args, out)
            else:
                out = self._interpreted(table, cls.forward)(ctx, *args, **kwargs)
        finally:
            restore()
        _check_ctx_like_eager(ctx, executable=any(needs))
        # Eager's apply tracks the tensors returned directly or in a (top-level) tuple, which
        # it returns as a plain tuple; one inside a list or dict is not differentiable.
        is_tuple = isinstance(out, tuple)
        if not any(needs):
            return tuple(out) if is_tuple else out
        leaves = list(out) if is_tuple else [out]
        stopped = {p.name for p in ctx.non_differentiable if isinstance(p, Proxy)}
        tensors = [o for o in leaves if isinstance(o, TensorProxy)]
        diff = [o for o in tensors if o.dtype.is_float and o.name not in stopped]
        if not diff:
            return tuple(leaves) if is_tuple else out
        diff_names = {o.name for o in diff}
        name = getattr(cls, "__name__", "Function")
        if not ctx.materialize_grads and len(tensors) > 1:
            # Its backward gets None for the outputs a backward does not reach, known only then
            # (the traced one would get zeros, and may branch on ``is None``). Eagerly: dynamo's
            # trace of such a backward decides ``is None`` once too.
            raise RunsEagerly(
                f"calls {name}.apply, whose backward takes None for an output's missing gradient "
                "(ctx.set_materialize_grads(False))"
            )

        def backward(*grads: Any) -> tuple[Any, ...]:
            given = iter(grads)
            per_output = [
                (next(given) if o.name in diff_names else _zeros(o))
                if isinstance(o, TensorProxy)
                else None
                for o in leaves
            ]
            result = self._interpreted(table, cls.backward)(ctx, *per_output)
            return _input_gradients(name, result, args, needs)

        protos = [o.replace(requires_grad=False) for o in diff]
        restore = self._program_grad_mode(False, record_stop_gradient=False)
        # Eager's engine runs a backward with autocast off (torch.amp.custom_bwd enters the
        # forward's again, inside it).
        self.regions.autocast_stack.append({})
        try:
            sub = self._record(
                table,
                backward,
                protos,
                f"{name}_backward",
                f"{name}.backward",
                fresh_outputs=False,
                split_on_outside_writes=(
                    f"calls {name}.apply, whose backward writes to state outside it (a global, "
                    "an attribute, a list) on each backward; torch runs it"
                ),
            )
        finally:
            self.regions.autocast_stack.pop()
            restore()
        saved = ho.captures(sub, len(protos))
        outside = _outside_tensors_read(saved, (ctx.to_save, args, kwargs))
        if outside:
            # Eagerly, not split: torch.compile reads such a global at the forward too.
            raise RunsEagerly(
                f"calls {name}.apply, whose backward reads the tensor {outside[0]} from outside "
                "it (a global, an attribute), which eager reads when the backward runs"
            )
        inputs = tuple(a for a, n in zip(args, needs) if n)
        once = getattr(cls.backward, "__code__", None) is _ONCE_DIFFERENTIABLE_CODE
        new = ho.autograd_function(sub, tuple(diff), inputs, tuple(saved), once_differentiable=once)
        replaced = {o.name: n for o, n in zip(diff, new)}
        result = [replaced.get(o.name, o) if isinstance(o, TensorProxy) else o for o in leaves]
        return tuple(result) if is_tuple else result[0]


def _outside_tensors_read(captured: Any, given: Any) -> list[str]:
    """The names of the tensors made outside the program that a backward reads other than
    through ``ctx.saved_tensors`` or ``apply``'s arguments: eager reads (the current value of)
    such a global or attribute when the backward runs, the program would at the forward."""
    trace = get_tracectx()
    assert trace is not None
    made = {p.name for b in trace.bound_symbols for p in b.flat_proxy_outs}
    own = {p.name for p in tree_iter(given) if isinstance(p, TensorProxy)}
    return [
        p.name
        for p in captured
        if isinstance(p, TensorProxy) and p.name not in made and p.name not in own
    ]


# The code of ``@once_differentiable``'s wrapper: a backward marked with it runs it.
_ONCE_DIFFERENTIABLE_CODE = torch.autograd.function.once_differentiable(lambda ctx: None).__code__


def _input_gradients(
    name: str, result: Any, args: tuple[Any, ...], needs: tuple[bool, ...]
) -> tuple[Any, ...]:
    """The gradients ``backward`` returned for the inputs that need one (None stays None: eager
    leaves such an input's ``.grad`` None), checked as eager checks them: where eager's backward
    would raise, the call runs eagerly (its forward runs, as eager's; the error comes in the
    backward)."""
    grads = result if isinstance(result, tuple) else (result,)
    if len(grads) < len(args) or any(g is not None for g in grads[len(args) :]):
        # Eager raises in its backward, after a forward that ran: the call runs eagerly.
        raise RunsEagerly(
            f"calls {name}.apply, whose backward returns an incorrect number of gradients "
            f"(expected {len(args)}, got {len(grads)}): eager raises when it runs"
        )
    for i, (a, g) in enumerate(zip(args, grads)):
        if g is not None and not isinstance(a, TensorProxy):
            raise RunsEagerly(
                f"calls {name}.apply, whose backward returns a gradient for argument {i}, "
                "which is not a tensor: eager raises when it runs"
            )
    out: list[Any] = []
    for i, (a, g, need) in enumerate(zip(args, grads, needs)):
        if not need:
            continue
        if g is None:
            out.append(None)
            continue
        if not isinstance(g, TensorProxy):
            raise RunsEagerly(
                f"calls {name}.apply, whose backward returns a gradient of type "
                f"{type(g).__name__} at index {i}: eager raises when it runs"
            )
        if tuple(g.shape) != tuple(a.shape):
            if not _expandable_to(tuple(a.shape), tuple(g.shape)):
                raise RunsEagerly(
                    f"calls {name}.apply, whose backward returns an invalid gradient at index "
                    f"{i} - got {list(g.shape)} but expected shape compatible with "
                    f"{list(a.shape)}: eager raises when it runs"
                )
            g = _summed_to(g, tuple(a.shape))
        if g.dtype != a.dtype:  # eager's engine converts it too (validate_outputs)
            g = ltorch.to(g, a.dtype)
        out.append(g)
    return tuple(out)


def _expandable_to(shape: tuple[Any, ...], to: tuple[Any, ...]) -> bool:
    """Whether ``shape`` broadcasts to ``to`` (torch's ``is_expandable_to``)."""
    if len(shape) > len(to):
        return False
    return all(s == 1 or s == t for s, t in zip(reversed(shape), reversed(to)))


def _summed_to(g: TensorProxy, shape: tuple[Any, ...]) -> Any:
    """``g`` summed to ``shape``, as eager's engine reduces a broadcast gradient (``sum_to``)."""
    lead = g.ndim - len(shape)
    dims = [*range(lead)]
    dims += [lead + k for k, s in enumerate(shape) if s == 1 and g.shape[lead + k] != 1]
    out = ltorch.sum(g, dims, keepdim=True) if dims else g
    return ltorch.reshape(out, shape) if lead else out
