"""OpInfos of unary elementwise ops (and the sample generators binary ops share)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import torch

from opinfos._base import (
    FLOATS,
    FLOATS_AND_HALF,
    ErrorInput,
    OpInfo,
    SampleInput,
    make_tensor,
)
from thunder_ir import ops as ltorch

SampleFn = Callable[[torch.dtype, bool], Iterator[SampleInput]]
INTS_AND_BOOL = (torch.int64, torch.int32, torch.bool)
FLOAT_OPS_DTYPES = (*FLOATS_AND_HALF, torch.int64)  # INT_TO_FLOAT ops: ints give float32
ALL_BUT_COMPLEX = (*FLOATS_AND_HALF, torch.int64, torch.int32, torch.uint8, torch.bool)


def is_exact(dtype: torch.dtype) -> bool:
    return not (dtype.is_floating_point or dtype.is_complex)


def tensor(
    shape: tuple[int, ...],
    dtype: torch.dtype,
    *,
    low: float | None = None,
    high: float | None = None,
    noncontiguous: bool = False,
    requires_grad: bool = False,
) -> torch.Tensor:
    """make_tensor whose bounds also make sense for integer and bool dtypes."""
    if dtype is torch.bool:
        low = high = None
    elif is_exact(dtype):
        if low is not None:
            low = math.ceil(low)
        if high is not None:
            high = math.floor(high)
            if low is not None and high <= low:
                high = low + 1
        if dtype is torch.uint8 and (low is None or low < 0):
            low = 0
    return make_tensor(
        shape, dtype, low=low, high=high, noncontiguous=noncontiguous, requires_grad=requires_grad
    )


SPECIAL_FLOATS = [0.0, -0.0, 1.0, -1.5, math.inf, -math.inf, math.nan, 2.5, -2.5, 0.5]


def unary_samples_fn(
    low: float | None = None, high: float | None = None, special: bool = False, **kwargs: Any
) -> SampleFn:
    def samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
        for shape in ((), (5,), (3, 4), (2, 3, 4), (0, 3)):
            yield SampleInput(
                (tensor(shape, dtype, low=low, high=high, requires_grad=requires_grad),),
                dict(kwargs),
            )
        yield SampleInput(
            (tensor((4, 6), dtype, low=low, high=high, noncontiguous=True),), dict(kwargs)
        )
        if special and dtype.is_floating_point:
            yield SampleInput((torch.tensor(SPECIAL_FLOATS, dtype=dtype),), dict(kwargs), "special")

    return samples


unary_samples = unary_samples_fn()


def bool_input_error(
    op: Any, match: str, exc: type[Exception] = RuntimeError
) -> Callable[[], Iterator[ErrorInput]]:
    def errors() -> Iterator[ErrorInput]:
        yield ErrorInput(SampleInput((torch.tensor([True, False]),)), exc, match)

    return errors


def type_error_for_number(name: str) -> Callable[[], Iterator[ErrorInput]]:
    def errors() -> Iterator[ErrorInput]:
        yield ErrorInput(
            SampleInput(([1.0, 2.0],)), TypeError, rf"{name}\(\): argument 'input' .*must be Tensor"
        )

    return errors


def float_unary(
    op: Any,
    ref: Any,
    low: float | None = None,
    high: float | None = None,
    dtypes: tuple[torch.dtype, ...] = FLOAT_OPS_DTYPES,
    **kw: Any,
) -> OpInfo:
    return OpInfo(op, ref, unary_samples_fn(low, high), dtypes=dtypes, **kw)


def inplace_unary(
    op: Any, ref: Any, low: float | None = None, high: float | None = None, **kw: Any
) -> OpInfo:
    return OpInfo(
        op,
        ref,
        unary_samples_fn(low, high),
        dtypes=kw.pop("dtypes", (torch.float32, torch.bfloat16)),
        **kw,
    )


def inplace_error(op: Any, ref: Any, match: str) -> Callable[[], Iterator[ErrorInput]]:
    """An integer tensor cannot take a float result in place."""

    def errors() -> Iterator[ErrorInput]:
        yield ErrorInput(
            SampleInput((make_tensor((3,), torch.int64, low=1, high=5),)), RuntimeError, match
        )

    return errors


def round_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield from unary_samples_fn(special=True)(dtype, requires_grad)
    if dtype.is_floating_point:
        t = make_tensor((3, 4), dtype, low=-100, high=100)
        yield SampleInput((t,), {"decimals": 0})
        if dtype in (torch.float32, torch.float64):
            yield SampleInput((t,), {"decimals": 2})
            yield SampleInput((t,), {"decimals": -1})


def nan_to_num_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield from unary_samples_fn(special=True)(dtype, requires_grad)
    if dtype.is_floating_point:
        t = torch.tensor(SPECIAL_FLOATS, dtype=dtype)
        yield SampleInput((t,), {"nan": 1.5})
        yield SampleInput((t, 2.0, 100.0, -100.0))
        yield SampleInput((t,), {"posinf": 7.0})


def clamp_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    def t(*shape: int, nc: bool = False) -> torch.Tensor:
        return tensor(shape, dtype, noncontiguous=nc)

    yield SampleInput((t(3, 4), -2, 3))
    yield SampleInput((t(3, 4),), {"min": -1})
    yield SampleInput((t(3, 4),), {"max": 1})
    yield SampleInput((t(),), {"min": 0, "max": 5})
    yield SampleInput((t(4, 6, nc=True), t(6), t(4, 1)))  # tensor bounds broadcast
    yield SampleInput((t(3, 4),), {"min": t(4)})
    yield SampleInput((t(3, 4), 2, 1))  # min > max: everything becomes max
    yield SampleInput((t(3, 4), -1.5, 2.5))  # float bounds promote ints
    if dtype.is_floating_point:
        yield SampleInput((torch.tensor(SPECIAL_FLOATS, dtype=dtype), -1, 1))
        yield SampleInput((t(3, 4), math.nan, None))


def clamp_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((make_tensor((3,), torch.float32),)),
        RuntimeError,
        r"At least one of 'min' or 'max' must not be None",
    )


def clamp_min_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield SampleInput((tensor((3, 4), dtype), 1))
    yield SampleInput((tensor((3, 4), dtype, noncontiguous=True), tensor((4,), dtype)))
    yield SampleInput((tensor((), dtype), -0.5))


def complex_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield from unary_samples(dtype, requires_grad)
    if dtype.is_complex:
        yield SampleInput(
            (torch.tensor([0j, 1 + 1j, -2 + 0j, 3j], dtype=dtype),), name="with zeros"
        )


def positive_ref(a: torch.Tensor) -> torch.Tensor:
    return torch.positive(a).clone()


def real_ref(a: torch.Tensor) -> torch.Tensor:
    return torch.real(a).clone()


# Ops that give float results for integer inputs, with the input range that keeps them finite.
_FLOAT_UNARY: list[tuple[Any, Any, float | None, float | None]] = [
    (ltorch.exp, torch.exp, None, None),
    (ltorch.exp2, torch.exp2, None, None),
    (ltorch.expm1, torch.expm1, None, None),
    (ltorch.log, torch.log, 0.1, None),
    (ltorch.log1p, torch.log1p, -0.9, None),
    (ltorch.log2, torch.log2, 0.1, None),
    (ltorch.log10, torch.log10, 0.1, None),
    (ltorch.sqrt, torch.sqrt, 0.0, None),
    (ltorch.rsqrt, torch.rsqrt, 0.1, None),
    (ltorch.reciprocal, torch.reciprocal, 0.5, None),
    (ltorch.sin, torch.sin, None, None),
    (ltorch.cos, torch.cos, None, None),
    (ltorch.tan, torch.tan, -1.4, 1.4),
    (ltorch.asin, torch.asin, -0.99, 0.99),
    (ltorch.acos, torch.acos, -0.99, 0.99),
    (ltorch.atan, torch.atan, None, None),
    (ltorch.sinh, torch.sinh, None, None),
    (ltorch.cosh, torch.cosh, None, None),
    (ltorch.tanh, torch.tanh, None, None),
    (ltorch.asinh, torch.asinh, None, None),
    (ltorch.acosh, torch.acosh, 1.0, None),
    (ltorch.atanh, torch.atanh, -0.99, 0.99),
    (ltorch.erf, torch.erf, None, None),
    (ltorch.erfc, torch.erfc, None, None),
    (ltorch.erfinv, torch.erfinv, -0.99, 0.99),
    (ltorch.lgamma, torch.lgamma, 0.1, None),
    (ltorch.digamma, torch.digamma, 0.1, None),
    (ltorch.sigmoid, torch.sigmoid, None, None),
]

# In-place variants of the float ops, by name of the op and the Tensor method.
_INPLACE_FLOAT = [
    "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
    "atanh", "erf", "erfc", "erfinv", "lgamma", "digamma", "sigmoid",
]  # fmt: skip
_DOMAINS = {op.name: (lo, hi) for op, _, lo, hi in _FLOAT_UNARY}

OPINFOS = [
    *(float_unary(op, ref, lo, hi) for op, ref, lo, hi in _FLOAT_UNARY),
    OpInfo(
        ltorch.exp,
        torch.exp,
        unary_samples,
        dtypes=(torch.complex64,),
        name="exp_complex",
        torch_names=("torch.exp",),
    ),
    OpInfo(
        ltorch.sigmoid,
        torch.sigmoid,
        unary_samples,
        dtypes=(torch.bool,),
        name="sigmoid_bool",
        torch_names=("torch.sigmoid",),
    ),
    OpInfo(
        ltorch.abs,
        torch.abs,
        complex_samples,
        dtypes=(*FLOATS_AND_HALF, torch.int64, torch.int32, torch.uint8, torch.complex64),
        error_inputs=bool_input_error(
            ltorch.abs, r"not implemented for 'Bool'", NotImplementedError
        ),
    ),
    OpInfo(
        ltorch.neg,
        torch.neg,
        unary_samples,
        dtypes=(*FLOATS_AND_HALF, torch.int64, torch.int32, torch.complex64),
        error_inputs=bool_input_error(
            ltorch.neg, r"Negation, the `-` operator, on a bool tensor is not supported"
        ),
    ),
    OpInfo(
        ltorch.positive,
        positive_ref,
        unary_samples,
        dtypes=(torch.float32, torch.int64),
        error_inputs=bool_input_error(
            ltorch.positive, r"The `\+` operator, on a bool tensor is not supported"
        ),
    ),
    OpInfo(
        ltorch.sign,
        torch.sign,
        unary_samples_fn(special=True),
        dtypes=ALL_BUT_COMPLEX,
        error_inputs=lambda: iter(
            [
                ErrorInput(
                    SampleInput((torch.ones(2, dtype=torch.complex64),)),
                    NotImplementedError,
                    r"torch.sign is not intended to support complex numbers",
                )
            ]
        ),
    ),
    OpInfo(
        ltorch.sgn,
        torch.sgn,
        complex_samples,
        dtypes=(torch.float32, torch.int64, torch.complex64, torch.complex128),
    ),
    OpInfo(ltorch.signbit, torch.signbit, unary_samples_fn(special=True), dtypes=ALL_BUT_COMPLEX),
    OpInfo(ltorch.square, torch.square, unary_samples, dtypes=(*ALL_BUT_COMPLEX, torch.complex64)),
    OpInfo(
        ltorch.floor,
        torch.floor,
        unary_samples_fn(special=True),
        dtypes=(*FLOATS_AND_HALF, torch.int64, torch.int32),
        error_inputs=bool_input_error(
            ltorch.floor, r"not implemented for 'Bool'", NotImplementedError
        ),
    ),
    OpInfo(
        ltorch.ceil,
        torch.ceil,
        unary_samples_fn(special=True),
        dtypes=(*FLOATS_AND_HALF, torch.int64, torch.int32),
    ),
    OpInfo(
        ltorch.trunc,
        torch.trunc,
        unary_samples_fn(special=True),
        dtypes=(*FLOATS_AND_HALF, torch.int64, torch.int32),
    ),
    OpInfo(
        ltorch.round,
        torch.round,
        round_samples,
        dtypes=(*FLOATS_AND_HALF, torch.int64),
        error_inputs=lambda: iter(
            [
                ErrorInput(
                    SampleInput((make_tensor((3,), torch.int64),), {"decimals": 1}),
                    NotImplementedError,
                    r"not implemented for 'Long'",
                )
            ]
        ),
    ),
    OpInfo(
        ltorch.frac,
        torch.frac,
        unary_samples_fn(special=True),
        dtypes=FLOATS_AND_HALF,
        error_inputs=lambda: iter(
            [
                ErrorInput(
                    SampleInput((make_tensor((3,), torch.int64),)),
                    NotImplementedError,
                    r"not implemented for 'Long'",
                )
            ]
        ),
    ),
    OpInfo(ltorch.isfinite, torch.isfinite, unary_samples_fn(special=True), dtypes=ALL_BUT_COMPLEX),
    OpInfo(ltorch.isnan, torch.isnan, unary_samples_fn(special=True), dtypes=ALL_BUT_COMPLEX),
    OpInfo(ltorch.isinf, torch.isinf, unary_samples_fn(special=True), dtypes=ALL_BUT_COMPLEX),
    OpInfo(
        ltorch.isposinf,
        torch.isposinf,
        unary_samples_fn(special=True),
        dtypes=(torch.float32, torch.bfloat16, torch.int64),
    ),
    OpInfo(
        ltorch.isneginf,
        torch.isneginf,
        unary_samples_fn(special=True),
        dtypes=(torch.float32, torch.float16, torch.int64),
    ),
    OpInfo(ltorch.isreal, torch.isreal, complex_samples, dtypes=(torch.float32, torch.complex64)),
    OpInfo(
        ltorch.bitwise_not,
        torch.bitwise_not,
        unary_samples,
        dtypes=(torch.int64, torch.int32, torch.uint8, torch.bool),
        error_inputs=lambda: iter(
            [
                ErrorInput(
                    SampleInput((make_tensor((3,), torch.float32),)),
                    NotImplementedError,
                    r"not implemented for 'Float'",
                )
            ]
        ),
    ),
    OpInfo(
        ltorch.logical_not,
        torch.logical_not,
        unary_samples_fn(special=True),
        dtypes=ALL_BUT_COMPLEX,
        error_inputs=type_error_for_number("logical_not"),
    ),
    OpInfo(
        ltorch.real,
        real_ref,
        complex_samples,
        dtypes=(torch.float32, torch.complex64, torch.complex128),
    ),
    OpInfo(
        ltorch.imag,
        torch.imag,
        complex_samples,
        dtypes=(torch.complex64, torch.complex128),
        error_inputs=lambda: iter(
            [
                ErrorInput(
                    SampleInput((make_tensor((3,), torch.float32),)),
                    RuntimeError,
                    r"imag is not implemented for tensors with non-complex dtypes",
                )
            ]
        ),
    ),
    OpInfo(
        ltorch.nan_to_num,
        torch.nan_to_num,
        nan_to_num_samples,
        dtypes=(*FLOATS_AND_HALF, torch.int64),
    ),
    OpInfo(
        ltorch.clamp,
        torch.clamp,
        clamp_samples,
        dtypes=(*FLOATS_AND_HALF, torch.int64, torch.int32),
        error_inputs=clamp_errors,
    ),
    OpInfo(
        ltorch.clamp,
        torch.clip,
        clamp_samples,
        dtypes=(torch.float32,),
        name="clip",
        torch_names=("torch.clip", "torch.Tensor.clip"),
    ),
    OpInfo(
        ltorch.clamp_min,
        torch.clamp_min,
        clamp_min_samples,
        dtypes=(torch.float32, torch.bfloat16, torch.int64),
    ),
    OpInfo(
        ltorch.clamp_max,
        torch.clamp_max,
        clamp_min_samples,
        dtypes=(torch.float32, torch.bfloat16, torch.int64),
    ),
    # In-place variants: the result lands in the first argument.
    *(
        inplace_unary(
            getattr(ltorch, f"{name}_"),
            getattr(torch.Tensor, f"{name}_"),
            *_DOMAINS[name],
            error_inputs=inplace_error(
                getattr(ltorch, f"{name}_"),
                getattr(torch.Tensor, f"{name}_"),
                r"result type Float can't be cast to the desired output type Long",
            ),
        )
        for name in _INPLACE_FLOAT
    ),
    *(
        inplace_unary(
            getattr(ltorch, f"{name}_"),
            getattr(torch.Tensor, f"{name}_"),
            dtypes=(torch.float32, torch.bfloat16, torch.int64),
        )
        for name in ("abs", "neg", "sign", "sgn", "square", "floor", "ceil", "trunc", "round")
    ),
    inplace_unary(ltorch.frac_, torch.Tensor.frac_),
    inplace_unary(ltorch.nan_to_num_, torch.Tensor.nan_to_num_),
    OpInfo(
        ltorch.bitwise_not_,
        torch.Tensor.bitwise_not_,
        unary_samples,
        dtypes=(torch.int64, torch.bool),
    ),
    OpInfo(
        ltorch.logical_not_,
        torch.Tensor.logical_not_,
        unary_samples,
        dtypes=(torch.float32, torch.int64, torch.bool),
    ),
    OpInfo(
        ltorch.clamp_,
        torch.Tensor.clamp_,
        lambda dt, rg: (
            s
            for s in clamp_samples(dt, rg)
            if s.args[0].shape == (3, 4)
            and all(not isinstance(v, torch.Tensor) for v in (*s.args[1:], *s.kwargs.values()))
            and all(not isinstance(v, float) for v in s.args[1:])
        ),
        dtypes=(torch.float32, torch.int64),
    ),
    OpInfo(
        ltorch.clamp_min_,
        torch.Tensor.clamp_min_,
        lambda dt, rg: (SampleInput((tensor((3, 4), dt), 1)),),
        dtypes=(torch.float32, torch.int64),
    ),
    OpInfo(
        ltorch.clamp_max_,
        torch.Tensor.clamp_max_,
        lambda dt, rg: (SampleInput((tensor((3, 4), dt), tensor((4,), dt))),),
        dtypes=(torch.float32, torch.int64),
    ),
]

_ = FLOATS, INTS_AND_BOOL
