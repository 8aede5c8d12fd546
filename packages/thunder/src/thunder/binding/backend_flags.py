"""torch's backend flags inside the program (``thunder_ir.ops.backend_flags``): cuDNN's and
oneDNN's switches, the scaled-dot-product-attention backends (``torch.backends.cudnn.flags``,
``torch.backends.mkldnn.flags``, ``torch.nn.attention.sdpa_kernel``), and the queries of torch's
deterministic mode and float32 matmul precision.

A flag's value at the call is read from the process and guarded (a call made after the caller
changed it takes another program). A setting the program makes is its own, as grad mode's is:
the process's flag is never changed while tracing; the program's queries then answer its value,
and the trace holds the flags that differ from the call's (``Trace.backend_flags``), under which
the ops whose kernels read them run (``thunder_ir.ops.backend_flags``). The program must put them
back before it returns, as the context managers do: one that returns with a flag changed runs
split."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import torch

from thunder.access import QUERY, Access
from thunder.binding.copying import CopyingMixin
from thunder.binding.state import Guard, _is_backend_flags
from thunder.errors import UnsupportedOperationError, UnsupportedSideEffectError
from thunder_ir import Proxy, get_tracectx
from thunder_ir.ops.backend_flags import BACKEND_FLAGS, FP32_PRECISION, QUERIES, flag_named

__all__ = ["BackendFlagsMixin"]

# A flag by its getter, which a property of a ``torch.backends`` module reads.
_FLAG_OF_GETTER = {flag.get: flag.name for flag in BACKEND_FLAGS.values()}


def _static_attribute(obj: Any, name: str) -> Any:
    for cls in type(obj).__mro__:
        if name in vars(cls):
            return vars(cls)[name]
    return None


class BackendFlagsMixin(CopyingMixin):
    """The program's backend flags: their queries and settings while tracing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.flags_set: dict[str, Any] = {}  # the program's values of the flags it set, by name
        self.flags_at_call: dict[str, Any] = {}  # the call's values read, by name

    def _backend_flag_lookasides(self) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for flag in BACKEND_FLAGS.values():
            out[flag.get] = functools.partial(self._flag_query, flag.name)
            out[flag.set] = functools.partial(self._flag_setting, flag.name)
        get, put = FP32_PRECISION
        if get is not None and put is not None:

            def fp32_precision(backend: Any, op: Any) -> Any:
                get(backend, op)  # (eager's error for a backend or op torch does not know)
                return self._flag_query(f"fp32_precision.{backend}.{op}")

            def set_fp32_precision(backend: Any, op: Any, value: Any) -> None:
                get(backend, op)
                self._flag_setting(f"fp32_precision.{backend}.{op}", value)

            out[get] = fp32_precision
            out[put] = set_fp32_precision
        for query in QUERIES:
            out[query] = functools.partial(self._guarded_query, query)
        # The flags' context managers allow torch's flag properties to be set inside them by a
        # global of ``torch.backends`` (set and put back): nothing the program's own settings
        # need, and a module-level global of a module ``sys.modules`` holds a wrapper of.
        allow = getattr(torch.backends, "__allow_nonbracketed_mutation", None)
        if allow is not None:
            out[allow] = contextlib.nullcontext
        return out

    def _cb_load_attribute(self, obj: Any, name: str, value: Any, prov: Any) -> Any:
        # ``torch.backends.cudnn.enabled`` inside the program's ``cudnn.flags`` block: its value
        # (a flag it did not set is read from the process, guarded like other attributes).
        if self.flags_set and _is_backend_flags(obj):
            flag = _FLAG_OF_GETTER.get(getattr(_static_attribute(obj, name), "getter", None))
            if flag is not None and flag in self.flags_set:
                return self._flag_query(flag)
        return super()._cb_load_attribute(obj, name, value, prov)

    def _guarded_query(self, query: Any, *args: Any) -> Any:
        """``query(*args)`` of the process, guarded by its value."""
        value = query(*args)
        access = Access(QUERY, (query, args))
        self.facts.guards.setdefault(access, Guard(access, "value", value))
        return list(value) if isinstance(value, list) else value

    def _flag_at_call(self, name: str) -> Any:
        if name not in self.flags_at_call:
            flag = flag_named(name)
            self.flags_at_call[name] = self._guarded_query(flag.get, *flag.args)
        return self.flags_at_call[name]

    def _flag_query(self, name: str) -> Any:
        """The flag as the program has it now: as it set it, else as the call found it."""
        value = self.flags_set[name] if name in self.flags_set else self._flag_at_call(name)
        return list(value) if isinstance(value, list) else value

    def _flag_setting(self, name: str, value: Any) -> None:
        """The program sets the flag: for the ops recorded from now on, not in the process."""
        flag = flag_named(name)
        if isinstance(value, Proxy) or (
            isinstance(value, list) and any(isinstance(v, Proxy) for v in value)
        ):
            raise UnsupportedOperationError(
                f"setting torch's backend flag {name} to a value computed from tensors",
                "set it to a constant",
            )
        if self._flag_at_call(name) is None:
            # A flag this build does not keep (oneDNN's TF32 without an Intel GPU): its setter
            # only checks and warns, which eager's does on every call, and changes nothing.
            flag.set(*flag.args, value)
            return
        if type(value) is not flag.kind or flag.kind is list:
            # eager's setter rejects or converts it (set and put back at once)
            before = flag.get(*flag.args)
            try:
                flag.set(*flag.args, value)
                value = flag.get(*flag.args)
            finally:
                flag.set(*flag.args, before)
        self.flags_set[name] = list(value) if isinstance(value, list) else value
        changed = tuple(
            sorted((n, v) for n, v in self.flags_set.items() if v != self.flags_at_call[n])
        )
        self.trace.backend_flags = changed
        current = get_tracectx()  # a function of a higher-order op records into its own
        if current is not None:
            current.backend_flags = changed

    def check_backend_flags(self) -> None:
        """Refuse a program that returns with a backend flag it changed (the caller would run
        with it)."""
        if self.trace.backend_flags:
            names = ", ".join(name for name, _ in self.trace.backend_flags)
            raise UnsupportedSideEffectError(
                f"thunder.jit: the function returns with torch's backend flags {names} changed, "
                "which the caller then runs with; the compiled program cannot replay that. Use "
                "the flags' context managers (torch.backends.cudnn.flags, sdpa_kernel)"
            )
