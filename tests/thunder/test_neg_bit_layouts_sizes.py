"""Tensors whose values are not what their storage holds, and sizes given as tensors; against
eager on fresh random inputs over several calls:

- a real tensor with torch's negative bit (``z.conj().imag``), passed in or made in the program,
  entering an inductor-compiled fusion region (with and without dynamo, in the background) or a
  triton kernel: computed with its values, not its storage's (forward and backward);
- calls whose result is sparse, mkldnn or quantized: run by torch (split, or eagerly for a
  quantized one), never traced as a dense float tensor;
- a 0-d integer tensor as a size or diagonal of shape ops (``y.expand(n, 6)``);
- scaled_dot_product_attention with empty sequences or heads (eager's zeros and gradients).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder.errors import InternalErrorWarning
from thunder_executors import background_compile

CACHES = [None, "symbolic values"]


def _inductor(fn: Callable[..., Any], cache: str | None = None) -> Any:
    """thunder.compile's fusion, compiled on the first call (synchronous)."""
    options = {"cache": cache} if cache else {}
    return thunder.jit(fn, executors=["torchcompile", *thunder.DEFAULT_EXECUTORS], **options)


def _negated(n: int) -> torch.Tensor:
    """A float32 tensor with the negative bit: its values are minus its storage's."""
    t = torch.randn(n, dtype=torch.complex64).conj().imag
    assert t.is_neg()
    return t


def _no_internal_errors(caught: list[warnings.WarningMessage]) -> None:
    bad = [
        str(w.message)
        for w in caught
        if issubclass(w.category, InternalErrorWarning) or "please report" in str(w.message)
    ]
    assert not bad, bad


# Negative bit: fusion regions ---------------------------------------------------------------


def _scale_exp_of_imag_conj(z: torch.Tensor) -> torch.Tensor:
    return (z.conj().imag * 2).exp()


def _scale_exp(x: torch.Tensor) -> torch.Tensor:
    return (x * 2).exp()


@pytest.mark.parametrize("cache", CACHES)
def test_negated_tensor_made_in_program_enters_inductor_region(cache: str | None) -> None:
    jf = _inductor(_scale_exp_of_imag_conj, cache)
    for n in (4, 4, 6, 4):
        z = torch.randn(n, dtype=torch.complex64)
        torch.testing.assert_close(jf(z), _scale_exp_of_imag_conj(z))


@pytest.mark.parametrize("cache", CACHES)
def test_negated_input_enters_inductor_region(cache: str | None) -> None:
    jf = _inductor(_scale_exp, cache)
    for n in (4, 4, 6, 4):
        x = _negated(n)
        torch.testing.assert_close(jf(x), _scale_exp(x))


def test_negated_and_plain_inputs_alternate_in_one_region() -> None:
    """The compiled region's guards, built from a plain tensor, see a negated one (and the other
    way round): each call computes with its own input's values."""
    for first_negated in (False, True):
        jf = _inductor(lambda x: (x * 3).sin() + 1)
        for negated in (first_negated, not first_negated, first_negated, not first_negated):
            x = _negated(5) if negated else torch.randn(5)
            torch.testing.assert_close(jf(x), (x * 3).sin() + 1)


def test_negated_tensor_in_background_compiled_region() -> None:
    """thunder.compile: the region's torch calls until compiled, then the compiled program."""
    jz = thunder.compile(_scale_exp_of_imag_conj)
    jx = thunder.compile(_scale_exp)
    for _ in range(3):
        z = torch.randn(4, dtype=torch.complex64)
        x = _negated(4)
        torch.testing.assert_close(jz(z), _scale_exp_of_imag_conj(z))
        torch.testing.assert_close(jx(x), _scale_exp(x))
        background_compile.wait_for_background_compiles()
        torch.testing.assert_close(jz(z), _scale_exp_of_imag_conj(z))
        torch.testing.assert_close(jx(x), _scale_exp(x))


@pytest.mark.parametrize("made_in_program", [False, True])
@pytest.mark.parametrize("cache", CACHES)
def test_negated_tensor_in_region_gradients(made_in_program: bool, cache: str | None) -> None:
    if made_in_program:

        def fn(z: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return (z.conj().imag * w).sin()

        def make(n: int) -> torch.Tensor:
            return torch.randn(n, dtype=torch.complex64)
    else:

        def fn(z: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return (z * w).sin()

        make = _negated
    jf = _inductor(fn, cache)
    for n in (4, 4, 6):
        z, w = make(n), torch.randn(n)
        w1, w2 = w.clone().requires_grad_(), w.clone().requires_grad_()
        expected, out = fn(z, w1), jf(z, w2)
        torch.testing.assert_close(out, expected)
        g = torch.randn(n)
        torch.testing.assert_close(
            torch.autograd.grad(out, w2, g)[0], torch.autograd.grad(expected, w1, g)[0]
        )


def test_negated_cotangent_enters_backward_region() -> None:
    """A cotangent with the negative bit reaches the backward's fused region as an input."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return (x * 2).tanh() * x

    jf = _inductor(fn)
    for _ in range(3):
        x = torch.randn(5)
        x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
        g = _negated(5)
        torch.testing.assert_close(
            torch.autograd.grad(jf(x2), x2, g)[0], torch.autograd.grad(fn(x1), x1, g)[0]
        )


@pytest.mark.parametrize(
    "name",
    ["imag_mul", "imag_sum", "imag_cat", "imag_relu", "imag_expand", "conj_mul", "conj_clone"],
)
def test_conjugate_and_negative_views_in_fused_programs(name: str) -> None:
    fns: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
        "imag_mul": lambda z: z.conj().imag * 1,
        "imag_sum": lambda z: z.conj().imag.sum(),
        "imag_cat": lambda z: torch.cat([z.conj().imag, z.real]) * 1,
        "imag_relu": lambda z: z.conj().imag.relu() * 2,
        "imag_expand": lambda z: z.conj().imag.expand(2, 4) * 1,
        "conj_mul": lambda z: z.conj() * 1,
        "conj_clone": lambda z: z.conj().clone(),
    }
    fn = fns[name]
    jf = _inductor(fn)
    for _ in range(3):
        z = torch.randn(4, dtype=torch.complex64)
        out, expected = jf(z), fn(z)
        assert out.is_conj() == expected.is_conj()
        torch.testing.assert_close(out.resolve_conj(), expected.resolve_conj())


def test_compile_direct_resolves_negated_inputs() -> None:
    """Inductor's program without dynamo: built from a negated example, and run on negated and
    plain inputs after one built from a plain example."""
    from thunder_executors.inductor_direct import compile_direct

    def region(x: torch.Tensor) -> tuple[torch.Tensor]:
        return ((x * 2).exp(),)

    for example in (_negated(4), torch.randn(4)):
        program = compile_direct(region, [example], region)
        assert program is not None
        for x in (_negated(4), torch.randn(4), _negated(4)):
            torch.testing.assert_close(program(x)[0], region(x)[0])


def test_triton_kernels_read_negated_inputs() -> None:
    from thunder_executors.triton_executor import interpreted, triton_executor

    if not triton_executor.is_available():
        pytest.skip(f"triton executor unavailable: {triton_executor.availability()[1]}")
    from thunder_executors import triton_kernels as K

    device = "cpu" if interpreted() else "cuda"
    for _ in range(2):
        x = _negated(12).to(device).view(3, 4)
        assert x.is_neg()
        torch.testing.assert_close(K.softmax(x, -1), torch.softmax(x, -1))
        target = torch.tensor([0, 3, 1], device=device)
        torch.testing.assert_close(K.cross_entropy(x, target), F.cross_entropy(x, target))


# Results that are not dense tensors -----------------------------------------------------------


def _dense(x: Any) -> Any:
    return x.to_dense() if isinstance(x, torch.Tensor) and x.layout != torch.strided else x


def _layout_branch(x: torch.Tensor) -> Any:
    s = x.to_sparse()
    return s.is_sparse, s.layout, (s.to_dense() if s.layout != torch.strided else s) * 1


_SPARSE_PROGRAMS: dict[str, Callable[[torch.Tensor], Any]] = {
    "layout_branch": _layout_branch,
    "dense_plus_sparse": lambda x: x + x.to_sparse(),
    "dense_minus_sparse": lambda x: x - x.to_sparse(),
    "sparse_times_sparse": lambda x: x.to_sparse() * x.to_sparse(),
    "sparse_norm": lambda x: x.to_sparse().norm(),
    "dense_plus_csr": lambda x: x + x.to_sparse_csr(),
    "csr_layout": lambda x: (x.to_sparse_csr().layout, x.to_sparse_csr().is_sparse_csr),
    "sparse_coo_tensor": lambda x: (
        torch.sparse_coo_tensor(torch.tensor([[0, 2]]), x[0, :2], (4,)).to_dense() * 2
    ),
    "sparse_mm": lambda x: torch.sparse.mm(x.to_sparse(), x.t()) + 1,
    "mkldnn": lambda x: (x.to_mkldnn().is_mkldnn, x.to_mkldnn().to_dense() * 2),
}


@pytest.mark.parametrize("name", sorted(_SPARSE_PROGRAMS))
def test_sparse_and_mkldnn_results_run_by_torch(name: str) -> None:
    fn = _SPARSE_PROGRAMS[name]
    jf = thunder.jit(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(3, 3).relu()
            expected, out = fn(x), jf(x)
            expected = expected if isinstance(expected, tuple) else (expected,)
            out = out if isinstance(out, tuple) else (out,)
            assert len(out) == len(expected)
            for e, t in zip(expected, out):
                if isinstance(e, torch.Tensor):
                    assert t.layout == e.layout
                    torch.testing.assert_close(_dense(t), _dense(e))
                else:
                    assert t == e
    _no_internal_errors(caught)
    # Visibly run by torch: a warning names what thunder could not hold.
    assert any("not dense" in str(w.message) for w in caught), [str(w.message) for w in caught]


_QUANTIZED_PROGRAMS: dict[str, Callable[[torch.Tensor], Any]] = {
    "flags": lambda x: (
        (q := torch.quantize_per_tensor(x, 0.1, 0, torch.quint8)).is_quantized,
        q.dtype,
        q.q_scale(),
    ),
    "dequantize": lambda x: torch.quantize_per_tensor(x, 0.1, 3, torch.quint8).dequantize() * 2,
    "int_repr": lambda x: torch.quantize_per_tensor(x, 0.1, 3, torch.quint8).int_repr() + 1,
    "per_channel": lambda x: torch.quantize_per_channel(
        x, torch.tensor([0.1, 0.2, 0.3]), torch.tensor([0, 1, 2]), 0, torch.qint8
    ).dequantize(),
}


@pytest.mark.parametrize("name", sorted(_QUANTIZED_PROGRAMS))
def test_quantized_results_run_eagerly(name: str) -> None:
    fn = _QUANTIZED_PROGRAMS[name]
    jf = thunder.jit(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(3, 4)
            expected, out = fn(x), jf(x)
            if isinstance(expected, tuple):
                assert out == expected
            else:
                assert out.dtype == expected.dtype
                torch.testing.assert_close(out, expected)
    _no_internal_errors(caught)
    assert any("quantized" in str(w.message) for w in caught), [str(w.message) for w in caught]


# A 0-d integer tensor as a size ---------------------------------------------------------------


_SIZE_TENSOR_PROGRAMS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "repeat": lambda n, y: y.repeat(n),
    "repeat_pair": lambda n, y: y.repeat(n, 2),
    "repeat_tuple": lambda n, y: y.repeat((n, 1)),
    "expand": lambda n, y: y.expand(n, 6),
    "expand_list": lambda n, y: y.expand([n, 6]),
    "expand_keep": lambda n, y: y.view(1, 6).expand(n, -1),
    "broadcast_to": lambda n, y: y.broadcast_to((n, 6)),
    "tile": lambda n, y: y.tile(n),
    "tile_tuple": lambda n, y: y.tile((n, 2)),
    "tril": lambda n, y: y.view(2, 3).tril(n),
    "torch_tril": lambda n, y: torch.tril(y.view(2, 3), n),
    "triu": lambda n, y: y.view(2, 3).triu(n),
    "view": lambda n, y: y.view(n * 0 + 2, 3),
    "narrow": lambda n, y: y.narrow(0, n, 2),
    "new_zeros": lambda n, y: y.new_zeros(n, 2),
    "roll": lambda n, y: y.roll(n),
    "zeros": lambda n, y: torch.zeros(n, 2) + y[:1],
}


@pytest.mark.parametrize("name", sorted(_SIZE_TENSOR_PROGRAMS))
@pytest.mark.parametrize("cache", CACHES)
def test_zero_dim_integer_tensor_as_size(name: str, cache: str | None) -> None:
    """As eager reads it (``__index__``); where tracing cannot read it, the call runs by torch
    with a warning saying so, never an internal error."""
    fn = _SIZE_TENSOR_PROGRAMS[name]
    jf = thunder.jit(fn, **({"cache": cache} if cache else {}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for c in (1, 2, 3, 1):
            n, y = torch.tensor(c), torch.randn(6)
            torch.testing.assert_close(jf(n, y), fn(n, y))
    _no_internal_errors(caught)


# Attention over empty sequences ---------------------------------------------------------------


_EMPTY_ATTENTION_SHAPES = [
    (2, 1, 3, 0, 4),  # no keys: eager's zeros
    (2, 1, 0, 3, 4),  # no queries
    (2, 1, 0, 0, 4),
    (0, 1, 3, 3, 4),  # no batch
    (2, 0, 3, 3, 4),  # no heads
    (2, 1, 3, 3, 0),  # empty head: scale 1/sqrt(0)
    (2, 1, 3, 0, 0),
]


def _mask(kind: str, lq: int, s: int, dtype: torch.dtype) -> torch.Tensor | None:
    if kind == "bool":
        return torch.rand(lq, s) > 0.3
    if kind == "float":
        return torch.randn(lq, s, dtype=dtype)
    return None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("kind", ["none", "causal", "bool", "float"])
@pytest.mark.parametrize("shape", _EMPTY_ATTENTION_SHAPES)
def test_attention_with_empty_sizes(shape: tuple[int, ...], kind: str, dtype: torch.dtype) -> None:
    b, h, lq, s, e = shape

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, m: Any) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=kind == "causal")

    jf = thunder.jit(fn)
    tol = {"atol": 1e-2, "rtol": 1e-2} if dtype is torch.bfloat16 else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            q = torch.randn(b, h, lq, e, dtype=dtype)
            k, v = torch.randn(b, h, s, e, dtype=dtype), torch.randn(b, h, s, e, dtype=dtype)
            m = _mask(kind, lq, s, dtype)
            ours = [t.clone().requires_grad_() for t in (q, k, v)]
            ref = [t.clone().requires_grad_() for t in (q, k, v)]
            out, expected = jf(*ours, m), fn(*ref, m)
            torch.testing.assert_close(out, expected, equal_nan=True, **tol)
            g = torch.randn_like(expected)
            for a, b_ in zip(
                torch.autograd.grad(out, ours, g), torch.autograd.grad(expected, ref, g)
            ):
                torch.testing.assert_close(a, b_, equal_nan=True, **tol)
    _no_internal_errors(caught)
    assert not [w for w in caught if "eager" in str(w.message)], [str(w.message) for w in caught]


@pytest.mark.parametrize("cache", CACHES)
def test_attention_key_length_changing_to_zero(cache: str | None) -> None:
    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v)

    jf = thunder.jit(fn, **({"cache": cache} if cache else {}))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for s in (3, 0, 5, 0, 3):
            q = torch.randn(2, 2, 4, 8, requires_grad=True)
            k, v = torch.randn(2, 2, s, 8), torch.randn(2, 2, s, 8)
            out, expected = jf(q, k, v), fn(q, k, v)
            torch.testing.assert_close(out, expected)
            g = torch.randn_like(expected)
            torch.testing.assert_close(
                torch.autograd.grad(out, q, g)[0], torch.autograd.grad(expected, q, g)[0]
            )
    _no_internal_errors(caught)
