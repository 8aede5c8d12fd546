"""Symbolic numbers and sizes behave as eager's values:

- a symbolic Python number taken by an op with bfloat16/float16 CPU tensors is converted to the
  tensor's dtype first, as a constant one is (``x + 70000.0`` in float16 is ``inf``);
- a float that the program makes concrete (``str(v)``, ``math.copysign``) holds for that value
  only: ``-0.0`` is not ``0.0``, and NaN is a value of its own;
- a decision on a float keeps NaN's semantics (``not (v > 0)`` holds for NaN, ``v <= 0`` not);
- symbolic ints as op parameters (a reduction's dim, ``round``'s decimals, a norm's order, a
  pooling window) compile;
- a symbolic shape is a ``torch.Size`` in every way the program can see, and a returned or
  stored one is a real ``torch.Size``.

Each compares with eager over several calls with fresh random inputs, under the default cache
(sizes and numbers become symbolic after a few distinct values) and ``cache="symbolic values"``,
and requires that no call ran eagerly.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Callable[..., Any], cache: str | None) -> Any:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


def _flat(x: Any) -> list[Any]:
    if isinstance(x, (tuple, list)) and not isinstance(x, torch.Size):
        return [y for z in x for y in _flat(z)]
    return [x]


def _assert_same(got: Any, want: Any) -> None:
    got_flat, want_flat = _flat(got), _flat(want)
    assert len(got_flat) == len(want_flat)
    for g, w in zip(got_flat, want_flat):
        assert type(g) is type(w), (g, w)
        if isinstance(w, torch.Tensor):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert torch.equal(g, w) or torch.allclose(g, w, rtol=0, atol=0, equal_nan=True), (
                g,
                w,
            )
        elif isinstance(w, float) and math.isnan(w):
            assert math.isnan(g)
        else:
            assert g == w, (g, w)
            if isinstance(w, float):
                assert math.copysign(1.0, g) == math.copysign(1.0, w)


# How many calls of each jitted function eager refused (thunder runs those eagerly to raise
# eager's error, counted as eager calls).
_REFUSED: dict[int, int] = {}


def _run_like_eager(jf: Any, fn: Callable[..., Any], *args: Any) -> Any:
    clones = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    try:
        want = fn(*clones)
    except Exception as e:  # eager refuses these: so must thunder
        with pytest.raises(type(e)):
            jf(*args)
        _REFUSED[id(jf)] = _REFUSED.get(id(jf), 0) + 1
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an eager fallback warns
        got = jf(*args)
    _assert_same(got, want)
    return got


def _no_eager_calls(jf: Any) -> None:
    assert thunder.compile_stats(jf).eager_fallbacks <= _REFUSED.get(id(jf), 0)


# 1. Symbolic numbers in the tensor's low-precision dtype -------------------------------------

_LOW_PRECISION_OPS: dict[str, Callable[..., Any]] = {
    "add": lambda x, v: x + v,
    "radd": lambda x, v: v + x,
    "sub": lambda x, v: x - v,
    "rsub": lambda x, v: v - x,
    "gt": lambda x, v: x > v,
    "le": lambda x, v: x <= v,
    "eq": lambda x, v: x == v,
    "ne": lambda x, v: x != v,
    "remainder": lambda x, v: x % v,
    "fmod": lambda x, v: torch.fmod(x, v),
    "pow": lambda x, v: x.abs() ** v,
    "rpow": lambda x, v: v ** (x / 100),
    "add_alpha": lambda x, v: torch.add(x, x.flip(0), alpha=v),
    "sub_number_alpha": lambda x, v: torch.sub(x, 3.0, alpha=v),
    "iadd": lambda x, v: x.clone().add_(v),
    "mul": lambda x, v: x * v,
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", sorted(_LOW_PRECISION_OPS))
def test_symbolic_float_is_converted_to_the_low_precision_dtype(
    op: str, dtype: torch.dtype, cache: str | None
) -> None:
    fn = _LOW_PRECISION_OPS[op]
    jf = _jit(fn, cache)
    g = torch.Generator().manual_seed(0)
    for v in (2.0, 1.5, 257.9, 70000.0, 1.00490625, 3.0, -2.0, 0.1):
        x = (torch.randn(16, generator=g) * 300).to(dtype)
        x[:4] = torch.tensor([258.0, -30000.0, 1.0, 2049.0], dtype=dtype)
        if op == "pow" and dtype == torch.float16 and v == 70000.0:
            continue  # eager refuses an exponent float16 cannot hold (thunder does not check)
        _run_like_eager(jf, fn, x, v)
    _no_eager_calls(jf)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int8, torch.uint8])
def test_symbolic_int_with_low_precision_and_small_int_tensors(
    dtype: torch.dtype, cache: str | None
) -> None:
    def fn(x: torch.Tensor, n: int) -> Any:
        return x + n, x - n, n - x, x > n, x == n, x * n

    jf = _jit(fn, cache)
    g = torch.Generator().manual_seed(1)
    for n in (3, 257, 2049, 7, 300, -260, 130):
        if dtype.is_floating_point:
            x = (torch.randn(12, generator=g) * 300).to(dtype)
        else:
            x = torch.randint(0, 100, (12,), generator=g).to(dtype)
        _run_like_eager(jf, fn, x, n)
    _no_eager_calls(jf)


@pytest.mark.parametrize("cache", CACHES)
def test_symbolic_float_gradients_in_bfloat16(cache: str | None) -> None:
    def fn(x: torch.Tensor, v: float) -> torch.Tensor:
        return ((x - v) * (x + v)).sum()

    jf = _jit(fn, cache)
    g = torch.Generator().manual_seed(2)
    for v in (1.0, 2.0, 257.9, 3.3):
        base = (torch.randn(8, generator=g) * 100).bfloat16()
        a, b = base.clone().requires_grad_(), base.clone().requires_grad_()
        jf(a, v).backward()
        fn(b, v).backward()
        assert torch.equal(a.grad, b.grad)
    _no_eager_calls(jf)


@pytest.mark.parametrize("cache", CACHES)
def test_symbolic_exponent_three_in_bfloat16_rounds_as_eager(cache: str | None) -> None:
    def fn(x: torch.Tensor, n: int) -> torch.Tensor:
        return x**n

    jf = _jit(fn, cache)
    g = torch.Generator().manual_seed(3)
    for n in (2, 4, 3, -2, 5, 3):
        x = (torch.rand(64, generator=g) * 4 + 0.5).bfloat16()
        _run_like_eager(jf, fn, x, n)
    _no_eager_calls(jf)


# 3. and 4. A float made concrete, and decisions on NaN ----------------------------------------


@pytest.mark.parametrize("cache", [*CACHES, "constant values"])
def test_signed_zero_and_nan_made_concrete_are_their_own_values(cache: str | None) -> None:
    def fn(x: torch.Tensor, v: float) -> Any:
        return x * math.copysign(1.0, v), str(v), float(v)

    jf = _jit(fn, cache)
    nan = float("nan")
    for v in (-0.0, 0.0, 0.0, nan, -0.0, nan, 1.5, 0.0, -0.0, 1.5):
        _run_like_eager(jf, fn, torch.randn(3), v)
    _no_eager_calls(jf)


@pytest.mark.parametrize("cache", CACHES)
def test_decisions_on_a_nan_float(cache: str | None) -> None:
    def branch(x: torch.Tensor, v: float) -> torch.Tensor:
        return x * 2 if v > 0 else x.nan_to_num(nan=0.0) - 1

    def below(x: torch.Tensor, v: float) -> torch.Tensor:
        return x + 1 if not (v <= 0.5) else x - 1

    def is_nan(x: torch.Tensor, v: float) -> torch.Tensor:
        return x.masked_fill(x > 0, 0.0 if math.isnan(v) else v)

    def self_equal(x: torch.Tensor, v: float) -> torch.Tensor:
        return x * 3 if v == v else x * 4

    nan = float("nan")
    for fn in (branch, below, is_nan, self_equal):
        jf = _jit(fn, cache)
        for v in (nan, nan, 1.0, nan, -1.0, 2.0, nan, 0.25, nan):
            _run_like_eager(jf, fn, torch.randn(4), v)
        _no_eager_calls(jf)


# 5. Symbolic ints as op parameters -----------------------------------------------------------

_INT_PARAMETER_OPS: dict[str, Callable[..., Any]] = {
    "max_dim": lambda x, n: x.max(n).values,
    "min_dim": lambda x, n: x.min(n).indices,
    "max_keepdim": lambda x, n: torch.max(x, n, keepdim=True),
    "round_decimals": lambda x, n: x.round(decimals=n),
    "norm_p": lambda x, n: x.norm(p=n, dim=1),
    "vector_norm": lambda x, n: torch.linalg.vector_norm(x, ord=n, dim=-1),
    "avg_pool1d": lambda x, n: F.avg_pool1d(x, n),
    "lp_pool1d": lambda x, n: F.lp_pool1d(x, 2, n),
    "avg_pool2d": lambda x, n: F.avg_pool2d(x, n),
    "max_pool1d": lambda x, n: F.max_pool1d(x, n),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("op", sorted(_INT_PARAMETER_OPS))
def test_symbolic_int_op_parameters(op: str, cache: str | None) -> None:
    fn = _INT_PARAMETER_OPS[op]
    jf = _jit(fn, cache)
    g = torch.Generator().manual_seed(4)
    for n in (1, 2, 1, 3, 2):
        _run_like_eager(jf, fn, torch.randn(3, 4, 6, generator=g), n)
    _no_eager_calls(jf)


@pytest.mark.parametrize("cache", CACHES)
def test_symbolic_float_norm_order_with_gradient(cache: str | None) -> None:
    def fn(x: torch.Tensor, p: float) -> torch.Tensor:
        return torch.linalg.vector_norm(x, ord=p, dim=-1).sum()

    jf = _jit(fn, cache)
    g = torch.Generator().manual_seed(5)
    for p in (1.5, 2.5, 3.0, 2.5):
        base = torch.randn(3, 5, generator=g, dtype=torch.float64)
        a, b = base.clone().requires_grad_(), base.clone().requires_grad_()
        torch.testing.assert_close(jf(a, p), fn(b, p))
        jf(a, p).backward()
        fn(b, p).backward()
        torch.testing.assert_close(a.grad, b.grad)
    _no_eager_calls(jf)


# 2. A symbolic shape is a torch.Size -------------------------------------------------------

_SIZE_USES: dict[str, Callable[[torch.Tensor], Any]] = {
    "type_is": lambda x: x * (2 if type(x.shape) is torch.Size else 3),
    "class_is": lambda x: x * (2 if x.shape.__class__ is torch.Size else 3),
    "type_name": lambda x: (x, type(x.size()).__name__),
    "slice_isinstance": lambda x: x * (2 if isinstance(x.shape[1:], torch.Size) else 3),
    "slice_type": lambda x: x * (2 if type(x.shape[:-1]) is torch.Size else 3),
    "slice_returned": lambda x: (x, x.shape[1:], x.shape[::-1]),
    "concat_returned": lambda x: (x, x.shape[:-1] + (4,), (4,) + x.shape, x.shape + x.shape),
    "repeat_returned": lambda x: (x, x.shape * 2, 2 * x.size()),
    "text": lambda x: (x, str(x.shape), repr(x.size()), f"{x.shape}", format(x.shape[1:])),
    "numel": lambda x: x * x.shape.numel() + x.size()[1:].numel(),
    "count_index": lambda x: x * x.shape.count(x.shape[1]) + x.shape.index(x.shape[1]),
    "equality": lambda x: (
        x * (2 if x.shape == (x.shape[0], x.shape[1]) else 3),
        x.shape == torch.Size([x.shape[0], x.shape[1]]),
        x.shape[1:] == (x.size(1),),
        x.shape == [x.shape[0], x.shape[1]],
    ),
    "view_by_size": lambda x: x.view(x.shape[::-1]).new_zeros(x.shape[:1] + (2,)),
    "size_of_list": lambda x: (x, torch.Size(list(x.shape))),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("use", sorted(_SIZE_USES))
def test_symbolic_size_is_a_torch_size(use: str, cache: str | None) -> None:
    fn = _SIZE_USES[use]
    jf = _jit(fn, cache)
    g = torch.Generator().manual_seed(6)
    for shape in ((2, 3), (2, 5), (2, 7), (4, 9), (3, 9)):
        _run_like_eager(jf, fn, torch.randn(*shape, generator=g))
    _no_eager_calls(jf)


@pytest.mark.parametrize("cache", CACHES)
def test_symbolic_size_refuses_what_torch_size_refuses(cache: str | None) -> None:
    def fn(x: torch.Tensor) -> Any:
        errors = []
        for attempt in (lambda: x.shape + [1], lambda: x.shape + 1, lambda: format(x.shape, ">9")):
            try:
                attempt()
            except TypeError as e:
                errors.append(str(e))
        return x * len(errors), errors

    jf = _jit(fn, cache)
    for n in (3, 5, 7, 9):
        _run_like_eager(jf, fn, torch.randn(2, n))
    _no_eager_calls(jf)


@pytest.mark.parametrize("cache", CACHES)
def test_symbolic_sizes_stored_on_a_module_are_torch_sizes(cache: str | None) -> None:
    class Recorder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.shape: Any = None
            self.tail: Any = None
            self.log: list[Any] = []

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.shape = x.shape
            self.tail = x.shape[1:] + (1,)
            self.log.append(x.size()[:1])
            return x * 2

    ours, theirs = Recorder(), Recorder()
    jm = _jit(ours, cache)
    for n in (3, 5, 7, 9):
        x = torch.randn(2, n)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            torch.testing.assert_close(jm(x), theirs(x))
        for got, want in ((ours.shape, theirs.shape), (ours.tail, theirs.tail)):
            assert type(got) is torch.Size and got == want
        assert [type(s) for s in ours.log] == [torch.Size] * len(theirs.log)
        assert ours.log == theirs.log
    _no_eager_calls(jm)


# 6. Sizes go symbolic per call structure ---------------------------------------------------


def test_interleaved_call_structures_each_go_symbolic() -> None:
    """A training call with targets interleaved with an eval call without, each with a new
    length every step: each structure gets its own program serving every length."""

    def fn(x: torch.Tensor, t: torch.Tensor | None = None) -> torch.Tensor:
        y = x.sin() * 2
        return y if t is None else (y - t).pow(2).mean()

    jf = thunder.jit(fn)
    g = torch.Generator().manual_seed(7)
    for n in range(3, 15):
        x, t = torch.randn(2, n, generator=g), torch.randn(2, n, generator=g)
        _run_like_eager(jf, fn, x, t)
        _run_like_eager(jf, fn, x)
    _no_eager_calls(jf)
    assert thunder.cache_misses(jf) <= 6
