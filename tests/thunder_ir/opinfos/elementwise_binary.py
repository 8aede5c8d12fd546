"""OpInfos of binary and ternary elementwise ops."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import torch

from opinfos._base import ALL_NUMERIC, FLOATS_AND_HALF, ErrorInput, OpInfo, SampleInput, make_tensor
from opinfos.elementwise import SPECIAL_FLOATS, is_exact, tensor
from thunder_ir import ops as ltorch

SampleFn = Callable[[torch.dtype, bool], Iterator[SampleInput]]
NUMERIC_AND_BOOL = (*ALL_NUMERIC, torch.bool)
BITWISE = (torch.int64, torch.int32, torch.uint8, torch.bool)


def _compare_alpha(got: Any, expected: Any) -> None:
    """``sub(x, y, alpha=3)`` in bfloat16/float16: the IR computes ``x - 3 * y`` in float32 and
    rounds once, as torch's vectorized CPU kernel does; torch's scalar loop (tensors shorter
    than a vector, and the tail of longer ones) rounds ``3 * y`` to the dtype first. Where the
    difference cancels the two differ by a unit of ``3 * y``: up to 0.0625 for these samples."""
    if isinstance(expected, torch.Tensor) and expected.dtype in (torch.bfloat16, torch.float16):
        torch.testing.assert_close(got, expected, equal_nan=True, atol=0.0625, rtol=1.6e-2)
    else:
        torch.testing.assert_close(got, expected, equal_nan=True)


def binary_samples_fn(
    *,
    low: float | None = None,
    high: float | None = None,
    rhs_low: float | None = None,
    rhs_high: float | None = None,
    nonzero_rhs: bool = False,
    scalars: bool = True,
    float_scalars: bool = True,
    scalar_lhs: bool = False,
    mixed: torch.dtype | None = torch.float64,
    special: bool = False,
    kwargs: dict[str, Any] | None = None,
) -> SampleFn:
    """Two operands: same shapes, broadcasting, 0-d, non-contiguous, Python scalars (weak) and a
    second dtype (promotion)."""
    kw = kwargs or {}

    def samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
        def lhs(*shape: int, nc: bool = False, dt: torch.dtype = dtype) -> torch.Tensor:
            return tensor(
                shape, dt, low=low, high=high, noncontiguous=nc, requires_grad=requires_grad
            )

        def rhs(*shape: int, nc: bool = False, dt: torch.dtype = dtype) -> torch.Tensor:
            t = tensor(
                shape, dt, low=rhs_low, high=rhs_high, noncontiguous=nc, requires_grad=requires_grad
            )
            if nonzero_rhs and is_exact(dt):
                t = torch.where(t == 0, torch.ones((), dtype=dt), t)
            return t

        def s(*args: Any, name: str = "") -> SampleInput:
            return SampleInput(args, dict(kw), name)

        yield s(lhs(), rhs())
        yield s(lhs(3, 4), rhs(3, 4))
        yield s(lhs(3, 4, nc=True), rhs(4))  # broadcasting, non-contiguous
        yield s(lhs(2, 1, 4), rhs(3, 1))
        yield s(lhs(3, 4), rhs())  # 0-d tensor operand
        yield s(lhs(), rhs(3, 4))
        yield s(lhs(0, 4), rhs(4))  # empty
        if scalars:
            yield s(lhs(3, 4), 3 if rhs_low is None or rhs_low <= 3 else int(rhs_low) + 1)
            if float_scalars:
                yield s(lhs(3, 4), 2.5)
            if scalar_lhs:
                yield s(2, rhs(3, 4))
        if mixed is not None and mixed != dtype:
            yield s(lhs(3, 4), rhs(3, 4, dt=mixed), name="mixed dtypes")
        if special and dtype.is_floating_point:
            a = torch.tensor(SPECIAL_FLOATS, dtype=dtype)
            yield s(a, a.flip(0), name="special")

    return samples


binary_samples = binary_samples_fn()


def broadcast_error(dtype: torch.dtype = torch.float32) -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((make_tensor((3, 4), dtype), make_tensor((5,), dtype))),
        RuntimeError,
        r"The size of tensor a \(4\) must match the size of tensor b \(5\)",
    )


def errors(
    *cases: tuple[tuple[Any, ...], dict[str, Any], type[Exception], str],
    dtype: torch.dtype = torch.float32,
) -> Callable[[], Iterator[ErrorInput]]:
    """The broadcasting error (operands of ``dtype``) and the given cases."""

    def gen() -> Iterator[ErrorInput]:
        yield from broadcast_error(dtype)
        for args, kwargs, exc, match in cases:
            yield ErrorInput(SampleInput(args, kwargs), exc, match)

    return gen


def f32(*shape: int) -> torch.Tensor:
    return make_tensor(shape, torch.float32)


def i64(*shape: int) -> torch.Tensor:
    return make_tensor(shape, torch.int64)


def b8(*shape: int) -> torch.Tensor:
    return make_tensor(shape, torch.bool)


def c64(*shape: int) -> torch.Tensor:
    return make_tensor(shape, torch.complex64)


def ternary_samples_fn(
    third_number: float | None = None,
    *,
    nonzero: bool = False,
    kwargs: dict[str, Any] | None = None,
    third_low: float | None = None,
    third_high: float | None = None,
) -> SampleFn:
    kw = kwargs or {}

    def samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
        def t(
            *shape: int, nc: bool = False, low: float | None = None, high: float | None = None
        ) -> torch.Tensor:
            x = tensor(shape, dtype, noncontiguous=nc, low=low, high=high)
            if nonzero and is_exact(dtype):
                x = torch.where(x == 0, torch.ones((), dtype=dtype), x)
            return x

        lo, hi = third_low, third_high
        yield SampleInput((t(3, 4), t(3, 4), t(3, 4, low=lo, high=hi)), dict(kw))
        yield SampleInput((t(3, 4, nc=True), t(4), t(3, 1, low=lo, high=hi)), dict(kw))
        yield SampleInput((t(), t(), t(low=lo, high=hi)), dict(kw))
        yield SampleInput((t(2, 3, 4), t(3, 4), t(low=lo, high=hi)), dict(kw))
        if third_number is not None:
            yield SampleInput((t(3, 4), t(3, 4), third_number), dict(kw))
            yield SampleInput((t(3, 4), t(4), -third_number), dict(kw))

    return samples


def addc_samples_fn(nonzero: bool) -> SampleFn:
    def samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
        base = ternary_samples_fn(nonzero=nonzero)
        yield from base(dtype, requires_grad)
        value = 2 if is_exact(dtype) else 0.5
        for s in base(dtype, requires_grad):
            yield SampleInput(s.args, {"value": value})

    return samples


def lerp_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    yield from ternary_samples_fn(0.3, third_low=0.0, third_high=1.0)(dtype, requires_grad)
    yield SampleInput((tensor((3, 4), dtype), tensor((3, 4), dtype), 0.75))
    yield SampleInput(
        (tensor((3, 4), dtype), tensor((3, 4), dtype), tensor((3, 4), dtype, low=-1.0, high=2.0))
    )


def where_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    def t(*shape: int, nc: bool = False) -> torch.Tensor:
        return tensor(shape, dtype, noncontiguous=nc)

    def cond(*shape: int) -> torch.Tensor:
        return make_tensor(shape, torch.bool)

    yield SampleInput((cond(3, 4), t(3, 4), t(3, 4)))
    yield SampleInput((cond(3, 1), t(4, nc=True), t(3, 4)))
    yield SampleInput((cond(), t(3, 4), t()))
    yield SampleInput((cond(3, 4), t(3, 4), 2))
    yield SampleInput((cond(3, 4), 1.5, t(3, 4)))
    yield SampleInput((cond(3, 4), 1, 2.5))  # two scalars: the result takes their dtype
    yield SampleInput((cond(3, 4), t(3, 4), make_tensor((3, 4), torch.float64)))


def masked_fill_samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
    def t(*shape: int, nc: bool = False) -> torch.Tensor:
        return tensor(shape, dtype, noncontiguous=nc)

    def mask(*shape: int) -> torch.Tensor:
        return make_tensor(shape, torch.bool)

    yield SampleInput((t(3, 4), mask(3, 4), 2))
    yield SampleInput((t(4, 6, nc=True), mask(6), 0))
    yield SampleInput((t(3, 4), mask(3, 4), torch.tensor(5, dtype=dtype)))
    yield SampleInput((t(), mask(), 1))
    yield SampleInput((t(3, 4), mask(3, 4), torch.tensor(2.5)))
    yield SampleInput((t(3, 4), mask(3, 4), 1.7))
    yield SampleInput((t(3, 4), mask(3, 4), True))
    if dtype.is_floating_point:
        yield SampleInput((t(3, 4), mask(3, 4), -math.inf))


def inplace_binary_samples_fn(**kw: Any) -> SampleFn:
    """Binary samples whose first operand already has the result's shape."""

    def samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
        for s in binary_samples_fn(mixed=None, **kw)(dtype, requires_grad):
            a, b = s.args
            if not isinstance(a, torch.Tensor):
                continue
            shape_b = b.shape if isinstance(b, torch.Tensor) else ()
            if torch.broadcast_shapes(a.shape, shape_b) == a.shape:
                yield s

    return samples


def _same_shape_ternary(fn: SampleFn) -> SampleFn:
    def samples(dtype: torch.dtype, requires_grad: bool) -> Iterator[SampleInput]:
        for s in fn(dtype, requires_grad):
            shapes = [x.shape for x in s.args if isinstance(x, torch.Tensor)]
            if torch.broadcast_shapes(*shapes) == s.args[0].shape:
                yield s

    return samples


def rsub_ref(a: Any, b: Any, **kw: Any) -> torch.Tensor:
    return torch.rsub(a, b, **kw)


DIV_DTYPES = (*FLOATS_AND_HALF, torch.int64, torch.int32)

_int_div = {"nonzero_rhs": True}
_alpha_errors = errors(
    (
        (i64(3), i64(3)),
        {"alpha": 1.5},
        RuntimeError,
        r"For integral input tensors, argument alpha must not be a floating point number",
    ),
    (
        (f32(3), f32(3)),
        {"alpha": True},
        RuntimeError,
        r"Boolean alpha only supported for Boolean results",
    ),
)

OPINFOS = [
    # Arithmetic
    OpInfo(
        ltorch.add,
        torch.add,
        binary_samples_fn(scalar_lhs=True),
        dtypes=(*NUMERIC_AND_BOOL, torch.complex64),
        error_inputs=_alpha_errors,
    ),
    OpInfo(
        ltorch.add,
        torch.add,
        binary_samples_fn(kwargs={"alpha": 2}),
        dtypes=ALL_NUMERIC,
        name="add_alpha",
        torch_names=("torch.add",),
    ),
    OpInfo(
        ltorch.add,
        torch.add,
        binary_samples_fn(kwargs={"alpha": 0.5}),
        dtypes=FLOATS_AND_HALF,
        name="add_float_alpha",
        torch_names=("torch.add",),
    ),
    OpInfo(
        ltorch.sub,
        torch.sub,
        binary_samples_fn(scalar_lhs=True),
        dtypes=ALL_NUMERIC,
        error_inputs=errors(
            (
                (b8(3), b8(3)),
                {},
                RuntimeError,
                r"Subtraction, the `-` operator, with two bool tensors is not supported",
            ),
            (
                (i64(3), b8(3)),
                {},
                RuntimeError,
                r"Subtraction, the `-` operator, with a bool tensor is not supported",
            ),
        ),
    ),
    OpInfo(
        ltorch.sub,
        torch.sub,
        binary_samples_fn(kwargs={"alpha": 3}),
        dtypes=ALL_NUMERIC,
        name="sub_alpha",
        torch_names=("torch.sub",),
        compare=_compare_alpha,
    ),
    OpInfo(ltorch.rsub, rsub_ref, binary_samples_fn(), dtypes=ALL_NUMERIC),
    OpInfo(
        ltorch.rsub,
        rsub_ref,
        binary_samples_fn(kwargs={"alpha": 2}),
        dtypes=(torch.float32, torch.int64),
        name="rsub_alpha",
    ),
    OpInfo(
        ltorch.mul,
        torch.mul,
        binary_samples_fn(scalar_lhs=True),
        dtypes=(*NUMERIC_AND_BOOL, torch.complex64),
    ),
    OpInfo(
        ltorch.div,
        torch.div,
        binary_samples_fn(scalar_lhs=True, **_int_div),
        dtypes=(*DIV_DTYPES, torch.bool, torch.complex64),
        error_inputs=errors(
            (
                (f32(3), f32(3)),
                {"rounding_mode": "round"},
                RuntimeError,
                r"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found 'round'",
            )
        ),
    ),
    OpInfo(
        ltorch.div,
        torch.div,
        binary_samples_fn(special=True, kwargs={"rounding_mode": "trunc"}, **_int_div),
        dtypes=DIV_DTYPES,
        name="div_trunc",
        torch_names=("torch.div",),
    ),
    OpInfo(
        ltorch.div,
        torch.div,
        binary_samples_fn(special=True, kwargs={"rounding_mode": "floor"}, **_int_div),
        dtypes=DIV_DTYPES,
        name="div_floor",
        torch_names=("torch.div",),
    ),
    OpInfo(
        ltorch.true_divide,
        torch.true_divide,
        binary_samples_fn(scalar_lhs=True, **_int_div),
        dtypes=DIV_DTYPES,
    ),
    OpInfo(
        ltorch.floor_divide,
        torch.floor_divide,
        binary_samples_fn(scalar_lhs=True, special=True, **_int_div),
        dtypes=DIV_DTYPES,
        error_inputs=errors(
            ((b8(3), b8(3)), {}, NotImplementedError, r"not implemented for 'Bool'")
        ),
    ),
    OpInfo(
        ltorch.remainder,
        torch.remainder,
        binary_samples_fn(scalar_lhs=True, special=True, **_int_div),
        dtypes=DIV_DTYPES,
        error_inputs=errors(
            ((b8(3), b8(3)), {}, NotImplementedError, r"not implemented for 'Bool'")
        ),
    ),
    OpInfo(ltorch.fmod, torch.fmod, binary_samples_fn(special=True, **_int_div), dtypes=DIV_DTYPES),
    OpInfo(
        ltorch.pow,
        torch.pow,
        binary_samples_fn(rhs_low=0, rhs_high=4, scalar_lhs=True, special=True),
        dtypes=(*DIV_DTYPES, torch.complex64),
        error_inputs=errors(
            ((i64(3), -2), {}, RuntimeError, r"Integers to negative integer powers are not allowed")
        ),
    ),
    OpInfo(
        ltorch.pow,
        torch.pow,
        binary_samples_fn(low=0.1, rhs_low=-3, rhs_high=3),
        dtypes=FLOATS_AND_HALF,
        name="pow_positive_base",
        torch_names=("torch.pow",),
    ),
    OpInfo(
        ltorch.float_power,
        torch.float_power,
        binary_samples_fn(low=0.1, rhs_low=-2, rhs_high=3, scalar_lhs=True),
        dtypes=(torch.float32, torch.bfloat16, torch.int64, torch.complex64),
    ),
    OpInfo(
        ltorch.atan2,
        torch.atan2,
        binary_samples_fn(scalars=False, special=True),
        dtypes=(*FLOATS_AND_HALF, torch.int64),
        error_inputs=errors(
            (
                (f32(3), 2),
                {},
                TypeError,
                r"atan2\(\): argument 'other' \(position 2\) must be Tensor, not int",
            )
        ),
    ),
    OpInfo(
        ltorch.hypot,
        torch.hypot,
        binary_samples_fn(scalars=False, mixed=None),
        dtypes=FLOATS_AND_HALF,
        error_inputs=errors(
            ((i64(3), i64(3)), {}, NotImplementedError, r"not implemented for 'Long'")
        ),
    ),
    OpInfo(
        ltorch.copysign,
        torch.copysign,
        binary_samples_fn(special=True),
        dtypes=(*FLOATS_AND_HALF, torch.int64),
    ),
    OpInfo(
        ltorch.maximum,
        torch.maximum,
        binary_samples_fn(scalars=False, special=True),
        dtypes=NUMERIC_AND_BOOL,
        error_inputs=errors(
            (
                (f32(3), 2),
                {},
                TypeError,
                r"maximum\(\): argument 'other' \(position 2\) must be Tensor, not int",
            )
        ),
    ),
    OpInfo(
        ltorch.minimum,
        torch.minimum,
        binary_samples_fn(scalars=False, special=True),
        dtypes=NUMERIC_AND_BOOL,
        error_inputs=errors(
            ((c64(3), c64(3)), {}, NotImplementedError, r"not implemented for 'ComplexFloat'")
        ),
    ),
    OpInfo(
        ltorch.fmax,
        torch.fmax,
        binary_samples_fn(scalars=False, special=True),
        dtypes=(*ALL_NUMERIC, torch.float16),
    ),
    OpInfo(
        ltorch.fmin,
        torch.fmin,
        binary_samples_fn(scalars=False, special=True),
        dtypes=(*ALL_NUMERIC, torch.float16),
    ),
    # Bitwise and logical
    OpInfo(
        ltorch.bitwise_and,
        torch.bitwise_and,
        binary_samples_fn(float_scalars=False, scalar_lhs=True, mixed=torch.int32),
        dtypes=BITWISE,
        error_inputs=errors(
            ((f32(3), f32(3)), {}, NotImplementedError, r"not implemented for 'Float'"),
            dtype=torch.int64,
        ),
    ),
    OpInfo(
        ltorch.bitwise_or,
        torch.bitwise_or,
        binary_samples_fn(float_scalars=False, mixed=torch.int32),
        dtypes=BITWISE,
    ),
    OpInfo(
        ltorch.bitwise_xor,
        torch.bitwise_xor,
        binary_samples_fn(float_scalars=False, mixed=torch.int32),
        dtypes=BITWISE,
    ),
    OpInfo(
        ltorch.bitwise_left_shift,
        torch.bitwise_left_shift,
        binary_samples_fn(low=0, rhs_low=0, rhs_high=5, float_scalars=False, mixed=torch.int32),
        dtypes=(torch.int64, torch.int32, torch.uint8),
    ),
    OpInfo(
        ltorch.bitwise_right_shift,
        torch.bitwise_right_shift,
        binary_samples_fn(rhs_low=0, rhs_high=5, float_scalars=False, mixed=torch.int32),
        dtypes=(torch.int64, torch.int32, torch.uint8),
    ),
    OpInfo(
        ltorch.logical_and,
        torch.logical_and,
        binary_samples_fn(scalars=False, special=True),
        dtypes=NUMERIC_AND_BOOL,
    ),
    OpInfo(
        ltorch.logical_or,
        torch.logical_or,
        binary_samples_fn(scalars=False, special=True),
        dtypes=NUMERIC_AND_BOOL,
    ),
    OpInfo(
        ltorch.logical_xor,
        torch.logical_xor,
        binary_samples_fn(scalars=False, special=True),
        dtypes=NUMERIC_AND_BOOL,
    ),
    # Comparisons
    OpInfo(
        ltorch.eq,
        torch.eq,
        binary_samples_fn(special=True),
        dtypes=(*NUMERIC_AND_BOOL, torch.complex64),
    ),
    OpInfo(
        ltorch.ne,
        torch.ne,
        binary_samples_fn(special=True),
        dtypes=(*NUMERIC_AND_BOOL, torch.complex64),
    ),
    OpInfo(
        ltorch.lt,
        torch.lt,
        binary_samples_fn(special=True),
        dtypes=NUMERIC_AND_BOOL,
        error_inputs=errors(
            ((c64(3), c64(3)), {}, NotImplementedError, r"not implemented for 'ComplexFloat'")
        ),
    ),
    OpInfo(ltorch.le, torch.le, binary_samples_fn(special=True), dtypes=NUMERIC_AND_BOOL),
    OpInfo(ltorch.gt, torch.gt, binary_samples_fn(special=True), dtypes=NUMERIC_AND_BOOL),
    OpInfo(ltorch.ge, torch.ge, binary_samples_fn(special=True), dtypes=NUMERIC_AND_BOOL),
    # Ternary
    OpInfo(
        ltorch.lerp,
        torch.lerp,
        lerp_samples,
        dtypes=FLOATS_AND_HALF,
        error_inputs=lambda: iter(
            [
                ErrorInput(
                    SampleInput((f32(3), make_tensor((3,), torch.float64), 0.5)),
                    RuntimeError,
                    r"expected dtype float for `end` but got dtype double",
                )
            ]
        ),
    ),
    OpInfo(
        ltorch.addcmul,
        torch.addcmul,
        addc_samples_fn(False),
        dtypes=(*FLOATS_AND_HALF, torch.int64),
    ),
    OpInfo(
        ltorch.addcdiv,
        torch.addcdiv,
        addc_samples_fn(True),
        dtypes=FLOATS_AND_HALF,
        error_inputs=lambda: iter(
            [
                ErrorInput(
                    SampleInput((i64(3), i64(3), i64(3))),
                    RuntimeError,
                    r"Integer division with addcdiv is no longer supported",
                )
            ]
        ),
    ),
    OpInfo(
        ltorch.where,
        torch.where,
        where_samples,
        dtypes=NUMERIC_AND_BOOL,
        error_inputs=lambda: iter(
            [
                ErrorInput(
                    SampleInput((f32(3), f32(3), f32(3))),
                    RuntimeError,
                    r"where expected condition to be a boolean tensor, but got a tensor with dtype Float",
                )
            ]
        ),
    ),
    OpInfo(
        ltorch.tensor_where,
        torch.Tensor.where,
        lambda dt, rg: (
            SampleInput((s.args[1], s.args[0], s.args[2]))
            for s in where_samples(dt, rg)
            if isinstance(s.args[1], torch.Tensor)
        ),
        dtypes=(torch.float32, torch.int64),
    ),
    OpInfo(
        ltorch.masked_fill,
        torch.masked_fill,
        masked_fill_samples,
        dtypes=(*NUMERIC_AND_BOOL, torch.float16),
        error_inputs=lambda: iter(
            [
                ErrorInput(
                    SampleInput((f32(3), f32(3), 1.0)),
                    RuntimeError,
                    r"masked_fill_ only supports boolean masks, but got mask with dtype float",
                ),
                ErrorInput(
                    SampleInput((f32(3), b8(3), f32(2))),
                    RuntimeError,
                    r"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension\(s\)",
                ),
            ]
        ),
    ),
    # In-place variants
    OpInfo(
        ltorch.add_,
        torch.Tensor.add_,
        inplace_binary_samples_fn(),
        dtypes=(torch.float32, torch.bfloat16),
        error_inputs=lambda: iter(
            [
                ErrorInput(
                    SampleInput((i64(3), 1.5)),
                    RuntimeError,
                    r"result type Float can't be cast to the desired output type Long",
                ),
                ErrorInput(
                    SampleInput((f32(3), f32(2, 3))),
                    RuntimeError,
                    r"output with shape \[3\] doesn't match the broadcast shape \[2, 3\]",
                ),
            ]
        ),
    ),
    OpInfo(
        ltorch.add_,
        torch.Tensor.add_,
        inplace_binary_samples_fn(float_scalars=False),
        dtypes=(torch.int64,),
        name="add__int",
    ),
    *(
        OpInfo(
            getattr(ltorch, f"{name}_"),
            getattr(torch.Tensor, f"{name}_"),
            inplace_binary_samples_fn(**kw),
            dtypes=dts,
        )
        for name, kw, dts in [
            ("sub", {}, (torch.float32, torch.float16)),
            ("mul", {}, (torch.float32, torch.bfloat16)),
            ("div", {}, (torch.float32, torch.float64)),
            ("true_divide", {}, (torch.float32,)),
            (
                "floor_divide",
                {"nonzero_rhs": True, "float_scalars": False},
                (torch.float32, torch.int64),
            ),
            (
                "remainder",
                {"nonzero_rhs": True, "float_scalars": False},
                (torch.float32, torch.int64),
            ),
            ("fmod", {"nonzero_rhs": True, "float_scalars": False}, (torch.float32, torch.int64)),
            (
                "pow",
                {"rhs_low": 0, "rhs_high": 3, "float_scalars": False},
                (torch.float32, torch.int64),
            ),
            ("float_power", {"low": 0.1}, (torch.float64,)),
            ("atan2", {"scalars": False}, (torch.float32,)),
            ("hypot", {"scalars": False}, (torch.float32,)),
            ("copysign", {}, (torch.float32,)),
            ("bitwise_and", {"float_scalars": False}, (torch.int64,)),
            ("bitwise_or", {"float_scalars": False}, (torch.int64,)),
            ("bitwise_xor", {"float_scalars": False}, (torch.int64,)),
            (
                "bitwise_left_shift",
                {"low": 0, "rhs_low": 0, "rhs_high": 4, "float_scalars": False},
                (torch.int64,),
            ),
            (
                "bitwise_right_shift",
                {"rhs_low": 0, "rhs_high": 4, "float_scalars": False},
                (torch.int64,),
            ),
            ("logical_and", {"scalars": False}, (torch.float32, torch.bool)),
            ("logical_or", {"scalars": False}, (torch.float32, torch.bool)),
            ("logical_xor", {"scalars": False}, (torch.int64,)),
            ("eq", {}, (torch.float32, torch.int64)),
            ("ne", {}, (torch.float32,)),
            ("lt", {}, (torch.float32,)),
            ("le", {}, (torch.float32,)),
            ("gt", {}, (torch.int64,)),
            ("ge", {}, (torch.float32,)),
        ]
    ),
    OpInfo(
        ltorch.lerp_, torch.Tensor.lerp_, _same_shape_ternary(lerp_samples), dtypes=(torch.float32,)
    ),
    OpInfo(
        ltorch.addcmul_,
        torch.Tensor.addcmul_,
        _same_shape_ternary(addc_samples_fn(False)),
        dtypes=(torch.float32, torch.int64),
    ),
    OpInfo(
        ltorch.addcdiv_,
        torch.Tensor.addcdiv_,
        _same_shape_ternary(addc_samples_fn(True)),
        dtypes=(torch.float32,),
    ),
    OpInfo(
        ltorch.masked_fill_,
        torch.Tensor.masked_fill_,
        lambda dt, rg: (
            s
            for s in masked_fill_samples(dt, rg)
            if s.args[0].shape == torch.broadcast_shapes(s.args[0].shape, s.args[1].shape)
        ),
        dtypes=(torch.float32, torch.int64),
    ),
]
