"""In-place writes into what reshape/reshape_as/flatten/ravel returned (seed 004): an error by
default; with reshape_inplace="warn", a warning and eager's exact side effects."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import thunder
from thunder import UnsupportedOperationError
from thunder.errors import ReshapeWriteError


def _contiguous() -> torch.Tensor:
    return torch.randn(4, 6)


def _transposed() -> torch.Tensor:
    return torch.randn(6, 4).t()  # reshape(-1) of it is a copy


def _reshape_add(x: torch.Tensor) -> torch.Tensor:
    y = x.reshape(-1)
    y.add_(1)
    return y * 2


def _flatten_slice_mul(x: torch.Tensor) -> torch.Tensor:
    y = x.flatten()[2:]
    y.mul_(3)
    return y


def _reshape_as_setitem(x: torch.Tensor) -> torch.Tensor:
    y = x.reshape_as(torch.empty(2, 12))
    y[0] = 0.5
    return y


def _ravel_sub(x: torch.Tensor) -> torch.Tensor:
    y = torch.ravel(x)
    y.sub_(2)
    return y


PROGRAMS = [_reshape_add, _flatten_slice_mul, _reshape_as_setitem, _ravel_sub]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
def test_write_into_a_reshape_result_is_an_error_when_asked(program: Callable[..., Any]) -> None:
    for make in (_contiguous, _transposed):  # whether or not this reshape is a view
        x = make()
        before = x.clone()
        with pytest.raises(ReshapeWriteError) as info:  # asked for: raised, not run by torch
            thunder.jit(program, reshape_inplace="error")(x)
        message = str(info.value)
        assert "test_reshape_inplace.py" in message  # the user's line
        assert "view" in message and "clone()" in message and "reshape_inplace" in message
        torch.testing.assert_close(x, before)  # nothing ran


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.__name__)
@pytest.mark.parametrize("mode", [None, "warn"], ids=["default", "warn"])
def test_warn_mode_does_what_eager_does(program: Callable[..., Any], mode: str | None) -> None:
    options = {} if mode is None else {"reshape_inplace": mode}
    jitted = thunder.jit(program, **options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for make in (_contiguous, _transposed, _contiguous):  # the third: a cache hit
            x = make()
            x_eager = x.clone()
            out = jitted(x)
            ref = program(x_eager)
            assert torch.equal(out, ref)
            assert torch.equal(x, x_eager)  # the input changed exactly when eager's changed
    assert any("view of its input or as a copy" in str(w.message) for w in caught)
    assert thunder.compile_stats(jitted).cache_hits >= 1


def test_writes_into_true_views_and_copies_are_fine() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        x.view(-1)[:3].add_(1)  # a view: always writes x
        x.t()[0].mul_(2)
        y = x.reshape(-1).clone()  # a copy: never writes x
        y.add_(5)
        z = x.flatten() * 1  # computed: a new tensor
        z.sub_(1)
        return y + z

    x = torch.randn(4, 6)
    x_eager = x.clone()
    out = thunder.jit(f)(x)
    ref = f(x_eager)
    assert torch.equal(out, ref) and torch.equal(x, x_eager)


def test_unknown_mode_is_an_error() -> None:
    with pytest.raises(ValueError, match="reshape_inplace must be"):
        thunder.jit(_reshape_add, reshape_inplace="ignore")


# -- property: random programs of views, reshapes and writes ------------------------------------

_VIEWS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "t": lambda a: a.t() if a.ndim == 2 else a,
    "slice": lambda a: a[1:] if a.shape[0] > 1 else a,
    "select": lambda a: a[0] if a.ndim == 2 else a,
    "unsqueeze_squeeze": lambda a: a.unsqueeze(0).squeeze(0),
    "narrow": lambda a: a.narrow(-1, 0, max(1, a.shape[-1] - 1)),
}
_RESHAPES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "reshape": lambda a: a.reshape(-1),
    "flatten": lambda a: a.flatten(),
}
_COPIES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "clone": lambda a: a.clone(),
    "mul": lambda a: a * 2,
}
_WRITES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "add_": lambda a: a.add_(1),
    "mul_": lambda a: a.mul_(-0.5),
}
_ALL = {**_VIEWS, **_RESHAPES, **_COPIES, **_WRITES}


def _writes_into_reshape(steps: list[str]) -> bool:
    derived = False
    for s in steps:
        if s in _RESHAPES:
            derived = True
        elif s in _COPIES:
            derived = False
        elif s in _WRITES and derived:
            return True
    return False


def _make_program(steps: list[str]) -> Callable[[torch.Tensor], torch.Tensor]:
    def program(x: torch.Tensor) -> torch.Tensor:
        cur = x
        for s in steps:
            cur = _ALL[s](cur)
        return cur * 1

    return program


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(sorted(_ALL)), min_size=1, max_size=6),
    st.booleans(),
    st.sampled_from(["error", "warn"]),
)
def test_random_view_reshape_write_programs_match_eager(
    steps: list[str], transposed: bool, mode: str
) -> None:
    program = _make_program(steps)
    x = _transposed() if transposed else _contiguous()
    x_eager = x.clone()
    jitted = thunder.jit(program, reshape_inplace=mode)
    if mode == "error" and _writes_into_reshape(steps):
        with pytest.raises(UnsupportedOperationError, match="in-place write into the result"):
            jitted(x)
        assert torch.equal(x, x_eager)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = jitted(x)
    ref = program(x_eager)
    assert torch.equal(out, ref)
    assert torch.equal(x, x_eager)
