"""OpInfos of reductions and scans."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import torch

from opinfos._base import ALL_NUMERIC, FLOATS_AND_HALF, ErrorInput, OpInfo, SampleInput, make_tensor
from opinfos.elementwise import tensor
from thunder_ir import ops as ltorch

SampleFn = Callable[[torch.dtype, bool], Iterator[SampleInput]]
NUMERIC_AND_BOOL = (*ALL_NUMERIC, torch.bool)


def reduction_samples_fn(
    *,
    multi_dim: bool = True,
    keepdim: bool = True,
    empty: bool = True,
    low: float | None = None,
    high: float | None = None,
    kwargs: dict[str, Any] | None = None,
) -> SampleFn:
    """Full reductions, one dim, several dims, keepdim, 0-d, non-contiguous and empty inputs."""
    kw = kwargs or {}

    def samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
        def s(*args: Any, **extra: Any) -> SampleInput:
            return SampleInput(args, {**kw, **extra})

        t = tensor((3, 4, 5), dtype, low=low, high=high, requires_grad=requires_grad)
        yield s(tensor((), dtype))
        yield s(t)
        yield s(t, 1)
        yield s(t, -1, keepdim=keepdim) if keepdim else s(t, -1)
        yield s(tensor((), dtype), 0)
        yield s(tensor((4, 6), dtype, low=low, high=high, noncontiguous=True), dim=0)
        if multi_dim:
            yield s(t, (0, 2), keepdim) if keepdim else s(t, (0, 2))
            yield s(t, [-1, 0])
        if empty:
            yield s(tensor((0, 3), dtype), 1)
            yield s(tensor((2, 0), dtype))

    return samples


reduction_samples = reduction_samples_fn()


def dim_errors(op_name: str) -> Callable[[], Iterator[ErrorInput]]:
    def errors() -> Iterator[ErrorInput]:
        yield ErrorInput(
            SampleInput((make_tensor((3, 4), torch.float32), 2)),
            IndexError,
            r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)",
        )
        yield ErrorInput(
            SampleInput(([1.0, 2.0],)),
            TypeError,
            rf"{op_name}\(\): argument 'input' \(position 1\) must be Tensor, not list",
        )

    return errors


def extremum_samples_fn(with_dims: bool = True) -> SampleFn:
    """amax-like: no empty full reductions (torch refuses those)."""

    def samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
        t = tensor((3, 4, 5), dtype)
        yield SampleInput((tensor((), dtype),))
        yield SampleInput((t,))
        yield SampleInput((tensor((4, 6), dtype, noncontiguous=True),))
        if with_dims:
            yield SampleInput((t, 1))
            yield SampleInput((t, (0, 2), True))
            yield SampleInput((t, -1), {"keepdim": True})
            yield SampleInput((tensor((), dtype), 0))
            yield SampleInput((tensor((0, 3), dtype), 1))
        if dtype.is_floating_point:
            yield SampleInput(
                (torch.tensor([[1.0, math.nan, 2.0], [3.0, 4.0, -math.inf]], dtype=dtype),)
            )

    return samples


def extremum_errors(op_name: str) -> Callable[[], Iterator[ErrorInput]]:
    def errors() -> Iterator[ErrorInput]:
        yield ErrorInput(
            SampleInput((torch.ones(0, 3),)),
            RuntimeError,
            rf"{op_name}\(\): Expected reduction dim to be specified for input.numel\(\) == 0",
        )
        yield ErrorInput(
            SampleInput((torch.ones(2, 0), 1)),
            IndexError,
            rf"{op_name}\(\): Expected reduction dim 1 to have non-zero size",
        )

    return errors


def max_dim_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    # Distinct values along the reduced dim so the index is unambiguous.
    def distinct(*shape: int, nc: bool = False) -> torch.Tensor:
        n = math.prod(shape)
        if dtype is torch.bool:
            return make_tensor(shape, dtype, noncontiguous=nc)
        hi = 100 if dtype in (torch.bfloat16, torch.float16) or dtype.is_floating_point else n * 2
        vals = (
            torch.randperm(n * 2)[:n].reshape(shape).to(dtype)
            if n <= hi
            else torch.arange(n).to(dtype).reshape(shape)
        )
        return vals.t() if nc and vals.ndim == 2 else vals

    yield SampleInput((distinct(3, 4, 5), 1))
    yield SampleInput((distinct(3, 4, 5), -1, True))
    yield SampleInput((distinct(3, 4), 0), {"keepdim": True})
    yield SampleInput((distinct(6, 4, nc=True), 1))
    yield SampleInput((make_tensor((), dtype), 0))
    yield SampleInput((distinct(5), 0))


def max_binary_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((tensor((3, 4), dtype), tensor((3, 4), dtype)))
    yield SampleInput((tensor((3, 4), dtype), tensor((4,), dtype)))


def arg_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield from max_dim_samples(dtype, requires_grad)
    yield SampleInput((make_tensor((3, 4), dtype),))
    yield SampleInput((make_tensor((3, 4), dtype),), {"keepdim": True})
    yield SampleInput((make_tensor((), dtype),))


def var_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = tensor((3, 4, 5), dtype, requires_grad=requires_grad)
    yield SampleInput((t,))
    yield SampleInput((t, 1))
    yield SampleInput((t, (0, 2), True))
    yield SampleInput((t, -1), {"keepdim": True, "correction": 0})
    yield SampleInput((t,), {"dim": 1, "correction": 2})
    yield SampleInput((t, False))  # var(input, unbiased)
    yield SampleInput((t, 1, False, True))  # var(input, dim, unbiased, keepdim)
    yield SampleInput((t,), {"unbiased": False})
    yield SampleInput((tensor((6, 4), dtype, noncontiguous=True), 0))
    yield SampleInput((tensor((), dtype),), {"correction": 0})


def var_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((make_tensor((3, 4), torch.int64),)),
        RuntimeError,
        r"std and var only support floating point and complex dtypes",
    )


def mean_errors() -> Iterator[ErrorInput]:
    yield from dim_errors("mean")()
    yield ErrorInput(
        SampleInput((make_tensor((3, 4), torch.int64),)),
        RuntimeError,
        r"mean\(\): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Long",
    )
    yield ErrorInput(
        SampleInput((make_tensor((3, 4), torch.float32),), {"dtype": torch.int32}),
        RuntimeError,
        r"Optional dtype must be either a floating point or complex dtype. Got: Int",
    )


def norm_samples_fn(ords: tuple[Any, ...]) -> SampleFn:
    def samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
        t = tensor((3, 4, 5), dtype, requires_grad=requires_grad)
        for o in ords:
            yield SampleInput((t, o))
            yield SampleInput((t, o, 1))
            yield SampleInput((t, o, (0, 2), True))
        yield SampleInput((tensor((4, 6), dtype, noncontiguous=True),))
        yield SampleInput((tensor((), dtype),))

    return samples


def vector_norm_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((make_tensor((3, 4), torch.int64),)),
        RuntimeError,
        r"linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long",
    )


def norm_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = tensor((3, 4, 5), dtype)
    yield SampleInput((t,))
    yield SampleInput((t, "fro", (1, 2)))
    yield SampleInput((t, 2, 1, True))
    yield SampleInput((t, 1))
    yield SampleInput((t,), {"p": math.inf, "dim": 0})
    yield SampleInput((t,), {"p": 3.0, "dim": -1})
    yield SampleInput((tensor((4, 6), dtype, noncontiguous=True),), {"dim": 1})


def logsumexp_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = tensor((3, 4, 5), dtype)
    yield SampleInput((t, 1))
    yield SampleInput((t, (0, 2), True))
    yield SampleInput((t, -1), {"keepdim": True})
    yield SampleInput((tensor((), dtype), 0))
    yield SampleInput((tensor((4, 6), dtype, noncontiguous=True), 0))
    if dtype.is_floating_point:
        yield SampleInput(
            (
                torch.tensor(
                    [[1.0, -math.inf], [-math.inf, -math.inf], [math.inf, 2.0]], dtype=dtype
                ),
                1,
            )
        )
        yield SampleInput((tensor((3, 4), dtype, low=50, high=90), 1))  # large values: no overflow


def scan_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = tensor((3, 4, 5), dtype, low=-2, high=2)
    yield SampleInput((t, 0))
    yield SampleInput((t, -1))
    yield SampleInput((tensor((), dtype), 0))
    yield SampleInput((tensor((4, 6), dtype, low=-2, high=2, noncontiguous=True), 1))
    yield SampleInput((tensor((0, 3), dtype), 1))
    yield SampleInput((t, 1), {"dtype": torch.float64})


def scan_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((make_tensor((3, 4), torch.float32), 2)), IndexError, r"Dimension out of range"
    )


def all_any_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield from reduction_samples_fn(kwargs={})(dtype, requires_grad)
    sparse = torch.zeros(3, 4, dtype=dtype)
    sparse[1, 2] = 1
    yield SampleInput((sparse,))
    yield SampleInput((sparse, 0))
    yield SampleInput((torch.ones(3, 4, dtype=dtype), 1, True))


def count_nonzero_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    t = tensor((3, 4, 5), dtype)
    yield SampleInput((t,))
    yield SampleInput((t, 1))
    yield SampleInput((t, (0, 2)))
    yield SampleInput((tensor((), dtype),))
    yield SampleInput((torch.zeros(3, 4, dtype=dtype), 0))


def nansum_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield from reduction_samples_fn()(dtype, requires_grad)
    if dtype.is_floating_point:
        yield SampleInput((torch.tensor([[1.0, math.nan], [math.nan, 2.0]], dtype=dtype), 1))


def _tuple_ref(fn: Any) -> Any:
    def ref(*args: Any, **kwargs: Any) -> Any:
        return tuple(fn(*args, **kwargs))

    return ref


OPINFOS = [
    OpInfo(
        ltorch.sum,
        torch.sum,
        reduction_samples,
        dtypes=(*NUMERIC_AND_BOOL, torch.float16, torch.complex64),
        error_inputs=dim_errors("sum"),
    ),
    OpInfo(
        ltorch.sum,
        torch.sum,
        reduction_samples_fn(kwargs={"dtype": torch.float64}),
        dtypes=(torch.float32, torch.int32),
        name="sum_dtype",
        torch_names=("torch.sum",),
    ),
    OpInfo(
        ltorch.nansum,
        torch.nansum,
        nansum_samples,
        dtypes=(torch.float32, torch.float64, torch.int64),
    ),
    # torch accumulates low-precision nansums over several dims less precisely than float32.
    OpInfo(
        ltorch.nansum,
        torch.nansum,
        nansum_samples,
        dtypes=(torch.bfloat16,),
        name="nansum_bf16",
        atol=0.1,
        rtol=0.05,
    ),
    OpInfo(
        ltorch.prod,
        torch.prod,
        reduction_samples_fn(multi_dim=False, low=0.5, high=1.5),
        dtypes=(torch.float32, torch.float64, torch.int64, torch.int32, torch.bool),
        error_inputs=dim_errors("prod"),
    ),
    # torch's low-precision products round as they go (up to ~5% off the float32 product).
    OpInfo(
        ltorch.prod,
        torch.prod,
        reduction_samples_fn(multi_dim=False, low=0.5, high=1.5),
        dtypes=(torch.bfloat16, torch.float16),
        name="prod_low_precision",
        torch_names=("torch.prod",),
        atol=1e-2,
        rtol=0.1,
    ),
    OpInfo(
        ltorch.prod,
        torch.prod,
        reduction_samples_fn(multi_dim=False),
        dtypes=(torch.float64, torch.int64),
        name="prod_wide_range",
        torch_names=("torch.prod",),
    ),
    OpInfo(
        ltorch.mean,
        torch.mean,
        reduction_samples,
        dtypes=(*FLOATS_AND_HALF, torch.complex64),
        error_inputs=mean_errors,
    ),
    OpInfo(
        ltorch.mean,
        torch.mean,
        reduction_samples_fn(kwargs={"dtype": torch.float64}),
        dtypes=(torch.float32, torch.int64),
        name="mean_dtype",
        torch_names=("torch.mean",),
    ),
    OpInfo(
        ltorch.amax,
        torch.amax,
        extremum_samples_fn(),
        dtypes=(*NUMERIC_AND_BOOL, torch.float16),
        error_inputs=extremum_errors("amax"),
    ),
    OpInfo(
        ltorch.amin,
        torch.amin,
        extremum_samples_fn(),
        dtypes=(*NUMERIC_AND_BOOL, torch.float16),
        error_inputs=extremum_errors("amin"),
    ),
    OpInfo(
        ltorch.max,
        torch.max,
        extremum_samples_fn(with_dims=False),
        dtypes=NUMERIC_AND_BOOL,
        error_inputs=lambda: iter(
            [
                ErrorInput(
                    SampleInput((torch.ones(0, 3),)),
                    RuntimeError,
                    r"max\(\): Expected reduction dim to be specified for input.numel\(\) == 0",
                )
            ]
        ),
    ),
    OpInfo(
        ltorch.max,
        _tuple_ref(torch.max),
        max_dim_samples,
        dtypes=NUMERIC_AND_BOOL,
        name="max_dim",
        torch_names=("torch.max",),
    ),
    OpInfo(
        ltorch.max,
        torch.max,
        max_binary_samples,
        dtypes=(torch.float32, torch.int64),
        name="max_binary",
        torch_names=("torch.max",),
    ),
    OpInfo(ltorch.min, torch.min, extremum_samples_fn(with_dims=False), dtypes=NUMERIC_AND_BOOL),
    OpInfo(
        ltorch.min,
        _tuple_ref(torch.min),
        max_dim_samples,
        dtypes=NUMERIC_AND_BOOL,
        name="min_dim",
        torch_names=("torch.min",),
    ),
    OpInfo(
        ltorch.min,
        torch.min,
        max_binary_samples,
        dtypes=(torch.float32,),
        name="min_binary",
        torch_names=("torch.min",),
    ),
    OpInfo(
        ltorch.argmax,
        torch.argmax,
        arg_samples,
        dtypes=ALL_NUMERIC,
        error_inputs=lambda: iter(
            [
                ErrorInput(
                    SampleInput((torch.ones(3, dtype=torch.bool),)),
                    RuntimeError,
                    r"argmax\(\): does not support bool input",
                )
            ]
        ),
    ),
    OpInfo(ltorch.argmin, torch.argmin, arg_samples, dtypes=ALL_NUMERIC),
    OpInfo(
        ltorch.var,
        torch.var,
        var_samples,
        dtypes=(*FLOATS_AND_HALF, torch.complex64),
        error_inputs=var_errors,
    ),
    OpInfo(
        ltorch.std,
        torch.std,
        var_samples,
        dtypes=(*FLOATS_AND_HALF, torch.complex64),
        error_inputs=var_errors,
    ),
    OpInfo(
        ltorch.var_mean, torch.var_mean, var_samples, dtypes=(*FLOATS_AND_HALF, torch.complex64)
    ),
    OpInfo(ltorch.std_mean, torch.std_mean, var_samples, dtypes=FLOATS_AND_HALF),
    OpInfo(
        ltorch.all,
        torch.all,
        all_any_samples,
        dtypes=(*NUMERIC_AND_BOOL, torch.uint8),
        error_inputs=dim_errors("all"),
    ),
    OpInfo(ltorch.any, torch.any, all_any_samples, dtypes=(*NUMERIC_AND_BOOL, torch.uint8)),
    OpInfo(
        ltorch.count_nonzero, torch.count_nonzero, count_nonzero_samples, dtypes=NUMERIC_AND_BOOL
    ),
    OpInfo(
        ltorch.vector_norm,
        torch.linalg.vector_norm,
        norm_samples_fn((2, 1, math.inf, -math.inf, 0, 3.5)),
        dtypes=(*FLOATS_AND_HALF, torch.complex64),
        error_inputs=vector_norm_errors,
    ),
    OpInfo(ltorch.norm, torch.norm, norm_samples, dtypes=(*FLOATS_AND_HALF, torch.complex64)),
    OpInfo(
        ltorch.logsumexp, torch.logsumexp, logsumexp_samples, dtypes=(*FLOATS_AND_HALF, torch.int64)
    ),
    OpInfo(
        ltorch.cumsum,
        torch.cumsum,
        scan_samples,
        dtypes=(*NUMERIC_AND_BOOL, torch.float16),
        error_inputs=scan_errors,
    ),
    OpInfo(
        ltorch.cumprod,
        torch.cumprod,
        scan_samples,
        dtypes=(*NUMERIC_AND_BOOL, torch.float16),
        rtol=2e-2,
        atol=1e-2,
    ),
    OpInfo(
        ltorch.cumsum_,
        torch.Tensor.cumsum_,
        lambda dt, rg: (s for s in scan_samples(dt, rg) if not s.kwargs),
        dtypes=(torch.float32, torch.int64),
    ),
    OpInfo(
        ltorch.cumprod_,
        torch.Tensor.cumprod_,
        lambda dt, rg: (s for s in scan_samples(dt, rg) if not s.kwargs),
        dtypes=(torch.float32,),
    ),
]
