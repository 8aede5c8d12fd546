"""Weight-only int8 quantization of ``nn.Linear`` (``thunder.recipes.Quantize``).

- The transform (``Int8WeightOnlyTransform.transform_module``) replaces every ``nn.Linear`` of the
  model, in place, by a ``QuantizedLinear``: the weight stored as int8 with one float32 scale per
  output feature (symmetric, ``scale = max|w_row| / 127``), about 4x fewer weight bytes. The
  float weights are dropped: keep a copy of the model if you need them.
- ``QuantizedLinear.forward`` calls ``int8_weight_linear``, which eager runs by dequantizing; the
  recipe's lookaside records it as the IR op ``quant.int8_weight_linear`` (a composite: its
  decomposition dequantizes, so any executor can run it and autodiff differentiates it with
  respect to the input and the bias).
- The recipe's one-op kernel runs the op as one matmul with the int8 weights widened to the
  input's dtype, the scales applied to its output (measured faster on CPU than
  ``torch._weight_int8pack_mm``; see ``_int8_weight_linear_impl``).

Error against the float32 model (``|out - ref| / |ref|`` of the logits, random weights): 0.9%
for the tiny Llama of the tests, 2.2% for a 4-layer, 256-wide one (``python -m benchmarks
recipes``): per-output-feature int8 rounds each weight by up to half a step of ``max|w_row|/127``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from thunder.lookasides import Lookaside
from thunder.recipes.base import BaseRecipe, Operator
from thunder_ir import Symbol, Transform
from thunder_ir import ops as ltorch

__all__ = [
    "INT8_WEIGHT_LINEAR",
    "Int8WeightOnlyTransform",
    "Quantize",
    "QuantizedLinear",
    "int8_weight_linear",
    "quantize_weight",
]


def quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``weight`` (out, in) as int8 values and one float32 scale per output feature."""
    w = weight.detach().float()
    scale = (w.abs().amax(dim=1) / 127.0).clamp(min=torch.finfo(torch.float32).tiny)
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def int8_weight_linear(
    x: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    """``linear(x, qweight * scale[:, None], bias)``: the eager (dequantizing) reference."""
    weight = qweight.to(x.dtype) * scale.to(x.dtype)[:, None]
    return torch.nn.functional.linear(x, weight, bias)


class QuantizedLinear(torch.nn.Module):
    """An ``nn.Linear`` whose weight is int8 with per-output-feature scales."""

    qweight: torch.Tensor
    scale: torch.Tensor

    def __init__(self, linear: torch.nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        qweight, scale = quantize_weight(linear.weight)
        self.register_buffer("qweight", qweight.to(linear.weight.device))
        self.register_buffer("scale", scale.to(linear.weight.device))
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return int8_weight_linear(x, self.qweight, self.scale, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 weights"


def _int8_weight_linear_meta(x: Any, qweight: Any, scale: Any, bias: Any = None) -> Any:
    weight = ltorch.mul(ltorch.to(qweight, x.dtype), ltorch.unsqueeze(ltorch.to(scale, x.dtype), 1))
    return ltorch.linear(x, weight, bias)


INT8_WEIGHT_LINEAR = Symbol("int8_weight_linear", _int8_weight_linear_meta, module="quant")
"""``quant.int8_weight_linear(x, qweight, scale, bias)``: a linear layer with int8 weights and
per-output-feature scales (its decomposition dequantizes)."""


def _int8_weight_linear_impl(
    x: torch.Tensor, qweight: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor | None = None
) -> torch.Tensor:
    # The int8 weights widened for one matmul, the scales applied to its output columns: on the
    # 2-core CPU this is 1.5x a float32 linear, while torch._weight_int8pack_mm is 5x to 25x.
    out = torch.nn.functional.linear(x, qweight.to(x.dtype)) * scale.to(x.dtype)
    return out if bias is None else out + bias


class Int8WeightOnlyTransform(Transform):
    """Replaces the ``nn.Linear`` layers of a model (in place) by ``QuantizedLinear``;
    ``skip`` names submodules to leave in float (``"lm_head"``)."""

    def __init__(self, skip: Sequence[str] = ()) -> None:
        self.skip = tuple(skip)

    def transform_module(self, model: Any) -> None:
        for name, module in list(model.named_modules()):
            for child_name, child in list(module.named_children()):
                full = f"{name}.{child_name}" if name else child_name
                if type(child) is torch.nn.Linear and full not in self.skip:
                    setattr(module, child_name, QuantizedLinear(child))

    def __repr__(self) -> str:
        return f"Int8WeightOnlyTransform(skip={self.skip!r})"


class Quantize(BaseRecipe):
    """Weight-only quantization of ``nn.Linear`` layers. ``bits=8`` (default): int8 weights
    with per-output-feature scales, on any device (CPU included). ``bits=4`` needs bitsandbytes with a CUDA GPU and is not built yet: ``validate``
    says so. The model is quantized in place (its Linear layers become ``QuantizedLinear``)."""

    def __init__(self, bits: int = 8, skip: Sequence[str] = ()) -> None:
        if bits not in (4, 8):
            raise ValueError(f"Quantize: bits must be 8 or 4, got {bits!r}")
        self.bits = bits
        self.skip = tuple(skip)

    def validate(self, model: Any) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"Quantize applies to an nn.Module, got {type(model).__name__}")
        if self.bits == 4:
            import importlib.util

            have_bnb = importlib.util.find_spec("bitsandbytes") is not None
            raise ValueError(
                "Quantize(bits=4): 4-bit weights need bitsandbytes with a CUDA GPU "
                f"(bitsandbytes {'installed' if have_bnb else 'not installed'}, CUDA "
                f"{'available' if torch.cuda.is_available() else 'not available'}), and the "
                "4-bit path is not built yet; use Quantize(bits=8)"
            )
        if not any(type(m) is torch.nn.Linear for m in model.modules()):
            raise ValueError("Quantize: the model has no nn.Linear layer to quantize")

    def setup_transforms(self) -> list[Transform]:
        return [Int8WeightOnlyTransform(self.skip)]

    def setup_lookasides(self) -> list[Lookaside]:
        return [Lookaside(int8_weight_linear, INT8_WEIGHT_LINEAR)]

    def setup_operators(self) -> list[Operator]:
        return [Operator(INT8_WEIGHT_LINEAR, _int8_weight_linear_impl)]

    def __repr__(self) -> str:
        return f"Quantize(bits={self.bits})"
