"""Running a torch-language op as the very torch callable it mirrors.

An op whose output shares memory with an input that the trace writes in place (a view the program
writes through, a view of a tensor written later) must run as eager torch runs it: its
decomposition into prims or a fusion region would compute the same values in new memory, and
the write would miss the base. In-place ops run as torch's own (``torch.Tensor.add_``), so that
the checks torch makes on the memory they write (no element written twice, no partial overlap
with an input) and the result (the written tensor itself) are eager's. ``torch_call(bsym)`` is the bound symbol that calls the torch
callable the op mirrors (``torch.Tensor.diagonal(y)``), with the op's arguments; torch then
decides, for the strides the tensors have when it runs, whether the result is a view (reshape of
a transposed tensor copies, as in eager). The callable is derived from the op's torch names.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch

from thunder_executors.executor import to_runtime_value
from thunder_executors.torch_symbols import executor_symbol
from thunder_ir import BoundSymbol, Symbol, TensorProxy
from thunder_ir import ops as ltorch

__all__ = ["torch_call", "torch_callable_symbols"]


def setitem_(a: torch.Tensor, key: Any, value: Any) -> torch.Tensor:
    """``a[key] = value``, returning ``a`` (as the in-place op does)."""
    a[key] = value
    return a


# Torch callables that return None where the op returns its (written) first argument.
_RETURNING_SELF: dict[str, Callable[..., Any]] = {"torch.Tensor.__setitem__": setitem_}


_ATTRIBUTE_SUFFIX = "_attribute"


@functools.cache
def _attribute_getter(name: str) -> Callable[[Any], Any]:
    def get(a: Any) -> Any:
        return getattr(a, name)

    # Importable as this module's attribute (``__getattr__`` below), as standalone programs
    # and reproducers name it: one function per attribute.
    get.__name__ = get.__qualname__ = f"{name}{_ATTRIBUTE_SUFFIX}"
    get.__module__ = __name__
    return get


def __getattr__(name: str) -> Any:
    attr = name.removesuffix(_ATTRIBUTE_SUFFIX)
    prop = getattr(torch.Tensor, attr, None) if attr != name and attr[:1] != "_" else None
    if prop is not None and not callable(prop):
        return _attribute_getter(attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def torch_callable_symbols(op: Symbol) -> tuple[Symbol, ...]:
    """Executor symbols calling the torch callables ``op`` mirrors, in order of preference
    (none for internal ops). Tensor methods come first: they take sizes both as varargs and as
    one sequence (``permute(1, 0)``, ``permute((1, 0))``), as the op does; a Tensor property
    (``Tensor.T``) is read by a small function printed as ``torch_ex.T_attribute``."""
    return tuple(sym for sym, _ in _torch_callables(op))


@functools.cache
def _torch_callables(op: Symbol) -> tuple[tuple[Symbol, bool], ...]:
    """``torch_callable_symbols(op)``, each with whether it is a Tensor method (sizes may be
    passed to it as varargs)."""
    from thunder_ir.ops import resolve_torch_name

    methods = [n for n in op.torch_names if n.startswith("torch.Tensor.")]
    functions = [n for n in op.torch_names if not n.startswith("torch.Tensor.")]
    out: list[tuple[Symbol, bool]] = []
    for qualified in (*methods, *functions):
        if qualified in _RETURNING_SELF:
            fn = _RETURNING_SELF[qualified]
            sym = Symbol(
                fn.__name__, None, module="torch_ex", impl=fn, id=f"torch_views::{qualified}"
            )
            out.append((sym, False))
            continue
        fn = resolve_torch_name(qualified)
        if callable(fn):
            # The symbol every executor prints this callable with (``torch.cat``).
            module, _, name = qualified.rpartition(".")
            out.append((executor_symbol(module, name, fn), qualified in methods))
    for qualified in methods:
        attr = qualified.removeprefix("torch.Tensor.")
        if not callable(resolve_torch_name(qualified)) and hasattr(torch.Tensor, attr):
            getter = _attribute_getter(attr)
            sym = Symbol(
                getter.__name__, None, module="torch_ex", impl=getter, id=f"torch_views::{attr}"
            )
            out.append((sym, False))
    return tuple(out)


@functools.cache
def _schema_parameters(name: str) -> tuple[int, frozenset[str]] | None:
    """The most arguments torch's aten schemas named ``name`` take by position, and all their
    parameter names; None where there is no such schema (the callable is taken on trust)."""
    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{name}")
    except RuntimeError:
        return None
    if not schemas:
        return None
    positional = max(sum(not a.kwarg_only for a in s.arguments) for s in schemas)
    return positional, frozenset(a.name for s in schemas for a in s.arguments)


def _fits_schema(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether torch's C callable ``fn`` may take these arguments (a Python one: ``_accepts``)."""
    if inspect.isfunction(fn):
        return True
    found = _schema_parameters(getattr(fn, "__name__", ""))
    return found is None or (len(args) <= found[0] and found[1].issuperset(kwargs))


def _is_default(value: Any, param: inspect.Parameter) -> bool:
    default = param.default
    return (
        default is not param.empty
        and type(value) is type(default)
        and isinstance(value, (bool, int, float, str, type(None)))
        and value == default
    )


def _accepts(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``fn`` takes these arguments, as far as its Python signature says (torch's C
    functions have none: they are taken on trust)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    try:
        sig.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


@functools.cache
def _signature(op: Symbol) -> inspect.Signature | None:
    try:
        return inspect.signature(op.meta) if op.meta is not None else None
    except (TypeError, ValueError):
        return None


def _as_torch_arguments(
    op: Symbol, args: tuple[Any, ...], kwargs: dict[str, Any], omit_defaults: bool = False
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The op's arguments as the torch callable takes them: bound to the op's signature (which
    mirrors torch's) and passed by position up to the first one left out, by keyword after it, so
    that parameter names that differ between ``torch.x`` and ``Tensor.x`` do not matter.
    ``omit_defaults``: arguments given their default value are left out too (``F.relu``'s
    ``inplace=False``, which ``Tensor.relu`` does not take)."""
    sig = _signature(op)
    if sig is None:
        return args, kwargs
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return args, kwargs
    positional: list[Any] = []
    keywords: dict[str, Any] = {}
    gap = False
    for param in sig.parameters.values():
        given = param.name in bound.arguments and not (
            omit_defaults and _is_default(bound.arguments[param.name], param)
        )
        if param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            if not given:
                gap = True
            elif gap:
                keywords[param.name] = bound.arguments[param.name]
            else:
                positional.append(bound.arguments[param.name])
        elif param.kind is param.VAR_POSITIONAL:
            if given and gap:
                return args, kwargs
            positional.extend(bound.arguments.get(param.name, ()))
        elif param.kind is param.KEYWORD_ONLY:
            if given:
                keywords[param.name] = bound.arguments[param.name]
        elif given:
            keywords.update(bound.arguments[param.name])
    return tuple(positional), keywords


def _sizes_as_varargs(op: Symbol, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """``view(t, (2, 8, 96))`` as ``view(t, 2, 8, 96)`` for a Tensor method taking sizes as
    varargs or one sequence: torch parses separate ints several times faster than a sequence
    (a ``torch.Size`` most of all), and the op runs on every call."""
    sig = _signature(op)
    if sig is None:
        return args
    k = 0
    for param in sig.parameters.values():
        if param.kind is param.VAR_POSITIONAL:
            break
        if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            return args
        k += 1
    else:
        return args
    if len(args) != k + 1 or not isinstance(args[k], (tuple, list)):
        return args
    sizes = args[k]
    if not sizes or not all(type(x) is int for x in sizes):  # ``t.view()`` would be an error
        return args
    return (*args[:k], *sizes)


def torch_call(bsym: BoundSymbol) -> BoundSymbol | None:
    """``bsym`` (a torch-language op) as one call of the torch callable it mirrors, or None when
    it mirrors none."""
    if not ltorch.is_torch_op(bsym.sym):
        return None
    if bsym.sym is ltorch.torch_fallback_inplace:  # the in-place Tensor method it names
        from thunder_ir.ops import resolve_torch_name

        qualified, *rest = bsym.args
        module, _, name = qualified.rpartition(".")
        method = Symbol(name, None, module=module, impl=resolve_torch_name(qualified))
        return BoundSymbol(
            method,
            to_runtime_value(tuple(rest)),
            to_runtime_value(bsym.kwargs),
            bsym.output,
            header=bsym.header,
            location=bsym.location,
        )
    args, kwargs = _as_torch_arguments(bsym.sym, bsym.args, bsym.kwargs)
    if any(is_method for _, is_method in _torch_callables(bsym.sym)) and not (
        args and isinstance(args[0], TensorProxy)
    ):
        # ``1 - t`` is ltorch.sub(1, t): torch takes it only as ``t.__rsub__(1)``, so it runs
        # as its decomposition (a new tensor either way).
        return None
    for sym, is_method in _torch_callables(bsym.sym):
        if not _fits_schema(sym.impl, args, kwargs):
            # an argument of the op that torch's C callable lacks, given its default value
            # (``relu(t, False)`` as ``Tensor.relu(t)``)
            fewer = _as_torch_arguments(bsym.sym, bsym.args, bsym.kwargs, omit_defaults=True)
            if _fits_schema(sym.impl, *fewer):
                args, kwargs = fewer
        if _accepts(sym.impl, args, kwargs):
            if is_method and not kwargs:
                args = _sizes_as_varargs(bsym.sym, args)
            return BoundSymbol(
                sym,
                to_runtime_value(args),
                to_runtime_value(kwargs),
                bsym.output,
                header=bsym.header,
                location=bsym.location,
            )
    return None
