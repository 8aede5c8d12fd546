"""The torch-language ops (printed as ``ltorch``): torch's functions, Tensor methods and
``torch.nn.functional``, decomposed into prims with torch's broadcasting and type promotion."""

from thunder_ir.ops import elementwise, reductions, shape  # noqa: F401  (register ops)
from thunder_ir.ops import elementwise_binary  # noqa: F401  (register ops)
from thunder_ir.ops import nn, nn_activations, nn_attention, nn_conv, nn_loss, nn_norm  # noqa: F401  (register ops)
from thunder_ir.ops import conversion, factories, indexing  # noqa: F401  (register ops)
from thunder_ir.ops._registry import ALL_OPS, resolve_torch_name, torch_symbol_map, torchop

__all__ = ["ALL_OPS", "torchop", "torch_symbol_map", "resolve_torch_name"]
globals().update(ALL_OPS)
