"""Hand-written Triton kernels and their host functions: row softmax and fused cross-entropy
(forward: per-row loss and log-sum-exp in one pass; backward: the logits' gradient in one pass).

Imported only when triton is importable (see ``triton_executor``). Without a GPU the kernels run
under ``TRITON_INTERPRET=1`` on CPU tensors; the same kernels compile for CUDA targets.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

__all__ = [
    "KERNELS",
    "MAX_COLUMNS",
    "CrossEntropyFunction",
    "cross_entropy",
    "cross_entropy_backward",
    "cross_entropy_backward_kernel",
    "cross_entropy_forward",
    "cross_entropy_forward_kernel",
    "softmax",
    "softmax_kernel",
]

# One program per row holds the whole row: rows longer than this would not fit.
MAX_COLUMNS = 1 << 17


@triton.jit  # type: ignore[untyped-decorator, misc]
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK: tl.constexpr):  # type: ignore[no-untyped-def, untyped-decorator, misc]
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    den = tl.sum(num, axis=0)
    y = num / den
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit  # type: ignore[untyped-decorator, misc]
def cross_entropy_forward_kernel(  # type: ignore[no-untyped-def, untyped-decorator, misc]
    loss_ptr, lse_ptr, logits_ptr, target_ptr, row_stride, n_cols, ignore_index, BLOCK: tl.constexpr
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(logits_ptr + row * row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    lse = m + tl.log(tl.sum(tl.exp(x - m), axis=0))
    target = tl.load(target_ptr + row)
    x_target = tl.sum(tl.where(cols == target, x, 0.0), axis=0)
    loss = tl.where(target == ignore_index, 0.0, lse - x_target)
    tl.store(loss_ptr + row, loss)
    tl.store(lse_ptr + row, lse)


@triton.jit  # type: ignore[untyped-decorator, misc]
def cross_entropy_backward_kernel(  # type: ignore[no-untyped-def, untyped-decorator, misc]
    grad_logits_ptr,
    grad_loss_ptr,
    grad_loss_stride,
    logits_ptr,
    row_stride,
    target_ptr,
    lse_ptr,
    n_cols,
    ignore_index,
    BLOCK: tl.constexpr,
):
    # d loss_row / d logits = softmax(row) - one_hot(target), scaled by the row's incoming grad.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(logits_ptr + row * row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    lse = tl.load(lse_ptr + row)
    target = tl.load(target_ptr + row)
    g = tl.load(grad_loss_ptr + row * grad_loss_stride).to(tl.float32)
    p = tl.exp(x - lse)
    grad = (p - tl.where(cols == target, 1.0, 0.0)) * g
    grad = tl.where(target == ignore_index, 0.0, grad)
    out = grad_logits_ptr + row * n_cols + cols
    tl.store(out, grad.to(grad_logits_ptr.dtype.element_ty), mask=mask)


# Every kernel with the argument types of a float32 instance (for ahead-of-time compilation).
KERNELS: dict[str, tuple[Any, dict[str, str]]] = {
    "softmax_kernel": (
        softmax_kernel,
        {
            "out_ptr": "*fp32",
            "in_ptr": "*fp32",
            "in_row_stride": "i32",
            "out_row_stride": "i32",
            "n_cols": "i32",
        },
    ),
    "cross_entropy_forward_kernel": (
        cross_entropy_forward_kernel,
        {
            "loss_ptr": "*fp32",
            "lse_ptr": "*fp32",
            "logits_ptr": "*fp32",
            "target_ptr": "*i64",
            "row_stride": "i32",
            "n_cols": "i32",
            "ignore_index": "i32",
        },
    ),
    "cross_entropy_backward_kernel": (
        cross_entropy_backward_kernel,
        {
            "grad_logits_ptr": "*fp32",
            "grad_loss_ptr": "*fp32",
            "grad_loss_stride": "i32",
            "logits_ptr": "*fp32",
            "row_stride": "i32",
            "target_ptr": "*i64",
            "lse_ptr": "*fp32",
            "n_cols": "i32",
            "ignore_index": "i32",
        },
    ),
}


def _rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a 2-D tensor of rows with unit column stride (copies only when it must)."""
    x = x.resolve_neg()  # the kernels read storage: a lazily negated view is materialized
    x2 = x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x
    return x2 if x2.stride(-1) == 1 else x2.contiguous()


def softmax(a: torch.Tensor, dim: int) -> torch.Tensor:
    """torch.softmax(a, dim) by the row kernel (``dim`` is moved last when it is not)."""
    if a.ndim == 0:
        return torch.ones_like(a)
    moved = dim % a.ndim != a.ndim - 1
    x = a.movedim(dim, -1) if moved else a
    rows = _rows(x)
    out = torch.empty(rows.shape, dtype=a.dtype, device=a.device)
    n_rows, n_cols = rows.shape
    if n_rows and n_cols:
        block = triton.next_power_of_2(n_cols)
        softmax_kernel[(n_rows,)](out, rows, rows.stride(0), out.stride(0), n_cols, BLOCK=block)
    result = out.reshape(x.shape)
    return result.movedim(-1, dim) if moved else result


def cross_entropy_forward(
    logits: torch.Tensor, target: torch.Tensor, ignore_index: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row losses (0 where the target is ignored) and per-row log-sum-exp, in float32."""
    rows = _rows(logits)
    n_rows, n_cols = rows.shape
    loss = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
    lse = torch.empty(n_rows, dtype=torch.float32, device=logits.device)
    if n_rows:
        block = triton.next_power_of_2(n_cols)
        cross_entropy_forward_kernel[(n_rows,)](
            loss, lse, rows, target.contiguous(), rows.stride(0), n_cols, ignore_index, BLOCK=block
        )
    return loss, lse


def cross_entropy_backward(
    grad_rows: torch.Tensor,
    logits: torch.Tensor,
    target: torch.Tensor,
    lse: torch.Tensor,
    ignore_index: int,
) -> torch.Tensor:
    """The logits' gradient; ``grad_rows`` is one value per row, or one value (stride 0) for all."""
    rows = _rows(logits)
    n_rows, n_cols = rows.shape
    grad = torch.empty((n_rows, n_cols), dtype=logits.dtype, device=logits.device)
    g = grad_rows.to(torch.float32).resolve_neg().reshape(-1)
    g_stride = 0 if g.numel() == 1 else g.stride(0)
    if n_rows:
        block = triton.next_power_of_2(n_cols)
        cross_entropy_backward_kernel[(n_rows,)](
            grad,
            g,
            g_stride,
            rows,
            rows.stride(0),
            target.contiguous(),
            lse,
            n_cols,
            ignore_index,
            BLOCK=block,
        )
    return grad.reshape(logits.shape)


class CrossEntropyFunction(torch.autograd.Function):
    """Cross-entropy whose forward and backward are the fused kernels."""

    @staticmethod
    def forward(
        ctx: Any, logits: torch.Tensor, target: torch.Tensor, ignore_index: int, reduction: str
    ) -> torch.Tensor:
        loss_rows, lse = cross_entropy_forward(logits, target, ignore_index)
        ctx.save_for_backward(logits, target, lse)
        ctx.ignore_index, ctx.reduction = ignore_index, reduction
        if reduction == "none":
            return loss_rows.to(logits.dtype)
        total = loss_rows.sum()
        if reduction == "sum":
            return total.to(logits.dtype)
        ctx.n_valid = (target != ignore_index).sum()
        mean: torch.Tensor = (total / ctx.n_valid).to(logits.dtype)
        return mean

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        logits, target, lse = ctx.saved_tensors
        if ctx.reduction == "mean":
            grad = grad / ctx.n_valid
        grad_logits = cross_entropy_backward(grad, logits, target, lse, ctx.ignore_index)
        return grad_logits, None, None, None


def cross_entropy(
    logits: torch.Tensor, target: torch.Tensor, *, ignore_index: int = -100, reduction: str = "mean"
) -> torch.Tensor:
    """torch.nn.functional.cross_entropy for [N, C] logits and [N] class indices."""
    out: torch.Tensor = CrossEntropyFunction.apply(logits, target, ignore_index, reduction)  # type: ignore[no-untyped-call]
    return out
