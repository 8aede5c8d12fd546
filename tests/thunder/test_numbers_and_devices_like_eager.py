"""Python numbers (symbolic under ``cache="symbolic values"``), the default device and softmax's
dtype as eager sees them: results, dtypes, devices and Python-visible values match eager."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import thunder

torch.set_num_threads(1)

SYM = "symbolic values"


def _compiles(jf: object) -> int:
    return thunder.compile_stats(jf).compilations


def _no_fallback(jf: object, *args: object) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "the call ran eagerly instead" is an error here
        return jf(*args)


# Number builtins on symbolic numbers -------------------------------------------------------

NUMBER_CASES = {
    "round": lambda x, s: x * round(s),
    "round_ndigits": lambda x, s: x * round(s, 1),
    "trunc": lambda x, s: x * math.trunc(s),
    "floor": lambda x, s: x * math.floor(s),
    "ceil": lambda x, s: x * math.ceil(s),
    "divmod": lambda x, s: x * divmod(s, 2)[0] + divmod(s, 2)[1],
    "rdivmod": lambda x, s: x * divmod(7, s)[0],
    "is_integer": lambda x, s: x * s.is_integer(),
    "real_imag": lambda x, s: x * s.real + s.imag,
    "conjugate": lambda x, s: x * s.conjugate(),
    "as_integer_ratio": lambda x, s: x * s.as_integer_ratio()[0],
    "int_ratio": lambda x, s: x * int(s).as_integer_ratio()[0] + int(s).denominator,
    "bit_length": lambda x, s: x * int(s).bit_length(),
    "pow_mod": lambda x, s: x * pow(int(s), 2, 5),
    "hex": lambda x, s: (x, s.hex()),
}


@pytest.mark.parametrize("name", sorted(NUMBER_CASES))
@pytest.mark.parametrize("s", [2.5, 3.0, -1.5])
def test_number_builtins_like_eager(name: str, s: float) -> None:
    fn = NUMBER_CASES[name]
    x = torch.ones(3)
    out = _no_fallback(thunder.jit(fn, cache=SYM), x, s)
    expected = fn(x, s)
    if isinstance(expected, tuple):
        assert out[1] == expected[1]
    else:
        torch.testing.assert_close(out, expected)


def test_round_of_a_size_stays_symbolic() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        return x[: round(n / 2)] * math.floor(n / 3) + math.ceil(n / 4) + math.trunc(n / 3)

    jf = thunder.jit(f, cache=SYM)
    for n in (5, 6, 7, 9, 12):
        x = torch.arange(float(n))
        torch.testing.assert_close(_no_fallback(jf, x), f(x))
    assert _compiles(jf) == 1


def test_divmod_pow_and_is_integer_of_sizes_stay_symbolic() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        return x + divmod(n, 3)[1] + pow(n, 2, 5) + (n / 2).is_integer()

    jf = thunder.jit(f, cache=SYM)
    for n in (5, 6, 7, 8):
        x = torch.zeros(n)
        torch.testing.assert_close(_no_fallback(jf, x), f(x))
    assert _compiles(jf) == 1


def test_int_methods_missing_on_float_raise_as_eager() -> None:
    def f(x: torch.Tensor, s: float) -> object:
        return x * s.bit_length()  # type: ignore[attr-defined]

    with pytest.raises(AttributeError):
        f(torch.ones(1), 2.5)
    with pytest.raises(AttributeError):
        thunder.jit(f, cache=SYM)(torch.ones(1), 2.5)


# Hashing symbolic numbers ------------------------------------------------------------------

SCALE = {3: 10.0, 4: 20.0}


def test_size_as_dict_key_like_eager() -> None:
    def f(x: torch.Tensor) -> tuple[object, ...]:
        n = x.shape[0]
        return x * SCALE.get(n, -1.0), n in SCALE, len({n, 3}), hash(n)

    jf = thunder.jit(f, cache=SYM)
    for n in (3, 4, 5, 3, 4):
        x = torch.ones(n)
        e, t = f(x), jf(x)
        torch.testing.assert_close(t[0], e[0])
        assert t[1:] == e[1:]
    assert _compiles(jf) == 3  # a hash holds for one value


def test_number_argument_as_dict_key_like_eager() -> None:
    table = {1: 2.0, 2: 3.0}

    def f(x: torch.Tensor, n: int) -> tuple[object, ...]:
        return x * table.get(n, 5.0), hash(n), n in table

    jf = thunder.jit(f, cache=SYM)
    for n in (1, 2, 3, 1):
        x = torch.ones(2)
        e, t = f(x, n), jf(x, n)
        torch.testing.assert_close(t[0], e[0])
        assert t[1:] == e[1:]


def test_module_memoizing_per_length_like_eager() -> None:
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.seen: dict[int, int] = {}

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            n = x.shape[0]
            self.seen[n] = self.seen.get(n, 0) + 1
            return x * len(self.seen)

    m1, m2 = M(), M()
    jm = thunder.jit(m2, cache=SYM)
    for n in (2, 3, 2, 3):
        x = torch.ones(n)
        torch.testing.assert_close(jm(x), m1(x))
        assert m1.seen == m2.seen


def test_type_of_a_symbolic_number_like_eager() -> None:
    def f(x: torch.Tensor, n: int) -> tuple[object, ...]:
        m = x.shape[0]
        return x, type(m) is int, type(n).__name__, type(n)(3)

    jf = thunder.jit(f, cache=SYM)
    x = torch.ones(3)
    assert _no_fallback(jf, x, 2)[1:] == f(x, 2)[1:]  # type: ignore[index]


# The default device --------------------------------------------------------------------------


def _factories(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (
        x + 1,
        torch.zeros(2),
        torch.ones(2, dtype=torch.int64),
        torch.full((2,), 3.0),
        torch.empty(2),
        torch.tensor([1.5]),
        torch.randn(2),
        torch.arange(3.0),
    )


def _devices(out: tuple[torch.Tensor, ...]) -> list[torch.device]:
    return [t.device for t in out]


def test_factories_follow_the_device_context() -> None:
    x = torch.ones(2)
    with torch.device("meta"):
        e = _factories(x)
        t = thunder.jit(_factories)(x)
    assert _devices(t) == _devices(e)
    assert [t.dtype for t in t] == [t.dtype for t in e]
    assert [t.shape for t in t] == [t.shape for t in e]


def test_factories_follow_set_default_device() -> None:
    x = torch.ones(2)
    torch.set_default_device("meta")
    try:
        e = _factories(x)
        t = thunder.jit(_factories)(x)
    finally:
        torch.set_default_device(None)
    assert _devices(t) == _devices(e)


def test_default_device_is_part_of_the_cache_key() -> None:
    x = torch.ones(2)
    jf = thunder.jit(_factories)
    assert _devices(jf(x)) == _devices(_factories(x))
    with torch.device("meta"):
        assert _devices(jf(x)) == _devices(_factories(x))
    torch.set_default_device("meta")
    try:
        assert _devices(jf(x)) == _devices(_factories(x))
    finally:
        torch.set_default_device(None)
    assert _devices(jf(x)) == _devices(_factories(x))
    assert _compiles(jf) == 2


# softmax given its dtype third ---------------------------------------------------------------

SOFTMAX_CASES = {
    "torch.softmax": lambda x: torch.softmax(x, 0, torch.float64),
    "Tensor.softmax": lambda x: x.softmax(0, torch.float64),
    "Tensor.log_softmax": lambda x: x.log_softmax(0, torch.float64),
    "torch.log_softmax": lambda x: torch.log_softmax(x, 0, torch.float64),
    "torch.special.softmax": lambda x: torch.special.softmax(x, 0, torch.float64),
    "F.softmax dtype=": lambda x: F.softmax(x, 0, dtype=torch.float64),
    "F.softmin dtype=": lambda x: F.softmin(x, 0, dtype=torch.float64),
    "F.log_softmax": lambda x: F.log_softmax(x, dim=0),
}


@pytest.mark.parametrize("name", sorted(SOFTMAX_CASES))
@pytest.mark.parametrize("executors", [None, ["torch"]])
def test_softmax_dtype_like_eager(name: str, executors: list[str] | None) -> None:
    fn = SOFTMAX_CASES[name]
    x = torch.randn(3, 4)
    out = thunder.jit(fn, executors=executors)(x)
    expected = fn(x)
    assert out.dtype == expected.dtype
    torch.testing.assert_close(out, expected)


def test_softmax_of_integers_in_the_dtype_given_third() -> None:
    x = torch.arange(6).reshape(2, 3)
    for fn in (
        lambda x: x.softmax(0, torch.float32),
        lambda x: torch.log_softmax(x, 1, torch.float64),
    ):
        out, expected = thunder.jit(fn)(x), fn(x)
        assert out.dtype == expected.dtype
        torch.testing.assert_close(out, expected)
