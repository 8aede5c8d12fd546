"""In-place writes into what ``reshape``, ``reshape_as``, ``flatten`` or ``ravel`` returned.

PyTorch's reshape returns a view of its input when the input's strides allow it and a copy
otherwise, and documents that code must not rely on which: a write into the result may or may not
change the input. By default (``reshape_inplace="warn"``) such a write warns, naming the line,
and the program does what eager does for the actual strides (the executors run the reshape as
torch's own where a write reaches it, so whether the input changes is eager's). With
``reshape_inplace="error"`` it is an error (``ReshapeWriteError``: asked for, so raised, not run
through torch), whether or not this particular reshape would have been a view, also through views
of the result (``x.reshape(-1)[1:].add_(1)``).

The check runs as each operation is recorded (``Trace.record_hook``), so the error points at the
user's line.
"""

from __future__ import annotations

import warnings
from typing import Any

from thunder.errors import ReshapeWriteError
from thunder_ir import BoundSymbol, TensorProxy
from thunder_ir import ops as ltorch
from thunder_ir.aliasing import aliased_and_written

__all__ = ["ReshapeWriteCheck"]

_RESHAPES = frozenset((ltorch.reshape, ltorch.reshape_as, ltorch.flatten, ltorch.ravel))


class ReshapeWriteCheck:
    """Follows the values that may share memory with a reshape's result; refuses (or warns
    about) an in-place write into one of them."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.reshaped: dict[str, str] = {}  # name -> the reshape-like op it came from
        self.warned = False

    def __call__(self, bsym: BoundSymbol) -> None:
        if not self.reshaped and bsym.sym not in _RESHAPES:
            return
        if self.reshaped:
            pairs, written = aliased_and_written(bsym)
            hit = next((n for n in sorted(written) if n in self.reshaped), None)
            if hit is not None:
                self._report(bsym, hit)
            for out, inp in pairs:
                origin = self.reshaped.get(inp.name)
                if origin is not None:
                    self.reshaped.setdefault(out.name, origin)
        if bsym.sym in _RESHAPES:
            inputs = {p.name for p in bsym.flat_proxy_args}
            for out in bsym.flat_proxy_outs:
                if isinstance(out, TensorProxy) and out.name not in inputs:
                    self.reshaped[out.name] = bsym.sym.name

    def _report(self, bsym: BoundSymbol, name: str) -> None:
        op = self.reshaped[name]
        detail = (
            f"{bsym.sym.name} writes in place into the result of {op}, which PyTorch returns as a "
            "view of its input or as a copy depending on the input's strides, so whether the "
            f"input changes depends on them. Write `view(...)` instead of `{op}(...)` when the "
            "input is meant to change, or `.clone()` the result when it is not; "
            "thunder.jit(..., reshape_inplace='warn') does what eager does for these strides"
        )
        if self.mode == "error":
            raise ReshapeWriteError(
                f"an in-place write into the result of {op}", detail, bsym.location
            )
        if not self.warned:
            self.warned = True
            warnings.warn(f"thunder.jit: {detail}", UserWarning, stacklevel=2)


def install(trace: Any, mode: str) -> None:
    """Checks every operation recorded into ``trace`` from now on."""
    trace.record_hook = ReshapeWriteCheck(mode)
