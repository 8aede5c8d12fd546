"""Ops whose arguments, results or layouts differed from eager's: 0-dim tensors given for Number
arguments (``alpha=``, ``value=``), torch.return_types results of data-dependent calls, Tensor
methods taking sizes as varargs, values a dtype cannot hold, float16 with complex numbers, the
layout of ``*_like`` factories, complex ``var``/``std`` gradients, in-place ``rrelu`` and
``addmm``'s integer ``beta``. Each compares thunder.jit with eager on fresh inputs over several
calls (a call that runs eagerly after an internal error fails: tests/conftest.py)."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
import torch.nn.functional as F

import thunder


def _same(got, want, strides=True):
    """``got`` is ``want``: types (torch.return_types included), dtypes, shapes, strides, values."""
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
        if strides and want.numel() > 1:
            assert _strides(got) == _strides(want), (got.stride(), want.stride())
        torch.testing.assert_close(got, want, equal_nan=True)
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w, strides)
    else:
        assert got == want


@contextlib.contextmanager
def _no_internal_error():
    """Fails on thunder's warning that it ran a call eagerly after failing inside (eager's
    result or error would hide the bug)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    reported = [str(w.message) for w in caught if "please report this" in str(w.message)]
    assert not reported, reported[0]


def _strides(t):
    """The strides that place elements (a dimension of size 1 has no say)."""
    return tuple(st for st, n in zip(t.stride(), t.shape) if n > 1)


def _inputs(make):
    args = make()
    twins = tuple(
        a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
        for a in args
    )
    return args, twins


def _like_eager(fn, make, *, grad=False, calls=3, strides=True, grad_strides=True):
    """thunder.jit(fn) returns what fn returns (and gives the inputs its gradients)."""
    jf = thunder.jit(fn)
    for _ in range(calls):
        args, twins = _inputs(make)
        with _no_internal_error():
            got = jf(*args)
        want = fn(*twins)
        _same(got, want, strides)
        if not grad:
            continue
        outs = [t for t in torch.utils._pytree.tree_leaves(want) if isinstance(t, torch.Tensor)]
        touts = [t for t in torch.utils._pytree.tree_leaves(got) if isinstance(t, torch.Tensor)]
        pairs = [(g, w) for g, w in zip(touts, outs) if w.requires_grad]
        cots = [torch.randn_like(w) for _, w in pairs]
        want_ins = [t for t in twins if isinstance(t, torch.Tensor) and t.requires_grad]
        got_ins = [t for t in args if isinstance(t, torch.Tensor) and t.requires_grad]
        want_grads = torch.autograd.grad([w for _, w in pairs], want_ins, cots, allow_unused=True)
        got_grads = torch.autograd.grad([g for g, _ in pairs], got_ins, cots, allow_unused=True)
        _same(tuple(got_grads), tuple(want_grads), strides and grad_strides)


def _raises_like_eager(fn, *args):
    """thunder.jit(fn) raises eager's exception (type and message)."""
    with pytest.raises(Exception) as eager:
        fn(*args)
    with _no_internal_error(), pytest.raises(type(eager.value), match=_escaped(str(eager.value))):
        thunder.jit(fn)(*args)


def _escaped(text):
    import re

    return re.escape(text.splitlines()[0])


# 1. A 0-dim tensor for a Number argument -------------------------------------------------------


def _pair():
    return torch.randn(3, 4, requires_grad=True), torch.randn(3, 4, requires_grad=True)


def _triple():
    return (
        torch.randn(3, 4, requires_grad=True),
        torch.randn(3, 4, requires_grad=True),
        torch.rand(3, 4) + 1,
    )


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, y: torch.add(x, y, alpha=torch.tensor(2.0)),
        lambda x, y: torch.sub(x, y, alpha=torch.tensor(-1.5)),
        lambda x, y: x.add(y, alpha=torch.tensor(3)),
        lambda x, y: x.sub(y, alpha=torch.tensor(2, dtype=torch.int32)),
        lambda x, y: (x * 1).add_(y, alpha=torch.tensor(0.25)),
        lambda x, y: torch.rsub(x, y, alpha=torch.tensor(2.0)),
    ],
    ids=["add", "sub", "add-int-alpha", "sub-int32-alpha", "add_", "rsub"],
)
def test_alpha_as_a_zero_dim_tensor(fn):
    _like_eager(fn, _pair, grad=True)


def test_alpha_tensor_passed_in():
    def f(x, y, alpha):
        return torch.add(x, y, alpha=alpha)

    _like_eager(f, lambda: (*_pair(), torch.randn(())), grad=True)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, a, b: torch.addcmul(x, a, b, value=torch.tensor(0.5)),
        lambda x, a, b: torch.addcdiv(x, a, b, value=torch.tensor(-2.0)),
        lambda x, a, b: x.addcmul(a, b, value=torch.tensor(3)),
        lambda x, a, b: (x * 1).addcdiv_(a, b, value=torch.tensor(0.5)),
    ],
    ids=["addcmul", "addcdiv", "addcmul-int-value", "addcdiv_"],
)
def test_value_as_a_zero_dim_tensor(fn):
    _like_eager(fn, _triple, grad=True)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int32, torch.bool])
def test_tensor_alpha_in_other_dtypes(dtype):
    def make():
        x = torch.randn(5, 6) * 4
        return x.to(dtype), (x * 3).to(dtype)

    alpha = torch.tensor(True) if dtype == torch.bool else torch.tensor(3)
    _like_eager(lambda x, y: torch.add(x, y, alpha=alpha), make)
    if dtype.is_floating_point:
        _like_eager(lambda x, y: torch.add(x, y, alpha=torch.tensor(1 / 3)), make)
        _like_eager(lambda x, y: torch.addcmul(x, y, y, value=torch.tensor(1 / 3)), make)


def test_int_addcmul_reads_a_float_tensor_value_as_an_int():
    def make():
        return tuple(torch.randint(-5, 5, (4,)) for _ in range(3))

    _like_eager(lambda x, a, b: torch.addcmul(x, a, b, value=torch.tensor(2.5)), make)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, y: torch.add(x, y, alpha=torch.tensor(2.0, requires_grad=True)),
        lambda x, y: torch.add(x, y, alpha=torch.tensor([2.0])),
        lambda x, y: torch.add(x.long(), y.long(), alpha=torch.tensor(2.0)),
        lambda x, y: torch.add(x, y, alpha=torch.tensor(True)),
        lambda x, y: torch.add(x, y, alpha=torch.tensor(1j)),
        lambda x, y: torch.add(x, y, alpha=1j),
        lambda x, y: torch.addcmul(x, y, y, value=torch.tensor([0.5])),
        lambda x, y: torch.addcdiv(x, y, y, value=torch.tensor(0.5, requires_grad=True)),
    ],
    ids=[
        "requires-grad",
        "1-dim",
        "int-with-float",
        "bool-alpha",
        "complex-tensor-alpha",
        "complex-alpha",
        "addcmul-1-dim",
        "addcdiv-requires-grad",
    ],
)
def test_number_arguments_eager_refuses(fn):
    _raises_like_eager(fn, torch.randn(3), torch.rand(3) + 1)


# 6. addmm and relatives with an integer input and a float beta or alpha ---------------------------


def _ints():
    return tuple(torch.randint(-5, 5, (3, 3)) for _ in range(3))


@pytest.mark.parametrize(
    "fn",
    [
        lambda c, a, b: torch.addmm(c, a, b, beta=0.5),
        lambda c, a, b: torch.addmm(c, a, b, alpha=2.7),
        lambda c, a, b: torch.addmm(c, a, b, beta=-1.9, alpha=1.0),
        lambda c, a, b: c.addmm(a, b, beta=2.5),
        lambda c, a, b: torch.baddbmm(c[None], a[None], b[None], beta=0.5),
        lambda c, a, b: torch.baddbmm(c[None], a[None], b[None], alpha=3.5),
        lambda c, a, b: torch.addbmm(c, a[None], b[None], beta=0.5, alpha=2.5),
        lambda c, a, b: torch.addmv(c[0], a, b[0], beta=0.5, alpha=2.5),
    ],
    ids=["addmm-beta", "addmm-alpha", "addmm-both", "method", "baddbmm-beta", "baddbmm-alpha",
         "addbmm", "addmv"],
)  # fmt: skip
def test_integer_matrix_products_read_a_float_scale_as_an_int(fn):
    _like_eager(fn, _ints)


@pytest.mark.parametrize(
    "fn",
    [
        lambda c, a, b: torch.addr(c, a[0], b[0], beta=0.5),
        lambda c, a, b: torch.addr(c, a[0], b[0], alpha=0.5),
        lambda c, a, b: torch.addmm(c, a, b, beta=float("nan")),
        lambda c, a, b: torch.addmm(c, a, b, alpha=float("inf")),
        lambda c, a, b: torch.addmm(c, a, b, beta=1e30),
        lambda c, a, b: torch.addmm(c.int(), a.int(), b.int(), beta=3e9),
    ],
    ids=["addr-beta", "addr-alpha", "nan", "inf", "huge", "int32-huge"],
)
def test_integer_matrix_products_eager_refuses(fn):
    _raises_like_eager(fn, *_ints())


@pytest.mark.parametrize(
    "fn",
    [
        lambda c, a, b: torch.addmm(c, a, b, beta=1e39),
        lambda c, a, b: torch.addmm(c, a, b, alpha=-1e39),
        lambda c, a, b: torch.baddbmm(c[None], a[None], b[None], beta=1e39),
    ],
)
def test_float_matrix_products_with_a_scale_the_dtype_cannot_hold(fn):
    _raises_like_eager(fn, *(torch.randn(3, 3) for _ in range(3)))


# 7. float16 with complex numbers: complex32 in eager ---------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x + 1j,
        lambda x: x * (1 + 2j),
        lambda x: torch.add(x, 1j),
        lambda x: x + torch.tensor(1j),
        lambda x: torch.where(x > 0, x, 1j),
        lambda x: x[0] + 1j,
        lambda x: x.chalf(),
    ],
    ids=["add", "mul", "torch.add", "0-dim-complex", "where", "0-dim-half", "chalf"],
)
def test_float16_with_a_complex_number_runs_as_eager(fn):
    # eager computes in complex32 (torch.chalf), which the IR has no dtype for: the op refuses
    # the call by name, and torch runs it (not a complex64 result)
    jf = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(3).half()
        with _no_internal_error():
            got = jf(x)
        want = fn(x)
        assert got.dtype == want.dtype == torch.complex32
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, c: x + c,  # a complex tensor of dimensions: complex64
        lambda x, c: x.bfloat16() + 1j,  # no complex bfloat16: complex64
        lambda x, c: x.float() + 1j,
        lambda x, c: x + c[0].real,
    ],
)
def test_float16_promotions_to_other_complex_dtypes(fn):
    _like_eager(fn, lambda: (torch.randn(3).half(), torch.randn(3, dtype=torch.complex64)))


# 8. Values a dtype cannot hold ---------------------------------------------------------------------


_MASK = torch.tensor([True, False, True, False])


@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        (torch.float16, 65519.0),
        (torch.float16, 1e6),
        (torch.bfloat16, 1e39),
        (torch.float32, 1e39),
        (torch.float32, 1 + 1j),
        (torch.int8, 1000),
        (torch.int8, 127.5),
        (torch.int8, float("nan")),
        (torch.uint8, -256),
        (torch.uint8, -0.5),
        (torch.int32, 2**31),
        (torch.int8, 1j),
    ],
)
def test_masked_fill_with_a_number_the_dtype_cannot_hold(dtype, value):
    _raises_like_eager(lambda x: x.masked_fill(_MASK, value), torch.zeros(4, dtype=dtype))


@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        (torch.float16, 65504.0),
        (torch.float16, float("inf")),
        (torch.float32, 1 + 0j),
        (torch.uint8, -1),
        (torch.uint8, -255),
        (torch.int8, -128),
        (torch.bool, 2),
        (torch.bool, 0.5),
        (torch.int64, -(2**63)),
        (torch.int64, 2.0**63),
        (torch.int8, 100.0),
    ],
)
def test_masked_fill_with_a_number_the_dtype_holds(dtype, value):
    def make():
        return ((torch.randn(4) * 5).to(dtype), torch.rand(4) > 0.5)

    _like_eager(lambda x, m: x.masked_fill(m, value), make)


@pytest.mark.parametrize(
    ("dtype", "value"),
    [
        (torch.int8, torch.tensor(1000)),
        (torch.int8, torch.tensor(float("nan"))),
        (torch.int8, torch.tensor(1j)),
        (torch.float16, torch.tensor(1e6)),
        (torch.float32, torch.tensor(1e300, dtype=torch.float64)),
    ],
)
def test_masked_fill_with_a_tensor_value_the_dtype_cannot_hold(dtype, value):
    with torch.no_grad():
        _raises_like_eager(lambda x: x.masked_fill(_MASK, value), torch.zeros(4, dtype=dtype))


def test_masked_fill_with_a_tensor_value_the_dtype_holds():
    def make():
        return ((torch.randn(4) * 5).to(torch.int8), torch.rand(4) > 0.5)

    _like_eager(lambda x, m: x.masked_fill(m, torch.tensor(100.7)), make)
    _like_eager(lambda x, m: x.half().masked_fill(m, torch.tensor(float("inf"))), make)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.clone().fill_(1e6),
        lambda x: torch.full_like(x, 70000.0),
        lambda x: torch.full((2,), 1e6, dtype=torch.float16),
        lambda x: x.new_full((2,), 1e6),
        lambda x: x.clamp(max=1e6),
        lambda x: x.index_fill(0, torch.tensor([0]), 1e6),
        lambda x: x.long().to(torch.int8).fill_(1000),
        lambda x: torch.full_like(x.to(torch.int8), 1000),
        lambda x: x.to(torch.int8).clamp(-1000),
        lambda x: x.to(torch.int8).index_fill(0, torch.tensor([0]), 1000),
        lambda x: x.to(torch.int8).index_fill(0, torch.tensor([0]), torch.tensor(1000)),
    ],
)
def test_other_fills_with_a_number_the_dtype_cannot_hold(fn):
    _raises_like_eager(fn, torch.zeros(4, dtype=torch.float16))


# 9. Layouts ----------------------------------------------------------------------------------------


def _transposed():
    return (torch.randn(3, 4).t(),)


def _channels_last():
    return (torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last),)


def _seeded(fn):
    def f(x):
        torch.manual_seed(1234)
        return fn(x)

    return f


_LIKE = [
    lambda x: torch.zeros_like(x),
    lambda x: torch.ones_like(x),
    lambda x: torch.full_like(x, 2.5),
    lambda x: torch.zeros_like(x, dtype=torch.int32),
    lambda x: torch.ones_like(x) * 3 + x,
    lambda x: torch.zeros_like(x, memory_format=torch.contiguous_format),
    _seeded(lambda x: torch.rand_like(x)),
    _seeded(lambda x: torch.randn_like(x)),
    _seeded(lambda x: torch.randint_like(x, 10)),
    lambda x: torch.empty_like(x).fill_(1.0),
]


@pytest.mark.parametrize("make", [_transposed, _channels_last], ids=["transposed", "channels_last"])
@pytest.mark.parametrize("fn", _LIKE)
def test_like_factories_keep_the_layout(make, fn):
    _like_eager(fn, make)


@pytest.mark.parametrize("make", [_transposed, _channels_last], ids=["transposed", "channels_last"])
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.zeros_like(x).view(-1),
        lambda x: torch.ones_like(x).view(2, -1),
        lambda x: torch.full_like(x, 1.0).view(-1),
    ],
)
def test_view_of_a_like_factory_raises_as_in_eager(make, fn):
    _raises_like_eager(fn, *make())


def test_like_factory_layout_queries():
    def f(x):
        z = torch.zeros_like(x)
        return z.stride(), z.is_contiguous()

    _like_eager(f, _transposed)
    _like_eager(f, _channels_last)


@pytest.mark.parametrize("make", [_transposed, _channels_last], ids=["transposed", "channels_last"])
def test_masked_fill_result_layout(make):
    def f(x):
        return x.masked_fill(x > 0, 1.0)

    with torch.no_grad():
        _like_eager(f, make)


# 2. torch.return_types results -------------------------------------------------------------------


def _square():
    return (torch.randn(4, 4, dtype=torch.float64, requires_grad=True),)


def _tall():
    return (
        torch.randn(5, 3, dtype=torch.float64, requires_grad=True),
        torch.randn(5, 2, dtype=torch.float64, requires_grad=True),
    )


def _spd():
    a = torch.randn(4, 4, dtype=torch.float64)
    return ((a @ a.T + 4 * torch.eye(4, dtype=torch.float64)).requires_grad_(),)


@pytest.mark.parametrize(
    ("fn", "make", "grad"),
    [
        (lambda a, b: torch.linalg.lstsq(a, b).solution, _tall, True),
        (lambda a, b: torch.linalg.lstsq(a, b), _tall, False),
        (lambda a, b: torch.linalg.lstsq(a, b)[0] * 2, _tall, True),
        (lambda a, b: len(torch.linalg.lstsq(a, b)), _tall, False),
        (lambda a: torch.geqrf(a).a, _square, False),
        (lambda a: torch.geqrf(a).tau, _square, False),
        (lambda a: torch.geqrf(a), _square, False),
        (lambda a: (lambda q, t: q + t.sum())(*torch.geqrf(a)), _square, False),
        (lambda a: torch.histogramdd(a[:, :2], bins=[3, 3]).hist, _square, False),
        (lambda a: torch.histogramdd(a[:, :2], bins=[3, 3]).bin_edges, _square, False),
        (lambda a: torch.histogramdd(a[:, :2], bins=[3, 3]), _square, False),
    ],
    ids=["lstsq.solution", "lstsq", "lstsq[0]", "lstsq-len", "geqrf.a", "geqrf.tau", "geqrf",
         "geqrf-unpacked", "histogramdd.hist", "histogramdd.bin_edges", "histogramdd"],
)  # fmt: skip
def test_return_types_of_data_dependent_calls(fn, make, grad):
    _like_eager(fn, make, grad=grad)


@pytest.mark.parametrize(
    ("fn", "make"),
    [
        (lambda a: torch.linalg.slogdet(a).logabsdet, _square),
        (lambda a: (lambda sign, logabs: sign * logabs)(*torch.linalg.slogdet(a)), _square),
        (lambda a: torch.linalg.eigh(a).eigenvalues, _spd),
        (lambda a: torch.lu_unpack(*torch.linalg.lu_factor(a)).L, _square),
        (lambda a: torch.aminmax(a, dim=0).max, _square),
        (lambda a: torch.frexp(a.detach()).mantissa, _square),
        (lambda a: torch.linalg.inv_ex(a).inverse, _square),
        (lambda a: torch.linalg.cholesky_ex(a).L, _spd),
        (lambda a: torch.sort(a, 0).values, _square),
        (lambda a: torch.topk(a, 2), _square),
        (lambda a: torch.kthvalue(a, 2).values, _square),
        (lambda a: torch.mode(a.round()).values, _square),
        (lambda a: torch.median(a, 0), _square),
        (lambda a: torch.cummax(a, 0).values, _square),
    ],
)
def test_return_types_of_ops(fn, make):
    _like_eager(fn, make, grad=True)


# 3. Sizes as varargs -------------------------------------------------------------------------------


def _column():
    return (torch.randn(3, 1, requires_grad=True),)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.broadcast_to(2, 3, 3),
        lambda x: x.broadcast_to((2, 3, 3)),
        lambda x: x.broadcast_to(size=(3, 4)),
        lambda x: torch.broadcast_to(x, (2, 3, 3)),
        lambda x: x.tile(2, 1),
        lambda x: x.tile(2),
        lambda x: x.tile(2, 1, 3),
        lambda x: x.tile((2, 1)),
        lambda x: x.tile([2, 2]),
        lambda x: x.tile(dims=(2, 1)),
        lambda x: torch.tile(x, (2, 3)),
        lambda x: x.expand(2, 3, 4),
        lambda x: x.repeat(2, 1, 2),
        lambda x: x.view(1, 3).permute(1, 0),
        lambda x: x.reshape(1, 3),
        lambda x: x.new_zeros(2, 3) + x.sum(),
        lambda x: x.new_ones((2, 3)) * x.sum(),
        lambda x: x.new_full((2, 3), 1.5) * x.sum(),
        lambda x: x.new_empty(2, 3).shape,
    ],
)
def test_sizes_as_varargs_or_a_sequence(fn):
    _like_eager(fn, _column, grad=True)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.tile(),
        lambda x: x.new_zeros(),
        lambda x: x.new_ones(),
        lambda x: x.new_full(3, 1.0),
    ],
    ids=["tile", "new_zeros", "new_ones", "new_full"],
)
def test_sizes_eager_refuses(fn):
    _raises_like_eager(fn, torch.randn(3, 1))


# 4. var and std of complex tensors -----------------------------------------------------------------


def _complex():
    return (torch.randn(3, 4, dtype=torch.complex64, requires_grad=True),)


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.var(x),
        lambda x: torch.var(x, 1),
        lambda x: x.var(0, keepdim=True),
        lambda x: torch.std(x, 0),
        lambda x: torch.std(x, 1, correction=0),
        lambda x: x.std(unbiased=False),
        lambda x: torch.var_mean(x, 1),
        lambda x: torch.std_mean(x, (0, 1)),
        lambda x: torch.var(x.to(torch.complex128), 1),
    ],
)
def test_variance_of_complex_tensors(fn):
    _like_eager(fn, _complex, grad=True)


# 5. rrelu in place --------------------------------------------------------------------------------


def _seeded_rrelu(call):
    def f(x):
        torch.manual_seed(7)
        y = x * 1  # not a leaf
        return call(y)

    return f


@pytest.mark.parametrize(
    "call",
    [
        lambda y: F.rrelu(y, training=True, inplace=True),
        lambda y: F.rrelu_(y, training=True),
        lambda y: torch.rrelu_(y, training=True),
        lambda y: F.rrelu(y, inplace=True),
        lambda y: F.rrelu(y, training=True),
    ],
    ids=["F.rrelu-inplace", "F.rrelu_", "torch.rrelu_", "eval-inplace", "out-of-place"],
)
def test_rrelu_in_place_on_an_intermediate(call):
    _like_eager(_seeded_rrelu(call), lambda: (torch.randn(3, 4, requires_grad=True),), grad=True)


def test_rrelu_in_place_on_a_leaf_raises_as_eager():
    _raises_like_eager(lambda x: F.rrelu_(x, training=True), torch.randn(3, requires_grad=True))


def _transposed_leaf():
    return (torch.randn(4, 3).t().requires_grad_(),)


def _channels_last_leaf():
    return (torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last).requires_grad_(),)


@pytest.mark.parametrize(
    "make", [_transposed_leaf, _channels_last_leaf], ids=["transposed", "channels_last"]
)
@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.masked_fill(x > 0, 1.0),
        lambda x: x.index_add(0, torch.tensor([0, 1]), torch.ones(2, *x.shape[1:])),
        lambda x: x.index_copy(0, torch.tensor([0, 1]), torch.ones(2, *x.shape[1:])),
        lambda x: x.scatter(0, torch.zeros(1, *x.shape[1:], dtype=torch.long), 1.0),
        lambda x: F.logsigmoid(x),
        lambda x: F.logsigmoid(x).view(-1),
    ],
    ids=["masked_fill", "index_add", "index_copy", "scatter", "logsigmoid", "logsigmoid-view"],
)
@pytest.mark.parametrize("grad", [False, True], ids=["no-grad", "grad"])
def test_results_torch_lays_out_contiguous(make, fn, grad):
    # The gradients' values are eager's; their strides (of autograd.grad, before any
    # accumulation into .grad) are not compared.
    if grad:
        _like_eager(fn, make, grad=True, grad_strides=False)
    else:
        with torch.no_grad():
            _like_eager(fn, make)
