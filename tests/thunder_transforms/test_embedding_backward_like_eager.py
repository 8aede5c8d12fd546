"""An embedding's weight gradient is eager's kernel (``aten.embedding_dense_backward``) under the
torch_ops executor and its decomposition (rows summed with ``index_put``) elsewhere, with
``padding_idx`` (negative too) and ``scale_grad_by_freq``, equal to torch.autograd's."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

OPTIONS = [
    {},
    {"padding_idx": 3},
    {"padding_idx": -2},
    {"scale_grad_by_freq": True},
    {"padding_idx": 1, "scale_grad_by_freq": True},
]


@pytest.mark.parametrize("executors", [("torch_ops", "torch"), ("torch",)])
@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_embedding_weight_gradient(
    options: dict[str, Any], executors: tuple[str, ...], dtype: torch.dtype
) -> None:
    def fn(i: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.embedding(i, w, **options)

    jfn = thunder.jit(fn, executors=executors)
    for _ in range(2):
        w = torch.randn(10, 4, dtype=dtype, requires_grad=True)
        w2 = w.detach().clone().requires_grad_()
        i = torch.randint(0, 10, (3, 5))
        g = torch.randn(3, 5, 4, dtype=dtype)
        (got,) = torch.autograd.grad(jfn(i, w), [w], g)
        (want,) = torch.autograd.grad(fn(i, w2), [w2], g)
        if "torch_ops" in executors:
            assert torch.equal(got, want)  # the same kernel
        else:  # rows summed in another order: bfloat16 rounds differently
            tol = {"atol": 1e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
            torch.testing.assert_close(got, want, **tol)
    backward = thunder.last_backward_traces(jfn)[-1].python()
    assert ("torch_ops.embedding_backward(" in backward) == ("torch_ops" in executors), backward
