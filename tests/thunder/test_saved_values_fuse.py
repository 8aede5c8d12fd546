"""Values a forward saves for its backward are read by the backward alone: whether they share
memory with another value is nobody else's concern, so a view among them joins the fusion
region (an attention block trains as one forward and one backward region), while the outputs
the caller sees keep eager's memory sharing."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import thunder

FUSING = ("torchcompile", "torch_ops", "torch")


def attention_block(x, w_qkv, w_out):
    b, t, d = x.shape
    q, k, v = (x @ w_qkv).split(d, dim=-1)  # views of one tensor, saved for the backward
    q, k, v = (y.view(b, t, 4, d // 4).transpose(1, 2) for y in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return y.transpose(1, 2).contiguous().view(b, t, d) @ w_out


def test_an_attention_block_trains_as_one_region_each_way_like_eager():
    torch.manual_seed(0)
    params = [torch.randn(32, 96, requires_grad=True), torch.randn(32, 32, requires_grad=True)]
    jf = thunder.jit(attention_block, executors=FUSING)
    for _ in range(2):
        x = torch.randn(2, 8, 32, requires_grad=True)
        out = jf(x, *params)
        grad = torch.randn_like(out)
        got = torch.autograd.grad(out, [x, *params], grad)
        expected_out = attention_block(x, *params)
        expected = torch.autograd.grad(expected_out, [x, *params], grad)
        torch.testing.assert_close(out, expected_out)
        for g, e in zip(got, expected, strict=True):
            torch.testing.assert_close(g, e)
    forward = thunder.last_traces(jf)[-1]
    backward = thunder.last_backward_traces(jf)[-1]
    for trace in (forward, backward):
        assert len(trace.fusion_regions) == 1, trace.python()
        assert "torch.Tensor.split" not in trace.python()
        assert "torch.Tensor.contiguous" not in trace.python()


def outputs_sharing_memory(x, w):
    y = x * w
    return y, y.t(), y[0]


def test_the_outputs_the_caller_sees_share_memory_as_in_eager():
    jf = thunder.jit(outputs_sharing_memory, executors=FUSING)
    x = torch.randn(3, 4, requires_grad=True)
    w = torch.randn(3, 4, requires_grad=True)
    y, yt, row = jf(x, w)
    ey, eyt, erow = outputs_sharing_memory(x, w)
    for got, expected in ((y, ey), (yt, eyt), (row, erow)):
        torch.testing.assert_close(got, expected)
    storage = y.untyped_storage().data_ptr()
    assert yt.untyped_storage().data_ptr() == storage
    assert row.untyped_storage().data_ptr() == storage
    assert yt.stride() == eyt.stride() and row.stride() == erow.stride()
    (yt.sum() * 2 + row.sum()).backward()
    got = (x.grad, w.grad)
    x.grad = w.grad = None
    (eyt.sum() * 2 + erow.sum()).backward()
    torch.testing.assert_close(got, (x.grad, w.grad))
