"""Python numbers a tensor's dtype cannot hold, and loss functions' checks and gradients.

- A number that torch converts, checked, to a tensor's dtype (a clamp bound, add's alpha,
  addcmul's value, a fill value...) raises eager's "value cannot be converted to type ... without
  overflow" in every executor: a fusion region (torch.compile) would wrap or overflow it
  silently. A symbolic number (cache="symbolic values") is checked on every call.
- binary_cross_entropy, kl_div and l1_loss refuse the dtypes eager refuses.
- The gradient rules of smooth_l1_loss (a symbolic beta), vector_norm (a symbolic ord) and the
  pointwise losses (an empty batch) do not fail inside thunder.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder.errors import InternalErrorWarning

MODES = ["default", "torchcompile", "symbolic", "symbolic_torchcompile"]


def _jit(fn: Callable[..., Any], mode: str) -> Any:
    kwargs: dict[str, Any] = {}
    if "torchcompile" in mode:
        kwargs["executors"] = ["torchcompile"]
    if mode.startswith("symbolic"):
        kwargs["cache"] = "symbolic values"
    return thunder.jit(fn, **kwargs)


def _run_like_eager(jf: Any, fn: Callable[..., Any], *args: Any) -> None:
    """The jitted call raises eager's error (type and message), or returns eager's values."""
    clones = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    try:
        want = fn(*clones)
    except Exception as e:
        with pytest.raises(type(e)) as got:
            jf(*args)
        assert str(e) in str(got.value), (str(e), str(got.value))
        return
    with warnings.catch_warnings():
        warnings.simplefilter("error", InternalErrorWarning)
        out = jf(*args)
    assert out.dtype == want.dtype and out.shape == want.shape
    # integers exactly; floats as a fusion region may round (a fused multiply-add)
    exact = {"rtol": 0, "atol": 0} if not want.dtype.is_floating_point else {}
    torch.testing.assert_close(out, want, equal_nan=True, **exact)


def _tensor(dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    if dtype.is_floating_point:
        return (torch.randn(6, generator=g) * 4).to(dtype)
    low = 0 if dtype == torch.uint8 else -8
    return torch.randint(low, 9, (6,), generator=g, dtype=dtype)


# (fn(x, number), dtype, a number that fits, a number eager refuses or None)
_OVERFLOWS: dict[str, tuple[Callable[..., Any], torch.dtype, Any, Any]] = {
    "clamp_max_int8": (lambda x, v: (x + 0).clamp(max=v), torch.int8, 5, 1000),
    "clamp_min_int8": (lambda x, v: (x + 0).clamp(min=v), torch.int8, -5, -300),
    "clamp_int32": (lambda x, v: (x + 0).clamp(max=v), torch.int32, 5, 2**31),
    "clamp_uint8": (lambda x, v: (x + 0).clamp(min=v), torch.uint8, -1, -300),
    "clamp_float16": (lambda x, v: (x + 0).clamp(max=v), torch.float16, 2.0, 1e6),
    "clamp_float32": (lambda x, v: (x + 0).clamp(min=-v), torch.float32, 2.0, 1e40),
    "clamp_min_fn": (lambda x, v: torch.clamp_min(x + 0, v), torch.int8, 2, 1000),
    "clip": (lambda x, v: torch.clip(x + 0, -v, v), torch.int8, 2, 200),
    "hardtanh_int8": (lambda x, v: F.hardtanh(x + 0, -v, v), torch.int8, 5, 300),
    "hardtanh_float16": (lambda x, v: F.hardtanh(x + 0, -v, v), torch.float16, 2.0, 1e6),
    "threshold_value": (lambda x, v: F.threshold(x + 0, 0.1, v), torch.float16, 2.0, 1e6),
    "threshold_int8": (lambda x, v: F.threshold(x + 0, v, 1), torch.int8, 2, 300),
    "threshold_float16_threshold": (
        lambda x, v: F.threshold(x + 0, v, 1.0),
        torch.float16,
        2.0,
        None,
    ),
    "full_like": (lambda x, v: torch.full_like(x + 0, v), torch.float16, 2.0, 1e6),
    "full": (lambda x, v: x + torch.full((6,), v, dtype=torch.int8), torch.int8, 2, 300),
    "fill_": (lambda x, v: (x + 0).fill_(v), torch.int8, 2, 300),
    "masked_fill": (lambda x, v: (x + 0).masked_fill(x > 0, v), torch.int8, 2, 300),
    "pad": (lambda x, v: F.pad(x + 0, (1, 1), value=v), torch.int8, 2, 300),
    "add_alpha_int8": (lambda x, v: torch.add(x + 0, x, alpha=v), torch.int8, 2, 300),
    "add_alpha_uint8": (lambda x, v: torch.add(x + 0, x, alpha=v), torch.uint8, -1, 300),
    "sub_alpha": (lambda x, v: torch.sub(x + 0, x, alpha=v), torch.int8, 2, -300),
    "add_alpha_float32": (lambda x, v: torch.add(x + 0, x, alpha=v), torch.float32, 2.0, 1e40),
    "add_alpha_float16": (lambda x, v: torch.add(x + 0, x, alpha=v), torch.float16, 2.0, 1e6),
    "iadd_alpha": (lambda x, v: (x + 0).add_(x, alpha=v), torch.int8, 2, 300),
    "addcmul_int8": (lambda x, v: torch.addcmul(x + 0, x, x, value=v), torch.int8, 2, 300),
    "addcmul_float32": (lambda x, v: torch.addcmul(x + 0, x, x, value=v), torch.float32, 2.0, 1e40),
    "addcmul_float16": (lambda x, v: torch.addcmul(x + 0, x, x, value=v), torch.float16, 2.0, None),
    "addcdiv_float32": (
        lambda x, v: torch.addcdiv(x + 0, x, x.abs() + 1, value=v),
        torch.float32,
        2.0,
        1e40,
    ),
    "lerp_float32": (lambda x, v: torch.lerp(x + 0, x * 2, v), torch.float32, 0.3, 1e40),
    "lerp_float16": (lambda x, v: torch.lerp(x + 0, x * 2, v), torch.float16, 0.3, None),
    "where_int8": (lambda x, v: torch.where(x > 0, x + 0, v), torch.int8, 2, 300),
    "where_float32": (lambda x, v: torch.where(x > 0, x + 0, v), torch.float32, 2.0, 1e40),
    "where_float16": (lambda x, v: torch.where(x > 0, x + 0, v), torch.float16, 2.0, None),
    "hardshrink": (lambda x, v: F.hardshrink(x + 0, v), torch.float16, 0.5, 1e6),
}
# numbers eager takes though the tensor's dtype does not hold them (computed in float32)
_TAKEN = {"threshold_float16_threshold", "addcmul_float16", "lerp_float16", "where_float16"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", sorted(_OVERFLOWS))
def test_a_number_the_dtype_cannot_hold_raises_as_eager(case: str, mode: str) -> None:
    fn, dtype, fits, refused = _OVERFLOWS[case]
    if refused is None:
        assert case in _TAKEN
        refused = 1e6 if dtype == torch.float16 else 1e40
    jf = _jit(fn, mode)
    g = torch.Generator().manual_seed(0)
    for v in (fits, refused, fits, refused, fits):
        _run_like_eager(jf, fn, _tensor(dtype, g), v)


def test_the_examples_raise_in_eager() -> None:
    # the cases above test what they claim: eager refuses each number (but those it takes)
    for case, (fn, dtype, fits, refused) in _OVERFLOWS.items():
        x = _tensor(dtype, torch.Generator().manual_seed(0))
        fn(x.clone(), fits)
        if refused is not None:
            with pytest.raises(RuntimeError, match="without overflow"):
                fn(x.clone(), refused)


@pytest.mark.parametrize("case", ["clamp_max_int8", "add_alpha_int8", "full_like"])
def test_thunder_compile_raises_once_its_region_is_compiled(case: str) -> None:
    from thunder_executors.background_compile import wait_for_background_compiles

    fn, dtype, fits, refused = _OVERFLOWS[case]
    cf = thunder.compile(fn)
    g = torch.Generator().manual_seed(1)
    for v in (refused, fits, refused, refused, fits):
        _run_like_eager(cf, fn, _tensor(dtype, g), v)
        assert wait_for_background_compiles(timeout=300)


# Losses: dtypes eager refuses ------------------------------------------------------------------

_TARGETS = {
    "int64": lambda g: torch.randint(0, 2, (4, 3), generator=g),
    "float64": lambda g: torch.rand(4, 3, generator=g, dtype=torch.float64),
    "float16": lambda g: torch.rand(4, 3, generator=g).half(),
    "bfloat16": lambda g: torch.rand(4, 3, generator=g).bfloat16(),
    "bool": lambda g: torch.rand(4, 3, generator=g) > 0.5,
    "float32": lambda g: torch.rand(4, 3, generator=g),
}
_LOSSES = {
    "binary_cross_entropy": lambda x, t: F.binary_cross_entropy(x, t),
    "kl_div": lambda x, t: F.kl_div(x, t, reduction="batchmean"),
    "kl_div_log_target": lambda x, t: F.kl_div(x, t, reduction="sum", log_target=True),
    "l1_loss": lambda x, t: F.l1_loss(x, t),
    "mse_loss": lambda x, t: F.mse_loss(x, t),
}


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("mode", ["default", "torchcompile"])
@pytest.mark.parametrize("target", sorted(_TARGETS))
@pytest.mark.parametrize("loss", sorted(_LOSSES))
def test_loss_target_dtypes_as_eager(
    loss: str, target: str, mode: str, requires_grad: bool
) -> None:
    fn = _LOSSES[loss]
    jf = _jit(fn, mode)
    g = torch.Generator().manual_seed(2)
    for _ in range(3):
        x = (torch.rand(4, 3, generator=g) * 0.8 + 0.1).requires_grad_(requires_grad)
        t = _TARGETS[target](g)
        xe = x.detach().clone().requires_grad_(requires_grad)
        try:
            want = fn(xe, t)
        except Exception as e:
            with pytest.raises(type(e)) as got:
                jf(x, t)
            assert str(e) in str(got.value)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("error", InternalErrorWarning)
            out = jf(x, t)
        torch.testing.assert_close(out, want)
        if requires_grad:
            (gx,) = torch.autograd.grad(out, x)
            (gxe,) = torch.autograd.grad(want, xe)
            torch.testing.assert_close(gx, gxe)


def test_binary_cross_entropy_refuses_another_target_dtype() -> None:
    p, t = torch.rand(4, 3), torch.randint(0, 2, (4, 3))
    with pytest.raises(RuntimeError, match="Found dtype Long but expected Float"):
        thunder.jit(F.binary_cross_entropy)(p, t)
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        thunder.jit(F.binary_cross_entropy)(t, t)


# Gradient rules -------------------------------------------------------------------------------


def _grads_like_eager(jf: Any, fn: Callable[..., Any], x: torch.Tensor, *rest: Any) -> None:
    xe = x.detach().clone().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("error", InternalErrorWarning)
        out = jf(x, *rest)
        want = fn(xe, *rest)
        torch.testing.assert_close(out, want, equal_nan=True)
        gout = torch.randn_like(want)
        (gx,) = torch.autograd.grad(out, x, gout)
    (gxe,) = torch.autograd.grad(want, xe, gout)
    torch.testing.assert_close(gx, gxe, equal_nan=True)


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_smooth_l1_loss_with_a_changing_beta(cache: str | None) -> None:
    m = torch.nn.SmoothL1Loss()
    jm = thunder.jit(m) if cache is None else thunder.jit(m, cache=cache)
    g = torch.Generator().manual_seed(3)
    for beta in (1.0, 0.5, 2.0, 0.0, 0.7, 0.0):
        m.beta = beta
        x = torch.randn(4, 3, generator=g).requires_grad_()
        _grads_like_eager(jm, m, x, torch.randn(4, 3, generator=g))
    assert thunder.compile_stats(jm).eager_fallbacks == 0


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_losses_with_a_changing_number_argument(cache: str | None) -> None:
    def fn(x: torch.Tensor, y: torch.Tensor, v: float) -> torch.Tensor:
        return F.smooth_l1_loss(x, y, beta=v) + F.huber_loss(x, y, delta=v + 0.5)

    jf = thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)
    g = torch.Generator().manual_seed(4)
    for v in (1.0, 0.25, 0.0, 3.0, 0.0):
        x = torch.randn(5, 2, generator=g).requires_grad_()
        _grads_like_eager(jf, fn, x, torch.randn(5, 2, generator=g), v)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_vector_norm_with_a_symbolic_ord() -> None:
    def fn(x: torch.Tensor, p: float) -> torch.Tensor:
        return torch.linalg.vector_norm(x, ord=p) * 1.0

    jf = thunder.jit(fn, cache="symbolic values")
    g = torch.Generator().manual_seed(5)
    for p in (2.0, 3.0, 1.0, 2.5):
        _grads_like_eager(jf, fn, torch.randn(7, generator=g).requires_grad_(), p)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InternalErrorWarning)
        x = torch.randn(7, generator=g).requires_grad_()
        out = jf(x, 0.0)
    assert torch.equal(out, fn(x, 0.0)) and out.requires_grad
    assert thunder.compile_stats(jf).eager_fallbacks == 0


_EMPTY_LOSSES = {
    "mse_loss": F.mse_loss,
    "l1_loss": F.l1_loss,
    "smooth_l1_loss": F.smooth_l1_loss,
    "huber_loss": F.huber_loss,
    "soft_margin_loss": F.soft_margin_loss,
    "binary_cross_entropy_with_logits": F.binary_cross_entropy_with_logits,
}


@pytest.mark.parametrize("mode", ["default", "torchcompile"])
@pytest.mark.parametrize("loss", sorted(_EMPTY_LOSSES))
def test_mean_loss_of_an_empty_batch_with_grad(loss: str, mode: str) -> None:
    fn = _EMPTY_LOSSES[loss]
    jf = _jit(fn, mode)
    g = torch.Generator().manual_seed(6)
    for n in (0, 0, 2):
        x = torch.randn(n, 3, generator=g).requires_grad_()
        _grads_like_eager(jf, fn, x, torch.randn(n, 3, generator=g).sigmoid())
    assert thunder.compile_stats(jf).eager_fallbacks == 0
