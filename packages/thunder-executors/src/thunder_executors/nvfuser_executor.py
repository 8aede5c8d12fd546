"""The nvFuser executor ("nvfuser"): fusion regions as nvFuser fusion definitions.

A region's prims are translated, one call each, into the FusionDefinition API
(``fd.define_tensor``, ``fd.ops.add``, ``fd.add_output``...). The translation only talks to the
``fd`` object and a ``DataType`` namespace it is given, so it is tested here against a recording
stand-in; running needs the real ``nvfuser`` package and a CUDA device, and the module imports
nvfuser only then. Definitions are built per input layout (dtype, rank, contiguity) on first use
and cached on the region.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import torch

from thunder_executors.executor import FusionExecutor, register_executor
from thunder_executors.inductor_direct import without_view_bits
from thunder_ir import BoundSymbol, NumberProxy, Proxy, Symbol, TensorProxy, dtypes, prims
from thunder_ir.dtypes import DType

__all__ = [
    "TRANSLATABLE_PRIMS",
    "NvFuserExecutor",
    "TensorLayout",
    "define_fusion",
    "layout_of",
    "nvfuser_executor",
]

# The DataType member for each IR dtype.
_DATATYPE_NAMES = {
    dtypes.bool8: "Bool",
    dtypes.int32: "Int32",
    dtypes.int64: "Int",
    dtypes.float16: "Half",
    dtypes.bfloat16: "BFloat16",
    dtypes.float32: "Float",
    dtypes.float64: "Double",
    dtypes.complex64: "ComplexFloat",
    dtypes.complex128: "ComplexDouble",
}

# prim -> the fd.ops function of the same meaning (its name: the prim's, where not given).
_ELEMENTWISE: dict[Symbol, str] = {
    **{p: p.name for p in (
        prims.abs, prims.neg, prims.bitwise_not, prims.exp, prims.exp2, prims.expm1, prims.log,
        prims.log1p, prims.log2, prims.log10, prims.sqrt, prims.rsqrt, prims.reciprocal, prims.sin,
        prims.cos, prims.tan, prims.asin, prims.acos, prims.atan, prims.sinh, prims.cosh,
        prims.tanh, prims.asinh, prims.acosh, prims.atanh, prims.erf, prims.erfc, prims.erfinv,
        prims.lgamma, prims.digamma, prims.sigmoid, prims.floor, prims.ceil, prims.round,
        prims.trunc, prims.sign, prims.signbit, prims.isfinite, prims.isnan, prims.isinf,
        prims.real, prims.imag, prims.add, prims.sub, prims.mul, prims.div, prims.fmod,
        prims.remainder, prims.pow, prims.atan2, prims.maximum, prims.minimum, prims.bitwise_and,
        prims.bitwise_or, prims.bitwise_xor, prims.eq, prims.ne, prims.lt, prims.le, prims.gt,
        prims.ge, prims.where,
    )},
    prims.shift_left: "bitwise_left_shift",
    prims.shift_right: "bitwise_right_shift",
}  # fmt: skip
_REDUCTIONS: dict[Symbol, str] = {
    prims.sum: "sum", prims.prod: "prod", prims.amax: "max", prims.amin: "min"
}  # fmt: skip
TRANSLATABLE_PRIMS = frozenset(
    {*_ELEMENTWISE, *_REDUCTIONS, prims.convert_element_type, prims.broadcast_in_dim,
     prims.reshape, prims.transpose, prims.squeeze, prims.var, prims.var_mean, prims.slice_prim,
     prims.cat, prims.pad, prims.full}
)  # fmt: skip


class TensorLayout:
    """What a definition's ``define_tensor`` depends on: dtype, sizes (1 marks broadcast dims,
    -1 any size), contiguity and whether it is a CPU scalar."""

    __slots__ = ("contiguity", "dtype", "is_cpu", "shape")

    def __init__(
        self,
        dtype: DType,
        shape: tuple[int, ...],
        contiguity: tuple[bool | None, ...],
        is_cpu: bool,
    ) -> None:
        self.dtype, self.shape, self.contiguity, self.is_cpu = dtype, shape, contiguity, is_cpu

    def key(self) -> tuple[Any, ...]:
        return (self.dtype, self.shape, self.contiguity, self.is_cpu)


def layout_of(t: torch.Tensor) -> TensorLayout:
    """The layout of a (row-major ordered) tensor, in nvFuser's contiguity convention: per dim,
    None for size-1 dims, else whether it is dense with the next inner non-broadcast dim."""
    from thunder_ir.dtypes import from_torch_dtype

    contiguity: list[bool | None] = []
    expected = 1
    for size, stride in reversed(list(zip(t.shape, t.stride()))):
        if size == 1:
            contiguity.append(None)
            continue
        contiguity.append(stride == expected)
        expected = stride * size
    shape = tuple(1 if s == 1 else -1 for s in t.shape)
    is_cpu = t.device.type == "cpu" and t.ndim == 0
    return TensorLayout(from_torch_dtype(t.dtype), shape, tuple(reversed(contiguity)), is_cpu)


def define_fusion(
    fd: Any,
    datatype: Any,
    region: Sequence[BoundSymbol],
    inputs: Sequence[Proxy],
    outputs: Sequence[Proxy],
    layouts: Sequence[TensorLayout | None],
) -> None:
    """Fills ``fd`` (a FusionDefinition, inside its ``with`` block) with the region: one
    ``define_tensor``/``define_scalar`` per input (``layouts[i]`` for tensor inputs), one op per
    prim, one ``add_output`` per output."""
    values: dict[str, Any] = {}

    def dt(d: DType) -> Any:
        return getattr(datatype, _DATATYPE_NAMES[d.strong()])

    for p, layout in zip(inputs, layouts):
        if isinstance(p, TensorProxy):
            assert layout is not None
            values[p.name] = fd.define_tensor(
                shape=list(layout.shape),
                contiguity=list(layout.contiguity),
                dtype=dt(layout.dtype),
                is_cpu=layout.is_cpu,
            )
        elif isinstance(p, NumberProxy):
            values[p.name] = fd.define_scalar(dtype=dt(p.dtype))
        else:
            raise NotImplementedError(
                f"nvFuser regions take tensors and numbers, not {type(p).__name__}"
            )

    def value(x: Any) -> Any:
        if isinstance(x, Proxy):
            return values[x.name]
        if isinstance(x, bool):
            return fd.define_scalar(x, dtype=datatype.Bool)
        if isinstance(x, int):
            return fd.define_scalar(x, dtype=datatype.Int)
        if isinstance(x, float):
            return fd.define_scalar(x, dtype=datatype.Double)
        if isinstance(x, complex):
            return fd.define_scalar(x, dtype=datatype.ComplexDouble)
        raise NotImplementedError(f"cannot pass {x!r} to nvFuser")

    for bsym in region:
        out = _translate(fd, bsym, value, dt)
        outs = out if isinstance(out, tuple) else (out,)
        for p, v in zip(bsym.flat_proxy_outs, outs):
            values[p.name] = v
    for p in outputs:
        fd.add_output(values[p.name])


def _translate(
    fd: Any, bsym: BoundSymbol, value: Callable[[Any], Any], dt: Callable[[DType], Any]
) -> Any:
    sym, args, kwargs = bsym.sym, bsym.args, bsym.kwargs
    ops = fd.ops
    if sym in _ELEMENTWISE:
        return getattr(ops, _ELEMENTWISE[sym])(*(value(a) for a in args))
    if sym in _REDUCTIONS:
        a, dims = args
        return getattr(ops, _REDUCTIONS[sym])(value(a), list(dims), False, dt(a.dtype))
    if sym is prims.convert_element_type:
        return ops.cast(value(args[0]), dt(args[1]))
    if sym is prims.broadcast_in_dim:
        a, shape, bdims = args
        return ops.broadcast_in_dim(value(a), list(shape), list(bdims))
    if sym is prims.reshape:
        return ops.reshape(value(args[0]), list(args[1]))
    if sym is prims.transpose:
        return ops.permute(value(args[0]), list(args[1]))
    if sym is prims.squeeze:
        return ops.squeeze(value(args[0]), list(args[1]))
    if sym is prims.var or sym is prims.var_mean:
        a, dims = args
        fn = ops.var if sym is prims.var else ops.var_mean
        return fn(value(a), list(dims), kwargs["correction"], False)
    if sym is prims.slice_prim:
        a, start, end = args[:3]
        strides = args[3] if len(args) > 3 else kwargs.get("strides") or [1] * len(start)
        return ops.slice(value(a), list(start), list(end), list(strides))
    if sym is prims.cat:
        tensors, dim = args
        return ops.cat([value(t) for t in tensors], dim)
    if sym is prims.pad:
        a, pad_value, config = args
        if any(interior for _, _, interior in config):
            raise NotImplementedError("nvFuser pad has no interior padding")
        widths = [w for lo, hi, _ in reversed(config) for w in (lo, hi)]
        return ops.pad(value(a), widths, value(pad_value))
    if sym is prims.full:
        shape, fill = args
        return ops.full(list(shape), value(fill), dt(kwargs["dtype"]))
    raise NotImplementedError(f"{sym.qualified_name} has no nvFuser translation")


def _fusible_pad(bsym: BoundSymbol) -> bool:
    return bsym.sym is not prims.pad or not any(i for _, _, i in bsym.args[2])


class NvFuserRegion:
    """A region run by nvFuser: one FusionDefinition per input layout, built on first use."""

    def __init__(
        self, region: Sequence[BoundSymbol], inputs: Sequence[Proxy], outputs: Sequence[Proxy]
    ) -> None:
        self.region, self.inputs, self.outputs = tuple(region), tuple(inputs), tuple(outputs)
        self._definitions: dict[tuple[Any, ...], Any] = {}
        self._lock = threading.Lock()

    def __thunder_standalone__(self) -> tuple[Callable[..., Any], None]:
        """For a program printed on its own (``thunder_ir.standalone``): the region as its torch
        calls. Its fusion definition is built from bound symbols at run time, which printed
        code cannot hold."""
        from thunder_executors.torchcompile import region_trace, torch_calls

        trace = region_trace("nvfuser_region", torch_calls(self.region), self.inputs, self.outputs)
        trace = trace.replace(docstring="An nvFuser region, run here by its torch calls.")
        return trace.python_callable({"torch": torch}), None

    def __call__(self, *args: Any) -> tuple[Any, ...]:
        args = tuple(without_view_bits(args))  # nvFuser reads storage: no lazy negation
        layouts = [layout_of(a) if isinstance(a, torch.Tensor) else None for a in args]
        key = tuple(lay.key() if lay is not None else type(a) for lay, a in zip(layouts, args))
        fd = self._definitions.get(key)
        if fd is None:
            from nvfuser import DataType, FusionDefinition

            with self._lock:
                fd = FusionDefinition()
                with fd:
                    define_fusion(fd, DataType, self.region, self.inputs, self.outputs, layouts)
                self._definitions[key] = fd
        return tuple(fd.execute(list(args)))


class NvFuserExecutor(FusionExecutor):
    """Fuses the prims it can translate into nvFuser fusions (CUDA tensors only)."""

    def __init__(self) -> None:
        super().__init__("nvfuser")
        self._availability: tuple[bool, str] | None = None

    def availability(self) -> tuple[bool, str]:
        if self._availability is None:
            try:
                import nvfuser  # noqa: F401
            except Exception as e:  # ImportError, or a broken install failing to load its library
                self._availability = (False, f"nvfuser is not importable ({type(e).__name__}: {e})")
            else:
                ok = torch.cuda.is_available()
                self._availability = (
                    ok,
                    "" if ok else "nvfuser needs a CUDA device; none is available",
                )
        return self._availability

    def can_fuse(self, bsym: BoundSymbol) -> bool:
        return self.can_translate(bsym) and self.is_available()

    def claim_of(self, sym: Symbol) -> str:
        return "fuses (CUDA tensors)" if sym in TRANSLATABLE_PRIMS else ""

    @staticmethod
    def can_translate(bsym: BoundSymbol) -> bool:
        """Whether ``bsym`` has a translation (for CUDA tensors), whatever this machine has."""
        if bsym.sym not in TRANSLATABLE_PRIMS or not _fusible_pad(bsym):
            return False
        tensors = [
            p for p in (*bsym.flat_proxy_args, *bsym.flat_proxy_outs) if isinstance(p, TensorProxy)
        ]
        return (
            bool(bsym.flat_proxy_outs)
            and all(isinstance(p, TensorProxy) for p in bsym.flat_proxy_outs)
            and all(
                t.device.type == "cuda" and t.dtype.strong() in _DATATYPE_NAMES for t in tensors
            )
        )

    def min_region_size(self) -> int:
        return 2

    def fuse(
        self,
        region: Sequence[BoundSymbol],
        inputs: Sequence[Proxy],
        outputs: Sequence[Proxy],
        *,
        index: int,
    ) -> BoundSymbol:
        name = f"nvFusion{index}"
        sym = Symbol(
            name,
            None,
            module=self.name,
            impl=NvFuserRegion(region, inputs, outputs),
            id=f"nvfuser::{name}",
        )
        return BoundSymbol(sym, tuple(inputs), {}, tuple(outputs), subsymbols=tuple(region))


nvfuser_executor = NvFuserExecutor()
register_executor(nvfuser_executor)
