"""Benchmark: convolutional networks' eval forward under thunder.jit, against eager and
torch.compile.

transformers' own CNN architectures at their default (full-size) configs with random weights:
ResNet-18/50, MobileNet V1/V2, EfficientNet-B0, RegNet, ConvNeXt; batch 2 at 96x96, eval,
``torch.no_grad()``. One row per model: the steady time of eager's forward, and thunder.jit's
(default executors) and torch.compile's as ratios to it (lower is faster), the configurations
taking turns; the first call of thunder.jit in seconds; ``check`` says whether thunder's output
equals eager's (``torch.testing.assert_close``, 1e-3) with eager's strides.

Run: ``python -m benchmarks cnn [--models effnet,mbv2] [--repeat N] [--threads N]
[--no-torch-compile]``. Not run by default (full-size models: minutes).
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from _timing import medians

import thunder

RUN_BY_DEFAULT = False


def _models() -> dict[str, Callable[[], torch.nn.Module]]:
    import transformers as T

    return {
        "resnet18": lambda: T.ResNetModel(
            T.ResNetConfig(
                layer_type="basic", depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512]
            )
        ),
        "resnet50": lambda: T.ResNetModel(T.ResNetConfig()),
        "mbv1": lambda: T.MobileNetV1Model(T.MobileNetV1Config()),
        "mbv2": lambda: T.MobileNetV2Model(T.MobileNetV2Config()),
        "effnet": lambda: T.EfficientNetModel(T.EfficientNetConfig()),
        "regnet": lambda: T.RegNetModel(T.RegNetConfig()),
        "convnext": lambda: T.ConvNextModel(T.ConvNextConfig()),
    }


def _features(out: Any) -> torch.Tensor:
    return out.last_hidden_state


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="all")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-torch-compile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore")
    makers = _models()
    names = list(makers) if args.models == "all" else args.models.split(",")
    print(f"{'model':10}{'eager ms':>10}{'thunder':>9}{'first s':>9}{'t.compile':>11}  check")
    for name in names:
        torch.manual_seed(0)
        m = makers[name]().eval()
        x = torch.randn(2, 3, 96, 96)
        with torch.no_grad():
            want = _features(m(x))
            jm = thunder.jit(m)
            start = time.perf_counter()
            got = _features(jm(x))
            first = time.perf_counter() - start
            try:
                torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
                check = "ok" if got.stride() == want.stride() else "FAIL: strides"
            except AssertionError as e:
                check = f"FAIL: {str(e).splitlines()[0]}"
            fns = {"eager": lambda: m(x), "thunder": lambda: jm(x)}
            if not args.no_torch_compile:
                cm = torch.compile(m)
                cm(x)
                fns["torch.compile"] = lambda: cm(x)
            t = medians(fns, args.repeat)
        tc = f"{t['torch.compile'] / t['eager']:10.2f}x" if "torch.compile" in t else f"{'-':>11}"
        print(
            f"{name:10}{t['eager'] * 1e3:10.1f}{t['thunder'] / t['eager']:8.2f}x{first:9.2f}"
            f"{tc}  {check}",
            flush=True,
        )


if __name__ == "__main__":
    main()
