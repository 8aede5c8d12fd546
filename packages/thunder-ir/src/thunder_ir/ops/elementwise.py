"""Elementwise torch-language ops: broadcasting and type promotion on top of elementwise prims."""

from __future__ import annotations

from typing import Any

from thunder_ir import prims
from thunder_ir.ops._helpers import Promotion, elementwise_binary, elementwise_unary
from thunder_ir.ops._registry import torchop
from thunder_ir.tags import OpTag

_EW = (OpTag.ELEMENTWISE,)


@torchop("torch.exp", "torch.Tensor.exp", "torch.special.exp", tags=_EW)
def exp(a: Any) -> Any:
    return elementwise_unary(prims.exp, a, Promotion.INT_TO_FLOAT)


@torchop("torch.add", "torch.Tensor.add", tags=_EW)
def add(a: Any, b: Any, *, alpha: Any = None) -> Any:
    if alpha is not None:
        b = mul(b, alpha)
    return elementwise_binary(prims.add, a, b)


@torchop("torch.mul", "torch.multiply", "torch.Tensor.mul", "torch.Tensor.multiply", tags=_EW)
def mul(a: Any, b: Any) -> Any:
    return elementwise_binary(prims.mul, a, b)
