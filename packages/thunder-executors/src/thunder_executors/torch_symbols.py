"""The executor symbols that call torch callables: one symbol per printed name.

An execution trace calls torch as ``torch.add(t0, t1)``, ``torch.Tensor.view(t0, 2, 8)`` or
``torch_ex.broadcast_in_dim(...)`` (a function of ``thunder_executors.torch_impls``). Every part of
the executors that emits such a call (the torch executor, ops run as torch runs them, the torch
fallback) takes its symbol from here, so each callable has one symbol and passes over execution
traces (``peephole``) recognize a call by its symbol: ``b.sym is torch_symbol("mul")``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from thunder_executors import torch_impls
from thunder_ir import Symbol

__all__ = ["executor_symbol", "helper_symbol", "torch_symbol"]

# (module, name) -> the symbol printed as ``module.name``. A memo of static data: the callable a
# printed name runs never changes.
_symbols: dict[tuple[str, str], Symbol] = {}


def executor_symbol(module: str, name: str, fn: Callable[..., Any]) -> Symbol:
    """The executor symbol printed as ``module.name`` that runs ``fn`` (made on first use)."""
    key = (module, name)
    sym = _symbols.get(key)
    if sym is None:
        sym = Symbol(name, None, module=module, impl=fn, id=f"torch::{module}.{name}")
        _symbols[key] = sym
    return sym


def torch_symbol(name: str) -> Symbol:
    """The executor symbol for ``torch.<name>`` (printed and run as exactly that)."""
    return executor_symbol("torch", name, getattr(torch, name))


def helper_symbol(name: str, fn: Callable[..., Any] | None = None) -> Symbol:
    """The executor symbol for ``torch_ex.<name>``, a function of thunder_executors.torch_impls."""
    return executor_symbol("torch_ex", name, fn if fn is not None else getattr(torch_impls, name))
