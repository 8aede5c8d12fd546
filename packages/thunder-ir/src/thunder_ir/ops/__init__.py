"""The torch-language ops (printed as ``ltorch``): torch's functions, Tensor methods and
``torch.nn.functional``, decomposed into prims with torch's broadcasting and type promotion.

Every op is an attribute of this module (``ops.add``, ``ops.layer_norm``)."""

from thunder_ir.ops import (  # noqa: F401  (importing a family module registers its ops)
    conversion,
    data_shapes,
    data_values,
    elementwise,
    elementwise_binary,
    factories,
    fallback,
    indexing,
    nn,
    nn_activations,
    nn_attention,
    nn_backward,
    nn_conv,
    nn_einsum,
    nn_loss,
    nn_norm,
    random_state,
    reductions,
    shape,
    statistics,
)
from thunder_ir.ops._keywords import own_arguments
from thunder_ir.ops._registry import (
    ALL_OPS,
    is_torch_op,
    resolve_torch_name,
    torch_symbol_map,
    torchop,
)
from thunder_ir.symbol import Symbol

__all__ = [
    "ALL_OPS",
    "is_torch_op",
    "own_arguments",
    "resolve_torch_name",
    "torch_symbol_map",
    "torchop",
]

globals().update(ALL_OPS)


def __getattr__(name: str) -> Symbol:
    # Reached only for names that are not ops (every op is a module global).
    raise AttributeError(f"thunder_ir.ops has no op named {name!r}")
