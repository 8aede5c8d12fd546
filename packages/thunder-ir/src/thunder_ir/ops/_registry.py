"""Declaring torch-language ops. An op names the torch callables it mirrors; the map from torch
callable to symbol and the Tensor methods of proxies are derived from those names."""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Iterable
from typing import Any

from thunder_ir.ops._bool_args import checking_bool_arguments
from thunder_ir.ops._keywords import accepting_torch_keywords
from thunder_ir.proxies import register_tensor_method
from thunder_ir.symbol import Symbol
from thunder_ir.tags import OpTag

__all__ = ["ALL_OPS", "is_torch_op", "resolve_torch_name", "torch_symbol_map", "torchop"]

# Every torch-language op by its ltorch name. Filled at import time only.
ALL_OPS: dict[str, Symbol] = {}
# The same ops, as a set (``is_torch_op``).
_OPS: set[Symbol] = set()


def torchop(
    *torch_names: str,
    name: str | None = None,
    tags: Iterable[OpTag] = (),
) -> Callable[[Callable[..., Any]], Symbol]:
    """Declares the decorated function as the op ``ltorch.<name>`` mirroring ``torch_names``.

    The function is the op's decomposition into prims and other ops, written as torch would
    compute it (broadcasting, type promotion, argument checks with torch's messages). Names of the
    form ``torch.Tensor.x`` also make ``x`` a method (or property) of TensorProxy.
    """

    def decorate(fn: Callable[..., Any]) -> Symbol:
        op_name = name or fn.__name__
        if op_name in ALL_OPS:
            raise ValueError(f"op ltorch.{op_name} declared twice")
        meta = accepting_torch_keywords(fn, torch_names)
        meta = checking_bool_arguments(meta, fn, torch_names, op_name)
        sym = Symbol(op_name, meta, module="ltorch", tags=tags, torch_names=torch_names)
        ALL_OPS[op_name] = sym
        _OPS.add(sym)
        for tn in torch_names:
            if tn.startswith("torch.Tensor."):
                register_tensor_method(tn.removeprefix("torch.Tensor."), sym)
        return sym

    return decorate


def is_torch_op(sym: Symbol) -> bool:
    """Whether ``sym`` is a torch-language op (declared with ``torchop``, printed as ``ltorch``),
    not a prim, an executor's symbol or another composite (a checkpointed region)."""
    return sym in _OPS


def resolve_torch_name(qualified: str) -> Any:
    """The object a dotted name such as ``torch.nn.functional.gelu`` denotes, or None."""
    import importlib

    parts = qualified.split(".")
    obj: Any = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        nxt = getattr(obj, part, None)
        if nxt is None:
            try:
                nxt = importlib.import_module(".".join(parts[: i + 1]))
            except ImportError:
                return None
        obj = nxt
    return obj


def _torchs_tensor_attribute(torch: Any, name: str) -> Any:
    """torch's own ``torch.Tensor.name`` (never a replacement set on the class, which the jit
    runs as the user's code)."""
    for cls in (torch.Tensor, torch._C.TensorBase):
        obj = cls.__dict__.get(name)
        func = getattr(obj, "fget", obj)
        if isinstance(func, types.FunctionType) and not func.__module__.startswith("torch"):
            continue
        if obj is not None:
            return obj
    return None


@functools.cache
def torch_symbol_map() -> dict[Any, Symbol]:
    """torch callable -> op, for every op whose torch names exist in the installed torch.

    Properties (``torch.Tensor.T``) map by their property object; methods by the function object
    found on ``torch.Tensor``. Built once (a memo of static data)."""
    import thunder_ir.ops  # noqa: F401  (registers every op)

    out: dict[Any, Symbol] = {}
    for sym in ALL_OPS.values():
        for tn in sym.torch_names:
            if tn.startswith("torch.Tensor."):
                import torch

                obj = _torchs_tensor_attribute(torch, tn.removeprefix("torch.Tensor."))
                if obj is None:
                    obj = resolve_torch_name(tn)
            else:
                obj = resolve_torch_name(tn)
            if obj is not None:
                out.setdefault(obj, sym)
    return out
