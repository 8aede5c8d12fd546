"""Low-precision results like eager's, gradients included: addmm/baddbmm kept whole while
training (one rounding, eager's AddmmBackward), grouped-query attention through torch's CPU
flash kernels (key/value gradients summed over each group in float32), eager's math path of
scaled_dot_product_attention, and the reason of a call run eagerly at the recompile limit."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import thunder

F = torch.nn.functional
CACHES = ["constant values", "symbolic values"]


def _context(mode: str) -> Any:
    if mode == "bf16 autocast":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    if mode == "f16 autocast":
        return torch.autocast("cpu", dtype=torch.float16)
    return contextlib.nullcontext()


def _input_dtype(mode: str) -> torch.dtype:
    return {"bf16": torch.bfloat16, "f16": torch.float16}.get(mode, torch.float32)


def _assert_like_eager(
    fn: Callable[..., torch.Tensor],
    make_inputs: Callable[[], list[torch.Tensor]],
    mode: str,
    cache: str,
    calls: int = 3,
    grad_within_one_ulp: bool = False,
) -> None:
    """Values and gradients bitwise eager's (``grad_within_one_ulp``: gradients within one unit in
    the last place, where eager's softmax backward kernel sums in another order than thunder's
    float32 decomposition of it), compiled on every call."""
    jf = thunder.jit(fn, cache=cache)
    for _ in range(calls):
        inputs = make_inputs()
        with _context(mode):
            expected = fn(*inputs)
        with _context(mode):
            got = jf(*inputs)
        assert got.dtype == expected.dtype
        assert torch.equal(got, expected), (got.float() - expected.float()).abs().max()
        differentiable = [t for t in inputs if t.requires_grad]
        if not differentiable:
            continue
        cotangent = torch.randn_like(expected)
        ge = torch.autograd.grad(expected, differentiable, cotangent)
        gj = torch.autograd.grad(got, differentiable, cotangent)
        for a, b in zip(ge, gj):
            assert a.dtype == b.dtype and a.shape == b.shape
            if grad_within_one_ulp:
                ulp = torch.finfo(a.dtype).eps * torch.maximum(a.abs(), b.abs())
                assert ((a - b).abs() <= ulp + torch.finfo(a.dtype).tiny).all()
            else:
                assert torch.equal(a, b), (a.float() - b.float()).abs().max()
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0, stats.last_eager_reason
    assert getattr(stats, "split_calls", 0) == 0


def _maker(shapes: list[tuple[int, ...]], dtype: torch.dtype) -> Callable[[], list[torch.Tensor]]:
    return lambda: [torch.randn(s, dtype=dtype, requires_grad=True) for s in shapes]


ADDED_PRODUCTS: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]]]] = {
    "addmm": (lambda b, x, w: torch.addmm(b, x, w), [(64,), (40, 32), (32, 64)]),
    "addmm_beta_alpha": (
        lambda b, x, w: torch.addmm(b, x, w, beta=0.5, alpha=2.0),
        [(40, 64), (40, 32), (32, 64)],
    ),
    "addmm_beta_0.3_alpha_0.7": (
        lambda b, x, w: torch.addmm(b, x, w, beta=0.3, alpha=0.7),
        [(1, 64), (40, 32), (32, 64)],
    ),
    "addmm_beta_0": (lambda b, x, w: torch.addmm(b, x, w, beta=0), [(64,), (40, 32), (32, 64)]),
    "Tensor.addmm_transposed": (
        lambda b, x, w: b.addmm(x, w.t()),
        [(64,), (40, 32), (64, 32)],
    ),
    "conv1d_like_gpt2": (
        lambda b, x, w: torch.addmm(b, x.view(-1, x.shape[-1]), w).view(*x.shape[:-1], -1),
        [(64,), (4, 10, 32), (32, 64)],
    ),
    "baddbmm": (lambda b, x, w: torch.baddbmm(b, x, w), [(1, 64), (3, 40, 32), (3, 32, 64)]),
    "baddbmm_beta_alpha": (
        lambda b, x, w: torch.baddbmm(b, x, w, beta=2.0, alpha=0.5),
        [(3, 40, 64), (3, 40, 32), (3, 32, 64)],
    ),
    "addbmm": (lambda b, x, w: torch.addbmm(b, x, w), [(40, 64), (3, 40, 32), (3, 32, 64)]),
    "addmv": (lambda b, x, w: torch.addmv(b, x, w), [(40,), (40, 32), (32,)]),
    "addr": (lambda b, x, w: torch.addr(b, x, w), [(40, 32), (40,), (32,)]),
    "linear_2d": (lambda b, x, w: F.linear(x, w, b), [(64,), (40, 32), (64, 32)]),
    "linear_3d": (lambda b, x, w: F.linear(x, w, b), [(64,), (4, 10, 32), (64, 32)]),
    "linear_3d_noncontiguous": (
        lambda b, x, w: F.linear(x.transpose(0, 1), w, b),
        [(64,), (10, 4, 32), (64, 32)],
    ),
}


@pytest.mark.parametrize("mode", ["bf16 autocast", "f16 autocast", "bf16", "f16"])
@pytest.mark.parametrize("name", sorted(ADDED_PRODUCTS))
def test_added_products_like_eager_with_grad(name: str, mode: str) -> None:
    fn, shapes = ADDED_PRODUCTS[name]
    _assert_like_eager(fn, _maker(shapes, _input_dtype(mode)), mode, "constant values")


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", ["addmm", "addmm_beta_alpha", "baddbmm", "conv1d_like_gpt2"])
def test_added_products_under_autocast_both_caches(name: str, cache: str) -> None:
    fn, shapes = ADDED_PRODUCTS[name]
    _assert_like_eager(fn, _maker(shapes, torch.float32), "bf16 autocast", cache)


@pytest.mark.parametrize("cache", CACHES)
def test_addmm_numbers_passed_in(cache: str) -> None:
    def fn(b: torch.Tensor, x: torch.Tensor, w: torch.Tensor, beta: float, alpha: float) -> Any:
        return torch.addmm(b, x, w, beta=beta, alpha=alpha)

    jf = thunder.jit(fn, cache=cache)
    for beta, alpha in ((0.5, 2.0), (0.3, 0.7), (1.0, 1.0), (0.0, 1.5)):
        ins = [
            torch.randn(s, dtype=torch.bfloat16, requires_grad=True) for s in [(8,), (5, 4), (4, 8)]
        ]
        e, j = fn(*ins, beta, alpha), jf(*ins, beta, alpha)
        assert torch.equal(e, j)
        g = torch.randn_like(e)
        for a, b in zip(torch.autograd.grad(e, ins, g), torch.autograd.grad(j, ins, g)):
            assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float64])
def test_addmm_baddbmm_gradients_exact_dtypes(dtype: torch.dtype) -> None:
    def fn(b: Any, x: Any, w: Any, bb: Any, x3: Any, w3: Any) -> Any:
        return torch.addmm(b, x, w, beta=0.5, alpha=1.5), torch.baddbmm(bb, x3, w3, alpha=-2.0)

    jf = thunder.jit(fn)
    for _ in range(2):
        shapes = [(6,), (5, 4), (4, 6), (3, 1, 6), (3, 5, 4), (3, 4, 6)]
        ins = [torch.randn(s, dtype=dtype, requires_grad=True) for s in shapes]
        outs_e, outs_j = fn(*ins), jf(*ins)
        cts = [torch.randn_like(o) for o in outs_e]
        for o, p in zip(outs_e, outs_j):
            torch.testing.assert_close(o, p, rtol=1e-12, atol=1e-12)
        ge = torch.autograd.grad(outs_e, ins, cts)
        gj = torch.autograd.grad(outs_j, ins, cts)
        for a, b in zip(ge, gj):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_gpt2_like_block_training_step_under_bf16_autocast() -> None:
    class Conv1D(torch.nn.Module):  # as transformers' GPT-2 Conv1D
        def __init__(self, nf: int, nx: int) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(nx, nf) * 0.1)
            self.bias = torch.nn.Parameter(torch.randn(nf) * 0.1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            size_out = x.size()[:-1] + (self.weight.size(-1),)
            x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
            return x.view(size_out)

    torch.manual_seed(0)
    model = torch.nn.Sequential(Conv1D(64, 32), torch.nn.GELU(), Conv1D(32, 64))
    jmodel = thunder.jit(model)
    for _ in range(3):
        x = torch.randn(4, 10, 32)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            e = model(x)
            j = jmodel(x)
        assert torch.equal(e, j)
        ge = torch.autograd.grad(e.float().square().mean(), list(model.parameters()))
        gj = torch.autograd.grad(j.float().square().mean(), list(model.parameters()))
        for a, b in zip(ge, gj):
            assert torch.equal(a, b)
    assert thunder.compile_stats(jmodel).eager_fallbacks == 0


# Grouped-query attention ----------------------------------------------------------------------


def _sdpa(**kw: Any) -> Callable[..., torch.Tensor]:
    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, **kw)

    return fn


def _qkv(
    heads: tuple[int, int, int], dtype: torch.dtype, seq: int = 10
) -> Callable[[], list[torch.Tensor]]:
    def make() -> list[torch.Tensor]:
        return [torch.randn(2, h, seq, 8, dtype=dtype, requires_grad=True) for h in heads]

    return make


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("is_causal", [True, False])
@pytest.mark.parametrize("heads", [(4, 2, 2), (4, 1, 1), (4, 4, 4)])
def test_gqa_through_cpu_flash_like_eager(
    heads: tuple[int, int, int], is_causal: bool, dtype: torch.dtype, cache: str
) -> None:
    fn = _sdpa(is_causal=is_causal, enable_gqa=True)
    _assert_like_eager(fn, _qkv(heads, dtype), "", cache)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("heads", [(4, 2, 1), (6, 3, 2)])
def test_gqa_with_different_key_and_value_heads_like_eager(
    heads: tuple[int, int, int], dtype: torch.dtype
) -> None:
    # eager takes its math path: the heads repeated after the float32 upcast
    fn = _sdpa(is_causal=True, enable_gqa=True)
    _assert_like_eager(fn, _qkv(heads, dtype), "", CACHES[0], grad_within_one_ulp=True)


@pytest.mark.parametrize("scale", [None, 0.3, -0.3])
def test_gqa_with_a_float_mask_and_scale_like_eager(scale: Any) -> None:
    mask = torch.randn(10, 10)
    _assert_like_eager(
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask, scale=scale, enable_gqa=True),
        _qkv((4, 2, 2), torch.bfloat16),
        "",
        CACHES[0],
    )


@pytest.mark.parametrize("mode", ["bf16 autocast", "f16 autocast"])
def test_gqa_under_autocast_like_eager(mode: str) -> None:
    _assert_like_eager(
        _sdpa(is_causal=True, enable_gqa=True), _qkv((4, 2, 2), torch.float32), mode, CACHES[0]
    )


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("kw", [{"is_causal": True}, {}, {"scale": 0.3}, {"scale": -0.3}])
def test_math_path_attention_low_precision_like_eager(kw: dict[str, Any], cache: str) -> None:
    # 3-D inputs: eager's math path, q and k^T each scaled by the root of the scale
    def make() -> list[torch.Tensor]:
        return [torch.randn(4, 10, 8, dtype=torch.bfloat16, requires_grad=True) for _ in range(3)]

    _assert_like_eager(_sdpa(**kw), make, "", cache, grad_within_one_ulp=True)


def test_math_path_attention_float32_forward_like_eager() -> None:
    fn = _sdpa(is_causal=True)
    jf = thunder.jit(fn)
    for _ in range(3):
        q, k, v = (torch.randn(4, 10, 8, requires_grad=True) for _ in range(3))
        assert torch.equal(fn(q, k, v), jf(q, k, v))


# The reason of a call run eagerly -------------------------------------------------------------


def test_recompile_limit_sets_the_eager_reason() -> None:
    jf = thunder.jit(lambda x: x * 2, recompile_limit=1)
    jf(torch.randn(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = jf(torch.randn(2, 5, dtype=torch.float64))
    assert out.shape == (2, 5)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 1
    assert stats.last_eager_reason is not None and "recompile limit" in stats.last_eager_reason
