"""Benchmark: torch's higher-order operators and a custom ``torch.autograd.Function`` under
thunder.jit, against eager PyTorch and torch.compile, in one run.

Eager ``torch.cond``, ``while_loop``, ``map`` and ``scan`` run through dynamo on every call
(torch compiles the operator's functions each time it meets them); thunder traces the functions
once into sub-traces of one higher-order op and runs them as Python control flow over compiled
code. Each row is one workload: the steady time per call (median of interleaved rounds) of eager,
then thunder.jit and torch.compile as ratios to eager (lower is faster), thunder's first call in
seconds, and ``ok`` when thunder's results equal eager's (outputs, and gradients for the
``+backward`` rows). torch.compile's cell names its exception where it fails, or ``wrong``.

Run: ``python -m benchmarks higher_order [--repeat N] [--no-torch-compile]``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from _timing import median_times
from torch._higher_order_ops import map as hop_map
from torch._higher_order_ops import scan, while_loop

import thunder


class _Clamp(torch.autograd.Function):
    """A straight-through clamp: forward clamps, backward passes the gradient unchanged."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return g


def _cond(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.cond(x.sum() > 0, lambda a: (a @ w).relu(), lambda a: (a @ w.t()).tanh(), (x,))


def _while(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    zero = torch.zeros((), dtype=torch.int64)
    return while_loop(lambda i, a: i < 8, lambda i, a: (i + 1, (a @ w).tanh()), (zero, x))[1]


def _map(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return hop_map(lambda row, m: (row @ m).sin(), x, w)


def _scan(x: torch.Tensor, w: torch.Tensor) -> Any:
    return scan(lambda c, r: ((c @ w).tanh() + r, c.sum(0)), x[:4], x.reshape(-1, 4, x.shape[1]))


def _function(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return _Clamp.apply(x @ w).exp()


WORKLOADS: dict[str, Callable[..., Any]] = {
    "cond": _cond,
    "while_loop (8 steps)": _while,
    "map (64 rows)": _map,
    "scan (16 steps)": _scan,
    "autograd.Function": _function,
}


def _leaves(x: Any) -> list[torch.Tensor]:
    return [x] if isinstance(x, torch.Tensor) else [t for v in x for t in _leaves(v)]


def _runner(fn: Callable[..., Any], backward: bool) -> Callable[[torch.Tensor, torch.Tensor], Any]:
    def run(x: torch.Tensor, w: torch.Tensor) -> Any:
        out = fn(x, w)
        if backward:
            sum(t.sum() for t in _leaves(out) if t.is_floating_point()).backward()
        return out

    return run


def _same(a: Any, b: Any) -> bool:
    try:
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
        return True
    except AssertionError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    header = (
        f"{'workload':34} {'eager':>10} {'thunder':>9} {'torch.compile':>14} {'first':>7}  check"
    )
    print(header)
    print("-" * len(header))
    for name, fn in WORKLOADS.items():
        for backward in (False, True):
            x = torch.randn(64, 64, requires_grad=backward)
            w = (torch.randn(64, 64) / 8).requires_grad_(backward)
            run = _runner(fn, backward)
            jitted = _runner(thunder.jit(fn), backward)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                got = jitted(x, w)
                first = time.perf_counter() - start
                grads = [t.grad.clone() for t in (x, w) if t.grad is not None]
                x.grad = w.grad = None
                ref = run(x, w)
                ref_grads = [t.grad.clone() for t in (x, w) if t.grad is not None]
                ok = _same(got, ref) and _same(grads, ref_grads)
                fns: list[Callable[[], Any]] = [lambda: run(x, w), lambda: jitted(x, w)]
                tc = "-"
                if not args.no_torch_compile:
                    compiled = _runner(torch.compile(fn), backward)
                    try:
                        tc = "ok" if _same(compiled(x, w), ref) else "wrong"
                        fns.append(lambda: compiled(x, w))
                    except Exception as e:  # inductor fails on some of these on CPU
                        tc = f"{type(e).__name__}"[:14]
                times = median_times(fns, args.repeat)
            if len(times) > 2:
                tc = f"{times[2] / times[0]:.2f}x" if tc == "ok" else tc
            label = f"{name}{' +backward' if backward else ''}"
            print(
                f"{label:34} {times[0] * 1e6:8.0f}us {times[1] / times[0]:8.2f}x {tc:>14} "
                f"{first:6.2f}s  {'ok' if ok else 'FAIL'}"
            )


if __name__ == "__main__":
    main()
