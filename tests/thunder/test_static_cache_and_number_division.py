"""A static KV cache allocated from a size a ``view(..., -1, d)`` computes, with its write under
``try`` (transformers' ``StaticCache``): the ops moved before a decision keep the definitions of
the sizes in their shapes. Torch's binary functions on two Python numbers return 0-dim tensors.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import thunder
from thunder.errors import InternalErrorWarning
from thunder_ir import IntegerProxy, Trace, prims, tracectx
from thunder_ir.errors import UnsupportedOptionError

CACHES = ["constant values", "symbolic values"]


class _StaticCache:
    """transformers' StaticCache layer: allocated lazily from the shape of the first keys, an
    input position counter written in place, the write under ``try`` (MPS' fallback)."""

    def __init__(self, max_len: int) -> None:
        self.max_len = max_len
        self.keys: torch.Tensor | None = None
        self.count = torch.tensor(0)

    def update(self, k: torch.Tensor) -> torch.Tensor:
        if self.keys is None:
            self.keys = torch.zeros((k.shape[0], k.shape[1], self.max_len, k.shape[3]))
        pos = torch.arange(k.shape[2]) + self.count
        self.count.add_(k.shape[2])
        try:
            self.keys.index_copy_(2, pos, k)
        except NotImplementedError:
            self.keys[:, :, pos] = k
        return self.keys


def _layers(x: torch.Tensor, w: torch.Tensor, caches: list[_StaticCache]) -> torch.Tensor:
    batch, length, _ = x.shape
    h = x
    for cache in caches:
        k = (h @ w).view(batch, length, -1, 8).transpose(1, 2)  # heads: a size the view computes
        keys = cache.update(k)
        h = h + keys.sum(2, keepdim=True).transpose(1, 2).reshape(batch, 1, -1)
    return h


@pytest.mark.parametrize("cache", CACHES)
def test_static_cache_sizes_from_a_view_stay_defined(cache: str) -> None:
    jf = thunder.jit(_layers, cache=cache)
    w = torch.randn(16, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for length in (5, 6, 7):
            x = torch.randn(2, length, 16)
            eager_caches = [_StaticCache(length + 3) for _ in range(2)]
            jit_caches = [_StaticCache(length + 3) for _ in range(2)]
            expected = _layers(x, w, eager_caches)
            got = jf(x, w, jit_caches)
            torch.testing.assert_close(got, expected)
            for e, j in zip(eager_caches, jit_caches, strict=True):
                torch.testing.assert_close(j.keys, e.keys)
                assert torch.equal(j.count, e.count)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


@pytest.mark.parametrize("cache", CACHES)
def test_static_cache_gradients(cache: str) -> None:
    jf = thunder.jit(_layers, cache=cache)
    for length in (5, 6, 7):
        x = torch.randn(2, length, 16)
        w = torch.randn(16, 16, requires_grad=True)
        wj = w.detach().clone().requires_grad_()
        expected = _layers(x, w, [_StaticCache(length + 2) for _ in range(2)])
        got = jf(x, wj, [_StaticCache(length + 2) for _ in range(2)])
        torch.testing.assert_close(got, expected)
        cotangent = torch.randn_like(expected)
        expected.backward(cotangent)
        got.backward(cotangent)
        torch.testing.assert_close(wj.grad, w.grad, rtol=1e-4, atol=1e-4)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_broken_compiled_program_is_reported_and_eager_result_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A compiled program failing on its own code (a name read before its definition) is a bug
    of thunder: the call runs eagerly, with a warning saying so, even where the program may
    catch an op's error (the cache write under ``try``)."""
    import thunder.binding.decisions as decisions

    def outputs_only(body: list, inputs: tuple) -> tuple[dict[str, int], list[set[str]]]:
        # The sizes a decomposition computes left out: moving ops breaks the program.
        producer = {p.name: i for i, b in enumerate(body) for p in b.flat_proxy_outs}
        return producer, [{p.name for p in b.flat_proxy_args} for b in body]

    monkeypatch.setattr(decisions, "_definitions_and_uses", outputs_only, raising=False)
    jf = thunder.jit(_layers, cache="symbolic values")
    w = torch.randn(16, 16)
    for length in (5, 6):
        x = torch.randn(2, length, 16)
        eager_caches = [_StaticCache(length + 3) for _ in range(2)]
        jit_caches = [_StaticCache(length + 3) for _ in range(2)]
        expected = _layers(x, w, eager_caches)
        with pytest.warns(InternalErrorWarning, match="bug in thunder"):
            got = jf(x, w, jit_caches)
        torch.testing.assert_close(got, expected)
        for e, j in zip(eager_caches, jit_caches, strict=True):
            torch.testing.assert_close(j.keys, e.keys)
            assert torch.equal(j.count, e.count)


_NUMBER_FUNCTIONS = {
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "divide_trunc": lambda a, b: torch.divide(a, b, rounding_mode="trunc"),
    "div": torch.div,
    "true_divide": torch.true_divide,
    "floor_divide": torch.floor_divide,
    "add": torch.add,
    "add_alpha": lambda a, b: torch.add(a, b, alpha=3),
    "sub": torch.sub,
    "subtract": torch.subtract,
    "mul": torch.mul,
    "multiply": torch.multiply,
    "div_keywords": lambda a, b: torch.div(input=a, other=b, rounding_mode="floor"),
}
_OPERANDS = [(1, 2), (-1, 2), (1.5, 2), (1, -2.0), (-1, 0.0), (3, 1j)]


def _same(expected: object, got: object) -> None:
    assert type(got) is type(expected), (got, expected)
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        torch.testing.assert_close(got, expected, equal_nan=True)
    else:
        assert got == expected


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(_NUMBER_FUNCTIONS))
def test_torch_functions_of_two_numbers_return_tensors(name: str, cache: str) -> None:
    op = _NUMBER_FUNCTIONS[name]
    for a, b in _OPERANDS:
        if isinstance(b, complex) and name.startswith(("div_", "divide_", "floor")):
            continue  # torch refuses rounding complex numbers

        def f(x: torch.Tensor, a: object = a, b: object = b) -> object:
            n = x.shape[0]  # a symbolic size under "symbolic values"
            first = n * a if not isinstance(a, bool) else a
            return op(first, b), x * 2

        jf = thunder.jit(f, cache=cache)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for length in (3, 4, 7):
                x = torch.randn(length)
                expected, got = f(x), jf(x)
                _same(expected[0], got[0])
                torch.testing.assert_close(got[1], expected[1])
        assert thunder.compile_stats(jf).eager_fallbacks == 0


@pytest.mark.parametrize("cache", CACHES)
def test_longformer_chunks_count(cache: str) -> None:
    """modeling_longformer: ``torch.div(seq_len, window, rounding_mode="trunc") - 1``."""

    def f(x: torch.Tensor) -> torch.Tensor:
        chunks = torch.div(x.shape[1], 2, rounding_mode="trunc") - 1
        return x * chunks

    jf = thunder.jit(f, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for length in (6, 8, 10):
            x = torch.randn(2, length, requires_grad=True)
            xj = x.detach().clone().requires_grad_()
            expected, got = f(x), jf(xj)
            _same(expected, got)
            expected.sum().backward()
            got.sum().backward()
            torch.testing.assert_close(xj.grad, x.grad)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def _both_ints(a: object, b: object) -> bool:
    return isinstance(a, int) and isinstance(b, int)


def _trunc_divide(a: float, b: float) -> float:
    return int(a / b) if _both_ints(a, b) else float(math.trunc(a / b))


def _fmod(a: float, b: float) -> float:
    return a - b * int(a / b) if _both_ints(a, b) else math.fmod(a, b)


@pytest.mark.parametrize(
    ("prim", "number_fn"),
    [
        (prims.trunc_divide, _trunc_divide),
        (prims.fmod, _fmod),
        (prims.atan2, math.atan2),
        (prims.maximum, max),
        (prims.minimum, min),
        (prims.copysign, math.copysign),
    ],
)
def test_binary_prims_of_numbers(prim: object, number_fn: object) -> None:
    """Numbers are computed (an int stays an int, a float a float); a symbolic number, which a
    prim without an expression form cannot record, is refused cleanly."""
    with tracectx(Trace()):
        for a, b in ((7, 2), (-7, 2), (7.5, 2), (-7, 2.5), (-7.5, -2)):
            got = prim(a, b)  # type: ignore[operator]
            expected = number_fn(a, b)  # type: ignore[operator]
            assert type(got) is type(expected) and got == expected, (a, b, got, expected)
        with pytest.raises(UnsupportedOptionError, match="symbolic number"):
            prim(IntegerProxy(value=7), 2)  # type: ignore[operator]
