"""The torch_ops executor keeps high-level ops whole; torchcompile takes fully fusible composites
into its regions before it."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from thunder_executors import get_executor, transform_for_execution
from thunder_executors.torch_ops_executor import ATEN_OPS, KEPT_OPS
from thunder_ir import ops as ltorch
from thunder_ir import trace_function


def block(x: Any, w: Any, b: Any, ln_w: Any, ln_b: Any) -> Any:
    h = ltorch.layer_norm(x, (x.shape[-1],), ln_w, ln_b)
    q = ltorch.transpose(ltorch.reshape(ltorch.linear(h, w, b), (2, 8, 2, 4)), 1, 2)
    y = ltorch.scaled_dot_product_attention(q, q, q, is_causal=True)
    return ltorch.gelu(ltorch.reshape(ltorch.transpose(y, 1, 2), (2, 8, 8)))


def eager_block(x: Any, w: Any, b: Any, ln_w: Any, ln_b: Any) -> Any:
    h = F.layer_norm(x, (x.shape[-1],), ln_w, ln_b)
    q = F.linear(h, w, b).reshape(2, 8, 2, 4).transpose(1, 2)
    y = F.scaled_dot_product_attention(q, q, q, is_causal=True)
    return F.gelu(y.transpose(1, 2).reshape(2, 8, 8))


def inputs() -> list[torch.Tensor]:
    return [torch.randn(2, 8, 8), torch.randn(8, 8), torch.randn(8), torch.randn(8), torch.randn(8)]


def test_high_level_ops_run_whole_and_match_eager() -> None:
    extrace = transform_for_execution(trace_function(block, *inputs()), ("torch_ops", "torch"))
    text = extrace.python()
    for op in ("layer_norm", "linear", "scaled_dot_product_attention", "gelu"):
        assert f"torch_ops.{op}(" in text
    assert "var_mean" not in text  # layer_norm was not decomposed
    fn = extrace.python_callable()
    for _ in range(2):
        xs = inputs()
        torch.testing.assert_close(fn(*xs), eager_block(*xs))


def test_fusion_first_takes_fusible_composites_into_its_region() -> None:
    extrace = transform_for_execution(
        trace_function(block, *inputs()), ("torchcompile", "torch_ops", "torch")
    )
    assert len(extrace.fusion_regions) == 1
    region_calls = [f"{s.sym.module}.{s.sym.name}" for s in extrace.fusion_regions[0].subsymbols]
    # Inside the region, ops torch runs whole stay whole for inductor; the rest are prims.
    assert "torch_ops.scaled_dot_product_attention" in region_calls
    assert "torch_ops.layer_norm" in region_calls
    assert "torch.permute" in region_calls
    xs = inputs()
    torch.testing.assert_close(
        extrace.python_callable()(*xs), eager_block(*xs), atol=1e-5, rtol=1e-5
    )


def test_kept_ops_are_derived_from_the_ops_torch_names() -> None:
    ex = get_executor("torch_ops")
    assert "ltorch.linear" in ex.implementations
    assert all(
        sym_id.removeprefix("ltorch.") in KEPT_OPS + ATEN_OPS for sym_id in ex.implementations
    )
