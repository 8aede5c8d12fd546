"""The "torch_ops" executor: high-level torch-language ops run as the torch function they mirror.

The torch executor runs prims, so a composite such as ``ltorch.layer_norm`` runs as its
decomposition (a dozen calls, each a full pass over memory). Where eager torch runs the whole op
as one kernel (linear, attention, convolutions and pooling, normalizations, activations, softmax,
losses, padding), this executor keeps the op and calls that kernel:
``t5 = torch_ops.layer_norm(t0, (128,), t1, t2)``. The torch function is derived from the op's
declared torch names (the ``torch.nn.functional`` one first), never written here, and is called
with the arguments the program gave the op: the result is eager's.

It is in the default executor list (``thunder.DEFAULT_EXECUTORS``: "torch_ops", "torch"): without
a fusion executor that claims a decomposition, an op that eager runs as one kernel runs as that
kernel. A fusion executor listed before it takes what it fuses first; inside its regions the ops
kept here stay whole for it. The OpInfo consistency suite (``tests/thunder_ir/test_ops.py``)
runs the decompositions without this executor, which is what it checks.

A call is kept where the torch function takes its arguments as recorded (a decomposition's
internal call that names them otherwise runs decomposed), and where its writes are eager's:
``batch_norm`` in training updates its running statistics in place (a ``prims.copy_`` of its
decomposition) and is kept only where it writes none (evaluation, or no running statistics);
``instance_norm`` only without running statistics (torch writes them back even in evaluation).
An activation given ``inplace=True`` writes its input as eager's does; the assignment keeps that
write in program order. A few ops (``KEPT_OFF_CPU``: max pooling, mish, binary_cross_entropy,
kl_div; average pooling over small windows) are kept off the CPU only, where torch's CPU kernels
are slower than the decompositions.
"""

from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable
from typing import Any

from thunder_executors.executor import (
    OperatorExecutor,
    register_executor,
    same_arguments,
    to_runtime_value,
)
from thunder_ir import BoundSymbol, NumberProxy, Symbol, TensorProxy
from thunder_ir import ops as ltorch
from thunder_ir.dtypes import to_torch_dtype
from thunder_ir.ops import own_arguments
from thunder_ir.ops.nn_activations import softmax_dtype

__all__ = ["ATEN_OPS", "KEPT_OFF_CPU", "KEPT_OPS", "RUNNERS", "torch_ops_executor"]

# ltorch ops that eager runs as one kernel (or a few, where their decomposition takes many more
# passes over memory), kept whole and run by that torch function. Left out, as no faster whole:
# sigmoid and tanh (one prim each), softsign, tanhshrink and normalize (Python composites in
# torch.nn.functional, the same passes as their decompositions) and l1_loss.
KEPT_OPS: tuple[Symbol, ...] = (
    # matrix products, attention, embedding
    ltorch.linear, ltorch.matmul, ltorch.mm, ltorch.bmm, ltorch.addmm, ltorch.baddbmm,
    ltorch.scaled_dot_product_attention, ltorch.embedding,
    # normalizations (batch_norm and instance_norm only where they write no running statistic)
    ltorch.layer_norm, ltorch.group_norm, ltorch.rms_norm, ltorch.batch_norm,
    ltorch.instance_norm,
    # activations
    ltorch.gelu, ltorch.silu, ltorch.relu, ltorch.relu6, ltorch.hardtanh, ltorch.hardswish,
    ltorch.hardsigmoid, ltorch.elu, ltorch.celu, ltorch.selu, ltorch.leaky_relu, ltorch.mish,
    ltorch.softplus, ltorch.logsigmoid, ltorch.glu, ltorch.prelu, ltorch.threshold,
    # softmax and its relatives
    ltorch.softmax, ltorch.log_softmax, ltorch.softmin, ltorch.logsumexp,
    # losses
    ltorch.cross_entropy, ltorch.nll_loss, ltorch.mse_loss, ltorch.smooth_l1_loss,
    ltorch.huber_loss, ltorch.binary_cross_entropy, ltorch.binary_cross_entropy_with_logits,
    ltorch.kl_div,
    # convolutions, pooling, padding
    ltorch.conv1d, ltorch.conv2d, ltorch.conv3d, ltorch.conv_transpose1d, ltorch.conv_transpose2d,
    ltorch.conv_transpose3d, ltorch.max_pool1d, ltorch.max_pool2d, ltorch.max_pool3d,
    ltorch.avg_pool1d, ltorch.avg_pool2d, ltorch.avg_pool3d, ltorch.adaptive_avg_pool1d,
    ltorch.adaptive_avg_pool2d, ltorch.adaptive_avg_pool3d, ltorch.pad,
    # elementwise ops and reductions whose decompositions take several passes
    ltorch.clamp, ltorch.clamp_min, ltorch.clamp_max, ltorch.nan_to_num, ltorch.lerp,
    ltorch.addcmul, ltorch.addcdiv, ltorch.hypot, ltorch.fmax, ltorch.fmin, ltorch.tril,
    ltorch.triu, ltorch.vector_norm, ltorch.nansum, ltorch.mean, ltorch.roll, ltorch.max,
    ltorch.min, ltorch.logical_and, ltorch.logical_or, ltorch.logical_xor, ltorch.count_nonzero,
    # indexed writes and factories eager runs as one kernel
    ltorch.scatter, ltorch.index_add, ltorch.index_fill, ltorch.linspace, ltorch.eye,
    ltorch.arange,
    # one kernel in eager, several passes (or a slow trunc or scalar comparison) decomposed:
    # `python -m benchmarks ops --ops frac,div_trunc,prod,all,...` measured 2-8x
    ltorch.frac, ltorch.div, ltorch.prod, ltorch.all, ltorch.any, ltorch.isneginf,
    ltorch.isposinf, ltorch.logical_not, ltorch.cosine_similarity,
    # add, sub and rsub given an alpha (two calls decomposed, rounding the product first);
    # empty tensors without a zero fill; combinations (its decomposition indexes by a literal
    # of every pair); index_copy (4 calls), normalize (7 calls against torch's 3), sum given a
    # dtype (a cast, then the sum)
    ltorch.add, ltorch.sub, ltorch.rsub, ltorch.empty, ltorch.empty_like, ltorch.combinations,
    ltorch.index_copy, ltorch.normalize, ltorch.sum,
    # one kernel, which checks the classes are in range as eager does
    ltorch.one_hot,
    # the `_like` factories: torch lays their result out as their input is laid out
    # (memory_format=torch.preserve_format: a transposed or channels-last input gives a
    # transposed or channels-last result, drawn in memory order), which a decomposition,
    # knowing no strides, cannot
    ltorch.zeros_like, ltorch.ones_like, ltorch.full_like, ltorch.rand_like, ltorch.randn_like,
    # std and std_mean: torch's CPU kernel takes the root in double, where float32's variance
    # overflows (values of 1e20) or underflows (1e-25) before its root
    ltorch.std, ltorch.std_mean,
    # masked_fill: torch's kernel checks that a tensor value fits the dtype (a value of the data,
    # unknown while tracing) and returns a contiguous result, where its decomposition's
    # torch.where keeps a transposed input's layout
    ltorch.masked_fill,
)  # fmt: skip

# Kept whole off the CPU only: torch's CPU kernels for these are slower than their
# decompositions, which run a few vectorized passes (measured on one thread: max pooling of NCHW
# tensors 2.5-7x, of 3-d windows up to 3.9x at stride 1, mish, binary_cross_entropy and kl_div
# 1.3-3x). 1-d and 2-d average pooling is kept on the CPU for windows of more than
# ``_CPU_AVG_POOL_WINDOW`` elements only: its decomposition is a pass per window element (2x
# faster for 3x3 windows, 3x slower for 7x7); 3-d average pooling always (torch's kernel was
# 1.05-2.8x faster for 2x2x2, 3x3x3 and 1x3x3 windows).
KEPT_OFF_CPU = frozenset(
    {ltorch.max_pool2d, ltorch.max_pool3d, ltorch.mish, ltorch.binary_cross_entropy, ltorch.kl_div}
)
_CPU_AVG_POOL_WINDOW = 9

# Internal ops (no torch name; see thunder_ir.ops.nn_backward, indexing.advanced_index) run with
# aten kernels.
ATEN_OPS: tuple[Symbol, ...] = (
    ltorch.native_layer_norm, ltorch.layer_norm_backward, ltorch.gelu_backward, ltorch.sdpa_flash,
    ltorch.sdpa_flash_backward, ltorch.convolution_backward_input,
    ltorch.convolution_backward_weight, ltorch.nll_loss_total_weight, ltorch.max_pool_with_indices,
    ltorch.max_pool_with_indices_backward, ltorch.embedding_backward, ltorch.native_batch_norm,
    ltorch.batch_norm_backward, ltorch.hardswish_backward, ltorch.hardsigmoid_backward,
    ltorch.hardtanh_backward, ltorch.silu_backward, ltorch.leaky_relu_backward,
    ltorch.elu_backward, ltorch.softplus_backward, ltorch.mish_backward, ltorch.advanced_index,
    ltorch.native_group_norm, ltorch.group_norm_backward, ltorch.softmax_backward_data,
    ltorch.log_softmax_backward_data, ltorch.elu_written, ltorch.elu_backward_from_result,
    ltorch.native_batch_norm_updating,
)  # fmt: skip

torch_ops_executor = OperatorExecutor("torch_ops")
register_executor(torch_ops_executor)
# The executor symbols this executor runs ops with (``torch_ops.layer_norm``): each computes a
# whole op into new memory. Filled at import time.
RUNNERS: set[Symbol] = set()


def _torch_function(op: Symbol) -> Callable[..., Any] | None:
    from thunder_ir.ops import resolve_torch_name

    names = sorted(op.torch_names, key=lambda n: not n.startswith("torch.nn.functional."))
    for name in names:
        if name.startswith("torch.Tensor."):
            continue
        fn = resolve_torch_name(name)
        if callable(fn):
            return fn  # type: ignore[no-any-return]
    return None


def _bound(op: Symbol, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    """The call's arguments by the op's parameter names, defaults filled in; None where they do
    not bind (the op's own error is raised when tracing, so this is only a refusal)."""
    sig = _op_signature(op)
    if sig is None:
        return None
    assert op.meta is not None
    args, kwargs = own_arguments(op.meta, args, kwargs)  # torch's keyword names
    first = next(iter(sig.parameters))
    kwargs = {first if k in ("input", "self") else k: v for k, v in kwargs.items()}
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return dict(bound.arguments)


@functools.cache
def _op_signature(op: Symbol) -> inspect.Signature | None:
    try:
        return inspect.signature(op.meta) if op.meta is not None else None
    except (TypeError, ValueError):
        return None


@functools.cache
def _torch_parameters(fn: Callable[..., Any]) -> tuple[int, frozenset[str]] | None:
    """How many arguments a torch C function takes by position, and the keywords it takes (from
    its aten schemas; ``input`` for ``self``), or None where no schema says."""
    import torch

    try:
        schemas = torch._C._jit_get_schemas_for_operator(f"aten::{fn.__name__}")
    except RuntimeError:
        return None
    if not schemas:
        return None
    positional = max(sum(not a.kwarg_only for a in s.arguments) for s in schemas)
    names = {a.name for s in schemas for a in s.arguments}
    if "self" in names:
        names.add("input")
    return positional, frozenset(names)


@functools.cache
def _python_signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):  # a C function
        return None


def _takes(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    """Whether ``fn`` takes the arguments as the program gave them to the op: by its Python
    signature, else by the aten schemas of its name. A dispatching wrapper (``F.max_pool2d``
    takes ``*args, **kwargs``) is taken on trust: the op's parameters are its own."""
    sig = _python_signature(fn)
    if sig is None:
        params = _torch_parameters(fn)
        if params is None:
            return True
        positional, names = params
        return len(args) <= positional and all(k in names for k in kwargs)
    try:
        sig.bind(*args, **kwargs)
    except TypeError:
        return False
    return True


def _batch_norm_writes_nothing(p: dict[str, Any]) -> bool:
    # In training, batch_norm updates the running statistics it is given, in place: that write
    # is its decomposition's (a prims.copy_ the program sees), so such a call runs decomposed.
    training = p["training"]
    if type(training) not in (bool, int):
        return False
    return not training or (p["running_mean"] is None and p["running_var"] is None)


def _no_running_stats(p: dict[str, Any]) -> bool:
    # torch's instance_norm copies the running statistics back (their mean over the batch) even
    # when it only reads them; the decomposition writes nothing: run it decomposed.
    return p["running_mean"] is None and p["running_var"] is None


def _off_cpu(p: dict[str, Any]) -> bool:
    a = next(iter(p.values()))  # the input
    return str(getattr(getattr(a, "device", None), "type", "cpu")) != "cpu"


def _avg_pool_kept(nd: int) -> Callable[[dict[str, Any]], bool]:
    def kept(p: dict[str, Any]) -> bool:
        if _off_cpu(p):
            return True
        k = p["kernel_size"]
        window = (k,) * nd if isinstance(k, (int, NumberProxy)) else tuple(k)
        if len(window) == 1:
            window *= nd
        return all(type(w) is int for w in window) and math.prod(window) > _CPU_AVG_POOL_WINDOW

    return kept


def _scaled_by_alpha(p: dict[str, Any]) -> bool:
    # Without an alpha the decomposition is torch's one call already; a number first operand is
    # no input torch.add takes.
    alpha = p["alpha"]
    return isinstance(p["a"], TensorProxy) and not (isinstance(alpha, (int, float)) and alpha == 1)


def _with_dtype(p: dict[str, Any]) -> bool:
    # Without a dtype the decomposition is torch's one call already.
    return p["dtype"] is not None


# Ops kept only for some calls, by the call's arguments bound to the op's parameters.
_CONDITIONS: dict[Symbol, Callable[[dict[str, Any]], bool]] = {
    ltorch.batch_norm: _batch_norm_writes_nothing,
    ltorch.instance_norm: _no_running_stats,
    **dict.fromkeys(KEPT_OFF_CPU, _off_cpu),
    ltorch.avg_pool1d: _avg_pool_kept(1),
    ltorch.avg_pool2d: _avg_pool_kept(2),
    ltorch.add: _scaled_by_alpha,
    ltorch.sub: _scaled_by_alpha,
    ltorch.rsub: _scaled_by_alpha,
    ltorch.sum: _with_dtype,
}


def _checker(op: Symbol, fn: Callable[..., Any]) -> Callable[..., bool]:
    condition = _CONDITIONS.get(op)

    def check(*args: Any, **kwargs: Any) -> bool:
        if not _takes(fn, args, kwargs):
            return False
        if condition is None:
            return True
        params = _bound(op, args, kwargs)
        return params is not None and condition(params)

    check.__name__ = f"{op.name}_checker"
    return check


def _runner(op: Symbol, fn: Callable[..., Any]) -> Symbol:
    """The executor symbol ``torch_ops.<op name>`` that runs ``op`` whole with ``fn``."""
    sym = Symbol(op.name, None, module="torch_ops", impl=fn, id=f"torch_ops::{op.name}")
    RUNNERS.add(sym)
    return sym


def _dtype_by_keyword(runner: Symbol) -> Callable[[BoundSymbol], BoundSymbol]:
    """softmax, log_softmax and softmin: the op takes a dtype third (torch.softmax(x, dim,
    dtype)), where the F function kept has ``_stacklevel``, which ignores it: the dtype is
    passed by keyword."""

    def translate(bsym: BoundSymbol) -> BoundSymbol:
        p = _bound(bsym.sym, bsym.args, bsym.kwargs)
        if p is None:
            return same_arguments(runner)(bsym)
        dtype = softmax_dtype(p["_stacklevel"], p["dtype"])
        args, kwargs = to_runtime_value(((p["a"], p["dim"]), {"dtype": dtype}))
        return BoundSymbol(runner, args, kwargs, bsym.output, header=bsym.header)

    return translate


# Ops whose torch function takes some argument in another slot than the op records it.
_TRANSLATIONS: dict[Symbol, Callable[[Symbol], Callable[[BoundSymbol], BoundSymbol]]] = {
    ltorch.softmax: _dtype_by_keyword,
    ltorch.log_softmax: _dtype_by_keyword,
    ltorch.softmin: _dtype_by_keyword,
}


def _register() -> None:
    for op in KEPT_OPS:
        fn = _torch_function(op)
        if fn is None:
            continue  # not in this torch (tests/thunder_executors/test_torch_ops.py)
        translation = _TRANSLATIONS.get(op, same_arguments)
        torch_ops_executor.register_implementation(
            op, translate=translation(_runner(op, fn)), checker=_checker(op, fn)
        )


def _layer_norm_backward(
    grad_out: Any, a: Any, normalized_shape: Any, mean: Any, rstd: Any, weight: Any, bias: Any
) -> tuple[Any, ...]:
    import torch

    grads = torch.ops.aten.native_layer_norm_backward(
        grad_out,
        a,
        normalized_shape,
        mean,
        rstd,
        weight,
        bias,
        [True, weight is not None, bias is not None],
    )
    return tuple(g for g in grads if g is not None)


def _gelu_backward(grad_out: Any, a: Any, approximate: str = "none") -> Any:
    import torch

    return torch.ops.aten.gelu_backward(grad_out, a, approximate=approximate)


def _softmax_backward_data(grad_out: Any, output: Any, dim: int, input_dtype: Any) -> Any:
    import torch

    dtype = to_torch_dtype(input_dtype)
    assert dtype is not None
    return torch._softmax_backward_data(grad_out, output, dim, dtype)


def _log_softmax_backward_data(grad_out: Any, output: Any, dim: int, input_dtype: Any) -> Any:
    import torch

    dtype = to_torch_dtype(input_dtype)
    assert dtype is not None
    return torch._log_softmax_backward_data(grad_out, output, dim, dtype)


def _last_dim_dense(*tensors: Any) -> tuple[Any, ...]:
    """The tensors with a last dimension of stride 1: the CPU flash kernels read rows as dense
    without checking (eager's dispatcher takes its math path for other layouts; a transposed
    ``x.transpose(1, 2)`` of a channels-first map gave wrong numbers)."""
    return tuple(t if t.stride(-1) == 1 or t.size(-1) <= 1 else t.contiguous() for t in tensors)


def _sdpa_flash(
    q: Any, k: Any, v: Any, is_causal: bool, scale: float, attn_mask: Any = None
) -> tuple[Any, Any]:
    import torch

    q, k, v = _last_dim_dense(q, k, v)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(  # type: ignore[no-any-return]
        q, k, v, 0.0, is_causal, attn_mask=attn_mask, scale=scale
    )


def _sdpa_flash_backward(
    grad_out: Any,
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    lse: Any,
    is_causal: bool,
    scale: float,
    attn_mask: Any = None,
) -> tuple[Any, Any, Any]:
    import torch

    grad_out, q, k, v, out = _last_dim_dense(grad_out, q, k, v, out)
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(  # type: ignore[no-any-return]
        grad_out, q, k, v, out, lse, 0.0, is_causal, attn_mask=attn_mask, scale=scale
    )


def _convolution_backward(which: int, grad_out: Any, a: Any, w: Any, *conv: Any) -> Any:
    """One gradient of ``aten.convolution_backward`` (0: the input's, 1: the weight's), the
    other masked off as eager's autograd masks a gradient nobody needs."""
    import torch

    mask = [which == 0, which == 1, False]
    return torch.ops.aten.convolution_backward(grad_out, a, w, None, *conv, mask)[which]


# Module-level functions: a printed program imports them by name (thunder_ir.standalone).
def _convolution_backward_input(grad_out: Any, a: Any, w: Any, *conv: Any) -> Any:
    return _convolution_backward(0, grad_out, a, w, *conv)


def _convolution_backward_weight(
    grad_out: Any, a: Any, w: Any, *conv: Any, bias: bool = False
) -> Any:
    if not bias:
        return _convolution_backward(1, grad_out, a, w, *conv)
    import torch

    sizes = [grad_out.shape[1]]
    mask = [False, True, True]
    return torch.ops.aten.convolution_backward(grad_out, a, w, sizes, *conv, mask)[1:]


def _nll_loss_total_weight(a: Any, target: Any, weight: Any, ignore_index: int) -> Any:
    """The total weight of eager's forward kernel for ``a``'s rank (``nll_loss_nd``'s shapes)."""
    import torch

    aten = torch.ops.aten
    if a.ndim <= 2:
        return aten.nll_loss_forward(a, target, weight, 1, ignore_index)[1]
    if a.ndim != 4:
        n, c = a.shape[:2]
        empty = a.numel() == 0
        a = a.contiguous().view(n, c, *((0, 0) if empty else (1, -1)))
        target = target.contiguous().view(n, *((0, 0) if empty else (1, -1)))
    return aten.nll_loss2d_forward(a, target, weight, 1, ignore_index)[1]


def _max_pool_with_indices(a: Any, kernel_size: Any, *params: Any) -> tuple[Any, Any]:
    import torch

    aten = torch.ops.aten
    fn = (aten.max_pool1d_with_indices, aten.max_pool2d_with_indices, aten.max_pool3d_with_indices)
    return fn[len(kernel_size) - 1](a, kernel_size, *params)  # type: ignore[no-any-return]


def _max_pool_with_indices_backward(
    grad_out: Any,
    a: Any,
    kernel_size: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    ceil_mode: bool,
    indices: Any,
) -> Any:
    import torch

    aten = torch.ops.aten
    if len(kernel_size) == 1:
        # torch's max_pool1d_with_indices is the 2-D pooling over a unit height; so is its grad.
        grad = aten.max_pool2d_with_indices_backward(
            grad_out.unsqueeze(-2),
            a.unsqueeze(-2),
            (1, *kernel_size),
            (1, *stride),
            (0, *padding),
            (1, *dilation),
            ceil_mode,
            indices.unsqueeze(-2),
        )
        return grad.squeeze(-2)
    fn = (aten.max_pool2d_with_indices_backward, aten.max_pool3d_with_indices_backward)
    return fn[len(kernel_size) - 2](
        grad_out, a, kernel_size, stride, padding, dilation, ceil_mode, indices
    )


def _native_batch_norm(a: Any, weight: Any, bias: Any, eps: float) -> tuple[Any, ...]:
    import torch

    return torch.ops.aten._native_batch_norm_legit.no_stats(  # type: ignore[no-any-return]
        a, weight, bias, True, 0.0, eps
    )


def _native_batch_norm_updating(
    a: Any,
    weight: Any,
    bias: Any,
    running_mean: Any,
    running_var: Any,
    momentum: float,
    eps: float,
) -> tuple[Any, ...]:
    import torch
    from torch._subclasses.fake_tensor import is_fake

    functional = torch.ops.aten._native_batch_norm_legit_functional
    if not (torch.compiler.is_compiling() or is_fake(a)):
        return functional(  # type: ignore[no-any-return]
            a, weight, bias, running_mean, running_var, True, momentum, eps
        )
    # Traced for a compiler, whose decomposition gives a float16/bfloat16 input's statistics
    # other dtypes than eager's kernel: computed from float32 copies, each result in the dtype
    # eager's kernel gives it.
    wide = torch.promote_types(a.dtype, torch.float32)
    given = [p for p in (weight, bias, running_mean, running_var) if p is not None]
    stats = a.dtype if all(p.dtype == a.dtype for p in given) else wide
    out, mean, invstd, new_mean, new_var = functional(
        *(None if t is None else t.to(wide) for t in (a, weight, bias, running_mean, running_var)),
        True,
        momentum,
        eps,
    )
    return (
        out.to(a.dtype),
        mean.to(stats),
        invstd.to(stats),
        new_mean.to(running_mean.dtype),
        new_var.to(running_var.dtype),
    )


def _batch_norm_backward(
    grad_out: Any, a: Any, weight: Any, mean: Any, invstd: Any, has_bias: bool
) -> tuple[Any, ...]:
    import torch

    mask = [True, weight is not None, has_bias]
    grads = torch.ops.aten.native_batch_norm_backward(
        grad_out, a, weight, None, None, mean, invstd, True, 0.0, mask
    )
    return tuple(g for g in grads if g is not None)


def _group_sizes(a: Any) -> tuple[int, int, int]:
    """N, C and the elements per channel, as torch's group norm kernels take them."""
    n, c = a.shape[0], a.shape[1]
    return n, c, a.numel() // (n * c) if n * c else 0


def _dense_as_torch_makes_it(a: Any) -> Any:
    """``a`` dense in the memory format torch's group norm gives its kernels (which read it as
    dense without checking: a transposed input raised)."""
    from torch._prims_common import suggest_memory_format

    return a.contiguous(memory_format=suggest_memory_format(a))


def _native_group_norm(
    a: Any, weight: Any, bias: Any, num_groups: int, eps: float
) -> tuple[Any, ...]:
    import torch

    a = _dense_as_torch_makes_it(a)
    return torch.ops.aten.native_group_norm(  # type: ignore[no-any-return]
        a, weight, bias, *_group_sizes(a), num_groups, eps
    )


def _group_norm_backward(
    grad_out: Any, a: Any, mean: Any, rstd: Any, weight: Any, num_groups: int, has_bias: bool
) -> tuple[Any, ...]:
    import torch

    mask = [True, weight is not None, has_bias]
    a, grad_out = _dense_as_torch_makes_it(a), _dense_as_torch_makes_it(grad_out)
    grads = torch.ops.aten.native_group_norm_backward(
        grad_out, a, mean, rstd, weight, *_group_sizes(a), num_groups, mask
    )
    return tuple(g for g in grads if g is not None)


def _leaky_relu_backward(torch: Any, grad_out: Any, a: Any, negative_slope: float) -> Any:
    return torch.ops.aten.leaky_relu_backward(grad_out, a, negative_slope, False)


def _elu_backward(torch: Any, grad_out: Any, a: Any, alpha: float) -> Any:
    return torch.ops.aten.elu_backward(grad_out, alpha, 1, 1, False, a)


def _elu_backward_from_result(
    torch: Any, grad_out: Any, result: Any, alpha: float, scale: float, input_scale: float
) -> Any:
    return torch.ops.aten.elu_backward(grad_out, alpha, scale, input_scale, True, result)


def _on_cpu(q: Any, *args: Any, **kwargs: Any) -> bool:
    return str(q.device.type) == "cpu"


def _aten_ops() -> dict[Symbol, Callable[..., Any]]:
    """Internal ops (no torch name) and the aten kernels that run them: the forwards that save
    what a fused backward needs, and those backwards (see ``thunder_ir.ops.nn_backward``)."""
    import torch

    return {
        ltorch.native_layer_norm: torch.ops.aten.native_layer_norm,
        ltorch.layer_norm_backward: _layer_norm_backward,
        ltorch.gelu_backward: _gelu_backward,
        ltorch.softmax_backward_data: _softmax_backward_data,
        ltorch.log_softmax_backward_data: _log_softmax_backward_data,
        ltorch.sdpa_flash: _sdpa_flash,
        ltorch.sdpa_flash_backward: _sdpa_flash_backward,
        ltorch.convolution_backward_input: _convolution_backward_input,
        ltorch.convolution_backward_weight: _convolution_backward_weight,
        ltorch.nll_loss_total_weight: _nll_loss_total_weight,
        ltorch.max_pool_with_indices: _max_pool_with_indices,
        ltorch.max_pool_with_indices_backward: _max_pool_with_indices_backward,
        ltorch.embedding_backward: torch.ops.aten.embedding_dense_backward,
        ltorch.native_batch_norm: _native_batch_norm,
        ltorch.native_batch_norm_updating: _native_batch_norm_updating,
        ltorch.batch_norm_backward: _batch_norm_backward,
        ltorch.native_group_norm: _native_group_norm,
        ltorch.group_norm_backward: _group_norm_backward,
        ltorch.hardswish_backward: torch.ops.aten.hardswish_backward,
        ltorch.hardsigmoid_backward: torch.ops.aten.hardsigmoid_backward,
        ltorch.hardtanh_backward: torch.ops.aten.hardtanh_backward,
        ltorch.silu_backward: torch.ops.aten.silu_backward,
        ltorch.leaky_relu_backward: functools.partial(_leaky_relu_backward, torch),
        ltorch.elu_backward: functools.partial(_elu_backward, torch),
        ltorch.elu_written: torch.ops.aten.elu,
        ltorch.elu_backward_from_result: functools.partial(_elu_backward_from_result, torch),
        ltorch.softplus_backward: torch.ops.aten.softplus_backward,
        ltorch.mish_backward: torch.ops.aten.mish_backward,
        # ``a[key]`` with the key's tensors: aten.index, without the dispatch of torch.ops
        ltorch.advanced_index: torch.Tensor.__getitem__,
    }


# Kernels that exist on CPU only (other devices run these ops decomposed).
_CPU_ONLY = frozenset({ltorch.sdpa_flash, ltorch.sdpa_flash_backward})


def _index_tensors_not_0d(a: Any, indices: Any) -> bool:
    # torch's __getitem__ takes a lone 0-dim integer tensor for an int: a view, where
    # advanced_index's result is new memory.
    return all(i is None or i.ndim > 0 for i in indices)


def _as_key(runner: Symbol) -> Callable[[BoundSymbol], BoundSymbol]:
    """advanced_index's call as ``a[key]``: None (a whole dimension) becomes ``:``."""

    def translate(bsym: BoundSymbol) -> BoundSymbol:
        a, indices = bsym.args
        key = (
            indices[0]
            if len(indices) == 1
            else tuple(slice(None) if i is None else i for i in indices)
        )
        return BoundSymbol(runner, (a, key), {}, bsym.output, header=bsym.header)

    return translate


def _register_aten() -> None:
    fns = _aten_ops()
    assert set(fns) == set(ATEN_OPS)
    for op, fn in fns.items():
        checker: Callable[..., Any] | None = _on_cpu if op in _CPU_ONLY else None
        runner = _runner(op, fn)
        translate = same_arguments(runner)
        if op is ltorch.advanced_index:
            checker, translate = _index_tensors_not_0d, _as_key(runner)
        torch_ops_executor.register_implementation(op, translate=translate, checker=checker)


_register()
_register_aten()
