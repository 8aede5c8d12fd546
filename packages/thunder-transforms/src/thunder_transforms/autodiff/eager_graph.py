"""What eager's autograd graph of a program would hold, for the checks eager makes in ``backward``.

Thunder runs a differentiated program as one autograd node (``runner.DifferentiableFunction``);
eager records one node per torch call. Where that difference shows, the caller sees it through
three of eager's checks, which are made here from a model of eager's graph:

- a backward through a node an earlier backward freed (without ``retain_graph=True``) raises
  "Trying to backward through the graph a second time", where the node saved a tensor; a
  backward through another output whose eager graph shares no such node runs;
- a backward raises "modified by an inplace operation" where a tensor one of its nodes saved was
  written in place after the forward (an input an optimizer step changed, an output the caller
  wrote, ``y = f(x).exp(); y.mul_(2)``), or by the program itself after the op that saved it (an
  index or mask no gradient flows through: ``y = x[m]; m.logical_not_()``, ``v, i = x.max(1);
  i.zero_()``), and only then;
- an inference tensor eager would save for the backward raises when the call is recorded.

The model (``eager_graph``) is made from the trace before the forward/backward split: per op that
autograd records (it reads a value carrying a gradient), whether eager saves a tensor for it and
which of the tensors the caller can reach (inputs, outputs, and what shares their memory) it
saves, and whether the program writes in place what it saved after it ran; per output, the ops
its graph holds. Which tensors an op saves follows torch's derivative formulas for the common
ops; any other op is taken to save its tensor arguments. Saved tensors are followed through the
tensors sharing their version counter (views, ``detach``; not ``.data``, which has its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from thunder_ir import BoundSymbol, OpTag, Symbol, TensorProxy, Trace, prims
from thunder_ir import ops as ltorch
from thunder_ir.aliasing import alias_info, writes_in_place, written_inputs
from thunder_ir.ops.data_shapes import mask_of_column
from thunder_ir.pytree import tree_flatten
from thunder_transforms.autodiff.fallback_saved import fallback_saved
from thunder_transforms.autodiff.registry import (
    bound_arguments,
    differentiable_inputs,
    signature_of,
)

__all__ = [
    "SAVES_RESULT_IN_PLACE",
    "EagerGraph",
    "EagerNode",
    "eager_graph",
    "saved_other_arguments",
    "writes_in_place_here",
]


def _symbols(module: object, names: Sequence[str]) -> frozenset[Symbol]:
    return frozenset(s for n in names if isinstance(s := getattr(module, n, None), Symbol))


# Ops whose eager backward keeps sizes, dtypes or scalars only: no tensor is saved.
_SAVES_NOTHING = _symbols(
    ltorch,
    [
        "add", "sub", "neg", "sum", "mean", "cat", "stack", "clone", "contiguous", "to",
        "type_as", "expand", "expand_as", "pad", "add_", "sub_", "neg_", "flatten", "unflatten",
        "reshape", "view", "view_as", "permute", "transpose", "t", "squeeze", "unsqueeze",
        "movedim", "split", "chunk", "unbind", "narrow", "diagonal", "real", "positive",
        "cumsum", "double", "float", "half", "bfloat16", "sign", "sign_",
    ],
) | _symbols(
    prims,
    ["add", "sub", "neg", "sum", "convert_element_type", "broadcast_in_dim", "reshape", "cat",
     "transpose", "squeeze", "slice", "pad", "sign"],
)  # fmt: skip

# Ops whose eager backward reads their result only.
_SAVES_RESULT = _symbols(
    ltorch,
    ["exp", "exp2", "expm1", "sigmoid", "tanh", "relu", "sqrt", "rsqrt", "reciprocal",
     "softmax", "log_softmax", "softmin", "exp_", "exp2_", "expm1_", "sigmoid_", "tanh_", "relu_",
     "sqrt_", "rsqrt_", "reciprocal_"],
) | _symbols(prims, ["exp", "exp2", "expm1", "sigmoid", "tanh", "sqrt", "rsqrt", "reciprocal"])  # fmt: skip

# Ops that save their input, but their result where they write it (``inplace=True``).
SAVES_RESULT_IN_PLACE = _symbols(ltorch, ["leaky_relu", "elu", "celu", "selu"])

# Products: each factor is saved for the other's gradient (``x * w`` saves ``x`` where ``w``
# requires grad, ``w`` where ``x`` does); linear's bias and a scalar factor are not saved.
_PRODUCTS = _symbols(
    ltorch, ["mul", "mul_", "matmul", "linear", "mm", "bmm", "mv", "dot", "outer"]
) | _symbols(prims, ["mul", "matmul", "linear"])

# Quotients: the divisor is saved, the dividend only where the divisor requires grad.
_QUOTIENTS = _symbols(ltorch, ["div", "div_", "true_divide"]) | _symbols(prims, ["div"])

# Ops that save only their index or mask argument (by name), not the values they select.
_SAVES_SELECTOR = {
    sym: name
    for names, name in (
        (["where"], "condition"),
        (["masked_fill"], "mask"),
        (["embedding"], "a"),
        (["index_select"], "index"),
    )
    for sym in _symbols(ltorch, names)
}

# Ops that save only tensors they make themselves (dropout's mask; l1_loss's and
# pairwise_distance's difference).
_SAVES_OWN = _symbols(ltorch, ["dropout", "l1_loss", "pairwise_distance"])

# Ops whose eager backward saves the named arguments only (not a bias, nor a loss's input whose
# log_softmax it saves): by parameter name.
_SAVES_NAMED: dict[Symbol, tuple[str, ...]] = {
    sym: names
    for syms, names in (
        (["batch_norm"], ("a", "weight", "running_mean", "running_var")),
        (["instance_norm"], ("a",)),  # its weight and running statistics are saved repeated
        (["group_norm"], ("a", "weight")),
        (["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
          "conv_transpose3d"], ("a", "weight")),
        (["cross_entropy"], ("target", "weight")),
    )
    for sym in _symbols(ltorch, syms)
}  # fmt: skip

# Products of two of the arguments (by position), each saved for the other's gradient; the
# added term is not saved (``addmm``'s bias).
_ADDED_PRODUCTS = _symbols(
    ltorch, ["addcmul", "addcmul_", "addmm", "baddbmm", "addmm_", "baddbmm_"]
)

# Selections whose backward scatters into the positions their indices (second output) name.
_SELECTS_BY_INDEX = _symbols(ltorch, ["max", "min"])
# Max pooling with ``return_indices=True``: its input and the indices (second output).
_POOLS_WITH_INDICES = _symbols(
    ltorch, ["max_pool1d", "max_pool2d", "max_pool3d", "max_pool_with_indices"]
)
_FALLBACK_SELECTIONS = frozenset(
    {"torch.topk", "torch.Tensor.topk", "torch.sort", "torch.Tensor.sort"}
)

# Fallback ops calling the torch callable their first argument names.
_FALLBACKS = _symbols(ltorch, ["torch_fallback", "torch_fallback_view", "torch_fallback_random"])

# Result-saving ops that also save their arguments (prod, norms, cumprod, logsumexp, sgn...).
_SAVES_RESULT_AND_ARGS = _symbols(
    ltorch, ["prod", "std", "norm", "vector_norm", "cumprod", "logsumexp", "sgn", "sgn_"]
) | _symbols(prims, ["prod", "cumprod"])

# pow: a number exponent saves the base only (PowBackward0), a number base the exponent and the
# result (PowBackward2), two tensors all three (PowBackward1).
_POWERS = _symbols(ltorch, ["pow", "pow_"]) | _symbols(prims, ["pow"])

# Ops saving each tensor argument only where it requires grad (``hypot`` its result too): a
# constant operand is read through values eager computes from it (cosine_similarity's norms).
_SAVES_ARGS_CARRYING = _symbols(ltorch, ["cosine_similarity", "hypot", "hypot_"])
_SAVES_RESULT_TOO = _symbols(ltorch, ["hypot", "hypot_"])

# Remainders: a number divisor saves nothing; a tensor one saves both operands where it
# requires grad (its gradient reads the quotient).
_REMAINDERS = _symbols(ltorch, ["fmod", "fmod_", "remainder", "remainder_"]) | _symbols(
    prims, ["fmod", "remainder"]
)

# Contractions (eager runs einsum as bmm's): each operand is saved where another requires grad.
_CONTRACTIONS = _symbols(ltorch, ["einsum"])

# addcdiv(self, t1, t2): t2 is saved where t1 or t2 requires grad, t1 where t2 does.
_ADDED_QUOTIENTS = _symbols(ltorch, ["addcdiv", "addcdiv_"])


@dataclass(frozen=True)
class EagerNode:
    """One op autograd records: whether it saves a tensor, and which of the tensors the caller
    reaches it saves (trace inputs and flat outputs, by index, through their alias groups)."""

    saves: bool
    saved_inputs: frozenset[int] = frozenset()
    saved_outputs: frozenset[int] = frozenset()
    # How the program wrote in place a tensor this op saved, after the op ran (eager's backward
    # through it raises whatever the caller does); None where it did not.
    overwritten: str | None = None


@dataclass(frozen=True)
class EagerGraph:
    """``nodes`` in program order; ``reach[k]``: the nodes the graph of flat output ``k`` holds;
    ``read_inputs``: the inputs (by index) a node reads, which the graph links to."""

    nodes: tuple[EagerNode, ...]
    reach: tuple[frozenset[int], ...]
    read_inputs: frozenset[int] = frozenset()
    _cache: dict[frozenset[int], tuple[int, ...]] = field(
        default_factory=dict, compare=False, repr=False
    )
    _saved_by: dict[frozenset[int], EagerNode] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def saved_inputs(self) -> frozenset[int]:
        """The inputs some node saves."""
        return frozenset().union(*(n.saved_inputs for n in self.nodes))

    def saved_by(self, outputs: frozenset[int]) -> EagerNode:
        """What the nodes of ``outputs``' graphs save, together (as one node)."""
        found = self._saved_by.get(outputs)
        if found is None:
            nodes = [self.nodes[n] for n in self.nodes_of(outputs)]
            found = self._saved_by[outputs] = EagerNode(
                any(n.saves for n in nodes),
                frozenset().union(*(n.saved_inputs for n in nodes)),
                frozenset().union(*(n.saved_outputs for n in nodes)),
                next((n.overwritten for n in nodes if n.overwritten), None),
            )
        return found

    def nodes_of(self, outputs: frozenset[int]) -> tuple[int, ...]:
        """The nodes a backward from ``outputs`` (flat output indices) runs, last op first (the
        order eager's engine runs them in)."""
        found = self._cache.get(outputs)
        if found is None:
            held = frozenset().union(*(self.reach[k] for k in outputs if k < len(self.reach)))
            found = self._cache[outputs] = tuple(sorted(held, reverse=True))
        return found


def _saved_names(bsym: BoundSymbol, carries: set[str]) -> tuple[bool, list[str]]:
    """Whether eager's node for ``bsym`` saves a tensor, and the names of the tensors it saves."""
    sym = bsym.sym
    tensors = [p for p in bsym.flat_proxy_args if isinstance(p, TensorProxy)]
    outs = [o for o in bsym.flat_outs if isinstance(o, TensorProxy)]
    if sym in _SAVES_NOTHING:
        return False, []
    if OpTag.VIEW in sym.tags or OpTag.SHAPE_OP in sym.tags:
        # A view keeps sizes; indexing with tensors keeps the index tensors.
        indices = [p.name for p in tensors[1:]]
        return bool(indices), indices
    if sym in _SAVES_RESULT or (sym in SAVES_RESULT_IN_PLACE and writes_in_place_here(bsym)):
        return True, [o.name for o in outs]
    if sym in _PRODUCTS or sym in _QUOTIENTS:
        # A number factor is saved too (as a tensor the caller never sees).
        a, b = (*bsym.args, None, None)[:2]
        names = []
        if _carries(a, carries) and isinstance(b, TensorProxy):
            names.append(b.name)
        if _carries(b, carries) and isinstance(a, TensorProxy):
            names.append(a.name)
        if sym in _QUOTIENTS and isinstance(b, TensorProxy) and b.name not in names:
            names.append(b.name)
        return True, names
    if sym in _SAVES_OWN:
        return True, []
    if sym in _SAVES_SELECTOR:
        selector = bound_arguments(bsym).get(_SAVES_SELECTOR[sym])
        return True, [selector.name] if isinstance(selector, TensorProxy) else []
    if sym in _SAVES_RESULT_AND_ARGS:
        return True, [p.name for p in tensors] + [o.name for o in outs]
    if sym in _POWERS:
        base, exponent = (*bsym.args, None, None)[:2]
        if not isinstance(exponent, TensorProxy):
            return True, [base.name] if isinstance(base, TensorProxy) else []
        return True, [p.name for p in tensors] + [o.name for o in outs]
    return _saved_by_formula(bsym, carries, tensors, outs)


def _saved_by_formula(
    bsym: BoundSymbol, carries: set[str], tensors: list[TensorProxy], outs: list[TensorProxy]
) -> tuple[bool, list[str]]:
    """``_saved_names`` for ops whose saved tensors depend on their arguments; any other op is
    taken to save its tensor arguments (raising where eager may not is safe, not raising where
    eager does is not)."""
    sym = bsym.sym
    if sym in _SAVES_NAMED:
        bound = bound_arguments(bsym)
        names = [p.name for n in _SAVES_NAMED[sym] if isinstance(p := bound.get(n), TensorProxy)]
        return True, names
    if sym in _SAVES_ARGS_CARRYING:
        names = [p.name for p in tensors if p.name in carries]
        return True, names + ([o.name for o in outs] if sym in _SAVES_RESULT_TOO else [])
    if sym in _REMAINDERS:
        a, b = (*bsym.args, None, None)[:2]
        names = [p.name for p in tensors] if _carries(b, carries) else []
        return bool(names), names  # (a number or constant divisor: nothing)
    if sym in _CONTRACTIONS:
        names = [
            p.name
            for i, p in enumerate(tensors)
            if any(_carries(q, carries) for j, q in enumerate(tensors) if j != i)
        ]
        return True, names
    if sym is ltorch.kl_div:  # target * (log(target) - a), or exp(target) * (target - a)
        bound = bound_arguments(bsym)
        target = bound.get("target")
        if bound.get("log_target") or not isinstance(target, TensorProxy):
            return True, []
        return True, [target.name]
    if sym in _ADDED_QUOTIENTS and len(bsym.args) >= 3:
        _added, t1, t2 = bsym.args[:3]
        names = [t2.name] if isinstance(t2, TensorProxy) else []
        if _carries(t2, carries) and isinstance(t1, TensorProxy):
            names.append(t1.name)
        return True, names
    if sym in _ADDED_PRODUCTS and len(bsym.args) >= 3:
        _added, a, b = bsym.args[:3]
        names = [b.name] if _carries(a, carries) and isinstance(b, TensorProxy) else []
        if _carries(b, carries) and isinstance(a, TensorProxy):
            names.append(a.name)
        return True, names
    if sym in _SELECTS_BY_INDEX and len(outs) == 2:  # max(x, dim): the indices
        return True, [outs[1].name]
    if sym in _POOLS_WITH_INDICES and len(outs) == 2:
        return True, [p.name for p in tensors] + [outs[1].name]
    if sym is ltorch.torch_fallback and bsym.args and bsym.args[0] in _FALLBACK_SELECTIONS:
        return True, [outs[-1].name] if len(outs) == 2 else [p.name for p in tensors]
    if sym is ltorch.lerp and len(bsym.args) == 3 and not isinstance(bsym.args[2], TensorProxy):
        return False, []  # a number weight: the gradients are the cotangent scaled
    if sym in _FALLBACKS and bsym.args and isinstance(bsym.args[0], str):
        # what torch's own graph of the callable saves (its result: linalg.inv; a copy of the
        # input, not the input: nn.LSTM(batch_first=True))
        found = fallback_saved(
            bsym.args[0], tuple(bsym.args[1:]), dict(bsym.kwargs), lambda p: p.name in carries
        )
        if found is not None:
            names = [p.name for i, p in enumerate(tensors) if i in found.arguments]
            names += [o.name for i, o in enumerate(outs) if i in found.outputs]
            return found.saves, names
    return bool(tensors), [p.name for p in tensors]


def writes_in_place_here(bsym: BoundSymbol) -> bool:
    """Whether an activation was called with ``inplace=True`` (ops with no ``inplace``
    parameter, higher-order ones with their own keywords included, never are)."""
    meta = bsym.sym.meta
    if meta is None or "inplace" not in signature_of(meta).parameters:
        return False
    return bool(bound_arguments(bsym).get("inplace"))


def saved_other_arguments(bsym: BoundSymbol, carries: set[str]) -> list[str]:
    """For an in-place op: the tensors other than the one it writes (its first argument) that
    eager's node saves, by name (the written one's old value eager saves as a clone). One that
    shares memory with the written tensor (``y.mul_(y)``) is overwritten after it was saved."""
    sym = bsym.sym
    a, b, c = (*bsym.args, None, None, None)[:3]
    if sym in _PRODUCTS or sym in _QUOTIENTS:
        saved = _carries(a, carries) or sym in _QUOTIENTS
        return [b.name] if saved and isinstance(b, TensorProxy) else []
    if sym in _ADDED_PRODUCTS:
        return [
            p.name
            for p, other in ((b, c), (c, b))
            if isinstance(p, TensorProxy) and _carries(other, carries)
        ]
    _saves, names = _saved_names(bsym, carries)
    others = tree_flatten((bsym.args[1:], bsym.kwargs))[0]
    return [p.name for p in others if isinstance(p, TensorProxy) and p.name in names]


def _saved_by_in_place(bsym: BoundSymbol, carries: set[str], names: list[str]) -> list[str]:
    """What eager's node for an in-place op saves of ``names``: the written tensor's old value is
    saved as a clone (a later write of the result does not raise, ``y.masked_fill_(m, 0)``), its
    result only where the formula reads it (``exp_``; ``pow_`` with a tensor exponent)."""
    outs = {o.name for o in bsym.flat_outs if isinstance(o, TensorProxy)}
    if bsym.sym is ltorch.pow_ and not isinstance((*bsym.args, None)[1], TensorProxy):
        outs = set()
    return [n for n in names if n in outs] + saved_other_arguments(bsym, carries)


# Broadcasts: a dimension they grow has stride 0, so their result is never contiguous.
_BROADCASTS = _symbols(ltorch, ["expand", "expand_as", "broadcast_to"])


def _copies_for_sure(bsyms: Sequence[BoundSymbol]) -> set[int]:
    """The ops (by id) that copy when eager runs them though they may return a view: making a
    broadcast contiguous (``w[:, None].expand(4, 3).contiguous()``, whose copy conv saves, not
    ``w``)."""
    grown: set[str] = set()
    found: set[int] = set()
    for b in bsyms:
        if b.sym in _BROADCASTS and b.args and isinstance(b.args[0], TensorProxy):
            src, out = b.args[0], b.output
            if isinstance(out, TensorProxy) and _grows(tuple(src.shape), tuple(out.shape)):
                grown.add(out.name)
        elif b.sym is ltorch.contiguous and b.args and getattr(b.args[0], "name", None) in grown:
            found.add(id(b))
    return found


def _grows(before: tuple[object, ...], after: tuple[object, ...]) -> bool:
    """Whether a broadcast from ``before`` to ``after`` (known sizes, none zero) grows a
    dimension beyond 1."""
    old = [n for n in before if type(n) is int]
    new = [n for n in after if type(n) is int]
    if len(old) < len(before) or len(new) < len(after) or 0 in new:
        return False
    lead = len(new) - len(old)
    return any(n > 1 and (i < lead or old[i - lead] != n) for i, n in enumerate(new))


def _carries(p: object, carries: set[str]) -> bool:
    return isinstance(p, TensorProxy) and p.name in carries


# Ops whose result shares its argument's memory but not its version counter (``t.data``): a write
# through one is not seen by what eager saved of the other.
_OWN_VERSION_COUNTER = _symbols(ltorch, ["data"])


def _stops_gradient(bsym: BoundSymbol) -> bool:
    """``prims.stop_gradient``, or an op that is only that (``detach``, ``.data``)."""
    if OpTag.STOPS_GRADIENT in bsym.sym.tags:
        return True
    return bool(bsym.subsymbols) and all(_stops_gradient(s) for s in bsym.subsymbols)


def _copies_in(bsym: BoundSymbol) -> list[BoundSymbol]:
    if bsym.sym is prims.copy_:
        return [bsym]
    return [c for s in bsym.subsymbols for c in _copies_in(s)]


def _moves_versions(bsym: BoundSymbol) -> bool:
    """Whether the writes of ``bsym`` (``writes_in_place``) move version counters: not those of a
    kernel that updates a tensor without (batch norm's running statistics,
    ``prims.copy_(..., bumps_version=False)``)."""
    copies = _copies_in(bsym)
    return not copies or any(c.kwargs.get("bumps_version") is not False for c in copies)


def _masks_indexed_with(tensors: list[TensorProxy], names: list[str]) -> list[str]:
    """The masks that the saved tensors among ``tensors`` (by ``names``) stand for, being columns
    of their nonzero indices (``x[m]``): eager's op takes the mask, and saves it."""
    found = []
    for p in tensors:
        if p.name in names and (mask := mask_of_column(p)) is not None:
            found.append(mask.name)
    return found


def _overwrite(saver: BoundSymbol, writer: BoundSymbol, name: str) -> str:
    """How the program wrote ``name`` (by ``writer``) after ``saver`` saved it, for the error."""
    written = next((p for p in writer.flat_proxy_args if p.name == name), None)
    what = f"a tensor ({written.type_string()})" if isinstance(written, TensorProxy) else "a tensor"
    return (
        f"{what} that {saver.sym.name}{saver.where()} saved for the backward was then written "
        f"in place by {writer.sym.name}{writer.where()} in the thunder.jit program (eager's "
        "backward refuses it too)"
    )


def eager_graph(trace: Trace, requires_grad: Sequence[bool] | None = None) -> EagerGraph:
    """The model of eager's autograd graph of ``trace`` (see the module docstring)."""
    args = trace.args
    carries = differentiable_inputs(trace, requires_grad)
    leaves = tree_flatten(trace.return_value)[0]
    copies = _copies_for_sure(trace.bound_symbols)
    info = alias_info(b for b in trace.bound_symbols if id(b) not in copies)
    # The tensors sharing a version counter: what a write moves the version of.
    versions = alias_info(
        b for b in trace.bound_symbols if id(b) not in copies and b.sym not in _OWN_VERSION_COUNTER
    )
    inputs_of: dict[str, set[int]] = {}
    for i, a in enumerate(args):
        if isinstance(a, TensorProxy):
            inputs_of.setdefault(versions.root(a.name), set()).add(i)
    outputs_of: dict[str, set[int]] = {}
    for k, x in enumerate(leaves):
        if isinstance(x, TensorProxy):
            outputs_of.setdefault(versions.root(x.name), set()).add(k)

    input_index: dict[str, list[int]] = {}
    for i, a in enumerate(args):
        if isinstance(a, TensorProxy):
            input_index.setdefault(a.name, []).append(i)
    read_inputs: set[int] = set()
    nodes: list[EagerNode] = []
    savers: list[BoundSymbol] = []
    held: dict[str, frozenset[int]] = {}  # name -> the nodes of its graph
    saved_at: dict[str, list[int]] = {}  # version group -> the nodes that saved a member
    overwritten: dict[int, str] = {}
    seen: list[str] = []
    for b in trace.bound_symbols:
        if b.has_tag(OpTag.RETURN):
            continue
        if saved_at and writes_in_place(b) and _moves_versions(b):
            for n in written_inputs(b):
                for index in saved_at.get(versions.root(n), ()):
                    if index not in overwritten:
                        overwritten[index] = _overwrite(savers[index], b, n)
        tensors = [p for p in b.flat_proxy_args if isinstance(p, TensorProxy)]
        outs = [o for o in b.flat_outs if isinstance(o, TensorProxy)]
        seen.extend(o.name for o in outs)
        grad_outs = [o for o in outs if o.dtype.is_inexact]
        read = [p for p in tensors if p.name in carries]
        if not read or not grad_outs or _stops_gradient(b):
            continue
        saves, names = _saved_names(b, carries)
        if OpTag.IN_PLACE in b.sym.tags or writes_in_place_here(b):  # (``inplace=True`` too)
            names = _saved_by_in_place(b, carries, names)
        names += _masks_indexed_with(tensors, names)
        roots = {versions.root(n) for n in names}
        node = EagerNode(
            saves,
            frozenset(i for r in roots for i in inputs_of.get(r, ())),
            frozenset(k for r in roots for k in outputs_of.get(r, ())),
        )
        index = len(nodes)
        nodes.append(node)
        savers.append(b)
        for r in roots:
            saved_at.setdefault(r, []).append(index)
        read_inputs.update(i for p in read for i in input_index.get(p.name, ()))
        graph = frozenset({index}).union(*(held.get(p.name, frozenset()) for p in read))
        carries.update(o.name for o in grad_outs)
        for o in grad_outs:
            held[o.name] = graph
        if writes_in_place(b):
            # What the write changes (every alias of it) now leads through this node.
            written = {info.root(n) for n in written_inputs(b)}
            for n in [*seen, *(p.name for p in tensors)]:
                if info.root(n) in written:
                    held[n] = graph | held.get(n, frozenset())
                    carries.add(n)
    for index, how in overwritten.items():
        nodes[index] = replace(nodes[index], overwritten=how)
    reach = tuple(
        held.get(x.name, frozenset()) if isinstance(x, TensorProxy) else frozenset() for x in leaves
    )
    return EagerGraph(tuple(nodes), reach, frozenset(read_inputs))
