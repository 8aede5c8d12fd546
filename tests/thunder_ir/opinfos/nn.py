"""OpInfos of neural-network ops: matrix products, embeddings, normalization, activations, softmax,
dropout, attention, convolution and pooling (losses: nn_losses.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F

from opinfos._base import FLOATS, ErrorInput, OpInfo, SampleInput, make_tensor
from thunder_ir import ops as ltorch

FLOATS_BF16 = (torch.float32, torch.float64, torch.bfloat16)
F32 = torch.float32


def _t(
    dtype: torch.dtype,
    *shape: int,
    nc: bool = False,
    low: float | None = None,
    high: float | None = None,
    rg: bool = False,
) -> torch.Tensor:
    return make_tensor(shape, dtype, noncontiguous=nc, low=low, high=high, requires_grad=rg)


def _idx(high: int, *shape: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.randint(0, high, shape, dtype=dtype)


# Matrix products ------------------------------------------------------------------------------------


def matmul_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    yield SampleInput((t(3, 4), t(4, 5)))
    yield SampleInput((t(4), t(4)))
    yield SampleInput((t(4), t(4, 5)))
    yield SampleInput((t(3, 4), t(4)))
    yield SampleInput((t(2, 3, 4), t(4, 5)))
    yield SampleInput((t(2, 1, 3, 4), t(3, 4, 5)))  # batch broadcasting
    yield SampleInput((t(2, 3, 4, nc=True), t(2, 4, 6, nc=True)))
    yield SampleInput(
        (t(2, 4, 8, 16), t(2, 4, 16, 8).transpose(-1, -2).contiguous().transpose(-1, -2))
    )


def matmul_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 3, 4), _t(F32, 5, 2))),
        RuntimeError,
        r"shapes cannot be multiplied \(3x4 and 5x2\)",
    )
    yield ErrorInput(
        SampleInput((_t(F32, 3, 4), _t(torch.float64, 4, 2))),
        RuntimeError,
        r"expected m1 and m2 to have the same dtype",
    )


def mm_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 3, 4, rg=rg), _t(dtype, 4, 5, rg=rg)))
    yield SampleInput((_t(dtype, 5, 4, rg=rg).T, _t(dtype, 5, 2, nc=True, rg=rg)))


def mm_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 2, 3, 4), _t(F32, 4, 5))), RuntimeError, r"self must be a matrix"
    )
    yield ErrorInput(
        SampleInput((_t(F32, 3, 4), _t(F32, 3, 5))), RuntimeError, r"shapes cannot be multiplied"
    )


def bmm_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 3, 4, rg=rg), _t(dtype, 2, 4, 5, rg=rg)))
    yield SampleInput((_t(dtype, 3, 2, 4, nc=True, rg=rg), _t(dtype, 3, 4, 1, rg=rg)))


def bmm_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 3, 4), _t(F32, 4, 5))), RuntimeError, r"batch1 must be a 3D tensor"
    )
    yield ErrorInput(
        SampleInput((_t(F32, 2, 3, 4), _t(F32, 3, 4, 5))),
        RuntimeError,
        r"Expected size for first two dimensions of batch2 tensor to be: \[2, 4\] but got: \[3, 4\]",
    )


def linear_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    yield SampleInput((t(2, 3, 8), t(16, 8), t(16)))  # (batch, seq, features)
    yield SampleInput((t(4, 8), t(6, 8)))
    yield SampleInput((t(8), t(6, 8), t(6)))
    yield SampleInput(
        (t(2, 5, 8, nc=True), t(8, 6).T), {"bias": t(6)}
    )  # transposed (non-contiguous) weight
    yield SampleInput((t(3, 8), t(8)))  # 1-D weight


def linear_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 3, 5), _t(F32, 4, 6))),
        RuntimeError,
        r"mat1 and mat2 shapes cannot be multiplied \(3x5 and 6x4\)",
    )
    yield ErrorInput(
        SampleInput((_t(F32, 3, 5), _t(torch.float64, 4, 5))),
        RuntimeError,
        r"expected m1 and m2 to have the same dtype",
    )


def addmm_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput(
        (_t(dtype, 5, rg=rg), _t(dtype, 3, 4, rg=rg), _t(dtype, 4, 5, rg=rg))
    )  # GPT-2 Conv1D
    yield SampleInput(
        (_t(dtype, 3, 5), _t(dtype, 3, 4), _t(dtype, 4, 5, nc=True)), {"beta": 0.5, "alpha": 2.0}
    )
    yield SampleInput((_t(dtype, 3, 1), _t(dtype, 3, 4), _t(dtype, 4, 5)), {"beta": 0})


def baddbmm_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput(
        (_t(dtype, 2, 3, 5, rg=rg), _t(dtype, 2, 3, 4, rg=rg), _t(dtype, 2, 4, 5, rg=rg))
    )
    yield SampleInput(
        (_t(dtype, 5), _t(dtype, 2, 3, 4), _t(dtype, 2, 4, 5)), {"beta": 0.0, "alpha": 0.125}
    )
    yield SampleInput(
        (_t(dtype, 2, 3, 5), _t(dtype, 2, 3, 4, nc=True), _t(dtype, 2, 4, 5)),
        {"beta": 2.0, "alpha": 1.0},
    )


def outer_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 4, rg=rg), _t(dtype, 3, rg=rg)))
    yield SampleInput((_t(dtype, 6, nc=True), _t(dtype, 1)))


def embedding_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    w = _t(dtype, 10, 8, rg=rg)
    yield SampleInput((_idx(10, 2, 5), w))
    yield SampleInput((_idx(10, 7), w), {"padding_idx": 0})
    yield SampleInput((_idx(10, 2, 3, dtype=torch.int32), w), {"padding_idx": -1})
    yield SampleInput((torch.tensor(3), w))
    yield SampleInput((_idx(10, 4), _t(dtype, 8, 10, nc=True).T))


def embedding_errors() -> Iterator[ErrorInput]:
    w = _t(F32, 10, 8)
    yield ErrorInput(
        SampleInput((_idx(10, 4).float(), w)),
        RuntimeError,
        r"Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int",
    )
    yield ErrorInput(
        SampleInput((_idx(10, 4), w), {"padding_idx": 12}),
        AssertionError,
        r"Padding_idx must be within num_embeddings",
    )


def one_hot_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_idx(5, 3, 4), 5))
    yield SampleInput((_idx(3, 6), 7))
    yield SampleInput((torch.tensor(2), 3))


def einsum_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    yield SampleInput(("ij,jk->ik", t(3, 4), t(4, 5)))
    yield SampleInput(
        ("bhqd,bhkd->bhqk", t(2, 3, 5, 8), t(2, 3, 6, 8, nc=True))
    )  # attention scores
    yield SampleInput(("i,j->ij", t(4), t(5)))  # rotary frequencies
    yield SampleInput(("ij->ji", t(3, 4)))
    yield SampleInput(("ij->", t(3, 4)))
    yield SampleInput(("ij", t(3, 4)))
    yield SampleInput(("ij,kj", t(3, 4), t(5, 4)))  # implicit output: alphabetical
    yield SampleInput(("...ij,...jk->...ik", t(5, 2, 3, 4), t(2, 4, 5)))  # ellipsis broadcasting
    yield SampleInput(("b...d,d->b...", t(2, 3, 4, 5), t(5)))
    yield SampleInput(("ab,bc,cd->ad", t(2, 3), t(3, 4), t(4, 5)))
    yield SampleInput(("ab,cb->a", t(2, 3), t(4, 3)))  # c summed before contracting
    yield SampleInput(("bij,bjk->bik", [t(2, 3, 4), t(1, 4, 5)]))  # operand list, size-1 broadcast


def einsum_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput(("ij,jk->ik", _t(F32, 3, 4), _t(F32, 5, 6))),
        RuntimeError,
        r"einsum\(\): operands do not broadcast",
    )
    yield ErrorInput(
        SampleInput(("ijk->ik", _t(F32, 3, 4))),
        RuntimeError,
        r"einsum\(\): the number of subscripts in the equation \(3\) does not match the number of dimensions \(2\)",
    )


# Normalization --------------------------------------------------------------------------------------


def layer_norm_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    yield SampleInput((t(2, 5, 16), (16,), t(16), t(16)))  # (batch, seq, hidden)
    yield SampleInput((t(2, 5, 16), [16]))
    yield SampleInput((t(3, 4, 6, nc=True), (4, 6), t(4, 6)), {"eps": 1e-6})
    yield SampleInput((t(8), (8,)), {"bias": t(8)})
    yield SampleInput((t(2, 5, 16), (16,), t(16, nc=True), t(16)))
    if dtype == torch.bfloat16:  # low-precision input, float32 parameters (autocast-style)
        yield SampleInput((t(2, 5, 16), (16,), _t(F32, 16), _t(F32, 16)))


def layer_norm_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 3, 5), (4,))),
        RuntimeError,
        r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\], but got input of size\[3, 5\]",
    )
    yield ErrorInput(
        SampleInput((_t(F32, 3, 5), (5,), _t(F32, 4))),
        RuntimeError,
        r"Expected weight to be of same shape as normalized_shape, but got weight of shape \[4\] and normalized_shape = \[5\]",
    )


def rms_norm_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    yield SampleInput((t(2, 5, 16), (16,), t(16)))  # Llama's RMSNorm
    yield SampleInput((t(2, 5, 16), [16]), {"eps": 1e-6})
    yield SampleInput((t(3, 4, 6, nc=True), (4, 6), t(4, 6)))
    yield SampleInput((t(2, 8) * 1e-3, (8,)))  # small values: the default eps matters


def rms_norm_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 3, 5), (4,))),
        RuntimeError,
        r"Given normalized_shape=\[4\], expected input with shape \[\*, 4\]",
    )


def group_norm_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    yield SampleInput((t(2, 6, 5), 3, t(6), t(6)))
    yield SampleInput((t(2, 4, 3, 3), 2))
    yield SampleInput((t(3, 8, 4, nc=True), 8, t(8)), {"eps": 1e-3})
    yield SampleInput((t(2, 6), 1, None, t(6)))


def group_norm_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 2, 6, 4), 4)),
        RuntimeError,
        r"Expected number of channels in input to be divisible by num_groups, but got input of shape \[2, 6, 4\] and num_groups=4",
    )


def batch_norm_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False, low: float | None = None) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, low=low, rg=rg)

    stat = dtype if dtype != torch.bfloat16 else F32
    rm, rv = _t(stat, 4), _t(stat, 4, low=0.1, high=2.0)
    # Inference with running statistics.
    yield SampleInput((t(3, 4), rm, rv))
    yield SampleInput((t(2, 4, 5), rm, rv, _t(stat, 4), _t(stat, 4)), {"eps": 1e-3})
    yield SampleInput((t(2, 4, 3, 3, nc=True), rm, rv, _t(stat, 4), None, False))
    # Training without running statistics: batch statistics.
    yield SampleInput((t(3, 4), None, None), {"training": True})
    yield SampleInput((t(2, 4, 3, 3), None, None, _t(stat, 4), _t(stat, 4), True, 0.1, 1e-5))


def batch_norm_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 1, 3), None, None), {"training": True}),
        ValueError,
        r"Expected more than 1 value per channel when training",
    )


def instance_norm_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    stat = dtype if dtype != torch.bfloat16 else F32
    yield SampleInput((_t(dtype, 2, 3, 5, rg=rg),))
    yield SampleInput(
        (_t(dtype, 2, 4, 3, 3, nc=True), None, None, _t(stat, 4), _t(stat, 4)), {"eps": 1e-3}
    )
    rm, rv = _t(stat, 3), _t(stat, 3, low=0.1, high=2.0)
    yield SampleInput((_t(dtype, 2, 3, 5), rm, rv), {"use_input_stats": False})
    # Running statistics updated in place from the instance statistics (the output is the same).
    rm, rv = _t(stat, 3), _t(stat, 3, low=0.1, high=2.0)
    yield SampleInput((_t(dtype, 2, 3, 4, 2, rg=rg), rm, rv), {"momentum": 0.3})


def normalize_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    yield SampleInput((t(3, 8),))
    yield SampleInput((t(2, 3, 4),), {"dim": -1})
    yield SampleInput((t(4, 6, nc=True),), {"p": 1.0, "dim": 0})
    yield SampleInput((t(3, 5),), {"p": float("inf")})
    yield SampleInput((t(3, 5),), {"p": 3.0, "eps": 1e-6})
    yield SampleInput((torch.zeros(2, 3, dtype=dtype),))  # eps keeps it finite


def cosine_similarity_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    yield SampleInput((t(4, 8), t(4, 8)))
    yield SampleInput((t(2, 3, 8), t(8)), {"dim": -1})  # broadcasting
    yield SampleInput((t(5, 3, nc=True), t(5, 3)), {"dim": 0, "eps": 1e-6})


def pairwise_distance_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 4, 8, rg=rg), _t(dtype, 4, 8, rg=rg)))
    yield SampleInput((_t(dtype, 4, 8), _t(dtype, 8)), {"p": 1.0, "keepdim": True})


# Activations ----------------------------------------------------------------------------------------


def finite_activation_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    for shape in ((), (7,), (2, 5, 8)):
        yield SampleInput((_t(dtype, *shape, low=-5.0, high=5.0, rg=rg),))
    yield SampleInput((_t(dtype, 4, 6, nc=True, low=-5.0, high=5.0, rg=rg),))
    if dtype.is_floating_point:
        yield SampleInput(
            (torch.tensor([-30.0, -1.0, -0.0, 0.0, 0.5, 3.0, 30.0, float("nan")], dtype=dtype),)
        )


def activation_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield from finite_activation_samples(dtype, rg)
    if dtype.is_floating_point:
        yield SampleInput((torch.tensor([float("inf"), float("-inf")], dtype=dtype),))


def _with(samples: Any, **kwargs: Any) -> Any:
    def gen(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
        for s in samples(dtype, rg):
            yield SampleInput(s.args, {**s.kwargs, **kwargs})

    return gen


def prelu_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 4, 5, low=-3, high=3, rg=rg), _t(dtype, 4, rg=rg)))
    yield SampleInput((_t(dtype, 2, 4, 3, 3, nc=True), _t(dtype, 1)))
    yield SampleInput((_t(dtype, 6), torch.tensor(0.25, dtype=dtype)))


def glu_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 3, 8, rg=rg),))
    yield SampleInput((_t(dtype, 4, 6, 2, nc=True),), {"dim": 1})


def glu_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 3, 5),)),
        RuntimeError,
        r"Halving dimension must be even, but dimension 1 is size 5",
    )


def gelu_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 3),), {"approximate": "fast"}),
        RuntimeError,
        r"approximate argument must be either none or tanh",
    )


def softmax_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    yield SampleInput((t(2, 3, 8), -1))
    yield SampleInput((t(2, 3, 8), 1))
    yield SampleInput((t(4, 6, nc=True), 0))
    yield SampleInput((t(), 0))
    yield SampleInput((t(5, 7),), {"dim": 1, "dtype": torch.float64})
    yield SampleInput(
        (
            torch.tensor([[0.0, float("-inf"), 1.0], [1e4, 1e4 - 1.0, float("-inf")]], dtype=dtype),
            -1,
        )
    )


def softmax_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(SampleInput((_t(F32, 3, 4), 2)), IndexError, r"Dimension out of range")
    yield ErrorInput(
        SampleInput((_idx(4, 3, 4), 1)),
        RuntimeError,
        r"not implemented for 'int64'|not implemented for 'Long'",
    )


# Dropout and attention -----------------------------------------------------------------------------


def dropout_identity_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 4, 5, rg=rg),), {"p": 0.0})
    yield SampleInput((_t(dtype, 4, 5, rg=rg), 0.5, False))
    yield SampleInput((_t(dtype, 3, nc=True),), {"p": 0.9, "training": False})


def dropout_random_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    # Ones in, so the output shows the mask: zeros and 1 / (1 - p).
    yield SampleInput((torch.ones(64, 64, dtype=dtype), 0.25))
    yield SampleInput((torch.ones(32, 128, dtype=dtype),), {"p": 0.25, "training": True})


def dropout_compare(got: torch.Tensor, expected: torch.Tensor) -> None:
    assert got.shape == expected.shape and got.dtype == expected.dtype
    scale = 1.0 / (1.0 - 0.25)
    kept = got != 0
    torch.testing.assert_close(got[kept], torch.full_like(got[kept], scale))
    zero_fraction = 1.0 - kept.float().mean().item()
    assert 0.18 < zero_fraction < 0.32, (
        f"dropout zeroed {zero_fraction:.3f} of the elements, expected about 0.25"
    )


def dropout_p1_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 4, 5),), {"p": 1.0})


def dropout_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 3),), {"p": 1.5}),
        ValueError,
        r"dropout probability has to be between 0 and 1, but got 1.5",
    )


def sdpa_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, low=-2.0, high=2.0, rg=rg)

    b, h, L, s, e = 2, 3, 5, 7, 8
    yield SampleInput((t(b, h, L, e), t(b, h, L, e), t(b, h, L, e)))
    yield SampleInput(
        (t(b, h, L, e), t(b, h, L, e), t(b, h, L, e)), {"is_causal": True}
    )  # GPT decoder
    yield SampleInput((t(b, h, L, e), t(b, h, s, e), t(b, h, s, 4)))  # L != S, Ev != E
    # (batch, seq, heads, head_dim) transposed to (batch, heads, seq, head_dim): non-contiguous.
    q, k, v = (t(b, L, h, e).transpose(1, 2) for _ in range(3))
    yield SampleInput((q, k, v), {"is_causal": True})
    bool_mask = torch.rand(L, s) > 0.5
    bool_mask[:, 0] = True  # no fully masked row
    yield SampleInput((t(b, h, L, e), t(b, h, s, e), t(b, h, s, e)), {"attn_mask": bool_mask})
    yield SampleInput(
        (t(b, h, L, e), t(b, h, s, e), t(b, h, s, e)),
        {"attn_mask": _t(dtype, b, 1, L, s, low=-3.0, high=0.0)},
    )  # additive (BERT)
    yield SampleInput((t(b, h, L, e), t(b, h, L, e), t(b, h, L, e)), {"scale": 0.5})
    fully_masked = bool_mask.clone()
    fully_masked[1] = False  # a query that may attend to nothing: zeros, as torch's safe softmax
    yield SampleInput((t(b, h, L, e), t(b, h, s, e), t(b, h, s, e)), {"attn_mask": fully_masked})
    yield SampleInput(
        (t(b, 4, L, e), t(b, 2, L, e), t(b, 2, L, e)), {"enable_gqa": True, "is_causal": True}
    )  # Llama GQA
    yield SampleInput((t(L, e), t(s, e), t(s, e)))  # no batch dims


def sdpa_errors() -> Iterator[ErrorInput]:
    q = _t(F32, 2, 3, 4)
    yield ErrorInput(
        SampleInput(
            (q, q, q), {"attn_mask": torch.ones(3, 3, dtype=torch.bool), "is_causal": True}
        ),
        RuntimeError,
        r"Explicit attn_mask should not be set when is_causal=True",
    )
    yield ErrorInput(
        SampleInput((q, _t(torch.float64, 2, 3, 4), q)),
        RuntimeError,
        r"Expected query, key, and value to have the same dtype",
    )


# Convolution and pooling ---------------------------------------------------------------------------


def conv1d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    yield SampleInput((t(2, 4, 10), t(6, 4, 3), t(6)))
    yield SampleInput((t(2, 4, 10, nc=True), t(6, 2, 3)), {"stride": 2, "padding": 1, "groups": 2})
    yield SampleInput((t(4, 10), t(6, 4, 3)), {"padding": "same", "dilation": 2})  # unbatched
    yield SampleInput((t(1, 4, 9), t(4, 4, 4)), {"padding": "same"})  # asymmetric same padding
    yield SampleInput(
        (t(1, 4, 9), t(4, 1, 3), t(4)), {"padding": "valid", "groups": 4}
    )  # depthwise


def conv2d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    def t(*s: int, nc: bool = False) -> torch.Tensor:
        return _t(dtype, *s, nc=nc, rg=rg)

    yield SampleInput((t(2, 3, 8, 8), t(4, 3, 3, 3), t(4)))
    yield SampleInput(
        (t(2, 4, 7, 9, nc=True), t(6, 2, 3, 1)), {"stride": (2, 1), "padding": (1, 0), "groups": 2}
    )
    yield SampleInput((t(3, 6, 6), t(2, 3, 3, 3)), {"padding": "same", "dilation": (1, 2)})
    yield SampleInput((t(1, 2, 6, 6), t(2, 2, 2, 2)), {"padding": "same"})


def conv2d_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 1, 3, 5, 5), _t(F32, 4, 2, 3, 3))),
        RuntimeError,
        r"Given groups=1, weight of size \[4, 2, 3, 3\], expected input\[1, 3, 5, 5\] to have 2 channels, but got 3 channels instead",
    )


def conv3d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput(
        (_t(dtype, 1, 2, 4, 5, 5, rg=rg), _t(dtype, 3, 2, 2, 3, 3, rg=rg), _t(dtype, 3)),
        {"padding": 1},
    )


def conv_transpose1d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 4, 6, rg=rg), _t(dtype, 4, 3, 3, rg=rg), _t(dtype, 3)))
    yield SampleInput(
        (_t(dtype, 2, 4, 6), _t(dtype, 4, 2, 3)),
        {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2},
    )


def conv_transpose2d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 4, 5, 5, rg=rg), _t(dtype, 4, 3, 3, 3, rg=rg), _t(dtype, 3)))
    yield SampleInput(
        (_t(dtype, 4, 5, 5, nc=True), _t(dtype, 4, 2, 2, 2)), {"stride": 2, "dilation": 2}
    )


def max_pool2d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 3, 8, 8, rg=rg), 2))
    yield SampleInput((_t(dtype, 2, 3, 7, 9, nc=True), 3), {"stride": 2, "padding": 1})
    yield SampleInput((_t(dtype, 3, 8, 8), (2, 3)), {"stride": (1, 2), "dilation": 2})


def max_pool1d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 3, 10, rg=rg), 3))
    yield SampleInput((_t(dtype, 3, 9), 2), {"stride": 1, "padding": 1})


def avg_pool2d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 3, 8, 8, rg=rg), 2))
    yield SampleInput((_t(dtype, 2, 3, 7, 9, nc=True), 3), {"stride": 2, "padding": 1})
    yield SampleInput(
        (_t(dtype, 2, 3, 7, 9), 3), {"stride": 2, "padding": 1, "count_include_pad": False}
    )
    yield SampleInput((_t(dtype, 3, 6, 6), (2, 3)), {"divisor_override": 4})
    yield SampleInput((_t(dtype, 2, 3, 7, 7), 7))  # a global window


def avg_pool1d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 3, 10, rg=rg), 3))
    yield SampleInput((_t(dtype, 3, 9), 2), {"stride": 1, "padding": 1, "count_include_pad": False})
    yield SampleInput((_t(dtype, 2, 3, 24), 12), {"stride": 6})


def adaptive_avg_pool2d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 3, 8, 8, rg=rg), 1))  # ResNet's global pooling
    yield SampleInput((_t(dtype, 2, 3, 8, 6), (4, 3)))
    yield SampleInput((_t(dtype, 3, 6, 6), (None, 2)))


def conv_transpose3d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput(
        (_t(dtype, 2, 4, 3, 4, 3, rg=rg), _t(dtype, 4, 2, 2, 3, 2, rg=rg), _t(dtype, 2))
    )
    yield SampleInput(
        (_t(dtype, 4, 3, 3, 3), _t(dtype, 4, 1, 2, 2, 2)),
        {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2},
    )


def max_pool3d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 3, 4, 6, 6, rg=rg), 2))
    yield SampleInput((_t(dtype, 2, 5, 7, 5, nc=True), 3), {"stride": 2, "padding": 1})


def avg_pool3d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 3, 4, 6, 6, rg=rg), 2))
    yield SampleInput(
        (_t(dtype, 2, 5, 7, 5), 3), {"stride": 2, "padding": 1, "count_include_pad": False}
    )


def adaptive_avg_pool1d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 3, 8, rg=rg), 1))
    yield SampleInput((_t(dtype, 3, 10), 5))


def adaptive_avg_pool3d_samples(dtype: torch.dtype, rg: bool) -> Iterator[SampleInput]:
    yield SampleInput((_t(dtype, 2, 3, 4, 4, 4, rg=rg), 1))
    yield SampleInput((_t(dtype, 2, 6, 4, 5), (3, 2, None)))


def pool_errors() -> Iterator[ErrorInput]:
    yield ErrorInput(
        SampleInput((_t(F32, 1, 2, 6, 6), 2), {"padding": 2}),
        RuntimeError,
        r"pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 and dilation=1",
    )


OPINFOS = [
    # Matrix products
    OpInfo(
        ltorch.matmul, torch.matmul, matmul_samples, dtypes=FLOATS_BF16, error_inputs=matmul_errors
    ),
    OpInfo(ltorch.mm, torch.mm, mm_samples, dtypes=FLOATS_BF16, error_inputs=mm_errors),
    OpInfo(ltorch.bmm, torch.bmm, bmm_samples, dtypes=FLOATS_BF16, error_inputs=bmm_errors),
    OpInfo(ltorch.linear, F.linear, linear_samples, dtypes=FLOATS_BF16, error_inputs=linear_errors),
    OpInfo(ltorch.addmm, torch.addmm, addmm_samples, dtypes=FLOATS),
    OpInfo(ltorch.addmm, torch.addmm, addmm_samples, dtypes=(torch.bfloat16,), atol=0.1, rtol=0.05),
    OpInfo(ltorch.baddbmm, torch.baddbmm, baddbmm_samples, dtypes=FLOATS),
    # The decomposition rounds the product to bfloat16 before scaling; torch rounds once.
    OpInfo(
        ltorch.baddbmm,
        torch.baddbmm,
        baddbmm_samples,
        dtypes=(torch.bfloat16,),
        atol=0.1,
        rtol=0.05,
    ),
    OpInfo(ltorch.outer, torch.outer, outer_samples, dtypes=(*FLOATS_BF16, torch.int64)),
    OpInfo(
        ltorch.embedding,
        F.embedding,
        embedding_samples,
        dtypes=FLOATS_BF16,
        error_inputs=embedding_errors,
    ),
    OpInfo(
        ltorch.einsum,
        torch.einsum,
        einsum_samples,
        dtypes=(*FLOATS, torch.int64),
        error_inputs=einsum_errors,
    ),
    OpInfo(
        ltorch.einsum, torch.einsum, einsum_samples, dtypes=(torch.bfloat16,), atol=0.1, rtol=0.05
    ),
    OpInfo(ltorch.one_hot, F.one_hot, one_hot_samples, dtypes=(torch.int64,)),
    # Normalization
    OpInfo(
        ltorch.layer_norm,
        F.layer_norm,
        layer_norm_samples,
        dtypes=FLOATS_BF16,
        error_inputs=layer_norm_errors,
    ),
    OpInfo(
        ltorch.rms_norm,
        F.rms_norm,
        rms_norm_samples,
        dtypes=FLOATS_BF16,
        error_inputs=rms_norm_errors,
    ),
    # Groups of four elements: the variance is sensitive to summation order.
    OpInfo(
        ltorch.group_norm,
        F.group_norm,
        group_norm_samples,
        dtypes=FLOATS,
        error_inputs=group_norm_errors,
        atol=1e-4,
        rtol=1e-4,
    ),
    OpInfo(ltorch.group_norm, F.group_norm, group_norm_samples, dtypes=(torch.bfloat16,)),
    OpInfo(
        ltorch.batch_norm,
        F.batch_norm,
        batch_norm_samples,
        dtypes=FLOATS,
        error_inputs=batch_norm_errors,
    ),
    # torch rounds the batch statistics to bfloat16 before normalizing; we keep them in float32.
    OpInfo(
        ltorch.batch_norm,
        F.batch_norm,
        batch_norm_samples,
        dtypes=(torch.bfloat16,),
        atol=0.1,
        rtol=0.05,
    ),
    OpInfo(ltorch.instance_norm, F.instance_norm, instance_norm_samples, dtypes=FLOATS),
    OpInfo(
        ltorch.instance_norm,
        F.instance_norm,
        instance_norm_samples,
        dtypes=(torch.bfloat16,),
        atol=0.1,
        rtol=0.05,
    ),
    OpInfo(ltorch.normalize, F.normalize, normalize_samples, dtypes=FLOATS_BF16),
    OpInfo(
        ltorch.cosine_similarity, F.cosine_similarity, cosine_similarity_samples, dtypes=FLOATS_BF16
    ),
    OpInfo(ltorch.pairwise_distance, F.pairwise_distance, pairwise_distance_samples, dtypes=FLOATS),
    # Activations
    OpInfo(
        ltorch.gelu, F.gelu, finite_activation_samples, dtypes=FLOATS_BF16, error_inputs=gelu_errors
    ),
    OpInfo(
        ltorch.gelu,
        F.gelu,
        _with(finite_activation_samples, approximate="tanh"),
        dtypes=FLOATS_BF16,
        name="gelu_tanh",
    ),
    OpInfo(ltorch.silu, F.silu, activation_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.relu, torch.relu, activation_samples, dtypes=(*FLOATS_BF16, torch.int64)),
    # inplace=True: computed out of place and copied into the input.
    OpInfo(
        ltorch.relu,
        F.relu,
        _with(activation_samples, inplace=True),
        dtypes=FLOATS,
        name="relu_inplace",
    ),
    OpInfo(
        ltorch.silu,
        F.silu,
        _with(activation_samples, inplace=True),
        dtypes=FLOATS,
        name="silu_inplace",
    ),
    OpInfo(ltorch.relu6, F.relu6, activation_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.leaky_relu, F.leaky_relu, activation_samples, dtypes=FLOATS_BF16),
    OpInfo(
        ltorch.leaky_relu,
        F.leaky_relu,
        _with(activation_samples, negative_slope=0.2),
        dtypes=FLOATS,
        name="leaky_relu_slope",
    ),
    OpInfo(ltorch.elu, F.elu, _with(activation_samples, alpha=0.7), dtypes=FLOATS_BF16),
    OpInfo(ltorch.selu, F.selu, activation_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.celu, F.celu, _with(activation_samples, alpha=1.5), dtypes=FLOATS_BF16),
    OpInfo(
        ltorch.hardtanh,
        F.hardtanh,
        _with(activation_samples, min_val=-2.0, max_val=0.5),
        dtypes=(*FLOATS_BF16, torch.int64),
    ),
    OpInfo(ltorch.softplus, F.softplus, activation_samples, dtypes=FLOATS_BF16),
    OpInfo(
        ltorch.softplus,
        F.softplus,
        _with(activation_samples, beta=2.0, threshold=5.0),
        dtypes=FLOATS,
        name="softplus_beta",
    ),
    OpInfo(ltorch.mish, F.mish, activation_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.hardsigmoid, F.hardsigmoid, activation_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.hardswish, F.hardswish, activation_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.logsigmoid, F.logsigmoid, activation_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.softsign, F.softsign, activation_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.tanhshrink, F.tanhshrink, activation_samples, dtypes=FLOATS),
    OpInfo(
        ltorch.threshold,
        F.threshold,
        _with(activation_samples, threshold=0.5, value=-1.0),
        dtypes=FLOATS_BF16,
    ),
    OpInfo(ltorch.prelu, F.prelu, prelu_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.glu, F.glu, glu_samples, dtypes=FLOATS_BF16, error_inputs=glu_errors),
    OpInfo(
        ltorch.softmax,
        torch.softmax,
        softmax_samples,
        dtypes=FLOATS_BF16,
        error_inputs=softmax_errors,
    ),
    OpInfo(ltorch.log_softmax, torch.log_softmax, softmax_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.softmin, F.softmin, softmax_samples, dtypes=FLOATS_BF16),
    # Dropout and attention
    OpInfo(
        ltorch.dropout,
        F.dropout,
        dropout_identity_samples,
        dtypes=FLOATS_BF16,
        error_inputs=dropout_errors,
    ),
    OpInfo(ltorch.dropout, F.dropout, dropout_p1_samples, dtypes=FLOATS, name="dropout_p1"),
    OpInfo(
        ltorch.dropout,
        F.dropout,
        dropout_random_samples,
        dtypes=FLOATS_BF16,
        name="dropout_random",
        compare=dropout_compare,
    ),
    OpInfo(
        ltorch.scaled_dot_product_attention,
        F.scaled_dot_product_attention,
        sdpa_samples,
        dtypes=FLOATS_BF16,
        error_inputs=sdpa_errors,
    ),
    # Convolution and pooling
    OpInfo(ltorch.conv1d, F.conv1d, conv1d_samples, dtypes=FLOATS_BF16),
    OpInfo(ltorch.conv2d, F.conv2d, conv2d_samples, dtypes=FLOATS_BF16, error_inputs=conv2d_errors),
    OpInfo(ltorch.conv3d, F.conv3d, conv3d_samples, dtypes=FLOATS),
    OpInfo(ltorch.conv_transpose1d, F.conv_transpose1d, conv_transpose1d_samples, dtypes=FLOATS),
    OpInfo(ltorch.conv_transpose2d, F.conv_transpose2d, conv_transpose2d_samples, dtypes=FLOATS),
    OpInfo(ltorch.max_pool1d, F.max_pool1d, max_pool1d_samples, dtypes=FLOATS_BF16),
    OpInfo(
        ltorch.max_pool2d,
        F.max_pool2d,
        max_pool2d_samples,
        dtypes=FLOATS_BF16,
        error_inputs=pool_errors,
    ),
    OpInfo(ltorch.avg_pool1d, F.avg_pool1d, avg_pool1d_samples, dtypes=FLOATS),
    OpInfo(ltorch.avg_pool2d, F.avg_pool2d, avg_pool2d_samples, dtypes=FLOATS_BF16),
    OpInfo(
        ltorch.adaptive_avg_pool2d,
        F.adaptive_avg_pool2d,
        adaptive_avg_pool2d_samples,
        dtypes=FLOATS_BF16,
    ),
    OpInfo(ltorch.conv_transpose3d, F.conv_transpose3d, conv_transpose3d_samples, dtypes=FLOATS),
    OpInfo(ltorch.max_pool3d, F.max_pool3d, max_pool3d_samples, dtypes=FLOATS),
    OpInfo(ltorch.avg_pool3d, F.avg_pool3d, avg_pool3d_samples, dtypes=FLOATS),
    OpInfo(
        ltorch.adaptive_avg_pool1d,
        F.adaptive_avg_pool1d,
        adaptive_avg_pool1d_samples,
        dtypes=FLOATS,
    ),
    OpInfo(
        ltorch.adaptive_avg_pool3d,
        F.adaptive_avg_pool3d,
        adaptive_avg_pool3d_samples,
        dtypes=FLOATS,
    ),
]
