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
  ``torch._weight_int8pack_mm``), except for float16 inputs, which it dequantizes first like the
  reference (raw int8 products overflow float16; see ``_int8_weight_linear_impl``).

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
    "NF4_WEIGHT_LINEAR",
    "Int8WeightOnlyTransform",
    "Quantize",
    "QuantizedLinear",
    "QuantizedLinear4bit",
    "int8_weight_linear",
    "nf4_weight_linear",
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
    if x.dtype not in _FLOAT32_RANGE_DTYPES:
        # float16 (or a non-float input): a matmul of the raw int8 values (up to
        # 127 * in_features * max|x|) overflows, so dequantize first, exactly as the reference.
        weight = qweight.to(x.dtype).mul_(scale.to(x.dtype)[:, None])
        return torch.nn.functional.linear(x, weight, bias)
    # Dtypes with float32's exponent range: the int8 weights widened for one matmul, the scales
    # applied to its output columns, which saves a pass over the weights (2x faster for one-row
    # inputs on CPU; torch._weight_int8pack_mm is 5x to 25x slower). Equal to the reference up
    # to rounding.
    out = torch.nn.functional.linear(x, qweight.to(x.dtype)) * scale.to(x.dtype)
    return out if bias is None else out + bias


# Dtypes whose range holds a matmul of raw int8 values (float16's max is 65504).
_FLOAT32_RANGE_DTYPES = frozenset({torch.float32, torch.float64, torch.bfloat16})


# -- 4-bit (NF4, bitsandbytes) ---------------------------------------------------------------


def nf4_weight_linear(
    x: torch.Tensor,
    qweight: torch.Tensor,
    absmax: torch.Tensor,
    code: torch.Tensor,
    bias: torch.Tensor | None,
    out_features: int,
    in_features: int,
    blocksize: int,
) -> torch.Tensor:
    """A linear layer with NF4 weights (bitsandbytes' packed format): dequantized by
    bitsandbytes, then one matmul."""
    import bitsandbytes.functional as bnb_functional

    make_state: Any = bnb_functional.QuantState
    state = make_state(
        absmax=absmax,
        shape=torch.Size([out_features, in_features]),
        code=code,
        blocksize=blocksize,
        quant_type="nf4",
        dtype=torch.float32,
    )
    weight = bnb_functional.dequantize_4bit(qweight, state).to(x.dtype)
    return torch.nn.functional.linear(x, weight, bias)


class QuantizedLinear4bit(torch.nn.Module):
    """An ``nn.Linear`` whose weight is NF4 (4 bits per weight and one float32 scale per
    ``blocksize`` weights), quantized by bitsandbytes."""

    qweight: torch.Tensor
    absmax: torch.Tensor
    code: torch.Tensor

    def __init__(self, linear: torch.nn.Linear, blocksize: int = 64) -> None:
        import bitsandbytes.functional as bnb_functional

        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.blocksize = blocksize
        q, state = bnb_functional.quantize_4bit(
            linear.weight.detach().float(), blocksize=blocksize, quant_type="nf4"
        )
        self.register_buffer("qweight", q)
        self.register_buffer("absmax", state.absmax)
        self.register_buffer("code", state.code)
        self.bias = linear.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nf4_weight_linear(
            x,
            self.qweight,
            self.absmax,
            self.code,
            self.bias,
            self.out_features,
            self.in_features,
            self.blocksize,
        )

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, NF4 weights"


def _nf4_weight_linear_meta(
    x: Any,
    qweight: Any,
    absmax: Any,
    code: Any,
    bias: Any,
    out_features: int,
    in_features: int,
    blocksize: int,
) -> Any:
    from thunder_ir import TensorProxy

    return TensorProxy(shape=(*x.shape[:-1], out_features), dtype=x.dtype, device=x.device)


NF4_WEIGHT_LINEAR = Symbol(
    "nf4_weight_linear", _nf4_weight_linear_meta, module="quant", is_prim=True
)
"""``quant.nf4_weight_linear(x, qweight, absmax, code, bias, out_features, in_features,
blocksize)``: a linear layer with NF4 weights, run by bitsandbytes (no gradients)."""


class Int8WeightOnlyTransform(Transform):
    """Replaces the ``nn.Linear`` layers of a model (in place) by ``QuantizedLinear``;
    ``skip`` names submodules to leave in float (``"lm_head"``)."""

    def __init__(self, skip: Sequence[str] = (), bits: int = 8) -> None:
        self.skip = tuple(skip)
        self.bits = bits

    def transform_module(self, model: Any) -> None:
        make = QuantizedLinear if self.bits == 8 else QuantizedLinear4bit
        for name, module in list(model.named_modules()):
            for child_name, child in list(module.named_children()):
                full = f"{name}.{child_name}" if name else child_name
                if type(child) is torch.nn.Linear and full not in self.skip:
                    setattr(module, child_name, make(child))

    def __repr__(self) -> str:
        return f"Int8WeightOnlyTransform(skip={self.skip!r}, bits={self.bits})"


class Quantize(BaseRecipe):
    """Weight-only quantization of ``nn.Linear`` layers, in place (the model's Linear layers are
    replaced; keep a copy if you need the float weights).

    - ``bits=8`` (default): int8 weights with one scale per output feature
      (``QuantizedLinear``), on any device; about 4x fewer weight bytes.
    - ``bits=4``: NF4 weights in bitsandbytes' format (``QuantizedLinear4bit``, blocks of 64
      weights sharing a scale), about 6x fewer bytes; needs bitsandbytes (its 4-bit kernels run
      on CUDA GPUs and, since 0.46, on CPU). Inference only: no gradients through these layers.

    ``skip`` names Linear submodules to leave in float (``("lm_head",)``)."""

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

            if importlib.util.find_spec("bitsandbytes") is None:
                raise ValueError(
                    "Quantize(bits=4) needs bitsandbytes (pip install bitsandbytes; its 4-bit "
                    "kernels run on CUDA GPUs and on CPU); it is not installed"
                )
        if not any(type(m) is torch.nn.Linear for m in model.modules()):
            raise ValueError("Quantize: the model has no nn.Linear layer to quantize")

    def setup_transforms(self) -> list[Transform]:
        return [Int8WeightOnlyTransform(self.skip, self.bits)]

    def setup_lookasides(self) -> list[Lookaside]:
        if self.bits == 4:
            return [Lookaside(nf4_weight_linear, NF4_WEIGHT_LINEAR)]
        return [Lookaside(int8_weight_linear, INT8_WEIGHT_LINEAR)]

    def setup_operators(self) -> list[Operator]:
        if self.bits == 4:
            return [Operator(NF4_WEIGHT_LINEAR, nf4_weight_linear)]
        return [Operator(INT8_WEIGHT_LINEAR, _int8_weight_linear_impl)]

    def __repr__(self) -> str:
        return f"Quantize(bits={self.bits})"
