"""Benchmark: ``thunder.compile`` with recipes on a small Hugging Face Llama (random weights).

Rows: float32 eager; ``thunder.compile(model)``; ``thunder.compile(model,
recipe=[HFTransformers(), Quantize()])`` (int8 weight-only Linear layers) and the same quantized
model run eagerly; with bitsandbytes installed, ``Quantize(bits=4)`` (NF4); torch.compile of the
float model. Columns: steady eval forward time (median of
interleaved rounds) and its ratio to float32 eager, the bytes of the Linear weights, and the
relative error of the logits against float32 eager (``|out - ref| / |ref|``).

Run: ``python -m benchmarks recipes [--repeat N] [--hidden N] [--layers N] [--seq N]
[--no-torch-compile]``.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import warnings
from collections.abc import Callable
from typing import Any

import torch
from _timing import median_times

import thunder


def _linear_weight_bytes(model: torch.nn.Module) -> int:
    from thunder.recipes import QuantizedLinear, QuantizedLinear4bit

    total = 0
    for m in model.modules():
        if type(m) is torch.nn.Linear:
            total += m.weight.numel() * m.weight.element_size()
        elif isinstance(m, (QuantizedLinear, QuantizedLinear4bit)):
            total += sum(b.numel() * b.element_size() for b in m.buffers())
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--seq", type=int, default=32)
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parser.parse_args()
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=1024,
        hidden_size=args.hidden,
        intermediate_size=args.hidden * 4,
        num_hidden_layers=args.layers,
        num_attention_heads=8,
        num_key_value_heads=4,
        max_position_embeddings=256,
    )
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, args.seq))
    quantized = copy.deepcopy(model)
    rows: list[tuple[str, Callable[[], Any], torch.nn.Module]] = []
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = model(ids).logits
        compiled = thunder.compile(model)
        recipe = [thunder.recipes.HFTransformers(), thunder.recipes.Quantize()]
        compiled_q = thunder.compile(quantized, recipe=recipe)
        rows = [
            ("float32 eager", lambda: model(ids).logits, model),
            ("thunder.compile", lambda: compiled(ids).logits, model),
            ("thunder.compile + Quantize", lambda: compiled_q(ids).logits, quantized),
            ("quantized eager", lambda: quantized(ids).logits, quantized),
        ]
        if importlib.util.find_spec("bitsandbytes") is not None:
            four_bit = copy.deepcopy(model)
            recipe4 = [thunder.recipes.HFTransformers(), thunder.recipes.Quantize(bits=4)]
            compiled_4 = thunder.compile(four_bit, recipe=recipe4)
            rows.append(("thunder.compile + Quantize(4)", lambda: compiled_4(ids).logits, four_bit))
        if not args.no_torch_compile:
            tc = torch.compile(model)
            rows.append(("torch.compile (float32)", lambda: tc(ids).logits, model))
        errors = [float((fn() - ref).norm() / ref.norm()) for _, fn, _ in rows]
        times = median_times([fn for _, fn, _ in rows], args.repeat)
    print(
        f"Llama: hidden {args.hidden}, {args.layers} layers, sequence {args.seq}, CPU threads "
        f"{torch.get_num_threads()}"
    )
    header = f"{'configuration':30} {'forward':>10} {'vs eager':>9} {'Linear weights':>15} {'rel. error':>11}"
    print(header)
    print("-" * len(header))
    for (name, _, owner), t, err in zip(rows, times, errors):
        print(
            f"{name:30} {t * 1e3:8.2f}ms {t / times[0]:8.2f}x "
            f"{_linear_weight_bytes(owner) / 2**20:12.2f}MiB {err:11.2e}"
        )


if __name__ == "__main__":
    main()
