"""The torch executor: every prim, traced and executed, equals the torch computation it stands for."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from thunder_executors import transform_for_execution
from thunder_executors.torch_executor import torch_executor, unclaimed_prims
from thunder_ir import dtypes, prims, trace_function
from thunder_ir.devices import cpu
from thunder_ir.tags import OpTag


def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(shape, dtype=dtype)


def randint(
    *shape: int, low: int = -8, high: int = 9, dtype: torch.dtype = torch.int64
) -> torch.Tensor:
    return torch.randint(low, high, shape, dtype=dtype)


def positive(*shape: int) -> torch.Tensor:
    return torch.rand(shape) + 0.5


def unit(*shape: int) -> torch.Tensor:
    return torch.rand(shape) * 1.8 - 0.9


@dataclass
class Case:
    prim: str
    fn: Callable[..., Any]  # traced: called with proxies for ``inputs()``
    ref: Callable[..., Any]  # torch: called with the tensors
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    name: str = ""
    exact: bool = False

    @property
    def id(self) -> str:
        return self.name or self.prim


def unary(
    name: str, ref: Callable[..., Any], make: Callable[[], torch.Tensor] = lambda: randn(3, 4)
) -> Case:
    return Case(name, lambda a: prims.ALL_PRIMS[name](a), ref, lambda: (make(),))


def binary(
    name: str, ref: Callable[..., Any], make: Callable[[], torch.Tensor] = lambda: randn(3, 4)
) -> Case:
    return Case(name, lambda a, b: prims.ALL_PRIMS[name](a, b), ref, lambda: (make(), make()))


UNARY = [
    unary("abs", torch.abs),
    unary("neg", torch.neg),
    unary("bitwise_not", torch.bitwise_not, lambda: randint(3, 4)),
    unary("exp", torch.exp),
    unary("exp2", torch.exp2),
    unary("expm1", torch.expm1),
    unary("log", torch.log, lambda: positive(3, 4)),
    unary("log1p", torch.log1p, lambda: positive(3, 4)),
    unary("log2", torch.log2, lambda: positive(3, 4)),
    unary("log10", torch.log10, lambda: positive(3, 4)),
    unary("sqrt", torch.sqrt, lambda: positive(3, 4)),
    unary("rsqrt", torch.rsqrt, lambda: positive(3, 4)),
    unary("reciprocal", torch.reciprocal, lambda: positive(3, 4)),
    unary("sin", torch.sin),
    unary("cos", torch.cos),
    unary("tan", torch.tan, lambda: unit(3, 4)),
    unary("asin", torch.asin, lambda: unit(3, 4)),
    unary("acos", torch.acos, lambda: unit(3, 4)),
    unary("atan", torch.atan),
    unary("sinh", torch.sinh),
    unary("cosh", torch.cosh),
    unary("tanh", torch.tanh),
    unary("asinh", torch.asinh),
    unary("acosh", torch.acosh, lambda: positive(3, 4) + 1),
    unary("atanh", torch.atanh, lambda: unit(3, 4)),
    unary("erf", torch.erf),
    unary("erfc", torch.erfc),
    unary("erfinv", torch.erfinv, lambda: unit(3, 4)),
    unary("lgamma", torch.lgamma, lambda: positive(3, 4)),
    unary("digamma", torch.digamma, lambda: positive(3, 4)),
    unary("sigmoid", torch.sigmoid),
    unary("floor", torch.floor),
    unary("ceil", torch.ceil),
    unary("round", torch.round, lambda: randn(3, 4) * 4),
    unary("trunc", torch.trunc),
    unary("sign", torch.sign),
    Case(
        "sign",
        lambda a: prims.sign(a),
        torch.sgn,
        lambda: (randn(3, dtype=torch.complex64),),
        name="sign_complex",
    ),
    unary("signbit", torch.signbit),
    unary("isfinite", torch.isfinite, lambda: torch.tensor([1.0, math.inf, -math.inf, math.nan])),
    unary("isnan", torch.isnan, lambda: torch.tensor([1.0, math.inf, -math.inf, math.nan])),
    unary("isinf", torch.isinf, lambda: torch.tensor([1.0, math.inf, -math.inf, math.nan])),
    unary("real", torch.real, lambda: randn(3, 4, dtype=torch.complex64)),
    unary("imag", torch.imag, lambda: randn(3, 4, dtype=torch.complex64)),
    Case(
        "imag", lambda a: prims.imag(a), torch.zeros_like, lambda: (randn(3),), name="imag_of_real"
    ),
]

BINARY = [
    binary("add", torch.add),
    binary("sub", torch.sub),
    binary("mul", torch.mul),
    binary("div", torch.true_divide),
    binary(
        "div", lambda a, b: torch.div(a, b, rounding_mode="trunc"), lambda: randint(3, 4, low=1)
    ),
    binary("floor_divide", torch.floor_divide, lambda: randint(3, 4, low=1)),
    binary(
        "trunc_divide", lambda a, b: torch.div(a, b, rounding_mode="trunc"), lambda: randn(3, 4) * 5
    ),
    binary("remainder", torch.remainder),
    binary("remainder", torch.remainder, lambda: randint(3, 4, low=1)),
    binary("fmod", torch.fmod),
    binary("pow", torch.pow, lambda: positive(3, 4)),
    binary("atan2", torch.atan2),
    binary("maximum", torch.maximum),
    binary("minimum", torch.minimum),
    binary("copysign", torch.copysign),
    binary("bitwise_and", torch.bitwise_and, lambda: randint(3, 4)),
    binary("bitwise_or", torch.bitwise_or, lambda: randint(3, 4)),
    binary("bitwise_xor", torch.bitwise_xor, lambda: randint(3, 4)),
    binary("shift_left", torch.bitwise_left_shift, lambda: randint(3, 4, low=0, high=8)),
    binary("shift_right", torch.bitwise_right_shift, lambda: randint(3, 4, low=0, high=8)),
    binary("eq", torch.eq, lambda: randint(3, 4, low=0, high=3)),
    binary("ne", torch.ne, lambda: randint(3, 4, low=0, high=3)),
    binary("lt", torch.lt),
    binary("le", torch.le),
    binary("gt", torch.gt),
    binary("ge", torch.ge),
]
for _i, _c in enumerate(BINARY):
    if _c.prim in ("div", "remainder") and _c.inputs()[0].dtype == torch.int64:
        _c.name = f"{_c.prim}_int"

# A Python number on either side (each torch function takes it differently).
WITH_NUMBERS = [
    Case(
        n,
        lambda a, n=n: prims.ALL_PRIMS[n](a, 2.0),
        lambda a, ref=ref: ref(a, torch.tensor(2.0)),
        lambda: (positive(3, 4),),
        name=f"{n}_tensor_number",
    )
    for n, ref in [
        ("add", torch.add),
        ("sub", torch.sub),
        ("maximum", torch.maximum),
        ("atan2", torch.atan2),
        ("lt", torch.lt),
        ("pow", torch.pow),
    ]
] + [
    Case(
        n,
        lambda a, n=n: prims.ALL_PRIMS[n](2.0, a),
        lambda a, ref=ref: ref(torch.tensor(2.0), a),
        lambda: (positive(3, 4),),
        name=f"{n}_number_tensor",
    )
    for n, ref in [
        ("sub", torch.sub),
        ("div", torch.true_divide),
        ("fmod", torch.fmod),
        ("minimum", torch.minimum),
        ("lt", torch.lt),
        ("ge", torch.ge),
        ("copysign", torch.copysign),
        ("pow", torch.pow),
    ]
]

OTHER = [
    Case(
        "where",
        lambda p, a, b: prims.where(p, a, b),
        torch.where,
        lambda: (randn(3, 4) > 0, randn(3, 4), randn(3, 4)),
    ),
    Case(
        "where",
        lambda p, a: prims.where(p, a, 0.5),
        lambda p, a: torch.where(p, a, 0.5),
        lambda: (randn(3, 4) > 0, randn(3, 4)),
        name="where_number",
    ),
    Case(
        "where",
        lambda a, b: prims.where(True, a, b),
        lambda a, b: a,
        lambda: (randn(3), randn(3)),
        name="where_bool_pred",
    ),
    Case(
        "convert_element_type",
        lambda a: prims.convert_element_type(a, dtypes.int32),
        lambda a: a.to(torch.int32),
        lambda: (randn(3, 4) * 10,),
    ),
    Case("sum", lambda a: prims.sum(a, (0, 2)), lambda a: a.sum((0, 2)), lambda: (randn(2, 3, 4),)),
    Case(
        "sum",
        lambda a: prims.sum(a, ()),
        lambda a: a.clone(),
        lambda: (randn(2, 3),),
        name="sum_no_dims",
    ),
    Case(
        "sum",
        lambda a: prims.sum(a, (1,)),
        lambda a: a.sum(1, dtype=torch.int32),
        lambda: (randint(2, 3, dtype=torch.int32),),
        name="sum_int32",
    ),
    Case("prod", lambda a: prims.prod(a, (1,)), lambda a: a.prod(1), lambda: (randn(2, 3),)),
    Case(
        "prod",
        lambda a: prims.prod(a, (0, 2)),
        lambda a: a.prod(2).prod(0),
        lambda: (randn(2, 3, 2),),
        name="prod_dims",
    ),
    Case("amax", lambda a: prims.amax(a, (1,)), lambda a: a.amax(1), lambda: (randn(2, 3),)),
    Case("amin", lambda a: prims.amin(a, (0, 1)), lambda a: a.amin((0, 1)), lambda: (randn(2, 3),)),
    Case(
        "var",
        lambda a: prims.var(a, (1,), correction=1),
        lambda a: a.var(1, correction=1),
        lambda: (randn(2, 5),),
    ),
    Case(
        "var",
        lambda a: prims.var(a, (0, 1), correction=0),
        lambda a: a.var((0, 1), correction=0),
        lambda: (randn(2, 5),),
        name="var_correction0",
    ),
    Case(
        "var_mean",
        lambda a: prims.var_mean(a, (1,), correction=1),
        lambda a: torch.var_mean(a, 1, correction=1),
        lambda: (randn(2, 5),),
    ),
    Case(
        "argmax",
        lambda a: prims.argmax(a, 1),
        lambda a: a.argmax(1),
        lambda: (randn(3, 5),),
        exact=True,
    ),
    Case(
        "argmax",
        lambda a: prims.argmax(a, None),
        lambda a: a.argmax(),
        lambda: (randn(3, 5),),
        name="argmax_flat",
        exact=True,
    ),
    Case(
        "argmin",
        lambda a: prims.argmin(a, 0),
        lambda a: a.argmin(0),
        lambda: (randn(3, 5),),
        exact=True,
    ),
    Case("cumsum", lambda a: prims.cumsum(a, 1), lambda a: a.cumsum(1), lambda: (randn(3, 5),)),
    Case(
        "cumsum",
        lambda a: prims.cumsum(a, 0),
        lambda a: a.cumsum(0, dtype=torch.int32),
        lambda: (randint(3, dtype=torch.int32),),
        name="cumsum_int32",
    ),
    Case("cumprod", lambda a: prims.cumprod(a, 1), lambda a: a.cumprod(1), lambda: (unit(3, 5),)),
    Case(
        "broadcast_in_dim",
        lambda a: prims.broadcast_in_dim(a, (2, 3, 4), (1,)),
        lambda a: a.reshape(1, 3, 1).expand(2, 3, 4),
        lambda: (randn(3),),
    ),
    Case(
        "broadcast_in_dim",
        lambda a: prims.broadcast_in_dim(a, (2, 3), (0, 1)),
        lambda a: a.expand(2, 3),
        lambda: (randn(1, 3),),
        name="broadcast_same_rank",
    ),
    Case(
        "reshape",
        lambda a: prims.reshape(a, (6, 2)),
        lambda a: a.reshape(6, 2),
        lambda: (randn(3, 4),),
    ),
    Case(
        "slice",
        lambda a: prims.slice_prim(a, (1, 0), (3, 4)),
        lambda a: a[1:3, 0:4],
        lambda: (randn(3, 4),),
    ),
    Case(
        "slice",
        lambda a: prims.slice_prim(a, (0, 1), (5, 4), (2, 2)),
        lambda a: a[0:5:2, 1:4:2],
        lambda: (randn(5, 4),),
        name="slice_strides",
    ),
    Case(
        "squeeze",
        lambda a: prims.squeeze(a, (0, 2)),
        lambda a: a.squeeze((0, 2)),
        lambda: (randn(1, 3, 1),),
    ),
    Case(
        "unsqueeze",
        lambda a: prims.unsqueeze(a, 1),
        lambda a: a.unsqueeze(1),
        lambda: (randn(2, 3),),
    ),
    Case(
        "transpose",
        lambda a: prims.transpose(a, (2, 0, 1)),
        lambda a: a.permute(2, 0, 1),
        lambda: (randn(2, 3, 4),),
    ),
    Case(
        "cat",
        lambda a, b: prims.cat([a, b], 1),
        lambda a, b: torch.cat([a, b], 1),
        lambda: (randn(2, 3), randn(2, 2)),
    ),
    Case(
        "pad",
        lambda a: prims.pad(a, 0.5, ((1, 2, 0), (0, 1, 0))),
        lambda a: F.pad(a, (0, 1, 1, 2), value=0.5),
        lambda: (randn(2, 3),),
    ),
    Case(
        "pad",
        lambda a: prims.pad(a, 0.0, ((-1, 1, 0), (2, -2, 0))),
        lambda a: F.pad(a, (2, -2, -1, 1)),
        lambda: (randn(3, 4),),
        name="pad_negative",
    ),
    Case(
        "pad",
        lambda a: prims.pad(a, -1.0, ((1, -1, 2),)),
        lambda a: torch.tensor([-1.0, a[0], -1, -1, a[1], -1, -1]),
        lambda: (randn(3),),
        name="pad_interior",
    ),
    Case("flip", lambda a: prims.flip(a, (0, 1)), lambda a: a.flip((0, 1)), lambda: (randn(2, 3),)),
    Case("shallow_copy", lambda a: prims.shallow_copy(a), lambda a: a, lambda: (randn(2, 3),)),
    Case("clone", lambda a: prims.clone(a), lambda a: a.clone(), lambda: (randn(2, 3),)),
    Case(
        "clone_layout", lambda a: prims.clone_layout(a), lambda a: a.clone(), lambda: (randn(2, 3),)
    ),
    Case(
        "stop_gradient",
        lambda a: prims.stop_gradient(a),
        lambda a: a.detach(),
        lambda: (randn(2, 3),),
    ),
    Case(
        "written_without_grad",
        lambda a, b: prims.written_without_grad(a, b),
        lambda a, b: b,
        lambda: (randn(2, 3), randn(2, 3)),
    ),
    Case("device_put", lambda a: prims.device_put(a, cpu), lambda a: a, lambda: (randn(2, 3),)),
    Case(
        "full",
        lambda: prims.full((2, 3), 1.5, device=cpu, dtype=dtypes.float64),
        lambda: torch.full((2, 3), 1.5, dtype=torch.float64),
        lambda: (),
    ),
    Case(
        "iota",
        lambda: prims.iota(5, start=2, step=3, device=cpu, dtype=dtypes.int64),
        lambda: torch.arange(2, 17, 3),
        lambda: (),
    ),
    Case(
        "iota",
        lambda: prims.iota(4, start=0.5, step=0.25, device=cpu, dtype=dtypes.float32),
        lambda: torch.arange(4) * 0.25 + 0.5,
        lambda: (),
        name="iota_float",
    ),
    Case(
        "tensor",
        lambda: prims.tensor((1.5, 2.0, -3.0, 4.0), (2, 2), device=cpu, dtype=dtypes.float64),
        lambda: torch.tensor([[1.5, 2.0], [-3.0, 4.0]], dtype=torch.float64),
        lambda: (),
    ),
    Case(
        "tensor",
        lambda: prims.tensor((), (2, 0), device=cpu, dtype=dtypes.int32),
        lambda: torch.zeros(2, 0, dtype=torch.int32),
        lambda: (),
        name="tensor_empty",
    ),
    Case(
        "take",
        lambda a, i: prims.take(a, i),
        torch.take,
        lambda: (randn(3, 4), torch.randint(0, 12, (5,))),
    ),
    Case(
        "index_select",
        lambda a, i: prims.index_select(a, 1, i),
        lambda a, i: a.index_select(1, i),
        lambda: (randn(3, 4), torch.randint(0, 4, (5,))),
    ),
    Case(
        "gather",
        lambda a, i: prims.gather(a, 1, i),
        lambda a, i: a.gather(1, i),
        lambda: (randn(3, 4), torch.randint(0, 4, (3, 2))),
    ),
    Case(
        "scatter_add",
        lambda a, i, s: prims.scatter_add(a, 1, i, s),
        lambda a, i, s: a.scatter_add(1, i, s),
        lambda: (randn(3, 4), torch.randint(0, 4, (3, 2)), randn(3, 2)),
    ),
    Case(
        "index_put",
        lambda a, i, v: prims.index_put(a, [i], v, True),
        lambda a, i, v: a.index_put((i,), v, accumulate=True),
        lambda: (randn(5), torch.tensor([0, 1, 1]), randn(3)),
    ),
    Case(
        "index_put",
        lambda a, i, v: prims.index_put(a, [i], v, False),
        lambda a, i, v: a.index_put((i.long(),), v),
        lambda: (randn(5), torch.tensor([0, 3], dtype=torch.int32), randn(2)),
        name="index_put_int32",
    ),
    Case(
        "matmul",
        lambda a, b: prims.matmul(a, b),
        torch.matmul,
        lambda: (randn(2, 3, 4), randn(4, 5)),
    ),
    Case(
        "linear",
        lambda a, w, b: prims.linear(a, w, b),
        F.linear,
        lambda: (randn(2, 3, 4), randn(5, 4), randn(5)),
    ),
    Case(
        "linear",
        lambda a, w: prims.linear(a, w, None),
        F.linear,
        lambda: (randn(3, 4), randn(5, 4)),
        name="linear_no_bias",
    ),
    Case(
        "convolution",
        lambda a, w, b: prims.convolution(a, w, b, (2,), (1,), (1,), False, (0,), 1),
        lambda a, w, b: F.conv2d(a, w, b, stride=2, padding=1),
        lambda: (randn(1, 2, 6, 6), randn(3, 2, 3, 3), randn(3)),
    ),
    Case(
        "embedding",
        lambda i, w: prims.embedding(i, w),
        F.embedding,
        lambda: (torch.randint(0, 5, (2, 3)), randn(5, 4)),
    ),
]

CASES = UNARY + BINARY + WITH_NUMBERS + OTHER


def run_case(case: Case) -> tuple[Any, Any, str]:
    inputs = case.inputs()
    trace = trace_function(case.fn, *inputs)
    extrace = transform_for_execution(trace)
    got = extrace.python_callable()(*inputs)
    return got, case.ref(*inputs), extrace.python()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_prim_matches_torch(case: Case) -> None:
    for _ in range(2):  # fresh random inputs each time
        got, expected, source = run_case(case)
        if case.exact:
            assert torch.equal(got, expected), source
        else:
            torch.testing.assert_close(
                got, expected, equal_nan=True, msg=lambda m: f"{m}\n{source}"
            )


def test_every_prim_has_a_case() -> None:
    # The collectives need a process group: tests/distributed runs them on 2 ranks.
    collectives = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "wait"}
    random = {"uniform", "normal", "bernoulli", "randint"}  # test_random_prims*
    # tests/thunder/test_rng_and_regions_like_eager.py
    random |= {"bernoulli_like", "torch_fallback_sized_random"}
    # Reads of tensor data need the jit's reader: tests/thunder/test_data_dependent_*.py.
    data_reads = {"item", "nonzero", "tolist", "check_data", "torch_fallback_sized"}
    checks = {"check_values"}  # no result: test_check_values_raises_where_its_value_is_zero
    checks.add("check_in_place_allowed")  # tests/thunder/test_rng_generators_and_reruns.py
    covered = {c.prim for c in CASES} | {"copy_"} | random | collectives | data_reads | checks
    runnable = {
        n for n, s in prims.ALL_PRIMS.items() if not ({OpTag.PROLOGUE, OpTag.RETURN} & s.tags)
    }
    assert runnable - covered == set()


def test_check_values_raises_where_its_value_is_zero() -> None:
    def f(a: Any) -> Any:
        prims.check_values(prims.gt(a, 0.0), "a must be positive")
        return prims.mul(a, a)

    run = transform_for_execution(trace_function(f, torch.tensor(2.0))).python_callable()
    torch.testing.assert_close(run(torch.tensor(3.0)), torch.tensor(9.0))
    with pytest.raises(RuntimeError, match="a must be positive"):
        run(torch.tensor(-1.0))


def test_every_prim_is_claimed_by_the_torch_executor() -> None:
    assert unclaimed_prims() == []
    for name, sym in prims.ALL_PRIMS.items():
        if OpTag.PROLOGUE in sym.tags or OpTag.RETURN in sym.tags:
            continue
        assert sym in torch_executor.implementations, name


def test_copy_writes_into_its_destination() -> None:
    src, dst = randn(2, 3), torch.zeros(2, 3)
    trace = trace_function(lambda s, d: prims.copy_(s, d), src, dst)
    out = transform_for_execution(trace).python_callable()(src, dst)
    assert out is dst
    torch.testing.assert_close(dst, src)


@pytest.mark.parametrize("prim", ["uniform", "normal"])
def test_random_prims(prim: str) -> None:
    sym = prims.ALL_PRIMS[prim]
    unseeded = transform_for_execution(
        trace_function(lambda: sym((1000,), 0.0, 1.0, device=cpu, dtype=dtypes.float32))
    ).python_callable()
    torch.manual_seed(3)
    first = unseeded()
    torch.manual_seed(3)
    # The ambient generator: same seed, same draw as eager torch.
    assert torch.equal(unseeded(), first)
    eager = torch.empty(1000)
    torch.manual_seed(3)
    eager = eager.uniform_(0.0, 1.0) if prim == "uniform" else eager.normal_(0.0, 1.0)
    assert torch.equal(first, eager)
    if prim == "uniform":
        assert 0.0 <= first.min() and first.max() < 1.0
    seeded = transform_for_execution(
        trace_function(
            lambda: (
                sym((100,), 0.0, 1.0, device=cpu, dtype=dtypes.float32, seed=7, offset=0),
                sym((100,), 0.0, 1.0, device=cpu, dtype=dtypes.float32, seed=7, offset=1),
            )
        )
    ).python_callable()
    a0, a1 = seeded()
    b0, b1 = seeded()
    assert torch.equal(a0, b0) and torch.equal(a1, b1)  # a pure function of (seed, offset)
    assert not torch.equal(a0, a1)


def test_random_prims_bernoulli_and_randint_draw_as_eager() -> None:
    program = transform_for_execution(
        trace_function(
            lambda: (
                prims.bernoulli((1000,), 0.3, device=cpu, dtype=dtypes.float32),
                prims.randint((1000,), -3, 9, device=cpu, dtype=dtypes.int64),
            )
        )
    ).python_callable()
    torch.manual_seed(5)
    got = program()
    torch.manual_seed(5)
    want = (torch.empty(1000).bernoulli_(0.3), torch.randint(-3, 9, (1000,)))
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_number_prims_compute_with_python() -> None:
    from thunder_ir import IntegerProxy, Trace
    from thunder_ir.tracectx import tracectx

    trace = Trace()
    with tracectx(trace):
        n = IntegerProxy("n", value=7)
        trace.args = (n,)
        m = prims.mul(prims.add(n, 3), 2)
        q = prims.floor_divide(m, 3)
        f = prims.convert_element_type(q, dtypes.float32)
        prims.python_return((m, q, f))
    extrace = transform_for_execution(trace)
    assert "operator.add(n, 3)" in extrace.python()
    assert extrace.python_callable()(5) == (16, 5, 5.0)


def test_execution_trace_prints_torch_calls() -> None:
    a, b = randn(2, 3), randn(3)
    trace = trace_function(lambda a, b: prims.add(a, prims.broadcast_in_dim(b, (2, 3), (1,))), a, b)
    text = transform_for_execution(trace).python()
    # The expand is torch's own broadcasting: add reads b itself (see peephole.py).
    assert "broadcast_in_dim" not in text
    assert 'torch.add(t0, t1)  # t3: "cpu f32[2, 3]"' in text
    trace = trace_function(lambda a: prims.broadcast_in_dim(a, (2, 3), (1,)), b)
    text = transform_for_execution(trace).python()
    # Alone, it prints as the torch view calls it runs (no helper call per op).
    assert 't1 = t0.reshape((1, 3)).expand((2, 3))  # t1: "cpu f32[2, 3]"' in text


def test_dtype_and_device_arguments_are_converted_once() -> None:
    trace = trace_function(lambda: prims.full((2,), 1, device=cpu, dtype=dtypes.int32))
    extrace = transform_for_execution(trace)
    assert "torch.full((2,), 1, device=torch.device('cpu'), dtype=torch.int32)" in extrace.python()


def test_intermediates_are_deleted_after_their_last_use() -> None:
    from thunder_ir import check_trace

    a = randn(3)
    trace = trace_function(lambda a: (prims.exp(prims.sin(prims.neg(a))), prims.cos(a)), a)
    extrace = transform_for_execution(trace)
    check_trace(extrace, rerun_meta=False)
    lines = [line.strip() for line in extrace.python().splitlines()]
    assert lines.index("del t1") == lines.index(next(x for x in lines if x.startswith("t2 = "))) + 1
    assert "del t2" in lines
    assert not any(
        line.startswith("del") and ("t0" in line or "t3" in line or "t4" in line) for line in lines
    )
    got = extrace.python_callable()(a)
    torch.testing.assert_close(got, (a.neg().sin().exp(), a.cos()))


_SPECIAL = [0.0, -0.0, 1.0, -1.0, 1e-6, 1e-45, 3.4e38, -3.4e38, float("inf"), float("nan"), 0.5]


@settings(max_examples=200, deadline=None)
@given(
    prim=st.sampled_from(["add", "sub", "mul"]),
    dtype=st.sampled_from([torch.float32, torch.float64, torch.int64]),
    number=st.one_of(
        st.floats(allow_nan=False, allow_infinity=False, width=64),
        st.sampled_from([0.0, -0.0, 1.0, 1e-6, 0.5, -2.5, 1e300]),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
    ),
    number_first=st.booleans(),
)
def test_a_number_operand_made_once_gives_torchs_bits(
    prim: str, dtype: torch.dtype, number: Any, number_first: bool
) -> None:
    """A CPU op with a Python number runs with the number as a 0-dim tensor made once (see
    torch_executor._scalar_operand): bit for bit what torch computes from the number, special
    values and rounding to float32 included."""
    if dtype == torch.int64:
        if type(number) is float:
            number = int(number) if math.isfinite(number) and abs(number) < 2**62 else 3
        a = torch.tensor([0, 1, -7, 2**62, -(2**63), 2**63 - 1], dtype=dtype)
    else:
        a = torch.tensor([*_SPECIAL, -_SPECIAL[5], 2.0**-130], dtype=dtype)
    op = getattr(prims, prim)
    fn = (lambda a: op(number, a)) if number_first else (lambda a: op(a, number))
    trace = trace_function(fn, a)
    extrace = transform_for_execution(trace)
    got = extrace.python_callable()(a)
    expected = getattr(torch, prim)(number, a) if number_first else getattr(torch, prim)(a, number)
    assert got.dtype == expected.dtype
    bits = torch.int64 if dtype != torch.float32 else torch.int32
    same = got.view(bits) == expected.view(bits)
    both_nan = got.isnan() & expected.isnan() if dtype.is_floating_point else same
    assert bool((same | both_nan).all()), (number, got, expected, extrace.python())


def test_number_operands_of_cpu_ops_are_made_once() -> None:
    a = randn(2, 3)
    trace = trace_function(lambda a: prims.mul(prims.add(a, 1e-6), 2), a)
    text = transform_for_execution(trace).python()
    assert "torch.add(t0, _f32_1em06)" in text and "torch.mul(t1, _f32_2)" in text, text
