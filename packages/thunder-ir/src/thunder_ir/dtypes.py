"""Data types of the IR and their mapping to torch's.

A dtype is "strong" (a tensor's dtype) or "weak" (the dtype a Python scalar gets). Weak dtypes take
part in type promotion only by category, as torch does: ``float32_tensor + 1.0`` stays float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "DType",
    "all_dtypes",
    "bfloat16",
    "bool8",
    "complex64",
    "complex128",
    "corresponding_complex_dtype",
    "corresponding_real_dtype",
    "float8_e4m3fn",
    "float8_e4m3fnuz",
    "float8_e5m2",
    "float8_e5m2fnuz",
    "float16",
    "float32",
    "float64",
    "from_torch_dtype",
    "int8",
    "int16",
    "int32",
    "int64",
    "python_type_of",
    "to_dtype",
    "to_torch_dtype",
    "uint8",
]


@dataclass(frozen=True, slots=True)
class DType:
    """A tensor element type. ``kind`` is one of "bool", "int", "float", "complex"."""

    name: str
    kind: str
    bytes: int
    is_weak: bool = False

    @property
    def is_boolean(self) -> bool:
        return self.kind == "bool"

    @property
    def is_integer(self) -> bool:
        """True for bool and integer dtypes (torch's "integral including bool")."""
        return self.kind in ("bool", "int")

    @property
    def is_exact(self) -> bool:
        return self.kind in ("bool", "int")

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_complex(self) -> bool:
        return self.kind == "complex"

    @property
    def is_inexact(self) -> bool:
        return self.kind in ("float", "complex")

    @property
    def is_low_precision(self) -> bool:
        return self.kind == "float" and self.bytes <= 2

    def weak(self) -> DType:
        return _WEAK[self.name]

    def strong(self) -> DType:
        return _STRONG[self.name]

    @property
    def shortname(self) -> str:
        """The short form used in trace comments: f32, bf16, i64, b8, c64."""
        return _SHORT[self.name] + ("_" if self.is_weak else "")

    def __repr__(self) -> str:
        return f"dtypes.{self.name}" + ("_" if self.is_weak else "")

    __str__ = __repr__


bool8 = DType("bool8", "bool", 1)
uint8 = DType("uint8", "int", 1)
int8 = DType("int8", "int", 1)
int16 = DType("int16", "int", 2)
int32 = DType("int32", "int", 4)
int64 = DType("int64", "int", 8)
bfloat16 = DType("bfloat16", "float", 2)
float16 = DType("float16", "float", 2)
float32 = DType("float32", "float", 4)
float64 = DType("float64", "float", 8)
float8_e4m3fn = DType("float8_e4m3fn", "float", 1)
float8_e4m3fnuz = DType("float8_e4m3fnuz", "float", 1)
float8_e5m2 = DType("float8_e5m2", "float", 1)
float8_e5m2fnuz = DType("float8_e5m2fnuz", "float", 1)
complex64 = DType("complex64", "complex", 8)
complex128 = DType("complex128", "complex", 16)

all_dtypes: tuple[DType, ...] = (
    bool8,
    uint8,
    int8,
    int16,
    int32,
    int64,
    bfloat16,
    float16,
    float32,
    float64,
    float8_e4m3fn,
    float8_e4m3fnuz,
    float8_e5m2,
    float8_e5m2fnuz,
    complex64,
    complex128,
)
_STRONG = {d.name: d for d in all_dtypes}
_WEAK = {d.name: DType(d.name, d.kind, d.bytes, True) for d in all_dtypes}
_SHORT = {
    "bool8": "b8",
    "uint8": "u8",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "bfloat16": "bf16",
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "float8_e4m3fn": "f8_e4m3fn",
    "float8_e4m3fnuz": "f8_e4m3fnuz",
    "float8_e5m2": "f8_e5m2",
    "float8_e5m2fnuz": "f8_e5m2fnuz",
    "complex64": "c64",
    "complex128": "c128",
}

_TO_TORCH: dict[str, torch.dtype] = {
    "bool8": torch.bool,
    "uint8": torch.uint8,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
    "float64": torch.float64,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e4m3fnuz": torch.float8_e4m3fnuz,
    "float8_e5m2": torch.float8_e5m2,
    "float8_e5m2fnuz": torch.float8_e5m2fnuz,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
}
_FROM_TORCH: dict[torch.dtype, DType] = {v: _STRONG[k] for k, v in _TO_TORCH.items()}


def default_float_dtype() -> DType:
    """torch's default floating dtype now (``torch.set_default_dtype``). Traces that depend on it
    are recorded under the value at trace time; the jit keys its cache on it."""
    return _FROM_TORCH[torch.get_default_dtype()]


def default_complex_dtype() -> DType:
    return complex128 if torch.get_default_dtype() == torch.float64 else complex64


def to_torch_dtype(dtype: DType | torch.dtype | type | None) -> torch.dtype | None:
    """The torch dtype for an IR dtype (weak dtypes map to their strong form)."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, type):
        dtype = to_dtype(dtype)
    return _TO_TORCH[dtype.name]


def from_torch_dtype(dtype: torch.dtype) -> DType:
    try:
        return _FROM_TORCH[dtype]
    except KeyError:
        raise TypeError(f"torch dtype {dtype} has no IR equivalent") from None


def to_dtype(x: Any) -> DType:
    """Normalizes a torch dtype, an IR dtype or a Python scalar type to an IR dtype."""
    if isinstance(x, DType):
        return x
    if isinstance(x, torch.dtype):
        return from_torch_dtype(x)
    if x is bool:
        return _WEAK["bool8"]
    if x is int:
        return _WEAK["int64"]
    if x is float:
        return _WEAK[default_float_dtype().name]
    if x is complex:
        return _WEAK[default_complex_dtype().name]
    raise TypeError(f"expected a dtype, got {x!r}")


def python_type_of(dtype: DType) -> type:
    """The Python scalar type whose values a tensor of ``dtype`` holds when converted by ``item()``."""
    return {"bool": bool, "int": int, "float": float, "complex": complex}[dtype.kind]


def corresponding_real_dtype(dtype: DType) -> DType:
    if dtype.kind != "complex":
        return dtype
    return float32 if dtype.bytes == 8 else float64


def corresponding_complex_dtype(dtype: DType) -> DType:
    if dtype.kind == "complex":
        return dtype
    return complex128 if dtype.bytes == 8 else complex64
