"""Benchmark: first calls of ``thunder.compile``, ``thunder.jit`` and ``torch.compile`` on small
Hugging Face Llama models (random weights, eval, ``torch.no_grad()``), as a new user meets them.

Each configuration runs in a fresh process. ``cold``: with an empty torch.compile cache
(``TORCHINDUCTOR_CACHE_DIR`` a new folder); ``warm``: a second process on that folder, as a
second run of a script is. Columns:

- ``first s``: seconds of the first call (interpret, trace, compile what it compiles before
  returning; torch's own first-run costs are paid by an eager call before);
- ``new seq s``: the first call with another sequence length (a new program);
- ``fused s``: for ``thunder.compile``, seconds from its first call until every fusion region
  it compiles in the background is compiled (``-`` where nothing compiles in the background);
- ``steady``: the steady forward time, once compiled, as a ratio to eager in the same process
  (medians of interleaved rounds; lower is faster). ``thunder.compile``'s regions first time
  their compiled program against their torch calls and keep the faster: ``settled`` is how many
  calls that took, and steady is timed after.

Run: ``python -m benchmarks first_calls [--layers 2,8] [--repeat N] [--hidden N] [--seq N]
[--configs thunder.compile,thunder.jit,torch.compile]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CONFIGS = ("thunder.compile", "thunder.jit", "torch.compile")
_USES_INDUCTOR = ("thunder.compile", "torch.compile")


def _model(layers: int, hidden: int) -> Any:
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=1024,
        hidden_size=hidden,
        intermediate_size=hidden * 4,
        num_hidden_layers=layers,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=256,
    )
    return transformers.LlamaForCausalLM(cfg).eval()


def measure(config: str, layers: int, hidden: int, seq: int, repeat: int) -> dict[str, Any]:
    """One configuration's figures, in this process."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _timing import medians, settle_regions  # type: ignore[import-not-found]

    import thunder
    from thunder_executors.background_compile import wait_for_background_compiles

    model = _model(layers, hidden)
    ids = torch.randint(0, 1024, (2, seq))
    longer = torch.randint(0, 1024, (2, seq + 16))
    with torch.no_grad():
        ref = model(ids).logits
        model(longer)
        start = time.perf_counter()
        if config == "thunder.compile":
            compiled = thunder.compile(model)
        elif config == "thunder.jit":
            compiled = thunder.jit(model)
        elif config == "torch.compile":
            compiled = torch.compile(model)
        else:
            raise ValueError(f"unknown configuration {config!r}; known: {', '.join(CONFIGS)}")
        out = compiled(ids).logits
        first = time.perf_counter() - start
        torch.testing.assert_close(out, ref)
        fused: float | None = None
        settled = 0
        if config == "thunder.compile":
            wait_for_background_compiles()
            fused = time.perf_counter() - start
            # Its regions time their compiled program against their torch calls over their next
            # calls and keep the faster: steady is after that choice (before the new sequence
            # length: the regions read are those of the last program compiled).
            settled, _ = settle_regions(lambda: compiled(ids), compiled)
        start = time.perf_counter()
        compiled(longer)
        new_seq = time.perf_counter() - start
        wait_for_background_compiles()
        torch.testing.assert_close(compiled(ids).logits, ref)  # the compiled program's result
        times = medians({"eager": lambda: model(ids), "compiled": lambda: compiled(ids)}, repeat)
    return {
        "first": first,
        "new_seq": new_seq,
        "fused": fused,
        "steady": times["compiled"] / times["eager"],
        "settled": settled,
    }


def _child(config: str, layers: int, args: argparse.Namespace, cache: str) -> dict[str, Any]:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    cmd = [sys.executable, __file__, "--child", config, "--layers", str(layers)]
    cmd += ["--hidden", str(args.hidden), "--seq", str(args.seq), "--repeat", str(args.repeat)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"FAIL (status {done.returncode}): {tail[:100]}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _row(model: str, config: str, caches: str, r: dict[str, Any]) -> str:
    head = f"{model:<16} {config:<16} {caches:<5}"
    if "error" in r:
        return f"{head} {r['error']}"
    fused = f"{r['fused']:8.2f}" if r["fused"] is not None else f"{'-':>8}"
    settled = f"{r['settled']:8d}" if r["fused"] is not None else f"{'-':>8}"
    return f"{head} {r['first']:8.2f} {r['new_seq']:9.2f} {fused} {settled} {r['steady']:7.2f}x"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", default="2,8")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        import warnings

        warnings.simplefilter("ignore")
        result = measure(args.child, int(args.layers), args.hidden, args.seq, args.repeat)
        print(json.dumps(result))
        return
    configs = [c for c in args.configs.split(",") if c]
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        parser.error(f"unknown configuration(s) {unknown}; known: {', '.join(CONFIGS)}")
    print(f"hidden {args.hidden}, batch 2 x seq {args.seq}; new seq: {args.seq + 16}")
    print(f"{'model':<16} {'config':<16} {'cache':<5} {'first s':>8} {'new seq s':>9} "
          f"{'fused s':>8} {'settled':>8} {'steady':>8}")  # fmt: skip
    print("-" * 85)
    for layers in (int(n) for n in args.layers.split(",")):
        model = f"llama {layers} layers"
        for config in configs:
            with tempfile.TemporaryDirectory(prefix="first_calls_") as cache:
                print(_row(model, config, "cold", _child(config, layers, args, cache)), flush=True)
                if config in _USES_INDUCTOR:
                    warm = _child(config, layers, args, cache)
                    print(_row(model, config, "warm", warm), flush=True)


if __name__ == "__main__":
    main()
