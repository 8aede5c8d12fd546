"""CUDA autocast without a GPU: the dtypes the autocast transform gives ops on CUDA tensors.

Traces are recorded from fake CUDA tensors (``FakeTensorMode``: shapes, dtypes and devices, no
data; they need no GPU). Each check holds against two references: a table written from torch's
source (``aten/src/ATen/autocast_mode.h``'s CUDA lists: the dtype each op returns under
``torch.autocast("cuda")``), and eager torch itself, run on the same fake CUDA tensors with CUDA
autocast switched on (torch's dispatcher casts them as it casts real ones). Values are checked on
a GPU in ``tests/gpu/test_cuda_autocast_like_eager.py``.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode

import thunder
from thunder_ir import TensorProxy, check_trace, dtypes, prims, trace_function
from thunder_ir import ops as L
from thunder_ir.ops.fallback import call_torch_fallback
from thunder_ir.pytree import tree_flatten
from thunder_transforms import autocast
from thunder_transforms.autocast import LISTS, _torch_autocast_state

BF16, F16, F32, F64 = torch.bfloat16, torch.float16, torch.float32, torch.float64
LP = "autocast dtype"  # in the table: the dtype autocast runs at (bfloat16 or float16)


@contextlib.contextmanager
def cuda_autocast(state: dict[str, torch.dtype]) -> Iterator[None]:
    """Eager torch with autocast on for the devices of ``state`` (torch.autocast("cuda") itself
    refuses to turn on without a GPU; the dispatcher does not mind)."""
    with _torch_autocast_state(state):
        yield


@dataclass
class In:
    """An input: a tensor of ``shape`` and ``dtype`` (integers: values in [0, high)) on
    ``device``."""

    shape: tuple[int, ...]
    dtype: Any = F32  # or LP: the autocast dtype of the check
    device: str = "cuda"
    high: int = 3


def _make(mode: FakeTensorMode, spec: Any, state: dict[str, torch.dtype]) -> Any:
    if not isinstance(spec, In):
        return spec
    dtype = state.get(spec.device, BF16) if spec.dtype == LP else spec.dtype
    if spec.device == "cpu":  # a real tensor (fake mode lets real CPU tensors in)
        if dtype.is_floating_point:
            return torch.randn(spec.shape, dtype=dtype)
        return torch.randint(0, spec.high, spec.shape, dtype=dtype)
    with mode:
        return torch.empty(spec.shape, dtype=dtype, device=spec.device)


def _dtypes(out: Any) -> list[Any]:
    return [x.dtype for x in tree_flatten(out)[0] if isinstance(x, (torch.Tensor, TensorProxy))]


def eager_dtypes(fn: Callable[..., Any], args: list[Any], state: dict[str, torch.dtype]) -> Any:
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    inputs = [_make(mode, a, state) for a in args]
    with mode, cuda_autocast(state):
        return _dtypes(fn(*inputs))


def traced(
    fn: Callable[..., Any],
    args: list[Any],
    state: dict[str, torch.dtype],
    kwargs: dict[str, Any] | None = None,
) -> Any:
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    inputs = [_make(mode, a, state) for a in args]
    trace = trace_function(fn, *inputs, **(kwargs or {}))
    out = autocast(trace, regions=[state] * len(trace.bound_symbols))
    check_trace(out)
    return trace, out


def thunder_dtypes(
    fn: Callable[..., Any],
    args: list[Any],
    state: dict[str, torch.dtype],
    kwargs: dict[str, Any] | None = None,
) -> Any:
    _, out = traced(fn, args, state, kwargs)
    ret = out.bound_symbols[-1]
    return [dtypes.to_torch_dtype(d) for d in _dtypes(ret.args[0] if ret.args else None)]


@dataclass
class Case:
    """``ours(*inputs)`` (thunder's ops) against ``eager(*inputs)`` (torch's); ``expected``: the
    dtype of each output under CUDA autocast, from torch's source (LP: the autocast dtype)."""

    ours: Callable[..., Any]
    eager: Callable[..., Any]
    inputs: list[Any]
    expected: tuple[Any, ...]


def same(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The op ``name`` of thunder and of torch (torch.nn.functional first)."""
    return getattr(L, name), getattr(F, name, None) or getattr(torch, name)


def unary(name: str, expected: Any, dtype: torch.dtype = F32) -> Case:
    ours, eager = same(name)
    return Case(ours, eager, [In((3, 4), dtype)], (expected,))


V = (3, 4)
M = In((3, 4))
M_BF16 = In((3, 4), BF16)
M_LP = In((3, 4), LP)
TARGET = In((3,), torch.int64, high=4)

# The table, from torch's source: AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32,
# AT_FORALL_FP32_SET_OPT_DTYPE, AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE, AT_FORALL_PROMOTE
# (autocast_mode.h), registered for CUDA in autocast_mode.cpp; then ops off the lists.
CASES: dict[str, Case] = {
    # lower_precision_fp: the autocast dtype, whatever floating dtype comes in (float64 aside)
    "linear": Case(L.linear, F.linear, [M, In((5, 4)), In((5,))], (LP,)),
    "linear_low": Case(L.linear, F.linear, [M_LP, In((5, 4), LP)], (LP,)),
    "matmul": Case(L.matmul, torch.matmul, [M, In((4, 5))], (LP,)),
    "matmul_vector": Case(L.matmul, torch.matmul, [In((4,)), In((4,))], (LP,)),
    "matmul_operator": Case(lambda a, b: a @ b, lambda a, b: a @ b, [M, In((4, 2))], (LP,)),
    "mm": Case(L.mm, torch.mm, [M, In((4, 5))], (LP,)),
    "bmm": Case(L.bmm, torch.bmm, [In((2, 3, 4)), In((2, 4, 5))], (LP,)),
    "addmm": Case(L.addmm, torch.addmm, [In((3, 5)), M, In((4, 5))], (LP,)),
    "baddbmm": Case(L.baddbmm, torch.baddbmm, [In((2, 3, 5)), In((2, 3, 4)), In((2, 4, 5))], (LP,)),
    "einsum": Case(
        lambda a, b: L.einsum("ij,jk->ik", a, b),
        lambda a, b: torch.einsum("ij,jk->ik", a, b),
        [M, In((4, 5))],
        (LP,),
    ),
    # on CUDA's list itself (on the CPU, einsum is cast only through bmm, with two operands)
    "einsum_one_operand": Case(
        lambda a: L.einsum("ij->ji", a), lambda a: torch.einsum("ij->ji", a), [M], (LP,)
    ),
    "prelu": Case(L.prelu, F.prelu, [M, In((1,))], (LP,)),
    "conv1d": Case(L.conv1d, F.conv1d, [In((2, 3, 8)), In((4, 3, 3))], (LP,)),
    "conv2d": Case(L.conv2d, F.conv2d, [In((2, 3, 6, 6)), In((4, 3, 3, 3)), In((4,))], (LP,)),
    "conv3d": Case(L.conv3d, F.conv3d, [In((1, 2, 4, 4, 4)), In((3, 2, 3, 3, 3))], (LP,)),
    "conv_transpose1d": Case(L.conv_transpose1d, F.conv_transpose1d, [In((2, 3, 8)), In((3, 4, 3))], (LP,)),
    "conv_transpose2d": Case(L.conv_transpose2d, F.conv_transpose2d, [In((2, 3, 5, 5)), In((3, 4, 3, 3))], (LP,)),
    "conv_transpose3d": Case(L.conv_transpose3d, F.conv_transpose3d, [In((1, 2, 3, 3, 3)), In((2, 3, 2, 2, 2))], (LP,)),
    "sdpa": Case(
        lambda q, k, v: L.scaled_dot_product_attention(q, k, v, is_causal=True),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        [In((2, 2, 5, 8))] * 3,
        (LP,),
    ),
    "sdpa_mask": Case(
        lambda q, k, v, m: L.scaled_dot_product_attention(q, k, v, attn_mask=m),
        lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
        [In((2, 2, 5, 8))] * 3 + [In((5, 5))],
        (LP,),
    ),
    # fp32: float32, also from lower-precision inputs
    **{n: unary(n, F32, BF16) for n in ("acos", "asin", "cosh", "erfinv", "exp", "expm1")},
    **{n: unary(n, F32, BF16) for n in ("log", "log10", "log2", "log1p", "reciprocal")},
    **{n: unary(n, F32, BF16) for n in ("rsqrt", "sinh", "tan", "softplus")},
    "pow_scalar_exponent": Case(L.pow, torch.pow, [M_BF16, 2.0], (F32,)),
    "pow_operator": Case(lambda a: a**2, lambda a: a**2, [M_BF16], (F32,)),
    "pow_scalar_base": Case(lambda a: 2**a, lambda a: 2**a, [M_BF16], (F32,)),
    "pow_tensors": Case(L.pow, torch.pow, [M_BF16, M_BF16], (F32,)),
    "square": Case(L.square, torch.square, [M_BF16], (F32,)),  # torch: pow(x, 2)
    "layer_norm": Case(
        lambda x, w, b: L.layer_norm(x, (4,), w, b),
        lambda x, w, b: F.layer_norm(x, (4,), w, b),
        [M_BF16, In((4,)), In((4,))],
        (F32,),
    ),
    "layer_norm_bf16_everything": Case(
        lambda x, w, b: L.layer_norm(x, (4,), w, b),
        lambda x, w, b: F.layer_norm(x, (4,), w, b),
        [M_BF16, In((4,), BF16), In((4,), BF16)],
        (F32,),
    ),
    "native_layer_norm": Case(
        lambda x: L.native_layer_norm(x, (4,), None, None, 1e-5),
        lambda x: torch.native_layer_norm(x, (4,), None, None, 1e-5),
        [M_BF16],
        (F32, F32, F32),
    ),
    "group_norm": Case(
        lambda x, w: L.group_norm(x, 2, w),
        lambda x, w: F.group_norm(x, 2, w),
        [In((2, 4, 3), BF16), In((4,))],
        (F32,),
    ),
    "cosine_similarity": Case(L.cosine_similarity, F.cosine_similarity, [M_BF16, M_BF16], (F32,)),
    "normalize": Case(L.normalize, F.normalize, [M_BF16], (F32,)),  # x / (a float32 norm)
    "pairwise_distance": Case(L.pairwise_distance, F.pairwise_distance, [M_BF16, M_BF16], (F32,)),
    "logsumexp": Case(
        lambda a: L.logsumexp(a, 1), lambda a: torch.logsumexp(a, 1), [M_BF16], (F32,)
    ),
    "nll_loss": Case(L.nll_loss, F.nll_loss, [M_BF16, TARGET], (F32,)),
    "mse_loss": Case(L.mse_loss, F.mse_loss, [M_BF16, M_BF16], (F32,)),
    "l1_loss": Case(L.l1_loss, F.l1_loss, [M_BF16, M_BF16], (F32,)),
    "smooth_l1_loss": Case(L.smooth_l1_loss, F.smooth_l1_loss, [M_BF16, M_BF16], (F32,)),
    "huber_loss": Case(L.huber_loss, F.huber_loss, [M_BF16, M_BF16], (F32,)),
    "kl_div": Case(L.kl_div, F.kl_div, [M_BF16, M_BF16], (F32,)),
    "bce_with_logits": Case(
        L.binary_cross_entropy_with_logits, F.binary_cross_entropy_with_logits, [M_BF16, M], (F32,)
    ),
    # cross_entropy_loss is not listed; torch composes it of log_softmax (given the input's
    # dtype) and nll_loss (fp32): float32
    "cross_entropy": Case(L.cross_entropy, F.cross_entropy, [M_BF16, TARGET], (F32,)),
    "cross_entropy_after_linear": Case(
        lambda x, w, t: L.cross_entropy(L.linear(x, w), t),
        lambda x, w, t: F.cross_entropy(F.linear(x, w), t),
        [M, In((4, 4)), TARGET],
        (F32,),
    ),
    "cross_entropy_weight_none": Case(
        lambda x, t, w: L.cross_entropy(x, t, w, reduction="none"),
        lambda x, t, w: F.cross_entropy(x, t, w, reduction="none"),
        [M_BF16, TARGET, In((4,), BF16)],
        (F32,),
    ),
    "cross_entropy_probabilities": Case(L.cross_entropy, F.cross_entropy, [M_BF16, M_BF16], (F32,)),
    "cross_entropy_label_smoothing": Case(
        lambda x, t: L.cross_entropy(x, t, label_smoothing=0.1),
        lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1),
        [M_BF16, TARGET],
        (F32,),
    ),
    # fp32_set_opt_dtype (and norm's fp32_append_dtype): float32 unless a dtype is passed
    "sum": Case(L.sum, torch.sum, [M_BF16], (F32,)),
    "sum_dim": Case(lambda a: L.sum(a, 1), lambda a: torch.sum(a, 1), [M_BF16], (F32,)),
    "sum_dtype": Case(
        lambda a: L.sum(a, 1, dtype=dtypes.float16),
        lambda a: torch.sum(a, 1, dtype=F16),
        [M_BF16],
        (F16,),
    ),
    "sum_int": Case(L.sum, torch.sum, [In((3, 4), torch.int32)], (torch.int64,)),
    "prod": Case(lambda a: L.prod(a, 1), lambda a: torch.prod(a, 1), [M_BF16], (F32,)),
    "cumsum": Case(lambda a: L.cumsum(a, 1), lambda a: torch.cumsum(a, 1), [M_BF16], (F32,)),
    "cumprod": Case(lambda a: L.cumprod(a, 1), lambda a: torch.cumprod(a, 1), [M_BF16], (F32,)),
    "softmax": Case(lambda a: L.softmax(a, -1), lambda a: torch.softmax(a, -1), [M_BF16], (F32,)),
    "softmax_dtype": Case(
        lambda a: L.softmax(a, -1, dtype=dtypes.bfloat16),
        lambda a: torch.softmax(a, -1, dtype=BF16),
        [M],
        (BF16,),
    ),
    "log_softmax": Case(
        lambda a: L.log_softmax(a, -1), lambda a: F.log_softmax(a, -1), [M_BF16], (F32,)
    ),
    "softmin": Case(lambda a: L.softmin(a, -1), lambda a: F.softmin(a, -1), [M_BF16], (F32,)),
    "vector_norm": Case(L.vector_norm, torch.linalg.vector_norm, [M_BF16], (F32,)),
    "norm": Case(L.norm, torch.norm, [M_BF16], (F32,)),
    "norm_dim": Case(lambda a: L.norm(a, 2, 1), lambda a: torch.norm(a, 2, 1), [M_BF16], (F32,)),
    # promote: the widest floating input (float32 if one is, else the autocast dtype)
    "addcmul_mixed": Case(L.addcmul, torch.addcmul, [M_LP, M, M_LP], (F32,)),
    "addcmul_low": Case(L.addcmul, torch.addcmul, [M_LP, M_LP, M_LP], (LP,)),
    "addcdiv_mixed": Case(L.addcdiv, torch.addcdiv, [M, M_LP, M_LP], (F32,)),
    # a float32 0-dim tensor does not win torch's type promotion; autocast's promote it does
    "atan2_scalar_tensor": Case(L.atan2, torch.atan2, [M_LP, In((), F32)], (F32,)),
    # (index_put and scatter_add take one dtype: mixed ones come from autocast's own casts)
    "index_put_into_low": Case(
        lambda a, b, i, v: L.index_put(L.matmul(a, b), (i,), v),
        lambda a, b, i, v: torch.index_put(torch.matmul(a, b), (i,), v),
        [M, In((4, 4)), In((2,), torch.int64), In((2, 4))],
        (F32,),
    ),
    "index_put_low_values": Case(
        lambda a, b, i, v: L.index_put(v, (i,), L.matmul(a, b)),
        lambda a, b, i, v: torch.index_put(v, (i,), torch.matmul(a, b)),
        [In((2, 4)), In((4, 4)), In((2,), torch.int64), M],
        (F32,),
    ),
    "index_put_low": Case(
        lambda a, i, v: L.index_put(a, (i,), v),
        lambda a, i, v: torch.index_put(a, (i,), v),
        [M_LP, In((2,), torch.int64), In((2, 4), LP)],
        (LP,),
    ),
    "scatter_add_into_low": Case(
        lambda a, b, i, s: L.scatter_add(L.matmul(a, b), 1, i, s),
        lambda a, b, i, s: torch.scatter_add(torch.matmul(a, b), 1, i, s),
        [M, In((4, 4)), In((3, 2), torch.int64), In((3, 2))],
        (F32,),
    ),
    # float64 is never cast, not even by ops on the lists
    "matmul_float64": Case(L.matmul, torch.matmul, [In(V, F64), In((4, 2), F64)], (F64,)),
    "exp_float64": Case(L.exp, torch.exp, [In(V, F64)], (F64,)),
    "softmax_float64": Case(lambda a: L.softmax(a, 0), lambda a: torch.softmax(a, 0), [In(V, F64)], (F64,)),
    "addcmul_float64": Case(L.addcmul, torch.addcmul, [In(V, F64), M_LP, M_LP], (F64,)),
    # off the lists: as without autocast (type promotion of what comes in)
    **{n: unary(n, BF16, BF16) for n in ("sigmoid", "tanh", "relu", "gelu", "silu", "sqrt", "sin")},
    "add_mixed": Case(L.add, torch.add, [M_BF16, M], (F32,)),
    "mean": Case(L.mean, torch.mean, [M_BF16], (BF16,)),
    "var": Case(L.var, torch.var, [M_BF16], (BF16,)),
    "cat": Case(lambda a, b: L.cat([a, b]), lambda a, b: torch.cat([a, b]), [M_BF16, M], (F32,)),
    "cat_low": Case(lambda a, b: L.cat([a, b]), lambda a, b: torch.cat([a, b]), [M_BF16, M_BF16], (BF16,)),
    "batch_norm": Case(
        lambda x, w, b: L.batch_norm(x, None, None, w, b, True),
        lambda x, w, b: F.batch_norm(x, None, None, w, b, True),
        [In((2, 4, 3), BF16), In((4,)), In((4,))],
        (BF16,),
    ),
    "dropout": Case(lambda a: L.dropout(a, 0.5), lambda a: F.dropout(a, 0.5), [M_BF16], (BF16,)),
    "embedding": Case(
        lambda i, w: L.embedding(i, w), lambda i, w: F.embedding(i, w), [TARGET, M], (F32,)
    ),
    # in-place ops are not registered: they keep their tensor's dtype
    "exp_in_place": Case(lambda a: L.exp_(a * 1), lambda a: torch.exp_(a * 1), [M_BF16], (BF16,)),
    "pow_in_place": Case(lambda a: L.pow_(a * 1, 2), lambda a: (a * 1).pow_(2), [M_BF16], (BF16,)),
    # tensors on the CPU are untouched by CUDA autocast
    "cpu_matmul": Case(L.matmul, torch.matmul, [In(V, device="cpu"), In((4, 2), device="cpu")], (F32,)),
    "cpu_exp": Case(L.exp, torch.exp, [In(V, BF16, device="cpu")], (BF16,)),
    "cpu_softmax": Case(
        lambda a: L.softmax(a, -1), lambda a: torch.softmax(a, -1), [In(V, BF16, device="cpu")], (BF16,)
    ),
    # torch callables without an op (torch_fallback): the inputs eager autocast converts
    "fallback_dot": Case(
        lambda a, b: call_torch_fallback(torch.dot, (a, b), {}),
        torch.dot,
        [In((4,), LP), In((4,), LP)],
        (LP,),  # dot: promote
    ),
    "fallback_dot_mixed": Case(
        lambda a, m, v: call_torch_fallback(torch.dot, (a, L.matmul(m, v)), {}),
        lambda a, m, v: torch.dot(a, torch.matmul(m, v)),
        [In((3,)), M, In((4,))],
        (F32,),  # promote: the float32 input wins over the matmul's lower precision
    ),
    "fallback_cdist": Case(
        lambda a, b: call_torch_fallback(torch.cdist, (a, b), {}),
        torch.cdist,
        [M_BF16, In((5, 4), BF16)],
        (F32,),  # fp32
    ),
    "fallback_mv": Case(
        lambda a, b: call_torch_fallback(torch.mv, (a, b), {}) + 1,
        lambda a, b: torch.mv(a, b) + 1,
        [M, In((4,))],
        (LP,),  # lower_precision_fp
    ),
    "fallback_sdpa_dropout": Case(
        lambda q, k, v: call_torch_fallback(
            F.scaled_dot_product_attention, (q, k, v), {"dropout_p": 0.5}
        ),
        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.5),
        [In((2, 2, 5, 8))] * 3,
        (LP,),
    ),
}  # fmt: skip


def _expected(case: Case, dtype: torch.dtype) -> list[torch.dtype]:
    return [dtype if e == LP else e for e in case.expected]


@pytest.mark.parametrize("dtype", [BF16, F16])
@pytest.mark.parametrize("name", sorted(CASES))
def test_table_from_the_source(name: str, dtype: torch.dtype) -> None:
    """Thunder's dtypes are the table's, and so are eager torch's (the table is right for the
    installed torch)."""
    case = CASES[name]
    expected = _expected(case, dtype)
    assert eager_dtypes(case.eager, case.inputs, {"cuda": dtype}) == expected
    assert thunder_dtypes(case.ours, case.inputs, {"cuda": dtype}) == expected


def test_rms_norm_follows_the_installed_torch() -> None:
    """rms_norm joined CUDA's float32 list in torch 2.12 (before, it runs on what comes in)."""
    registered = torch._C._dispatch_has_kernel_for_dispatch_key("aten::rms_norm", "AutocastCUDA")
    assert (L.rms_norm in LISTS["cuda"].fp32) == registered
    for weight in (In((4,)), In((4,), BF16)):
        args = [M_BF16, weight]
        want = eager_dtypes(lambda x, w: F.rms_norm(x, (4,), w), args, {"cuda": BF16})
        if registered:
            assert want == [F32]
        assert thunder_dtypes(lambda x, w: L.rms_norm(x, (4,), w), args, {"cuda": BF16}) == want


def test_banned_binary_cross_entropy() -> None:
    args = [In(V), In(V)]
    with pytest.raises(RuntimeError, match="unsafe to autocast"):
        eager_dtypes(F.binary_cross_entropy, args, {"cuda": BF16})
    with pytest.raises(RuntimeError, match="unsafe to autocast"):
        thunder_dtypes(L.binary_cross_entropy, args, {"cuda": BF16})
    # on CPU tensors (CPU autocast off) it runs
    cpu = [In(V, device="cpu"), In(V, device="cpu")]
    assert thunder_dtypes(L.binary_cross_entropy, cpu, {"cuda": BF16}) == [F32]


def test_promote_refuses_float16_meeting_bfloat16() -> None:
    args = [M_BF16, In(V, F16), In(V, F16)]
    with pytest.raises(RuntimeError, match="Unexpected floating ScalarType"):
        eager_dtypes(torch.addcmul, args, {"cuda": BF16})
    with pytest.raises(RuntimeError, match="Unexpected floating ScalarType"):
        thunder_dtypes(L.addcmul, args, {"cuda": BF16})


def test_trace_says_where_the_casts_are() -> None:
    def mlp(x, w1, g, b, w2, t):
        h = L.layer_norm(L.gelu(L.linear(x, w1)), (8,), g, b)
        return L.cross_entropy(L.linear(h, w2), t)

    args = [In((4, 6)), In((8, 6)), In((8,)), In((8,)), In((5, 8)), In((4,), torch.int64)]
    trace, out = traced(mlp, args, {"cuda": BF16})
    text = out.python()
    assert "ltorch.linear(" in text and 'cuda:0 bf16[4, 8]"' in text  # the linear in bfloat16
    assert "ltorch.gelu(" in text  # gelu is not on the lists: it runs on the bfloat16 output
    assert "ltorch.layer_norm(" in text and 'cuda:0 f32[4, 8]"' in text  # layer_norm in float32
    # the loss as torch composes it: log_softmax in bfloat16, nll_loss in float32
    assert "ltorch.log_softmax(" in text and 'cuda:0 bf16[4, 5]"' in text
    assert "ltorch.nll_loss(" in text and "cross_entropy" not in text
    assert out.history[-1].name == "autocast"
    # the same program on CPU tensors is untouched by CUDA autocast
    cpu = [In(a.shape, a.dtype, device="cpu") for a in args]
    trace, out = traced(mlp, cpu, {"cuda": BF16})
    assert out.bound_symbols == trace.bound_symbols


def test_regions_and_nested_cpu_and_cuda_autocast() -> None:
    """Per top-level op: CUDA autocast here, off there, CPU and CUDA autocast at once
    elsewhere; each op cast by the lists of its tensors' device."""

    def fn(a, b, c, d):
        return (L.matmul(a, b), L.matmul(a, b), L.matmul(c, d), L.exp(a), L.matmul(a, b))

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    specs = (M, In((4, 2)), In(V, device="cpu"), In((4, 2), device="cpu"))
    inputs = [_make(mode, x, {}) for x in specs]
    trace = trace_function(fn, *inputs)
    both = {"cpu": BF16, "cuda": F16}
    states = [{"cuda": BF16}, None, both, both, {"cuda": dtypes.bfloat16}, None]
    out = autocast(trace, regions=states)
    check_trace(out)
    ret = out.bound_symbols[-1].args[0]
    assert [dtypes.to_torch_dtype(r.dtype) for r in ret] == [BF16, F32, BF16, F32, BF16]
    with pytest.raises(NotImplementedError, match="'cpu', 'cuda'"):
        autocast(trace, regions=[{"xpu": BF16}] * len(trace.bound_symbols))


def test_every_cuda_registration_this_ir_has_is_listed() -> None:
    """The other direction: each aten op torch 2.13 registers for CUDA autocast is on the lists
    under the name of this IR's op, or has no op here (a torch_fallback, cast by a fake run)."""
    aliases = {
        "linalg_vector_norm": L.vector_norm,
        "_scaled_dot_product_flash_attention": L.sdpa_flash,
        "convolution": prims.convolution,
        "binary_cross_entropy": L.binary_cross_entropy,
    }
    listed = LISTS["cuda"].listed()
    registered = {
        r.removeprefix("aten::").partition(".")[0]
        for r in torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCUDA")
    }
    missing = []
    for name in sorted(registered):
        sym = aliases.get(name, L.ALL_OPS.get(name))
        if sym is None:
            continue  # no op in this IR
        if sym not in listed:
            missing.append(name)
    assert missing == []


# -- against eager over the OpInfo table ----------------------------------------------------------


def _opinfo_params() -> list[Any]:
    from opinfos import ALL_OPINFOS

    return [pytest.param(info, id=info.name) for info in ALL_OPINFOS]


def _fake_limits() -> tuple[type[Exception], ...]:
    from torch._subclasses.fake_tensor import (
        DataDependentOutputException,
        DynamicOutputShapeException,
        UnsupportedOperatorException,
    )

    return (DataDependentOutputException, DynamicOutputShapeException, UnsupportedOperatorException)


# Eager raising these on fake tensors says nothing of eager on real ones.
_FAKE_LIMITS = _fake_limits()


def _fake_limit(e: BaseException | None) -> bool:
    """Whether ``e`` (or an exception it was raised while handling) is a limit of fake tensors."""
    while e is not None:
        if isinstance(e, _FAKE_LIMITS) or "no fake impl or Meta kernel" in str(e):
            return True
        e = e.__context__
    return False


def _fake_like(mode: FakeTensorMode, x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        with mode:
            return torch.empty(x.shape, dtype=x.dtype, device="cuda")
    return x


@pytest.mark.parametrize("info", _opinfo_params())
def test_opinfos_have_eager_cuda_autocast_dtypes(info: Any) -> None:
    """Every op of the OpInfo table on fake CUDA tensors: under CUDA autocast, thunder's output
    dtypes are eager torch's."""
    compared = 0
    for dtype in (F32, BF16):
        if dtype not in info.dtypes:
            continue
        for sample in list(info.sample_inputs(dtype, False))[:3]:
            for target in (BF16, F16):
                mode = FakeTensorMode(allow_non_fake_inputs=True)
                args = [_fake_like(mode, a) for a in sample.args]
                kwargs = {k: _fake_like(mode, v) for k, v in sample.kwargs.items()}
                try:
                    with mode, cuda_autocast({"cuda": target}), warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        want = _dtypes(info.ref(*args, **kwargs))
                except Exception as e:
                    if "not linked with support for cuda" in str(e):
                        continue  # torch's limit: fake CUDA tensors without a GPU
                    if _fake_limit(e):
                        # eager needs the data (cov's weight checks) or has no shape inference
                        # (histogram): not comparable on fake tensors
                        continue
                    with pytest.raises(Exception):  # noqa: B017, PT011 - eager raised too
                        thunder_dtypes(info.op, args, {"cuda": target}, kwargs)
                    continue
                got = thunder_dtypes(info.op, args, {"cuda": target}, kwargs)
                assert got == want, (sample, target)
                compared += 1
    if not compared:
        pytest.skip("no sample runs on fake CUDA tensors")


# -- thunder.jit under CUDA autocast (CPU tensors: CUDA autocast changes nothing for them) ---------


@pytest.fixture
def cuda_autocast_constructible(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.autocast("cuda") enabled without a GPU: its constructor turns itself off where CUDA
    is unavailable; entering it then only sets the (thread-local) autocast state."""
    monkeypatch.setattr(torch.cuda.amp.common, "amp_definitely_not_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)


def _mlp(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
    h = torch.nn.functional.linear(x, w).exp()
    return h, h.softmax(-1), h.sum()


@pytest.mark.usefixtures("cuda_autocast_constructible")
def test_cuda_autocast_block_in_a_program_on_cpu_tensors() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[Any, ...]:
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            out = _mlp(x, w)
            inside = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
        return (*out, x * 2 if inside == (True, torch.bfloat16) else x)

    x, w = torch.randn(3, 4), torch.randn(5, 4)
    expected = fn(x, w)
    jfn = thunder.jit(fn)
    got = jfn(x, w)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype == torch.float32
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(got[-1], x * 2)
    # CUDA autocast leaves CPU tensors as they are: nothing converted
    names = [b.sym.name for b in thunder.last_traces(jfn)[0].bound_symbols]
    assert "convert_element_type" not in names and "to" not in names


@pytest.mark.usefixtures("cuda_autocast_constructible")
def test_nested_cpu_and_cuda_autocast_blocks() -> None:
    def fn(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            with torch.autocast("cuda", dtype=torch.float16):
                a = x @ w  # CPU tensors: CPU autocast
            with torch.autocast("cuda", enabled=False):
                b = x @ w
        with torch.autocast("cuda", dtype=torch.float16):
            c = x @ w  # CUDA autocast only: untouched
        return a, b, c

    x, w = torch.randn(3, 3), torch.randn(3, 3)
    expected = fn(x, w)
    got = thunder.jit(fn)(x, w)
    assert [g.dtype for g in got] == [e.dtype for e in expected] == [BF16, BF16, F32]
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=2e-2, rtol=2e-2)


def test_ambient_cuda_autocast_no_longer_refused() -> None:
    """Called under CUDA autocast (set here without the context manager, which needs a GPU):
    compiled, recompiled when the state changes, and CPU tensors computed as without it."""
    jfn = thunder.jit(_mlp)
    x, w = torch.randn(3, 4), torch.randn(5, 4)
    plain = jfn(x, w)
    for dtype in (torch.bfloat16, torch.float16):
        with cuda_autocast({"cuda": dtype}):
            assert torch.is_autocast_enabled("cuda")
            got = jfn(x, w)
            expected = _mlp(x, w)
        for g, e, p in zip(got, expected, plain):
            assert g.dtype == e.dtype == p.dtype == torch.float32
            torch.testing.assert_close(g, e)
    assert thunder.compile_stats(jfn).cache_misses == 3  # type: ignore[attr-defined]
    # both at once: the CPU's lists for CPU tensors
    with cuda_autocast({"cuda": torch.float16, "cpu": torch.bfloat16}):
        got, expected = jfn(x, w), _mlp(x, w)
    assert [g.dtype for g in got] == [e.dtype for e in expected]


@pytest.mark.usefixtures("cuda_autocast_constructible")
def test_disabled_cuda_block_under_ambient_cuda_autocast() -> None:
    def fn(x: torch.Tensor) -> tuple[bool, bool]:
        outside = torch.is_autocast_enabled("cuda")
        with torch.autocast("cuda", enabled=False):
            inside = torch.is_autocast_enabled()  # no device type: CUDA
        return x * (2 if outside else 1), x * (3 if inside else 1)  # type: ignore[return-value]

    x = torch.randn(3)
    with cuda_autocast({"cuda": torch.bfloat16}):
        got = thunder.jit(fn)(x)
        expected = fn(x)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    torch.testing.assert_close(got[0], x * 2)
    torch.testing.assert_close(got[1], x)


def test_cpu_fallback_under_cpu_autocast_runs_as_eager() -> None:
    """A torch callable without an op, traced under ambient autocast: its inputs are converted
    as eager converts them (before, its outputs were inferred under autocast and it ran without:
    cdist has no bfloat16 kernel on the CPU)."""

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.cdist(a, b) + 1

    a, b = torch.randn(3, 4, dtype=BF16), torch.randn(5, 4, dtype=BF16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = fn(a, b)
        got = thunder.jit(fn)(a, b)
    assert got.dtype == expected.dtype == torch.float32
    torch.testing.assert_close(got, expected)
