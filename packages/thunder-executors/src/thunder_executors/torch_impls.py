"""Implementations of the prims that have no 1:1 torch function.

Execution traces print these as ``torch_ex.<name>(...)``; the name binds to this module, so what
runs is exactly what is read. Each function takes torch values (torch dtypes and devices: the
execution trace converts IR values once, when it is built).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from thunder_ir import Symbol, prims

__all__ = [
    "NUMBER_FUNCTIONS",
    "broadcast_in_dim",
    "clone_layout",
    "convert_element_type",
    "copy_",
    "device_put",
    "embedding",
    "imag",
    "index_put",
    "index_put_",
    "iota",
    "linear",
    "normal",
    "number_to_tensor_then",
    "pad",
    "prod_dims",
    "reduce_no_dims",
    "shallow_copy",
    "slice_with_strides",
    "take",
    "tensor",
    "torch_fallback_sized",
    "torch_fallback_vjp",
    "uniform",
    "var_mean",
    "where",
]


def broadcast_in_dim(
    a: torch.Tensor, shape: Sequence[int], broadcast_dimensions: Sequence[int]
) -> torch.Tensor:
    """``a`` placed at ``broadcast_dimensions`` of ``shape`` and expanded to it (a view)."""
    if a.ndim != len(shape):
        view_shape = [1] * len(shape)
        for src, dst in enumerate(broadcast_dimensions):
            view_shape[dst] = a.shape[src]
        a = a.reshape(view_shape)
    return a.expand(shape)


def slice_with_strides(
    a: torch.Tensor,
    start_indices: Sequence[int],
    end_indices: Sequence[int],
    strides: Sequence[int] | None = None,
) -> torch.Tensor:
    """``a[start:end:stride, ...]`` per dimension (a view)."""
    if strides is None:
        return a[tuple(map(slice, start_indices, end_indices))]
    return a[tuple(map(slice, start_indices, end_indices, strides))]


def pad(
    a: torch.Tensor, padding_value: Any, padding_config: Sequence[tuple[int, int, int]]
) -> torch.Tensor:
    """jax.lax.pad: per dimension (low, high, interior); low and high may be negative (crop)."""
    if any(interior for _, _, interior in padding_config):
        # Interior padding: scatter the input into a strided view of a filled tensor first.
        shape = [
            s + max(s - 1, 0) * interior for s, (_, _, interior) in zip(a.shape, padding_config)
        ]
        spread = torch.full(shape, padding_value, dtype=a.dtype, device=a.device)
        spread[tuple(slice(None, None, interior + 1) for _, _, interior in padding_config)] = a
        a = spread
    flat: list[int] = []
    for low, high, _ in reversed(padding_config):
        flat += (low, high)
    if not any(flat):
        return a.clone()
    if isinstance(padding_value, complex):  # (F.pad's binding takes a float value only)
        return torch.constant_pad_nd(a, flat, padding_value)
    return F.pad(a, flat, mode="constant", value=padding_value)


def convert_element_type(a: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return a.to(dtype)


def reduce_no_dims(reduction: str, a: torch.Tensor, **kwargs: Any) -> Any:
    """``torch.<reduction>`` over an empty set of dims: over a new size-1 dim (torch reads () as
    all dims)."""
    return getattr(torch, reduction)(a.unsqueeze(-1), -1, **kwargs)


def prod_dims(
    a: torch.Tensor, dims: Sequence[int], *, dtype: torch.dtype | None = None
) -> torch.Tensor:
    """The product over several dims (torch.prod takes one)."""
    for d in sorted(dims, reverse=True):
        a = torch.prod(a, d, dtype=dtype)
    return a


def var_mean(
    a: torch.Tensor, dims: Sequence[int], *, correction: float
) -> tuple[torch.Tensor, torch.Tensor]:
    if not dims:
        return reduce_no_dims("var_mean", a, correction=correction)  # type: ignore[no-any-return]
    return torch.var_mean(a, tuple(dims), correction=correction)


def tensor(
    values: tuple[Any, ...], shape: tuple[int, ...], *, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """A tensor of ``values`` (row-major) in ``shape``: new memory, not a view, as eager's."""
    if not shape and _exact_integer(values[0], dtype):
        # a third of torch.tensor's time (a sliding window's size, a position)
        return torch.scalar_tensor(values[0], dtype=dtype, device=device)
    if 0 in shape:
        return torch.empty(shape, dtype=dtype, device=device)
    return torch.tensor(_nested(values, shape), dtype=dtype, device=device)


def _nested(values: Sequence[Any], shape: Sequence[int]) -> Any:
    """Row-major ``values`` as the nested lists of ``shape`` (no zero in it)."""
    if not shape:
        return values[0]
    if len(shape) == 1:
        return values
    step = len(values) // shape[0]
    return [_nested(values[i : i + step], shape[1:]) for i in range(0, len(values), step)]


def _exact_integer(value: Any, dtype: torch.dtype) -> bool:
    """Whether ``torch.scalar_tensor`` makes ``value`` as ``torch.tensor`` does: an int of an
    integer dtype within int64, a bool of bool. (A float out of range becomes inf in one and
    raises in the other, so floats take ``torch.tensor``; an int beyond int64 raises a different
    error in each.)"""
    if dtype == torch.bool:
        return type(value) is bool
    return (
        type(value) is int
        and -(2**63) <= value < 2**63
        and not dtype.is_floating_point
        and not dtype.is_complex
    )


def iota(
    length: int, *, start: Any, step: Any, device: torch.device, dtype: torch.dtype
) -> torch.Tensor:
    """``start, start + step, ...`` (``length`` values)."""
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.arange(start, start + length * step, step, device=device, dtype=dtype)
    out: torch.Tensor = torch.arange(length, device=device, dtype=dtype) * step + start
    return out


def _generator(device: torch.device, seed: int, offset: int) -> torch.Generator:
    # One deterministic stream per (seed, offset): a pure function of both, as the prim promises.
    g = torch.Generator(device=device)
    g.manual_seed((int(seed) * 0x9E3779B97F4A7C15 + int(offset)) % (2**63))
    return g


def drawn(
    method: str,
    shape: Sequence[int],
    params: tuple[Any, ...],
    device: torch.device,
    dtype: torch.dtype,
    seed: Any,
    offset: Any,
) -> torch.Tensor:
    """A new tensor filled in place by the random ``method`` (``uniform_``, ``bernoulli_``...),
    eager's own kernel: from the ambient torch RNG when ``seed`` is None, else from a function of
    (seed, offset)."""
    out = torch.empty(shape, device=device, dtype=dtype)
    gen = None if seed is None else _generator(device, seed, offset)
    result: torch.Tensor = getattr(out, method)(*params, generator=gen)
    return result


def uniform(
    shape: Sequence[int],
    a: Any,
    b: Any,
    *,
    device: torch.device,
    dtype: torch.dtype,
    seed: Any = None,
    offset: Any = 0,
) -> torch.Tensor:
    """Uniform in [a, b): the ambient torch RNG when ``seed`` is None, else a function of (seed, offset)."""
    return drawn("uniform_", shape, (a, b), device, dtype, seed, offset)


def normal(
    shape: Sequence[int],
    mean: Any,
    std: Any,
    *,
    device: torch.device,
    dtype: torch.dtype,
    seed: Any = None,
    offset: Any = 0,
) -> torch.Tensor:
    """Normal(mean, std): the ambient torch RNG when ``seed`` is None, else a function of (seed, offset)."""
    return drawn("normal_", shape, (mean, std), device, dtype, seed, offset)


def clone_layout(a: torch.Tensor) -> torch.Tensor:
    """A copy of ``a`` in new memory with ``a``'s strides exactly. ``clone`` gives a non-dense
    tensor (a stepped slice) dense strides; then the copy of the memory ``a`` spans, seen with
    ``a``'s strides (an expanded tensor stays one: a write into it raises eager's error)."""
    c = a.clone(memory_format=torch.preserve_format)
    if c.stride() == a.stride() or a.numel() == 0:
        return c
    extent = 1 + sum((size - 1) * stride for size, stride in zip(a.shape, a.stride()))
    span = a.as_strided((extent,), (1,), a.storage_offset())
    return span.clone().as_strided(a.shape, a.stride())


def shallow_copy(a: torch.Tensor) -> torch.Tensor:
    """The same tensor (the prim only gives it a new name in the trace)."""
    return a


class _WrittenWithoutGrad(torch.autograd.Function):
    """``value``'s values, with the gradient flowing to ``target`` (where torch records the
    program itself: what eager's autograd sees after a write under no_grad)."""

    @staticmethod
    def forward(
        ctx: Any, target: torch.Tensor, value: torch.Tensor, gradient: bool
    ) -> torch.Tensor:
        ctx.gradient = gradient
        return value.detach()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        return (g if ctx.gradient else torch.zeros_like(g)), None, None


def written_without_grad(
    target: torch.Tensor, value: torch.Tensor, gradient: bool = True
) -> torch.Tensor:
    if torch.is_grad_enabled() and target.requires_grad:
        return _WrittenWithoutGrad.apply(target, value, gradient)  # type: ignore[no-any-return,no-untyped-call]
    return value


_WRITTEN_WITHOUT_GRAD = _WrittenWithoutGrad._backward_cls  # type: ignore[attr-defined]


def copy_(
    src: torch.Tensor, dst: torch.Tensor, *, bumps_version: bool | int = True
) -> torch.Tensor:
    """Copies ``src`` into ``dst`` in place and returns ``dst``; without ``bumps_version``, its
    version counter is left as it was (a batch_norm kernel's update of its running statistics);
    an int moves it by that many (one write standing for several deferred ones)."""
    if bumps_version is not True and not dst.is_inference():
        version = dst._version
        _copy(src, dst)
        torch._C._autograd._unsafe_set_version_counter((dst,), (version + int(bumps_version),))
        return dst
    return _copy(src, dst)


def _copy(src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    node = src.grad_fn
    if type(node) is _WRITTEN_WITHOUT_GRAD and getattr(node, "gradient", False):
        with torch.no_grad():  # the program's write under no_grad, where torch records it
            return dst.copy_(src)
    return dst.copy_(src)


def device_put(a: torch.Tensor, device: torch.device) -> torch.Tensor:
    return a.to(device)


def take(a: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    return torch.take(a, index.long())


def index_put(
    a: torch.Tensor, indices: Sequence[torch.Tensor], values: torch.Tensor, accumulate: bool
) -> torch.Tensor:
    return torch.index_put(a, tuple(indices), values, accumulate)


def index_put_(
    a: torch.Tensor, indices: Sequence[torch.Tensor], values: torch.Tensor, accumulate: bool
) -> torch.Tensor:
    return a.index_put_(tuple(indices), values, accumulate)


def embedding(indices: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return F.embedding(indices, weight)


linear = F.linear


def where(pred: Any, a: Any, b: Any) -> torch.Tensor:
    """torch.where, also for a Python bool predicate."""
    if not isinstance(pred, torch.Tensor):
        ref = a if isinstance(a, torch.Tensor) else b
        pred = torch.tensor(bool(pred), device=ref.device)
    return torch.where(pred, a, b)


def imag(a: torch.Tensor) -> torch.Tensor:
    """The imaginary part; zeros for a real tensor (torch.imag refuses those)."""
    return torch.imag(a) if a.is_complex() else torch.zeros_like(a)


def number_to_tensor_then(fn: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``fn`` for calls where a Python number stands for a tensor (torch.maximum(t, 2.0) is refused):
    the number becomes a 0-d tensor of the other operand's dtype and device."""

    def run(a: Any, b: Any) -> torch.Tensor:
        if not isinstance(a, torch.Tensor):
            a = torch.tensor(a, dtype=b.dtype, device=b.device)
        elif not isinstance(b, torch.Tensor):
            b = torch.tensor(b, dtype=a.dtype, device=a.device)
        return fn(a, b)

    run.__name__ = fn.__name__
    return run


def _trunc_divide(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return math.trunc(a / b)


def _sign(x: Any) -> Any:
    if isinstance(x, float):
        return math.copysign(1.0, x) if x != 0 else 0.0
    return (x > 0) - (x < 0)


# Prims applied to Python numbers only (shape arithmetic on symbolic values): the Python callable
# that computes them, printed under its own module where one exists (``operator.add``).
NUMBER_FUNCTIONS: dict[Symbol, Callable[..., Any]] = {
    prims.abs: operator.abs,
    prims.neg: operator.neg,
    prims.bitwise_not: operator.invert,
    prims.exp: math.exp,
    prims.exp2: lambda x: 2.0**x,
    prims.expm1: math.expm1,
    prims.log: math.log,
    prims.log1p: math.log1p,
    prims.log2: math.log2,
    prims.log10: math.log10,
    prims.sqrt: math.sqrt,
    prims.rsqrt: lambda x: 1.0 / math.sqrt(x),
    prims.reciprocal: lambda x: 1.0 / x,
    prims.sin: math.sin,
    prims.cos: math.cos,
    prims.tan: math.tan,
    prims.asin: math.asin,
    prims.acos: math.acos,
    prims.atan: math.atan,
    prims.sinh: math.sinh,
    prims.cosh: math.cosh,
    prims.tanh: math.tanh,
    prims.asinh: math.asinh,
    prims.acosh: math.acosh,
    prims.atanh: math.atanh,
    prims.erf: math.erf,
    prims.erfc: math.erfc,
    prims.lgamma: math.lgamma,
    prims.sigmoid: lambda x: 1.0 / (1.0 + math.exp(-x)),
    prims.floor: math.floor,
    prims.ceil: math.ceil,
    prims.round: round,
    prims.trunc: math.trunc,
    prims.sign: _sign,
    prims.signbit: lambda x: math.copysign(1.0, x) < 0,
    prims.isfinite: math.isfinite,
    prims.isnan: math.isnan,
    prims.isinf: math.isinf,
    prims.real: lambda x: x.real,
    prims.imag: lambda x: x.imag,
    prims.add: operator.add,
    prims.sub: operator.sub,
    prims.mul: operator.mul,
    prims.div: operator.truediv,
    prims.floor_divide: operator.floordiv,
    prims.trunc_divide: _trunc_divide,
    prims.remainder: operator.mod,
    prims.fmod: math.fmod,
    prims.pow: operator.pow,
    prims.atan2: math.atan2,
    prims.maximum: max,
    prims.minimum: min,
    prims.copysign: math.copysign,
    prims.bitwise_and: operator.and_,
    prims.bitwise_or: operator.or_,
    prims.bitwise_xor: operator.xor,
    prims.shift_left: operator.lshift,
    prims.shift_right: operator.rshift,
    prims.eq: operator.eq,
    prims.ne: operator.ne,
    prims.lt: operator.lt,
    prims.le: operator.le,
    prims.gt: operator.gt,
    prims.ge: operator.ge,
}


def torch_fallback_sized(
    qualified: str, leaves: int, /, *args: Any, **kwargs: Any
) -> tuple[Any, tuple[int, ...]]:
    """``prims.torch_fallback_sized``: the callable's result and its tensors' sizes, where the
    result has the ``leaves`` values the program was traced with. A result of another structure
    (``tensor_split`` at indices whose count is read from data) is a value the trace did not
    assume: ``DataChanged``, as a failing check (another program computes this call)."""
    from thunder_ir.ops.fallback import run_sized
    from thunder_ir.prims import DataChanged
    from thunder_ir.pytree import tree_flatten

    out, sizes = run_sized(qualified, *args, **kwargs)
    found = len(tree_flatten(out)[0])
    if found != leaves:
        raise DataChanged(
            f"{qualified} returned {found} values where the program was traced with {leaves}"
        )
    return out, sizes


def torch_fallback_vjp(
    qualified: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    cotangents: tuple[Any, ...],
    rng_state: torch.Tensor | None = None,
    rng_device: Any = None,
    requires_grad: Sequence[bool] | None = None,
) -> tuple[Any, ...]:
    """The gradients of the torch callable named ``qualified`` at ``(args, kwargs)`` for the
    cotangents of its tensor outputs (None where none flows): ``torch.autograd.grad`` through the
    callable run again on detached copies of its floating-point tensor arguments. One entry per
    leaf of ``(args, kwargs)``: a gradient for each floating-point tensor torch differentiates
    (zeros where the outputs do not depend on it, or where ``requires_grad``, one flag per leaf,
    says it did not require grad in the forward: it is then not differentiated, as in eager),
    None for the rest (a loss's ``target`` or ``weight``, which torch refuses to differentiate).
    A random callable draws from ``rng_state`` (see ``torch_random.replaying_rng``)."""
    from thunder_ir.ops.fallback import resolve_fallback
    from thunder_ir.pytree import tree_flatten

    fn = resolve_fallback(qualified)  # a callable run under torch.autocast enters it itself
    leaves, spec = tree_flatten((args, kwargs))
    differentiable = [
        isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()) for x in leaves
    ]
    wanted = [True] * len(leaves) if requires_grad is None else list(requires_grad)
    not_required = [d and not w for d, w in zip(differentiable, wanted)]
    grads_of = [d and w for d, w in zip(differentiable, wanted)]
    key = (qualified, spec)
    refused = _REFUSED_GRADS.get(key)
    if refused is not None:
        grads_of = [g and not r for g, r in zip(grads_of, refused)]
    try:
        inputs, out = _run_for_grad(fn, leaves, spec, grads_of, rng_state, rng_device)
    except RuntimeError as e:
        if _REFUSED_GRAD not in str(e):
            raise
        # Torch refuses a gradient for some of them, as eager does where they require grad:
        # asked one at a time, the others are differentiated (and it is remembered).
        refused = [
            g and not _takes_grad(fn, leaves, spec, i, rng_state, rng_device)
            for i, g in enumerate(grads_of)
        ]
        _REFUSED_GRADS[key] = refused
        grads_of = [g and not r for g, r in zip(grads_of, refused)]
        inputs, out = _run_for_grad(fn, leaves, spec, grads_of, rng_state, rng_device)
    outs, _ = tree_flatten(tuple(out) if isinstance(out, tuple) else out)
    tensor_outs = [o for o in outs if isinstance(o, torch.Tensor)]
    pairs = [
        (o, ct) for o, ct in zip(tensor_outs, cotangents) if ct is not None and o.requires_grad
    ]
    wrt = [x for x, g in zip(inputs, grads_of) if g]
    found: tuple[torch.Tensor | None, ...] = (None,) * len(wrt)
    if pairs and wrt:
        found = torch.autograd.grad(
            [o for o, _ in pairs], wrt, [ct for _, ct in pairs], allow_unused=True
        )
    it = iter(found)
    result: list[Any] = []
    for x, g, unwanted in zip(inputs, grads_of, not_required):
        if unwanted:  # the trace still expects a tensor for it
            result.append(torch.zeros_like(x))
            continue
        if not g:
            result.append(None)
            continue
        grad = next(it)
        result.append(torch.zeros_like(x) if grad is None else grad)
    return tuple(result)


# torch's refusal of an argument that requires grad ("The function 'soft_margin_loss' is not
# differentiable with respect to argument 'target'...")
_REFUSED_GRAD = "is not differentiable with respect to argument"
# (callable, argument structure) -> which leaves torch refused to differentiate
_REFUSED_GRADS: dict[tuple[str, Any], list[bool]] = {}


def _run_for_grad(
    fn: Callable[..., Any],
    leaves: list[Any],
    spec: Any,
    grads_of: Sequence[bool],
    rng_state: torch.Tensor | None,
    rng_device: Any,
) -> tuple[list[Any], Any]:
    """``fn`` run under grad mode on the leaves, those in ``grads_of`` detached copies that
    require grad: those inputs and the result."""
    from thunder_executors.torch_random import replaying_rng
    from thunder_ir.pytree import tree_unflatten

    inputs = [x.detach().requires_grad_(True) if g else x for x, g in zip(leaves, grads_of)]
    with torch.enable_grad(), replaying_rng(rng_state, rng_device):
        call_args, call_kwargs = tree_unflatten(inputs, spec)
        return inputs, fn(*call_args, **call_kwargs)


def _takes_grad(
    fn: Callable[..., Any],
    leaves: list[Any],
    spec: Any,
    i: int,
    rng_state: torch.Tensor | None,
    rng_device: Any,
) -> bool:
    """Whether torch differentiates ``fn`` with respect to leaf ``i`` alone."""
    only = [j == i for j in range(len(leaves))]
    try:
        _run_for_grad(fn, leaves, spec, only, rng_state, rng_device)
    except RuntimeError as e:
        if _REFUSED_GRAD in str(e):
            return False
        raise
    return True
