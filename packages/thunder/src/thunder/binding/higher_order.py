"""torch's higher-order operators inside a jitted function: ``torch.cond``, ``while_loop``,
``map``, ``scan`` and ``associative_scan``.

The functions handed to them are interpreted reentrantly, with this run's lookasides and
callbacks (so their reads are guarded and their torch calls become ops), each into a sub-trace of
a higher-order symbol (``thunder_ir.higher_order``). A predicate known while tracing (a Python
bool, a size comparison) inlines the branch it selects; the values it was computed from are
guarded like any other. The functions must be pure: a write to outside state or an in-place write
into one of their inputs inside them is refused with an error that names the operator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from thunder.binding.regions import RegionsMixin
from thunder.errors import HigherOrderOperatorError, RunsSplit
from thunder.lookasides import native_special
from thunder_interp import interpret
from thunder_ir import Proxy, TensorProxy, Trace
from thunder_ir import higher_order as ho
from thunder_ir import ops as ltorch
from thunder_ir.aliasing import alias_info
from thunder_ir.pytree import tree_flatten, tree_unflatten


def _tensor_leaves(value: Any, what: str) -> tuple[list[Any], Any]:
    leaves, spec = tree_flatten(value)
    for leaf in leaves:
        if not isinstance(leaf, TensorProxy):
            raise RuntimeError(
                f"{what} must be a tuple of possibly nested dict/list/tuple that only consists "
                f"of tensor leaves, but got {value!r}"
            )
    return leaves, spec


def _checked(op: Any, *args: Any) -> Any:
    """``op(*args)``, its contract violations raised as the jit's own error (not as the
    program's: eager would only raise a less precise one)."""
    try:
        return op(*args)
    except ho.HigherOrderError as e:
        raise HigherOrderOperatorError(str(e)) from None


def _slice_of(x: TensorProxy) -> TensorProxy:
    return x.replace(shape=x.shape[1:])


class HigherOrderMixin(RegionsMixin):
    """The lookasides of torch's higher-order operators."""

    def _higher_order_lookasides(self, table: dict[Any, Any]) -> dict[Any, Any]:
        from torch._higher_order_ops import associative_scan, cond, scan, while_loop
        from torch._higher_order_ops import map as hop_map

        return {
            cond: functools.partial(self._cond, table),
            while_loop: functools.partial(self._while_loop, table),
            hop_map: functools.partial(self._map, table),
            scan: functools.partial(self._scan, table),
            associative_scan: functools.partial(self._associative_scan, table),
        }

    def _interpreted(self, table: dict[Any, Any], fn: Any) -> Callable[..., Any]:
        return interpret(  # type: ignore[no-any-return]
            fn, lookasides=table, callbacks=self.callbacks(), native_special=native_special
        )

    def _record(
        self,
        table: dict[Any, Any],
        fn: Callable[..., Any],
        inputs: list[Any],
        name: str,
        what: str,
        fresh_outputs: bool = True,
        split_on_outside_writes: str | None = None,
    ) -> Trace:
        """``fn`` interpreted into a sub-trace; refused if it writes outside state or its inputs.
        Its outputs never share memory with its inputs (``fresh_outputs``), as torch's.
        ``split_on_outside_writes``: a write to outside state or into an input breaks no contract
        (an ``autograd.Function``'s backward, which eager runs as Python): torch runs the call,
        for this reason (or for the input written)."""
        writes = len(self.effects.writes)
        interpreted = self._interpreted(table, fn)
        sub = ho.record_subtrace(interpreted, inputs, name=name, fresh_outputs=fresh_outputs)
        if len(self.effects.writes) != writes and split_on_outside_writes:
            raise RunsSplit(split_on_outside_writes)
        # torch's contract for these functions (eager refuses both too): the program's error.
        if len(self.effects.writes) != writes:
            raise HigherOrderOperatorError(
                f"{what} writes to state outside the function (a global, an attribute, a list), "
                "which torch's higher-order operators do not allow"
            )
        info = alias_info(sub.bound_symbols)
        written = [a.name for a in sub.args if info.is_written(a.name)]
        if written and split_on_outside_writes:
            # An autograd.Function's backward writing its incoming gradient, a saved tensor or a
            # captured one (Megatron's ``weight.main_grad``): eager's Python backward allows it,
            # and the write may show in tensors the program does not see (a gradient buffer
            # autograd shares between branches).
            raise RunsSplit(f"{what} writes {written[0]} in place; torch runs it")
        if written:
            raise HigherOrderOperatorError(
                f"{what} writes its input {written[0]} in place, which torch's higher-order "
                "operators do not allow; write into a copy (clone())"
            )
        return sub

    # -- torch.cond -----------------------------------------------------------------------------

    def _cond(
        self,
        table: dict[Any, Any],
        pred: Any,
        true_fn: Any,
        false_fn: Any,
        operands: Any = (),
    ) -> Any:
        if not callable(true_fn) or not callable(false_fn):
            raise RuntimeError("Expect both branches to be callable.")
        if not isinstance(operands, (tuple, list)):
            raise RuntimeError(
                "Expect operands to be a tuple of possibly nested dict/list/tuple that only "
                f"consists of tensor leaves, but got {operands!r}."
            )
        leaves, spec = _tensor_leaves(tuple(operands), "torch.cond's operands")
        if not isinstance(pred, TensorProxy):
            # Known while tracing: the branch it selects, inline (a symbolic number's truth is
            # checked by the prologue like any other use of it).
            taken = true_fn if pred else false_fn
            return self._interpreted(table, taken)(*operands)
        if pred.numel() != 1:
            raise RuntimeError(
                f"Expected pred to be bool or single-element tensor, but got {pred.shape}."
            )
        if not pred.dtype.is_boolean:
            pred = ltorch.ne(pred, 0)

        def branch(fn: Any) -> Callable[..., Any]:
            return lambda *values: fn(*tree_unflatten(list(values), spec))

        subs = [
            self._record(table, branch(true_fn), leaves, "cond_true", "torch.cond's true_fn"),
            self._record(table, branch(false_fn), leaves, "cond_false", "torch.cond's false_fn"),
        ]
        (true_sub, false_sub), caps = ho.shared_signature(subs, len(leaves))
        return _checked(ho.cond, pred, true_sub, false_sub, (*leaves, *caps))

    # -- while_loop -----------------------------------------------------------------------------

    def _while_loop(self, table: dict[Any, Any], cond_fn: Any, body_fn: Any, carried: Any) -> Any:
        if not isinstance(carried, (tuple, list)):
            raise RuntimeError(f"carried_inputs must be a tuple or list, got {type(carried)}")
        leaves, spec = _tensor_leaves(tuple(carried), "while_loop's carried_inputs")

        def cond_call(*values: Any) -> Any:
            return cond_fn(*tree_unflatten(list(values), spec))

        def body_call(*values: Any) -> Any:
            out = body_fn(*tree_unflatten(list(values), spec))
            return tuple(tree_flatten(tuple(out) if isinstance(out, list) else out)[0])

        subs = [
            self._record(table, cond_call, leaves, "while_cond", "while_loop's cond_fn"),
            self._record(table, body_call, leaves, "while_body", "while_loop's body_fn"),
        ]
        (cond_sub, body_sub), caps = ho.shared_signature(subs, len(leaves))
        out = _checked(ho.while_loop, cond_sub, body_sub, tuple(leaves), tuple(caps))
        return tree_unflatten(list(out), spec)

    # -- map --------------------------------------------------------------------------------------

    def _map(self, table: dict[Any, Any], f: Any, xs: Any, *args: Any) -> Any:
        x_leaves, x_spec = _tensor_leaves(xs, "map's xs")
        arg_leaves, arg_spec = tree_flatten(args)
        n_xs = len(x_leaves)

        def call(*values: Any) -> Any:
            sliced = tree_unflatten(list(values[:n_xs]), x_spec)
            return f(sliced, *tree_unflatten(list(values[n_xs:]), arg_spec))

        inputs = [*(_slice_of(x) for x in x_leaves), *arg_leaves]
        sub = self._record(table, call, inputs, "map_body", "map's f")
        n_params = n_xs + sum(isinstance(a, Proxy) for a in arg_leaves)
        extra = (*(a for a in arg_leaves if isinstance(a, Proxy)), *ho.captures(sub, n_params))
        return _checked(ho.tensor_map, sub, tuple(x_leaves), extra)

    # -- scan and associative_scan ----------------------------------------------------------------

    def _scan(
        self,
        table: dict[Any, Any],
        combine_fn: Any,
        init: Any,
        xs: Any,
        *,
        dim: int = 0,
        reverse: bool = False,
    ) -> Any:
        init_leaves, init_spec = _tensor_leaves(init, "scan's init")
        x_leaves, x_spec = _tensor_leaves(xs, "scan's xs")
        if not x_leaves:
            raise RuntimeError("scan: xs must contain at least one tensor")
        x_leaves = [x if dim == 0 else ltorch.movedim(x, dim, 0) for x in x_leaves]
        n_init, n_xs = len(init_leaves), len(x_leaves)
        y_spec: list[Any] = []

        def call(*values: Any) -> Any:
            carry = tree_unflatten(list(values[:n_init]), init_spec)
            x = tree_unflatten(list(values[n_init : n_init + n_xs]), x_spec)
            out = combine_fn(carry, x)
            if not isinstance(out, (tuple, list)) or len(out) != 2:
                raise RuntimeError("scan: combine_fn must return a tuple (next_carry, y)")
            next_leaves = tree_flatten(out[0])[0]
            y_leaves, spec = tree_flatten(out[1])
            y_spec.append(spec)
            return tuple(next_leaves), tuple(y_leaves)

        inputs = [*init_leaves, *(_slice_of(x) for x in x_leaves)]
        sub = self._record(table, call, inputs, "scan_combine", "scan's combine_fn")
        caps = ho.captures(sub, n_init + n_xs)
        carry, ys = _checked(
            ho.scan, sub, tuple(init_leaves), tuple(x_leaves), tuple(caps), bool(reverse)
        )
        ys = [y if dim == 0 else ltorch.movedim(y, 0, dim) for y in ys]
        return tree_unflatten(list(carry), init_spec), tree_unflatten(list(ys), y_spec[0])

    def _associative_scan(
        self,
        table: dict[Any, Any],
        combine_fn: Any,
        xs: Any,
        dim: int,
        reverse: bool = False,
        combine_mode: str = "pointwise",
    ) -> Any:
        """A sequential scan (``y_0 = x_0``, ``y_i = combine_fn(y_{i-1}, x_i)``): for the
        associative ``combine_fn`` the operator requires, equal to torch's tree reduction up to
        floating-point rounding."""
        if combine_mode not in ("pointwise", "generic"):
            raise ValueError(
                f"combine_mode must be 'pointwise' or 'generic', but got {combine_mode!r}"
            )
        leaves, spec = _tensor_leaves(xs, "associative_scan's xs")
        moved = [ltorch.movedim(x, dim, 0) for x in leaves]
        if reverse:
            moved = [ltorch.flip(x, (0,)) for x in moved]
        n = moved[0].shape[0]
        first = [ltorch.getitem(x, 0) for x in moved]
        if n == 1:
            ys = [ltorch.unsqueeze(f, 0) for f in first]
        else:
            rest = [ltorch.getitem(x, slice(1, None)) for x in moved]

            def step(carry: Any, x: Any) -> Any:
                out = combine_fn(carry, x)
                return out, out

            init = tree_unflatten(first, spec)
            _, stacked = self._scan(table, step, init, tree_unflatten(rest, spec))
            stacked_leaves = tree_flatten(stacked)[0]
            ys = [ltorch.cat([ltorch.unsqueeze(f, 0), s], 0) for f, s in zip(first, stacked_leaves)]
        if reverse:
            ys = [ltorch.flip(y, (0,)) for y in ys]
        return tree_unflatten([ltorch.movedim(y, 0, dim) for y in ys], spec)
