"""Convolutions on the CPU in channels-last layout, as inductor's layout choice does.

A 2-D convolution of an ``N, C, H, W`` contiguous tensor runs oneDNN's channels-first kernels;
given a channels-last tensor (``N, H, W, C`` in memory) it runs its channels-last ones, which are
much faster for depthwise and small convolutions on this hardware (a 3x3 depthwise convolution
of 96 channels at 48x48: 6.0 ms against 0.5 ms). Torch keeps a channels-last tensor channels-last
through batch norm, activations, pooling and residual adds, so one conversion before the first
convolution puts the whole network in the fast layout, with the same values (the layout decides
only the order of the kernels' sums: like any other kernel choice, not bit for bit).

Where the layout is seen, the tensor is first laid out as the program without this pass lays it
out: before an op whose result depends on strides or that this pass does not know
(``reshape``/``view``/``flatten``, a torch fallback), and for every tensor the program returns.
Both programs are run once on fake tensors laid out as the call's inputs (no data, no compute),
so every restored tensor gets the strides it had, and the program is left alone where that
cannot be said (a layout neither contiguous nor channels-last, a write into memory a restored
copy would hide). The decision depends on the inputs' layout: the caller's prologue checks that
the tensors it converts are contiguous, as when it was compiled.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from thunder_executors import packed_convolutions
from thunder_executors.torch_symbols import helper_symbol
from thunder_ir import BoundSymbol, PassRecord, Proxy, TensorProxy, Trace
from thunder_ir.pytree import tree_iter, tree_map
from thunder_ir.tags import OpTag

__all__ = [
    "channels_last_convolutions",
    "channels_last_trace",
    "fake_value",
    "to_channels_last",
    "to_contiguous",
]


def to_channels_last(x: torch.Tensor) -> torch.Tensor:
    """``x`` laid out channels-last (itself if it is)."""
    return x.contiguous(memory_format=torch.channels_last)


def to_contiguous(x: torch.Tensor) -> torch.Tensor:
    """``x`` laid out contiguous (itself if it is)."""
    return x.contiguous()


_TO_CHANNELS_LAST = helper_symbol("to_channels_last", to_channels_last)
_TO_CONTIGUOUS = helper_symbol("to_contiguous", to_contiguous)
_PACKED_CONV2D = helper_symbol("packed_conv2d", packed_convolutions.packed_conv2d)
_CONVOLUTIONS = frozenset({"torch_ops::conv2d", "torch::torch.conv2d"})

# Ops whose values do not depend on the strides of their tensor arguments and that do not
# return a view: run as they are on channels-last tensors.
_VALUES = frozenset(
    f"{module}{name}"
    for module in ("torch_ops::", "torch::torch.", "torch::torch.Tensor.", "torch::torch.nn.functional.")
    for name in (
        "conv2d", "batch_norm", "group_norm", "instance_norm", "layer_norm", "relu", "relu6",
        "hardtanh", "hardswish", "hardsigmoid", "silu", "gelu", "elu", "selu", "celu",
        "leaky_relu", "mish", "softplus", "sigmoid", "tanh", "add", "sub", "mul", "div",
        "true_divide", "maximum", "minimum", "where", "clamp", "clamp_min", "clamp_max", "neg",
        "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "pow", "erf", "square",
        "adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool2d", "max_pool2d", "mean", "sum",
        "amax", "amin", "pad", "interpolate", "upsample_nearest2d",
        "upsample_bilinear2d", "linear", "softmax", "log_softmax", "cat",
    )
) | {"torch::torch_ex.pad"}  # fmt: skip

# Views whose values do not depend on strides: their results alias their input.
_VIEWS = frozenset(
    {
        "torch::torch.permute", "torch::torch.transpose", "torch::torch.Tensor.permute",
        "torch::torch.unsqueeze", "torch::torch.squeeze", "torch::torch.select",
        "torch::torch.narrow", "torch::torch_ex.slice_with_strides", "torch::torch.movedim",
        "torch::torch.Tensor.expand", "torch::torch.split", "torch::torch.chunk",
    }
)  # fmt: skip


def _is_in_place(bsym: BoundSymbol) -> bool:
    name = bsym.sym.name
    return (name.endswith("_") and not name.endswith("__")) or bsym.has_tag(OpTag.WRITE)


def _on_cpu(x: Any) -> bool:
    """A 4-D floating tensor on the CPU (oneDNN's channels-last convolutions take it)."""
    return (
        isinstance(x, torch.Tensor)
        and x.ndim == 4
        and x.device.type == "cpu"
        and x.dtype in (torch.float32, torch.bfloat16)
    )


def _is_depthwise(bsym: BoundSymbol, x: Any, w: Any) -> bool:
    """A depthwise CPU convolution (``groups`` equal to the input's channels, one input channel
    per filter), from the fake values of its input and weight."""
    groups = bsym.args[6] if len(bsym.args) > 6 else bsym.kwargs.get("groups", 1)
    return (
        _on_cpu(x)
        and isinstance(w, torch.Tensor)
        and w.ndim == 4
        and isinstance(groups, int)
        and groups > 1
        and w.shape[1] == 1
    )


def _may_be_depthwise(bsym: BoundSymbol) -> bool:
    """From the trace alone: a convolution whose weight has one input channel per group."""
    if bsym.sym.id not in _CONVOLUTIONS or len(bsym.args) < 2:
        return False
    w = bsym.args[1]
    return isinstance(w, TensorProxy) and w.ndim == 4 and w.shape[1] == 1


def _conv_arguments(bsym: BoundSymbol) -> tuple[Any, Any, Any, Any]:
    """A 2-D convolution's stride, padding, dilation and groups."""
    names = ("stride", "padding", "dilation", "groups")
    defaults = (1, 0, 1, 1)
    return tuple(  # type: ignore[return-value]
        bsym.args[3 + k] if len(bsym.args) > 3 + k else bsym.kwargs.get(n, d)
        for k, (n, d) in enumerate(zip(names, defaults, strict=True))
    )


# Below this many weight elements oneDNN's copy of the weight costs less than the packed call's
# own overhead (1x1 over 192 to 32 channels at 12x12: 82 us unpacked, 140 us packed; 3x3 over 64
# channels, 36,864 elements: equal; 3x3 over 128: 736 us against 655 us).
_PACKED_MIN_WEIGHT = 65536


# An image's channels: its stem runs channels-last at least as fast, whatever its kernel (3 to 64
# channels, 7x7 stride 2 at 96x96: 2.8 ms contiguous, 1.5 ms channels-last; 4x4 stride 4 at
# 224x224: 4.0 ms against 0.9 ms; 8 channels: equal).
_FEW_CHANNELS = 4


def _may_pack(bsym: BoundSymbol, inputs: frozenset[str]) -> bool:
    """From the trace alone: a dense convolution of one of the program's inputs (a weight its
    caller keeps: ``packed_convolutions`` lays it out once) with numeric padding, whose weight
    is large enough for its layout to cost more than the packed call's overhead."""
    if bsym.sym.id not in _CONVOLUTIONS or len(bsym.args) < 2:
        return False
    w = bsym.args[1]
    return (
        isinstance(w, TensorProxy)
        and w.name in inputs
        and w.ndim == 4
        and w.shape[1] > 1
        and math.prod(w.shape) >= _PACKED_MIN_WEIGHT
        and packed_convolutions.packable(*_conv_arguments(bsym))
        and packed_convolutions.available()
    )


def _same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal strides in every dimension of more than one element (others are never stepped)."""
    return all(n <= 1 or s == t for n, s, t in zip(a.shape, a.stride(), b.stride(), strict=True))


def _restorer(eager: torch.Tensor) -> Any:
    """The symbol laying a tensor out as ``eager``, or None where neither layout is it."""
    if eager.is_contiguous():
        return _TO_CONTIGUOUS
    if eager.ndim == 4 and eager.is_contiguous(memory_format=torch.channels_last):
        return _TO_CHANNELS_LAST
    return None


class _Refused(Exception):
    """The program is left as it is."""


class _Rewrite:
    """One pass over the execution trace, each op run on fake tensors as it is written."""

    def __init__(
        self,
        bsyms: Sequence[BoundSymbol],
        eager: dict[str, Any],
        env: dict[str, Any],
        inputs: frozenset[str] = frozenset(),
    ):
        self.bsyms = bsyms
        self.inputs = inputs  # the names of the program's inputs
        self.eager = eager  # name -> fake value in the program as it was
        self.env = env  # name -> fake value in the rewritten program
        self.names = set(eager)
        self.out: list[BoundSymbol] = []
        self.restored: set[str] = set()  # names of tensors a restoring copy was made of
        self.base: dict[str, str] = {}  # a view's name -> the name of the tensor it aliases
        self.converted: set[str] = set()
        self.copied_from = ""  # the tensor the last restoring copy was made of
        self.gains = 0  # convolutions that gain from the layout: depthwise or packed ones
        self.packed = 0  # convolutions run on a weight laid out once

    def _fresh(self, like: TensorProxy, suffix: str) -> TensorProxy:
        name, k = f"{like.name}_{suffix}", 0
        while name in self.names:
            k += 1
            name = f"{like.name}_{suffix}{k}"
        self.names.add(name)
        return like.replace(name=name)

    def _convert(self, sym: Any, x: TensorProxy, suffix: str) -> TensorProxy:
        out = self._fresh(x, suffix)
        self.out.append(BoundSymbol(sym, (x,), {}, out))
        self.env[out.name] = sym.impl(self.env[x.name])
        self.eager[out.name] = self.eager[x.name]
        return out

    def _as_eager(self, arg: Any) -> Any:
        """``arg`` laid out as in the program without this pass (a copy where it differs)."""
        if not isinstance(arg, TensorProxy) or _same_layout(
            self.env[arg.name], self.eager[arg.name]
        ):
            return arg
        sym = _restorer(self.eager[arg.name])
        if sym is None:
            raise _Refused(f"{arg.name} is laid out neither contiguous nor channels-last")
        self.copied_from = self.base.get(arg.name, arg.name)
        self.restored.add(self.copied_from)
        return self._convert(sym, arg, "as_eager")

    def _depthwise(self, b: BoundSymbol) -> bool:
        if b.sym.id not in _CONVOLUTIONS or len(b.args) < 2:
            return False
        x, w = (self.env.get(a.name) if isinstance(a, Proxy) else a for a in b.args[:2])
        return _is_depthwise(b, x, w)

    def _packs(self, b: BoundSymbol) -> bool:
        """Whether the convolution runs on a weight laid out once (``packed_convolutions``)."""
        if not _may_pack(b, self.inputs):
            return False
        x, w = (self.env.get(a.name) if isinstance(a, Proxy) else a for a in b.args[:2])
        return (
            isinstance(x, torch.Tensor)
            and _on_cpu(x)
            and x.dtype == torch.float32
            and isinstance(w, torch.Tensor)
            and w.dtype == torch.float32
        )

    def _converts(self, b: BoundSymbol) -> bool:
        """Whether the convolution's input is laid out channels-last first: depthwise ones,
        pointwise ones and those of few input channels (an image's stem), which oneDNN runs at
        least as fast so, and dense ones on a packed weight; not a dense one over many channels
        whose weight oneDNN lays out on every call (3x3 over 256: 1.2x to 1.7x slower here),
        which takes the layout it is given."""
        if b.sym.id not in _CONVOLUTIONS or len(b.args) < 2:
            return False
        x, w = (self.env.get(a.name) if isinstance(a, Proxy) else a for a in b.args[:2])
        if not isinstance(w, torch.Tensor) or w.ndim != 4:
            return False
        if _is_depthwise(b, x, w) or self._packs(b):
            return True
        few_channels = w.shape[1] <= _FEW_CHANNELS or math.prod(w.shape[1:]) <= 32
        return _on_cpu(x) and (tuple(w.shape[2:]) == (1, 1) or few_channels)

    def _base(self, name: str) -> str:
        return self.base.get(name, name)

    def run(self) -> list[BoundSymbol]:
        for b in self.bsyms:
            if b.has_tag(OpTag.DELETE):
                continue
            if b.has_tag(OpTag.RETURN):
                self.out.append(b.replace(args=tree_map(self._as_eager, b.args)))
                continue
            ident = b.sym.id
            args, kwargs = b.args, b.kwargs
            packs = self._packs(b)
            if self._depthwise(b) or packs:
                self.gains += 1
            self.packed += packs
            if self._converts(b):
                x = args[0]
                if not self.env[x.name].is_contiguous(memory_format=torch.channels_last):
                    self.converted.add(x.name)
                    args = (self._convert(_TO_CHANNELS_LAST, x, "cl"), *args[1:])
            elif _is_in_place(b):
                written = b.flat_proxy_args[0] if b.flat_proxy_args else None
                if written is not None and self._base(written.name) in self.restored:
                    raise _Refused(f"{b.sym.name} writes into memory a copy was made of")
            elif ident not in _VALUES and ident not in _VIEWS:
                copied = len(self.restored)
                args = tree_map(self._as_eager, args)
                kwargs = tree_map(self._as_eager, kwargs)
                if len(self.restored) > copied:
                    # It may return a view of the copy (``view``, ``reshape``): a write through
                    # its result must reach the tensor it was copied from, so it counts as one.
                    for o in b.flat_proxy_outs:
                        self.base[o.name] = self.copied_from
            if args is not b.args or kwargs is not b.kwargs:
                b = b.replace(args=args, kwargs=kwargs)
            self._execute(b)
            if ident in _VIEWS or _is_in_place(b):
                source = self._base(b.flat_proxy_args[0].name)
                for o in b.flat_proxy_outs:
                    self.base.setdefault(o.name, source)
            # The packed call computes the convolution's values and strides (its fake run is
            # the convolution's).
            self.out.append(b.replace(sym=_PACKED_CONV2D) if packs else b)
        return self.out

    def _execute(self, b: BoundSymbol) -> None:
        fn = b.sym.impl
        if fn is None:
            raise _Refused(f"{b.sym.name} has no implementation to run on fake tensors")

        def value(x: Any) -> Any:
            return self.env[x.name] if isinstance(x, Proxy) and x.name in self.env else x

        result = fn(*tree_map(value, b.args), **tree_map(value, b.kwargs))
        for o, v in zip(b.flat_outs, tree_iter(result), strict=True):
            if isinstance(o, Proxy):
                self.env[o.name] = v


def _run(bsyms: Sequence[BoundSymbol], env: dict[str, Any]) -> None:
    """Runs ``bsyms`` on the values of ``env``, adding every result to it."""
    walker = _Rewrite((), {}, env)
    for b in bsyms:
        if not b.has_tag(OpTag.DELETE) and not b.has_tag(OpTag.RETURN):
            walker._execute(b)


def channels_last_convolutions(
    bsyms: Sequence[BoundSymbol],
    args: Sequence[Any],
    values: Mapping[str, Any],
) -> tuple[list[BoundSymbol], list[str]] | None:
    """The bound symbols of an execution trace (without its deletes) with its CPU convolutions
    on channels-last tensors, and the names of the inputs whose contiguity the decision read; or
    None where that is not done (nothing would change, a conversion for fewer than two
    convolutions that gain, or the layouts cannot be said). Convolutions whose input is already
    channels-last (as after ``permute``s from ``N, H, W, C``) are packed without conversion.
    ``args``: the trace's arguments; ``values``: this call's tensor or number for each name."""
    inputs = frozenset(a.name for a in args if isinstance(a, TensorProxy))
    if not any(_may_be_depthwise(b) or _may_pack(b, inputs) for b in bsyms):
        return None
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        with mode:
            start = {
                a.name: fake_value(mode, values.get(a.name, a))
                for a in args
                if isinstance(a, Proxy)
            }
            eager = dict(start)
            _run(bsyms, eager)
            rewrite = _Rewrite(bsyms, eager, dict(start), inputs)
            out = rewrite.run()
    except Exception:
        return None
    if rewrite.converted and rewrite.gains < 2:
        return None  # a conversion and a restore cost more than one convolution gains
    if not rewrite.converted and not rewrite.packed:
        return None  # nothing changes
    sources = _leading_to(out, rewrite.converted)
    checked = [
        a.name
        for a in args
        if isinstance(a, TensorProxy) and a.name in sources and a.ndim >= 3
    ]  # fmt: skip
    return out, checked


def _leading_to(bsyms: Sequence[BoundSymbol], targets: set[str]) -> set[str]:
    """The names of the values that ``targets`` are computed from (``targets`` among them)."""
    needed = set(targets)
    for b in reversed(bsyms):
        if any(o.name in needed for o in b.flat_proxy_outs):
            needed.update(p.name for p in b.flat_proxy_args)
    return needed


def fake_value(mode: Any, value: Any) -> Any:
    """``value`` (a call's tensor, or the proxy of a number) as a fake run of a trace takes it:
    a fake tensor laid out as the tensor, or the number the proxy had when traced."""
    if isinstance(value, torch.Tensor):
        return mode.from_tensor(value)
    if isinstance(value, Proxy):
        return getattr(value, "value", value)  # a number: the value it had when traced
    return value


def channels_last_trace(
    extrace: Trace, values: Mapping[str, Any]
) -> tuple[Trace, list[TensorProxy]] | None:
    """``extrace`` (an execution trace of torch calls) with its CPU convolutions on channels-last
    tensors and the inputs whose contiguity the prologue must check; None where it is left as it
    is (``channels_last_convolutions``)."""
    from thunder_executors.assignment import with_deletes

    start = time.perf_counter()
    body = [b for b in extrace.bound_symbols if not b.has_tag(OpTag.DELETE)]
    chosen = channels_last_convolutions(body, extrace.args, values)
    if chosen is None:
        return None
    bsyms, names = chosen
    keep = {p.name for p in extrace.args if isinstance(p, Proxy)}
    keep |= {p.name for p in tree_iter(extrace.return_value) if isinstance(p, Proxy)}
    checked = [a for a in extrace.args if isinstance(a, TensorProxy) and a.name in names]
    history = (*extrace.history, PassRecord("channels_last", time.perf_counter() - start))
    return extrace.replace(bound_symbols=with_deletes(bsyms, keep), history=history), checked
