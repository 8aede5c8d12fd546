"""Custom ops that write into their arguments (``torch.library.custom_op(..., mutates_args=...)``,
a schema argument marked ``Tensor(a!)``): recorded as their functional variant, which runs the op
on copies of the arguments it writes and returns them after its own result, then a ``copy_`` of
each into its argument: a write the trace's alias analysis and functionalization know.

The functional variant is named for the torch fallback by a dotted path through ``FUNCTIONAL``
(``thunder_ir.ops.fallback_mutating.FUNCTIONAL.mylib.bump.default`` for
``torch.ops.mylib.bump.default``), so a printed trace names it and any process resolves it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import UnsupportedOperatorException

__all__ = [
    "FUNCTIONAL",
    "ON_COPIES",
    "KernelWrites",
    "call_mutating_custom_op",
    "kernel_writes",
    "written_arguments",
    "written_by_call",
]


def written_arguments(fn: Any) -> list[tuple[int, str]]:
    """The (position, name) of each argument ``fn``'s schema marks as written (``Tensor(a!)``);
    empty for a callable that is not an op overload."""
    if not isinstance(fn, torch._ops.OpOverload):
        return []
    return [
        (i, a.name)
        for i, a in enumerate(fn._schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write
    ]


def _copied(x: Any) -> Any:
    """A copy of a written argument: a tensor, or each of a list of them (``Tensor(a!)[]``)."""
    if isinstance(x, (list, tuple)):
        return [t.clone() for t in x]
    return x.clone()


def _functional(op: torch._ops.OpOverload) -> Any:
    written = written_arguments(op)

    def run(*args: Any, **kwargs: Any) -> tuple[Any, ...]:
        positional, keywords = list(args), dict(kwargs)
        copies = []
        for i, name in written:
            if i < len(positional):
                positional[i] = _copied(positional[i])
                copies.append(positional[i])
            else:
                keywords[name] = _copied(keywords[name])
                copies.append(keywords[name])
        out = op(*positional, **keywords)
        return (out, *copies)

    run.__qualname__ = run.__name__ = f"functional_{op._opname}"
    return run


class _Path:
    """``FUNCTIONAL.<namespace>.<op>.<overload>``: the functional variant of that op."""

    def __init__(self, parts: tuple[str, ...]) -> None:
        self._parts = parts

    def __getattr__(self, name: str) -> Any:
        parts = (*self._parts, name)
        if len(parts) < 3:
            return _Path(parts)
        namespace, op, overload = parts
        return _functional(getattr(getattr(getattr(torch.ops, namespace), op), overload))


FUNCTIONAL = _Path(())


# -- any torch callable that writes into its arguments -------------------------------------------
#
# A builtin (``torch._fused_adam_``, ``torch._amp_foreach_non_finite_check_and_unscale_``) has no
# schema of its own to say what it writes; its fake run shows it (``fallback._FakeRun.written``):
# the flat positions of the written tensors among ``(args, kwargs)``. Its functional variant
# ``WRITING.<groups>.<torch name>`` runs the callable on copies of those tensors and returns them
# after its result. A group is the positions holding one tensor (written at one or more of them),
# ``at_0_4__2`` for two groups: one copy each, so a tensor passed twice is written once, as eager.


def writing_variant_name(name: str, groups: Sequence[Sequence[int]]) -> str:
    """The qualified name of ``name``'s functional variant writing copies of ``groups``."""
    encoded = "__".join("_".join(str(i) for i in group) for group in groups)
    return f"{__name__}.WRITING.at_{encoded}.{name}"


class _Writing:
    def __init__(self, groups: tuple[tuple[int, ...], ...] | None, parts: tuple[str, ...]) -> None:
        self._groups = groups
        self._parts = parts

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if self._groups is None:
            groups = tuple(
                tuple(int(i) for i in group.split("_"))
                for group in name.removeprefix("at_").split("__")
            )
            return _Writing(groups, ())
        return _Writing(self._groups, (*self._parts, name))

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        from thunder_ir.ops._registry import resolve_torch_name
        from thunder_ir.pytree import tree_flatten, tree_unflatten

        assert self._groups is not None
        fn = resolve_torch_name(".".join(self._parts))
        leaves, spec = tree_flatten((args, kwargs))
        copies = []
        for group in self._groups:
            copy = leaves[group[0]].clone()
            for i in group:
                leaves[i] = copy
            copies.append(copy)
        args, kwargs = tree_unflatten(leaves, spec)
        try:
            out = fn(*args, **kwargs)
        except UnsupportedOperatorException as e:
            # On fake tensors, an operator without a meta kernel (``_fused_sgd_``) that returns
            # nothing, called as the builtin itself: it only writes, and its copies keep their
            # sizes, so no run on the call's values (and no read of sizes from data) is needed.
            if e.func._schema.returns or e.func._opname not in self._parts:
                raise
            out = None
        return (out, *copies)


WRITING = _Writing(None, ())


def call_mutating_custom_op(
    fn: torch._ops.OpOverload, args: Sequence[Any], kwargs: dict[str, Any]
) -> Any:
    """Records ``fn(*args, **kwargs)`` (an op that writes into the arguments its schema marks):
    its functional variant through the torch fallback, then the copies into those arguments.
    Returns what ``fn`` returns."""
    from thunder_ir.ops.conversion import copy_
    from thunder_ir.ops.fallback import (
        DataDependentFallbackError,
        torch_fallback,
        torch_fallback_sized,
    )
    from thunder_ir.proxies import can_read_data

    name = f"{__name__}.FUNCTIONAL.{fn.namespace}.{fn._opname}.{fn._overloadname}"
    try:
        out, *new = torch_fallback(name, *args, **kwargs)
    except DataDependentFallbackError:  # no fake implementation: run on the call's values
        if not can_read_data():
            raise
        (out, *new), _ = torch_fallback_sized(name, *args, **kwargs)
    for (i, arg_name), value in zip(written_arguments(fn), new):
        target = args[i] if i < len(args) else kwargs[arg_name]
        if isinstance(target, (list, tuple)):
            for t, v in zip(target, value):
                copy_(t, v)
        else:
            copy_(target, value)
    return out


# -- aten callables that write tensor arguments -----------------------------------------------------
#
# ``torch.fused_moving_avg_obs_fake_quant`` (QAT's fake-quantize) updates its observer's
# statistics, scale and zero point in its kernel; the batch-norm family updates its running
# statistics (``native_batch_norm`` and ``batch_norm`` without their schemas saying so). Neither
# bumps a version counter, so the fake run cannot see the write. Recorded as a plain fallback, the
# trace would not know the write, and the backward, which re-runs the callable on the saved
# arguments, would apply it a second time to the live tensors. They are recorded as the callable
# run on copies of what it writes (``ON_COPIES.<its name>``), then a ``copy_`` into each argument:
# the backward's re-run then writes copies only.

# aten ops whose schemas leave out writes their kernels make: the arguments written.
_UNMARKED_WRITES: dict[str, tuple[str, ...]] = {
    name: ("running_mean", "running_var")
    for name in (
        "batch_norm",
        "native_batch_norm",
        "_batch_norm_impl_index",
        "cudnn_batch_norm",
        "miopen_batch_norm",
    )
}
# aten ops whose schemas say what they write, but whose eager writes leave version counters alone
# (written inside the kernel): their copies back leave them alone too.
_WRITES_KEEP_VERSION = frozenset(
    {
        *_UNMARKED_WRITES,
        "_native_batch_norm_legit",
        "_batch_norm_with_update",
        "fused_moving_avg_obs_fake_quant",
        "_fused_moving_avg_obs_fq_helper",
        "rrelu_with_noise",
    }
)


@dataclass(frozen=True)
class KernelWrites:
    """What an aten callable writes: the (position, name) of each argument, the (position, name,
    default) of the ``training`` flag whose False means it writes nothing, whether eager's
    write bumps the arguments' version counters, and the ``torch.return_types`` class of its
    result (None for a tensor or a plain tuple)."""

    written: tuple[tuple[int, str], ...]
    training: tuple[int, str, Any] | None
    bumps_version: bool
    result_type: type | None = None


def _aten_schemas(fn: Any) -> tuple[str, list[Any]] | None:
    """The aten operator name and schemas of a torch callable (an overload, a packet, or a
    builtin such as ``torch.batch_norm``); None for anything else."""
    if isinstance(fn, torch._ops.OpOverload):
        return (fn._opname, [fn._schema]) if fn.namespace == "aten" else None
    if isinstance(fn, torch._ops.OpOverloadPacket):
        namespace, _, name = fn._qualified_op_name.partition("::")
        if namespace != "aten":
            return None
        return name, list(torch._C._jit_get_schemas_for_operator(fn._qualified_op_name))
    if type(fn).__name__ != "builtin_function_or_method":
        return None
    builtin = getattr(fn, "__name__", None)
    if not isinstance(builtin, str) or fn not in (
        getattr(torch, builtin, None),
        getattr(torch._C._nn, builtin, None),
    ):
        return None
    return builtin, list(torch._C._jit_get_schemas_for_operator(f"aten::{builtin}"))


_OPTIONAL_TENSOR = torch._C.OptionalType.ofTensor()


@functools.cache
def _kernel_writes(fn: Any) -> KernelWrites | None:
    found = _aten_schemas(fn)
    if found is None:
        return None
    name, schemas = found
    if name.endswith("_"):  # in-place by name: recorded through their functional variants
        return None
    unmarked = _UNMARKED_WRITES.get(name, ())
    for schema in schemas:
        arguments = list(schema.arguments)
        written = tuple(
            (i, a.name)
            for i, a in enumerate(arguments)
            if not a.kwarg_only  # an out= variant's outputs
            and (a.name in unmarked or (a.alias_info is not None and a.alias_info.is_write))
            and a.type.isSubtypeOf(_OPTIONAL_TENSOR)
        )
        if not written:
            continue
        training = next(
            (
                (i, a.name, a.default_value if a.has_default_value() else True)
                for i, a in enumerate(arguments)
                if a.name == "training" and not a.kwarg_only
            ),
            None,
        )
        named = len(schema.returns) > 1 and all(r.name for r in schema.returns)
        result_type = getattr(torch.return_types, name, None) if named else None
        return KernelWrites(written, training, name not in _WRITES_KEEP_VERSION, result_type)
    return None


def kernel_writes(fn: Any) -> KernelWrites | None:
    """What the aten callable ``fn`` writes among its arguments where no in-place name says so
    (``torch.fused_moving_avg_obs_fake_quant``, ``torch.native_batch_norm``), or None."""
    try:
        return _kernel_writes(fn)
    except TypeError:  # unhashable
        return None


def _argument(args: Sequence[Any], kwargs: dict[str, Any], i: int, name: str, default: Any) -> Any:
    return args[i] if i < len(args) else kwargs.get(name, default)


def written_by_call(
    writes: KernelWrites,
    args: Sequence[Any],
    kwargs: dict[str, Any],
    is_tensor: Callable[[Any], bool],
) -> list[tuple[int, str]]:
    """The arguments this call writes: those of ``writes`` given a tensor (``is_tensor``), none
    where its ``training`` flag is False."""
    if writes.training is not None:
        i, name, default = writes.training
        if _argument(args, kwargs, i, name, default) is False:
            return []
    return [
        (i, name) for i, name in writes.written if is_tensor(_argument(args, kwargs, i, name, None))
    ]


class _OnCopies:
    """``ON_COPIES.<qualified torch name>``: that callable run on copies of the arguments it
    writes, returning its result and then those copies."""

    def __init__(self, parts: tuple[str, ...]) -> None:
        self._parts = parts
        self.__name__ = self.__qualname__ = "on_copies_" + "_".join(parts[-2:])

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _OnCopies((*self._parts, name))

    def __call__(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        from thunder_ir.ops._registry import resolve_torch_name

        target = resolve_torch_name(".".join(self._parts))
        writes = kernel_writes(target)
        assert writes is not None, self._parts
        positional, keywords = list(args), dict(kwargs)
        copies = []
        for i, name in written_by_call(writes, args, kwargs, _is_tensor):
            if i < len(positional):
                positional[i] = positional[i].clone()
                copies.append(positional[i])
            else:
                keywords[name] = keywords[name].clone()
                copies.append(keywords[name])
        return (target(*positional, **keywords), *copies)


def _is_tensor(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


ON_COPIES = _OnCopies(())
