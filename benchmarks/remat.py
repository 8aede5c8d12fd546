"""Benchmark: the rematerialization pass on the backward of a 12-layer GPT (hidden 32).

Prints, for each method, the seconds the pass takes and the bytes the forward saves for the
backward, against saving everything. Run: ``python benchmarks/remat.py``.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from thunder_ir import ops as L
from thunder_ir import trace_function
from thunder_transforms.autodiff import remat, split_forward_backward


def gpt(x: Any, *params: Any) -> Any:
    B, T, C = x.shape
    for i in range(len(params) // 8):
        g1, b1, wqkv, wo, g2, b2, w1, w2 = params[8 * i : 8 * i + 8]
        q, k, v = L.split(L.linear(L.layer_norm(x, (C,), g1, b1), wqkv), C, 2)
        q, k, v = (L.transpose(L.reshape(t, (B, T, 4, C // 4)), 1, 2) for t in (q, k, v))
        a = L.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + L.linear(L.reshape(L.transpose(a, 1, 2), (B, T, C)), wo)
        x = x + L.linear(L.gelu(L.linear(L.layer_norm(x, (C,), g2, b2), w1)), w2)
    return L.sum(x)


def main() -> None:
    C, layers = 32, 12
    shapes = [(C,), (C,), (3 * C, C), (C, C), (C,), (C,), (4 * C, C), (C, 4 * C)]
    params = [torch.randn(s, requires_grad=True) for _ in range(layers) for s in shapes]
    fb = split_forward_backward(trace_function(gpt, torch.randn(2, 8, C), *params))
    everything = remat.saved_bytes(fb)
    print(f"{'method':<12}{'seconds':>10}{'saved bytes':>14}{'of all':>9}")
    for method in ("greedy", "min_cut"):
        best, result = float("inf"), fb
        for _ in range(3):
            start = time.perf_counter()
            result = remat.rematerialize(fb, method=method)
            best = min(best, time.perf_counter() - start)
        saved = remat.saved_bytes(result)
        print(f"{method:<12}{best:>10.3f}{saved:>14}{saved / everything:>8.2f}x")


if __name__ == "__main__":
    main()
