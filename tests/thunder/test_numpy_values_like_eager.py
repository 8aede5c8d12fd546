"""numpy values in jitted programs compared with eager: numpy scalars passed in (keyed by value,
never baked in), numpy calls given numbers read from data or symbolic numbers (computed on the
value, never an object array), numpy scalars the program computes (returned with their numpy
type), and data-dependent sizes that met internal errors (chunk/unbind/var gradients, empty
extrema, a list of bools read from data)."""

from __future__ import annotations

import statistics
import warnings

import numpy as np
import pytest
import torch

import thunder

CACHES = [{}, {"cache": "symbolic values"}]


def _same(e, j):
    if isinstance(e, torch.Tensor):
        assert isinstance(j, torch.Tensor) and e.dtype == j.dtype and e.shape == j.shape
        torch.testing.assert_close(j.detach(), e.detach(), equal_nan=True)
        return
    if isinstance(e, (tuple, list)):
        assert type(e) is type(j) and len(e) == len(j)
        for a, b in zip(e, j):
            _same(a, b)
        return
    if isinstance(e, np.ndarray):
        assert type(j) is np.ndarray and e.dtype == j.dtype and np.array_equal(e, j)
        return
    assert type(e) is type(j), (e, j)
    if isinstance(e, float) and e != e:
        assert j != j
    else:
        assert e == j, (e, j)


def _no_internal_error(caught):
    for w in caught:
        assert "please report" not in str(w.message), str(w.message)


def _compare(fn, make_args, n=4, jit_kwargs=None, grad=False):
    jf = thunder.jit(fn, **(jit_kwargs or {}))
    for i in range(n):
        args = make_args(i)
        ea = [
            a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
            for a in args
        ]
        ja = [
            a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
            for a in args
        ]
        try:
            e = fn(*ea)
        except Exception as ex:  # noqa: BLE001
            with pytest.raises(type(ex)):
                jf(*ja)
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            j = jf(*ja)
        _no_internal_error(caught)
        _same(e, j)
        if grad:
            outs = [
                o
                for o in (e if isinstance(e, (tuple, list)) else [e])
                if isinstance(o, torch.Tensor)
            ]
            jouts = [
                o
                for o in (j if isinstance(j, (tuple, list)) else [j])
                if isinstance(o, torch.Tensor)
            ]
            if outs and any(o.requires_grad for o in outs):
                sum((o * (k + 1)).sum() for k, o in enumerate(outs)).backward()
                sum((o * (k + 1)).sum() for k, o in enumerate(jouts)).backward()
                for a, b in zip(ea, ja):
                    if isinstance(a, torch.Tensor) and a.requires_grad:
                        torch.testing.assert_close(b.grad, a.grad, equal_nan=True)


# 1. numpy scalars passed in: keyed by value -------------------------------------------------


NUMPY_SCALARS = [
    (np.float32, [1.5, 2.5, 3.25, 1.5]),
    (np.float16, [1.5, 2.5, 3.25, 1.5]),
    (np.float64, [1.5, 2.5, 3.25, 1.5]),
    (np.int64, [1, 2, 3, 1]),
    (np.int32, [1, 2, 3, 1]),
    (np.uint8, [1, 2, 3, 1]),
    (np.int8, [-1, 2, -3, -1]),
    (np.bool_, [True, False, True, False]),
    (np.complex128, [1 + 1j, 2 - 1j, 3j, 1 + 1j]),
]


@pytest.mark.parametrize("jit_kwargs", CACHES)
@pytest.mark.parametrize("typ,values", NUMPY_SCALARS, ids=lambda v: getattr(v, "__name__", ""))
def test_numpy_scalar_argument_not_baked(typ, values, jit_kwargs):
    def f(x, s):
        return x * s, s * 2

    _compare(f, lambda i: (torch.randn(3), typ(values[i])), jit_kwargs=jit_kwargs)


@pytest.mark.parametrize("jit_kwargs", CACHES)
def test_numpy_scalar_keyword_and_branch(jit_kwargs):
    def f(x, *, s):
        return x * 2 if s else x - 1

    jf = thunder.jit(f, **jit_kwargs)
    for v in (False, True, True, False):
        x = torch.randn(3)
        _same(f(x, s=np.bool_(v)), jf(x, s=np.bool_(v)))

    def g(x, s):
        return x + 1 if s > 2 else x

    _compare(
        g, lambda i: (torch.randn(3), np.float32([1.5, 2.5, 3.5, 2.0][i])), jit_kwargs=jit_kwargs
    )


def test_numpy_scalar_argument_same_value_is_a_hit():
    jf = thunder.jit(lambda x, s: x * s)
    for _ in range(3):
        jf(torch.randn(2), np.float32(1.5))
    assert thunder.cache_misses(jf) == 1


def test_numpy_float32_signed_zero_and_nan():
    f = lambda x, s: x / s  # noqa: E731
    values = [np.float32(0.0), np.float32(-0.0), np.float32("nan"), np.float32(-0.0)]
    _compare(f, lambda i: (torch.ones(2), values[i]))


def test_numpy_complex64_read_as_torch_reads_it():
    f = lambda x, s: x * s  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        _compare(f, lambda i: (torch.randn(2), np.complex64(1 + i * 1j)))


# 2. numpy calls given numbers read from data -------------------------------------------------

INTS = lambda i: (torch.tensor([3, 1, 4, 1, 5][i % 5]),)  # noqa: E731
FLOATS = lambda i: (torch.tensor([0.5, -1.25, 2.75, 4.0][i % 4]),)  # noqa: E731


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: np.asarray([x.item(), 2]).dtype.name,
        lambda x: x * 2 if np.asarray([x.item(), 2]).dtype == np.int64 else x,
        lambda x: np.array([x.item(), 2]).sum(),
        lambda x: np.array([x.item(), 2]).tolist(),
        lambda x: np.sqrt(x.item()),
        lambda x: np.maximum(x.item(), 2),
        lambda x: np.mean([x.item(), 2.0]),
        lambda x: np.int64(x.item()) * 2,
        lambda x: np.int8(x.item()) * np.int8(60),
        lambda x: np.uint8(x.item()) - np.uint8(4),
        lambda x: x.item() + np.int8(100),
        lambda x: np.float32(x.item()) / 3,
        lambda x: statistics.mean([x.item(), 1.0]),
        lambda x: statistics.median([x.item(), 1, 2]),
        lambda x: list(map(type, [x.item(), 1.0])),
    ],
)
def test_numpy_call_on_value_read_from_data(fn):
    with np.errstate(over="ignore"):
        _compare(fn, INTS, n=5)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.item() * np.float32(2),
        lambda x: np.float32(2) * x.item(),
        lambda x: x.item() < np.float32(1),
        lambda x: x.item() ** np.float32(2),
        lambda x: x * float(np.clip(x.item() - 2.5, 0, 1)),
        lambda x: np.sqrt(abs(x.item())),
        lambda x: divmod(x.item(), np.float32(0.7)),
        lambda x: divmod(np.float32(0.7), x.item()),
        lambda x: np.float32(2) ** x.item(),
        lambda x: np.float32(1) < x.item(),
        lambda x: x.item() + np.float64(1),
    ],
)
def test_numpy_arithmetic_with_float_read_from_data(fn):
    _compare(fn, FLOATS, n=4)


def test_numpy_call_on_symbolic_number():
    def f(x, n):
        return x * 2, np.asarray([n, 2]).dtype.name, np.float32(n) / 3, n * np.float32(0.1)

    _compare(
        f, lambda i: (torch.randn(2), [2, 3, 2.5, 4][i]), jit_kwargs={"cache": "symbolic values"}
    )


# 3. numpy scalars the program computes keep their type ---------------------------------------


@pytest.mark.parametrize("jit_kwargs", CACHES)
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: np.float32(x.shape[0]) / 3,
        lambda x: (x + 1, np.int64(x.shape[0]) * 2),
        lambda x: np.float32(0.5),
        lambda x: {"n": np.int64(x.shape[0])},
        lambda x: np.array([1, 2]).dtype,
        lambda x: np.int64(x.sum().item() > 0),
        lambda x: np.maximum(x.shape[0], 2),
        lambda x: (x * 2, [np.float16(x.shape[0]) / 7]),
    ],
)
def test_computed_numpy_scalars_returned_with_their_type(fn, jit_kwargs):
    _compare(fn, lambda i: (torch.randn(2 + i),), jit_kwargs=jit_kwargs)


def test_computed_numpy_scalar_written_to_module_keeps_its_type():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.last = None

        def forward(self, x):
            self.last = np.float32(x.shape[0]) / 3
            return x * 2

    m, me = M(), M()
    jm = thunder.jit(m)
    for n in (2, 3, 2):
        x = torch.randn(n)
        _same(me(x), jm(x))
        _same(me.last, m.last)


# 4. data-dependent sizes: internal errors ---------------------------------------------------


def _mask(i, n=6):
    return [
        torch.zeros(n, dtype=torch.bool),
        torch.tensor([1, 0, 0, 0, 0, 0]).bool(),
        torch.tensor([1, 1, 1, 0, 0, 1]).bool(),
        torch.ones(n, dtype=torch.bool),
        torch.rand(n) > 0.5,
    ][i % 5]


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, m: x[m].chunk(2),
        lambda x, m: x[m].chunk(3),
        lambda x, m: x[m].unbind(0),
        lambda x, m: x[m].var(0, correction=0),
        lambda x, m: x[m].var(0),
        lambda x, m: x[m].var(),
        lambda x, m: x[m].var(correction=2),
        lambda x, m: torch.var_mean(x[m]),
        lambda x, m: x[m].std(),
        lambda x, m: x[m].std(0),
        lambda x, m: x[m].amax(0),
        lambda x, m: x[m].max(),
        lambda x, m: x[m].amin(0),
        lambda x, m: x[m].argmax(),
    ],
)
def test_data_dependent_size_ops_with_grad(fn):
    _compare(fn, lambda i: (torch.randn(6, requires_grad=True), _mask(i)), n=6, grad=True)


def test_index_with_bools_read_from_data():
    f = lambda x: x[(x > 0).tolist()] * 2  # noqa: E731
    _compare(f, lambda i: (torch.randn(4),), n=3)
    _compare(f, lambda i: (torch.randn(4, requires_grad=True),), n=3, grad=True)


def test_numpy_array_built_from_values_read_from_data():
    def f(x):
        a = np.zeros(3, dtype=np.float32)
        a[0] = x.item()
        b = np.zeros(2)
        b.fill(x.item())
        return a.tolist(), a.dtype.name, b.sum(), np.linspace(0, x.item(), 3).tolist()

    _compare(f, FLOATS, n=4)
