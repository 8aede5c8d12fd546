"""A write under no_grad into a tensor requiring grad, next to ops a torch.compile region fuses:
``nn.Embedding(max_norm=...)`` renormalizes its weight in place (eager does it under no_grad).
The value written was fused into the region and lost the mark that the copy into the weight is a
no-grad write: the call raised "a leaf Variable that requires grad is being used in an in-place
operation"."""

from __future__ import annotations

import copy

import pytest
import torch

import thunder
from thunder_executors.torchcompile import torchcompile_executor

pytestmark = pytest.mark.skipif(
    not torchcompile_executor.availability()[0], reason="torch.compile is unavailable"
)


@pytest.mark.parametrize("executors", [None, ["torchcompile", "torch_ops", "torch"]])
def test_embedding_max_norm_renorms_the_weight_like_eager(executors: list[str] | None) -> None:
    torch.manual_seed(0)
    model = torch.nn.Embedding(6, 4, max_norm=1.0)
    with torch.no_grad():
        model.weight.mul_(3)
    jitted_model = copy.deepcopy(model)
    jm = thunder.jit(jitted_model, executors=executors)
    for _ in range(3):
        idx = torch.randint(0, 6, (3, 4))
        cot = torch.randn(3, 4, 4)
        expected, got = model(idx), jm(idx)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(jitted_model.weight, model.weight)
        (ge,) = torch.autograd.grad(expected, model.weight, cot)
        (gt,) = torch.autograd.grad(got, jitted_model.weight, cot)
        torch.testing.assert_close(gt, ge)
