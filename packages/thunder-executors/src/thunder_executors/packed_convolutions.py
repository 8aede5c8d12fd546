"""2-D convolutions on the CPU with their weights laid out once for oneDNN, not on every call.

``F.conv2d`` on a channels-last CPU tensor hands oneDNN the weight as it is stored, and oneDNN
first copies it into the blocked layout its kernels read: for a dense 3x3 convolution over 512
channels at batch 2 that copy is most of the call (8.5 ms of 9, against 0.5 ms for the
convolution on a weight laid out before). Inductor lays weights out once when it freezes a
model; here a weight is laid out on its first call and kept for as long as it is unchanged: the
tensor is the same object, its version counter (every in-place write, an optimizer's step, a
``load_state_dict``) and its storage are those it was laid out from. A changed weight is laid
out again, so a call never reads a stale copy.

``packed_conv2d`` computes what ``F.conv2d`` computes on the same tensors, with the same strides:
the same oneDNN kernel, given a weight it does not have to copy (bit for bit where oneDNN picks
the same algorithm for both, else within that choice's rounding, as for any kernel choice). It is used by
the channels-last pass (``channels_last``) for convolutions of a program's weights in programs
that autograd does not record; where its conditions do not hold at run time (grad needed, oneDNN
turned off, another layout, an inference tensor's untracked version) it runs ``F.conv2d``.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["available", "packable", "packed_conv2d"]

_Key = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], int]


def _pair(v: Any) -> tuple[int, int] | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, v)
    ints = isinstance(v, Sequence) and not isinstance(v, str) and len(v) in (1, 2)
    if ints and all(isinstance(e, int) and not isinstance(e, bool) for e in v):
        return (v[0], v[-1])
    return None


def packable(stride: Any, padding: Any, dilation: Any, groups: Any) -> bool:
    """Whether a convolution with these arguments can run packed (numeric padding)."""
    return (
        all(_pair(v) is not None for v in (stride, padding, dilation))
        and isinstance(groups, int)
        and groups >= 1
    )


class _PackedWeights:
    """Weights laid out for oneDNN, by the weight object and the convolution's arguments; an
    entry goes with its weight."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, _Key], tuple[Any, int, int, torch.Tensor]] = {}
        self._lock = threading.Lock()

    def get(self, w: torch.Tensor, key: _Key, input_size: Sequence[int]) -> torch.Tensor:
        """``w`` laid out for convolutions with ``key``'s arguments (for inputs of any size:
        oneDNN picks the layout for ``input_size``'s)."""
        slot = (id(w), key)
        entry = self._entries.get(slot)
        if entry is not None:
            ref, version, address, kept = entry
            if ref() is w and w._version == version and w.data_ptr() == address:
                return kept
        version, address = w._version, w.data_ptr()
        stride, padding, dilation, groups = key
        packed = torch.ops.mkldnn._reorder_convolution_weight(
            w.detach(), list(padding), list(stride), list(dilation), groups, list(input_size)
        )

        def forget(ref: Any, slot: tuple[int, _Key] = slot) -> None:
            with self._lock:
                if self._entries.get(slot, (None,))[0] is ref:
                    del self._entries[slot]

        with self._lock:
            self._entries[slot] = (weakref.ref(w, forget), version, address, packed)
        return packed  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self._entries)


_packed = _PackedWeights()
_available: bool | None = None


def available() -> bool:
    """Whether this torch has oneDNN's packed convolution and it computes ``F.conv2d``'s
    result (checked once on a small convolution)."""
    global _available
    if _available is None:
        _available = _self_test()
    return _available


def _self_test() -> bool:
    # Real tensors whatever the caller's mode: a first call from a pass running ops on fake
    # tensors would otherwise test fakes and turn packing off for the process.
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        return _checks_out()


def _checks_out() -> bool:
    try:
        if not torch.backends.mkldnn.is_available():  # type: ignore[no-untyped-call]
            return False
        gen = torch.Generator().manual_seed(0)
        x = torch.randn(2, 8, 6, 6, generator=gen).contiguous(memory_format=torch.channels_last)
        w, b = torch.randn(4, 8, 3, 3, generator=gen), torch.randn(4, generator=gen)
        with torch.no_grad():
            want = F.conv2d(x, w, b, 1, 1)
            packed = _PackedWeights().get(w, _key(1, 1, 1, 1), x.shape)
            got = _packed_call(x, packed, b, 1, 1, 1, 1)
        close = torch.allclose(got, want, rtol=1e-5, atol=1e-5)
        return bool(got.stride() == want.stride() and close)
    except Exception:  # another torch's ops: F.conv2d it is
        return False


def _key(stride: Any, padding: Any, dilation: Any, groups: int) -> _Key:
    s, p, d = (tuple(_pair(v) or ()) for v in (stride, padding, dilation))
    return (s, p, d, groups)


def _packed_call(
    x: torch.Tensor,
    packed: torch.Tensor,
    b: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
) -> torch.Tensor:
    pairs = [list(_pair(v) or ()) for v in (stride, padding, dilation)]
    out: torch.Tensor = torch.ops.mkldnn._convolution_pointwise(
        x, packed, b, pairs[1], pairs[0], pairs[2], groups, "none", [], ""
    )
    return out


def _runs_packed(x: torch.Tensor, w: torch.Tensor, b: Any) -> bool:
    if torch.is_grad_enabled() and (
        x.requires_grad or w.requires_grad or (isinstance(b, torch.Tensor) and b.requires_grad)
    ):
        return False  # the packed op has no derivative
    return (
        torch._C._get_mkldnn_enabled()
        and x.device.type == "cpu"
        and x.dtype == torch.float32
        and w.dtype == torch.float32
        and x.ndim == 4
        and w.ndim == 4
        and not x.is_contiguous()
        and x.is_contiguous(memory_format=torch.channels_last)
        and w.layout == torch.strided
        and not w.is_inference()  # its version counter is not kept
        and (b is None or (isinstance(b, torch.Tensor) and b.dtype == torch.float32))
    )


def packed_conv2d(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> torch.Tensor:
    """``F.conv2d(input, weight, bias, stride, padding, dilation, groups)``, with ``weight`` laid
    out for oneDNN once while it is unchanged (see the module's doc)."""
    x, w, b = input, weight, bias
    if not (_runs_packed(x, w, b) and packable(stride, padding, dilation, groups)):
        return F.conv2d(x, w, b, stride, padding, dilation, groups)
    # One layout per weight and arguments, whatever the input's size (varying image sizes keep
    # one copy of the weight, not one per size).
    packed = _packed.get(w, _key(stride, padding, dilation, groups), x.shape)
    return _packed_call(x, packed, b, stride, padding, dilation, groups)
