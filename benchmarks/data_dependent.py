"""Benchmark: programs that read tensor data, against eager and torch.compile.

- A top-2 mixture-of-experts layer (8 experts) routed with ``torch.where``: steady forward and
  training step (forward and backward); the number of programs ``thunder.jit`` compiled over
  calls whose routing differs (goal: one).
- Greedy decoding with a sliding-window KV cache whose forward reads ``input_pos.max().item()``
  and slices the cache by it while the window is not full: ms per token (goal: no slower than
  eager), the programs compiled (goal: at most two per branch outcome), tokens equal to eager's.
- The cost of a decision on data: a program that branches on ``s > 0`` (``s = x.sum()``) against
  the same program without the branch: the read and the check (goal: at most 10 us per call).
- The cost of a split: a program calling a function run natively (``thunder.run_natively``), which
  runs split as thunder's own segments (``THUNDER_OWN_SEGMENTS=0``: by torch.compile), against its
  two parts jitted apart with the native call between them (goal: at most 10 us per call).

Run: ``python -m benchmarks data_dependent [--repeat N] [--no-torch-compile]``.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from typing import Any

import torch
from _timing import median_times

import thunder


class MoE(torch.nn.Module):
    def __init__(self, d: int = 128, experts: int = 8) -> None:
        super().__init__()
        self.gate = torch.nn.Linear(d, experts, bias=False)
        self.experts = torch.nn.ModuleList(
            torch.nn.Sequential(
                torch.nn.Linear(d, 2 * d), torch.nn.SiLU(), torch.nn.Linear(2 * d, d)
            )
            for _ in range(experts)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights, chosen = self.gate(x).softmax(-1).topk(2, -1)
        y = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token_idx, slot = torch.where(chosen == e)
            y[token_idx] += weights[token_idx, slot, None] * expert(x[token_idx])
        return y


class SlidingWindowDecoder(torch.nn.Module):
    """One attention layer and an MLP per block; the KV cache holds ``window`` positions."""

    def __init__(self, vocab: int = 256, d: int = 128, layers: int = 2, window: int = 16) -> None:
        super().__init__()
        self.window = window
        self.embed = torch.nn.Embedding(vocab, d)
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(d, 3 * d) for _ in range(layers))
        self.mlp = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(layers))
        self.head = torch.nn.Linear(d, vocab)

    def forward(self, tok: torch.Tensor, input_pos: torch.Tensor, caches: list) -> torch.Tensor:
        max_pos = input_pos.max().item()
        slot = input_pos % self.window
        h = self.embed(tok)
        for qkv, mlp, (k_cache, v_cache) in zip(self.qkv, self.mlp, caches):
            q, k, v = qkv(h).chunk(3, -1)
            k_cache.index_copy_(1, slot, k)
            v_cache.index_copy_(1, slot, v)
            keys, values = k_cache, v_cache
            if max_pos < self.window:  # the window is not full: only the positions written
                keys, values = keys[:, : max_pos + 1], values[:, : max_pos + 1]
            att = (q @ keys.transpose(1, 2) / keys.shape[-1] ** 0.5).softmax(-1)
            h = h + att @ values
            h = h + torch.nn.functional.gelu(mlp(h))
        return self.head(h)


def _decode(forward: Callable[..., Any], model: SlidingWindowDecoder, tokens: int) -> list[int]:
    caches = [
        (torch.zeros(1, model.window, 128), torch.zeros(1, model.window, 128)) for _ in model.qkv
    ]
    tok, out = torch.tensor([[1]]), []
    for pos in range(tokens):
        logits = forward(tok, torch.tensor([pos]), caches)
        tok = logits[:, -1:].argmax(-1)
        out.append(int(tok))
    return out


def _moe_rows(
    repeat: int, with_torch_compile: bool
) -> tuple[list[str], list[tuple[str, list[float], str]]]:
    """The runners' names, and per row: its label, each runner's seconds, a note."""
    torch.manual_seed(0)
    model = MoE()
    x = torch.randn(256, 128)
    jm = thunder.jit(model)
    runners: dict[str, Callable[..., Any]] = {"eager": model, "thunder.jit": jm}
    if with_torch_compile:
        runners["torch.compile"] = torch.compile(model)
    g = torch.Generator().manual_seed(1)
    inputs = [torch.randn(256, 128, generator=g) for _ in range(4)]
    for run in runners.values():
        for i in inputs:
            run(i)  # warm: every routing once
    programs = thunder.compile_stats(jm).compilations

    def step(run: Callable[..., Any]) -> Callable[[], Any]:
        def go() -> None:
            xr = x.clone().requires_grad_()
            run(xr).square().sum().backward()

        return go

    with torch.no_grad():
        fwd = median_times([lambda r=r: r(x) for r in runners.values()], repeat)
    train = median_times([step(r) for r in runners.values()], repeat)
    rows = [
        ("MoE forward", fwd, f"thunder.jit programs over 4 routings: {programs}"),
        ("MoE training step", train, ""),
    ]
    return list(runners), rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--tokens", type=int, default=40)
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(max(1, torch.get_num_threads()))
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")

    names, rows = _moe_rows(args.repeat, not args.no_torch_compile)
    header = f"{'benchmark':<22}" + "".join(f"{n:>24}" for n in names)
    print(header)
    print("-" * len(header))
    for label, times, note in rows:
        base = times[0]
        cells = [
            f"{t * 1e3:8.2f} ms" + (f" ({t / base:.2f}x)" if k else "") for k, t in enumerate(times)
        ]
        print(f"{label:<22}" + "".join(f"{c:>24}" for c in cells) + (f"   {note}" if note else ""))

    torch.manual_seed(0)
    model = SlidingWindowDecoder().eval()
    jm = thunder.jit(model)
    with torch.no_grad():
        want = _decode(model, model, args.tokens)
        got = _decode(jm, model, args.tokens)
        eager_t, jit_t = median_times(
            [lambda: _decode(model, model, args.tokens), lambda: _decode(jm, model, args.tokens)],
            max(3, args.repeat // 6),
        )
    stats = thunder.compile_stats(jm)
    print(
        f"{'sliding-window decode':<22}{eager_t / args.tokens * 1e3:13.3f} ms/token"
        f"{jit_t / args.tokens * 1e3:13.3f} ms/token ({jit_t / eager_t:.2f}x)   tokens equal: "
        f"{got == want}, programs: {stats.compilations} (2 outcomes), eager runs: "
        f"{stats.eager_fallbacks}"
    )

    def plain(x: torch.Tensor) -> torch.Tensor:
        s = x.sum()
        return x * 2 + s

    def branching(x: torch.Tensor) -> torch.Tensor:
        s = x.sum()
        return x * 2 + s if s > 0 else x * 2 - s

    x = torch.ones(8)
    jp, jb = thunder.jit(plain), thunder.jit(branching)
    jp(x), jb(x)
    tp, tb = median_times([lambda: jp(x), lambda: jb(x)], 2000)
    print(
        f"{'decision on data':<22}{tp * 1e6:10.2f} us plain {tb * 1e6:10.2f} us branching "
        f"(+{(tb - tp) * 1e6:.2f} us per call: the read and the check; goal <= 10 us)"
    )

    @thunder.run_natively
    def native(y: torch.Tensor) -> torch.Tensor:
        return y

    def split(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(native(x * 2 + 1))

    first, second = thunder.jit(lambda x: x * 2 + 1), thunder.jit(torch.sin)
    js = thunder.jit(split)
    js(x), js(x), second(native(first(x)))
    tparts, tsplit = median_times([lambda: second(native(first(x))), lambda: js(x)], 2000)
    print(
        f"{'split at a native call':<22}{tparts * 1e6:10.2f} us parts  {tsplit * 1e6:10.2f} us "
        f"split (+{(tsplit - tparts) * 1e6:.2f} us per call: the key lookup, the first segment's "
        "epilogue, the state into the continuation; goal <= 10 us)"
    )
    print("goals: MoE one program, no slower than eager; decode no slower than eager")


if __name__ == "__main__":
    main()
