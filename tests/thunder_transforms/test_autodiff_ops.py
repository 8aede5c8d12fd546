"""Gradients of torch-language ops (composites differentiated through their decompositions or
their own rules) against eager torch.autograd, and against finite differences in float64."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from autodiff_harness import check_against_eager, differentiate, rand

from thunder_ir import ops as ltorch

L = ltorch


def _idx(*v: int) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.int64)


CASES = {
    "repeat": (
        lambda x: L.repeat(x, 2, 1, 3),
        lambda x: x.repeat(2, 1, 3),
        lambda: [rand(3, 2)],
    ),
    "repeat_interleave_dim": (
        lambda x: L.repeat_interleave(x, 3, -2),
        lambda x: torch.repeat_interleave(x, 3, -2),
        lambda: [rand(2, 3, 2)],
    ),
    "repeat_interleave_flat": (
        lambda x: L.repeat_interleave(x, 2),
        lambda x: torch.repeat_interleave(x, 2),
        lambda: [rand(2, 3)],
    ),
    "exp_tanh_sum": (
        lambda x: L.sum(L.tanh(L.exp(x)), 1),
        lambda x: torch.sum(torch.tanh(torch.exp(x)), 1),
        lambda: [rand(3, 4)],
    ),
    "mean_keepdim": (
        lambda x: L.mean(x, (0, 2), keepdim=True),
        lambda x: torch.mean(x, (0, 2), keepdim=True),
        lambda: [rand(2, 3, 4)],
    ),
    "broadcasting_binary": (
        lambda a, b: L.mul(L.add(a, b), L.sub(a, 2.0)),
        lambda a, b: (a + b) * (a - 2.0),
        lambda: [rand(2, 1, 4), rand(3, 1, seed=1)],
    ),
    "matmul_batched": (
        lambda a, b: L.matmul(a, b),
        torch.matmul,
        lambda: [rand(2, 3, 4), rand(4, 5, seed=1)],
    ),
    # Pieces that tile a dimension: their gradients are joined by one cat (zeros where unused).
    "split_some_pieces_used": (
        lambda x: L.mul(L.split(L.exp(x), 2, 1)[0], L.split(L.exp(x), 2, 1)[2]),
        lambda x: x.exp().split(2, 1)[0] * x.exp().split(2, 1)[2],
        lambda: [rand(3, 6)],
    ),
    "split_with_sizes_last_unused": (
        lambda x: L.sin(L.split_with_sizes(L.mul(x, 2.0), [1, 3, 2], -1)[1]),
        lambda x: (x * 2.0).split_with_sizes([1, 3, 2], -1)[1].sin(),
        lambda: [rand(2, 6)],
    ),
    "chunk_uneven": (
        lambda x: L.add(L.chunk(L.tanh(x), 3, 0)[2], 1.0),
        lambda x: x.tanh().chunk(3, 0)[2] + 1.0,
        lambda: [rand(7, 2)],
    ),
    "tensor_split_indices": (
        lambda x: L.mul(L.tensor_split(L.exp(x), [1, 3], 1)[1], 3.0),
        lambda x: torch.tensor_split(x.exp(), [1, 3], 1)[1] * 3.0,
        lambda: [rand(2, 5)],
    ),
    "unbind_middle": (
        lambda x: L.mul(L.unbind(L.sin(x), 1)[1], L.unbind(L.sin(x), 1)[0]),
        lambda x: x.sin().unbind(1)[1] * x.sin().unbind(1)[0],
        lambda: [rand(3, 3, 2)],
    ),
    "linear": (
        lambda x, w, b: L.linear(x, w, b),
        F.linear,
        lambda: [rand(2, 3, 4), rand(5, 4, seed=1), rand(5, seed=2)],
    ),
    "softmax": (
        lambda x: L.softmax(x, -1),
        lambda x: torch.softmax(x, -1),
        lambda: [rand(3, 5)],
    ),
    "softmax_dim0_dtype": (
        lambda x: L.softmax(x, 0, dtype=torch.float64),
        lambda x: torch.softmax(x, 0, dtype=torch.float64),
        lambda: [rand(3, 5)],
    ),
    "log_softmax": (
        lambda x: L.log_softmax(x, 1),
        lambda x: torch.log_softmax(x, 1),
        lambda: [rand(2, 3, 5)],
    ),
    "layer_norm": (
        lambda x, w, b: L.layer_norm(x, (4,), w, b),
        lambda x, w, b: F.layer_norm(x, (4,), w, b),
        lambda: [rand(2, 3, 4), rand(4, seed=1), rand(4, seed=2)],
    ),
    "rms_norm": (
        lambda x, w: L.rms_norm(x, (4,), w),
        lambda x, w: F.rms_norm(x, (4,), w),
        lambda: [rand(2, 3, 4), rand(4, seed=1)],
    ),
    "gelu": (lambda x: L.gelu(x), F.gelu, lambda: [rand(3, 4, low=-3, high=3)]),
    "gelu_tanh": (
        lambda x: L.gelu(x, approximate="tanh"),
        lambda x: F.gelu(x, approximate="tanh"),
        lambda: [rand(3, 4, low=-3, high=3)],
    ),
    "silu_relu": (
        lambda x: L.add(L.silu(x), L.relu(x)),
        lambda x: F.silu(x) + F.relu(x),
        lambda: [rand(3, 4, low=-3, high=3)],
    ),
    "cross_entropy": (
        lambda x, t: L.cross_entropy(x, t),
        F.cross_entropy,
        lambda: [rand(4, 5), _idx(0, 4, 2, 2)],
    ),
    "cross_entropy_ignore_smoothing": (
        lambda x, t: L.cross_entropy(x, t, ignore_index=2, label_smoothing=0.1),
        lambda x, t: F.cross_entropy(x, t, ignore_index=2, label_smoothing=0.1),
        lambda: [rand(4, 5), _idx(0, 4, 2, 1)],
    ),
    "embedding_padding_idx": (
        lambda i, w: L.embedding(i, w, padding_idx=1),
        lambda i, w: F.embedding(i, w, padding_idx=1),
        lambda: [torch.tensor([[0, 1, 3], [1, 3, 3]]), rand(4, 3)],
    ),
    "embedding_scale_grad_by_freq": (
        lambda i, w: L.embedding(i, w, scale_grad_by_freq=True),
        lambda i, w: F.embedding(i, w, scale_grad_by_freq=True),
        lambda: [torch.tensor([[0, 1, 3], [1, 3, 3]]), rand(4, 3)],
    ),
    "reshape_transpose_getitem": (
        lambda x: L.transpose(L.reshape(x, (4, 6)), 0, 1)[1:5:2, ::3],
        lambda x: x.reshape(4, 6).transpose(0, 1)[1:5:2, ::3],
        lambda: [rand(2, 3, 4)],
    ),
    "getitem_advanced": (
        lambda x, i: x[i, 1:] + x[:, i][..., :1],
        lambda x, i: x[i, 1:] + x[:, i][..., :1],
        lambda: [rand(4, 4), _idx(3, 0, -1, 3)],
    ),
    "cat_stack": (
        lambda a, b: L.stack([L.cat([a, b], 1), L.cat([b, a], 1)], 0),
        lambda a, b: torch.stack([torch.cat([a, b], 1), torch.cat([b, a], 1)], 0),
        lambda: [rand(2, 3), rand(2, 3, seed=1)],
    ),
    "where_clamp": (
        lambda a, b: L.where(L.gt(a, b), L.clamp(a, -0.5, 0.5), L.mul(b, b)),
        lambda a, b: torch.where(a > b, a.clamp(-0.5, 0.5), b * b),
        lambda: [rand(3, 4), rand(3, 4, seed=1)],
    ),
    "conv2d": (
        lambda x, w, b: L.conv2d(x, w, b, stride=2, padding=1, groups=2),
        lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1, groups=2),
        lambda: [rand(2, 4, 7, 6), rand(6, 2, 3, 3, seed=1), rand(6, seed=2)],
    ),
    "conv1d_dilated": (
        lambda x, w: L.conv1d(x, w, padding=2, dilation=2),
        lambda x, w: F.conv1d(x, w, padding=2, dilation=2),
        lambda: [rand(2, 3, 8), rand(4, 3, 3, seed=1)],
    ),
    "conv_transpose2d": (
        lambda x, w, b: L.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        lambda: [rand(1, 3, 4, 5), rand(3, 2, 3, 3, seed=1), rand(2, seed=2)],
    ),
    "sdpa_causal": (
        lambda q, k, v: L.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda: [rand(1, 2, 4, 8), rand(1, 2, 4, 8, seed=1), rand(1, 2, 4, 8, seed=2)],
    ),
    "sdpa_mask": (
        lambda q, k, v, m: L.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda: [rand(2, 3, 8), rand(2, 5, 8, seed=1), rand(2, 5, 8, seed=2), rand(3, 5, seed=3)],
    ),
    "var_std": (
        lambda x: L.add(L.var(x, 1), L.std(x, 0, correction=0)[:3]),
        lambda x: x.var(1) + x.std(0, correction=0)[:3],
        lambda: [rand(3, 4)],
    ),
    "max_min_dim": (
        lambda x: L.add(L.max(x, 1)[0], L.min(x, 1)[0]),
        lambda x: x.max(1)[0] + x.min(1).values,
        lambda: [rand(3, 4)],
    ),
    "amax_logsumexp": (
        lambda x: L.add(L.amax(x, -1), L.logsumexp(x, -1)),
        lambda x: x.amax(-1) + torch.logsumexp(x, -1),
        lambda: [rand(3, 4)],
    ),
    "cumsum_cumprod": (
        lambda x: L.add(L.cumsum(x, 1), L.cumprod(x, 1)),
        lambda x: x.cumsum(1) + x.cumprod(1),
        lambda: [rand(3, 4, low=0.5, high=1.5)],
    ),
    "prod_pow_sqrt": (
        lambda x: L.sqrt(L.prod(L.pow(x, 2), 0)),
        lambda x: torch.sqrt(torch.prod(x**2, 0)),
        lambda: [rand(3, 4, low=0.5, high=1.5)],
    ),
    "gather_scatter_add": (
        lambda x, i, s: L.add(L.gather(x, 1, i).sum(), L.scatter_add(x, 1, i, s)),
        lambda x, i, s: torch.gather(x, 1, i).sum() + torch.scatter_add(x, 1, i, s),
        lambda: [rand(3, 4), torch.tensor([[0, 3], [1, 1], [2, 0]]), rand(3, 2, seed=1)],
    ),
    "index_select_take": (
        lambda x, i: L.add(L.index_select(x, 1, i), L.take(x, i)),
        lambda x, i: torch.index_select(x, 1, i) + torch.take(x, i),
        lambda: [rand(3, 4), _idx(0, 3, 3, 1)],
    ),
    "index_put": (
        lambda x, i, v: L.index_put(x, (i,), v, accumulate=True),
        lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True),
        lambda: [rand(5, 3), _idx(4, 0, 4), rand(3, seed=1)],
    ),
    "pad_flip_roll": (
        lambda x: L.roll(L.flip(L.pad(x, (1, 2, 0, 1)), (0,)), 2, 1),
        lambda x: torch.roll(torch.flip(F.pad(x, (1, 2, 0, 1)), (0,)), 2, 1),
        lambda: [rand(3, 4)],
    ),
    "unbind_split_chunk": (
        lambda x: L.add(
            L.split(x, 2, 1)[1], L.chunk(x, 2, 1)[0] * L.unsqueeze(L.unbind(x, 1)[1], 1)
        ),
        lambda x: (
            torch.split(x, 2, 1)[1] + torch.chunk(x, 2, 1)[0] * torch.unbind(x, 1)[1].unsqueeze(1)
        ),
        lambda: [rand(3, 4)],
    ),
    "mse_l1_smooth_l1": (
        lambda a, b: L.mse_loss(a, b) + L.l1_loss(a, b) + L.smooth_l1_loss(a, b),
        lambda a, b: F.mse_loss(a, b) + F.l1_loss(a, b) + F.smooth_l1_loss(a, b),
        lambda: [rand(3, 4), rand(3, 4, seed=1)],
    ),
    "bce_with_logits": (
        lambda a, t: L.binary_cross_entropy_with_logits(a, t),
        F.binary_cross_entropy_with_logits,
        lambda: [rand(3, 4), rand(3, 4, low=0.0, high=1.0, grad=False, seed=1)],
    ),
    "group_norm": (
        lambda x, w, b: L.group_norm(x, 2, w, b),
        lambda x, w, b: F.group_norm(x, 2, w, b),
        lambda: [rand(2, 4, 3), rand(4, seed=1), rand(4, seed=2)],
    ),
    "batch_norm_training": (
        lambda x, w, b: L.batch_norm(x, None, None, w, b, training=True),
        lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
        lambda: [rand(3, 4, 2), rand(4, seed=1), rand(4, seed=2)],
    ),
    "avg_pool2d": (
        lambda x: L.avg_pool2d(x, 2),
        lambda x: F.avg_pool2d(x, 2),
        lambda: [rand(1, 2, 4, 6)],
    ),
    "max_pool2d": (
        lambda x: L.max_pool2d(x, 2, stride=1),
        lambda x: F.max_pool2d(x, 2, stride=1),
        lambda: [rand(1, 2, 4, 5)],
    ),
    "detach_stops_gradient": (
        lambda x: L.mul(x, L.detach(L.exp(x))),
        lambda x: x * x.exp().detach(),
        lambda: [rand(3)],
    ),
    "floor_gives_zero_grad": (
        lambda x, y: L.add(L.floor(x), y),
        lambda x, y: torch.floor(x) + y,
        lambda: [rand(3), rand(3, seed=1)],
    ),
    "integer_output_and_unused_input": (
        lambda x, y, z: (L.argmax(x, 0), L.mul(x, 2.0), L.exp(z)),
        lambda x, y, z: (torch.argmax(x, 0), x * 2.0, z.exp()),
        lambda: [rand(3), rand(3, seed=1), rand(3, grad=False, seed=2)],
    ),
    "output_is_input": (
        lambda x, y: (x, L.mul(x, y), x),
        lambda x, y: (x, x * y, x),
        lambda: [rand(3), rand(3, seed=1)],
    ),
    "float32": (
        lambda x, w: L.softmax(L.matmul(x, w), -1),
        lambda x, w: torch.softmax(x @ w, -1),
        lambda: [
            rand(3, 4).float().detach().requires_grad_(),
            rand(4, 2, seed=1).float().detach().requires_grad_(),
        ],
    ),
}

# Not twice differentiable or not smooth at points finite differences may hit.
_NO_GRADCHECK = {
    "detach_stops_gradient",
    "embedding_padding_idx",
    "embedding_scale_grad_by_freq",
    "max_pool2d",
    "max_min_dim",
    "float32",
    "floor_gives_zero_grad",
    "mse_l1_smooth_l1",
    "where_clamp",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_grads_match_eager(name: str) -> None:
    fn, eager, make = CASES[name]
    inputs = make()
    low_precision = any(isinstance(x, torch.Tensor) and x.dtype == torch.float32 for x in inputs)
    tol = {"atol": 1e-5, "rtol": 1e-4} if low_precision else {}
    check_against_eager(fn, eager, *inputs, gradcheck=name not in _NO_GRADCHECK, **tol)


def test_mixed_requires_grad_and_no_grad_mode() -> None:
    x, w = rand(3, 4), rand(4, 2, grad=False, seed=1)
    runner = differentiate(lambda a, b: L.tanh(L.matmul(a, b)), x, w)
    assert runner.backward_trace.python().count("matmul") == 1  # no gradient for w is computed
    with torch.no_grad():
        out = runner(x, w)
    assert not out.requires_grad
    out = runner(x, w)
    out.sum().backward()
    torch.testing.assert_close(
        x.grad,
        (
            (1 - torch.tanh(x.detach() @ w) ** 2).sum(1, keepdim=True) * 0
            + (1 - torch.tanh(x.detach() @ w) ** 2)
        )
        @ w.T,
    )


def test_input_requiring_grad_unexpectedly_is_an_error() -> None:
    runner = differentiate(lambda a, b: L.mul(a, b), rand(3), rand(3, grad=False))
    with pytest.raises(RuntimeError, match="requires grad"):
        runner(rand(3), rand(3))


def test_mlp_training_step_matches_eager() -> None:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 3)
    ).double()
    params = list(model.parameters())
    x, t = torch.randn(5, 8, dtype=torch.float64), torch.tensor([0, 2, 1, 1, 0])

    def step(x, t, w1, b1, g, beta, w2, b2):
        h = L.layer_norm(L.gelu(L.linear(x, w1, b1)), (16,), g, beta)
        return L.cross_entropy(L.linear(h, w2, b2), t)

    runner = differentiate(step, x, t, *params)
    loss = runner(x, t, *params)
    loss.backward()
    ours = [p.grad.clone() for p in params]
    model.zero_grad()
    F.cross_entropy(model(x), t).backward()
    for a, p in zip(ours, params):
        torch.testing.assert_close(a, p.grad)


class _TorchNS:
    def __getattr__(self, name):
        return getattr(torch, name, None) or getattr(F, name)


def _block(ns, x, w, b, g, beta, w2):
    h = ns.layer_norm(x, (8,), g, beta)
    q = ns.reshape(ns.linear(h, w, b), (2, 3, 2, 4)).transpose(1, 2)
    a = ns.scaled_dot_product_attention(q, q * 0.5, q, is_causal=True)
    x = x + ns.gelu(ns.reshape(a.transpose(1, 2), (2, 3, 8)))
    return ns.sum(ns.matmul(x, w2) * x)


def test_transformer_block_matches_eager() -> None:
    inputs = [rand(2, 3, 8), rand(8, 8, seed=1), rand(8, seed=2), rand(8, seed=3), rand(8, seed=4)]
    inputs.append(rand(8, 8, seed=5))
    check_against_eager(
        lambda *a: _block(L, *a), lambda *a: _block(_TorchNS(), *a), *inputs, gradcheck=True
    )
