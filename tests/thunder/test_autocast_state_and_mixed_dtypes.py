"""Autocast state a program reads (the per-device dtype, enabled, the weight cache), also when the
call is made with autocast off; eager's CPU rules for normalization parameters of another dtype
than the input's; std_mean/var_mean gradients of low-precision inputs; autocast's weight cache
across nested blocks of different dtypes. Thunder against eager over several calls (caches
exercised), with the default cache and ``cache="symbolic values"``."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

CACHES = [None, "symbolic values"]
bf16, fp16, fp32, fp64 = torch.bfloat16, torch.float16, torch.float32, torch.float64


def _jit(fn: Callable[..., Any], cache: str | None) -> Callable[..., Any]:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


@contextlib.contextmanager
def _cpu_autocast_dtype(dtype: torch.dtype) -> Iterator[None]:
    saved = torch.get_autocast_dtype("cpu")
    torch.set_autocast_dtype("cpu", dtype)
    try:
        yield
    finally:
        torch.set_autocast_dtype("cpu", saved)


def _same(t: Any, e: Any) -> None:
    if isinstance(e, (tuple, list)):
        assert len(t) == len(e)
        for a, b in zip(t, e):
            _same(a, b)
        return
    if isinstance(e, torch.Tensor):
        assert t.dtype == e.dtype
        torch.testing.assert_close(t, e)
    else:
        assert t == e


# -- 1, 2: the autocast state a program reads, with autocast off at the call --------------------


def _autocast_default_dtype(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    with torch.autocast("cpu"):  # dtype: torch.get_autocast_dtype("cpu") as the block starts
        return a @ b


def _reads_dtype(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(2, dtype=torch.get_autocast_dtype("cpu")) + x


def _reads_dtype_legacy(x: torch.Tensor) -> torch.Tensor:
    return torch.zeros(2, dtype=torch.get_autocast_cpu_dtype()) + x  # (deprecated spelling)


def _nested_default_dtype(a: torch.Tensor, b: torch.Tensor) -> Any:
    with torch.autocast("cpu", dtype=torch.float16):
        with torch.autocast("cpu"):  # the outer block's dtype
            return a @ b, torch.get_autocast_dtype("cpu")


def _disabled_block_dtype(x: torch.Tensor) -> Any:
    # eager's __enter__ sets the dtype also for a block that disables autocast
    with torch.autocast("cpu", dtype=torch.float16, enabled=False):
        return torch.zeros(2, dtype=torch.get_autocast_dtype("cpu")) + x


def _any_enabled(x: torch.Tensor) -> Any:
    with torch.autocast("cpu"):
        inside = torch._C._is_any_autocast_enabled()
        with torch.autocast("cpu", enabled=False):
            off = torch._C._is_any_autocast_enabled()
    return x + 1, inside, off, torch._C._is_any_autocast_enabled()


def _cache_state(x: torch.Tensor) -> Any:
    with torch.autocast("cpu", cache_enabled=False):
        with torch.autocast("cpu"):  # cache_enabled: as the outer block set it
            inner = torch.is_autocast_cache_enabled()
        outer = torch.is_autocast_cache_enabled()
    return x + 1, inner, outer, torch.is_autocast_cache_enabled()


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn",
    [_autocast_default_dtype, _reads_dtype, _reads_dtype_legacy, _nested_default_dtype],
    ids=lambda f: f.__name__,
)
def test_autocast_dtype_changed_between_calls(fn: Callable[..., Any], cache: str | None) -> None:
    jf = _jit(fn, cache)
    nargs = fn.__code__.co_argcount
    for dtype in (bf16, fp16, fp16, bf16):
        with _cpu_autocast_dtype(dtype), warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning)
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            args = [torch.randn(2, 2) for _ in range(nargs)]
            if fn in (_reads_dtype, _reads_dtype_legacy):
                args = [torch.randn(2, dtype=fp16)]
            _same(jf(*args), fn(*args))


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn", [_disabled_block_dtype, _cache_state, _any_enabled], ids=lambda f: f.__name__
)
def test_autocast_state_inside_program_blocks(fn: Callable[..., Any], cache: str | None) -> None:
    jf = _jit(fn, cache)
    for dtype in (bf16, fp16, bf16):
        with _cpu_autocast_dtype(dtype):
            x = torch.randn(2, dtype=bf16)
            _same(jf(x), fn(x))


def test_autocast_cache_enabled_changed_between_calls() -> None:
    jf = thunder.jit(_cache_state)
    saved = torch.is_autocast_cache_enabled()
    try:
        for enabled in (True, False, True):
            torch.set_autocast_cache_enabled(enabled)
            x = torch.randn(2)
            _same(jf(x), _cache_state(x))
    finally:
        torch.set_autocast_cache_enabled(saved)


# -- 3: normalization with parameters of another dtype than the input's (CPU) ------------------


def _w(dtype: torch.dtype | None, value: float = 1.5) -> torch.Tensor | None:
    return None if dtype is None else torch.full((4,), value, dtype=dtype)


def _norm_cases() -> list[tuple[str, Callable[..., Any], torch.dtype]]:
    """(name, fn of x, the input's dtype)."""
    cases: list[tuple[str, Callable[..., Any], torch.dtype]] = []
    combos = [
        (fp32, bf16, bf16),
        (fp32, fp16, None),
        (fp64, fp32, fp32),
        (fp64, fp32, fp64),
        (bf16, fp32, fp32),
        (bf16, fp32, None),
        (fp16, fp32, fp32),
        (bf16, fp32, bf16),
        (bf16, bf16, fp32),
        (bf16, fp16, fp16),
        (fp16, fp64, None),
        (fp32, fp32, fp16),
    ]
    for x, w, b in combos:
        tag = f"x{x}_w{w}_b{b}".replace("torch.", "")

        def ln(a: torch.Tensor, w: Any = w, b: Any = b) -> torch.Tensor:
            return F.layer_norm(a, (4,), _w(w), _w(b, 0.25))

        def gn(a: torch.Tensor, w: Any = w, b: Any = b) -> torch.Tensor:
            return F.group_norm(a, 2, _w(w), _w(b, 0.25))

        def bn_train(a: torch.Tensor, w: Any = w, b: Any = b) -> torch.Tensor:
            return F.batch_norm(a, None, None, _w(w), _w(b, 0.25), training=True)

        def bn_eval_stats(a: torch.Tensor, w: Any = w, b: Any = b) -> torch.Tensor:
            return F.batch_norm(a, _w(w, 0.1), _w(b or w, 2.0))

        def bn_eval_weight(a: torch.Tensor, w: Any = w, x: Any = x) -> torch.Tensor:
            return F.batch_norm(a, _w(x, 0.1), _w(x, 2.0), _w(w))

        for f in (ln, gn, bn_train, bn_eval_stats, bn_eval_weight):
            cases.append((f"{f.__name__}-{tag}", f, x))
    cases.append(
        ("layernorm_module_bf16", lambda a, m=torch.nn.LayerNorm(4).bfloat16(): m(a), fp32)
    )
    return cases


NORM_CASES = _norm_cases()


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("case", NORM_CASES, ids=[c[0] for c in NORM_CASES])
def test_norm_parameter_dtypes_as_eager(case: Any, requires_grad: bool) -> None:
    _, fn, xdtype = case
    jf = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(2, 4, dtype=xdtype).requires_grad_(requires_grad)
        x2 = x.detach().clone().requires_grad_(requires_grad)
        try:
            e = fn(x)
        except RuntimeError as err:
            with pytest.raises(RuntimeError) as got, warnings.catch_warnings():
                warnings.simplefilter("ignore")
                jf(x2)
            assert str(got.value) == str(err)
            continue
        t = jf(x2)
        _same(t, e)
        if requires_grad:
            g = torch.randn_like(e)
            try:
                (ge,) = torch.autograd.grad(e, x, g)
            except RuntimeError:  # eager's backward refuses some combinations its forward takes
                continue
            (gt,) = torch.autograd.grad(t, x2, g)
            assert gt.dtype == ge.dtype
            torch.testing.assert_close(gt, ge, atol=2e-2, rtol=2e-2)


def test_instance_norm_mixed_weight_as_eager() -> None:
    def fn(a: torch.Tensor) -> torch.Tensor:
        return F.instance_norm(a, weight=_w(bf16))

    jf = thunder.jit(fn)
    x = torch.randn(2, 4, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="mixed dtype"):
        fn(x)
    with pytest.raises(RuntimeError, match="mixed dtype"):
        jf(x)


# -- 4: std_mean/var_mean of low-precision inputs, differentiated ------------------------------


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("dtype", [bf16, fp16, fp32])
@pytest.mark.parametrize("op", [torch.std_mean, torch.var_mean], ids=["std_mean", "var_mean"])
@pytest.mark.parametrize(
    "kwargs",
    [{"dim": 1}, {"dim": (0, 1), "keepdim": True}, {"dim": 1, "correction": 0}, {}],
    ids=["dim1", "all_keepdim", "correction0", "whole"],
)
def test_std_var_mean_grad(op: Any, dtype: torch.dtype, kwargs: Any, cache: str | None) -> None:
    def fn(a: torch.Tensor) -> Any:
        return op(a, **kwargs)

    jf = _jit(fn, cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no internal error falling back to eager
        for _ in range(3):
            a = torch.randn(3, 4, dtype=dtype, requires_grad=True)
            a2 = a.detach().clone().requires_grad_()
            e, t = fn(a), jf(a2)
            _same(t, e)
            g1, g2 = torch.randn_like(e[0]), torch.randn_like(e[1])
            (ge,) = torch.autograd.grad((e[0] * g1 + e[1] * g2).sum(), a)
            (gt,) = torch.autograd.grad((t[0] * g1 + t[1] * g2).sum(), a2)
            assert gt.dtype == ge.dtype
            torch.testing.assert_close(gt, ge, atol=1e-2, rtol=1e-2)


# -- 5: autocast's weight cache across nested blocks of different dtypes -----------------------


def _nested_cache(a: torch.Tensor, b: torch.Tensor) -> Any:
    with torch.autocast("cpu", dtype=torch.bfloat16):
        x = a @ b  # a, b (leaves requiring grad) converted to bfloat16 and cached
        with torch.autocast("cpu", dtype=torch.float16):
            w = a @ b  # eager's cache is keyed by the tensor: the bfloat16 conversions
    return x, w


@pytest.mark.parametrize("cache", CACHES)
def test_nested_autocast_reuses_cached_conversion(cache: str | None) -> None:
    jf = _jit(_nested_cache, cache)
    for _ in range(3):
        a, b = torch.randn(3, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)
        a2, b2 = (t.detach().clone().requires_grad_() for t in (a, b))
        e, t = _nested_cache(a, b), jf(a2, b2)
        _same(t, e)
        (e[0].float().sum() + e[1].float().pow(2).sum()).backward()
        (t[0].float().sum() + t[1].float().pow(2).sum()).backward()
        for x, y in ((a, a2), (b, b2)):
            assert x.grad is not None and y.grad is not None
            torch.testing.assert_close(y.grad, x.grad)


# -- 6: out= variants under autocast (eager's autocast casts only the functional ops) ----------


OUT_CASES: dict[str, Callable[..., Any]] = {
    "mm_out_bf16": lambda a, b: torch.mm(a, b, out=torch.empty(3, 3, dtype=bf16)),
    "mm_out_fp32": lambda a, b: torch.mm(a, b, out=torch.empty(3, 3)),
    "matmul_out_fp32": lambda a, b: torch.matmul(a, b, out=torch.empty(3, 3)),
    "addmm_out_fp32": lambda a, b: torch.addmm(a, a, b, out=torch.empty(3, 3)),
    "mm_out_then_mm": lambda a, b: (torch.mm(a, b, out=torch.empty(3, 3)), a @ b),
}


@pytest.mark.parametrize("name", list(OUT_CASES))
def test_out_variant_under_autocast(name: str) -> None:
    body = OUT_CASES[name]

    def fn(a: torch.Tensor, b: torch.Tensor) -> Any:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return body(a, b)

    jf = thunder.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (a call torch runs is split, with a warning)
        for _ in range(3):
            a, b = torch.randn(3, 3), torch.randn(3, 3)
            try:
                e = fn(a, b)
            except RuntimeError as err:
                with pytest.raises(RuntimeError) as got:
                    jf(a, b)
                assert str(got.value) == str(err)
                continue
            t = jf(a, b)
            _same(t, e)
