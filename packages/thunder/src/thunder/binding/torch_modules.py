"""torch.nn modules whose eager result comes from a path a trace cannot take, computed here as
that path computes it.

``nn.TransformerEncoder`` in eval mode, with grad off, given a ``src_key_padding_mask`` (the
"sparsity fast path"), asks whether every row of the mask is left aligned (the padding at the end):
a question about the mask's data, which torch itself skips under torch.compile. When it is, eager
runs the layers on a nested tensor of the tokens that are not padding and pads the result with
zeros; the padded positions of its output are zeros (``norm(0)`` after the final norm), and a
decoder reading that output as its memory without a memory mask sees them. The ordinary path,
which a trace takes, computes those positions like the others. ``transformer_encoder_forward``
records the ordinary path and then eager's padding: the layers with the tokens the nested tensor
would hold as the only keys, and zeros where it holds none, selected by the alignment computed as a
tensor (where some row is not aligned, eager takes the ordinary path for the whole batch, and so
does this; with ``mask_check=False`` eager does not ask, and its nested tensor holds as many
tokens as a row keeps, from the start of the row, aligned or not). Its module reads are guarded
as the program's are: it is interpreted like the program (see ``binding.regions``).
"""

from __future__ import annotations

import types
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["transformer_encoder_forward"]


def _copy_function(fn: types.FunctionType) -> types.FunctionType:
    """The same function under another identity: the lookaside keyed by ``fn`` does not catch it."""
    copy = types.FunctionType(
        fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__
    )
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    return copy


_ENCODER_FORWARD = _copy_function(torch.nn.TransformerEncoder.forward)  # type: ignore[arg-type]
_SUPPORTED_DEVICE_TYPES = ("cpu", "cuda", "xpu")


def _takes_nested_path(encoder: Any, src: Any, mask: Any, src_key_padding_mask: Any) -> bool:
    """Whether eager's ``TransformerEncoder.forward`` converts ``src`` to a nested tensor, but
    for the question about the mask's data: its conditions, in its order."""
    first_layer = encoder.layers[0]
    if not torch.backends.mha.get_fastpath_enabled():
        return False
    if not getattr(encoder, "use_nested_tensor", False):
        return False
    if first_layer.training or src.dim() != 3 or src_key_padding_mask is None:
        return False
    if src.is_nested or mask is not None or torch.is_autocast_enabled():
        return False
    tensor_args = (
        src,
        first_layer.self_attn.in_proj_weight,
        first_layer.self_attn.in_proj_bias,
        first_layer.self_attn.out_proj.weight,
        first_layer.self_attn.out_proj.bias,
        first_layer.norm1.weight,
        first_layer.norm1.bias,
        first_layer.norm2.weight,
        first_layer.norm2.bias,
        first_layer.linear1.weight,
        first_layer.linear1.bias,
        first_layer.linear2.weight,
        first_layer.linear2.bias,
    )
    device_types = (
        *_SUPPORTED_DEVICE_TYPES,
        torch.utils.backend_registration._privateuse1_backend_name,
    )
    if src.device.type not in device_types:
        return False
    return not (torch.is_grad_enabled() and any(x.requires_grad for x in tensor_args))


def transformer_encoder_forward(
    self: Any,
    src: Any,
    mask: Any = None,
    src_key_padding_mask: Any = None,
    is_causal: bool | None = None,
) -> Any:
    """``nn.TransformerEncoder.forward`` as eager computes it (see the module's docstring)."""
    # (decided before canonicalizing the mask: eager's forward canonicalizes it, and warns
    # about it, once)
    if not _takes_nested_path(self, src, mask, src_key_padding_mask):
        return _ENCODER_FORWARD(self, src, mask, src_key_padding_mask, is_causal)
    padding = F._canonical_mask(
        mask=src_key_padding_mask,
        mask_name="src_key_padding_mask",
        other_type=F._none_or_dtype(mask),
        other_name="mask",
        target_type=src.dtype,
    )
    assert padding is not None  # (the nested path is taken with a padding mask only)
    # The nested tensor holds, per row, as many tokens as the mask keeps, taken from the start
    # (torch._nested_tensor_from_mask); with mask_check (the default) only where every row is
    # left aligned, the ordinary path with the mask as given elsewhere.
    keep = padding.logical_not()
    held = torch.arange(src.size(1), device=src.device) < keep.sum(-1, keepdim=True)
    only_held = torch.zeros_like(padding).masked_fill(held.logical_not(), float("-inf"))
    if getattr(self, "mask_check", True):
        aligned = (held == keep).all()
        layer_mask = torch.where(aligned, only_held, padding)
        zeros = held.logical_not() & aligned
    else:
        layer_mask, zeros = only_held, held.logical_not()
    output = src
    for layer in self.layers:
        output = layer(
            output, src_mask=None, is_causal=is_causal is True, src_key_padding_mask=layer_mask
        )
    output = output.masked_fill(zeros.unsqueeze(-1), 0.0)  # to_padded_tensor(0.0)
    if self.norm is not None:
        output = self.norm(output)
    return output
