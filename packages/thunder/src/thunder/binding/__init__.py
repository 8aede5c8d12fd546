"""Binding the interpreter to the IR: what the traced program reads, calls and writes.

A :class:`Binder` owns the state of one tracing run. Its callbacks (given to
``thunder_interp.interpret``) turn every value the program reads from outside its arguments into
either a proxy input (tensors; numbers in symbolic mode) or a guard the prologue checks; its
lookasides send torch callables to IR symbols; its opaque-call hook refuses torch ops without an
IR symbol and records mutations of outside containers. Writes to outside state (globals, closure
cells, attributes, container mutations) are recorded for the epilogue and undone when tracing ends,
so tracing itself has no visible effect: every call, the first included, runs the compiled program.

The binder is split by concern, each module a layer of one class: ``state`` (access paths,
inputs, guards), ``reads``, ``writes``, ``calls`` (the opaque-call policy and the callbacks
handed to the interpreter), ``regions`` (autocast and checkpoint) and ``higher_order``
(torch.cond, while_loop, map, scan) and ``autograd_function`` (torch.autograd.Function).
"""

from __future__ import annotations

import logging
from typing import Any

from thunder.binding.arrays import array_lookasides
from thunder.binding.autograd_function import AutogradFunctionMixin
from thunder.binding.calls import _call_tensor_method, _returning_torch_types, _tensor_size
from thunder.binding.fallback import op_overload_lookasides
from thunder.binding.rng import rng_lookasides
from thunder.binding.state import (
    ExternalRef,
    Guard,
    Write,
    is_scalar_constant,
    iter_proxies,
    torch_value,
)
from thunder.lookasides import jit_lookasides, native_special
from thunder_interp import interpret
from thunder_ir import Symbol, TensorProxy
from thunder_ir.proxies import _BoundTensorMethod, set_requires_grad

__all__ = [
    "Binder",
    "ExternalRef",
    "Guard",
    "Write",
    "is_scalar_constant",
    "iter_proxies",
    "torch_value",
]


class Binder(AutogradFunctionMixin):
    """The state of one tracing run (one cache entry being compiled)."""

    def lookasides(self) -> dict[Any, Any]:
        """The lookaside table of this run: the static one, plus calls of already jitted
        functions, which are interpreted into this trace (reentrantly) instead of running their
        own cache."""
        from thunder.jit_function import ThunderFunction

        table = jit_lookasides()

        def call_jitted(jitted: ThunderFunction, *args: Any, **kwargs: Any) -> Any:
            inner = interpret(
                jitted.fn,
                lookasides=table,
                callbacks=self.callbacks(),
                native_special=native_special,
            )
            return inner(*args, **kwargs)

        table[ThunderFunction.__call__] = call_jitted
        for fn, impl in table.items():
            if isinstance(impl, Symbol):  # a torch callable the IR mirrors: a user-level call
                table[fn] = _returning_torch_types(impl, None if fn is impl else fn)

        def call_tensor_method(method: _BoundTensorMethod, *args: Any, **kwargs: Any) -> Any:
            if method.fn is set_requires_grad:
                return self._requires_grad_(method.tensor, *args, **kwargs)
            return _call_tensor_method(method, *args, **kwargs)

        table[_BoundTensorMethod.__call__] = call_tensor_method
        table[TensorProxy.size] = _tensor_size
        table.update(op_overload_lookasides())
        table.update(self._context_lookasides(table))
        table.update(rng_lookasides())
        table.update(self._higher_order_lookasides(table))
        table.update(self._autograd_function_lookasides(table))
        for la in self.options.lookasides:  # the program's own (thunder.Lookaside), last
            if isinstance(la.replace_with, Symbol):
                table[la.fn] = _returning_torch_types(la.replace_with, None)
            else:
                table[la.fn] = interpret(
                    la.replace_with,
                    lookasides=table,
                    callbacks=self.callbacks(),
                    native_special=native_special,
                )
        table.update(array_lookasides(self, table))
        for method in _LOGGER_METHODS:

            def log(logger: Any, *args: Any, _method: str = method, **kwargs: Any) -> None:
                return self._logging_call(logger, _method, args, kwargs)

            table[getattr(logging.Logger, method)] = log
        return table


# logging.Logger's output methods: replayed by the epilogue (CallsMixin._logging_call).
_LOGGER_METHODS = (
    "debug",
    "info",
    "warning",
    "warn",
    "error",
    "exception",
    "critical",
    "fatal",
    "log",
)
