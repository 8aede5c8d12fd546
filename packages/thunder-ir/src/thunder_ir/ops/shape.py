"""Shape and view torch-language ops."""

from __future__ import annotations

from typing import Any

from thunder_ir import prims
from thunder_ir.ops._helpers import to_shape
from thunder_ir.ops._registry import torchop
from thunder_ir.proxies import TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import check


def infer_shape(a: TensorProxy, shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """Resolves one ``-1`` in a requested shape, with torch's message on a mismatch."""
    numel = a.numel()
    unknown = [i for i, s in enumerate(shape) if isinstance(s, int) and s == -1]
    check(len(unknown) <= 1, "only one dimension can be inferred")
    if not unknown:
        return shape
    known = 1
    for s in shape:
        if not (isinstance(s, int) and s == -1):
            known = known * s
    check(known != 0, lambda: f"shape '{list(shape)}' is invalid for input of size {numel}")
    check(not isinstance(numel, int) or not isinstance(known, int) or numel % known == 0, lambda: f"shape '{list(shape)}' is invalid for input of size {numel}")
    out = list(shape)
    out[unknown[0]] = numel // known
    return tuple(out)


@torchop("torch.reshape", "torch.Tensor.reshape", tags=(OpTag.SHAPE_OP, OpTag.MAY_RETURN_VIEW))
def reshape(a: Any, *shape: Any) -> Any:
    shape = infer_shape(a, to_shape(shape))
    if tuple(shape) == tuple(a.shape):
        return a
    return prims.reshape(a, shape)


@torchop("torch.Tensor.view", tags=(OpTag.SHAPE_OP, OpTag.VIEW))
def view(a: Any, *shape: Any) -> Any:
    shape = infer_shape(a, to_shape(shape))
    return prims.reshape(a, shape)
