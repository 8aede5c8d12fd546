"""Functionalization: a trace with in-place writes as a trace without them (for autodiff).

Autodiff reads a trace as dataflow: ``s = sum(h)`` depends on ``h`` as it was defined. After
``h.diagonal().mul_(3)`` the name ``h`` holds other values, and its gradient goes through the
write. ``functionalize`` rewrites every write into new values, as torch's own functionalization
does: a write into a value ``d`` of an alias group (``d`` is a view of the group's root ``r``, by a
chain of view ops) computes the root anew, ``r' = r`` with the positions ``d`` covers replaced by
the written values, and every later read of ``r`` or of a view of it reads ``r'`` or the view
replayed on ``r'``. The positions are found by replaying the chain of views on ``arange``: a view's
elements are positions of its root whatever the strides, so one ``index_put`` scatters them back.

Roots that are inputs of the trace get their final value written back at the end
(``prims.copy_(final, x)``), the only writes left; the caller sees its tensor updated, and the
result of that copy is what the trace returns for the input.

Refused (``NotImplementedError``, naming the op), where the values alone cannot say what eager
does: writes through, or reads after a write of, the result of an ``OpTag.STRIDE_DEPENDENT`` op
(``reshape``, ``flatten``, ``contiguous`` return a view or a copy by the strides of their input;
``as_strided`` reads memory), through ``detach`` (the write is not recorded by autograd) and
through ``real``/``imag`` of a complex tensor. A write through a view with an element twice
(``expand``) raises torch's error (as eager's backward of it does).
"""

from __future__ import annotations

import functools
import operator
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from thunder_ir import (
    BoundSymbol,
    OpTag,
    PassRecord,
    Proxy,
    TensorProxy,
    Trace,
    dtypes,
    prims,
    tracectx,
)
from thunder_ir import ops as ltorch
from thunder_ir.aliasing import aliased_inputs, with_writes_exposed, writes_in_place
from thunder_ir.pytree import tree_iter, tree_map
from thunder_ir.symbol import call_again, leaf_prims
from thunder_transforms.passes import substitute

__all__ = ["Functionalized", "ViewOrigin", "functionalize", "view_origins"]

_OVERLAP_MESSAGE = (
    "unsupported operation: more than one element of the written-to tensor refers to a single "
    "memory location. Please clone() the tensor before performing the operation."
)


@dataclass(frozen=True)
class Functionalized:
    """The result of :func:`functionalize`: the trace, and for each input it writes (by position)
    the output of the final ``prims.copy_`` into it; ``through_views`` are the inputs written
    through a view of them."""

    trace: Trace
    written_inputs: dict[int, Proxy]
    through_views: frozenset[int]


@dataclass(frozen=True)
class _View:
    """How a value was made from its base: ``bsym`` (``kind`` "view": replayable on values;
    "identity": the base itself; otherwise why it cannot be replayed)."""

    base: str
    bsym: BoundSymbol | None
    kind: str


def _is_copy(b: BoundSymbol) -> bool:
    return b.sym is prims.copy_


def _kind(b: BoundSymbol, base: TensorProxy, out: TensorProxy) -> str:
    tags = b.sym.tags
    if OpTag.STRIDE_DEPENDENT in tags:
        return "strides"
    if any(p.sym is prims.stop_gradient for p in leaf_prims(b)):
        return "detach"
    if base.dtype.is_complex and not out.dtype.is_complex:
        return "complex"
    if OpTag.VIEW in tags:
        return "view"
    return "identity"  # a conversion that changes nothing returns its input itself


def _exposed_copies(region: BoundSymbol) -> bool:
    """Whether ``_regions_exposed`` exposed writes among the region's own ops."""
    return any(
        _is_copy(s) or (s.has_tag(OpTag.CHECKPOINT) and _exposed_copies(s))
        for s in region.subsymbols
    )


def _with_region_internals(bsyms: list[BoundSymbol]) -> Iterator[BoundSymbol]:
    """``bsyms``, with each checkpointed region whose writes are exposed replaced by its
    subsymbols (where views and producers of its values are)."""
    for b in bsyms:
        if b.has_tag(OpTag.CHECKPOINT) and _exposed_copies(b):
            yield from _with_region_internals(list(b.subsymbols))
        else:
            yield b


def _regions_exposed(bsyms: list[BoundSymbol], only: frozenset[str] | None) -> list[BoundSymbol]:
    """Checkpointed regions kept whole by ``with_writes_exposed`` (they write none of the values
    they read) that write into their own intermediates in ``only``: the region with its writes
    exposed inside, to be functionalized there."""
    out: list[BoundSymbol] = []
    for b in bsyms:
        if b.has_tag(OpTag.CHECKPOINT) and writes_in_place(b) and _writes_inside(b, only):
            inner = _regions_exposed(with_writes_exposed(b.subsymbols, _everything(b)), only)
            out.append(b.replace(subsymbols=tuple(inner)))
        else:
            out.append(b)
    return out


def _destinations(bsyms: Iterable[BoundSymbol]) -> Iterator[str]:
    for b in bsyms:
        if _is_copy(b) and isinstance(b.args[1], Proxy):
            yield b.args[1].name
        yield from _destinations(b.subsymbols)


def _writes_inside(region: BoundSymbol, only: frozenset[str] | None) -> bool:
    return any(only is None or n in only for n in _destinations(region.subsymbols))


def _everything(region: BoundSymbol) -> frozenset[str]:
    """Every value the region's ops write: all of them are exposed inside it."""
    return frozenset(_destinations(region.subsymbols))


def _views(bsyms: list[BoundSymbol]) -> dict[str, _View]:
    """For every value that is a view of another in torch's semantics, how it was made."""
    views: dict[str, _View] = {}
    for b in bsyms:
        if _is_copy(b):
            dst = b.args[1]
            for o in b.flat_proxy_outs:
                views[o.name] = _View(dst.name, None, "identity")
            continue
        if not ({OpTag.VIEW, OpTag.MAY_RETURN_VIEW} & b.sym.tags):
            continue
        first: dict[str, TensorProxy] = {}
        for out, inp in aliased_inputs(b):
            if isinstance(out, TensorProxy) and isinstance(inp, TensorProxy):
                first.setdefault(out.name, inp)  # the op's own tensor first (``self``)
        for o in b.flat_proxy_outs:
            base = first.get(o.name)
            if base is not None and isinstance(o, TensorProxy):
                views[o.name] = _View(base.name, b, _kind(b, base, o))
    return views


_REFUSALS = {
    "strides": (
        "is a view or a copy of its input depending on the input's strides (as_strided: reads "
        "memory), which gradients cannot follow; use .view() (always a view) or .clone() (a copy)"
    ),
    "detach": "is a detached view (autograd does not record writes through it)",
    "complex": "is the real or imaginary part of a complex tensor",
}


class _Functionalizer:
    def __init__(self, trace: Trace, only: frozenset[str] | None = None) -> None:
        self.trace = trace
        self.only = only
        self.out = trace.derive([], pass_name="functionalize")
        self.bsyms = _regions_exposed(with_writes_exposed(trace.bound_symbols, only), only)
        self.views = _views(list(_with_region_internals(self.bsyms)))
        self.producers = {
            p.name: b for b in _with_region_internals(self.bsyms) for p in b.flat_proxy_outs
        }
        self.current: dict[str, Proxy] = {}  # name -> its value now (written groups only)
        self.version: dict[str, int] = {}  # root -> number of writes so far
        self.made_at: dict[str, int] = {}  # name -> version of its root its value reflects
        self.written_roots: set[str] = set()
        self.through_views: set[str] = set()

    def root(self, name: str) -> str:
        while name in self.views:
            name = self.views[name].base
        return name

    def path(self, name: str) -> list[str]:
        """The names from just below the root down to ``name``."""
        names: list[str] = []
        while name in self.views:
            names.append(name)
            name = self.views[name].base
        return names[::-1]

    def refuse(self, name: str, what: str) -> None:
        view = self.views[name]
        assert view.bsym is not None
        raise NotImplementedError(
            f"{what} the result of {view.bsym.sym.qualified_name} ({name}){view.bsym.where()} "
            f"while computing gradients: it {_REFUSALS[view.kind]}"
        )

    def value(self, p: Proxy) -> Proxy:
        """``p``'s value at this point of the program."""
        r = self.root(p.name)
        if r not in self.version:
            return p
        if p.name == r:
            return self.current[r]
        if self.made_at.get(p.name) == self.version[r]:
            return self.current.get(p.name, p)
        view = self.views[p.name]
        if view.kind not in ("view", "identity"):
            self.refuse(p.name, "reading after an in-place write")
        base = self.value(self._proxy(view.base))
        if view.kind == "identity" or view.bsym is None:
            new: Proxy = base
            self.current[p.name], self.made_at[p.name] = new, self.version[r]
            return new
        replayed = self.replay(view.bsym, view.base, base)
        for old, fresh in zip(view.bsym.flat_proxy_outs, replayed):
            if self.root(old.name) == r:
                self.current[old.name], self.made_at[old.name] = fresh, self.version[r]
        return self.current[p.name]

    def _proxy(self, name: str) -> Proxy:
        for a in self.trace.args:
            if a.name == name:
                return a
        b = self.producers[name]
        return next(p for p in b.flat_proxy_outs if p.name == name)

    def replay(self, b: BoundSymbol, base_name: str, base: Proxy) -> list[Proxy]:
        """``b`` called again with ``base`` for its argument ``base_name``: its new outputs."""

        def swap(x: Any) -> Any:
            return base if isinstance(x, Proxy) and x.name == base_name else x

        with tracectx(self.out):
            out = call_again(b, tree_map(swap, b.args), tree_map(swap, b.kwargs))
        return [p for p in tree_iter(out) if isinstance(p, Proxy)]

    def write(self, b: BoundSymbol) -> None:
        src, dst = b.args[0], b.args[1]
        r = self.root(dst.name)
        names = self.path(dst.name)
        for name in names:
            if self.views[name].kind not in ("view", "identity"):
                self.refuse(name, "in-place write through")
        value = self.value(src)
        root = self._proxy(r)
        assert isinstance(root, TensorProxy)
        base = self.value(root) if r in self.version else root
        with tracectx(self.out):
            steps = [n for n in names if self.views[n].kind == "view"]
            if not steps:
                # The written tensor keeps its place in autograd's graph even when the values
                # written do not depend on it (zero_, fill_, copy_ of a constant): it still
                # requires grad, with a zero gradient to what it held. ``base`` comes first:
                # the result takes its layout, as the tensor eager writes in place keeps its own.
                new = value if self._depends_on(value, base) else prims.where(False, base, value)
            else:
                new = self.scatter(base, steps, value)
        self.version[r] = self.version.get(r, 0) + 1
        self.current[r] = new
        self.written_roots.add(r)
        if steps:
            self.through_views.add(r)

    def _depends_on(self, value: Proxy, base: Proxy) -> bool:
        """Whether ``value`` is computed from ``base`` (in the trace built so far)."""
        producers = {
            p.name: b for scope in self.out.scopes for b in scope for p in b.flat_proxy_outs
        }
        stack, seen = [value.name], set()
        while stack:
            name = stack.pop()
            if name == base.name:
                return True
            if name in seen or name not in producers:
                continue
            seen.add(name)
            stack.extend(p.name for p in producers[name].flat_proxy_args)
        return False

    def scatter(self, base: Proxy, steps: list[str], value: Proxy) -> Proxy:
        """``base`` with the elements the chain of views ``steps`` selects replaced by ``value``."""
        assert isinstance(base, TensorProxy) and isinstance(value, TensorProxy)
        n = base.numel()
        positions: Proxy = prims.reshape(
            prims.iota(n, start=0, step=1, device=base.device, dtype=dtypes.int64),
            tuple(base.shape),
        )
        previous: Proxy = base
        for name in steps:
            view = self.views[name]
            assert view.bsym is not None
            replayed = self.replay(view.bsym, view.base, positions)
            positions = replayed[[p.name for p in view.bsym.flat_proxy_outs].index(name)]
            out = self._proxy(name)
            if _overlapping(view.bsym, previous, out):
                # Eager writes one value through an expanded view (fill_), but its backward of
                # such a write raises this.
                raise RuntimeError(_OVERLAP_MESSAGE)
            previous = out
        assert isinstance(positions, TensorProxy)
        m = positions.numel()
        index = prims.reshape(positions, (m,))
        values = prims.reshape(value, (m,))
        shape = tuple(base.shape)
        if len(shape) <= 1 or (type(n) is int and n == 0):
            flat = prims.reshape(base, (n,))
            return prims.reshape(prims.index_put(flat, [index], values, False), shape)  # type: ignore[no-any-return]
        # One index per dimension (the positions unravelled), not a flattened base: index_put
        # then returns the base's own layout, as the tensor eager writes in place keeps it. The
        # sizes may be symbols (an empty base has an empty index: no division by zero runs).
        indices: list[Proxy] = []
        for d, size in enumerate(shape):
            inner = functools.reduce(operator.mul, shape[d + 1 :], 1)
            i = index if type(inner) is int and inner == 1 else prims.floor_divide(index, inner)
            indices.append(prims.remainder(i, size) if d > 0 else i)
        return prims.index_put(base, indices, values, False)  # type: ignore[no-any-return]

    def visit(self, b: BoundSymbol) -> None:
        if _is_copy(b) and (self.only is None or b.args[1].name in self.only):
            self.write(b)
            return
        if b.has_tag(OpTag.CHECKPOINT) and _exposed_copies(b):
            self.region(b)
            return
        mapping = {
            p.name: self.value(p) for p in b.flat_proxy_args if self.root(p.name) in self.version
        }
        mapping = {k: v for k, v in mapping.items() if v.name != k}
        self.out.record(substitute(b, mapping) if mapping else b)
        for o in b.flat_proxy_outs:
            r = self.root(o.name)
            if r in self.version:
                self.current[o.name], self.made_at[o.name] = o, self.version[r]

    def region(self, b: BoundSymbol) -> None:
        """A checkpointed region that writes into its own intermediates: functionalized inside,
        so it stays a region (recomputed in the backward); its outputs are their final values.
        (``_regions_exposed`` flattened the regions that write into what they read.)"""

        def now(x: Any) -> Any:
            return self.value(x) if isinstance(x, Proxy) else x

        args, kwargs = tree_map(now, b.args), tree_map(now, b.kwargs)
        self.out.push_scope()
        for sub in b.subsymbols:
            self.visit(sub)
        subsymbols = self.out.pop_scope()
        output = tree_map(now, b.output)
        self.out.record(
            b.replace(args=args, kwargs=kwargs, output=output, subsymbols=tuple(subsymbols))
        )

    def run(self) -> Functionalized:
        ret: BoundSymbol | None = None
        for b in self.bsyms:
            if b.has_tag(OpTag.RETURN):
                ret = b
                continue
            self.visit(b)
        args = {a.name: i for i, a in enumerate(self.trace.args)}
        returned = ret.args[0] if ret is not None and ret.args else None

        def resolve(x: Any) -> Any:
            return self.value(x) if isinstance(x, Proxy) else x

        inputs_written = sorted(r for r in self.written_roots if r in args)

        def is_input(x: Any) -> bool:
            """Whether ``x`` is a written input itself (not a view of it): returned, it is the
            input tensor, as eager returns it."""
            if not isinstance(x, Proxy) or self.root(x.name) not in inputs_written:
                return False
            return all(self.views[n].kind == "identity" for n in self.path(x.name))

        new_return = tree_map(lambda x: x if is_input(x) else resolve(x), returned)
        written: dict[int, Proxy] = {}
        with tracectx(self.out):
            for r in inputs_written:
                x = self.trace.args[args[r]]
                written[args[r]] = prims.copy_(self.current[r], x)
        finals = {self.trace.args[i].name: t for i, t in written.items()}
        new_return = tree_map(lambda x: finals[self.root(x.name)] if is_input(x) else x, new_return)
        with tracectx(self.out):
            prims.python_return(new_return)
        through = frozenset(args[r] for r in inputs_written if r in self.through_views)
        return Functionalized(self.out, written, through)


# How each view was made from its base (``kind`` "view", "identity", or why functionalization
# cannot replay it on values: "strides", "detach", "complex"), for passes that remake views.
ViewOrigin = _View
view_origins = _views


def _overlapping(b: BoundSymbol, base: Proxy, out: Proxy) -> bool:
    """Whether the view ``out = b(base, ...)`` holds some element of ``base`` twice."""
    if not (isinstance(base, TensorProxy) and isinstance(out, TensorProxy)):
        return False
    n_in, n_out = base.numel(), out.numel()
    if isinstance(n_in, int) and isinstance(n_out, int):
        if n_out > n_in:
            return True  # expand, broadcast_to: more elements than memory
    elif b.sym in _MAY_REPEAT and not _same_shape(base, out):
        return True  # symbolic sizes: it may repeat elements on some call (the safe answer)
    if b.sym is ltorch.unfold:
        dim, size, step = b.args[1:4]
        windows = out.shape[dim % base.ndim] if base.ndim else 1
        if not isinstance(windows, int):
            return bool(step < size)  # windows overlap whenever there is more than one
        return windows > 1 and step < size
    return False


# Views that may hold an element of their base more than once.
_MAY_REPEAT = frozenset(
    {
        ltorch.expand,
        ltorch.expand_as,
        ltorch.broadcast_to,
        ltorch.broadcast_tensors,
        prims.broadcast_in_dim,
        ltorch.as_strided,
    }
)


def _same_shape(a: TensorProxy, b: TensorProxy) -> bool:
    return a.ndim == b.ndim and all(
        x is y or (isinstance(x, int) and isinstance(y, int) and x == y)
        for x, y in zip(a.shape, b.shape)
    )


def functionalize(trace: Trace, *, only: frozenset[str] | None = None) -> Functionalized:
    """``trace`` without in-place writes (see the module docstring); the trace itself, when it
    writes nothing. With ``only``, just the writes into those values are functionalized; the
    others stay in place, in program order (memory nothing differentiated reads)."""
    if not any(writes_in_place(b) for b in trace.bound_symbols):
        return Functionalized(trace, {}, frozenset())
    start = time.perf_counter()
    result = _Functionalizer(trace, only).run()
    seconds = time.perf_counter() - start
    out = result.trace.replace(history=(*trace.history, PassRecord("functionalize", seconds)))
    return Functionalized(out, result.written_inputs, result.through_views)
