"""``Binder``: the one class the binder's layers make (``state`` up to ``autograd_function``), and
the lookaside table of one tracing run."""

from __future__ import annotations

import functools
import logging
import types
import warnings
import weakref
from typing import Any

import torch

from thunder.binding.arrays import array_lookasides
from thunder.binding.autograd_function import AutogradFunctionMixin
from thunder.binding.calls import (
    _call_tensor_method,
    _returning_torch_types,
    _tensor_size,
    torch_typed_call,
)
from thunder.binding.fallback import op_overload_lookasides
from thunder.binding.locations import is_library_file, program_location
from thunder.binding.rng import rng_lookasides
from thunder.binding.warning_calls import legacy_reduction_lookasides, warning_lookaside
from thunder.errors import RunsEagerly
from thunder.lookasides import (
    _isinstance_as,
    check_native_text,
    check_no_proxy_text,
    jit_lookasides,
    jit_lookasides_version,
    native_special,
)
from thunder_interp import frame_globals, interpret, running_in_handler
from thunder_ir import Symbol, TensorProxy
from thunder_ir.ops import data_shapes
from thunder_ir.proxies import _BoundTensorMethod, set_requires_grad

__all__ = ["Binder"]


_OWN_PACKAGES = frozenset(
    {"thunder", "thunder_ir", "thunder_interp", "thunder_executors", "thunder_transforms"}
)


def _finalizer_refused(what: str, obj: Any) -> RunsEagerly:
    return RunsEagerly(
        f"registers {what} on a {type(obj).__qualname__}: it runs when the object dies, on "
        "every eager call, which a compiled program does not repeat"
    )


def _refuse_weakref_callback(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """``weakref.ref(obj, callback)``: the callback runs when ``obj`` dies, once per eager
    call; a compiled program registers nothing, so it would run only after the tracing call.
    The call runs eagerly (``weakref.finalize`` too: ``Binder.lookasides``)."""
    if not (isinstance(fn, type) and issubclass(fn, weakref.ReferenceType)):
        return
    if (args[1] if len(args) > 1 else kwargs.get("callback")) is not None:
        raise _finalizer_refused("a weakref callback", args[0])


def _refuse_finalized_object(fn: Any, args: tuple[Any, ...]) -> None:
    """A call making an object whose class has a ``__del__`` (``Cls()``, ``Cls.__new__(Cls)``):
    eager runs it on every call when the object dies; a compiled program makes no object (it
    would run only after the tracing call). Refused before the object exists: the call runs
    eagerly."""
    if isinstance(fn, type):
        cls: Any = fn
    elif getattr(fn, "__name__", None) == "__new__" and args and isinstance(args[0], type):
        cls = args[0]
    else:
        return
    if issubclass(cls, type) or getattr(cls, "__del__", None) is None:
        return
    if cls.__module__.partition(".")[0] in _OWN_PACKAGES:
        return
    raise RunsEagerly(
        f"makes a {cls.__qualname__}, whose __del__ runs when it dies, on every eager call, "
        "which a compiled program does not repeat"
    )


# The jit's table with its torch callables as user-level calls (``torch_typed_call``), made once
# per version of the table: each trace copies it (walking ~2,400 entries took ~3 ms a trace).
_typed_table: tuple[int, dict[Any, Any]] | None = None


def _typed_jit_lookasides() -> dict[Any, Any]:
    """A fresh copy of the jit's lookaside table, torch callables the IR mirrors made calls
    that return torch's types."""
    global _typed_table
    version = jit_lookasides_version()
    typed = _typed_table
    if typed is None or typed[0] != version:
        table = jit_lookasides()
        for fn, impl in table.items():
            if isinstance(impl, Symbol):  # a torch callable the IR mirrors: a user-level call
                table[fn] = torch_typed_call(impl, None if fn is impl else fn)
        typed = _typed_table = (version, table)
    return dict(typed[1])


class Binder(AutogradFunctionMixin):
    """The state of one tracing run (one cache entry being compiled)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Every bound symbol recorded carries the program's line that made the call.
        self.trace.locate = program_location
        # Ops that may raise on values, called inside the program's ``try`` (not torch's: the
        # handlers of its module calls re-raise): see ``decisions.check_data_decisions`` and
        # ``jit_function._reruns_after_error``.
        self.trace.in_handler = functools.partial(running_in_handler, is_library_file)

    def _cb_opaque_call(self, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # Text of a tensor made in C shows eager's values only if torch makes it: the call runs
        # split wherever a native call made (or would make) a proxy's text instead.
        if fn is frame_globals:  # ``globals()``: the frame's own module globals
            self.guard_namespace_names(args[0])
            return args[0]
        check_native_text(fn, args)
        self._guard_names_read(fn, args)
        _refuse_weakref_callback(fn, args, kwargs)
        _refuse_finalized_object(fn, args)
        result = super()._cb_opaque_call(fn, args, kwargs)
        check_no_proxy_text(result)
        if type(result) is dict and self._is_namespace(result):
            self.guard_namespace_names(result)  # globals(), vars(module)
        return result

    def _guard_names_read(self, fn: Any, args: tuple[Any, ...]) -> None:
        """Native calls that read the names (or all the values) of an outside object: what C
        answers from its dicts is guarded (``reads.ReadsMixin.guard_names_of``)."""
        if fn is dir and len(args) == 1:
            self.guard_names_of(args[0])
            return
        owner = getattr(fn, "__self__", None)
        if owner is not None and type(owner) is dict and self._is_namespace(owner):
            if getattr(fn, "__name__", None) in _READS_ALL_VALUES:
                self.guard_namespace_values(owner)  # globals().items()
        elif (
            fn is dict and len(args) == 1 and type(args[0]) is dict and self._is_namespace(args[0])
        ):
            self.guard_namespace_values(args[0])  # dict(vars(module))

    def lookasides(self) -> dict[Any, Any]:
        """The lookaside table of this run: the static one, plus calls of already jitted
        functions, which are interpreted into this trace (reentrantly) instead of running their
        own cache."""
        from thunder.jit_function import ThunderFunction

        table = _typed_jit_lookasides()
        self.run_lookasides = table  # (a property replaced on torch.Tensor runs with them)

        def call_jitted(jitted: ThunderFunction, *args: Any, **kwargs: Any) -> Any:
            inner = interpret(
                jitted.fn,
                lookasides=table,
                callbacks=self.callbacks(),
                native_special=native_special,
            )
            return inner(*args, **kwargs)

        table[ThunderFunction.__call__] = call_jitted

        def call_tensor_method(method: _BoundTensorMethod, *args: Any, **kwargs: Any) -> Any:
            if method.fn is set_requires_grad:
                return self._requires_grad_(method.tensor, *args, **kwargs)
            return _call_tensor_method(method, *args, **kwargs)

        table[_BoundTensorMethod.__call__] = call_tensor_method

        def finalize(obj: Any, *args: Any, **kwargs: Any) -> Any:
            raise _finalizer_refused("weakref.finalize", obj)

        table[weakref.finalize] = finalize
        plain_isinstance = table[isinstance]

        def isinstance_(obj: Any, classinfo: Any) -> bool:
            if isinstance(obj, TensorProxy) and obj.name in self.inputs.tensor_types:
                # An input whose tensor is a Parameter (or another subclass): eager's answer.
                cls = self.inputs.tensor_types[obj.name]
                return _isinstance_as(obj, classinfo, cls)
            return bool(plain_isinstance(obj, classinfo))

        table[isinstance] = isinstance_
        where = table[torch.where]  # the op, falling back to torch's where it refuses an option

        def where_or_indices(*args: Any, **kwargs: Any) -> Any:
            if len(args) + len(kwargs) == 1:  # the indices of the nonzero elements
                return data_shapes.where(*args, **kwargs)
            return where(*args, **kwargs)

        table[torch.where] = where_or_indices
        table[TensorProxy.size] = _tensor_size
        table.update(op_overload_lookasides())
        table.update(self._context_lookasides(table))
        table.update(rng_lookasides())
        table.update(self._higher_order_lookasides(table))
        table.update(self._autograd_function_lookasides(table))
        table.update(self.tensor_attribute_lookasides())
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
        if isinstance(warnings.warn, types.BuiltinFunctionType):  # (the Python one is interpreted)
            table[warnings.warn] = warning_lookaside(self)
        table.update(legacy_reduction_lookasides(self, table))
        return table


# Methods of a dict whose results hold all its values.
_READS_ALL_VALUES = frozenset({"items", "values", "copy", "__or__", "__ror__"})

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
