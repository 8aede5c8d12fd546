"""Autocast: the trace rewritten to compute in the dtypes ``torch.autocast`` gives eager torch.

Each device type has its own op lists (``LISTS["cpu"]``, ``LISTS["cuda"]``), as torch registers
one autocast kernel per device type. An op is cast by the lists of the device its tensors are on,
and only its floating-point tensors on that device (float64 never) are converted: under
``torch.autocast("cuda")`` an op on CPU tensors runs as it is. Where an op has tensors on both
and autocast is on for both, CUDA's lists are tried first (torch's dispatcher tries
``AutocastCUDA`` before ``AutocastCPU``). Torch's cast policies:

- lower precision (matmuls, linear, convolutions, attention): inputs converted to the autocast
  dtype, which the op then computes and returns;
- float32 (losses, ``prod`` on the CPU; on CUDA also the pointwise ops that lose precision, such
  as ``exp``, ``log``, ``pow``, ``rsqrt``, and layer and group norm): inputs converted to float32,
  so that the op returns float32;
- float32 unless a dtype is given (CUDA: ``sum``, ``prod``, ``cumsum``, ``cumprod``, ``softmax``,
  ``log_softmax``, vector norms): without a ``dtype=`` argument the op computes in and returns
  float32 (its first input converted); with one, it runs as called;
- promote (CUDA: ``addcmul``, ``addcdiv``, ``atan2``, ``index_put``, ``scatter_add``): inputs
  converted to the widest among them, float32 if one is, else the autocast dtype (float16 meeting
  bfloat16 is an error, as in torch);
- banned (CUDA: ``binary_cross_entropy``): an error, the one eager raises.

Every other op runs on whatever dtypes reach it, with the usual type promotion; in-place ops
(``exp_``, ``x[i] = v``) are never cast, as torch registers only the out-of-place ones.

Where the lists come from: torch's ``aten/src/ATen/autocast_mode.cpp`` and ``autocast_mode.h``
(``KERNEL_CPU(...)`` registrations; ``KERNEL_CUDA(...)`` over ``AT_FORALL_LOWER_PRECISION_FP``,
``AT_FORALL_FP32``, ``AT_FORALL_FP32_SET_OPT_DTYPE``, ``AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE``
and ``AT_FORALL_PROMOTE``), restricted to the ops this IR has. The CPU lists were checked against
eager ``torch.autocast("cpu")`` in torch 2.13. The CUDA lists were read from the source (torch's
main branch, 2.12/2.13, and an earlier 2.x for comparison), then checked against the
``AutocastCUDA`` registrations and the dtypes eager CUDA autocast gives fake CUDA tensors of torch
2.13 (CPU-only build) and 2.11 (``tests/thunder_transforms/test_autocast_cuda.py``), and against
eager values and gradients on a GPU with torch 2.11 (an H200,
``tests/gpu/test_cuda_autocast_like_eager.py``). ``rms_norm`` joined CUDA's float32 list in torch
2.12: it is listed when the installed torch registers it.

Torch functions whose torch implementation decomposes into listed ops are listed by what the
decomposition gives: ``square`` is ``pow(x, 2)`` (float32), ``softmin`` is a softmax,
``torch.norm`` a vector norm, ``normalize`` divides by a float32 norm (float32) and
``pairwise_distance`` takes one (float32: its difference computed in float32 here, where eager
rounds it to the input dtype first). CUDA's ``cross_entropy`` is torch's own composition: a
``log_softmax`` in the input's dtype (torch passes that dtype explicitly), then ``nll_loss`` in
float32 (with probabilities as targets or label smoothing: the whole loss in float32).

The trace is replayed op by op into a new one (dtypes change downstream of a cast, so composites
are recorded again); ops whose inputs did not change are kept as they were. On the CPU, a
composite op off the lists whose decomposition contains a listed op is replayed through its
decomposition; on CUDA, whose lists hold elementary ops (``exp``, ``sum``) that this IR's
composites are written with where torch's kernels are not (``sigmoid``, ``mean``), only composites
that are not torch ops are. A checkpointed region (``OpTag.CHECKPOINT``) is replayed into a new
region of the same name, and the functions of higher-order symbols (``cond``, ``while_loop``,
``map``, ``scan``) as sub-traces taking the (possibly cast) operands. Torch callables without an op
(``torch_fallback``: ``torch.dot``, ``cdist``, ``F.bilinear``, ``nn.RNN``'s ``rnn_tanh``,
``torch.fft``, ``linalg``) run under the same ``torch.autocast``, while tracing (their fake run)
and at run time (forward and the backward's re-run): eager's autocast applies to each aten op
inside them, with torch's own lists (``thunder_ir.ops.fallback.autocast_name``).

Autocast's weight cache (``cache_enabled``, torch's default): within one outermost autocast
region, a float32 leaf requiring grad (a parameter) is converted to the autocast dtype once and
that conversion reused by every op, so its gradients are summed in the autocast dtype before
they are converted back, as in eager (``AutocastRecorder``; the transform on a finished trace
does not know which tensors are leaves and converts at each use).

``regions=`` gives the autocast state per top-level bound symbol (a dtype for ``device_type``, a
mapping from device type to dtype, or None: autocast off there), for programs that enter and leave
``torch.autocast`` themselves or run under several devices' autocast at once.
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from thunder_ir import (
    BoundSymbol,
    OpTag,
    Proxy,
    Symbol,
    TensorProxy,
    Trace,
    dtypes,
    prims,
)
from thunder_ir import higher_order as ho
from thunder_ir import ops as ltorch
from thunder_ir.dtypes import DType
from thunder_ir.ops import own_arguments
from thunder_ir.ops.fallback import (
    FALLBACK_SYMBOLS,
    FallbackAutocast,
    autocast_name,
    converted_only,
    fallback_under_autocast,
    split_autocast_name,
)
from thunder_ir.pytree import tree_flatten, tree_map, tree_unflatten
from thunder_ir.symbol import call_again
from thunder_ir.tracectx import require_tracectx

__all__ = [
    "FP32_OPS",
    "LISTS",
    "LOWER_PRECISION_OPS",
    "AutocastLists",
    "AutocastRecorder",
    "EagerAutocastError",
    "Policy",
    "autocast",
]


class EagerAutocastError(RuntimeError):
    """An op eager torch refuses under autocast (a banned op; float16 meeting bfloat16 in a
    promote op), with eager's message."""


class Policy(enum.Enum):
    """Torch's cast policies (``at::autocast::CastPolicy``), plus the banned ops."""

    LOWER_PRECISION = "lower_precision_fp"
    FP32 = "fp32"
    FP32_SET_OPT_DTYPE = "fp32_set_opt_dtype"  # also fp32_append_dtype (torch.norm)
    PROMOTE = "promote"
    BANNED = "banned"


@dataclass(frozen=True)
class AutocastLists:
    """One device type's autocast lists, as sets of symbols.

    ``decomposes_torch_ops``: which composites off the lists are replayed through their
    decomposition (True: every one whose decomposition contains a listed op; False: only those
    that are not torch-language ops). ``min_operands``: ops cast only with at least that many
    floating-point operands (CPU's einsum, which torch lists only through bmm)."""

    device_type: str
    lower_precision: frozenset[Symbol]
    fp32: frozenset[Symbol]
    fp32_set_opt_dtype: frozenset[Symbol] = frozenset()
    promote: frozenset[Symbol] = frozenset()
    banned: Mapping[Symbol, str] = field(default_factory=dict)
    decomposes_torch_ops: bool = True
    min_operands: Mapping[Symbol, int] = field(default_factory=dict)

    def policy(self, sym: Symbol) -> Policy | None:
        if sym in self.lower_precision:
            return Policy.LOWER_PRECISION
        if sym in self.fp32:
            return Policy.FP32
        if sym in self.fp32_set_opt_dtype:
            return Policy.FP32_SET_OPT_DTYPE
        if sym in self.promote:
            return Policy.PROMOTE
        if sym in self.banned:
            return Policy.BANNED
        return None

    def listed(self) -> frozenset[Symbol]:
        return (
            self.lower_precision
            | self.fp32
            | self.fp32_set_opt_dtype
            | self.promote
            | frozenset(self.banned)
        )


# -- CPU ------------------------------------------------------------------------------------------
# KERNEL_CPU(...) in autocast_mode.cpp. einsum is not on torch's list but runs on bmm, which is
# (for two operands or more).
LOWER_PRECISION_OPS: frozenset[Symbol] = frozenset(
    {
        ltorch.linear, ltorch.matmul, ltorch.mm, ltorch.bmm, ltorch.addmm, ltorch.baddbmm,
        ltorch.prelu,
        ltorch.conv1d, ltorch.conv2d, ltorch.conv3d,
        ltorch.conv_transpose1d, ltorch.conv_transpose2d, ltorch.conv_transpose3d,
        ltorch.scaled_dot_product_attention,
        ltorch.einsum,
        prims.matmul,
        prims.linear,
        prims.convolution,
    }
)  # fmt: skip
FP32_OPS: frozenset[Symbol] = frozenset(
    {
        ltorch.prod,
        ltorch.cross_entropy,  # cross_entropy_loss
        ltorch.nll_loss,
        ltorch.mse_loss,
        ltorch.l1_loss,
        ltorch.smooth_l1_loss,
        ltorch.huber_loss,
        ltorch.kl_div,
        ltorch.binary_cross_entropy,
        ltorch.binary_cross_entropy_with_logits,
        ltorch.avg_pool3d,
        ltorch.max_pool3d,
        ltorch.adaptive_avg_pool3d,
    }
)
# KERNEL_CPU(..., promote): cat, stack, index_copy (hstack, vstack, dstack, column_stack are cat,
# in torch as in this IR).
CPU_PROMOTE_OPS: frozenset[Symbol] = frozenset({ltorch.cat, ltorch.stack, ltorch.index_copy})
# Torch callables without an op that are on the CPU lists (fft_*, linalg_*, quantile,
# view_as_complex, geqrf, cdist, the other losses, ...) are fallbacks run under torch.autocast:
# torch's own lists apply to them.
CPU_LISTS = AutocastLists(
    "cpu",
    LOWER_PRECISION_OPS,
    FP32_OPS,
    promote=CPU_PROMOTE_OPS,
    min_operands={ltorch.einsum: 2},
)


# -- CUDA -----------------------------------------------------------------------------------------
def _registered_for_cuda_autocast(aten_name: str) -> bool:
    """Whether the installed torch has a CUDA autocast kernel for ``aten_name`` (an op whose
    membership depends on the torch version)."""
    try:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(aten_name, "AutocastCUDA"))
    except (AttributeError, RuntimeError):  # pragma: no cover - a torch without the query
        return False


# AT_FORALL_LOWER_PRECISION_FP (and cudnn_convolution[_transpose]): conv1d/2d/3d,
# conv_transpose1d/2d/3d, convolution, _convolution, prelu, addmm, matmul, einsum, mm, linear,
# baddbmm, bmm, _scaled_dot_product_flash_attention, scaled_dot_product_attention. Not in this
# IR: conv_tbc, addmv, addr, mv, linalg_vecdot, addbmm, chain_matmul, linalg_multi_dot, the RNN
# cells. Unlike the CPU's, the list has einsum itself (any number of operands).
CUDA_LOWER_PRECISION_OPS: frozenset[Symbol] = frozenset(
    {
        ltorch.linear, ltorch.matmul, ltorch.mm, ltorch.bmm, ltorch.addmm, ltorch.baddbmm,
        ltorch.prelu, ltorch.einsum,
        ltorch.conv1d, ltorch.conv2d, ltorch.conv3d,
        ltorch.conv_transpose1d, ltorch.conv_transpose2d, ltorch.conv_transpose3d,
        ltorch.scaled_dot_product_attention,
        ltorch.sdpa_flash,  # _scaled_dot_product_flash_attention
        prims.matmul,  # mm
        prims.linear,
        prims.convolution,
    }
)  # fmt: skip
# AT_FORALL_FP32: acos, asin, cosh, erfinv, exp, expm1, log, log10, log2, log1p, reciprocal,
# rsqrt, sinh, tan, pow (the three overloads: x ** 2, 2 ** x), softplus, layer_norm,
# native_layer_norm, rms_norm (torch >= 2.12), group_norm, cosine_similarity, nll_loss, kl_div,
# l1_loss, smooth_l1_loss, huber_loss, mse_loss, binary_cross_entropy_with_logits, logsumexp.
# Not in this IR: frobenius_norm, nuclear_norm, the other losses (poisson_nll, cosine_embedding,
# nll_loss2d, hinge_embedding, margin_ranking, multilabel_margin, soft_margin, triplet_margin,
# multi_margin), dist, pdist, cdist, renorm, upsample_*.
CUDA_FP32_OPS: frozenset[Symbol] = frozenset(
    {
        ltorch.acos, ltorch.asin, ltorch.cosh, ltorch.erfinv, ltorch.exp, ltorch.expm1,
        ltorch.log, ltorch.log10, ltorch.log2,
        ltorch.log1p, ltorch.reciprocal, ltorch.rsqrt, ltorch.sinh, ltorch.tan, ltorch.pow,
        ltorch.softplus,
        ltorch.layer_norm, ltorch.native_layer_norm, ltorch.group_norm, ltorch.cosine_similarity,
        ltorch.nll_loss, ltorch.kl_div, ltorch.l1_loss, ltorch.smooth_l1_loss, ltorch.huber_loss,
        ltorch.mse_loss,
        ltorch.binary_cross_entropy_with_logits, ltorch.logsumexp,
        # torch functions that decompose into listed ops (see the module docstring)
        ltorch.square, ltorch.normalize, ltorch.pairwise_distance,
        *((ltorch.rms_norm,) if _registered_for_cuda_autocast("aten::rms_norm") else ()),
    }
)  # fmt: skip
# AT_FORALL_FP32_SET_OPT_DTYPE: prod, softmax, log_softmax, cumprod, cumsum, linalg_vector_norm,
# linalg_matrix_norm (not in this IR), sum; AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE: norm
# (fp32_append_dtype; torch.norm runs linalg.vector_norm). softmin is a softmax.
CUDA_FP32_SET_OPT_DTYPE_OPS: frozenset[Symbol] = frozenset(
    {
        ltorch.sum, ltorch.prod, ltorch.cumsum, ltorch.cumprod, ltorch.softmax,
        ltorch.log_softmax, ltorch.softmin, ltorch.vector_norm, ltorch.norm,
    }
)  # fmt: skip
# AT_FORALL_PROMOTE: addcdiv, addcmul, atan2, index_put, scatter_add. Not in this IR: bilinear,
# cross, dot, vdot, grid_sampler, tensordot. (cat and stack are on the CPU's promote list only.)
CUDA_PROMOTE_OPS: frozenset[Symbol] = frozenset(
    {ltorch.addcdiv, ltorch.addcmul, ltorch.atan2, ltorch.index_put, ltorch.scatter_add}
)
_BCE_BANNED = (
    "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_"
    "logits\nor torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits "
    "are\nsafe to autocast."
)
CUDA_LISTS = AutocastLists(
    "cuda",
    CUDA_LOWER_PRECISION_OPS,
    CUDA_FP32_OPS | {ltorch.cross_entropy},  # a rule of its own (_cuda_cross_entropy)
    CUDA_FP32_SET_OPT_DTYPE_OPS,
    CUDA_PROMOTE_OPS,
    {ltorch.binary_cross_entropy: _BCE_BANNED},
    decomposes_torch_ops=False,
)

LISTS: Mapping[str, AutocastLists] = {"cpu": CPU_LISTS, "cuda": CUDA_LISTS}
# The order torch's dispatcher tries the autocast keys of an op's tensors in.
_PRIORITY = ("cuda", "cpu")


def _eligible(x: Any, device_type: str) -> bool:
    """Whether autocast for ``device_type`` converts ``x`` (torch's ``is_eligible``)."""
    return (
        isinstance(x, TensorProxy)
        and x.device.type == device_type
        and x.dtype.is_float
        and x.dtype.strong() != dtypes.float64
    )


def _device_types(args: Any, kwargs: Any) -> set[str]:
    return {x.device.type for x in tree_flatten((args, kwargs))[0] if isinstance(x, TensorProxy)}


def _contains_listed(bsym: BoundSymbol, listed: frozenset[Symbol]) -> bool:
    return any(s.sym in listed or _contains_listed(s, listed) for s in bsym.subsymbols)


def _replayed_through_decomposition(lists: AutocastLists, bsym: BoundSymbol) -> bool:
    if not bsym.subsymbols:
        return False
    if not lists.decomposes_torch_ops and (bsym.sym.is_prim or ltorch.is_torch_op(bsym.sym)):
        return False
    return _contains_listed(bsym, lists.listed())


# Higher-order symbols whose functions compute values of the program: replayed with them.
_HIGHER_ORDER = frozenset({ho.cond, ho.while_loop, ho.tensor_map, ho.scan})

# torch_fallback_inplace writes into its tensor (never autocast); its functional call inside is a
# torch_fallback, replayed like the others where the trace holds it at top level.
_FALLBACKS = FALLBACK_SYMBOLS


def _slices(xs: Sequence[Any]) -> list[Any]:
    return [x.replace(shape=x.shape[1:]) for x in xs]


# The memo of the listed ops' signatures (static data: symbols of the IR).
_SIGNATURES: dict[Symbol, inspect.Signature | None] = {}


def _bound_arguments(bsym: BoundSymbol, args: Any, kwargs: Any) -> dict[str, Any] | None:
    """The call's arguments by parameter name (None when the symbol's signature is unknown)."""
    sym = bsym.sym
    if sym not in _SIGNATURES:
        try:
            _SIGNATURES[sym] = inspect.signature(sym.meta) if sym.meta is not None else None
        except (TypeError, ValueError):
            _SIGNATURES[sym] = None
    sig = _SIGNATURES[sym]
    if sig is None:
        return None
    assert sym.meta is not None
    args, kwargs = own_arguments(sym.meta, tuple(args), dict(kwargs))  # torch's keyword names
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return dict(bound.arguments)


State = Mapping[str, DType]


class _CastCache:
    """Autocast's weight cache over one autocast region with ``cache_enabled``: the conversion
    of a float32 leaf tensor requiring grad (a parameter; ``cacheable`` says which tensors are
    leaves) to the autocast dtype is made once and reused by every op that converts it, as
    torch's ``cached_cast`` does."""

    def __init__(self, cacheable: Callable[[TensorProxy], bool]) -> None:
        self.cacheable = cacheable
        # (name, id of the trace, scope depth, grad mode) -> (the trace, its conversion);
        # the trace is held so that its id is not another's while the entry lives.
        self.casts: dict[tuple[Any, ...], tuple[Trace, TensorProxy]] = {}

    def holds(self, x: TensorProxy, dtype: DType | None, state: State) -> bool:
        return (
            x.dtype.strong() == dtypes.float32
            and x.requires_grad
            and dtype is not None
            and dtype == state.get(x.device.type)
            and self.cacheable(x)
        )


def _fallback_state(
    state: State, args: Any, kwargs: Any, cache: _CastCache | None
) -> FallbackAutocast | None:
    """The ``torch.autocast`` state a torch callable on ``(args, kwargs)`` runs under: that of
    the devices its tensors are on (None: none), with the arguments autocast's cache holds."""
    on = {d: t for d, t in state.items() if d in _device_types(args, kwargs)}
    if not on:
        return None
    leaves = tree_flatten((args, kwargs))[0]
    cached = tuple(
        i
        for i, x in enumerate(leaves)
        if cache is not None
        and isinstance(x, TensorProxy)
        and cache.holds(x, on.get(x.device.type), on)
    )
    torch_dtypes = {d: dtypes.to_torch_dtype(t) for d, t in on.items()}
    return FallbackAutocast(
        tuple((d, t) for d in _PRIORITY if (t := torch_dtypes.get(d)) is not None), cached
    )


class _Replay:
    """Records bound symbols again into ``new`` as they compute under the autocast ``state``.
    ``fresh``: the calls given to ``apply`` are not recorded yet (the trace is being recorded)."""

    def __init__(
        self, new: Trace, state: State, *, fresh: bool = False, cache: _CastCache | None = None
    ) -> None:
        self.new = new
        self.state: State = state
        self.env: dict[str, Any] = {}
        self.fresh = fresh
        self.cache = cache

    def lookup(self, x: Any) -> Any:
        return self.env.get(x.name, x) if isinstance(x, Proxy) else x

    # -- casts ----------------------------------------------------------------------------------

    def cast_where(self, args: Any, kwargs: Any, to: Callable[[int, Any], DType | None]) -> Any:
        """``(args, kwargs)`` with each leaf ``x`` (at flat position ``i``) converted to
        ``to(i, x)`` where that is a dtype other than its own."""
        leaves, spec = tree_flatten((args, kwargs))
        out = []
        for i, x in enumerate(leaves):
            dtype = to(i, x)
            if dtype is not None and isinstance(x, TensorProxy) and x.dtype.strong() != dtype:
                x = self._convert(x, dtype)
            out.append(x)
        return tree_unflatten(out, spec)

    def _convert(self, x: TensorProxy, dtype: DType) -> TensorProxy:
        """``x`` converted to ``dtype``; a tensor autocast's weight cache holds, converted once
        per region (its gradients are summed in ``dtype`` before they are converted back, as
        in eager)."""
        cache = self.cache
        if cache is None or not cache.holds(x, dtype, self.state):
            return prims.convert_element_type(x, dtype)  # type: ignore[no-any-return]
        trace = self.new  # a conversion is reused where it was recorded, in its grad mode
        # Not keyed by dtype: eager's cache holds one conversion per tensor, which a nested
        # block with another autocast dtype gets too.
        key = (x.name, id(trace), len(trace.scopes), trace.grad_enabled)
        found = cache.casts.get(key)
        if found is None:
            found = cache.casts[key] = (trace, prims.convert_element_type(x, dtype))
        return found[1]

    def cast_all(self, args: Any, kwargs: Any, to: DType, device_type: str) -> Any:
        return self.cast_where(args, kwargs, lambda i, x: to if _eligible(x, device_type) else None)

    # -- the walk -------------------------------------------------------------------------------

    def visit(self, bsym: BoundSymbol) -> None:
        args = tree_map(self.lookup, bsym.args)
        kwargs = tree_map(self.lookup, bsym.kwargs)
        changed = any(
            self.env.get(p.name, p) is not p for p in bsym.flat_proxy_args
        )  # an input was replaced
        sym = bsym.sym
        state = self.state
        if sym in _HIGHER_ORDER and (changed or state):
            # Its functions are replayed too, on the (possibly cast) operands.
            self.call(bsym, self._higher_order_args(bsym.sym, args), kwargs, True)
            return
        if OpTag.CHECKPOINT in bsym.sym.tags:
            if changed or any(_contains_listed(bsym, LISTS[d].listed()) for d in state):
                # Replayed from its subsymbols (never by calling the region's function again).
                self.call(bsym, args, kwargs, True, region=self._region(bsym))
            else:
                self.call(bsym, args, kwargs, changed)
            return
        if sym in _FALLBACKS:
            self.fallback(bsym, args, kwargs)
            return
        devices = _device_types(args, kwargs) if state else set()
        for device in _PRIORITY:
            if device in state and device in devices:
                lists = LISTS[device]
                policy = lists.policy(sym)
                if policy is not None:
                    self.apply(lists, policy, state[device], bsym, args, kwargs)
                    return
        for device in _PRIORITY:
            if (
                device in state
                and device in devices
                and _replayed_through_decomposition(LISTS[device], bsym)
            ):
                for sub in bsym.subsymbols:
                    self.visit(sub)
                return
        self.call(bsym, args, kwargs, changed)

    def apply(
        self,
        lists: AutocastLists,
        policy: Policy,
        target: DType,
        bsym: BoundSymbol,
        args: Any,
        kwargs: Any,
    ) -> Any:
        """``bsym`` (a listed op) called on ``args`` cast by its policy; its output."""
        device = lists.device_type
        sym = bsym.sym
        leaves = tree_flatten((args, kwargs))[0]
        minimum = lists.min_operands.get(sym)
        if minimum is not None and sum(_eligible(x, device) for x in leaves) < minimum:
            return self.call(bsym, args, kwargs, self.fresh or any(self._replaced(bsym)))
        if policy is Policy.BANNED:
            raise EagerAutocastError(lists.banned[sym])
        if policy is Policy.LOWER_PRECISION:
            args, kwargs = self.cast_all(args, kwargs, target, device)
        elif policy is Policy.FP32:
            cross_entropy = device == "cuda" and sym is ltorch.cross_entropy
            if cross_entropy:
                out = self._cuda_cross_entropy(bsym, args, kwargs)
                if out is not None:
                    return out
            args, kwargs = self.cast_all(args, kwargs, dtypes.float32, device)
        elif policy is Policy.FP32_SET_OPT_DTYPE:
            # the first argument converted to float32 where no dtype is given
            bound = _bound_arguments(bsym, args, kwargs)
            if bound is not None and bound.get("dtype") is None:
                first = next(iter(bound.values()))
                if _eligible(first, device):
                    args, kwargs = self.cast_where(
                        args, kwargs, lambda i, x: dtypes.float32 if x is first else None
                    )
        else:  # PROMOTE
            widest = _promote_type(leaves, target, device)
            args, kwargs = self.cast_all(args, kwargs, widest, device)
        return self.call(bsym, args, kwargs, True)

    def _replaced(self, bsym: BoundSymbol) -> Iterator[bool]:
        return (self.env.get(p.name, p) is not p for p in bsym.flat_proxy_args)

    def _cuda_cross_entropy(self, bsym: BoundSymbol, args: Any, kwargs: Any) -> Any:
        """Torch's ``cross_entropy_loss`` under CUDA autocast with class-index targets and no
        label smoothing: ``log_softmax`` in the input's dtype (torch passes it as the dtype),
        then ``nll_loss``, which autocast runs in float32; its output. None (not recorded)
        otherwise."""
        bound = _bound_arguments(bsym, args, kwargs)
        if bound is None:
            return None
        a, target, weight = bound["a"], bound["target"], bound["weight"]
        if (
            not _eligible(a, "cuda")
            or not isinstance(target, TensorProxy)
            or target.dtype.is_float
            or bound["label_smoothing"] != 0.0
            or a.ndim == 0
            or a.dtype.strong() == dtypes.float32
        ):
            return None
        logp = ltorch.log_softmax(a, 0 if a.ndim == 1 else 1)
        logp = prims.convert_element_type(logp, dtypes.float32)
        if _eligible(weight, "cuda") and weight.dtype.strong() != dtypes.float32:
            weight = prims.convert_element_type(weight, dtypes.float32)
        out = ltorch.nll_loss(
            logp,
            target,
            weight,
            bound["size_average"],
            bound["ignore_index"],
            bound["reduce"],
            bound["reduction"],
        )
        self._bind_outputs(bsym, out)
        return out

    # -- torch callables without an op ----------------------------------------------------------

    def fallback(self, bsym: BoundSymbol, args: Any, kwargs: Any) -> Any:
        """A ``torch_fallback`` call under autocast: recorded (again) to run under the same
        ``torch.autocast`` where its tensors are on a device autocast is on for (eager's
        autocast applies to each aten op inside the callable); its output."""
        prefix = 3 if bsym.sym is ltorch.torch_fallback_random_replay else 1
        head, call_args = args[:prefix], args[prefix:]
        state = _fallback_state(self.state, call_args, kwargs, self.cache)
        name = args[0] if state is None else fallback_under_autocast(args[0], state)
        name, call_args, kwargs = self._share_cached_casts(name, call_args, kwargs)
        if name == args[0]:
            return self.call(bsym, args, kwargs, self.fresh or any(self._replaced(bsym)))
        out = bsym.sym(name, *head[1:], *call_args, **kwargs)
        self._bind_outputs(bsym, out)
        return out

    def _share_cached_casts(self, name: str, args: Any, kwargs: Any) -> tuple[str, Any, Any]:
        """A fallback run under autocast given, in place of a tensor the weight cache holds that
        it only converts to the autocast dtype, the region's conversion of it: one conversion
        for the callable and the program's other ops, as eager's cache makes (the gradients
        of its uses are then summed in the autocast dtype, as in eager)."""
        plain, state = split_autocast_name(name)
        if self.cache is None or state is None or not state.cached:
            return name, args, kwargs
        shared = set(converted_only(name, args, kwargs))
        if not shared:
            return name, args, kwargs
        on = dict(state.dtypes)
        leaves, spec = tree_flatten((args, kwargs))
        leaves = [
            self._convert(x, dtypes.from_torch_dtype(on[x.device.type])) if i in shared else x
            for i, x in enumerate(leaves)
        ]
        rest = tuple(i for i in state.cached if i not in shared)
        args, kwargs = tree_unflatten(leaves, spec)
        return autocast_name(plain, FallbackAutocast(state.dtypes, rest)), args, kwargs

    # -- higher-order symbols and checkpointed regions ------------------------------------------

    def _higher_order_args(self, sym: Symbol, args: Any) -> tuple[Any, ...]:
        """The arguments of a higher-order call with each function replayed under this
        autocast state, taking the (new) operands."""
        if sym is ho.cond:
            pred, t, f, ops = args
            return (pred, self._subtrace(t, list(ops)), self._subtrace(f, list(ops)), ops)
        if sym is ho.while_loop:
            c, b, carried, extra = args
            protos = [*carried, *extra]
            return (self._subtrace(c, protos), self._subtrace(b, protos), carried, extra)
        if sym is ho.tensor_map:
            fn, xs, rest = args
            return (self._subtrace(fn, [*_slices(xs), *rest]), xs, rest)
        combine, init, xs, extra, reverse = args
        protos = [*init, *_slices(xs), *extra]
        return (self._subtrace(combine, protos), init, xs, extra, reverse)

    def _subtrace(self, sub: Trace, inputs: list[Any]) -> Trace:
        state = self.state

        def body(*values: Any) -> Any:
            inner = _Replay(require_tracectx("autocast"), state)
            inner.env.update({p.name: v for p, v in zip(sub.args, values)})
            for b in sub.bound_symbols:
                if b.has_tag(OpTag.RETURN):
                    return tree_map(inner.lookup, b.args[0] if b.args else None)
                inner.visit(b)
            return None

        return ho.record_subtrace(body, inputs, name=sub.fn_name.rstrip("0123456789"))

    def _region(self, bsym: BoundSymbol) -> Symbol:
        """A checkpointed region replayed under autocast, still one checkpointed region."""
        from thunder_transforms.checkpoint import checkpoint_symbol

        state = self.state

        def region(*args: Any, **kwargs: Any) -> Any:
            inner = _Replay(self.new, state)
            olds = tree_flatten((bsym.args, bsym.kwargs))[0]
            news = tree_flatten((args, kwargs))[0]
            for o, n in zip(olds, news):
                if isinstance(o, Proxy):
                    inner.env[o.name] = n
            for sub in bsym.subsymbols:
                inner.visit(sub)
            return tree_map(inner.lookup, bsym.output)

        return checkpoint_symbol(region, name=bsym.sym.name)

    # -- recording ------------------------------------------------------------------------------

    def _bind_outputs(self, bsym: BoundSymbol, out: Any) -> None:
        olds, news = tree_flatten(bsym.output)[0], tree_flatten(out)[0]
        for o, n in zip(olds, news):
            if isinstance(o, Proxy):
                self.env[o.name] = n

    def call(
        self, bsym: BoundSymbol, args: Any, kwargs: Any, changed: bool, region: Symbol | None = None
    ) -> Any:
        if not changed and args == bsym.args and kwargs == bsym.kwargs:
            self.new.record(bsym)
            return bsym.output
        try:
            out = call_again(bsym, args, kwargs, region)
        except Exception:
            if not bsym.sym.is_prim or bsym.sym in _HIGHER_ORDER:
                raise
            # A prim inside a replayed decomposition takes inputs of one dtype: give its inputs
            # back the dtypes it was recorded with.
            args, kwargs = self._as_recorded(bsym, args, kwargs)
            out = call_again(bsym, args, kwargs)
        self._bind_outputs(bsym, out)
        return out

    def _as_recorded(self, bsym: BoundSymbol, args: Any, kwargs: Any) -> tuple[Any, Any]:
        recorded = {p.name: p for p in bsym.flat_proxy_args}
        back = {v.name: recorded[k] for k, v in self.env.items() if isinstance(v, Proxy)}

        def undo(x: Any) -> Any:
            old = back.get(x.name) if isinstance(x, TensorProxy) else None
            if isinstance(old, TensorProxy) and old.dtype != x.dtype:
                return prims.convert_element_type(x, old.dtype)
            return x

        return tree_map(undo, args), tree_map(undo, kwargs)


def _promote_type(leaves: Sequence[Any], target: DType, device_type: str) -> DType:
    """The dtype torch's promote policy converts the inputs to (``at::autocast::promote_type``):
    float32 once one input is, else the autocast dtype; float64 inputs are ignored."""
    current = target
    for x in leaves:
        if not _eligible(x, device_type):
            continue
        dtype = x.dtype.strong()
        if current == dtypes.float32 or dtype == dtypes.float32:
            current = dtypes.float32
        elif current != target or dtype != target:
            raise EagerAutocastError("Unexpected floating ScalarType in at::autocast::prioritize")
    return current


# -- the process's autocast while recording ------------------------------------------------------


@contextlib.contextmanager
def _torch_autocast_state(state: Mapping[str, torch.dtype | None]) -> Iterator[None]:
    """The process's CPU and CUDA autocast set to ``state`` (a device type missing or None: off),
    its cast cache off; restored after."""
    saved = [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in _PRIORITY]
    cache = torch.is_autocast_cache_enabled()
    try:
        torch.set_autocast_cache_enabled(False)
        for d in _PRIORITY:
            dtype = state.get(d)
            torch.set_autocast_enabled(d, dtype is not None)
            if dtype is not None:
                torch.set_autocast_dtype(d, dtype)
        yield
    finally:
        for d, enabled, dtype in saved:
            torch.set_autocast_enabled(d, enabled)
            torch.set_autocast_dtype(d, dtype)
        torch.set_autocast_cache_enabled(cache)


# -- the transform --------------------------------------------------------------------------------


def _target(dtype: DType | torch.dtype) -> DType:
    target = dtype if isinstance(dtype, DType) else dtypes.from_torch_dtype(dtype)
    if target.strong() not in (dtypes.bfloat16, dtypes.float16):
        raise ValueError(f"autocast to {target}: expected bfloat16 or float16")
    return target.strong()


Region = DType | torch.dtype | Mapping[str, DType | torch.dtype] | None


def _state(region: Region, device_type: str) -> dict[str, DType]:
    if region is None:
        return {}
    if isinstance(region, Mapping):
        for d in region:
            if d not in LISTS:
                raise NotImplementedError(
                    f"autocast for {d!r}: only {', '.join(map(repr, LISTS))} are implemented"
                )
        return {d: _target(t) for d, t in region.items()}
    return {device_type: _target(region)}


def autocast(
    trace: Trace,
    dtype: DType | torch.dtype = dtypes.bfloat16,
    device_type: str = "cpu",
    *,
    regions: Sequence[Region] | None = None,
) -> Trace:
    """``trace`` computing as under ``torch.autocast(device_type, dtype=dtype)`` (see the module
    docstring for the op lists; ``device_type`` is ``"cpu"`` or ``"cuda"``).

    ``regions``, when given, holds one entry per bound symbol of ``trace`` (top level): the
    autocast state it runs under: a dtype (autocast for ``device_type``), a mapping from device
    type to dtype (autocast on for each of those devices), or None where autocast is off (a
    ``with torch.autocast(...)`` block inside a program); ``dtype`` is then unused."""
    start = time.perf_counter()
    if device_type not in LISTS:
        raise NotImplementedError(
            f"autocast for {device_type!r}: only {', '.join(map(repr, LISTS))} are implemented"
        )
    if regions is not None and len(regions) != len(trace.bound_symbols):
        raise ValueError("autocast: regions needs one entry per bound symbol of the trace")
    states = (
        [_state(r, device_type) for r in regions]
        if regions is not None
        else [_state(dtype, device_type)] * len(trace.bound_symbols)
    )
    # Torch callables recorded again are run on fake tensors: with the process's own autocast
    # off (the program may be compiled inside a torch.autocast block).
    with trace.rerecord("autocast", start=start) as new, _torch_autocast_state({}):
        replay = _Replay(new, {})
        at: list[str | None] = [None]  # what it records stays at the user's line
        new.locate = lambda: at[0]
        for bsym, state in zip(trace.bound_symbols, states):
            replay.state = state
            at[0] = bsym.location
            replay.visit(bsym)
    return new


class AutocastRecorder:
    """Applies autocast as a program is recorded, as torch's dispatcher does for eager calls:
    installed as ``trace.intercept``, it records each top-level call under the autocast state
    ``state_now()`` gives (device type -> dtype; empty: off) in place of the plain call. The
    program then reads eager's dtypes (``h.dtype``, ``zeros(..., dtype=h.dtype)``, a branch on
    it), mixes dtypes as eager lets it (``x.mm(w.bfloat16())``), and values read from tensor data
    while tracing are computed in eager's dtypes.

    A listed op has its inputs cast before it is called (the uncast call may be invalid); any
    other call is recorded, then replayed as the autocast transform replays a trace (fallbacks,
    composites whose decomposition holds a listed op, higher-order and checkpointed bodies).
    A torch callable without an op (a fallback) runs under the same ``torch.autocast``.

    Autocast's weight cache: ``cache_now()`` gives the autocast region the call is in where its
    cache is on (a token, equal for the calls of one region; None: off), and ``cacheable`` says
    which tensors are leaves requiring grad (the program's parameters): their conversions to
    the autocast dtype are made once per region, as eager's are."""

    def __init__(
        self,
        state_now: Callable[[], Mapping[str, torch.dtype]],
        cache_now: Callable[[], object | None] | None = None,
        cacheable: Callable[[TensorProxy], bool] | None = None,
    ) -> None:
        self.state_now = state_now
        self.cache_now = cache_now
        self.cacheable = cacheable
        self._region: object | None = None
        self._cache: _CastCache | None = None

    def _state(self) -> dict[str, DType]:
        return {d: _target(t) for d, t in self.state_now().items() if d in LISTS}

    def _cache_for_now(self) -> _CastCache | None:
        """The weight cache of the autocast region the call is in (None: off)."""
        region = self.cache_now() if self.cache_now is not None else None
        if region is None or self.cacheable is None:
            return None
        if self._cache is None or region != self._region:
            self._region, self._cache = region, _CastCache(self.cacheable)
        return self._cache

    def fallback_autocast(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> FallbackAutocast | None:
        """The ``torch.autocast`` state a torch callable called now on ``(args, kwargs)`` runs
        under (asked by ``thunder_ir.ops.fallback`` before it runs the callable on fake
        tensors, whose dtypes are then eager's)."""
        return _fallback_state(self._state(), args, kwargs, self._cache_for_now())

    def __call__(self, sym: Symbol, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        trace = require_tracectx("autocast")  # the program's trace, or a body's sub-trace
        depth = trace.intercept_depth
        if OpTag.CHECKPOINT in sym.tags:
            # The region's body is the program's too: its calls are cast as they are recorded.
            trace.intercept_depth = depth + 1
            try:
                return sym(*args, **kwargs)
            finally:
                trace.intercept_depth = depth
        state = self._state()
        trace.intercept = None  # the calls it makes are recorded as they are
        try:
            if not state:
                return sym(*args, **kwargs)
            if depth == 1:
                trace.new_call()
            cache = self._cache_for_now()
            with _torch_autocast_state({}):
                return self._record(trace, state, cache, sym, args, kwargs)
        finally:
            trace.intercept = self

    def _record(
        self,
        trace: Trace,
        state: State,
        cache: _CastCache | None,
        sym: Symbol,
        args: tuple[Any, ...],
        kwargs: Any,
    ) -> Any:
        replay = _Replay(trace, state, fresh=True, cache=cache)
        if sym in _FALLBACKS:  # under autocast first: the plain call may refuse bfloat16 (fft)
            return replay.fallback(BoundSymbol(sym, args, kwargs, None), args, kwargs)
        devices = _device_types(args, kwargs)
        for device in _PRIORITY:
            if device in state and device in devices:
                policy = LISTS[device].policy(sym)
                if policy is not None:
                    call = BoundSymbol(sym, args, kwargs, None)  # the call, not yet recorded
                    return replay.apply(LISTS[device], policy, state[device], call, args, kwargs)
        trace.push_scope()
        trace.provisional += 1
        try:
            out = sym(*args, **kwargs)
        finally:
            trace.provisional -= 1
            recorded = trace.pop_scope()
        for bsym in recorded:
            replay.visit(bsym)
        return tree_map(replay.lookup, out)
