"""Local rewrites of an execution trace that remove torch calls eager code never makes.

The IR makes broadcasting explicit: ``a * w`` with ``w`` of shape ``(32,)`` and ``a`` of shape
``(2, 8, 32)`` is ``broadcast_in_dim(w, (2, 8, 32), (2,))`` then ``mul``. Torch broadcasts by
itself, so where the expanded tensor only feeds torch functions that broadcast (``torch.mul``,
``torch.add``, ``torch.where``...), those read the unexpanded tensor and the expand is dropped:
one torch call fewer, the same values (an expand is a view: it copies nothing). A size read from
data (``(i0, 1)`` expanded to ``(i0, 128)``) is known only to equal itself.

A decomposition can also leave a value unread: ``cat`` skips empty tensors, so the empty tensor
a key-value cache starts from is made and never used. Dead code elimination ran on the trace
before its ops were translated; unread results of pure tensor factories are dropped here, and so
is arithmetic on sizes nobody reads (the sizes of the outputs of an op run as one torch call,
computed from its decomposition in case a later op reads them).

Library code multiplies by a scale that is often 1 (rotary embeddings' ``cos * attention_scaling``)
and adds an offset that is often 0 (``arange(n) + past_length``). Where the operand is a tensor
the trace made and reads nowhere else, the result is that tensor: the same values to the bit,
the same strides (a dense tensor's elementwise result takes its layout), and nobody holds the
operand to tell them apart.

The gradient of indexing adds rows into zeros (``torch_ex.index_put`` of a ``torch.full``): where
nothing else reads the zeros, they are written in place, as eager's backward writes them, not
copied first. An int in an index (``x[:, 1]``) is a slice and a squeeze in the IR,
``torch.narrow`` then ``torch.squeeze``: where nothing else reads the narrow, that is one
``torch.select``, as eager.

A backward sums the gradients of a value read in several places (a residual stream): eager's
autograd adds into the first gradient in place when nothing else holds it. Where the trace made a
gradient as new memory and nothing reads it, or any view of it, after ``torch.add``, the add is
``torch.Tensor.add_`` into it: one allocation fewer per residual, the same values to the bit,
the same strides (``torch.add`` lays its result out as its first operand; so only into that one). Not where the caller sees the sum: its strides are then ``torch.add``'s. Only for programs torch.autograd does not record (the caller says so): a
tensor it saved for a backward and found written later would fail that backward.

The gradient of a fused projection split in heads (``q, k, v = qkv(x).split(n, -1)``, each
``view``-ed to heads and transposed) is a ``torch.cat`` along the last dimension of tensors that
each flatten their trailing dimensions (``reshape`` of a transposed tensor: a copy), as eager's
backward computes it: four copies. Where nothing else reads the flattened tensors, one
``torch.stack`` of the unflattened ones, then a ``reshape`` of the new dense tensor (a view), is
the same values and the same layout in one copy.

These are not (pattern, replacement) rules like ``thunder_transforms.rewrites``: each is a sweep
over the whole execution trace, on executor symbols after translation, deciding from what the
whole trace reads and returns rather than from the shape of one sub-graph of torch-language ops.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from thunder_executors.torch_ops_executor import RUNNERS
from thunder_executors.torch_symbols import executor_symbol, helper_symbol, torch_symbol
from thunder_ir import BoundSymbol, NumberProxy, Proxy, Symbol, TensorProxy
from thunder_ir.codegen import PythonCode
from thunder_ir.sizes import same_size
from thunder_ir.tags import OpTag

__all__ = [
    "accumulate_in_place",
    "drop_identity_arithmetic",
    "drop_implicit_broadcasts",
    "drop_unread_factories",
    "drop_unread_numbers",
    "index_put_into_fresh",
    "select_for_int_indices",
    "stack_flattened_for_cat",
]


def _torch_functions(*names: str) -> frozenset[Symbol]:
    """The executor symbols of ``torch.<name>`` for each name (``thunder_executors.torch_symbols``:
    the torch executor's and those of ops run as torch runs them alike)."""
    return frozenset(map(torch_symbol, names))


# torch functions (as the torch executor prints them) that broadcast their tensor operands.
_BROADCASTING = _torch_functions(
    "add", "sub", "mul", "true_divide", "div", "floor_divide", "remainder", "fmod", "pow",
    "atan2", "maximum", "minimum", "copysign", "bitwise_and", "bitwise_or", "bitwise_xor",
    "bitwise_left_shift", "bitwise_right_shift", "eq", "ne", "lt", "le", "gt", "ge", "where",
)  # fmt: skip
_BROADCAST_IN_DIM = helper_symbol("broadcast_in_dim")


def _is_expand(bsym: BoundSymbol) -> bool:
    """A ``broadcast_in_dim`` that torch's own broadcasting would do: the input's dimensions
    are the trailing ones of the result, each either kept or grown from 1."""
    if bsym.sym is not _BROADCAST_IN_DIM:
        return False
    a, shape, dims = bsym.args[:3]
    if not isinstance(a, TensorProxy) or not isinstance(bsym.output, TensorProxy):
        return False
    n, m = len(shape), a.ndim
    if tuple(dims) != tuple(range(n - m, n)):
        return False
    return all(
        same_size(s, t) or same_size(s, 1) for s, t in zip(a.shape, shape[n - m :], strict=True)
    )


def _broadcasts_like_torch(bsym: BoundSymbol) -> bool:
    return bsym.sym in _BROADCASTING and not bsym.kwargs


def _broadcast_shape(shapes: Sequence[Sequence[Any]]) -> list[Any] | None:
    """The shape torch's broadcasting gives on every call, or None where that is not known: a
    symbolic size (read from data: a routed token count) is known only to equal itself."""
    n = max((len(s) for s in shapes), default=0)
    out: list[Any] = [1] * n
    for s in shapes:
        for i, d in enumerate(s, start=n - len(s)):
            if same_size(d, 1):
                continue
            if same_size(out[i], 1):
                out[i] = d
            elif not same_size(out[i], d):
                return None
    return out


def _same_shape(a: Sequence[Any] | None, b: Sequence[Any]) -> bool:
    return a is not None and len(a) == len(b) and all(map(same_size, a, b))


def _rewritten(bsym: BoundSymbol, expanded: dict[str, TensorProxy]) -> BoundSymbol:
    """``bsym`` reading the unexpanded tensors where that leaves its result unchanged: the same
    shape after torch's broadcasting, and one dtype and device for all tensor operands (a
    0-dimensional tensor takes part in type promotion differently)."""
    out = bsym.output
    tensors = [a for a in bsym.args if isinstance(a, TensorProxy)]
    if not isinstance(out, TensorProxy) or not tensors:
        return bsym
    if len({(t.dtype, t.device) for t in tensors}) != 1:
        return bsym
    args = list(bsym.args)
    changed = False
    for i, a in enumerate(args):
        if not isinstance(a, TensorProxy) or a.name not in expanded:
            continue
        trial = [*args[:i], expanded[a.name], *args[i + 1 :]]
        shapes = [t.shape for t in trial if isinstance(t, TensorProxy)]
        if _same_shape(_broadcast_shape(shapes), out.shape):
            args, changed = trial, True
    if not changed:
        return bsym
    return bsym.replace(args=tuple(args))


def drop_implicit_broadcasts(bsyms: Sequence[BoundSymbol], keep: set[str]) -> list[BoundSymbol]:
    """``bsyms`` with expands that only feed broadcasting torch functions removed. ``keep`` are
    names that must stay defined (the trace's outputs)."""
    expanded = {
        b.output.name: b.args[0]
        for b in bsyms
        if _is_expand(b) and isinstance(b.output, TensorProxy) and b.output.name not in keep
    }
    if not expanded:
        return list(bsyms)
    rewritten = [_rewritten(b, expanded) if _broadcasts_like_torch(b) else b for b in bsyms]
    still_read = {p.name for b in rewritten for p in b.flat_proxy_args}
    return [
        b
        for b in rewritten
        if not (
            isinstance(b.output, Proxy)
            and b.output.name in expanded
            and b.output.name not in still_read
            and not b.has_tag(OpTag.RETURN)
        )
    ]


_NARROW, _SQUEEZE, _SELECT = torch_symbol("narrow"), torch_symbol("squeeze"), torch_symbol("select")


def _read_counts(bsyms: Sequence[BoundSymbol]) -> dict[str, int]:
    """How many times each name is read by ``bsyms``."""
    reads: dict[str, int] = {}
    for b in bsyms:
        for p in b.flat_proxy_args:
            reads[p.name] = reads.get(p.name, 0) + 1
    return reads


def select_for_int_indices(bsyms: Sequence[BoundSymbol], keep: set[str]) -> list[BoundSymbol]:
    """``bsyms`` with ``torch.narrow(a, d, i, 1)`` read only by ``torch.squeeze`` of ``d`` (an
    int in an index: ``x[:, 1]``, the columns of ``torch.where``) made the one view eager makes,
    ``torch.select(a, d, i)``, at the squeeze. ``keep``: names that must stay defined."""
    reads = _read_counts(bsyms)
    narrows = {
        b.output.name: b
        for b in bsyms
        if b.sym is _NARROW
        and isinstance(b.output, TensorProxy)
        and len(b.args) == 4
        and not b.kwargs
        and all(type(x) is int for x in b.args[1:])  # (a symbolic one would be a decision)
        and b.args[3] == 1
        and reads.get(b.output.name) == 1
        and b.output.name not in keep
    }
    if not narrows:
        return list(bsyms)
    out: list[BoundSymbol] = []
    merged: set[str] = set()
    for b in bsyms:
        n = None
        if b.sym is _SQUEEZE and len(b.args) == 2 and isinstance(b.args[0], TensorProxy):
            n = narrows.get(b.args[0].name)
        if n is not None and not b.kwargs and b.args[1] in ((n.args[1],), n.args[1]):
            b = b.replace(sym=_SELECT, args=n.args[:3], kwargs={})
            merged.add(n.output.name)  # type: ignore[union-attr]
        out.append(b)
    return [b for b in out if not (b.sym is _NARROW and b.output.name in merged)]  # type: ignore[union-attr]


_FULL, _INDEX_PUT = torch_symbol("full"), helper_symbol("index_put")
_INDEX_PUT_INTO = helper_symbol("index_put_")


def index_put_into_fresh(bsyms: Sequence[BoundSymbol], keep: set[str]) -> list[BoundSymbol]:
    """``bsyms`` with ``torch_ex.index_put`` into a ``torch.full`` read nowhere else (the gradient
    of indexing: zeros with the rows added at the indices) written in place, as eager's backward
    does, instead of into a copy of it. ``keep``: names that must stay defined."""
    reads = _read_counts(bsyms)
    fresh = {
        b.output.name
        for b in bsyms
        if b.sym is _FULL and isinstance(b.output, TensorProxy) and b.output.name not in keep
    }
    out: list[BoundSymbol] = []
    for b in bsyms:
        if b.sym is _INDEX_PUT and isinstance(b.args[0], TensorProxy):
            name = b.args[0].name
            if name in fresh and reads.get(name) == 1:
                b = b.replace(sym=_INDEX_PUT_INTO)
        out.append(b)
    return out


# Executor symbols that only make a new tensor from their arguments: no effect, no error that
# depends on what they read.
_PURE_FACTORIES = frozenset(
    {
        helper_symbol("tensor"),
        helper_symbol("iota"),
        torch_symbol("full"),
        helper_symbol("shallow_copy"),
    }
)


def drop_unread_factories(bsyms: Sequence[BoundSymbol], keep: set[str]) -> list[BoundSymbol]:
    """``bsyms`` without pure tensor factories whose result nobody reads (``keep``: names that
    must stay defined)."""
    read = {p.name for b in bsyms for p in b.flat_proxy_args} | keep
    return [
        b
        for b in bsyms
        if not (
            b.sym in _PURE_FACTORIES and isinstance(b.output, Proxy) and b.output.name not in read
        )
    ]


_EFFECTS = frozenset({OpTag.DONT_DCE, OpTag.IN_PLACE, OpTag.RANDOM, OpTag.RETURN, OpTag.PROLOGUE})


def drop_unread_numbers(
    bsyms: Sequence[BoundSymbol], keep: set[str], written: Callable[[str], bool] = lambda _: False
) -> list[BoundSymbol]:
    """``bsyms`` without computations of numbers nobody reads (``keep``: names that must stay
    defined), and without the pure torch calls whose tensors nobody reads (the ``argmax`` of a
    ``x.max(dim).values`` decomposed after dead code elimination ran); anything with an effect
    stays, and so do reads of memory written in place (``written``: torch.autograd, where it
    records the program, checks them as it checks eager's)."""
    needed = set(keep)
    kept: list[BoundSymbol] = []
    for b in reversed(bsyms):
        outs = b.flat_proxy_outs
        if (
            outs
            and (
                all(isinstance(o, NumberProxy) for o in outs)
                or (b.sym in _PURE_CALLS and not any(written(p.name) for p in b.flat_proxy_args))
            )
            and not any(o.name in needed for o in outs)
            and _EFFECTS.isdisjoint(b.sym.tags)
            and not b.subsymbols
        ):
            continue
        kept.append(b)
        needed.update(p.name for p in b.flat_proxy_args)
    kept.reverse()
    return kept


# Torch functions whose result is new dense memory of its own (never a view of an argument).
_FRESH = _BROADCASTING | _torch_functions(
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid",
    "erf", "reciprocal", "arange", "cat", "clone", "cumsum", "sum", "amax", "amin",
    "matmul", "bmm", "mm",
)  # fmt: skip
# Helpers of the torch executor that make a new tensor.
_FRESH_HELPERS = frozenset({helper_symbol("iota"), helper_symbol("tensor")})
# Calls without effects whose unread results can be dropped.
_PURE_CALLS = _FRESH | _torch_functions("argmax", "argmin") | {_BROADCAST_IN_DIM}


def _fresh(bsym: BoundSymbol | None) -> bool:
    if bsym is None:
        return False
    if bsym.sym in RUNNERS:
        return True  # whole ops (linear, softmax, embedding, ...): new memory
    return bsym.sym in _FRESH or bsym.sym in _FRESH_HELPERS


# The arithmetic ``_is_identity`` recognizes.
_MUL, _ADD, _SUB = torch_symbol("mul"), torch_symbol("add"), torch_symbol("sub")
_DIVIDES = _torch_functions("true_divide", "div")


def _is_identity(bsym: BoundSymbol) -> bool:
    """``x * 1``, ``x / 1``, ``x - 0.0``, ``x + -0.0`` and, for integers, ``x + 0``, with the
    result of ``x``'s dtype and shape, in float32, float64 or an integer dtype."""
    sym = bsym.sym
    if not (sym is _MUL or sym is _ADD or sym is _SUB or sym in _DIVIDES):
        return False
    if bsym.kwargs or len(bsym.args) != 2:
        return False
    x, c = bsym.args
    out = bsym.output
    if not isinstance(x, TensorProxy) or not isinstance(out, TensorProxy):
        return False
    c = _number(c)
    if c is None or out.dtype != x.dtype or out.ndim != x.ndim:
        return False
    if not all(same_size(a, b) for a, b in zip(out.shape, x.shape)):
        return False  # (symbolic sizes compare without recording a constraint)
    if x.dtype.is_complex or x.dtype.is_low_precision:
        # a complex product by 1 + 0j computes inf * 0; bfloat16 and float16 compute in float32
        # and round back, which makes every NaN the positive one
        return False
    if sym is _MUL or sym in _DIVIDES:
        return c == 1
    # x - 0.0 and x + -0.0 keep a -0.0; x + 0.0 and x - -0.0 make it 0.0
    if sym is _SUB:
        return c == 0 and (x.dtype.is_exact or math.copysign(1.0, c) > 0)
    return c == 0 and (x.dtype.is_exact or math.copysign(1.0, c) < 0)  # add


def _number(c: Any) -> int | float | None:
    """The Python number of an operand: itself, or the value of a scalar constant (a 0-dim CPU
    tensor the torch executor passes in its place)."""
    if type(c) in (int, float):
        return c  # type: ignore[no-any-return]
    if isinstance(c, PythonCode) and len(c.names) == 1:
        (value,) = c.names.values()
        if isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_complex():
            number = value.item()
            return number if type(number) in (int, float) else None
    return None


def drop_identity_arithmetic(bsyms: Sequence[BoundSymbol], keep: set[str]) -> list[BoundSymbol]:
    """``bsyms`` with identity arithmetic on a fresh tensor read nowhere else turned into the
    alias ``y = x`` (``keep``: the trace's outputs, which the operand must not be)."""
    reads = _read_counts(bsyms)
    producer: dict[str, BoundSymbol] = {}
    out: list[BoundSymbol] = []
    for b in bsyms:
        if _is_identity(b):
            x = b.args[0]
            if reads.get(x.name) == 1 and x.name not in keep and _fresh(producer.get(x.name)):
                b = b.replace(sym=_alias_symbol(), args=(x,), kwargs={}, subsymbols=())
        for p in b.flat_proxy_outs:
            producer[p.name] = b
        out.append(b)
    return out


def _alias_symbol() -> Symbol:
    return helper_symbol("shallow_copy")


_ADD = torch_symbol("add")
_ADD_INTO = executor_symbol("torch.Tensor", "add_", torch.Tensor.add_)


def accumulate_in_place(bsyms: Sequence[BoundSymbol], keep: set[str]) -> list[BoundSymbol]:
    """``bsyms`` with ``torch.add(a, b)`` as ``torch.Tensor.add_(a, b)`` where ``a`` is new memory the trace made, of the result's shape, dtype and device, that nothing reads
    after the add, through any name that may share its memory (``keep``: names that must stay
    defined, the trace's results). For programs torch.autograd does not record."""
    # Names that may share memory: any call that is not known to make new memory may return a
    # view of any tensor it reads.
    parent: dict[str, str] = {}

    def group(name: str) -> str:
        while parent.get(name, name) != name:
            name = parent[name]
        return name

    def join(a: str, b: str) -> None:
        ra, rb = group(a), group(b)
        if ra != rb:
            parent[ra] = rb

    owned: set[str] = set()  # tensors made as new memory by their call
    last_read: dict[str, int] = {}  # group -> index of the last call reading any of its names
    for b in bsyms:
        outs = [o.name for o in b.flat_outs if isinstance(o, TensorProxy)]
        if _fresh(b):
            owned.update(outs)
        else:
            names = outs + [p.name for p in b.flat_proxy_args if isinstance(p, TensorProxy)]
            for n in names[1:]:
                join(names[0], n)
    for i, b in enumerate(bsyms):
        for p in b.flat_proxy_args:
            last_read[group(p.name)] = i
    kept_groups = {group(n) for n in keep}

    out: list[BoundSymbol] = []
    for i, b in enumerate(bsyms):
        if b.sym is _ADD and len(b.args) == 2 and not b.kwargs:
            target = _accumulator(b, i, owned, group, last_read, kept_groups)
            if target is not None:
                other = b.args[1] if target is b.args[0] else b.args[0]
                b = b.replace(sym=_ADD_INTO, args=(target, other))
                owned.add(b.output.name)  # the same memory, under the result's name
        out.append(b)
    return out


def _accumulator(
    b: BoundSymbol,
    i: int,
    owned: set[str],
    group: Callable[[str], str],
    last_read: dict[str, int],
    kept_groups: set[str],
) -> TensorProxy | None:
    """The operand of the add ``b`` (the ``i``-th call) its result can be written into."""
    result = b.output
    if not isinstance(result, TensorProxy) or group(result.name) in kept_groups:
        return None  # a result the caller sees has the layout torch.add gives it
    # The first operand only: torch.add lays its result out as its first dense operand, so the
    # sum keeps eager's strides (into the second it would take the second's layout).
    a, other = b.args
    if not isinstance(a, TensorProxy) or a.name not in owned:
        return None
    g = group(a.name)
    if g in kept_groups or last_read.get(g, -1) > i:
        return None
    if isinstance(other, TensorProxy) and group(other.name) == g:
        return None  # reading what it writes, maybe through another layout
    if (
        a.dtype == result.dtype
        and a.device == result.device
        and len(a.shape) == len(result.shape)
        and all(same_size(s, r) for s, r in zip(a.shape, result.shape))
    ):
        return a
    return None


_CAT, _RESHAPE, _STACK = torch_symbol("cat"), torch_symbol("reshape"), torch_symbol("stack")


def stack_flattened_for_cat(bsyms: Sequence[BoundSymbol], keep: set[str]) -> list[BoundSymbol]:
    """``bsyms`` with each ``torch.cat`` along the last dimension of ``torch.reshape``s that
    flatten the trailing dimensions of same-shaped tensors, read by the cat alone, as a
    ``torch.stack`` of those tensors and a ``torch.reshape`` of it (``keep``: names that must
    stay defined)."""
    reads = _read_counts(bsyms)
    flattens = {
        b.output.name: b
        for b in bsyms
        if b.sym is _RESHAPE
        and isinstance(b.output, TensorProxy)
        and isinstance(b.args[0], TensorProxy)
        and reads.get(b.output.name) == 1
        and b.output.name not in keep
    }
    if not flattens:
        return list(bsyms)
    stacks: dict[int, list[BoundSymbol]] = {}
    for i, b in enumerate(bsyms):
        if b.sym is _CAT:
            stacked = _stacked(b, flattens)
            if stacked is not None:
                stacks[i] = stacked
    if not stacks:
        return list(bsyms)
    merged = {
        p.name
        for i in stacks
        for p in bsyms[i].args[0]  # type: ignore[union-attr]
    }
    out: list[BoundSymbol] = []
    for i, b in enumerate(bsyms):
        if i in stacks:
            out.extend(stacks[i])
        elif not (b.sym is _RESHAPE and b.output.name in merged):  # type: ignore[union-attr]
            out.append(b)
    return out


def _stacked(cat: BoundSymbol, flattens: dict[str, BoundSymbol]) -> list[BoundSymbol] | None:
    """The stack and reshape computing ``cat`` from the unflattened tensors, if it can."""
    if cat.kwargs or len(cat.args) != 2 or not isinstance(cat.output, TensorProxy):
        return None
    tensors, dim = cat.args
    if not isinstance(tensors, (list, tuple)) or len(tensors) < 2 or type(dim) is not int:
        return None
    sources = []
    for t in tensors:
        r = flattens.get(t.name) if isinstance(t, TensorProxy) else None
        if r is None:
            return None
        sources.append(r.args[0])
    first, flat = sources[0], tensors[0]
    k = len(flat.shape)
    # Up to 3 dimensions torch.cat's result is dense in order (4 and 5 may be channels-last).
    if k > 3 or dim % k != k - 1 or len(first.shape) <= k:
        return None
    lead, rest = first.shape[: k - 1], first.shape[k - 1 :]
    if not all(type(s) is int for s in rest):
        return None
    if not all(
        v.dtype == first.dtype
        and v.device == first.device
        and len(v.shape) == len(first.shape)
        and all(same_size(a, b) for a, b in zip(v.shape, first.shape))
        for v in sources
    ) or not all(
        len(t.shape) == k
        and all(same_size(a, b) for a, b in zip(t.shape[:-1], lead))
        and t.shape[-1] == math.prod(rest)
        for t in tensors
    ):
        return None
    stack = flat.replace(name=flat.name, shape=(*lead, len(sources), *rest))
    return [
        BoundSymbol(
            _STACK, (list(sources), k - 1), {}, stack, header=cat.header, location=cat.location
        ),
        BoundSymbol(
            _RESHAPE, (stack, tuple(cat.output.shape)), {}, cat.output, location=cat.location
        ),
    ]
