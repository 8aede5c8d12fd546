"""Composite ops spelled out in elementary ones (GELU as eight calls) are recorded as the op:
values and gradients stay eager's, and nothing is rewritten that another op, the caller or an
in-place write could tell apart."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import thunder
from thunder_executors import transform_for_execution
from thunder_ir import check_trace, trace_function
from thunder_ir import ops as ltorch
from thunder_transforms import recognize_composites

_K = math.sqrt(2.0 / math.pi)


def _activation_ops(fn: Any, trace_index: int | None = None) -> list[str]:
    """The activation ops recorded in the last compilation's traces (or in one of them)."""
    traces = thunder.last_traces(fn)
    traces = traces if trace_index is None else [traces[trace_index]]
    return [b.sym.name for t in traces for b in t.bound_symbols if b.sym.name in ("gelu", "silu")]


def new_gelu(x: torch.Tensor) -> torch.Tensor:  # transformers' NewGELUActivation
    return 0.5 * x * (1.0 + torch.tanh(_K * (x + 0.044715 * torch.pow(x, 3.0))))


def gelu_python(x: torch.Tensor) -> torch.Tensor:  # the erf form
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_grouped_otherwise(x: torch.Tensor) -> torch.Tensor:
    inner = (x * x * x).mul(0.044715).add(x)
    return 0.5 * (x * (torch.tanh(inner * _K) + 1.0))


def swish(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x) * x


@pytest.mark.parametrize("fn", [new_gelu, gelu_python, gelu_grouped_otherwise, swish])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_spelled_out_activation_runs_as_one_op_with_eager_values_and_gradients(
    fn: Any, dtype: torch.dtype
) -> None:
    def program(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return fn(x @ w) * 2

    jitted = thunder.jit(program)
    for _ in range(2):
        x = torch.randn(4, 6, dtype=dtype, requires_grad=True)
        w = torch.randn(6, 5, dtype=dtype, requires_grad=True)
        g = torch.randn(4, 5, dtype=dtype)
        got = jitted(x, w)
        (gx, gw) = torch.autograd.grad(got, (x, w), g)
        want = program(x, w)
        (ex, ew) = torch.autograd.grad(want, (x, w), g)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(gx, ex)
        torch.testing.assert_close(gw, ew)
    assert _activation_ops(jitted), thunder.last_traces(jitted)[-1]
    with torch.no_grad():
        x = torch.randn(3, 6, dtype=dtype)
        w = torch.randn(6, 5, dtype=dtype)
        torch.testing.assert_close(jitted(x, w), program(x, w))
    assert _activation_ops(jitted, -1)  # what runs: one torch call


def _not_rewritten(program: Any, *args: torch.Tensor) -> None:
    jitted = thunder.jit(program)
    got, want = jitted(*args), program(*[a.clone() for a in args])
    torch.testing.assert_close(got, want)
    assert not _activation_ops(jitted), thunder.last_traces(jitted)[-1]


def test_a_truncated_constant_is_another_function_and_stays_as_written() -> None:
    def bloom_like(x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.tanh(0.79788456 * (x + 0.044715 * torch.pow(x, 3.0))))

    _not_rewritten(bloom_like, torch.randn(8))


def test_an_intermediate_read_elsewhere_or_returned_keeps_the_ops() -> None:
    def also_read(x: torch.Tensor) -> torch.Tensor:
        t = torch.tanh(_K * (x + 0.044715 * torch.pow(x, 3.0)))
        return 0.5 * x * (1.0 + t) + t

    def returned(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        half = 0.5 * x
        return half * (1.0 + torch.erf(x / math.sqrt(2.0))), half

    _not_rewritten(also_read, torch.randn(8))
    _not_rewritten(returned, torch.randn(8))


def test_an_in_place_write_between_the_ops_keeps_them() -> None:
    def written_between(x: torch.Tensor) -> torch.Tensor:
        y = x * 1.0
        half = 0.5 * y
        y.add_(1.0)  # the erf below reads the new values
        return half * (1.0 + torch.erf(y / math.sqrt(2.0)))

    _not_rewritten(written_between, torch.randn(8))


def test_an_integer_operand_is_not_a_gelu_operand() -> None:
    def ints(x: torch.Tensor) -> torch.Tensor:
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))

    _not_rewritten(ints, torch.randint(-3, 4, (8,)))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_in_lower_precision_the_spelled_out_form_keeps_eagers_rounding(dtype: torch.dtype) -> None:
    """Eager rounds after each of the eight ops, the op's kernel once: in bfloat16 that moves
    results by units in the last place, amplified where ``1 + tanh`` cancels. The program keeps
    the ops eager runs, and its values are eager's bit for bit."""
    jitted = thunder.jit(new_gelu)
    for _ in range(20):
        x = torch.randn(64, dtype=dtype) * 3
        assert torch.equal(jitted(x), new_gelu(x))
    assert not _activation_ops(jitted)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # a float32 input cast down by a matmul
        w = torch.randn(8, 8)
        f = thunder.jit(lambda a: new_gelu(a @ w))
        a = torch.randn(4, 8)
        assert torch.equal(f(a), new_gelu(a @ w))
        assert not _activation_ops(f)


# -- the pass on its own: any spelling of the formula, exact constants or not -----------------

_SPELLINGS = st.fixed_dictionaries(
    {
        "half_first": st.booleans(),  # (0.5 * x) * f or x * (f * 0.5)
        "cube_as_pow": st.booleans(),
        "swap_add": st.booleans(),
        "swap_mul": st.booleans(),
        "kappa": st.sampled_from([0.044715, 0.0447]),
        "k": st.sampled_from([_K, 0.7978845608]),
    }
)


def _spelled(s: dict[str, Any]) -> Any:
    def mul(a: Any, b: Any) -> Any:
        return ltorch.mul(b, a) if s["swap_mul"] else ltorch.mul(a, b)

    def add(a: Any, b: Any) -> Any:
        return ltorch.add(b, a) if s["swap_add"] else ltorch.add(a, b)

    def fn(x: Any) -> Any:
        cube = ltorch.pow(x, 3.0) if s["cube_as_pow"] else mul(mul(x, x), x)
        inner = add(1.0, ltorch.tanh(mul(s["k"], add(x, mul(s["kappa"], cube)))))
        return mul(mul(0.5, x), inner) if s["half_first"] else mul(x, mul(inner, 0.5))

    return fn


@settings(max_examples=30, deadline=None)
@given(_SPELLINGS, st.integers(0, 2**16))
def test_every_spelling_with_the_exact_constants_and_only_those_is_recognized(
    spelling: dict[str, Any], seed: int
) -> None:
    fn = _spelled(spelling)
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(seed))
    trace = trace_function(fn, x)
    rewritten = recognize_composites(trace)
    check_trace(rewritten)
    exact = spelling["kappa"] == 0.044715 and spelling["k"] == _K
    names = [b.sym.name for b in rewritten.bound_symbols]
    assert ("gelu" in names) == exact, names
    if exact:
        assert "tanh" not in names and "pow" not in names
    got = transform_for_execution(rewritten).python_callable()(x)
    torch.testing.assert_close(got, transform_for_execution(trace).python_callable()(x))
    if exact:
        torch.testing.assert_close(got, torch.nn.functional.gelu(x, approximate="tanh"))


# -- RMSNorm ------------------------------------------------------------------------------------


def _rms_norm_ops(fn: Any) -> int:
    """How many ``rms_norm`` calls run in the last compilation's program."""
    return sum(b.sym.name == "rms_norm" for b in thunder.last_traces(fn)[-1].bound_symbols)


def llama_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    h = x.to(torch.float32)
    variance = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(variance + eps)
    return w * h.to(x.dtype)


def gemma_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    def norm(h: torch.Tensor) -> torch.Tensor:
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)

    return (norm(x.float()) * (1.0 + w.float())).type_as(x)


def t5_layer_norm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    return w * (x * torch.rsqrt(variance + eps))


def squared_by_hand(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return (x * torch.rsqrt(torch.mean(x * x, dim=[-1], keepdim=True) + eps)) * w


def unweighted(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(x.ndim - 1, keepdim=True) + eps) + w


@pytest.mark.parametrize(
    "norm", [llama_rms_norm, gemma_rms_norm, t5_layer_norm, squared_by_hand, unweighted]
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_spelled_out_rms_norm_runs_as_one_op_with_eager_values_and_gradients(
    norm: Any, dtype: torch.dtype
) -> None:
    """Values bit for bit; gradients to rounding (torch.rms_norm's gradient is computed in
    another order than eager's through the spelled-out ops), in the dtype the norm computes in:
    Llama's, Gemma's and T5's compute in float32 whatever the input."""
    in_float32 = (llama_rms_norm, gemma_rms_norm, t5_layer_norm)
    computes_in = torch.float32 if norm in in_float32 else dtype
    tol = 1e-5 if computes_in == torch.float32 else 1e-12

    def program(x: torch.Tensor, w: torch.Tensor, lin: torch.Tensor) -> torch.Tensor:
        return norm(x @ lin, w) * 2

    jitted = thunder.jit(program)
    for shape in ((2, 5, 6), (3, 6), (2, 5, 6)):
        x = torch.randn(*shape, dtype=dtype) * 10.0 ** torch.randint(-3, 4, ()).item()
        x.requires_grad_()
        w = torch.randn(6, dtype=dtype, requires_grad=True)
        lin = torch.randn(6, 6, dtype=dtype, requires_grad=True)
        g = torch.randn(*shape, dtype=dtype)
        got = jitted(x, w, lin)
        grads = torch.autograd.grad(got, (x, w, lin), g)
        want = program(x, w, lin)
        expected = torch.autograd.grad(want, (x, w, lin), g)
        torch.testing.assert_close(got, want, rtol=tol, atol=tol * want.abs().max().item())
        for a, e in zip(grads, expected, strict=True):
            torch.testing.assert_close(a, e, rtol=tol, atol=tol * e.abs().max().item())
        with torch.no_grad():
            got = jitted(x, w, lin)
            # On the CPU torch.rms_norm runs the spelled-out ops, in the same order.
            assert torch.equal(got, program(x, w, lin))
        # T5 squares a float32 copy of a float64 x: another function, kept as written
        recognized = not (norm is t5_layer_norm and dtype == torch.float64)
        assert _rms_norm_ops(jitted) == recognized, thunder.last_traces(jitted)[-1]


def test_what_rms_norm_does_not_compute_keeps_the_ops() -> None:
    x = torch.randn(4, 6)

    def other_dim(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return w * (x * torch.rsqrt(x.pow(2).mean(0, keepdim=True) + 1e-6))

    def cube(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return w * (x * torch.rsqrt(x.pow(3).mean(-1, keepdim=True) + 1e-6))

    def variance_returned(x: torch.Tensor, w: torch.Tensor) -> Any:
        variance = x.pow(2).mean(-1, keepdim=True)
        return w * (x * torch.rsqrt(variance + 1e-6)), variance

    def other_operand(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        y = x + 1
        return w * (y * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))

    for fn, w in (
        (other_dim, torch.randn(6)),
        (cube, torch.randn(6)),
        (variance_returned, torch.randn(6)),
        (other_operand, torch.randn(6)),
        (llama_rms_norm, torch.randn(4, 6)),  # a weight per element: torch.rms_norm takes none
    ):
        jitted = thunder.jit(fn)
        with torch.no_grad():
            got = jitted(x, w)
        torch.testing.assert_close(got, fn(x, w), equal_nan=True)
        names = [b.sym.name for b in thunder.last_traces(jitted)[-1].bound_symbols]
        if fn is llama_rms_norm:  # the normalization alone is recognized, the product stays
            assert names.count("rms_norm") == 1 and "mul" in names, names
            continue
        assert "rms_norm" not in names, (fn.__name__, names)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_an_rms_norm_in_lower_precision_keeps_eagers_rounding(dtype: torch.dtype) -> None:
    jitted = thunder.jit(llama_rms_norm)
    for _ in range(5):
        x, w = torch.randn(3, 64, dtype=dtype), torch.randn(64, dtype=dtype)
        with torch.no_grad():
            assert torch.equal(jitted(x, w), llama_rms_norm(x, w))
