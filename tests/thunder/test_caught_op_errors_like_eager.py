"""A program that catches an error a recorded op raised, and goes on, decides on that error.

Eager's op may not raise there: where thunder's recording of an op raises and eager's kernel does
not (an argument form thunder does not take, a fake-tensor run torch cannot make), a program that
catches the error would compute its fallback branch, silently. Such a call runs eagerly: eager
decides. A program the error leaves is the program's own raise (run eagerly, as before), and a
program that catches nothing compiles as before.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder
import thunder_ir.ops as ops


@pytest.fixture
def tanh_recording_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    """Thunder's recording of ``tanh`` raises where eager's kernel computes: a stand-in for any
    op whose recording wrongly refuses an argument form eager takes."""

    def refuses(*args: object, **kwargs: object) -> None:
        raise TypeError("tanh() got an argument form thunder does not take")

    monkeypatch.setattr(ops.tanh, "meta", refuses)


def _catches_type_error(x: torch.Tensor) -> torch.Tensor:
    try:
        y = torch.tanh(x)
    except TypeError:
        y = -x
    return y * 2


@pytest.mark.usefixtures("tanh_recording_raises")
def test_program_that_catches_an_op_error_eager_does_not_raise_computes_eagers_branch() -> None:
    jf = thunder.jit(_catches_type_error)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(4, 3)
            torch.testing.assert_close(jf(x), _catches_type_error(x))
    assert any("catches the TypeError" in str(w.message) for w in caught)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 3 and "ltorch.tanh" in (stats.last_eager_reason or "")


@pytest.mark.usefixtures("tanh_recording_raises")
def test_error_caught_inside_a_module_forward_with_gradients() -> None:
    class Guarded(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.lin(x)
            try:
                h = torch.tanh(h)
            except TypeError:
                h = h.relu()
            return h.sum(-1)

    model = Guarded()
    jm = thunder.jit(model)
    for _ in range(2):
        x = torch.randn(5, 3, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = jm(x)
        expected = model(x)
        torch.testing.assert_close(out, expected)
        (g,) = torch.autograd.grad(out.sum(), x)
        (ge,) = torch.autograd.grad(expected.sum(), x)
        torch.testing.assert_close(g, ge)


def test_error_eager_raises_too_and_the_program_catches_it() -> None:
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        try:
            return a @ b
        except RuntimeError:
            return a @ b.mT

    jf = thunder.jit(f)
    for _ in range(3):
        a, b = torch.randn(2, 3), torch.randn(4, 3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.testing.assert_close(jf(a, b), f(a, b))


def test_error_the_program_does_not_catch_is_eagers_error() -> None:
    def f(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a @ b).sum()

    jf = thunder.jit(f)
    with pytest.raises(RuntimeError):
        f(torch.randn(2, 3), torch.randn(2, 3))
    with pytest.raises(RuntimeError), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jf(torch.randn(2, 3), torch.randn(2, 3))
    a, b = torch.randn(2, 3), torch.randn(3, 2)
    torch.testing.assert_close(jf(a, b), f(a, b))


def test_errors_caught_from_python_code_still_compile() -> None:
    """Only errors of recorded ops decide: a KeyError of a dict lookup, an AttributeError of
    a tensor attribute probe, an error the program raises itself, are the program's own."""

    def f(x: torch.Tensor, table: dict[str, float]) -> torch.Tensor:
        try:
            scale = table["missing"]
        except KeyError:
            scale = 3.0
        try:
            x.not_an_attribute  # noqa: B018
        except AttributeError:
            scale += 1.0
        try:
            if x.shape[0] > 1:
                raise ValueError("too many rows")
        except ValueError:
            scale *= 2
        return x * scale

    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(3, 2)
        torch.testing.assert_close(jf(x, {}), f(x, {}))
    stats = thunder.compile_stats(jf)
    assert stats.compilations == 1 and stats.eager_fallbacks == 0


@pytest.mark.usefixtures("tanh_recording_raises")
def test_error_that_passes_through_a_finally_block_is_the_programs_raise() -> None:
    log: list[str] = []

    def f(x: torch.Tensor) -> torch.Tensor:
        try:
            return torch.tanh(x)
        finally:
            log.append("done")

    jf = thunder.jit(f)
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = jf(x)
    torch.testing.assert_close(out, torch.tanh(x))
    assert log == ["done"]
