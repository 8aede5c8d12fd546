"""Fusion regions compiled by inductor compute eager's numbers on edge values (DESIGN.md, "Regions
compute eager's numbers"): every elementwise unary and binary op that can land in a region, run on
tiny normals, subnormals, +-0, +-inf, nan and large values, in one region per dtype.

Bit for bit (signed zeros and nan positions included) except ``ULP_LEVEL`` ops: eager's CPU
kernels compute those with a vendor math library (MKL's VML, Sleef) that inductor's code does not
call, so both are within an ulp or two of the exact value but not each other; there the region
must stay within ``MAX_ULPS`` of eager, with eager's nan, inf, zero signs and subnormals.
``maximum``/``minimum`` of +-0 depends on eager's own loop (its vectorized loop returns the second
argument, its scalar one the first): compared with eager on the same contiguous tensor.
Elements where the program without fusion is not eager's either (float16 erf and rsqrt, bfloat16
fmod: thunder's decompositions compute in float32) are left to the ops' own tests.
Ops inductor computes otherwise (expm1, erf, atanh, GELU on the CPU...) run outside regions.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import thunder

EXECUTORS = ["torchcompile", "torch_ops", "torch"]
MAX_ULPS = 4

UNARY: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    **{
        n: getattr(torch, n)
        for n in (
            "abs acos acosh asin asinh atan atanh ceil cos cosh digamma erf erfc erfinv exp exp2 "
            "expm1 floor isfinite isinf isnan lgamma log log10 log1p log2 neg reciprocal round "
            "rsqrt sigmoid sign signbit sin sinh sqrt tan tanh trunc square frac sinc logit "
            "nan_to_num deg2rad i0"
        ).split()
    },
    "relu": F.relu,
    "relu6": F.relu6,
    "elu": F.elu,
    "selu": F.selu,
    "celu": F.celu,
    "gelu": F.gelu,
    "gelu_tanh": lambda a: F.gelu(a, approximate="tanh"),
    "silu": F.silu,
    "mish": F.mish,
    "softplus": F.softplus,
    "softshrink": F.softshrink,
    "hardshrink": F.hardshrink,
    "tanhshrink": F.tanhshrink,
    "hardtanh": F.hardtanh,
    "hardtanh_0_1": lambda a: F.hardtanh(a, 0.0, 1.0),
    "hardsigmoid": F.hardsigmoid,
    "hardswish": F.hardswish,
    "leaky_relu": F.leaky_relu,
    "logsigmoid": F.logsigmoid,
    "softsign": F.softsign,
    "threshold": lambda a: F.threshold(a, 0.1, 20.0),
    "clamp_min_0": lambda a: torch.clamp_min(a, 0.0),
    "clamp_max_0": lambda a: torch.clamp_max(a, -0.0),
    "clamp_0_1": lambda a: torch.clamp(a, 0.0, 1.0),
    "clamp_-1_1": lambda a: torch.clamp(a, -1.0, 1.0),
    "ndtr": torch.special.ndtr,
    "log_ndtr": torch.special.log_ndtr,
    "expit": torch.special.expit,
    "erfcx": torch.special.erfcx,
}
BINARY: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    **{
        n: getattr(torch, n)
        for n in (
            "add sub mul div atan2 copysign fmod remainder floor_divide eq ne ge gt le lt "
            "maximum minimum fmax fmin pow hypot nextafter xlogy logaddexp"
        ).split()
    },
    "where_gt": lambda a, b: torch.where(a > b, a, b),
    "clamp_tensor_min": lambda a, b: torch.clamp(a, min=b),
}
# Eager computes these with a vendor math library (ulp-level differences, never a class change).
ULP_LEVEL = frozenset(
    "asinh atan atan2 cos cosh erfc erfinv gelu gelu_tanh i0 mish sin sinc sinh softplus sqrt "
    "tanh tanhshrink".split()
)
# Results within a few ulps of the input's magnitude. x - f(x) with f(x) ~ x: an ulp of f's is an
# ulp of x's in the result (0 in eager, 7e-15 there). GELU, x * cdf(x): the region's erf (not
# eager's) moves cdf by ulps of 1, so the result by ulps of x (gelu(-2.0) is 40 of its own ulps
# off; in the far tail, where the result is tiny, far below an ulp of x).
CANCELLING = frozenset({"tanhshrink", "gelu"})
# x * f(x) with f(x) subnormal (mish(-100)): an ulp of f's, times x.
SCALED_SUBNORMAL = frozenset({"mish"})
_MANTISSA_BITS = {torch.float64: 53, torch.float32: 24, torch.float16: 11, torch.bfloat16: 8}


def _edge_values(dtype: torch.dtype) -> torch.Tensor:
    fi = torch.finfo(dtype)
    small = [1e-7, 6e-8, 3e-6, 1e-5, 1e-4, 1e-3, 1e-2] if dtype.itemsize > 2 else [1e-4, 1e-3, 1e-2]
    magnitudes = [0.0, fi.smallest_normal / 4, fi.smallest_normal, *small, 0.1, 0.5, 1.0, 2.0]
    magnitudes += [10.0, 30.0, 88.0, 100.0, 1e4, fi.max / 2, fi.max, math.inf]
    values = [*magnitudes, *(-v for v in magnitudes), math.nan]
    return torch.tensor(values, dtype=torch.float64).to(dtype)


def _pairs(dtype: torch.dtype, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Every pair of edge values, in a fresh random order (values land in vector bodies and
    tails), with the edge values alone appended."""
    g = _edge_values(dtype)
    n = g.numel()
    order = torch.randperm(n * n, generator=generator)
    x = g.repeat_interleave(n)[order]
    y = g.repeat(n)[order]
    return torch.cat([x, g]), torch.cat([y, g.flip(0)])


def _all_ops(dtype: torch.dtype) -> tuple[list[str], Callable[..., tuple[torch.Tensor, ...]]]:
    probe = _edge_values(dtype)
    unary = {}
    for name, op in UNARY.items():
        try:
            op(probe)
        except (RuntimeError, NotImplementedError):
            continue  # no eager kernel for this dtype
        unary[name] = op
    binary = {}
    for name, op in BINARY.items():
        try:
            op(probe, probe)
        except (RuntimeError, NotImplementedError):
            continue
        binary[name] = op

    def fn(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        x, y = x * 1, y * 1  # the ops' inputs come from inside the region
        return (*(op(x) for op in unary.values()), *(op(x, y) for op in binary.values()))

    return [*unary, *binary], fn


def _ulp(eager: torch.Tensor) -> torch.Tensor:
    """The spacing of ``eager``'s dtype at each value (subnormal spacing near zero), as float64."""
    e = eager.double().abs()
    _, exponent = torch.frexp(e)
    spacing = torch.ldexp(torch.ones_like(e), exponent - _MANTISSA_BITS[eager.dtype])
    fi = torch.finfo(eager.dtype)
    return spacing.clamp_min(fi.smallest_normal * fi.eps)


def _mismatches(
    name: str, x: torch.Tensor, eager: torch.Tensor, region: torch.Tensor
) -> torch.Tensor:
    """A mask of the elements where the region's result is not eager's."""
    if not eager.is_floating_point():
        bad = eager != region
        return bad & ~x.isnan() if name == "signbit" else bad  # a nan's sign is arbitrary
    both_nan = eager.isnan() & region.isnan()
    exact = (eager == region) & (eager.signbit() == region.signbit())
    if name not in ULP_LEVEL:
        return ~(exact | both_nan)
    finite = eager.isfinite() & region.isfinite()
    scale = _ulp(x.to(eager.dtype)) if name in CANCELLING else _ulp(eager)
    if name in SCALED_SUBNORMAL:
        fi = torch.finfo(eager.dtype)
        scale = scale + x.double().abs().nan_to_num(posinf=0.0) * fi.smallest_normal * fi.eps
    close = (eager.double() - region.double()).abs() <= MAX_ULPS * scale
    if name in CANCELLING:
        if name == "gelu":
            # eager's 0.5 * x * (1 + erf) overflows to inf for x > max / 2 where gelu(x) = x;
            # the region multiplies by 0.5 first and returns x
            overflow = eager.isinf() & x.isfinite() & (region.double() == x.double())
            # gelu(+-inf) is nan or the limit in eager, by the element's position in a vector
            infinite = x.isinf() & eager.isnan()
            return ~(exact | both_nan | (finite & close) | overflow | infinite)
        return ~(exact | both_nan | (finite & close))
    # A zero result keeps its sign; a nonzero one stays nonzero and of eager's sign.
    same_class = (eager.signbit() == region.signbit()) & ((eager == 0) == (region == 0))
    return ~(exact | both_nan | (finite & close & same_class))


def _report(names, x, y, eager, region, unfused=None) -> list[str]:
    """The ops whose region results are not eager's; with ``unfused`` (the program's results
    without fusion), elements where those are not eager's either are left out: the op's
    decomposition computes them, not the region (float16 erf and rsqrt, bfloat16 fmod...)."""
    problems = []
    unfused = unfused or [None] * len(names)
    for name, e, r, u in zip(names, eager, region, unfused, strict=True):
        bad = _mismatches(name, x, e, r)
        if u is not None:
            bad &= ~(_mismatches(name, x, e, u) & ~_mismatches(name, x, u, r))
        if bad.any():
            i = bad.nonzero()[:3].flatten()
            problems.append(
                f"{name}: {int(bad.sum())} differ, e.g. x={x[i].tolist()} y={y[i].tolist()} "
                f"eager={e[i].tolist()} region={r[i].tolist()}"
            )
    return problems


def _region_count(jf: Callable[..., object]) -> int:
    return str(thunder.last_traces(jf)[-1]).count("torchcompile.fusion")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_elementwise_ops_in_a_region_compute_eagers_numbers_on_edge_values(dtype):
    names, fn = _all_ops(dtype)
    jf = thunder.jit(fn, executors=EXECUTORS)
    unfused = thunder.jit(fn, executors=["torch_ops", "torch"])
    generator = torch.Generator().manual_seed(1234)
    for _ in range(2):  # fresh orders, the cached program
        x, y = _pairs(dtype, generator)
        problems = _report(names, x, y, fn(x, y), jf(x, y), unfused(x, y))
        assert not problems, "\n".join(problems)
    assert _region_count(jf) >= 1


FIXED: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "expm1": lambda a: torch.expm1(a * 2),
    "elu": lambda a: F.elu(a * 2),
    "selu": lambda a: F.selu(a * 2),
    "erf": lambda a: torch.erf(a * 2),
    "atanh": lambda a: torch.atanh(a * 2),
    "softshrink": lambda a: F.softshrink(a * 2),
    "relu6": lambda a: F.relu6(a * 2),
    "clamp_min": lambda a: torch.clamp_min(a * 2, 0.0),
}


def _tiny_inputs(generator: torch.Generator, n: int = 64) -> torch.Tensor:
    a = (torch.rand(n, generator=generator) - 0.5) * 1e-6
    a[:6] = torch.tensor([-0.0, 0.0, -1e-40, 1e-40, math.nan, -1e-3])
    return a


@pytest.mark.parametrize("name", sorted(FIXED))
def test_small_values_in_a_background_compiled_region(name):
    from thunder_executors.background_compile import wait_for_background_compiles

    fn = FIXED[name]
    jf = thunder.compile(fn)
    generator = torch.Generator().manual_seed(7)
    jf(_tiny_inputs(generator))
    wait_for_background_compiles()
    for _ in range(3):
        a = _tiny_inputs(generator)
        problems = _report([name], a, a, [fn(a)], [jf(a)])
        assert not problems, "\n".join(problems)


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_gradients_of_small_values_match_eager(cache):
    def fn(a):
        b = a * 2
        return (torch.expm1(b) + F.elu(b) + torch.erf(b) + torch.atanh(b) + F.relu6(b)).sum()

    jf = thunder.jit(fn, executors=EXECUTORS, cache=cache)
    generator = torch.Generator().manual_seed(3)
    for n in (64, 64, 80):
        a = _tiny_inputs(generator, n)[6:].requires_grad_()
        ta = a.detach().clone().requires_grad_()
        (ge,) = torch.autograd.grad(fn(a), a)
        (gt,) = torch.autograd.grad(jf(ta), ta)
        problems = _report(["exp"], a.detach(), a.detach(), [ge], [gt])
        assert not problems, "\n".join(problems)
