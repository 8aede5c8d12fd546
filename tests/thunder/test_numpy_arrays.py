"""Numpy arrays made into tensors inside the jitted function, against eager: an outside array's
tensor is a fresh input on every call and shares the array's memory as in eager."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from runs_by_torch import call_split

import thunder

TABLE = np.zeros((2, 3), dtype=np.float32)


def _fresh(shape: tuple[int, ...] = (2, 3)) -> np.ndarray:
    return np.random.default_rng().standard_normal(shape).astype(np.float32)


def test_from_numpy_of_an_argument_sees_each_calls_values() -> None:
    def f(x: torch.Tensor, a: np.ndarray) -> torch.Tensor:
        return x * torch.from_numpy(a)

    jf = thunder.jit(f)
    for shape in ((2, 3), (2, 3), (4, 3)):
        x, a = torch.randn(shape), _fresh(shape)
        torch.testing.assert_close(jf(x, a), f(x, a))
    assert thunder.compile_stats(jf).compilations == 2  # a new shape, not new values


def test_global_array_changed_between_calls_is_read_again() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x + torch.as_tensor(TABLE, dtype=torch.float64)

    jf = thunder.jit(f)
    for _ in range(3):
        TABLE[:] = _fresh()
        x = torch.randn(2, 3, dtype=torch.float64)
        torch.testing.assert_close(jf(x), f(x))
    assert thunder.compile_stats(jf).compilations == 1


@pytest.mark.parametrize("convert", ["from_numpy", "as_tensor", "asarray"])
def test_in_place_write_reaches_the_array_as_in_eager(convert: str) -> None:
    def f(x: torch.Tensor, a: np.ndarray) -> torch.Tensor:
        t = getattr(torch, convert)(a)
        t.mul_(x)
        return t + 1

    jf = thunder.jit(f)
    for _ in range(2):
        x, a = torch.randn(2, 3), _fresh()
        a_eager, a_jit = a.copy(), a.copy()
        torch.testing.assert_close(jf(x, a_jit), f(x, a_eager))
        np.testing.assert_array_equal(a_jit, a_eager)


def test_torch_tensor_of_an_array_is_a_copy() -> None:
    def f(x: torch.Tensor, a: np.ndarray) -> torch.Tensor:
        t = torch.tensor(a, dtype=torch.float64)
        t.add_(x)
        return t

    x, a = torch.randn(2, 3, dtype=torch.float64), _fresh()
    before = a.copy()
    torch.testing.assert_close(thunder.jit(f)(x, a), f(x, a))
    np.testing.assert_array_equal(a, before)


def test_array_built_inside_becomes_a_constant_copy() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x + torch.tensor(np.arange(3, dtype=np.float32) * 2)

    x = torch.randn(3)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))


def test_sharing_an_array_built_inside_runs_split() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x + torch.from_numpy(np.ones(3, dtype=np.float32))

    x = torch.randn(3)
    out = call_split(thunder.jit(f), x, match="built inside the jitted function")
    torch.testing.assert_close(out, f(x))


def test_non_array_arguments_keep_their_usual_path() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.as_tensor(x, dtype=torch.float64) + torch.tensor([1.0, 2.0])

    x = torch.randn(2)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))
    with pytest.raises(TypeError):
        thunder.jit(lambda x: torch.from_numpy(x))(x)
