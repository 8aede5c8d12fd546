"""torch callables called with torch's own keyword names (``ones(size=...)``,
``ones_like(input=...)``, ``pow(x, exponent=2)``, ``sum(x, axis=1)``), compared with eager on
fresh random inputs. Every op names its parameters as its body reads best; a call by torch's
names is rebound by the torch callable's signature."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder


def _cases() -> dict[str, Callable[[torch.Tensor], Any]]:
    def y(x):
        return x.T[:, :2] * 0.5

    def idx(x):
        return (x.abs() * 10).long() % x.shape[1]

    return {
        "ones(size=)": lambda x: torch.ones(size=(2, x.shape[0])) + x[0, 0],
        "zeros(size=, dtype=)": lambda x: torch.zeros(size=[2, 3], dtype=torch.float64),
        "empty(size=).shape": lambda x: torch.empty(size=(2, 3)).shape,
        "full(size=, fill_value=)": lambda x: torch.full(size=(2, 3), fill_value=1.5),
        "rand(size=).shape": lambda x: torch.rand(size=(2, 3)).shape,
        "randn(size=).shape": lambda x: torch.randn(size=(2, 3)).shape,
        "randint(high=, size=).shape": lambda x: torch.randint(high=5, size=(2, 3)).shape,
        "randint(low=, high=, size=).shape": lambda x: (
            torch.randint(low=1, high=5, size=(4,)).shape
        ),
        "arange(end=)": lambda x: torch.arange(end=5),
        "x.new_ones(size=)": lambda x: x.new_ones(size=(2,)),
        "x.new_zeros(size=)": lambda x: x.new_zeros(size=(2, 2)),
        "x.new_empty(size=).shape": lambda x: x.new_empty(size=(2,)).shape,
        "ones_like(input=)": lambda x: torch.ones_like(input=x),
        "zeros_like(input=, dtype=)": lambda x: torch.zeros_like(input=x, dtype=torch.int64),
        "full_like(input=, fill_value=)": lambda x: torch.full_like(input=x, fill_value=2.0),
        "pow(x, exponent=)": lambda x: torch.pow(x, exponent=2),
        "pow(input=, exponent=)": lambda x: torch.pow(input=x, exponent=3),
        "mm(x, mat2=)": lambda x: torch.mm(x, mat2=y(x)),
        "mm(input=, mat2=)": lambda x: torch.mm(input=x, mat2=y(x)),
        "matmul(input=, other=)": lambda x: torch.matmul(input=x, other=y(x)),
        "bmm(input=, mat2=)": lambda x: torch.bmm(input=x[None], mat2=y(x)[None]),
        "addmm(input=, mat1=, mat2=, beta=, alpha=)": lambda x: torch.addmm(
            input=torch.ones(x.shape[0], 2), mat1=x, mat2=y(x), beta=0.5, alpha=2
        ),
        "where(condition=, input=, other=)": lambda x: torch.where(
            condition=x > 0, input=x, other=-x
        ),
        "clamp(input=, min=, max=)": lambda x: torch.clamp(input=x, min=-0.5, max=0.5),
        "gather(input=, dim=, index=)": lambda x: torch.gather(input=x, dim=1, index=idx(x)),
        "x.scatter_add(dim=, index=, src=)": lambda x: x.scatter_add(
            dim=1, index=idx(x), src=torch.ones_like(x)
        ),
        "x.masked_fill(mask=, value=)": lambda x: x.masked_fill(mask=x > 0, value=0.0),
        "add(input=, other=, alpha=)": lambda x: torch.add(input=x, other=x, alpha=2),
        "mul(x, other=)": lambda x: torch.mul(x, other=3),
        "div(x, other=, rounding_mode=)": lambda x: torch.div(x, other=0.3, rounding_mode="floor"),
        "sum(input=, dim=)": lambda x: torch.sum(input=x, dim=1),
        "sum(x, axis=, keepdims=)": lambda x: torch.sum(x, axis=1, keepdims=True),
        "x.sum(axis=)": lambda x: x.sum(axis=0),
        "mean(x, axis=)": lambda x: torch.mean(x, axis=(0, 1)),
        "max(x, axis=).values": lambda x: torch.max(x, axis=1).values,
        "x.argmax(axis=)": lambda x: x.argmax(axis=1),
        "cumsum(input=, dim=)": lambda x: torch.cumsum(input=x, dim=1),
        "cat(tensors=, dim=)": lambda x: torch.cat(tensors=[x, x], dim=0),
        "concat(tensors=, axis=)": lambda x: torch.concat(tensors=(x, x), axis=0),
        "stack(tensors=, dim=)": lambda x: torch.stack(tensors=[x, x], dim=1),
        "narrow(x, dim=, start=, length=)": lambda x: torch.narrow(x, dim=1, start=1, length=2),
        "topk(x, k=, dim=).values": lambda x: torch.topk(x, k=2, dim=1).values,
        "sort(input=, dim=, descending=).values": lambda x: (
            torch.sort(input=x, dim=1, descending=True).values
        ),
        "x.view(size=)": lambda x: x.view(size=(x.shape[1], x.shape[0])),
        "x.expand(size=)": lambda x: x[:1].expand(size=(3, x.shape[1])),
        "x.repeat(repeats=)": lambda x: x.repeat(repeats=(2, 1)),
        "permute(x, dims=)": lambda x: torch.permute(x, dims=(1, 0)),
        "tril(input=, diagonal=)": lambda x: torch.tril(input=x, diagonal=1),
        "logsumexp(input=, dim=)": lambda x: torch.logsumexp(input=x, dim=1),
        "F.softmax(input=, dim=)": lambda x: F.softmax(input=x, dim=1),
        "F.layer_norm(input=, normalized_shape=)": lambda x: F.layer_norm(
            input=x, normalized_shape=(x.shape[1],)
        ),
        "F.linear(input=, weight=)": lambda x: F.linear(input=x, weight=y(x).T),
        "F.cross_entropy(input=, target=)": lambda x: F.cross_entropy(input=x, target=idx(x)[:, 0]),
        "F.scaled_dot_product_attention(query=, key=, value=)": lambda x: (
            F.scaled_dot_product_attention(query=x[None], key=x[None], value=x[None])
        ),
        "isclose(input=, other=, rtol=, atol=)": lambda x: torch.isclose(
            input=x, other=x + 1e-9, rtol=1e-5, atol=1e-8
        ),
        "maximum(x, other=)": lambda x: torch.maximum(x, other=-x),
        "movedim(x, source=, destination=)": lambda x: torch.movedim(x, source=0, destination=1),
    }


CASES = _cases()


@pytest.mark.parametrize("name", list(CASES))
def test_a_call_by_torchs_keyword_names_runs_as_eager(name: str) -> None:
    fn = CASES[name]
    x = torch.randn(3, 4)
    jf = thunder.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager run after a failed trace
        got = jf(x)
    want = fn(x)
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and torch.equal(got, want)
    else:
        assert got == want
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_a_keyword_no_torch_signature_takes_raises_eagers_type_error() -> None:
    jf = thunder.jit(lambda x: torch.ones(sizes=(2,)) + x)
    with pytest.raises(TypeError, match='missing 1 required positional arguments: "size"'):
        jf(torch.randn(2))  # eager's own message
    jf = thunder.jit(lambda x: x.sum(axes=0))
    with pytest.raises(TypeError, match="invalid combination of arguments - got \\(axes=int"):
        jf(torch.randn(2))
