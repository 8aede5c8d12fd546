"""Benchmark: Thunder's executors against eager torch and torch.compile.

Workloads: a chain of 20 elementwise ops on 4M float32 elements, and a nanoGPT-block-like forward
(layer norm, causal self-attention, MLP with GELU) built from ltorch ops. Columns: eager torch,
Thunder with torch only (executors "torch_ops", "torch": high-level ops kept whole, the rest as
prims), Thunder with torchcompile fusion regions first, torch.compile of the eager function; times are the best of N interleaved runs, ratios are eager time / column time
(higher is faster).
Compile times are reported separately and are not in the timings.

Run: ``python benchmarks/executors.py [--quick]`` or ``python -m benchmarks executors``. On a
machine shared with other work, ``--threads 1 --clock cpu`` gives steadier numbers.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn.functional as F

from thunder_executors import transform_for_execution
from thunder_ir import ops as ltorch
from thunder_ir import trace_function
from thunder_ir.tags import OpTag

TORCH_NS = SimpleNamespace(
    add=torch.add,
    sub=torch.sub,
    mul=torch.mul,
    sin=torch.sin,
    cos=torch.cos,
    tanh=torch.tanh,
    exp=torch.exp,
    sigmoid=torch.sigmoid,
    layer_norm=F.layer_norm,
    linear=F.linear,
    gelu=F.gelu,
    split=torch.split,
    reshape=torch.reshape,
    transpose=torch.transpose,
    scaled_dot_product_attention=F.scaled_dot_product_attention,
)
LTORCH_NS = SimpleNamespace(**{name: getattr(ltorch, name) for name in vars(TORCH_NS)})


def elementwise_chain(ns: Any, x: Any, y: Any) -> Any:
    """20 elementwise ops, mostly arithmetic with three transcendentals (as in scaling, bias,
    activation and residual chains); values stay in a tame range."""
    a = ns.mul(x, 0.5)
    a = ns.add(a, y)
    a = ns.mul(a, y)
    a = ns.sub(a, 0.25)
    a = ns.tanh(a)
    a = ns.mul(a, x)
    a = ns.add(a, y)
    a = ns.mul(a, 0.75)
    a = ns.add(a, 1.0)
    a = ns.mul(a, a)
    a = ns.sub(a, x)
    a = ns.sigmoid(a)
    a = ns.mul(a, 2.0)
    a = ns.add(a, y)
    a = ns.mul(a, x)
    a = ns.sub(a, 0.5)
    a = ns.mul(a, y)
    a = ns.exp(a)
    a = ns.add(a, x)
    return ns.mul(a, 0.5)


N_HEAD = 4


def gpt_block(ns: Any, x: Any, ln1_w: Any, ln1_b: Any, w_attn: Any, b_attn: Any, w_proj: Any, b_proj: Any,
              ln2_w: Any, ln2_b: Any, w_fc: Any, b_fc: Any, w_out: Any, b_out: Any) -> Any:  # fmt: skip
    """One nanoGPT transformer block (no dropout)."""
    batch, seq, channels = x.shape
    head = channels // N_HEAD
    h = ns.layer_norm(x, (channels,), ln1_w, ln1_b)
    q, k, v = ns.split(ns.linear(h, w_attn, b_attn), channels, 2)
    q = ns.transpose(ns.reshape(q, (batch, seq, N_HEAD, head)), 1, 2)
    k = ns.transpose(ns.reshape(k, (batch, seq, N_HEAD, head)), 1, 2)
    v = ns.transpose(ns.reshape(v, (batch, seq, N_HEAD, head)), 1, 2)
    y = ns.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = ns.reshape(ns.transpose(y, 1, 2), (batch, seq, channels))
    x = ns.add(x, ns.linear(y, w_proj, b_proj))
    h = ns.layer_norm(x, (channels,), ln2_w, ln2_b)
    h = ns.linear(ns.gelu(ns.linear(h, w_fc, b_fc)), w_out, b_out)
    return ns.add(x, h)


def gpt_inputs(batch: int, seq: int, channels: int) -> list[torch.Tensor]:
    def w(*shape: int) -> torch.Tensor:
        return torch.randn(shape) * 0.02

    c = channels
    return [
        torch.randn(batch, seq, c),
        torch.ones(c), torch.zeros(c), w(3 * c, c), torch.zeros(3 * c), w(c, c), torch.zeros(c),
        torch.ones(c), torch.zeros(c), w(4 * c, c), torch.zeros(4 * c), w(c, 4 * c), torch.zeros(c),
    ]  # fmt: skip


# The clock timings use: wall time, or (--clock cpu) this process's CPU time, which other load on a
# shared machine disturbs far less (use it with --threads 1: idle worker threads spin).
CLOCK: list[Callable[[], float]] = [time.perf_counter]


def best_seconds(columns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """The best time of each column (the least disturbed by other load on the machine); the
    columns take turns so slow phases hit all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in columns}
    for _ in range(repeat):
        for name, fn in columns.items():
            clock = CLOCK[0]
            start = clock()
            fn()
            times[name].append(clock() - start)
    return {name: min(ts) for name, ts in times.items()}


def run_workload(
    name: str, fn: Callable[..., Any], inputs: list[torch.Tensor], repeat: int
) -> dict[str, Any]:
    eager = lambda *a: fn(TORCH_NS, *a)  # noqa: E731
    trace = trace_function(lambda *a: fn(LTORCH_NS, *a), *inputs)
    columns: dict[str, Callable[..., Any]] = {"eager": eager}
    compile_seconds: dict[str, float] = {}
    torch_only = transform_for_execution(trace, ("torch_ops", "torch"))
    columns["thunder torch"] = torch_only.python_callable()
    fused = transform_for_execution(trace, ("torchcompile", "torch_ops", "torch"))
    fused_fn = fused.python_callable()
    columns["thunder torchcompile"] = fused_fn
    compiled_eager = torch.compile(eager, dynamic=False)
    columns["torch.compile"] = compiled_eager

    expected = eager(*inputs)
    with torch.no_grad():
        start = time.perf_counter()
        compiled_eager(*inputs)
        compile_seconds["torch.compile"] = time.perf_counter() - start
        fused_fn(*inputs)
        compile_seconds["thunder torchcompile"] = fused.compile_seconds()
        for f in columns.values():
            torch.testing.assert_close(f(*inputs), expected, atol=1e-4, rtol=1e-4)
            f(*inputs)  # warm up
        times = best_seconds({col: (lambda f=f: f(*inputs)) for col, f in columns.items()}, repeat)
    return {
        "name": name,
        "times": times,
        "compile": compile_seconds,
        "regions": len(fused.fusion_regions),
        "symbols": (_calls(torch_only), _calls(fused)),
    }


def _calls(extrace: Any) -> int:
    """Calls an execution trace makes (not its ``del`` statements and return)."""
    return sum(1 for b in extrace.bound_symbols if not ({OpTag.DELETE, OpTag.RETURN} & b.sym.tags))


def print_table(results: list[dict[str, Any]]) -> None:
    cols = list(results[0]["times"])
    print(f"{'workload':<28}" + "".join(f"{c:>22}" for c in cols))
    for r in results:
        eager = r["times"]["eager"]
        cells = [f"{r['times'][c] * 1e3:9.2f} ms ({eager / r['times'][c]:5.2f}x)" for c in cols]
        print(f"{r['name']:<28}" + "".join(f"{c:>22}" for c in cells))
    print()
    for r in results:
        n_torch, n_fused = r["symbols"]
        print(
            f"{r['name']}: {n_torch} torch calls unfused, {r['regions']} torchcompile region(s) "
            f"({n_fused} calls); compile: thunder {r['compile']['thunder torchcompile']:.1f} s, "
            f"torch.compile {r['compile']['torch.compile']:.1f} s"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs and fewer repeats")
    parser.add_argument(
        "--threads", type=int, default=0, help="torch threads (default: torch's choice)"
    )
    parser.add_argument(
        "--clock", choices=("wall", "cpu"), default="wall", help="what timings measure"
    )
    args = parser.parse_args()
    if args.clock == "cpu":
        CLOCK[0] = time.process_time
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    repeat = 5 if args.quick else 30
    n = (1 << 20) if args.quick else (1 << 22)
    x, y = torch.randn(n), torch.rand(n)
    results = [
        run_workload(f"elementwise x20, {n / 2**20:g}M f32", elementwise_chain, [x, y], repeat)
    ]
    batch, seq, channels = (2, 64, 128) if args.quick else (8, 128, 256)
    results.append(
        run_workload(
            f"gpt block {batch}x{seq}x{channels}",
            gpt_block,
            gpt_inputs(batch, seq, channels),
            repeat,
        )
    )
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {args.clock} clock")
    print_table(results)


if __name__ == "__main__":
    main()
