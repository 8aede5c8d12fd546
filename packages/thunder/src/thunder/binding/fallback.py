"""Torch callables that no IR op mirrors, called by the traced program (rule 2 of the call policy):
recorded as ``ltorch.torch_fallback`` (``thunder_ir.ops.fallback``), run by torch and
differentiated by ``torch.autograd``; refused with a clear error where the fallback cannot keep
eager's semantics (outputs whose shape depends on data, writes into arguments)."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import torch

from thunder.binding.rng import refuse_generators
from thunder.errors import RunsEagerly, UnsupportedOperationError
from thunder.lookasides import query_is_allowed
from thunder_ir import NumberProxy, TensorProxy, get_tracectx
from thunder_ir import ops as ltorch
from thunder_ir.aliasing import alias_info
from thunder_ir.dtypes import to_torch_dtype
from thunder_ir.errors import DataDependentError, UnsupportedOptionError
from thunder_ir.ops.fallback import (
    TorchFallbackError,
    TorchRunsItError,
    call_torch_fallback,
    torch_callable_name,
)
from thunder_ir.pytree import tree_flatten, tree_iter, tree_map, tree_unflatten
from thunder_ir.sizes import same_size
from thunder_ir.tags import OpTag

__all__ = ["call_torch_callable", "is_ir_refusal", "mirrored_call", "op_overload_lookasides"]


def is_ir_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` is an IR op refusing an option it does not implement
    (``thunder_ir.errors.UnsupportedOptionError``), not the program's own error."""
    return isinstance(exc, UnsupportedOptionError)


def _computed_into_out(
    fn: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    compute: Callable[..., Any],
    *,
    elementwise: bool = False,
) -> Any:
    """``f(..., out=t)``: ``f`` computed without ``out``, then copied into ``t``, which it returns,
    as eager writes its result there. Where eager would do more than that write (resize ``t``,
    cast into another dtype, refuse autograd through ``out=``, refuse an overlap, read an operand
    while writing it), torch runs the call (``TorchRunsItError``: the program runs split there).
    An ``elementwise`` op (a TensorIterator kernel) may write into an operand that is ``t``
    itself: each element is read before it is written."""
    name = torch_callable_name(fn) or str(getattr(fn, "__qualname__", repr(fn)))
    out = kwargs["out"]
    rest = {k: v for k, v in kwargs.items() if k != "out"}
    _refuse_out_keyword(fn, args, kwargs)
    tensors = [a for a in tree_iter((args, rest)) if isinstance(a, TensorProxy)]
    trace = get_tracectx()
    refused = TorchRunsItError(name, "it writes into its out= argument")
    if trace is None:
        raise refused
    if trace.grad_enabled and any(t.requires_grad for t in (*tensors, out)):
        raise refused  # eager raises: out= does not support automatic differentiation
    # Other kernels (mm, gather, index_select) read an operand that is ``out`` while writing it,
    # or raise for it: torch runs them.
    if any((t is not out or not elementwise) and _may_overlap(trace, t, out) for t in tensors):
        raise refused
    # Eager's autocast casts the functional ops only, not their out= variants: computed as
    # without autocast.
    intercept, trace.intercept = trace.intercept, None
    try:
        result = compute(args, rest)
    finally:
        trace.intercept = intercept
    if not (
        isinstance(result, TensorProxy)
        and result.dtype == out.dtype
        and result.device == out.device
        and len(result.shape) == len(out.shape)
        and all(same_size(a, b) for a, b in zip(result.shape, out.shape))
    ):
        raise refused
    ltorch.copy_(out, result)
    return out


def _refuse_out_keyword(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Raises eager's TypeError where torch's callable takes no ``out=`` (``torch.flip``,
    ``Tensor.add``) though the op mirroring it does: torch's argument parser is asked, on empty
    meta tensors (it rejects a keyword before any kernel runs)."""

    def probe_value(x: Any) -> Any:
        if isinstance(x, TensorProxy):
            return torch.empty(0, dtype=to_torch_dtype(x.dtype), device="meta")
        if isinstance(x, NumberProxy):
            return x.value
        return x

    leaves, spec = tree_flatten((tuple(args), dict(kwargs)))
    probe_args, probe_kwargs = tree_unflatten([probe_value(x) for x in leaves], spec)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*probe_args, **probe_kwargs)
    except TypeError as e:
        if "unexpected keyword argument 'out'" in str(e):
            raise TypeError(str(e)) from None
    except Exception:  # any other error is the kernel's on empty tensors
        pass


def _may_overlap(trace: Any, a: TensorProxy, b: TensorProxy) -> bool:
    """Whether two distinct tensors may share memory: views of one value, or both (views of)
    tensors made outside the trace (inputs the caller may pass as views of one tensor)."""
    bsyms = trace.bound_symbols
    info = alias_info(bsyms)
    if info.root(a.name) == info.root(b.name):
        return True
    made = {p.name for bsym in bsyms for p in bsym.flat_proxy_outs}
    seen = {p.name for bsym in bsyms for p in bsym.flat_proxy_args} | {a.name, b.name}
    outside = {info.root(name) for name in seen - made}
    return info.root(a.name) in outside and info.root(b.name) in outside


def _writes_out(kwargs: dict[str, Any]) -> bool:
    return isinstance(kwargs.get("out"), TensorProxy)


def _with_sizes_read(sym: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``sym``'s call, where an argument tensor it uses as a size or index (``torch.zeros(n)``
    of a 0-dim tensor, as ``nn.LSTM`` passes a packed sequence's ``batch_sizes[0]``) is read at
    the top of the trace first and the call made with the number (inside the op the read cannot
    be recorded). The refused attempt recorded nothing."""
    while True:
        try:
            return sym(*args, **kwargs)
        except DataDependentError as e:
            tensor = e.index_of
            if tensor is None or not any(x is tensor for x in tree_iter((args, kwargs))):
                raise
            number = tensor.__index__()  # at the top level now: a read of this call's data
            args, kwargs = tree_map(lambda x: number if x is tensor else x, (args, kwargs))


def mirrored_call(fn: Any, sym: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A call of the torch callable ``fn`` through the IR op ``sym`` mirroring it; where the op
    refuses an option it does not implement (``avg_pool2d(ceil_mode=True)``, reflect padding),
    the torch fallback runs ``fn`` itself. Nothing the refused attempt recorded is kept (a
    composite records its calls only when it succeeds)."""
    if _writes_out(kwargs):
        return _computed_into_out(
            fn,
            args,
            kwargs,
            lambda a, kw: mirrored_call(fn, sym, a, kw),
            elementwise=OpTag.ELEMENTWISE in getattr(sym, "tags", ()),
        )
    try:
        return _with_sizes_read(sym, args, kwargs)
    except UnsupportedOptionError as e:
        if torch_callable_name(fn) is None:
            raise
        refusal = e
    refuse_generators(torch_callable_name(fn) or repr(fn), args, kwargs)
    # Where torch's own callable cannot be recorded either, its reason is the error (why the
    # call cannot run at all), the op's refusal its context.
    try:
        return call_torch_fallback(fn, args, kwargs)
    except (DataDependentError, TorchRunsItError):
        raise  # not refusals: the call runs eagerly or split (``program._as_reported``)
    except TorchFallbackError as e:
        raise UnsupportedOperationError(e.op, e.reason) from refusal


# Queries whose answer for a proxy is that of a plain tensor: no ``__torch_function__`` override.
_TORCH_FUNCTION_QUERIES = frozenset(
    {
        "_has_torch_function",
        "_has_torch_function_unary",
        "_has_torch_function_variadic",
        "has_torch_function",
        "has_torch_function_unary",
        "has_torch_function_variadic",
    }
)


def is_torch_function_query(fn: Any) -> bool:
    """Whether ``fn`` asks for ``__torch_function__`` overrides (``has_torch_function_unary``):
    dispatch bookkeeping, no tensor operation."""
    return getattr(fn, "__name__", "") in _TORCH_FUNCTION_QUERIES


@functools.cache
def _is_aten_tensor_factory(name: str) -> bool:
    """Whether ``torch.<base>`` is an aten operator all of whose overloads return tensors (a
    factory such as ``logspace`` or ``randperm``: safe to run on fake tensors while tracing)."""
    base = name.rpartition(".")[2]
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{base}")
    except RuntimeError:
        return False
    return bool(schemas) and all(
        s.returns and all(str(r.type) == "Tensor" for r in s.returns) for s in schemas
    )


def call_torch_callable(
    fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *, has_proxy: bool, display_name: str
) -> Any:
    """A call of the torch callable ``fn`` that no op mirrors: an allowed query answered, a
    tensor-producing call recorded as a fallback op, anything else refused."""
    if query_is_allowed(fn):
        if getattr(fn, "__name__", "") in _TORCH_FUNCTION_QUERIES:
            return False
        if not has_proxy:
            return fn(*args, **kwargs)
        raise UnsupportedOperationError(display_name)
    name = torch_callable_name(fn)
    is_aten = isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket))
    if not has_proxy and not is_aten and (name is None or not _is_aten_tensor_factory(name)):
        # Only aten factories run on fake tensors without proxy arguments: other torch functions
        # on plain values may read or set process state (torch.set_autocast_enabled,
        # set_default_dtype). The call runs eagerly: torch.compile does not keep all of that
        # state as eager leaves it (an autocast switched on without a block), so no split.
        raise RunsEagerly(
            f"calls {display_name} on plain values, which may read or set torch's process state"
        )
    refuse_generators(name or display_name, args, kwargs)
    if _writes_out(kwargs):
        return _computed_into_out(
            fn,
            args,
            kwargs,
            lambda a, kw: call_torch_callable(
                fn, a, kw, has_proxy=has_proxy, display_name=display_name
            ),
        )
    try:
        return call_torch_fallback(fn, args, kwargs)
    except (DataDependentError, TorchRunsItError):
        raise
    except TorchFallbackError as e:
        raise UnsupportedOperationError(e.op, e.reason) from None


def _call_aten_op(op: Any, *args: Any, **kwargs: Any) -> Any:
    """``torch.ops.aten.<name>.<overload>(...)`` (or the packet): recorded as a fallback op that
    names it, as the torch function it backs would be."""
    from thunder_ir import Proxy

    has_proxy = any(isinstance(a, Proxy) for a in tree_iter((args, kwargs)))
    return call_torch_callable(op, args, kwargs, has_proxy=has_proxy, display_name=str(op))


def op_overload_lookasides() -> dict[Any, Any]:
    """Calls of aten operators (``torch.ops.aten.mv.default``) go to the fallback directly
    instead of through their Python ``__call__`` (which calls an unnamed C function)."""
    return {
        torch._ops.OpOverload.__call__: _call_aten_op,
        torch._ops.OpOverloadPacket.__call__: _call_aten_op,
    }
