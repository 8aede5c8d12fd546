"""Checking gradients of traced functions against eager torch.autograd and finite differences."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from thunder_executors import transform_for_execution
from thunder_ir import Trace, check_trace, trace_function
from thunder_ir.pytree import tree_flatten
from thunder_transforms.autodiff import DifferentiableFunction, make_differentiable


def compile_trace(trace: Trace) -> Callable[..., Any]:
    return transform_for_execution(trace, executors=("torch",)).python_callable()


def differentiate(fn: Callable[..., Any], *inputs: Any) -> DifferentiableFunction:
    """Traces ``fn`` on ``inputs`` (their requires_grad flags say what to differentiate), splits
    it, verifies both traces and compiles them with the torch executor."""
    trace = trace_function(fn, *inputs)
    check_trace(trace)
    runner, fw, bw = make_differentiable(trace, compile=compile_trace)
    check_trace(fw)
    check_trace(bw)
    fw.python()
    bw.python()
    return runner


def _tensors(x: Any) -> list[torch.Tensor]:
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def _grads(
    outs: Sequence[torch.Tensor], cts: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor]
) -> list[Any]:
    pairs = [(o, c) for o, c in zip(outs, cts) if o.requires_grad]
    if not pairs:
        return [None] * len(inputs)
    return list(
        torch.autograd.grad([o for o, _ in pairs], inputs, [c for _, c in pairs], allow_unused=True)
    )


def fresh(inputs: Sequence[Any]) -> list[Any]:
    return [
        x.detach().clone().requires_grad_(x.requires_grad) if isinstance(x, torch.Tensor) else x
        for x in inputs
    ]


def check_against_eager(
    fn: Callable[..., Any],
    eager: Callable[..., Any],
    *inputs: Any,
    gradcheck: bool = True,
    atol: float = 1e-6,
    rtol: float = 1e-5,
) -> DifferentiableFunction:
    """Outputs and input gradients (for random cotangents) of the compiled ``fn`` equal eager's;
    with ``gradcheck``, also finite differences (inputs should be float64)."""
    runner = differentiate(fn, *fresh(inputs))
    ours_in, eager_in = fresh(inputs), fresh(inputs)
    ours_out, eager_out = _tensors(runner(*ours_in)), _tensors(eager(*eager_in))
    assert len(ours_out) == len(eager_out)
    for o, e in zip(ours_out, eager_out):
        torch.testing.assert_close(o, e, atol=atol, rtol=rtol, equal_nan=True)
        assert o.requires_grad == e.requires_grad, "requires_grad of an output differs from eager"
    g = torch.Generator().manual_seed(1234)
    cts = [
        torch.randn(e.shape, generator=g, dtype=torch.float64).to(e.dtype)
        if e.dtype.is_floating_point
        else None
        for e in eager_out
    ]
    diff_ours = [x for x in ours_in if isinstance(x, torch.Tensor) and x.requires_grad]
    diff_eager = [x for x in eager_in if isinstance(x, torch.Tensor) and x.requires_grad]
    ours_g = _grads(ours_out, cts, diff_ours)
    eager_g = _grads(eager_out, cts, diff_eager)
    for i, (a, b) in enumerate(zip(ours_g, eager_g)):
        if b is None:
            assert a is None or not a.any(), f"grad {i}: eager has none, we have {a}"
            continue
        assert a is not None, f"grad {i}: eager has one, we have none"
        torch.testing.assert_close(a, b, atol=atol, rtol=rtol, msg=lambda m: f"grad {i}: {m}")
    if gradcheck:
        check_finite_differences(runner, *inputs)
    return runner


def check_finite_differences(runner: DifferentiableFunction, *inputs: Any) -> None:
    xs = fresh(inputs)
    assert torch.autograd.gradcheck(
        lambda *a: tuple(t for t in _tensors(runner(*a)) if t.dtype.is_floating_point),
        xs,
        eps=1e-6,
        atol=1e-5,
        rtol=1e-4,
    )


def check_gradcheck(fn: Callable[..., Any], *inputs: Any) -> DifferentiableFunction:
    """Gradients of the compiled ``fn`` against finite differences (float64 inputs)."""
    runner = differentiate(fn, *fresh(inputs))
    check_finite_differences(runner, *inputs)
    return runner


def rand(
    *shape: int, low: float = -1.0, high: float = 1.0, grad: bool = True, seed: int = 0
) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + 17 * len(shape) + sum(shape))
    x = torch.rand(shape, generator=g, dtype=torch.float64) * (high - low) + low
    return x.requires_grad_(grad)
