"""numpy scalars as operands of torch operations: read as torch reads them (integers as int,
floating and bool as float), in a traced program, with no eager fallback."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import thunder

CASES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "mul_f64": lambda x: x * np.float64(0.5),
    "reflected_mul_f64": lambda x: np.float64(2.0) * x,
    "reflected_sub_f32": lambda x: np.float32(1.0) - x,
    "reflected_add_i64": lambda x: np.int64(3) + x,
    "div_sqrt": lambda x: x / np.sqrt(x.shape[-1]),
    "bool_is_read_as_float": lambda x: x.to(torch.int32) * np.bool_(True),
    "int_keeps_int_dtype": lambda x: x.to(torch.int32) * np.int64(3),
    "f16_scalar_is_weak": lambda x: x.to(torch.float16) + np.float64(1.0),
    "view": lambda x: x.view(np.int64(2), -1),
    "reshape_tuple": lambda x: x.reshape((np.int64(3), np.int32(2))),
    "sum_dim": lambda x: x.sum(np.int64(1)),
    "getitem": lambda x: x[np.int64(1)] + x[:, np.int64(0) : np.int64(1)].sum(),
    "full": lambda x: torch.full((2,), np.float64(3.0)) + x[0],
    "where": lambda x: torch.where(x > 0, x, np.float32(-1.0)),
    "clamp": lambda x: torch.clamp(x, np.float64(-0.5), max=np.float64(0.5)),
    "masked_fill": lambda x: x.masked_fill(x > 0, np.float64(-1e9)),
    "pow": lambda x: x ** np.int64(2),
    "tensor_keeps_numpy_dtype": lambda x: torch.tensor(np.float64(1.5)) + x.double(),
    "tensor_int32": lambda x: torch.tensor(np.int32(3)) + x.to(torch.int32),
    "as_tensor": lambda x: torch.as_tensor(np.float64(1.5)) * x.double(),
}


def _run_without_fallback(fn: Callable[..., Any], *args: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an eager fallback warns
        return fn(*args)


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_scalar_operand_gives_eagers_result(name: str) -> None:
    f = CASES[name]
    j = thunder.jit(f)
    for _ in range(2):  # the second call is a cache hit
        x = torch.randn(3, 2)
        actual, expected = _run_without_fallback(j, x), f(x)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        torch.testing.assert_close(actual, expected)
    stats = thunder.compile_stats(j)
    assert stats.eager_fallbacks == 0 and stats.compilations == 1


def test_gradient_through_a_numpy_scalar_operand() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (np.float32(3.0) * x * np.float64(0.5) - np.int64(1)).square().sum()

    j = thunder.jit(f)
    x = torch.randn(4, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    _run_without_fallback(j, x).backward()
    f(x2).backward()
    torch.testing.assert_close(x.grad, x2.grad)


SCALE = np.float32(2.0)
SHIFT = np.int64(1)


def _scaled(x: torch.Tensor) -> torch.Tensor:
    return x * SCALE + SHIFT


def test_numpy_scalar_global_changed_gives_the_new_result() -> None:
    # The scalar is a constant of the trace: its value is guarded, as a Python number's is.
    global SCALE, SHIFT
    j = thunder.jit(_scaled)
    x = torch.randn(3)
    try:
        torch.testing.assert_close(j(x), _scaled(x))
        SCALE = np.float32(5.0)
        torch.testing.assert_close(j(x), _scaled(x))
        SHIFT = np.int64(-4)
        torch.testing.assert_close(j(x), _scaled(x))
    finally:
        SCALE, SHIFT = np.float32(2.0), np.int64(1)
