"""Matrix products on the CPU through oneDNN where it is the faster kernel on this machine.

Eager torch computes a float32 ``linear``, ``mm`` or ``matmul`` on the CPU with its BLAS (MKL in
the release builds). On CPUs whose vector units MKL does not use (AMD's, with AVX-512) oneDNN's
kernels for the same products are about twice as fast: a ``512x128 @ 128x384`` product takes
246 us through ``F.linear``, 119 us through oneDNN's ``_linear_pointwise``; a training step of a
small GPT spends most of its time there. On others MKL is as fast or faster, and for small
products oneDNN's fixed cost (~10 us a call) loses. So it is measured: the first time an
execution trace holds a product of a given size, both kernels are timed on tensors of that
size (``pays``) and the product runs through oneDNN only where it takes at most 0.8 of eager's
time; the decisions are logged (``THUNDER_LOGS=compiles``) and kept for the process.

The substituted calls (``onednn_matmul_products``, a pass over execution traces) compute the
same product: oneDNN sums in its own order, so results agree with eager's within a float32
kernel choice's rounding (often bit for bit). At run time a call falls back to eager's function
where oneDNN does not apply: autograd recording it (oneDNN's op has no derivative), oneDNN
turned off (``torch.backends.mkldnn``), a dispatch or function mode active (a fake-tensor
pass, a FLOP counter: they see eager's op), a tensor subclass or another dtype or device.
``THUNDER_ONEDNN_MATMUL=0`` keeps eager's kernels everywhere; ``=1`` takes oneDNN for every
product it applies to, unmeasured.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from thunder_executors.torch_symbols import helper_symbol
from thunder_ir import BoundSymbol, TensorProxy
from thunder_ir.dtypes import to_torch_dtype

__all__ = ["left_to_onednn", "linear", "matmul", "mm", "onednn_matmul_products", "pays"]

# thunder's "compiles" channel (``THUNDER_LOGS=compiles``): what a compilation chose
log = logging.getLogger("thunder.compiles")

# A product runs through oneDNN where it takes at most this share of eager's time.
_GAIN = 0.8
# Products measured on at most this many multiply-adds a call (fewer rows; the kernels' speeds
# per row hold), so that a large layer's first compile does not take seconds.
_MEASURED_MACS = 1 << 27
_PLAIN_TENSORS = (torch.Tensor, torch.nn.Parameter)


def _applies(*tensors: Any) -> bool:
    """Whether oneDNN's product can stand in for eager's on these tensors now."""
    for t in tensors:
        if t is None:
            continue
        if type(t) not in _PLAIN_TENSORS or t.dtype != torch.float32 or t.device.type != "cpu":
            return False
        if t.requires_grad and torch.is_grad_enabled():
            return False
    return (
        torch._C._get_mkldnn_enabled()
        and not torch._C._len_torch_dispatch_stack()
        and not torch._C._is_torch_function_mode_enabled()
    )


def _onednn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """``x @ w.T + b`` by oneDNN (any number of leading dimensions, any strides)."""
    out: torch.Tensor = torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "")
    return out


def linear(input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> Any:
    """``F.linear(input, weight, bias)``, through oneDNN where it applies."""
    if _applies(input, weight, bias) and input.ndim >= 2:
        return _onednn(input, weight, bias)
    return F.linear(input, weight, bias)


def mm(input: torch.Tensor, mat2: torch.Tensor) -> Any:
    """``torch.mm(input, mat2)``, through oneDNN where it applies."""
    if _applies(input, mat2):
        return _onednn(input, mat2.t(), None)
    return torch.mm(input, mat2)


def matmul(input: torch.Tensor, other: torch.Tensor) -> Any:
    """``torch.matmul(input, other)`` for a matrix ``other``, through oneDNN where it applies."""
    if _applies(input, other) and input.ndim >= 2 and other.ndim == 2:
        return _onednn(input, other.t(), None)
    return torch.matmul(input, other)


_LINEAR = helper_symbol("onednn_linear", linear)
_MM = helper_symbol("onednn_mm", mm)
_MATMUL = helper_symbol("onednn_matmul", matmul)

# The execution trace's products (the torch executor's and torch_ops' symbols) and, per
# symbol, what runs them through oneDNN and whether the weight is stored ``N, K`` (linear's)
# or ``K, N`` (a product's right matrix).
_PRODUCTS: dict[str, tuple[Any, bool]] = {
    "torch_ops::linear": (_LINEAR, True),
    "torch::torch_ex.linear": (_LINEAR, True),
    "torch_ops::mm": (_MM, False),
    "torch::torch.mm": (_MM, False),
    "torch_ops::matmul": (_MATMUL, False),
    "torch::torch.matmul": (_MATMUL, False),
}


def _setting() -> str | None:
    return os.environ.get("THUNDER_ONEDNN_MATMUL") or None


_decisions: dict[tuple[int, int, int, int], bool] = {}
_lock = threading.Lock()
_available: bool | None = None


def available() -> bool:
    """Whether this torch has oneDNN's product and it computes ``F.linear``'s result (checked
    once on a small product)."""
    global _available
    if _available is None:
        _available = _checks_out()
    return _available


def _checks_out() -> bool:
    from torch.utils._python_dispatch import _disable_current_modes

    try:
        if not torch.backends.mkldnn.is_available():  # type: ignore[no-untyped-call]
            return False
        with _disable_current_modes(), torch.no_grad():
            gen = torch.Generator().manual_seed(0)
            x = torch.randn(2, 5, 24, generator=gen)
            w, b = torch.randn(16, 24, generator=gen), torch.randn(16, generator=gen)
            got, want = _onednn(x, w, b), F.linear(x, w, b)
            return got.shape == want.shape and torch.allclose(got, want, rtol=1e-5, atol=1e-5)
    except Exception:  # another torch's ops: eager's products it is
        return False


def pays(m: int, k: int, n: int) -> bool:
    """Whether oneDNN computes an ``m x k`` by ``k x n`` float32 product on this machine (with
    torch's current thread count) in at most 0.8 of eager's time; measured once per size."""
    setting = _setting()
    if setting is not None:
        return setting == "1" and available()
    if not available() or min(m, k, n) < 1:
        return False
    key = (m, k, n, torch.get_num_threads())
    with _lock:
        decision = _decisions.get(key)
        if decision is None:
            decision = _decisions[key] = _measure(m, k, n)
    return decision


def _measure(m: int, k: int, n: int) -> bool:
    from torch.utils._python_dispatch import _disable_current_modes

    rows = max(1, min(m, _MEASURED_MACS // (k * n)))
    with _disable_current_modes(), torch.no_grad():
        gen = torch.Generator().manual_seed(0)  # (the program's generator draws eager's numbers)
        x, w = torch.randn(rows, k, generator=gen), torch.randn(n, k, generator=gen)
        kernels: list[Callable[[], Any]] = [
            lambda: torch.mm(x, w.t()),
            lambda: _onednn(x, w, None),
        ]
        best = [float("inf"), float("inf")]
        for trial in range(4):  # the first of each warms caches and oneDNN's primitive
            for i, kernel in enumerate(kernels):
                start = time.perf_counter()
                kernel()
                if trial:
                    best[i] = min(best[i], time.perf_counter() - start)
    decision = best[1] <= _GAIN * best[0]
    log.info(
        "CPU product %dx%d @ %dx%d (%d threads): eager %.1f us, oneDNN %.1f us (on %d rows): %s",
        m, k, k, n, torch.get_num_threads(), best[0] * 1e6, best[1] * 1e6, rows,
        "oneDNN" if decision else "eager's kernel",
    )  # fmt: skip
    return decision


def _product_size(bsym: BoundSymbol, weight_is_nk: bool) -> tuple[int, int, int] | None:
    """``(m, k, n)`` of a float32 CPU product with a matrix right operand and static sizes."""
    if bsym.kwargs or len(bsym.args) not in ((2, 3) if weight_is_nk else (2,)):
        return None
    x, w = bsym.args[:2]
    b = bsym.args[2] if len(bsym.args) == 3 else None
    operands = [x, w] if b is None else [x, w, b]
    for t in operands:
        if not isinstance(t, TensorProxy) or t.device.type != "cpu":
            return None
        if to_torch_dtype(t.dtype) != torch.float32:
            return None
        if not all(type(s) is int for s in t.shape):
            return None
    if x.ndim < 2 or w.ndim != 2:
        return None
    n, k = w.shape if weight_is_nk else w.shape[::-1]
    m = 1
    for s in x.shape[:-1]:
        m *= s
    return (m, k, n) if x.shape[-1] == k else None


def _op_products() -> dict[Any, bool]:
    from thunder_ir import ops as ltorch
    from thunder_ir import prims

    return {
        prims.linear: True, ltorch.linear: True,
        prims.matmul: False, ltorch.matmul: False, ltorch.mm: False,
    }  # fmt: skip


def left_to_onednn(bsym: BoundSymbol) -> bool:
    """Whether ``bsym`` is a product (an op or prim of a trace not yet executable) that this
    pass runs through oneDNN: a fusion executor leaves it out of its regions, whose compiler
    would compute it with eager's kernel."""
    weight_is_nk = _op_products().get(bsym.sym)
    if weight_is_nk is None or _setting() == "0":
        return False
    size = _product_size(bsym, weight_is_nk)
    return size is not None and pays(*size)


def onednn_matmul_products(bsyms: Sequence[BoundSymbol]) -> list[BoundSymbol]:
    """``bsyms`` with each float32 CPU product that oneDNN computes faster on this machine
    (``pays``) run through oneDNN, with the same arguments and output."""
    if _setting() == "0":
        return list(bsyms)
    out = []
    for b in bsyms:
        entry = _PRODUCTS.get(b.sym.id)
        size = None if entry is None else _product_size(b, entry[1])
        if entry is not None and size is not None and pays(*size):
            b = BoundSymbol(entry[0], b.args, b.kwargs, b.output, header=b.header)
        out.append(b)
    return out
