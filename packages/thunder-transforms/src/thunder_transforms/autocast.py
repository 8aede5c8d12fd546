"""Autocast: the trace rewritten to run as ``torch.autocast(device_type, dtype)`` runs it eagerly.

Ops on torch's lower-precision list (matmuls, linear, convolutions, scaled dot-product attention)
get their floating-point inputs (float64 excepted) converted to the low dtype first and so compute
and return it; ops on its float32 list (losses, ``prod``) get theirs converted to float32; every
other op runs on whatever dtypes reach it, with the usual type promotion. The lists are those of
torch's CPU autocast (``aten/src/ATen/autocast_mode.cpp``), restricted to the ops this IR has, and
were checked against eager ``torch.autocast("cpu", dtype=torch.bfloat16)`` in torch 2.13.

The trace is replayed op by op into a new one (dtypes change downstream of a cast, so composites
are recorded again); ops whose inputs did not change are kept as they were. A composite op off the
lists whose decomposition contains a listed op is replayed through its decomposition, except a
checkpointed region (``OpTag.CHECKPOINT``), which is replayed into a new region of the same name,
and the functions of higher-order symbols (``cond``, ``while_loop``, ``map``, ``scan``), which are
replayed as sub-traces taking the (possibly cast) operands.
``regions=`` gives the dtype per top-level bound symbol (None: autocast off there), for programs
that enter and leave ``torch.autocast`` themselves.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch

from thunder_ir import (
    BoundSymbol,
    OpTag,
    PassRecord,
    Proxy,
    Symbol,
    TensorProxy,
    Trace,
    dtypes,
    tracectx,
)
from thunder_ir import higher_order as ho
from thunder_ir.dtypes import DType
from thunder_ir.pytree import tree_flatten, tree_map
from thunder_ir.tracectx import require_tracectx

__all__ = ["FP32_OPS", "LOWER_PRECISION_OPS", "autocast"]

# Symbol ids. einsum is not on torch's list but runs on bmm, which is (for two operands or more).
LOWER_PRECISION_OPS: frozenset[str] = frozenset(
    {
        *(f"ltorch.{n}" for n in ("linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "prelu")),
        *(f"ltorch.conv{n}d" for n in (1, 2, 3)),
        *(f"ltorch.conv_transpose{n}d" for n in (1, 2, 3)),
        "ltorch.scaled_dot_product_attention",
        "ltorch.einsum",
        "prims.matmul",
        "prims.linear",
        "prims.convolution",
    }
)
FP32_OPS: frozenset[str] = frozenset(
    f"ltorch.{n}"
    for n in (
        "prod",
        "cross_entropy",
        "nll_loss",
        "mse_loss",
        "l1_loss",
        "smooth_l1_loss",
        "huber_loss",
        "kl_div",
        "binary_cross_entropy",
        "binary_cross_entropy_with_logits",
        "avg_pool3d",
    )
)


def _listed(bsym: BoundSymbol) -> bool:
    return bsym.sym.id in LOWER_PRECISION_OPS or bsym.sym.id in FP32_OPS


def _contains_listed(bsym: BoundSymbol) -> bool:
    return any(_listed(s) or _contains_listed(s) for s in bsym.subsymbols)


def _eligible(x: Any) -> bool:
    return isinstance(x, TensorProxy) and x.dtype.is_float and x.dtype.strong() != dtypes.float64


# Higher-order symbols whose functions compute values of the program: replayed with them.
_HIGHER_ORDER = frozenset(s.id for s in (ho.cond, ho.while_loop, ho.tensor_map, ho.scan))


def _slices(xs: Sequence[Any]) -> list[Any]:
    return [x.replace(shape=x.shape[1:]) for x in xs]


class _Replay:
    def __init__(self, new: Trace, target: DType | None) -> None:
        self.new = new
        self.target = target
        self.env: dict[str, Any] = {}

    def lookup(self, x: Any) -> Any:
        return self.env.get(x.name, x) if isinstance(x, Proxy) else x

    def cast_all(self, args: Any, kwargs: Any, to: DType) -> tuple[Any, Any]:
        from thunder_ir import prims

        def cast(x: Any) -> Any:
            if _eligible(x) and x.dtype.strong() != to:
                return prims.convert_element_type(x, to)
            return x

        return tree_map(cast, args), tree_map(cast, kwargs)

    def visit(self, bsym: BoundSymbol) -> None:
        args = tree_map(self.lookup, bsym.args)
        kwargs = tree_map(self.lookup, bsym.kwargs)
        changed = any(
            self.env.get(p.name, p) is not p for p in bsym.flat_proxy_args
        )  # an input was replaced
        sym_id = bsym.sym.id
        if sym_id in _HIGHER_ORDER and (changed or self.target is not None):
            # Its functions are replayed too, on the (possibly cast) operands.
            self.call(bsym, self._higher_order_args(bsym.sym, args), kwargs, True)
            return
        if OpTag.CHECKPOINT in bsym.sym.tags and (
            changed or (self.target is not None and _contains_listed(bsym))
        ):
            # Replayed from its subsymbols (never by calling the region's function again).
            self.call(bsym, args, kwargs, True, region=self._region(bsym))
        elif self.target is None:  # outside autocast: only the dtypes flowing in may have changed
            self.call(bsym, args, kwargs, changed)
        elif sym_id in LOWER_PRECISION_OPS:
            if sym_id == "ltorch.einsum" and sum(_eligible(a) for a in tree_flatten(args)[0]) < 2:
                self.call(bsym, args, kwargs, changed)
                return
            args, kwargs = self.cast_all(args, kwargs, self.target)
            self.call(bsym, args, kwargs, True)
        elif sym_id in FP32_OPS:
            args, kwargs = self.cast_all(args, kwargs, dtypes.float32)
            self.call(bsym, args, kwargs, True)
        elif bsym.subsymbols and _contains_listed(bsym):
            for sub in bsym.subsymbols:
                self.visit(sub)
        else:
            self.call(bsym, args, kwargs, changed)

    def _higher_order_args(self, sym: Symbol, args: Any) -> tuple[Any, ...]:
        """The arguments of a higher-order call with each function replayed under this
        autocast state, taking the (new) operands."""
        if sym is ho.cond:
            pred, t, f, ops = args
            return (pred, self._subtrace(t, list(ops)), self._subtrace(f, list(ops)), ops)
        if sym is ho.while_loop:
            c, b, carried, extra = args
            protos = [*carried, *extra]
            return (self._subtrace(c, protos), self._subtrace(b, protos), carried, extra)
        if sym is ho.tensor_map:
            fn, xs, rest = args
            return (self._subtrace(fn, [*_slices(xs), *rest]), xs, rest)
        combine, init, xs, extra, reverse = args
        protos = [*init, *_slices(xs), *extra]
        return (self._subtrace(combine, protos), init, xs, extra, reverse)

    def _subtrace(self, sub: Trace, inputs: list[Any]) -> Trace:
        target = self.target

        def body(*values: Any) -> Any:
            inner = _Replay(require_tracectx("autocast"), target)
            inner.env.update({p.name: v for p, v in zip(sub.args, values)})
            for b in sub.bound_symbols:
                if b.has_tag(OpTag.RETURN):
                    return tree_map(inner.lookup, b.args[0] if b.args else None)
                inner.visit(b)
            return None

        return ho.record_subtrace(body, inputs, name=sub.fn_name.rstrip("0123456789"))

    def _region(self, bsym: BoundSymbol) -> Symbol:
        """A checkpointed region replayed under autocast, still one checkpointed region."""
        from thunder_transforms.checkpoint import checkpoint_symbol

        target = self.target

        def region(*args: Any, **kwargs: Any) -> Any:
            inner = _Replay(self.new, target)
            olds = tree_flatten((bsym.args, bsym.kwargs))[0]
            news = tree_flatten((args, kwargs))[0]
            for o, n in zip(olds, news):
                if isinstance(o, Proxy):
                    inner.env[o.name] = n
            for sub in bsym.subsymbols:
                inner.visit(sub)
            return tree_map(inner.lookup, bsym.output)

        return checkpoint_symbol(region, name=bsym.sym.name)

    def call(
        self, bsym: BoundSymbol, args: Any, kwargs: Any, changed: bool, region: Symbol | None = None
    ) -> None:
        if not changed and args == bsym.args and kwargs == bsym.kwargs:
            self.new.record(bsym)
            return
        try:
            out = (region or bsym.sym)(*args, **kwargs)
        except Exception:
            if not bsym.sym.is_prim or bsym.sym.id in _HIGHER_ORDER:
                raise
            # A prim inside a replayed decomposition takes inputs of one dtype: give its inputs
            # back the dtypes it was recorded with.
            args, kwargs = self._as_recorded(bsym, args, kwargs)
            out = bsym.sym(*args, **kwargs)
        olds, news = tree_flatten(bsym.output)[0], tree_flatten(out)[0]
        for o, n in zip(olds, news):
            if isinstance(o, Proxy):
                self.env[o.name] = n

    def _as_recorded(self, bsym: BoundSymbol, args: Any, kwargs: Any) -> tuple[Any, Any]:
        from thunder_ir import prims

        recorded = {p.name: p for p in bsym.flat_proxy_args}
        back = {v.name: recorded[k] for k, v in self.env.items() if isinstance(v, Proxy)}

        def undo(x: Any) -> Any:
            old = back.get(x.name) if isinstance(x, TensorProxy) else None
            if isinstance(old, TensorProxy) and old.dtype != x.dtype:
                return prims.convert_element_type(x, old.dtype)
            return x

        return tree_map(undo, args), tree_map(undo, kwargs)


def _target(dtype: DType | torch.dtype) -> DType:
    target = dtype if isinstance(dtype, DType) else dtypes.from_torch_dtype(dtype)
    if target.strong() not in (dtypes.bfloat16, dtypes.float16):
        raise ValueError(f"autocast to {target}: expected bfloat16 or float16")
    return target.strong()


def autocast(
    trace: Trace,
    dtype: DType | torch.dtype = dtypes.bfloat16,
    device_type: str = "cpu",
    *,
    regions: Sequence[DType | torch.dtype | None] | None = None,
) -> Trace:
    """``trace`` computing as under ``torch.autocast(device_type, dtype=dtype)`` (see the module
    docstring for the op lists). Only CPU autocast's lists are implemented.

    ``regions``, when given, holds one entry per bound symbol of ``trace`` (top level): the
    autocast dtype it runs under, or None where autocast is off (a ``with torch.autocast(...)``
    block inside a program); ``dtype`` is then unused."""
    start = time.perf_counter()
    if device_type != "cpu":
        raise NotImplementedError(f"autocast for {device_type!r}: only 'cpu' is implemented")
    if regions is not None and len(regions) != len(trace.bound_symbols):
        raise ValueError("autocast: regions needs one entry per bound symbol of the trace")
    targets = [None if d is None else _target(d) for d in regions] if regions is not None else None
    new = Trace(trace.fn_name, args=trace.args, names=trace.names)
    new._counters = dict(trace._counters)
    new.constraints = list(trace.constraints)
    new.docstring = trace.docstring
    replay = _Replay(new, _target(dtype) if targets is None else None)
    with tracectx(new):
        for i, bsym in enumerate(trace.bound_symbols):
            if targets is not None:
                replay.target = targets[i]
            replay.visit(bsym)
    new.history = (*trace.history, PassRecord("autocast", time.perf_counter() - start))
    return new
