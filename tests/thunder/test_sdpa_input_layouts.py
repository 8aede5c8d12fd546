"""scaled_dot_product_attention on inputs whose last dimension is not dense (tokens taken from a
channels-first map, every other channel, a transposed bf16 query): eager's values and gradients.
torch's CPU flash kernel reads rows as dense; the call recorded as ``sdpa_flash`` gave numbers
off by 2-4 (and reads of other memory under symbolic sizes)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder

CACHES = ["constant values", "symbolic values"]


def _tokens_of_a_map(x: torch.Tensor) -> torch.Tensor:
    t = x.transpose(1, 2).unsqueeze(1)  # [B, 1, N, C], stride(-1) = N
    return F.scaled_dot_product_attention(t, t, t)


def _strided_value(x: torch.Tensor) -> torch.Tensor:
    q = x.unsqueeze(1)
    v = torch.cat([q, q], -1)[..., ::2]
    return F.scaled_dot_product_attention(q, q, v, is_causal=True)


PROGRAMS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tokens of a map": _tokens_of_a_map,
    "strided value": _strided_value,
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sdpa_on_inputs_with_a_strided_last_dimension(
    name: str, cache: str, dtype: torch.dtype
) -> None:
    fn = PROGRAMS[name]
    jf = thunder.jit(fn, cache=cache)
    for n in (6, 7, 9):
        x = torch.randn(2, n, 8, dtype=dtype, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        shape_input = x.transpose(1, 2) if name == "tokens of a map" else x
        shape_input2 = x2.transpose(1, 2) if name == "tokens of a map" else x2
        expected, got = fn(shape_input2), jf(shape_input)
        torch.testing.assert_close(got, expected)
        cot = torch.randn_like(expected)
        (ge,) = torch.autograd.grad(expected, x2, cot)
        (gt,) = torch.autograd.grad(got, x, cot)
        torch.testing.assert_close(gt, ge)


def test_sdpa_with_a_transposed_bf16_query() -> None:
    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q.transpose(-1, -2), k, v)

    jf = thunder.jit(fn)
    for _ in range(3):
        args = [torch.randn(2, 3, 5, 8, dtype=torch.bfloat16) for _ in range(3)]
        args[0] = args[0].transpose(-1, -2).contiguous()  # so fn's transpose makes stride(-1) != 1
        leaves = [a.requires_grad_() for a in args]
        leaves2 = [a.detach().clone().requires_grad_() for a in args]
        expected, got = fn(*leaves2), jf(*leaves)
        torch.testing.assert_close(got, expected, atol=2e-2, rtol=2e-2)
        cot = torch.randn_like(expected)
        for a, b in zip(
            torch.autograd.grad(got, leaves, cot), torch.autograd.grad(expected, leaves2, cot)
        ):
            torch.testing.assert_close(a, b, atol=5e-2, rtol=5e-2)
