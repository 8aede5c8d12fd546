"""torch's backend flags: process settings by which torch picks kernels (cuDNN and oneDNN on or
off and their options, the scaled-dot-product-attention backends, TF32 and reduced-precision
matmuls).

A program may change them for part of a call, as eager code does around a call whose kernel it
chooses (``with torch.backends.cudnn.flags(enabled=False):``, ``with sdpa_kernel(MATH):``). The
recording program (the jit's binder) answers their queries and records their settings itself,
never the process's, and keeps on the trace the flags it changed (``Trace.backend_flags``: name
and value, where they differ from the call's). While it does, a call recorded at the top level
of an op whose torch kernel reads a changed flag (``_FAMILIES``, on a device the flag is for) is
recorded as the torch fallback of the op's callable, and so is every torch fallback with tensors
on such a device: its name says under which flags it runs (``flags_name``:
``"torch.conv2d under flags({'mkldnn.enabled': False})"``), and its fake run, the executors and the
backward's re-run set them around the call and put them back after (``run_under_flags``). The
other ops compute the same under any flags.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from thunder_ir.proxies import TensorProxy
from thunder_ir.pytree import tree_iter
from thunder_ir.tags import OpTag
from thunder_ir.tracectx import get_tracectx

__all__ = [
    "BACKEND_FLAGS",
    "FP32_PRECISION",
    "NOT_ROUTED",
    "QUERIES",
    "BackendFlag",
    "ChangedFlags",
    "flags_for",
    "flags_name",
    "record_under_flags",
    "run_under_flags",
    "split_flags_name",
]

# Flag name -> value, for the flags a program changed (sorted by name).
ChangedFlags = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class BackendFlag:
    """One flag: its C getter and setter (``args``: the setter's and getter's leading
    arguments), the type of value the setter takes, and the kernels it picks: those of the ops of
    ``families`` on ``devices`` (None: any device)."""

    name: str
    get: Any
    set: Any
    kind: type
    families: frozenset[str]
    devices: frozenset[str] | None
    args: tuple[Any, ...] = ()


_CONV, _MATMUL, _NORM, _ATTENTION = "conv", "matmul", "norm", "attention"
_CUDNN = (frozenset({_CONV, _NORM, _MATMUL}), frozenset({"cuda"}))
_ONEDNN = (frozenset({_CONV, _MATMUL}), frozenset({"cpu"}))
_SDP = (frozenset({_ATTENTION}), None)
_CUBLAS = (frozenset({_MATMUL}), frozenset({"cuda"}))

_SETTINGS: tuple[tuple[str, str, str, type, tuple[frozenset[str], frozenset[str] | None]], ...] = (
    ("cudnn.enabled", "_get_cudnn_enabled", "_set_cudnn_enabled", bool, _CUDNN),
    ("cudnn.benchmark", "_get_cudnn_benchmark", "_set_cudnn_benchmark", bool, _CUDNN),
    ("cudnn.deterministic", "_get_cudnn_deterministic", "_set_cudnn_deterministic", bool, _CUDNN),
    ("cudnn.allow_tf32", "_get_cudnn_allow_tf32", "_set_cudnn_allow_tf32", bool, _CUDNN),
    (
        "cudnn.benchmark_limit",
        "_cuda_get_cudnn_benchmark_limit",
        "_cuda_set_cudnn_benchmark_limit",
        int,
        _CUDNN,
    ),
    (
        "cudnn.depthwise_kernel",
        "_get_cudnn_depthwise_kernel",
        "_set_cudnn_depthwise_kernel",
        str,
        _CUDNN,
    ),
    ("mkldnn.enabled", "_get_mkldnn_enabled", "_set_mkldnn_enabled", bool, _ONEDNN),
    (
        "mkldnn.deterministic",
        "_get_mkldnn_deterministic",
        "_set_mkldnn_deterministic",
        bool,
        _ONEDNN,
    ),
    ("mkldnn.allow_tf32", "_get_onednn_allow_tf32", "_set_onednn_allow_tf32", bool, _ONEDNN),
    ("sdp.flash", "_get_flash_sdp_enabled", "_set_sdp_use_flash", bool, _SDP),
    (
        "sdp.mem_efficient",
        "_get_mem_efficient_sdp_enabled",
        "_set_sdp_use_mem_efficient",
        bool,
        _SDP,
    ),
    ("sdp.math", "_get_math_sdp_enabled", "_set_sdp_use_math", bool, _SDP),
    ("sdp.cudnn", "_get_cudnn_sdp_enabled", "_set_sdp_use_cudnn", bool, _SDP),
    ("sdp.overrideable", "_get_overrideable_sdp_enabled", "_set_sdp_use_overrideable", bool, _SDP),
    ("sdp.fa3", "_get_fa3_sdp_enabled", "_set_sdp_use_fa3", bool, _SDP),
    ("sdp.priority_order", "_get_sdp_priority_order", "_set_sdp_priority_order", list, _SDP),
    (
        "sdp.math_allow_fp16_bf16_reduction",
        "_get_math_sdp_allow_fp16_bf16_reduction",
        "_set_math_sdp_allow_fp16_bf16_reduction",
        bool,
        _SDP,
    ),
    ("cublas.allow_tf32", "_get_cublas_allow_tf32", "_set_cublas_allow_tf32", bool, _CUBLAS),
    (
        "cublas.allow_fp16_reduced_precision_reduction",
        "_get_cublas_allow_fp16_reduced_precision_reduction",
        "_set_cublas_allow_fp16_reduced_precision_reduction",
        bool,
        _CUBLAS,
    ),
    (
        "cublas.allow_bf16_reduced_precision_reduction",
        "_get_cublas_allow_bf16_reduced_precision_reduction",
        "_set_cublas_allow_bf16_reduced_precision_reduction",
        bool,
        _CUBLAS,
    ),
    (
        "cublas.allow_fp16_accumulation",
        "_get_cublas_allow_fp16_accumulation",
        "_set_cublas_allow_fp16_accumulation",
        bool,
        _CUBLAS,
    ),
)

# The flags a program may set and reset within a call, by name (those this torch build has).
BACKEND_FLAGS: dict[str, BackendFlag] = {
    name: BackendFlag(name, getattr(torch._C, get), getattr(torch._C, put), kind, families, devices)
    for name, get, put, kind, (families, devices) in _SETTINGS
    if hasattr(torch._C, get) and hasattr(torch._C, put)
}

# ``torch._C._get_fp32_precision_getter(backend, op)`` and its setter: one flag per pair, named
# ``fp32_precision.<backend>.<op>`` (``backend``: "generic", "cuda", "mkldnn"; ``op``: "all",
# "matmul", "conv", "rnn").
FP32_PRECISION = (
    getattr(torch._C, "_get_fp32_precision_getter", None),
    getattr(torch._C, "_set_fp32_precision_setter", None),
)
_FP32_DEVICES = {
    "cuda": frozenset({"cuda"}),
    "cudnn": frozenset({"cuda"}),
    "mkldnn": frozenset({"cpu"}),
}

# Settings a program may read but not change (torch's deterministic mode and float32 matmul
# precision: changing one inside a call still runs the call eagerly).
QUERIES = tuple(
    q
    for q in (
        getattr(torch._C, name, None)
        for name in (
            "_get_deterministic_algorithms",
            "_get_deterministic_algorithms_warn_only",
            "_get_deterministic_fill_uninitialized_memory",
            "_get_float32_matmul_precision",
            "_get_cpu_allow_fp16_reduced_precision_reduction",
        )
    )
    if q is not None
)


@functools.cache
def flag_named(name: str) -> BackendFlag:
    """The flag ``name`` (``fp32_precision.<backend>.<op>`` included)."""
    found = BACKEND_FLAGS.get(name)
    if found is not None:
        return found
    prefix, backend, op = name.split(".")
    get, put = FP32_PRECISION
    if prefix != "fp32_precision" or get is None or put is None:
        raise KeyError(name)
    return BackendFlag(
        name,
        get,
        put,
        str,
        frozenset({_CONV, _MATMUL}),
        _FP32_DEVICES.get(backend),
        (backend, op),
    )


# -- names of fallbacks run under flags ----------------------------------------------------------

_FLAGS_NAME = re.compile(r"^(?P<name>.+) under flags\((?P<settings>\{.*\})\)$")


def flags_name(name: str, flags: ChangedFlags) -> str:
    """The name of the torch callable ``name`` run under ``flags``."""
    return f"{name} under flags({dict(flags)!r})"


def split_flags_name(name: str) -> tuple[str, ChangedFlags | None]:
    """The torch callable's name and the flags it runs under (None: as they are)."""
    found = _FLAGS_NAME.match(name)
    if found is None:
        return name, None
    settings = ast.literal_eval(found["settings"])
    return found["name"], tuple(sorted(settings.items()))


@contextlib.contextmanager
def _flags_set(flags: ChangedFlags) -> Iterator[None]:
    """The flags set for the block, each put back after it as it was."""
    done: list[tuple[BackendFlag, Any]] = []
    try:
        for name, value in flags:
            flag = flag_named(name)
            before = flag.get(*flag.args)
            flag.set(*flag.args, value)
            done.append((flag, before))
        yield
    finally:
        for flag, before in reversed(done):
            flag.set(*flag.args, before)


def run_under_flags(fn: Any, flags: ChangedFlags) -> Any:
    """``fn`` called with ``flags`` set (and put back after)."""

    def run_under(*args: Any, **kwargs: Any) -> Any:
        with _flags_set(flags):
            return fn(*args, **kwargs)

    return run_under


# -- which calls run under the flags -------------------------------------------------------------

_FAMILY_OF = {
    **dict.fromkeys(
        (
            "conv1d",
            "conv2d",
            "conv3d",
            "conv_transpose1d",
            "conv_transpose2d",
            "conv_transpose3d",
        ),
        _CONV,
    ),
    **dict.fromkeys(("batch_norm", "instance_norm"), _NORM),
    "scaled_dot_product_attention": _ATTENTION,
}


def _family(sym: Any) -> str | None:
    if OpTag.MATMUL in sym.tags:
        return _MATMUL
    return _FAMILY_OF.get(sym.name)


def flags_for(args: Any, kwargs: Any, family: str | None = None) -> ChangedFlags:
    """Of the flags the recording program changed, those a call on ``(args, kwargs)`` runs under:
    the flags for a device its tensors are on (and, given an op's ``family``, for the kernels of
    that family; a torch fallback is opaque: every such flag)."""
    trace = get_tracectx()
    changed = trace.backend_flags if trace is not None else ()
    if not changed:
        return ()
    devices = {x.device.type for x in tree_iter((args, kwargs)) if isinstance(x, TensorProxy)}
    if not devices:
        return ()
    chosen = []
    for name, value in changed:
        flag = flag_named(name)
        if flag.devices is not None and flag.devices.isdisjoint(devices):
            continue
        if family is not None and family not in flag.families:
            continue
        chosen.append((name, value))
    return tuple(chosen)


# What ``record_under_flags`` returns for a call it leaves to the op.
NOT_ROUTED = object()


def record_under_flags(sym: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A top-level call of the op ``sym`` recorded while the program's flags differ from the
    call's: where its kernel reads a changed flag, the torch fallback of its callable (run under
    the flags); else ``NOT_ROUTED``."""
    from thunder_ir.ops._registry import resolve_torch_name
    from thunder_ir.ops.fallback import call_torch_fallback

    family = _family(sym)
    if family is None or not sym.torch_names or not flags_for(args, kwargs, family):
        return NOT_ROUTED
    fn = resolve_torch_name(sym.torch_names[0])
    if fn is None:
        return NOT_ROUTED
    return call_torch_fallback(fn, args, kwargs)
