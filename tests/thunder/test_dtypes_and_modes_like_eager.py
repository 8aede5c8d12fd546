"""Calls eager answers in its own way, against eager: under a user's torch function mode,
with Python ints no int64/uint64 holds, with nested tensors, with NumPy arrays as operands, and
with dtypes the IR lacks (uint16/uint32/uint64, complex32). Each gives eager's result (compiled,
or run eagerly with a warning that says why), never a wrong value or a "please report this"."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]


def _same(expected: Any, got: Any) -> None:
    assert type(got) is type(expected)
    if isinstance(expected, torch.Tensor):
        assert got.dtype == expected.dtype and got.shape == expected.shape
        torch.testing.assert_close(got, expected, equal_nan=True, rtol=0, atol=0)
    elif isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for e, g in zip(expected, got):
            _same(e, g)
    else:
        assert got == expected


def _thunder_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "thunder" in str(w.message)]


# -- a user's torch function mode around the call ---------------------------------------------


class _AddsToTensorAdd(torch.overrides.TorchFunctionMode):
    """Changes what ``Tensor.add`` (eager's ``x + 1``) returns, and logs every call it sees."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.calls.append(getattr(func, "__name__", str(func)))
        out = func(*args, **(kwargs or {}))
        if func is torch.Tensor.add:
            out = out + 100
        return out


@pytest.mark.parametrize("cache", CACHES)
def test_a_function_mode_sees_the_calls_eager_makes(cache: str) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x + 1).sin() * 2

    jf = thunder.jit(f, cache=cache)
    jf(torch.randn(3))  # compiled before: the cached program must not serve the mode's calls
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(3, requires_grad=True)
            with _AddsToTensorAdd() as eager_mode:
                expected = f(x)
                (ge,) = torch.autograd.grad(expected.sum(), x)
            with _AddsToTensorAdd() as jit_mode:
                got = jf(x)
                (gj,) = torch.autograd.grad(got.sum(), x)
            _same(expected, got)
            _same(ge, gj)
            assert jit_mode.calls == eager_mode.calls
    messages = _thunder_warnings(caught)
    assert len(messages) == 1 and "_AddsToTensorAdd" in messages[0]  # shown once
    # Outside the mode the compiled program serves the call again.
    x = torch.randn(3)
    _same(f(x), jf(x))
    assert thunder.compile_stats(jf).eager_fallbacks == 3


def test_a_function_mode_call_is_logged_as_a_fallback(caplog: pytest.LogCaptureFixture) -> None:
    jf = thunder.jit(lambda x: x + 1)
    with (
        caplog.at_level(logging.INFO, logger="thunder.fallbacks"),
        warnings.catch_warnings(),
        _AddsToTensorAdd(),
    ):
        warnings.simplefilter("ignore")
        jf(torch.randn(2))
    assert any("_AddsToTensorAdd" in r.getMessage() for r in caplog.records)


def test_a_module_under_a_function_mode_runs_eagerly() -> None:
    model = torch.nn.Linear(3, 2)
    jm = thunder.jit(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            x = torch.randn(4, 3)
            with _AddsToTensorAdd() as eager_mode:
                expected = model(x)
            with _AddsToTensorAdd() as jit_mode:
                got = jm(x)
            _same(expected, got)
            assert jit_mode.calls == eager_mode.calls


def test_a_device_context_is_no_user_mode() -> None:
    """``with torch.device(...)`` pushes a function mode thunder models (the default device)."""

    def f(x: torch.Tensor) -> torch.Tensor:
        return x + torch.ones(3)

    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager run
        for _ in range(2):
            with torch.device("meta"):
                got = jf(torch.ones(3, device="meta"))
            assert got.device.type == "meta"
            x = torch.randn(3)
            _same(f(x), jf(x))
    assert thunder.compile_stats(jf).eager_fallbacks == 0


# -- Python ints beyond int64 and uint64 -------------------------------------------------------


def _caught(x: torch.Tensor) -> torch.Tensor:
    try:
        return x * 2**70
    except OverflowError:
        return x - 1


INT_CASES: dict[str, Callable[[torch.Tensor], Any]] = {
    "mul 2**70": lambda x: x * 2**70,
    "add 2**64": lambda x: x + 2**64,
    "reflected add 2**64": lambda x: 2**64 + x,
    "sub -2**64": lambda x: x - (-(2**64)),
    "mul -2**63-1": lambda x: x * (-(2**63) - 1),
    "where 2**70": lambda x: torch.where(x > 0, x, 2**70),
    "clamp 2**64": lambda x: x.clamp(max=2**64),
    "full 2**70": lambda x: torch.full((2,), 2**70),
    "int64 add 2**64": lambda x: x.long() + 2**64,
    "mul 2**63 (fits uint64)": lambda x: x * 2**63,
    "add 2**64-1 (fits uint64)": lambda x: x + (2**64 - 1),
    "mul -2**63 (fits int64)": lambda x: x * -(2**63),
    "python int math": lambda x: x * (2**70 // 2**60),
    "caught": _caught,
}


@pytest.mark.parametrize("name", list(INT_CASES))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_int_operands_overflow_as_in_eager(name: str, dtype: torch.dtype) -> None:
    f = INT_CASES[name]
    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            x = torch.randn(3, dtype=dtype)
            try:
                expected = f(x)
            except OverflowError as e:
                with pytest.raises(OverflowError, match=str(e)):
                    jf(x)
                continue
            _same(expected, jf(x))


@pytest.mark.parametrize("cache", CACHES)
def test_an_int_argument_beyond_uint64_overflows_as_in_eager(cache: str) -> None:
    def f(x: torch.Tensor, n: int) -> torch.Tensor:
        return x * n

    jf = thunder.jit(f, cache=cache)
    for n in (3, 2**70, 5, 2**64, 7):
        x = torch.randn(3)
        if n >= 2**64:
            with pytest.raises(OverflowError):
                f(x, n)
            with pytest.raises(OverflowError):
                jf(x, n)
        else:
            _same(f(x, n), jf(x, n))


# -- nested tensors ----------------------------------------------------------------------------


def _nested() -> torch.Tensor:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's prototype warning
        return torch.nested.nested_tensor([torch.randn(2, 3), torch.randn(4, 3)])


@pytest.mark.parametrize("cache", CACHES)
def test_a_nested_tensor_argument_runs_eagerly(cache: str) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.sin() * 2

    jf = thunder.jit(f, cache=cache)
    jf(torch.randn(2, 4, 3))  # a program of the same number of dimensions exists
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = _nested()
            expected, got = f(x), jf(x)
            assert got.is_nested
            for e, g in zip(expected.unbind(), got.unbind()):
                _same(e, g)
    messages = _thunder_warnings(caught)
    assert messages and all("nested tensor" in m and "please report" not in m for m in messages)
    x = torch.randn(2, 4, 3)
    _same(f(x), jf(x))


def test_a_nested_tensor_made_inside_is_run_by_torch() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.nested.nested_tensor([x[:2], x]).sin().to_padded_tensor(0.0) + 1

    jf = thunder.jit(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(4, 3)
            _same(f(x), jf(x))
    messages = _thunder_warnings(caught)
    assert messages and all("please report" not in m for m in messages)
    assert any("nested tensor" in m for m in messages)


# -- NumPy arrays as operands ------------------------------------------------------------------


def _in_place_sub(x: torch.Tensor) -> torch.Tensor:
    y = x * 2
    y -= np.array(1.0)
    return y


NUMPY_CASES: dict[str, Callable[[torch.Tensor], Any]] = {
    "tensor + 0-d array": lambda x: x + np.array(2.5),
    "0-d array + tensor": lambda x: np.array(2.5) + x,
    "tensor + array": lambda x: x + np.ones(3),
    "array * tensor": lambda x: np.ones(3) * x,
    "tensor * int 0-d array": lambda x: x * np.array(3),
    "tensor < 0-d array": lambda x: x < np.array(0.0),
    "tensor == array": lambda x: x == np.ones(3),
    "tensor @ array": lambda x: x @ np.ones(3),
    "in-place sub of a 0-d array": _in_place_sub,
    "tensor + float64 scalar": lambda x: x + np.float64(2.5),
    "float32 scalar * tensor": lambda x: np.float32(3) * x,
    "tensor + int64 scalar": lambda x: x + np.int64(2),
}


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # numpy 2 on torch's __array_wrap__
@pytest.mark.parametrize("name", list(NUMPY_CASES))
def test_numpy_operands_as_in_eager(name: str) -> None:
    f = NUMPY_CASES[name]
    jf = thunder.jit(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(3)
            try:
                expected = f(x)
            except TypeError:
                with pytest.raises(TypeError):
                    jf(x)
                continue
            _same(expected, jf(x))
    assert not any("please report" in m for m in _thunder_warnings(caught))


# -- dtypes the IR lacks -----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_an_unsigned_input_runs_eagerly_with_a_reason(dtype: torch.dtype) -> None:
    def f(x: torch.Tensor) -> Any:
        return x.to(torch.int64) * 2, x.view(-1)[1:]

    jf = thunder.jit(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(4):
            x = torch.randint(0, 1000, (5,)).to(dtype)
            _same(f(x), jf(x))
    messages = _thunder_warnings(caught)
    assert messages and all(str(dtype) in m and "please report" not in m for m in messages)


@pytest.mark.parametrize(
    "f",
    [
        lambda x: (x * 2, x.dtype.to_complex()),
        lambda x: (x * 2, torch.uint16),
        lambda x: (x * 2, x.dtype == torch.uint32),
        lambda x: x.to(torch.uint16).to(torch.float32) + 1,
        lambda x: torch.zeros(2, dtype=torch.uint32).to(x.dtype) + x[:2],
    ],
    ids=["to_complex", "uint16 constant", "uint32 compared", "to uint16", "uint32 zeros"],
)
def test_dtypes_the_ir_lacks_inside_the_program(f: Callable[[torch.Tensor], Any]) -> None:
    jf = thunder.jit(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(3, dtype=torch.float16).abs() * 10
            _same(f(x), jf(x))
    assert not any("please report" in m for m in _thunder_warnings(caught))
