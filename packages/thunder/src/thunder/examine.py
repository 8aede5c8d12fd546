"""``thunder.examine``: which torch operations a program uses: those an op mirrors, those run by
the torch fallback (``thunder_ir.ops.fallback``), and those thunder cannot run (with why)."""

from __future__ import annotations

import types
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

from thunder.lookasides import data_shaped_functions, is_torch_callable
from thunder_interp import Callbacks, interpret
from thunder_ir.ops import torch_symbol_map
from thunder_ir.ops.fallback import fallback_refusal, torch_callable_name

__all__ = ["ExaminationReport", "examine"]


@dataclass
class ExaminationReport:
    """The torch callables a run of the program called, by qualified name and count: those an op
    mirrors (``supported``), those no op mirrors that the torch fallback runs (``fallback``: one
    opaque op each, run and differentiated by torch), and those thunder.jit refuses
    (``unsupported``, with the reason in ``reasons``)."""

    supported: Counter[str] = field(default_factory=Counter)
    fallback: Counter[str] = field(default_factory=Counter)
    unsupported: Counter[str] = field(default_factory=Counter)
    reasons: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"{len(self.supported)} supported torch operation(s) used:"]
        lines += [f"  {name} x{n}" for name, n in sorted(self.supported.items())]
        if self.fallback:
            lines.append(
                f"{len(self.fallback)} torch operation(s) without a thunder op, run by the torch "
                "fallback (run by torch, differentiated by torch.autograd):"
            )
            lines += [f"  {name} x{n}" for name, n in sorted(self.fallback.items())]
        if self.unsupported:
            lines.append(f"{len(self.unsupported)} UNSUPPORTED torch operation(s):")
            lines += [
                f"  {name} x{n}: {self.reasons.get(name, '')}"
                for name, n in sorted(self.unsupported.items())
            ]
        else:
            lines.append("every torch operation it calls is supported")
        return "\n".join(lines)


def _name(fn: Any) -> str:
    owner = getattr(fn, "__objclass__", None) or getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", type(fn).__name__)
    if isinstance(owner, torch.Tensor) or (
        isinstance(owner, type) and issubclass(owner, torch._C.TensorBase)
    ):
        return f"torch.Tensor.{name}"
    return f"{getattr(fn, '__module__', None) or 'torch'}.{name}"


def examine(fn: Any, *args: Any, show: bool = True, **kwargs: Any) -> ExaminationReport:
    """Run ``fn(*args, **kwargs)`` eagerly in the interpreter and report the torch callables it
    calls: those an IR op mirrors, those the torch fallback runs, and those thunder.jit would
    refuse. Operators (``a + b``) run natively and are not listed (they are all supported)."""
    report = ExaminationReport()
    symbols = {**torch_symbol_map(), **data_shaped_functions()}

    def lookaside_for(torch_fn: Any) -> Any:
        def recorded(*a: Any, **k: Any) -> Any:
            report.supported[_name(torch_fn)] += 1
            return torch_fn(*a, **k)

        return recorded

    lookasides = {f: lookaside_for(f) for f in symbols if callable(f) and not isinstance(f, type)}

    def opaque_call(f: Any, a: tuple[Any, ...], k: dict[str, Any]) -> Any:
        if is_torch_callable(f):
            method = None
            owner = getattr(f, "__self__", None)
            if isinstance(owner, torch.Tensor) and isinstance(f, types.BuiltinMethodType):
                method = getattr(torch.Tensor, f.__name__, None)
            if (method is not None and method in symbols) or f in symbols:
                report.supported[_name(f)] += 1
            elif any(isinstance(x, torch.Tensor) for x in (*a, *k.values())):
                name = torch_callable_name(f) or _name(f)
                reason = fallback_refusal(f, a, k)
                if reason is None:
                    report.fallback[name] += 1
                else:
                    report.unsupported[name] += 1
                    report.reasons[name] = reason
        return f(*a, **k)

    interpret(fn, lookasides=lookasides, callbacks=Callbacks(opaque_call=opaque_call))(
        *args, **kwargs
    )
    if show:
        print(report)
    return report
