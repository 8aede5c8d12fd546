"""Checks of indices and written values that eager's kernels make, kept where an input requires
grad (thunder's differentiable decompositions run then, not the kernels): a boolean mask after an
Ellipsis checked against the dimensions it indexes; a fill value out of the dtype's range
(``masked_fill``, ``index_fill``, ``y[m] = tensor``) raising, a number written by ``y[idx] =``
converted as eager converts it (float16 overflows to inf, float32 raises); ``y[idx] = v`` of
another dtype raising as ``index_put_`` does (basic indexing and one-element masked writes cast).
Also batch, layer and instance norm of empty inputs with gradients (an empty data-dependent
selection first), ``gather(sparse_grad=True)``'s sparse gradient, index_add's error type, and the
warning that says later calls run eagerly after a failed compile."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder import jit_function

CACHES = [None, "symbolic values"]


def _jit(fn, cache):
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


def _outcome(fn, args):
    """(exception type and the start of its message) or (results, gradients of the float inputs)."""
    try:
        out = fn(*args)
    except Exception as e:  # noqa: BLE001 - the outcome is compared
        return (type(e), str(e)[:45])
    outs = out if isinstance(out, tuple) else (out,)
    grads = None
    leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    tracked = [o for o in outs if o.requires_grad]
    if leaves and tracked:
        g = torch.Generator().manual_seed(7)
        loss = sum((o.float() * torch.randn(o.shape, generator=g)).sum() for o in tracked)
        grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return ([o.detach() for o in outs], grads)


def _clone_args(args):
    return [
        a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
        for a in args
    ]


def _check_like_eager(fn, make_args, cache=None, calls=3):
    """Several calls with fresh inputs: thunder raises where eager raises (the same type and
    message), else returns eager's values and gradients; never a "please report" warning."""
    jf = _jit(fn, cache)
    for i in range(calls):
        args = make_args(i)
        want = _outcome(fn, _clone_args(args))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = _outcome(jf, _clone_args(args))
        assert not [w for w in caught if "please report" in str(w.message)]
        if isinstance(want[0], type):
            assert got == want, (i, got, want)
            continue
        assert not isinstance(got[0], type), (i, got, want)
        for a, b in zip(got[0], want[0]):
            assert a.dtype == b.dtype and a.shape == b.shape
            torch.testing.assert_close(a, b, equal_nan=True)
        if want[1] is None:
            assert got[1] is None
            continue
        for a, b in zip(got[1], want[1]):
            if b is None:
                assert a is None
            else:
                assert a is not None and a.layout == b.layout
                torch.testing.assert_close(a.to_dense(), b.to_dense())
    return jf


# 1. A boolean mask after an Ellipsis ---------------------------------------------------------


def _get_after_ellipsis(x, m):
    return x[..., m] * 2


def _zero_after_ellipsis(x, m):
    y = x * 1
    y[..., m] = 0
    return y


def _write_after_ellipsis(x, m, v):
    y = x * 1
    y[..., m] = v
    return y


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("length", [3, 7, 5])
def test_mask_after_ellipsis_checked_like_eager(cache, length):
    """A mask of 3 or 7 (trailing False) for a dimension of 5 raises IndexError as eager; one
    of 5 selects eager's columns, gradients included."""

    def args(i):
        g = torch.Generator().manual_seed(i)
        m = torch.rand(length, generator=g) < 0.6
        if length > 5:
            m[5:] = False
        return [torch.randn(2, 5, generator=g, requires_grad=True), m]

    _check_like_eager(_get_after_ellipsis, args, cache)
    _check_like_eager(_zero_after_ellipsis, args, cache)

    def with_value(i):
        return [*args(i), torch.tensor(3.0, requires_grad=True)]

    _check_like_eager(_write_after_ellipsis, with_value, cache)


@pytest.mark.parametrize("cache", CACHES)
def test_masks_around_ellipsis_checked_like_eager(cache):
    """A 2-dim mask after an Ellipsis, and masks before and after one, in a 3-dim tensor."""

    def two_dims(i, shape=(3, 5)):
        g = torch.Generator().manual_seed(i)
        return [torch.randn(2, 3, 5, generator=g, requires_grad=True), torch.rand(shape) < 0.5]

    _check_like_eager(_get_after_ellipsis, two_dims, cache)
    _check_like_eager(_get_after_ellipsis, lambda i: two_dims(i, (5, 3)), cache)
    _check_like_eager(_zero_after_ellipsis, lambda i: two_dims(i, (3, 4)), cache)

    def both(x, first, last):
        return x[first, ..., last]

    for n in (2, 3):

        def args(i, n=n):
            g = torch.Generator().manual_seed(i)
            first = torch.tensor([True, True])
            return [
                torch.randn(2, 3, 5, generator=g, requires_grad=True),
                first,
                torch.arange(n + 3) == 1,
            ]

        _check_like_eager(both, args, cache)


# 2. Fill values out of the dtype's range ------------------------------------------------------


def _half(i):
    g = torch.Generator().manual_seed(i)
    return (torch.randn(4, generator=g) * 3).half().requires_grad_()


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("value", [1e5, -7e4, float("inf"), float("nan"), 2.5, 65504.0])
def test_fill_value_range_checked_like_eager(cache, value):
    """masked_fill and y[m] = with a float32 tensor value, index_fill with a tensor or a number,
    into float16 requiring grad: out of range raises as eager, infinities and NaN fill."""
    masks = [torch.tensor([True, False, True, False]), torch.zeros(4, dtype=torch.bool)]

    def masked(i):
        return [_half(i), masks[i % 2], torch.tensor(value)]

    _check_like_eager(lambda x, m, v: x.masked_fill(m, v), masked, cache)

    def write(x, m, v):
        y = x * 1
        y[m] = v
        return y

    _check_like_eager(write, masked, cache)
    _check_like_eager(
        lambda x: x.index_fill(0, torch.tensor([1, 2]), value), lambda i: [_half(i)], cache
    )
    _check_like_eager(
        lambda x, v: x.index_fill(0, torch.tensor([1]), v),
        lambda i: [_half(i), torch.tensor(value, dtype=torch.float64)],
        cache,
    )


@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        (torch.int8, torch.tensor(300)),
        (torch.int8, torch.tensor(-128)),
        (torch.uint8, torch.tensor(-200)),  # negative ints wrap into uint8
        (torch.int32, torch.tensor(float("nan"))),
        (torch.int8, torch.tensor(127.5)),
        (torch.float32, torch.tensor(1e300, dtype=torch.float64)),
        (torch.float32, torch.tensor(1 + 1j)),
        (torch.float32, torch.tensor(2 + 0j)),
        (torch.bfloat16, torch.tensor(True)),
    ],
)
def test_fill_tensor_values_of_other_dtypes_like_eager(dtype, value):
    def args(i):
        g = torch.Generator().manual_seed(i)
        x = (torch.randn(4, generator=g) * 3).to(dtype)
        return [
            x.requires_grad_(x.is_floating_point()),
            torch.tensor([i % 2 == 0, True, False, True]),
        ]

    _check_like_eager(lambda x, m: x.masked_fill(m, value), args)
    _check_like_eager(lambda x, m: x.index_fill(0, torch.tensor([0, 3]), value), args)


# 3 and 4. Values written by y[key] = v --------------------------------------------------------

_IDX = torch.tensor([0, 2])
_F64 = torch.float64


def _writer(key, value):
    def write(x):
        y = x * 1
        y[key] = value
        return y

    return write


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    ("key", "value"),
    [
        (_IDX, torch.ones(2, 3, dtype=_F64)),  # index_put_: the dtypes must match
        (_IDX, torch.ones(2, 3, dtype=torch.float16)),
        (_IDX, torch.tensor(2.0, dtype=_F64)),
        ((slice(None), torch.tensor([0, 1])), torch.ones(4, 2, dtype=_F64)),
        ([0, 2], torch.ones(2, 3, dtype=_F64)),
        ((torch.tensor(1), torch.tensor([0, 1])), torch.ones(2, dtype=_F64)),
        ((None, _IDX), torch.ones(2, 3, dtype=_F64)),
        (torch.tensor(True), torch.ones(3, dtype=_F64)),
        (torch.tensor([True, False, True, False]), torch.ones(3, dtype=_F64)),
        (torch.zeros(4, dtype=torch.bool), torch.ones(3, dtype=_F64)),
        (torch.tensor(1), torch.ones(3, dtype=_F64)),  # basic: copy_ casts
        (slice(0, 2), torch.ones(2, 3, dtype=_F64)),
        (0, torch.tensor(2.0, dtype=_F64)),
        (torch.tensor([True, False, True, False]), torch.ones(1, 1, dtype=_F64)),  # masked_fill_
        (torch.ones(4, 3, dtype=torch.bool), torch.tensor(2.0, dtype=_F64)),
        (_IDX, torch.ones(2, 3)),
    ],
)
def test_written_value_dtype_checked_like_eager(cache, key, value):
    def args(i):
        return [torch.randn(4, 3, generator=torch.Generator().manual_seed(i), requires_grad=True)]

    _check_like_eager(_writer(key, value), args, cache)


def test_float_values_into_integer_tensor_raise_like_eager():
    def write(x, idx, v):
        y = x.clone()
        y[idx] = v
        return y

    def args(i):
        return [
            torch.arange(5),
            torch.tensor([1, 3]),
            torch.tensor([2.7, -1.5], requires_grad=True),
        ]

    _check_like_eager(write, args)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        (torch.float16, 1e5),  # eager: inf
        (torch.float16, 65519.0),  # rounds to 65504
        (torch.float16, -1e300),
        (torch.bfloat16, 1e300),
        (torch.bfloat16, 1e5),
        (torch.float32, 1e300),  # eager raises
        (torch.float16, 1 + 1j),
        (torch.float32, 2 + 0j),
        (torch.int8, 300),
        (torch.int64, 2.7),
    ],
)
@pytest.mark.parametrize("key", [torch.tensor([0, 1]), torch.tensor([2]), 0, slice(1, 3)])
def test_written_number_converted_like_eager(cache, dtype, value, key):
    def args(i):
        x = (torch.randn(4, generator=torch.Generator().manual_seed(i)) * 3).to(dtype)
        return [x.requires_grad_(x.is_floating_point())]

    _check_like_eager(_writer(key, value), args, cache)


# 5. Norms of empty inputs ---------------------------------------------------------------------


@pytest.mark.parametrize("cache", CACHES)
def test_batch_norm_over_selection_empty_first_like_eager(cache):
    """The first call selects nothing: no internal error, no eager run, eager's values and
    gradients (weight and bias get zeros), running statistics untouched, on every call."""
    weight = torch.randn(3, requires_grad=True)
    bias = torch.randn(3, requires_grad=True)

    def head(feats, pos, rm, rv):
        return F.batch_norm(feats[pos], rm, rv, weight, bias, training=True).relu().sum()

    jf = _jit(head, cache)
    for k in [0, 3, 5, 0, 4]:
        x = torch.randn(6, 3)
        pos = torch.randperm(6) < k
        stats = [torch.randn(3), torch.rand(3) + 1]
        xs = [x.clone().requires_grad_(), x.clone().requires_grad_()]
        ours, theirs = [s.clone() for s in stats], [s.clone() for s in stats]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = jf(xs[0], pos, *ours)
        want = head(xs[1], pos, *theirs)
        torch.testing.assert_close(got, want)
        got_grads = torch.autograd.grad(got, [xs[0], weight, bias])
        want_grads = torch.autograd.grad(want, [xs[1], weight, bias])
        for a, b in zip(got_grads, want_grads):
            torch.testing.assert_close(a, b)
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b)
    assert thunder.compile_stats(jf).eager_fallbacks == 0


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    ("fn", "shape"),
    [
        (lambda x: F.batch_norm(x, None, None, training=True), (0, 3)),
        (
            lambda x: F.batch_norm(x, None, None, torch.ones(3), torch.zeros(3), training=True),
            (0, 3, 2),
        ),
        (lambda x: F.batch_norm(x, torch.zeros(3), torch.ones(3), training=False), (0, 3)),
        (lambda x: F.layer_norm(x, (0,)), (3, 0)),
        (lambda x: F.layer_norm(x, (2, 0), torch.ones(2, 0), torch.zeros(2, 0)), (3, 2, 0)),
        (lambda x: F.instance_norm(x), (1, 0, 3)),
        (lambda x: F.instance_norm(x, weight=torch.ones(3), bias=torch.zeros(3)), (2, 3, 0)),
        (lambda x: F.instance_norm(x, weight=torch.ones(3)), (0, 3, 4)),  # eager: IndexError
        (lambda x: F.instance_norm(x), (0, 3, 1)),  # eager: ValueError (one spatial element)
        (lambda x: F.group_norm(x, 1), (2, 3, 0)),
    ],
)
def test_norms_of_empty_inputs_like_eager(cache, fn, shape):
    def args(i):
        return [torch.randn(shape, requires_grad=True)]

    jf = _check_like_eager(fn, args, cache, calls=2)
    try:
        fn(*args(0))
    except (IndexError, ValueError):
        return  # raised as eager: the call runs eagerly to raise it
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_later_eager_calls_are_announced(monkeypatch):
    """After compiling fails inside thunder, the warning says that calls with the same inputs
    run eagerly for a while too (they do so without a warning of their own)."""

    def broken(*args, **kwargs):
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(jit_function, "compile_entry", broken)
    jf = thunder.jit(lambda x: x * 2)
    x = torch.randn(3)
    with pytest.warns(UserWarning, match="as do the next 8 calls with inputs like these"):
        torch.testing.assert_close(jf(x), x * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(jf(x), x * 2)
    assert thunder.compile_stats(jf).eager_fallbacks == 2


# 6. gather's sparse gradient, index_add's error ----------------------------------------------


def test_gather_sparse_grad_like_eager():
    def args(i):
        g = torch.Generator().manual_seed(i)
        return [
            torch.randn(3, 4, generator=g, requires_grad=True),
            torch.randint(0, 4, (3, 2), generator=g),
        ]

    _check_like_eager(lambda x, idx: torch.gather(x, 1, idx, sparse_grad=True), args)
    _check_like_eager(lambda x, idx: torch.gather(x, 1, idx) * 2, args)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_index_add_out_of_range_raises_like_eager(requires_grad):
    def args(i):
        return [torch.randn(4, 3, requires_grad=requires_grad), torch.tensor([0, [5, -5, 4][i]])]

    _check_like_eager(lambda x, idx: x.index_add(0, idx, torch.ones(2, 3)), args)
