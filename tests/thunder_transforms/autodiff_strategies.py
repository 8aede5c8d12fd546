"""Random differentiable programs: DAGs of torch-language ops over float64 inputs whose shapes
broadcast to (2, 3, 4), mixing elementwise, reduction (keepdim), shape and matmul steps; each step
is written once against a namespace that is either ``thunder_ir.ops`` or torch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from thunder_ir import Trace, trace_function
from thunder_ir import ops as ltorch


class _Torch:
    """torch with the torch-language names that live in torch.nn.functional."""

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name, None) or getattr(F, name)


TORCH = _Torch()


def _pad_slice(ns: Any, x: Any) -> Any:
    return ns.pad(x, (1, 2))[..., 1:-2] if x.ndim else x


def _transpose_round_trip(ns: Any, x: Any) -> Any:
    return ns.transpose(ns.sin(ns.transpose(x, 0, -1)), 0, -1) if x.ndim else x


def _reshape_round_trip(ns: Any, x: Any) -> Any:
    return ns.reshape(ns.cos(ns.reshape(x, (-1,))), x.shape)


def _matmul(ns: Any, x: Any) -> Any:
    return ns.matmul(ns.matmul(x, ns.transpose(x, -1, -2)), x) * 0.1 if x.ndim >= 2 else x


def _last_dim(fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda ns, x: fn(ns, x) if x.ndim else x


UNARY: dict[str, Callable[[Any, Any], Any]] = {
    "neg": lambda ns, x: ns.neg(x),
    "exp": lambda ns, x: ns.exp(ns.tanh(x)),
    "tanh": lambda ns, x: ns.tanh(x),
    "sigmoid": lambda ns, x: ns.sigmoid(x),
    "sin": lambda ns, x: ns.sin(x),
    "log": lambda ns, x: ns.log(ns.abs(x) + 1.0),
    "sqrt": lambda ns, x: ns.sqrt(x * x + 1.0),
    "square": lambda ns, x: ns.square(x),
    "gelu": lambda ns, x: ns.gelu(x),
    "silu": lambda ns, x: ns.silu(x),
    "flip": lambda ns, x: ns.flip(x, (-1,)) if x.ndim else x,
    "cumsum": _last_dim(lambda ns, x: ns.cumsum(x, -1)),
    "pad_slice": _pad_slice,
    "transpose": _transpose_round_trip,
    "reshape": _reshape_round_trip,
    "matmul": _matmul,
    "softmax": _last_dim(lambda ns, x: ns.softmax(x, -1)),
    "log_softmax": _last_dim(lambda ns, x: ns.log_softmax(x, -1)),
}
BINARY: dict[str, Callable[[Any, Any, Any], Any]] = {
    "add": lambda ns, a, b: ns.add(a, b),
    "sub": lambda ns, a, b: ns.sub(a, b),
    "mul": lambda ns, a, b: ns.mul(a, b),
    "div": lambda ns, a, b: ns.div(a, b * b + 1.0),
    "maximum": lambda ns, a, b: ns.maximum(a, b),
    "where": lambda ns, a, b: ns.where(a > b, a * 2.0, b),
    "atan2": lambda ns, a, b: ns.atan2(a, b * b + 1.0),
    "cat": lambda ns, a, b: _cat_halves(ns, a, b),
}
REDUCTION: dict[str, Callable[[Any, Any], Any]] = {
    "sum": _last_dim(lambda ns, x: ns.sum(x, -1, keepdim=True)),
    "mean": _last_dim(lambda ns, x: ns.mean(x, -1, keepdim=True)),
    "amax": _last_dim(lambda ns, x: ns.amax(x, -1, keepdim=True)),
    "var": _last_dim(lambda ns, x: ns.var(x, -1, keepdim=True, correction=0)),
    "logsumexp": _last_dim(lambda ns, x: ns.logsumexp(x, -1, keepdim=True)),
    "prod": _last_dim(lambda ns, x: ns.prod(x, -1, keepdim=True)),
}


def _cat_halves(ns: Any, a: Any, b: Any) -> Any:
    u, v = a + b, a * b
    if u.ndim == 0:
        return u * v
    n = u.shape[-1]
    c = ns.cat([u, v], -1)
    return c[..., :n] * c[..., n:]


@dataclass
class DiffProgram:
    """Inputs' shapes and which require grad, steps (kind, op, operand indices), outputs."""

    shapes: list[tuple[int, ...]]
    requires_grad: list[bool]
    steps: list[tuple[str, str, tuple[int, int]]]
    outputs: list[int]

    def inputs(self, seed: int) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        return [
            (torch.randn(s, generator=g, dtype=torch.float64) * 0.5).requires_grad_(r)
            for s, r in zip(self.shapes, self.requires_grad)
        ]

    def run(self, ns: Any, *args: Any) -> tuple[Any, ...]:
        values = list(args)
        for kind, name, (i, j) in self.steps:
            a, b = values[i % len(values)], values[j % len(values)]
            if kind == "unary":
                values.append(UNARY[name](ns, a))
            elif kind == "binary":
                values.append(BINARY[name](ns, a, b))
            else:
                values.append(REDUCTION[name](ns, a))
        return tuple(values[i % len(values)] for i in self.outputs)

    def trace(self, seed: int = 0) -> Trace:
        return trace_function(lambda *a: self.run(ltorch, *a), *self.inputs(seed))

    def eager(self, *args: torch.Tensor) -> tuple[Any, ...]:
        return self.run(TORCH, *args)


@st.composite
def diff_programs(draw: st.DrawFn) -> DiffProgram:
    full = (2, 3, 4)
    n_inputs = draw(st.integers(1, 4))
    shapes = []
    for _ in range(n_inputs):
        rank = draw(st.integers(0, 3))
        shapes.append(tuple(draw(st.sampled_from([d, 1])) for d in full[3 - rank :]))
    requires_grad = [draw(st.booleans()) for _ in range(n_inputs)]
    requires_grad[draw(st.integers(0, n_inputs - 1))] = True
    steps = []
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduction"]))
        table: dict[str, Any] = {"unary": UNARY, "binary": BINARY, "reduction": REDUCTION}[kind]
        name = draw(st.sampled_from(sorted(table)))
        steps.append((kind, name, (draw(st.integers(0, 50)), draw(st.integers(0, 50)))))
    outputs = draw(st.lists(st.integers(0, 100), min_size=1, max_size=3))
    return DiffProgram(shapes, requires_grad, steps, outputs)
