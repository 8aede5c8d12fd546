"""The OpInfo table's building blocks: an op, its torch reference, sample and error inputs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from thunder_ir import Symbol

FLOATS = (torch.float32, torch.float64)
FLOATS_AND_HALF = (torch.float32, torch.float64, torch.bfloat16, torch.float16)
INTS = (torch.int64, torch.int32)
ALL_NUMERIC = (torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32)


@dataclass
class SampleInput:
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    name: str = ""

    def __repr__(self) -> str:
        def desc(x: Any) -> str:
            if isinstance(x, torch.Tensor):
                nc = "" if x.is_contiguous() else " noncontig"
                return f"T{list(x.shape)}{nc}"
            return repr(x)

        parts = [desc(a) for a in self.args] + [f"{k}={desc(v)}" for k, v in self.kwargs.items()]
        return f"{self.name or 'sample'}({', '.join(parts)})"


@dataclass
class ErrorInput:
    sample: SampleInput
    exc_type: type[Exception]
    match: str  # a regex the message must match (re.search)


# sample_inputs(dtype, requires_grad) -> samples; called again for fresh random inputs.
SampleFn = Callable[[torch.dtype, bool], Iterable[SampleInput]]


@dataclass
class OpInfo:
    """One torch-language op under test.

    ``op`` is the ltorch symbol; ``ref`` the torch callable it must agree with (called with the same
    sample); ``torch_names`` the torch callables this entry covers (default: all of the op's).
    """

    op: Symbol
    ref: Callable[..., Any]
    sample_inputs: SampleFn
    dtypes: tuple[torch.dtype, ...] = FLOATS
    error_inputs: Callable[[], Iterable[ErrorInput]] | None = None
    name: str = ""
    torch_names: tuple[str, ...] = ()
    atol: float | None = None
    rtol: float | None = None
    # Ops whose output is random are compared by a property (shape, dtype, range) instead.
    compare: Callable[[Any, Any], None] | None = None
    supports_grad: bool = True

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.op.name
        if not self.torch_names:
            self.torch_names = self.op.torch_names


def make_tensor(
    shape: Iterable[int],
    dtype: torch.dtype,
    *,
    requires_grad: bool = False,
    low: float | None = None,
    high: float | None = None,
    noncontiguous: bool = False,
) -> torch.Tensor:
    """A fresh random tensor (torch.testing.make_tensor on CPU)."""
    t = torch.testing.make_tensor(
        tuple(shape), dtype=dtype, device="cpu", low=low, high=high, noncontiguous=noncontiguous
    )
    if requires_grad and (t.dtype.is_floating_point or t.dtype.is_complex):
        t.requires_grad_(True)
    return t
