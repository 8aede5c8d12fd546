"""Matrix products, embeddings and one-hot encoding: the linear-algebra side of neural networks.

matmul, linear and embedding stay single ops over their prims so that executors claim them whole;
addmm/baddbmm decompose into a product and a scaled sum, as GPT-2's Conv1D uses them (executors
run them whole, and their grad rules keep them whole while training: one rounding, as eager)."""

from __future__ import annotations

from typing import Any

from thunder_ir import dtypes, prims
from thunder_ir.errors import UnsupportedOptionError
from thunder_ir.ops._registry import torchop
from thunder_ir.ops.elementwise import check_number_fits
from thunder_ir.ops.nn_base import add, mul, not_implemented, require_tensor
from thunder_ir.proxies import TensorProxy
from thunder_ir.tags import OpTag
from thunder_ir.utils import check

_MM = (OpTag.MATMUL,)


def _same_dtype(a: TensorProxy, b: TensorProxy) -> None:
    check(
        a.dtype == b.dtype,
        lambda: (
            f"expected m1 and m2 to have the same dtype, but got: {a.dtype.name} != {b.dtype.name}"
        ),
    )


@torchop("torch.matmul", "torch.Tensor.matmul", tags=_MM)
def matmul(a: Any, b: Any) -> Any:
    require_tensor(a, "matmul")
    require_tensor(b, "matmul", "other")
    _same_dtype(a, b)
    return prims.matmul(a, b)


@torchop("torch.mm", "torch.Tensor.mm", tags=_MM)
def mm(a: Any, b: Any) -> Any:
    require_tensor(a, "mm")
    require_tensor(b, "mm", "mat2")
    check(a.ndim == 2, "self must be a matrix")
    check(b.ndim == 2, "mat2 must be a matrix")
    _same_dtype(a, b)
    return prims.matmul(a, b)


@torchop("torch.bmm", "torch.Tensor.bmm", tags=_MM)
def bmm(a: Any, b: Any) -> Any:
    require_tensor(a, "bmm")
    require_tensor(b, "bmm", "mat2")
    check(a.ndim == 3, "batch1 must be a 3D tensor")
    check(b.ndim == 3, "batch2 must be a 3D tensor")
    check(
        a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1],
        lambda: (
            f"Expected size for first two dimensions of batch2 tensor to be: [{a.shape[0]}, {a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}]."
        ),
    )
    _same_dtype(a, b)
    return prims.matmul(a, b)


@torchop("torch.nn.functional.linear", tags=_MM)
def linear(a: Any, weight: Any, bias: Any = None) -> Any:
    require_tensor(a, "linear")
    require_tensor(weight, "linear", "weight")
    return prims.linear(a, weight, bias)


def _scaled_sum(op: str, a: Any, product: TensorProxy, beta: Any, alpha: Any) -> TensorProxy:
    require_tensor(a, op)
    check(
        a.dtype == product.dtype,
        lambda: (
            f"{op}: expected self and mat2 to have the same dtype, but got: {a.dtype.name} != {product.dtype.name}"
        ),
    )
    for v in (beta, alpha):
        check_number_fits(v, product.dtype)  # torch converts them to the dtype, checked
    if product.dtype.is_exact:
        # torch's integer kernels read a float beta or alpha as an integer (truncated toward
        # zero: beta=0.5 ignores ``input``), where ``addr`` and ``add`` refuse one.
        beta, alpha = (int(v) if isinstance(v, float) else v for v in (beta, alpha))
    scaled = product if alpha == 1 else mul(product, alpha)
    if beta == 0:  # torch ignores ``input`` then (NaN and inf in it do not propagate)
        return scaled
    term = a if beta == 1 else mul(a, beta)
    return add(term, scaled)  # type: ignore[no-any-return]


@torchop("torch.addmm", "torch.Tensor.addmm", tags=_MM)
def addmm(a: Any, mat1: Any, mat2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    require_tensor(mat1, "addmm", "mat1")
    require_tensor(mat2, "addmm", "mat2")
    check(mat1.ndim == 2, lambda: f"mat1 must be a matrix, got {mat1.ndim}-D tensor")
    check(mat2.ndim == 2, lambda: f"mat2 must be a matrix, got {mat2.ndim}-D tensor")
    _same_dtype(mat1, mat2)
    product = prims.matmul(mat1, mat2)
    out = _scaled_sum("addmm", a, product, beta, alpha)
    check(
        out.shape == product.shape,
        lambda: (
            f"The expanded size of the tensor ({product.shape}) must match the existing size ({a.shape})"
        ),
    )
    return out


@torchop("torch.baddbmm", "torch.Tensor.baddbmm", tags=_MM)
def baddbmm(a: Any, batch1: Any, batch2: Any, *, beta: Any = 1, alpha: Any = 1) -> Any:
    product = bmm(batch1, batch2)
    out = _scaled_sum("baddbmm", a, product, beta, alpha)
    check(
        out.shape == product.shape,
        lambda: (
            f"The expanded size of the tensor ({product.shape}) must match the existing size ({a.shape})"
        ),
    )
    return out


@torchop("torch.outer", "torch.Tensor.outer", "torch.ger", "torch.Tensor.ger")
def outer(a: Any, b: Any) -> Any:
    require_tensor(a, "outer")
    require_tensor(b, "outer", "vec2")
    check(
        a.ndim == 1 and b.ndim == 1,
        lambda: (
            f"outer: Expected 1-D argument self, but got {a.ndim}-D"
            if a.ndim != 1
            else f"outer: Expected 1-D argument vec2, but got {b.ndim}-D"
        ),
    )
    return mul(prims.reshape(a, (a.shape[0], 1)), b)


@torchop("torch.nn.functional.embedding")
def embedding(
    a: Any,
    weight: Any,
    padding_idx: Any = None,
    max_norm: Any = None,
    norm_type: float = 2.0,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Any:
    """The forward of embedding is a row lookup; ``padding_idx`` and ``scale_grad_by_freq`` only
    shape the gradient (they stay on the bound symbol for the grad rule)."""
    require_tensor(a, "embedding")
    require_tensor(weight, "embedding", "weight")
    check(weight.ndim == 2, "'weight' must be 2-D")
    if max_norm is not None:
        raise not_implemented("embedding", "max_norm (renormalizes the weight in place)")
    if sparse:
        raise not_implemented("embedding", "sparse=True (sparse gradients)")
    if padding_idx is not None:
        n = weight.shape[0]
        check(-n <= padding_idx < n, "Padding_idx must be within num_embeddings", AssertionError)
    return prims.embedding(a, weight)


@torchop("torch.nn.functional.one_hot")
def one_hot(a: Any, num_classes: int = -1) -> Any:
    require_tensor(a, "one_hot", "self")
    check(a.dtype == dtypes.int64, "one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        raise UnsupportedOptionError(
            "one_hot: num_classes=-1 (inferred from the data) is not supported; pass num_classes"
        )
    check(num_classes > 0, "num_classes should be positive")
    # As at::one_hot: ones scattered into zeros, so that a class out of range raises (a compare
    # with each class would give a row of zeros for it)
    shape = (*a.shape, num_classes)
    index = prims.unsqueeze(a, a.ndim)
    zeros = prims.full(shape, 0, device=a.device, dtype=dtypes.int64)
    ones = prims.full(tuple(index.shape), 1, device=a.device, dtype=dtypes.int64)
    return prims.scatter_add(zeros, a.ndim, index, ones)
