"""The Triton executor ("triton"): hand-written kernels for softmax and cross-entropy.

It claims ``ltorch.softmax`` and ``ltorch.cross_entropy`` calls its kernels can run (checkers look
at device, dtype and arguments) and leaves everything else to the executors after it. Triton is
optional: the kernels module is imported on first use, and when triton cannot be imported the
executor reports itself unavailable with the reason and claims nothing.

On a machine without CUDA the kernels run in Triton's interpreter on CPU tensors. The interpreter
is chosen by ``TRITON_INTERPRET=1`` at the time triton is imported, so when triton has not been
imported yet and no GPU is present, importing this module sets it (float32 only there; no
autotuning). Import thunder_executors before triton for the kernels to run on such a machine.
"""

from __future__ import annotations

import inspect
import os
import sys
from types import ModuleType
from typing import Any

import torch

from thunder_executors.executor import OperatorExecutor, register_executor
from thunder_ir import BoundSymbol, Symbol, TensorProxy, dtypes
from thunder_ir import ops as ltorch

__all__ = ["TritonExecutor", "interpreted", "triton_executor"]

_INTERPRET_DTYPES = frozenset({dtypes.float32})
_GPU_DTYPES = frozenset({dtypes.float32, dtypes.float16, dtypes.bfloat16})


def _prepare_environment() -> None:
    if "triton" not in sys.modules and not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


def interpreted() -> bool:
    """Whether triton kernels run in the interpreter (on CPU) in this process."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


class TritonExecutor(OperatorExecutor):
    """Runs softmax and cross-entropy with the kernels of ``thunder_executors.triton_kernels``."""

    def __init__(self) -> None:
        super().__init__("triton")
        self._kernels: ModuleType | None = None
        self._unavailable: str | None = None
        self._symbols: dict[str, Symbol] = {}

    def availability(self) -> tuple[bool, str]:
        self._load()
        return (self._kernels is not None, self._unavailable or "")

    def _load(self) -> ModuleType | None:
        if self._kernels is None and self._unavailable is None:
            _prepare_environment()
            try:
                from thunder_executors import triton_kernels
            except ImportError as e:
                self._unavailable = f"triton is not importable ({e})"
            else:
                if not interpreted() and not torch.cuda.is_available():
                    self._unavailable = (
                        "no CUDA device, and triton was imported without TRITON_INTERPRET=1"
                    )
                else:
                    self._kernels = triton_kernels
        return self._kernels

    def kernels(self) -> ModuleType:
        mod = self._load()
        if mod is None:
            raise RuntimeError(f"the triton executor is not available: {self._unavailable}")
        return mod

    def symbol(self, name: str) -> Symbol:
        """The executor symbol ``triton.<name>`` for a host function of the kernels module."""
        sym = self._symbols.get(name)
        if sym is None:
            sym = self.make_symbol(name, getattr(self.kernels(), name))
            self._symbols[name] = sym
        return sym

    def runs_on(self, *tensors: Any) -> bool:
        """Whether the kernels can take these tensors (device and dtype)."""
        if not self.is_available():
            return False
        allowed = _INTERPRET_DTYPES if interpreted() else _GPU_DTYPES
        device_type = "cpu" if interpreted() else "cuda"
        return all(
            isinstance(t, TensorProxy) and t.device.type == device_type and t.dtype in allowed
            for t in tensors
        )


_prepare_environment()
triton_executor = TritonExecutor()
register_executor(triton_executor)


def _arguments(meta: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The call's arguments by parameter name (defaults applied), or None if they do not bind."""
    try:
        bound = inspect.signature(meta).bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return dict(bound.arguments)


def _softmax_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    bound = _arguments(ltorch.softmax.meta, args, kwargs)
    if bound is None:
        return None
    a, dim, dtype = bound.get("a"), bound.get("dim"), bound.get("dtype")
    if (
        not isinstance(a, TensorProxy)
        or not isinstance(dim, int)
        or dtype is not None
        or a.ndim == 0
    ):
        return None
    if (
        not triton_executor.runs_on(a)
        or a.shape[-1 if dim in (-1, a.ndim - 1) else dim] > _max_columns()
    ):
        return None
    return bound


def _max_columns() -> int:
    return int(triton_executor.kernels().MAX_COLUMNS)


def _softmax_checker(*args: Any, **kwargs: Any) -> bool:
    return _softmax_arguments(args, kwargs) is not None


def _softmax_translate(bsym: BoundSymbol) -> BoundSymbol:
    bound = _softmax_arguments(bsym.args, bsym.kwargs)
    assert bound is not None
    return BoundSymbol(
        triton_executor.symbol("softmax"),
        (bound["a"], bound["dim"]),
        {},
        bsym.output,
        header=bsym.header,
    )


def _cross_entropy_arguments(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any] | None:
    bound = _arguments(ltorch.cross_entropy.meta, args, kwargs)
    if bound is None:
        return None
    a, target = bound.get("a"), bound.get("target")
    ok = (
        isinstance(a, TensorProxy)
        and isinstance(target, TensorProxy)
        and a.ndim == 2
        and target.ndim == 1
        and target.dtype == dtypes.int64
        and bound.get("weight") is None
        and bound.get("size_average") is None
        and bound.get("reduce") is None
        and bound.get("reduction") in ("mean", "sum", "none")
        and bound.get("label_smoothing") == 0.0
        and isinstance(bound.get("ignore_index"), int)
        and triton_executor.runs_on(a)
        and target.device == a.device
    )
    if not ok:
        return None
    assert isinstance(a, TensorProxy)
    # A symbolic class count is baked in with a constraint (the prologue checks it).
    return bound if a.shape[1] <= _max_columns() else None


def _cross_entropy_checker(*args: Any, **kwargs: Any) -> bool:
    return _cross_entropy_arguments(args, kwargs) is not None


def _cross_entropy_translate(bsym: BoundSymbol) -> BoundSymbol:
    bound = _cross_entropy_arguments(bsym.args, bsym.kwargs)
    assert bound is not None
    kwargs = {"ignore_index": bound["ignore_index"], "reduction": bound["reduction"]}
    sym = triton_executor.symbol("cross_entropy")
    return BoundSymbol(sym, (bound["a"], bound["target"]), kwargs, bsym.output, header=bsym.header)


triton_executor.register_implementation(
    ltorch.softmax, checker=_softmax_checker, translate=_softmax_translate
)
triton_executor.register_implementation(
    ltorch.cross_entropy, checker=_cross_entropy_checker, translate=_cross_entropy_translate
)
