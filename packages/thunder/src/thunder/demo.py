"""The main job: record a small model's forward into a trace by hand, print it, run it, check it.

Run with ``./dev demo``. (Once the jit lands, this becomes the jit demo.)
"""

from __future__ import annotations

import time
from typing import Any

import torch

from thunder_executors import transform_for_execution
from thunder_ir import check_trace, trace_function
from thunder_ir import ops as ltorch


def mlp_block(x: Any, ln_w: Any, ln_b: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    """A pre-norm MLP block with a residual connection, written with torch-language ops."""
    h = ltorch.layer_norm(x, (x.shape[-1],), ln_w, ln_b, 1e-5)
    h = ltorch.gelu(ltorch.linear(h, w1, b1), approximate="tanh")
    return x + ltorch.linear(h, w2, b2)


def eager_mlp_block(x: Any, ln_w: Any, ln_b: Any, w1: Any, b1: Any, w2: Any, b2: Any) -> Any:
    F = torch.nn.functional
    h = F.layer_norm(x, (x.shape[-1],), ln_w, ln_b, 1e-5)
    h = F.gelu(F.linear(h, w1, b1), approximate="tanh")
    return x + F.linear(h, w2, b2)


def main() -> None:
    torch.manual_seed(0)
    d = 64
    inputs = [
        torch.randn(4, 16, d),
        torch.ones(d),
        torch.zeros(d),
        torch.randn(4 * d, d) * d**-0.5,
        torch.zeros(4 * d),
        torch.randn(d, 4 * d) * (4 * d) ** -0.5,
        torch.zeros(d),
    ]
    start = time.perf_counter()
    trace = trace_function(mlp_block, *inputs, fn_name="mlp_block")
    check_trace(trace)
    traced = time.perf_counter() - start
    print("# The recorded trace (torch-language ops, with the prims they decompose into):")
    print(trace.python())
    extrace = transform_for_execution(trace)
    print("# The execution trace (what runs):")
    print(extrace.python())
    fn = extrace.python_callable()
    got = fn(*inputs)
    want = eager_mlp_block(*inputs)
    torch.testing.assert_close(got, want)
    print(f"recorded in {traced * 1e3:.1f} ms; output {tuple(got.shape)} matches eager PyTorch")


if __name__ == "__main__":
    main()
