"""Fusion regions compiled by inductor give eager's results and raise eager's errors: fp16/bf16
intermediates round (and overflow) as eager's; integer division by zero raises instead of killing
the process; index ops raise on bad indices; float remainder and floor division follow eager's
formula; complex ops run; a region inductor cannot compile runs its torch calls."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder_executors.background_compile import ExampleInputs
from thunder_executors.torchcompile import CompiledRegion


def _casts(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        x.half().float() * y,  # the round trip rounds
        (x.half() * 7e4).float() - 1,  # an fp16 product above 65504 is inf
        (x.bfloat16() * y.bfloat16() + 1).float() * 3,  # each bf16 result rounds
    )


@pytest.mark.parametrize("cache", [None, "symbolic values"])  # inductor_direct, then dynamo
def test_low_precision_intermediates_round_as_eager(cache: str | None) -> None:
    kwargs: dict[str, Any] = {"cache": cache} if cache else {}
    jf = thunder.jit(_casts, executors=["torchcompile"], **kwargs)
    grad = cache is None
    for n in (8, 8, 9) if cache else (8, 8, 8):
        x = (torch.randn(4, n) * 100).requires_grad_(grad)
        y = torch.randn(4, n) * 3
        x2 = x.detach().clone().requires_grad_(grad)
        expected, got = _casts(x, y), jf(x2, y)
        for e, g in zip(expected, got):
            assert torch.equal(e, g), (e - g).abs().max()
        assert got[1].isinf().any()
        if grad:
            ct = [torch.randn_like(e) for e in expected]
            (ge,) = torch.autograd.grad(expected, x, ct)
            (gt,) = torch.autograd.grad(got, x2, ct)
            assert torch.equal(ge, gt)
    # Patched in while compiling thunder's regions only: a user's torch.compile keeps its setting.
    assert torch._inductor.config.emulate_precision_casts is False


def _divisions(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> Any:
    return (
        torch.div(a, b, rounding_mode="trunc") * 2 + 1,
        torch.remainder(a, b) * 3 + 1,
        torch.fmod(a, b) + a // b * 2,
        torch.div(a, 3, rounding_mode="floor") * 2 + 1,  # a constant divisor stays fused
        torch.remainder(x, y) * 2 + 0.5,  # remainder(x, inf) is x for x >= 0
        torch.div(x, y, rounding_mode="floor") * 2 + 0.5,  # 1.0 // 0.1 is 9
        torch.fmod(x, y) * 2 + 0.5,
    )


def _index_ops(w: torch.Tensor, idx: torch.Tensor) -> Any:
    return (
        w.index_select(0, idx) * 2 + 1,
        torch.gather(w, 0, idx[:, None].expand(-1, w.shape[1])) * 2 - 0.5,
        F.embedding(idx, w).abs() + 1,
    )


def _outcome(f: Any, *args: Any) -> Any:
    try:
        return f(*args)
    except Exception as e:  # the error's type is what must match
        return type(e)


def _assert_same(expected: Any, got: Any) -> None:
    if isinstance(expected, type):
        assert got is expected or (isinstance(got, type) and issubclass(got, expected)), got
        return
    assert not isinstance(got, type), got
    for e, g in zip(expected, got):
        assert torch.equal(e, g), (e, g)


def _division_inputs(zero: bool) -> tuple[torch.Tensor, ...]:
    a = torch.randint(-100, 100, (16,))
    b = torch.randint(1, 9, (16,)) * (torch.randint(0, 2, (16,)) * 2 - 1)
    if zero:
        b[3] = 0
    x = torch.tensor([1.0, 5.5, -5.5, 7.25] * 4) * torch.rand(16).add(1).round()
    y = torch.tensor([0.1, float("inf"), float("inf"), -1.1] * 4)
    return a, b, x, y


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_divisions_and_index_ops_raise_and_compute_as_eager(cache: str | None) -> None:
    kwargs: dict[str, Any] = {"cache": cache} if cache else {}
    jdiv = thunder.jit(_divisions, executors=["torchcompile"], **kwargs)
    jidx = thunder.jit(_index_ops, executors=["torchcompile"], **kwargs)
    for zero in (False, True, False):  # a zero divisor: eager's ZeroDivisionError, no SIGFPE
        args = _division_inputs(zero)
        _assert_same(_outcome(_divisions, *args), _outcome(jdiv, *args))
    for bad in (None, -1, 6, None):  # a negative or too large index raises as in eager
        w = torch.randn(6, 5)
        idx = torch.randint(0, 6, (4,))
        if bad is not None:
            idx[1] = bad
        _assert_same(_outcome(_index_ops, w, idx), _outcome(jidx, w, idx))


def test_compiled_integer_division_never_traps_the_process() -> None:
    # In a child process: a trap (SIGFPE) kills the process, not a test.
    script = textwrap.dedent(
        """
        import torch, thunder
        from thunder_executors import background_compile
        from thunder_executors.torchcompile import CompiledRegion

        # The background compile runs a region on stand-ins for the caller's integer tensors,
        # never zeros: here dynamo runs the division itself.
        def region(a, b):
            return (torch.div(a, b, rounding_mode="trunc") * 2 + 1,)

        compiled = CompiledRegion("", region, {"dynamic": True}, background=True)
        for n in (4, 5):
            a, b = torch.randint(-100, 100, (n,)), torch.randint(1, 10, (n,))
            assert torch.equal(compiled(a, b)[0], region(a, b)[0])
            background_compile.wait_for_background_compiles()
        assert compiled.status == "compiled", compiled.status

        f = lambda a, b: torch.div(a, b, rounding_mode="trunc") * 2 + 1
        jf = thunder.jit(f, executors=["torchcompile_background"], cache="symbolic values")
        for n, zero in ((4, False), (5, False), (6, True)):
            a, b = torch.randint(-100, 100, (n,)), torch.randint(1, 10, (n,))
            if zero:
                b[0] = 0
                try:
                    jf(a, b)
                    raise AssertionError("no error")
                except RuntimeError as e:
                    assert "ZeroDivisionError" in str(e)
            else:
                assert torch.equal(f(a, b), jf(a, b))
            background_compile.wait_for_background_compiles()
        print("done")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and "done" in done.stdout, (done.returncode, done.stderr[-3000:])


def _rope(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    # Meta-Llama's rotary embedding: complex views and a complex product.
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * freqs_cis).flatten(-2).type_as(x) * 2 + 1


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_complex_rotary_embedding_runs_as_eager(cache: str | None) -> None:
    kwargs: dict[str, Any] = {"cache": cache} if cache else {}
    jf = thunder.jit(_rope, executors=["torchcompile"], **kwargs)
    for s in (3, 3, 4):
        x = torch.randn(2, s, 8)
        fc = torch.polar(torch.ones(s, 4), torch.randn(s, 4))
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)  # no failed compile
            torch.testing.assert_close(jf(x, fc), _rope(x, fc))
    # With gradients too.
    x = torch.randn(2, 4, 8, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    expected, got = _rope(x, fc), jf(x2, fc)
    torch.testing.assert_close(got, expected)
    ct = torch.randn_like(expected)
    torch.testing.assert_close(
        torch.autograd.grad(got, x2, ct)[0], torch.autograd.grad(expected, x, ct)[0]
    )


def test_a_failed_synchronous_compile_warns_and_runs_the_torch_calls(monkeypatch: Any) -> None:
    def fail(self: CompiledRegion, examples: list[Any]) -> Any:
        raise RuntimeError("inductor's internal error")

    monkeypatch.setattr(CompiledRegion, "_compile", fail)

    def region(a: torch.Tensor) -> tuple[torch.Tensor]:
        return (torch.tanh(a) * 2,)

    compiled = CompiledRegion("", region, {"dynamic": False}, background=False)
    a = torch.randn(3)
    with pytest.warns(RuntimeWarning, match="could not compile a fusion region.*internal error"):
        (got,) = compiled(a)
    assert torch.equal(got, region(a)[0])
    assert compiled.status.startswith("failed: RuntimeError")
    a = torch.randn(3)
    assert torch.equal(compiled(a)[0], region(a)[0])


def test_example_inputs_stand_in_ones_for_integer_tensors() -> None:
    x, n, mask = torch.randn(3), torch.randint(-5, 5, (2, 3)), torch.rand(4) > 0.5
    got = ExampleInputs((x, n, mask, n.int())).materialize()
    # the float tensor's own storage and layout (detached from the caller's autograd state)
    assert got[0].data_ptr() == x.data_ptr() and got[0].stride() == x.stride()
    assert torch.equal(got[0], x)
    assert torch.equal(got[1], torch.ones(2, 3, dtype=torch.long))
    assert got[2].dtype == torch.bool and got[3].dtype == torch.int32 and bool(got[3].all())
