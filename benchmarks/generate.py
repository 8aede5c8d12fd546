"""Benchmark: ``generate()`` of a small Hugging Face Llama (random weights) through a jitted
forward, with ``cache="symbolic values"`` (one program for the prompt, one for every decoding
step, whatever the lengths) and with the default cache (a program per length for the first two
lengths, then one with symbolic sizes for the rest).

For each mode: the number of compiled programs after generating from two prompts of different
lengths, and the steady time per new token (median of interleaved rounds, greedy decoding)
against eager. The tokens are checked equal to eager's.

Run: ``python -m benchmarks generate [--tokens N] [--repeat N] [--hidden N] [--layers N]``.
"""

from __future__ import annotations

import argparse
import warnings
from typing import Any

import torch
from _timing import median_times

import thunder


def _model(hidden: int, layers: int) -> Any:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    return LlamaForCausalLM(config).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args()
    model = _model(args.hidden, args.layers)
    eager_forward = model.forward
    prompts = [torch.randint(0, 256, (1, n)) for n in (8, 13)]

    def generate(prompt: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            out: torch.Tensor = model.generate(
                prompt, max_new_tokens=args.tokens, min_new_tokens=args.tokens, do_sample=False
            )
        return out

    model.forward = eager_forward
    expected = [generate(p) for p in prompts]
    rows = []
    for label, cache in (("symbolic values", "symbolic values"), ("default cache", None)):
        options = {"cache": cache} if cache else {}
        jitted = thunder.jit(eager_forward, **options)
        model.forward = jitted
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (recompile warnings)
            same = all(torch.equal(generate(p), e) for p, e in zip(prompts, expected))
            stats = thunder.compile_stats(jitted)
            compiles, fallbacks = stats.compilations, stats.eager_fallbacks

            def run_jitted() -> None:
                model.forward = jitted
                generate(prompts[1])

            def run_eager() -> None:
                model.forward = eager_forward
                generate(prompts[1])

            t_jit, t_eager = median_times([run_jitted, run_eager], args.repeat)
        rows.append((label, compiles, fallbacks, t_jit, t_eager, same))
    model.forward = eager_forward
    print(
        f"tiny Llama ({args.layers} layers, hidden {args.hidden}), {args.tokens} new tokens, "
        "prompts of 8 and 13 tokens"
    )
    print(
        f"{'thunder.jit':<18}{'compiles':>9}{'eager runs':>11}{'ms/token':>10}{'eager':>8}"
        f"{'ratio':>7}  tokens"
    )
    for label, compiles, fallbacks, t_jit, t_eager, same in rows:
        print(
            f"{label:<18}{compiles:>9}{fallbacks:>11}{t_jit / args.tokens * 1e3:>10.2f}"
            f"{t_eager / args.tokens * 1e3:>8.2f}{t_jit / t_eager:>7.2f}x  "
            f"{'equal' if same else 'DIFFER'}"
        )


if __name__ == "__main__":
    main()
