"""Hypothesis strategies for random valid traces: random DAGs of torch-language ops over inputs of
random (broadcast-compatible) shapes and dtypes, with repeated and dead computations mixed in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import strategies as st

from thunder_ir import Trace, trace_function
from thunder_ir import ops as ltorch

UNARY = ("neg", "exp", "abs", "tanh", "sigmoid", "sin")
BINARY = ("add", "mul", "sub", "maximum", "div")
DTYPES = (torch.float32, torch.float64)


@dataclass
class RandomProgram:
    """A recipe: inputs' shapes/dtypes and a list of steps; ``build`` records it as a trace."""

    shapes: list[tuple[int, ...]]
    dtypes: list[torch.dtype]
    steps: list[tuple[str, str, tuple[int, ...]]]  # (kind, op name, operand indices)
    outputs: list[int]

    def inputs(self, seed: int) -> list[torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        return [
            torch.randn(s, generator=g, dtype=torch.float64).to(d) * 0.5
            for s, d in zip(self.shapes, self.dtypes)
        ]

    def run(self, ns: Any, *args: Any) -> Any:
        values = list(args)
        for kind, name, operands in self.steps:
            fn = getattr(ns, name)
            xs = [values[i % len(values)] for i in operands]
            if kind == "unary":
                values.append(fn(xs[0]))
            elif kind == "binary":
                values.append(fn(xs[0], xs[1]))
            else:  # reduction over the last dim, keepdim so later broadcasting keeps working
                x = xs[0]
                values.append(fn(x, -1, True) if x.ndim else fn(x))
        return tuple(values[i % len(values)] for i in self.outputs)

    def trace(self, seed: int = 0) -> Trace:
        return trace_function(lambda *a: self.run(ltorch, *a), *self.inputs(seed))

    def eager(self, *args: torch.Tensor) -> Any:
        return self.run(torch, *args)


@st.composite
def random_programs(draw: st.DrawFn) -> RandomProgram:
    # Shapes broadcast against a common (2, 3, 4): trailing subsets, with 1s mixed in.
    full = (2, 3, 4)
    n_inputs = draw(st.integers(1, 4))
    shapes = []
    for _ in range(n_inputs):
        rank = draw(st.integers(0, 3))
        dims = tuple(draw(st.sampled_from([d, 1])) for d in full[3 - rank :])
        shapes.append(dims)
    dtypes = [draw(st.sampled_from(DTYPES)) for _ in range(n_inputs)]
    steps = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduction"]))
        name = {
            "unary": st.sampled_from(UNARY),
            "binary": st.sampled_from(BINARY),
            "reduction": st.just("sum"),
        }[kind]
        operands = (draw(st.integers(0, 50)), draw(st.integers(0, 50)))
        step = (kind, draw(name), operands)
        steps.append(step)
        if draw(st.booleans()) and draw(st.booleans()):
            steps.append(step)  # an exact repeat, for CSE
    outputs = draw(st.lists(st.integers(0, 100), min_size=1, max_size=3))
    return RandomProgram(shapes, dtypes, steps, outputs)


# Number programs: arithmetic on an int and a float input and on constants, whose results scale
# tensors and are returned (the shape of what constant folding works on).
NUMBER_UNARY = ("neg", "abs", "floor", "ceil")  # sin & co. refuse symbolic numbers
NUMBER_BINARY = ("add", "sub", "mul", "lt", "ge", "eq")


@dataclass
class NumberProgram:
    int_input: int
    float_input: float
    steps: list[tuple[str, int, int | float | None]]  # (op, operand index, constant or None)
    outputs: list[int]

    def trace(self) -> Trace:
        from thunder_ir import FloatProxy, IntegerProxy, prims, tracectx
        from thunder_ir.tracing import proxy_for_tensor

        trace = Trace()
        with tracectx(trace):
            x = proxy_for_tensor(torch.zeros(2, 3))
            n = IntegerProxy("n", value=self.int_input)
            f = FloatProxy("f", value=self.float_input)
            trace.args = (x, n, f)
            values: list[Any] = [n, f, 2, -1.5]
            for op, i, const in self.steps:
                a = values[i % len(values)]
                if op in NUMBER_UNARY:
                    values.append(getattr(prims, op)(a))
                else:
                    b = const if const is not None else values[(i * 7 + 3) % len(values)]
                    if op == "mul" and const is None:
                        b = -1  # products of symbolic values would grow without bound
                    values.append(getattr(prims, op)(a, b))
            picked = [values[i % len(values)] for i in self.outputs]
            scaled = x
            for v in picked:
                scaled = ltorch.add(ltorch.mul(scaled, 0.5), v)
            prims.python_return((scaled, *picked))
        return trace


@st.composite
def number_programs(draw: st.DrawFn) -> NumberProgram:
    steps = []
    for _ in range(draw(st.integers(1, 12))):
        op = draw(st.sampled_from(NUMBER_UNARY + NUMBER_BINARY))
        const = draw(
            st.one_of(st.none(), st.integers(-3, 3), st.floats(-2.0, 2.0, allow_nan=False))
        )
        steps.append((op, draw(st.integers(0, 40)), const))
    outputs = draw(st.lists(st.integers(0, 60), min_size=1, max_size=3))
    return NumberProgram(
        draw(st.integers(-5, 5)), draw(st.floats(-3.0, 3.0, allow_nan=False)), steps, outputs
    )
