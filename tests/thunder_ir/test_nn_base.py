"""The arithmetic of ``thunder_ir.ops.nn_base`` (what the nn ops decompose into) is the
torch-language ops' own: each helper computes what its ``ltorch`` op computes, CPU scalar rules
included, and what eager torch computes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from thunder_executors import transform_for_execution
from thunder_ir import ops as ltorch
from thunder_ir import trace_function
from thunder_ir.ops import nn_base


def _run(fn: Callable[..., Any], *args: Any) -> Any:
    trace = trace_function(fn, *args)
    compiled = transform_for_execution(trace).python_callable()
    return compiled(*(a for a in args if isinstance(a, torch.Tensor)))


def _same(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert torch.equal(got, expected) or torch.equal(got.isnan(), expected.isnan())


def test_add_of_a_cpu_scalar_tensor_and_a_float_matches_eager() -> None:
    # torch's CPU kernel converts the number to bfloat16 before adding in float32: 7.125, where
    # adding the number as given would round to 7.15625.
    x = torch.tensor(3.28125, dtype=torch.bfloat16)
    s = 3.8622838083012248
    expected = x + s
    assert expected.item() != (x.float() + s).bfloat16().item()  # the rule matters here
    _same(_run(lambda t: nn_base.add(t, s), x), expected)
    _same(_run(lambda t: ltorch.add(t, s), x), expected)
    _same(_run(lambda t: nn_base.sub(t, -s), x), x - (-s))


def _operands() -> list[tuple[str, tuple[Any, ...]]]:
    g = torch.Generator().manual_seed(0)

    def r(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return (torch.randn(shape, generator=g) * 3).to(dtype)

    return [
        ("bf16-tensor-float", (r(16, dtype=torch.bfloat16), 0.7318)),
        ("f16-scalar-tensor-float", (r(dtype=torch.float16), -1.4142)),
        ("bf16-tensor-f32-scalar-tensor", (r(8, dtype=torch.bfloat16), r())),
        ("f32-tensors-broadcast", (r(4, 1), r(5))),
        ("int-tensor-float", (torch.arange(-3, 5), 0.5)),
        ("float-bf16-tensor", (2.5, r(16, dtype=torch.bfloat16))),
    ]


_COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]
_BINARY = ["add", "sub", "mul", "div", *_COMPARISONS]


@pytest.mark.parametrize("name", _BINARY)
@pytest.mark.parametrize("case", _operands(), ids=lambda c: c[0])
def test_binary_helpers_compute_what_the_ops_compute(
    name: str, case: tuple[str, tuple[Any, ...]]
) -> None:
    _, args = case
    if name in _COMPARISONS and not isinstance(args[0], torch.Tensor):
        pytest.skip("torch's comparisons take a tensor first (the helpers take either)")
    helper, op = getattr(nn_base, name), getattr(ltorch, name)
    got = _run(lambda a, b: helper(a, b), *args)
    _same(got, _run(lambda a, b: op(a, b), *args))
    _same(got, getattr(torch, name)(*args) if isinstance(args[0], torch.Tensor) else got)


@pytest.mark.parametrize("name", ["maximum", "minimum", "pow_"])
def test_binary_helpers_of_two_tensors_compute_what_the_ops_compute(name: str) -> None:
    a = torch.rand(6, dtype=torch.bfloat16) + 0.5
    b = torch.randn(6, dtype=torch.bfloat16)
    helper, op = getattr(nn_base, name), getattr(ltorch, name.rstrip("_"))
    _same(_run(lambda x, y: helper(x, y), a, b), _run(lambda x, y: op(x, y), a, b))


@pytest.mark.parametrize(
    "name", ["neg", "exp", "log", "log1p", "sqrt", "rsqrt", "tanh", "erf", "sigmoid", "abs_"]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_unary_helpers_compute_what_the_ops_compute(name: str, dtype: torch.dtype) -> None:
    x = (torch.rand(8) * 4 + 0.1).to(dtype)
    helper, op = getattr(nn_base, name), getattr(ltorch, name.rstrip("_"))
    _same(_run(lambda t: helper(t), x), _run(lambda t: op(t), x))
