"""Ops called with torch's keyword names (``torch.mul(x, other=w)``, ``torch.where(c, x,
other=w)``) are differentiated, cast by autocast and run by the executors like positional calls:
the recorded call keeps torch's names, which the rules bind by the op's own parameters."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import thunder

Binary = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

CALLS: dict[str, Binary] = {
    "mul": lambda x, w: torch.mul(x, other=w),
    "Tensor.mul": lambda x, w: x.mul(other=w),
    "div": lambda x, w: torch.div(x, other=w + 3),
    "div_floor": lambda x, w: torch.div(x * 4, other=w + 3, rounding_mode="floor"),
    "true_divide": lambda x, w: torch.true_divide(x, other=w + 3),
    "maximum": lambda x, w: torch.maximum(x, other=w),
    "minimum": lambda x, w: torch.minimum(input=x, other=w),
    "hypot": lambda x, w: torch.hypot(x, other=w),
    "where": lambda x, w: torch.where(x > 0, x, other=w),
    "matmul": lambda x, w: torch.matmul(x, other=w.reshape(3, 4).t()),
}
EXECUTORS = {"default": None, "torchcompile": ("torchcompile", "torch")}


def _jit(fn: Callable[..., torch.Tensor], executor: str) -> Callable[..., torch.Tensor]:
    ex = EXECUTORS[executor]
    return thunder.jit(fn) if ex is None else thunder.jit(fn, executors=ex)


# The rules bind the recorded call whatever executor runs it: the fusion executor on a few.
_CASES = [
    *((name, dtype, "default") for name in CALLS for dtype in (torch.float32, torch.bfloat16)),
    ("mul", torch.float32, "torchcompile"),
    ("where", torch.bfloat16, "torchcompile"),
]


@pytest.mark.parametrize(("name", "dtype", "executor"), _CASES, ids=str)
def test_keyword_call_gradients_equal_eager(name: str, dtype: torch.dtype, executor: str) -> None:
    fn = CALLS[name]
    jf = _jit(fn, executor)
    for _ in range(3):
        x = torch.randn(3, 4, dtype=dtype, requires_grad=True)
        w = torch.randn(3, 4, dtype=dtype, requires_grad=True)
        xe, we = (t.detach().clone().requires_grad_(True) for t in (x, w))
        expected = fn(xe, we)
        got = jf(x, w)
        g = torch.randn_like(expected)
        expected.backward(g)
        got.backward(g)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        for a, e in ((x.grad, xe.grad), (w.grad, we.grad)):
            assert (a is None) == (e is None)
            if a is not None:
                torch.testing.assert_close(a, e)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0, stats.last_eager_reason
    assert stats.compilations == 1


@pytest.mark.parametrize("name", ["mul", "matmul", "where"])
def test_keyword_call_under_autocast_like_eager(name: str) -> None:
    fn = CALLS[name]
    jf = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(3, 4, requires_grad=True)
        w = torch.randn(3, 4, requires_grad=True)
        xe, we = (t.detach().clone().requires_grad_(True) for t in (x, w))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            expected = fn(xe, we)
            got = jf(x, w)
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        got.float().sum().backward()
        expected.float().sum().backward()
        torch.testing.assert_close(x.grad, xe.grad)
        torch.testing.assert_close(w.grad, we.grad)
    assert thunder.compile_stats(jf).eager_fallbacks == 0
