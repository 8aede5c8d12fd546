"""Dropout and scaled dot-product attention.

``scaled_dot_product_attention`` is one op whose decomposition is torch's math reference
(executors such as torch's run it whole). Random draws use ``prims.uniform`` with ``seed=None``:
the ambient generator at run time, as eager torch."""

from __future__ import annotations

import math
from typing import Any

from thunder_ir import dtypes, prims
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.ops._helpers import to_dtype
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.elementwise_binary import true_divide
from thunder_ir.ops.nn import matmul
from thunder_ir.ops.nn_activations import softmax
from thunder_ir.ops.nn_backward import sdpa_flash
from thunder_ir.ops.nn_base import (
    add,
    amax_,
    eq,
    expand_reduced,
    ge,
    mul,
    opmath,
    require_tensor,
    where,
)
from thunder_ir.proxies import TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import check


@torchop("torch.nn.functional.dropout", "torch.dropout", tags=(OpTag.RANDOM,))
def dropout(a: Any, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    """As ``at::native::dropout``: on CUDA ``native_dropout``'s fused kernel; elsewhere
    ``empty_like(a).bernoulli_(1 - p)`` divided by ``1 - p`` times ``a``, so that one seed gives
    eager's mask. The backward multiplies by the saved noise, never draws again."""
    require_tensor(a, "dropout")
    check(
        0.0 <= p <= 1.0,
        lambda: f"dropout probability has to be between 0 and 1, but got {p}",
        ValueError,
    )
    if not training or p == 0 or any(isinstance(s, int) and s == 0 for s in a.shape):
        return a
    check(
        a.dtype.is_inexact, lambda: f"dropout: expected a floating point input, got {a.dtype.name}"
    )
    if p == 1:
        out = mul(a, 0.0)
    elif a.device.type == "cuda":
        out = native_dropout(a, p, True)[0]
    else:
        # In the memory order of ``a``, as eager's ``empty_like(a).bernoulli_``.
        mask = prims.bernoulli_like(a, 1.0 - p, dtype=a.dtype)
        out = mul(a, true_divide(mask, 1.0 - p))
    if inplace:
        return prims.copy_(out, a)
    return out


@torchop("torch.native_dropout", tags=(OpTag.RANDOM,))
def native_dropout(a: Any, p: float, train: bool | None) -> tuple[TensorProxy, TensorProxy]:
    """(output, bool mask): torch's fused dropout kernel, run whole by the torch executor (its
    draw is its own); the gradient is ``native_dropout_backward`` of the mask."""
    a = require_tensor(a, "native_dropout")
    mask = TensorProxy(shape=a.shape, dtype=dtypes.bool8, device=a.device)
    return a.replace(), mask


@torchop(name="native_dropout_backward")
def native_dropout_backward(grad: Any, mask: Any, scale: float) -> Any:
    grad = require_tensor(grad, "native_dropout_backward")
    return to_dtype(mul(mul(to_dtype(grad, opmath(grad.dtype)), mask), scale), grad.dtype)


def _causal_mask(q: TensorProxy, k: TensorProxy) -> TensorProxy:
    """(L, S) bool, True where key position <= query position (torch's tril of ones, top-left)."""
    L, S = q.shape[-2], k.shape[-2]
    rows = prims.iota(L, start=0, step=1, device=q.device, dtype=dtypes.int64)
    cols = prims.iota(S, start=0, step=1, device=q.device, dtype=dtypes.int64)
    rows = prims.broadcast_in_dim(rows, (L, S), (0,))
    cols = prims.broadcast_in_dim(cols, (L, S), (1,))
    return ge(rows, cols)  # type: ignore[no-any-return]


def _repeat_heads(x: TensorProxy, groups: int) -> TensorProxy:
    """``x`` (..., H, S, E) -> (..., H * groups, S, E), each head repeated ``groups`` times in
    place (torch's repeat_interleave on dim -3)."""
    if groups == 1:
        return x
    *batch, h, s, e = x.shape
    nd = x.ndim
    expanded = prims.broadcast_in_dim(
        x, (*batch, h, groups, s, e), (*range(nd - 3), nd - 3, nd - 1, nd)
    )
    return prims.reshape(expanded, (*batch, h * groups, s, e))  # type: ignore[no-any-return]


@torchop("torch.nn.functional.scaled_dot_product_attention")
def scaled_dot_product_attention(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    *,
    scale: Any = None,
    enable_gqa: bool = False,
) -> Any:
    q = require_tensor(query, "scaled_dot_product_attention", "query")
    k = require_tensor(key, "scaled_dot_product_attention", "key")
    v = require_tensor(value, "scaled_dot_product_attention", "value")
    _check_attention_arguments(q, k, v, attn_mask, dropout_p, is_causal)
    groups = (1, 1)
    if enable_gqa and q.ndim >= 3:
        groups = _head_groups(q, k, v)
    if _runs_fused(q, k, v, attn_mask, dropout_p, is_causal, groups):
        # One op that also returns the logsumexp: autodiff differentiates it with torch's fused
        # attention backward (``sdpa_flash_backward``) instead of this decomposition.
        s = _default_scale(q) if scale is None else scale
        if attn_mask is None:
            return sdpa_flash(q, k, v, is_causal, s)[0]
        if attn_mask.dtype.is_boolean:  # as eager's convert_boolean_attn_mask: -inf where False
            attn_mask = to_dtype(where(attn_mask, 0.0, -math.inf), q.dtype)
        return sdpa_flash(q, k, v, is_causal, s, attn_mask)[0]
    # As eager's _scaled_dot_product_attention_math: in float32 for float16/bfloat16, the heads
    # repeated after the upcast (their gradients summed before rounding), q and k^T each scaled
    # by the square root of the scale before the product.
    compute = opmath(q.dtype)
    qc, kc, vc = (to_dtype(x, compute) for x in (q, k, v))
    kc, vc = _repeat_heads(kc, groups[0]), _repeat_heads(vc, groups[1])
    scale_factor = _default_scale(q) if scale is None else scale
    root = abs(scale_factor) ** 0.5
    perm = (*range(kc.ndim - 2), kc.ndim - 1, kc.ndim - 2)
    scaled_q = mul(qc, 0.0 - root if scale_factor < 0 else root)
    scores = matmul(scaled_q, mul(prims.transpose(kc, perm), root))
    scores = _masked_scores(scores, q, k, attn_mask, is_causal)
    weights = _attention_weights(scores, attn_mask)
    if dropout_p > 0:
        weights = dropout(weights, dropout_p, True)
    return to_dtype(matmul(weights, vc), q.dtype)


def _default_scale(q: TensorProxy) -> Any:
    """``1 / sqrt(E)``; inf for an empty head (E = 0), as torch's C++ division gives."""
    return math.inf if _is_zero_size(q.shape[-1]) else 1.0 / math.sqrt(q.shape[-1])


def _check_attention_arguments(
    q: TensorProxy,
    k: TensorProxy,
    v: TensorProxy,
    attn_mask: Any,
    dropout_p: float,
    is_causal: bool,
) -> None:
    """torch's checks of scaled_dot_product_attention's arguments (with its messages); dropout is
    refused (``UnsupportedOptionError``): the call runs as torch's own kernel."""
    check(
        q.dtype == k.dtype == v.dtype,
        lambda: (
            f"Expected query, key, and value to have the same dtype, but got query.dtype: {q.dtype.name} key.dtype: {k.dtype.name} and value.dtype: {v.dtype.name} instead."
        ),
    )
    check(
        q.dtype.is_float,
        lambda: f"scaled_dot_product_attention: expected floating point inputs, got {q.dtype.name}",
    )
    check(
        q.ndim >= 2 and k.ndim >= 2 and v.ndim >= 2,
        "scaled_dot_product_attention: query, key and value must be at least 2-D",
    )
    check(
        q.shape[-1] == k.shape[-1],
        lambda: (
            f"Expected size for first two dimensions of batch2 tensor to be: [{q.shape[-3] if q.ndim > 2 else 1}, {q.shape[-1]}] but got: [{k.shape[-3] if k.ndim > 2 else 1}, {k.shape[-1]}]."
        ),
    )
    check(
        k.shape[-2] == v.shape[-2],
        lambda: (
            f"scaled_dot_product_attention: key and value must have the same sequence length, got {k.shape[-2]} and {v.shape[-2]}"
        ),
    )
    if is_causal and attn_mask is not None:
        _check_mask_with_causal(q, k, v)
    check(
        0.0 <= dropout_p <= 1.0,
        lambda: f"dropout probability has to be between 0 and 1, but got {dropout_p}",
        ValueError,
    )
    # With dropout, torch's own kernel (the torch fallback): the math decomposition would draw
    # eager's mask only by rounding as each backend does.
    check(
        dropout_p == 0,
        "scaled_dot_product_attention with dropout runs as torch's own kernel",
        UnsupportedOptionError,
    )


def _check_mask_with_causal(q: TensorProxy, k: TensorProxy, v: TensorProxy) -> None:
    """Both ``attn_mask`` and ``is_causal``: torch's kernels differ. Its math kernel refuses the
    pair; its fused kernels, which take 4-D inputs only (and their own choice of strides, sizes
    and backend flags), apply both masks. Where a fused kernel may run, torch's own kernel
    decides (``UnsupportedOptionError``: the call runs as the torch fallback), as in eager."""
    check(
        q.ndim == k.ndim == v.ndim == 4,
        "_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True",
    )
    raise UnsupportedOptionError(
        "scaled_dot_product_attention with both attn_mask and is_causal=True runs as torch's own "
        "kernel"
    )


def _head_groups(q: TensorProxy, k: TensorProxy, v: TensorProxy) -> tuple[int, int]:
    """``enable_gqa``: how many query heads share each key head and each value head."""
    hq, hk, hv = q.shape[-3], k.shape[-3], v.shape[-3]
    check(
        hq % hk == 0 and hq % hv == 0,
        lambda: (
            f"Number of heads in key and value must divide the number of heads in query, got {hk}, {hv} and {hq}"
        ),
    )
    return hq // hk, hq // hv


def _runs_fused(
    q: TensorProxy,
    k: TensorProxy,
    v: TensorProxy,
    attn_mask: Any,
    dropout_p: float,
    is_causal: bool = False,
    groups: tuple[int, int] = (1, 1),
) -> bool:
    """Whether the call is recorded as ``sdpa_flash`` (float32/64 or a low-precision one on the
    CPU, 4-D, same batch and heads, value's head size the query's; a mask where eager's CPU
    dispatch takes its flash kernel with it) rather than decomposed. With ``enable_gqa``
    (``groups``), key and value with as many heads as each other: torch's CPU flash kernels take
    the grouped heads themselves (eager's math path repeats them otherwise)."""
    same_heads = q.shape[1] == k.shape[1] == v.shape[1] or (
        groups[0] == groups[1] and k.shape[1] == v.shape[1]
    )
    return (
        (attn_mask is None or _flash_takes_mask(q, k, attn_mask, is_causal))
        and dropout_p == 0
        and (
            q.dtype in (dtypes.float32, dtypes.float64)
            # torch's CPU flash kernel, whose backward reads the rounded output as eager's does
            or (q.dtype in (dtypes.float16, dtypes.bfloat16) and q.device.type == "cpu")
        )
        and q.ndim == k.ndim == v.ndim == 4
        and q.shape[0] == k.shape[0] == v.shape[0]
        and same_heads
        and v.shape[-1] == q.shape[-1]
        # torch's fused kernels divide by these sizes (SIGFPE); eager takes its math path
        and not any(_is_zero_size(d) for d in (*q.shape, *k.shape))
    )


def _flash_takes_mask(q: TensorProxy, k: TensorProxy, mask: Any, is_causal: bool) -> bool:
    """aten's check_attn_mask_shape for the CPU flash kernel: a mask that requires no grad, of 2
    dims or 4 (batch and heads 1 or the query's), its last two the queries' and keys' or 1."""
    if not isinstance(mask, TensorProxy) or mask.requires_grad or is_causal:
        return False
    if q.device.type != "cpu" or not (mask.dtype.is_boolean or mask.dtype.is_float):
        return False
    if mask.ndim not in (2, 4) or q.ndim != 4 or k.ndim != 4:
        return False
    if not all(_is_one_or(m, s) for m, s in zip(mask.shape[-2:], (q.shape[2], k.shape[2]))):
        return False
    return mask.ndim == 2 or all(_is_one_or(m, s) for m, s in zip(mask.shape[:2], q.shape[:2]))


def _is_one_or(size: Any, other: Any) -> bool:
    return bool(size == 1) or bool(size == other)


def _is_zero_size(size: Any) -> bool:
    """Whether a size is 0 (a symbolic size is taken as it is on this call: a constraint)."""
    return size == 0 if isinstance(size, int) else bool(size == 0)


def _masked_scores(
    scores: TensorProxy, q: TensorProxy, k: TensorProxy, attn_mask: Any, is_causal: bool
) -> TensorProxy:
    """The attention scores with the causal mask or ``attn_mask`` applied (a boolean mask sets
    the scores it excludes to -inf; a float mask is added)."""
    if is_causal:
        return where(_causal_mask(q, k), scores, -math.inf)  # type: ignore[no-any-return]
    if attn_mask is None:
        return scores
    require_tensor(attn_mask, "scaled_dot_product_attention", "attn_mask")
    if attn_mask.dtype.is_boolean:
        return where(attn_mask, scores, -math.inf)  # type: ignore[no-any-return]
    check(
        attn_mask.dtype == q.dtype or attn_mask.dtype.is_float,
        lambda: (
            f"Expected attn_mask dtype to be bool or float or to match query dtype, but got attn_mask.dtype: {attn_mask.dtype.name} and  query.dtype: {q.dtype.name} instead."
        ),
    )
    return add(scores, to_dtype(attn_mask, scores.dtype))  # type: ignore[no-any-return]


def _attention_weights(scores: TensorProxy, attn_mask: Any) -> TensorProxy:
    """The softmax of the scores over the keys; with a mask, torch's safe softmax: a query that
    may attend to nothing gets zero weights, not NaN. Its row enters the softmax as zeros, so
    that the backward, too, gives it zero gradients (the softmax of a row of -inf is NaN, and NaN
    times a zero gradient is NaN)."""
    if attn_mask is None or _is_zero_size(scores.shape[-1]):
        # (no keys: an empty softmax, which no row's max can be taken over)
        return softmax(scores, -1)  # type: ignore[no-any-return]
    last = scores.ndim - 1
    masked_row = eq(expand_reduced(scores, amax_(scores, last), (last,)), -math.inf)
    return where(masked_row, 0.0, softmax(where(masked_row, 0.0, scores), -1))  # type: ignore[no-any-return]
