"""Writes through a boolean mask with one value per selected element (``y[y < -1] *= 3``,
``x[m] = v[m]``, ``x[:, m] = v``) compile: the mask is the columns of its nonzero indices, one
program for every count (empty and full masks included), values, errors and gradients as eager's.
And a tensor a program returns after writing it in place may be written by the caller before the
backward, as in eager, where eager's node saved no tensor of it."""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder
from thunder_ir.ops.data_shapes import MASKED_WRITES_COMPILE

CACHES = ["constant values", "symbolic values"]


def _scaled_calls(*shapes, seed=0):
    """Fresh inputs; the third selects nothing (zeros), the fourth everything (large)."""
    g = torch.Generator().manual_seed(seed)
    calls = []
    for scale in (1.0, 1.0, 0.0, None, 1.0):
        args = [torch.randn(*s, generator=g) for s in shapes]
        if scale is None:
            args[0] = args[0].abs() + 5
        else:
            args[0] = args[0] * scale
        calls.append(args)
    return calls


def _matches_eager(fn, calls, cache, programs=1):
    jf = thunder.jit(fn, cache=cache)
    for args in calls:
        ours = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
        theirs = [a.detach().clone().requires_grad_(a.is_floating_point()) for a in args]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no split, no eager run
            got = jf(*ours)
        want = fn(*theirs)
        torch.testing.assert_close(got, want)
        weights = torch.randn(want.shape)
        (got * weights).sum().backward()
        (want * weights).sum().backward()
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a.grad, b.grad)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0
    assert stats.last_split_reason is None
    assert stats.compilations <= programs
    return jf


def _scale_selected(x):
    y = x * 2
    y[y > 1] -= 1
    y[y < -1] *= 3
    return y


def _add_selected_of_other(x, o):
    y = x * 1
    m = x > 0
    y[m] += o[m]
    return y


def _rows_from_other(x, o):
    y = x + 0
    rows = x.sum(-1) > 0  # a two-dimensional mask of a three-dimensional tensor
    y[rows] = o[rows].tanh()
    return y


def _mask_among_other_indices(x, o):
    y = x * 1
    cols = x[0] > 0
    y[:, cols] = o[:, cols] * 3
    return y


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    ("fn", "shapes"),
    [
        (_scale_selected, [(5, 4)]),
        (_add_selected_of_other, [(6, 3), (6, 3)]),
        (_rows_from_other, [(3, 4, 5), (3, 4, 5)]),
        (_mask_among_other_indices, [(3, 7), (3, 7)]),
    ],
    ids=["scale selected", "add other's selected", "rows", "mask among other indices"],
)
@pytest.mark.skipif(
    not MASKED_WRITES_COMPILE, reason="masked writes of one value per element run split for now"
)
def test_masked_writes_of_one_value_per_element_one_program_for_every_count(cache, fn, shapes):
    _matches_eager(fn, _scaled_calls(*shapes), cache)


def _set_values(x, m, v):
    y = x * 1
    y[m] = v
    return y


@pytest.mark.skipif(
    not MASKED_WRITES_COMPILE, reason="masked writes of one value per element run split for now"
)
@pytest.mark.parametrize("cache", CACHES)
def test_values_passed_in_with_one_per_selected_element(cache):
    g = torch.Generator().manual_seed(1)
    jf = thunder.jit(_set_values, cache=cache)
    for threshold in (0.5, 0.5, 2.0, -2.0, 0.2):  # some, some, none, all, most
        x = torch.randn(6, 3, generator=g)
        m = torch.randn(6, generator=g) > threshold
        v = torch.randn(int(m.sum()), 3, generator=g)
        ours = [x.clone().requires_grad_(), m, v.clone().requires_grad_()]
        theirs = [x.clone().requires_grad_(), m, v.clone().requires_grad_()]
        got, want = jf(*ours), _set_values(*theirs)
        torch.testing.assert_close(got, want)
        w = torch.randn(6, 3, generator=g)
        (got * w).sum().backward()
        (want * w).sum().backward()
        torch.testing.assert_close(ours[0].grad, theirs[0].grad)
        torch.testing.assert_close(ours[2].grad, theirs[2].grad)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0 and stats.last_split_reason is None


@pytest.mark.parametrize("cache", CACHES)
def test_values_that_do_not_broadcast_to_the_selection_raise_as_in_eager(cache):
    jf = thunder.jit(_set_values, cache=cache)
    v = torch.randn(3, 3)
    for selected in (3, 1, 2, 3, 0):  # [3] broadcasts to neither [1] nor [2] nor [0]
        x = torch.randn(6, 3)
        m = torch.zeros(6, dtype=torch.bool)
        m[:selected] = True
        if selected == 3:
            torch.testing.assert_close(jf(x, m, v), _set_values(x, m, v))
            continue
        with pytest.raises(RuntimeError) as eager_error:
            _set_values(x, m, v)
        with pytest.raises(RuntimeError, match="shape mismatch") as ours:
            jf(x, m, v)
        assert str(ours.value).split(" at ")[0] == str(eager_error.value).split(" at ")[0]


@pytest.mark.parametrize("cache", CACHES)
def test_one_value_broadcast_to_every_selected_element(cache):
    def f(x, v):
        y = x * 1
        y[x[:, 0] > 0] = v  # v: (1, 3), whatever the count of rows
        return y

    calls = _scaled_calls((5, 3), (1, 3), seed=3)
    _matches_eager(f, calls, cache)


def _write_then_return(op):
    def f(x, t, m):
        y = x * 1
        op(y, t, m)
        return y

    return f


_IN_PLACE_WRITES = {
    "masked_fill_": lambda y, t, m: y.masked_fill_(m, 3.0),
    "fill_": lambda y, t, m: y.fill_(2.0),
    "zero_": lambda y, t, m: y.zero_(),
    "copy_": lambda y, t, m: y.copy_(t),
    "clamp_": lambda y, t, m: y.clamp_(-0.5, 0.5),
    "index_fill_": lambda y, t, m: y.index_fill_(0, torch.tensor([1, 3]), 2.0),
    "mask set": lambda y, t, m: y.__setitem__(m, 2.0),
    "slice set": lambda y, t, m: y.__setitem__(slice(1, 3), 2.0),
    "mul_ tensor": lambda y, t, m: y.mul_(t),
    "addcmul_": lambda y, t, m: y.addcmul_(t, t),
    "pow_ number": lambda y, t, m: y.pow_(2),
    # eager's node saves the written tensor (its result, or itself as the other factor): the
    # caller's write then raises in backward, as in eager
    "exp_": lambda y, t, m: y.exp_(),
    "sigmoid_": lambda y, t, m: y.sigmoid_(),
    "pow_ tensor": lambda y, t, m: y.pow_(t),
    "mul_ itself": lambda y, t, m: y.mul_(y),
}


@pytest.mark.parametrize("name", list(_IN_PLACE_WRITES))
def test_returned_tensor_written_in_place_inside_then_by_the_caller(name):
    f = _write_then_return(_IN_PLACE_WRITES[name])
    jf = thunder.jit(f)
    g = torch.Generator().manual_seed(4)
    for _ in range(3):
        x, t = torch.randn(5, generator=g), torch.randn(5, generator=g)
        m = torch.randn(5, generator=g) > 0
        results = []
        for fn in (f, jf):
            xx, tt = x.clone().requires_grad_(), t.clone().requires_grad_()
            y = fn(xx, tt, m)
            y.mul_(2)
            try:
                y.sum().backward()
            except RuntimeError as e:
                assert "modified by an inplace operation" in str(e)
                results.append(None)
            else:
                results.append((xx.grad, tt.grad))
        want, got = results
        assert (got is None) == (want is None), (name, want, got)
        if want is not None:
            torch.testing.assert_close(got, want)


def _add_twice_selected(x, o, m):
    y = x * 1
    y[m] += o[m] * 2
    return y


def _columns_from_other(x, o, m):
    y = x * 1
    y[:, m] = o[:, m] * 3
    return y


@pytest.mark.skipif(
    not MASKED_WRITES_COMPILE, reason="masked writes of one value per element run split for now"
)
@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", [_add_twice_selected, _columns_from_other, _set_values])
def test_first_call_selects_one_element(cache, fn):
    # A count of 1 while tracing decides nothing a later count breaks (a gradient summing over a
    # dimension it took for a broadcast one).
    g = torch.Generator().manual_seed(5)
    jf = thunder.jit(fn, cache=cache)
    for count in (1, 3, 1, 0, 6, 2):
        x = torch.randn(6, 6, generator=g)
        m = torch.zeros(6, dtype=torch.bool)
        m[torch.randperm(6, generator=g)[:count]] = True
        o = torch.randn(count, 6, generator=g) if fn is _set_values else torch.randn(6, 6)
        ours = [x.clone().requires_grad_(), o.clone().requires_grad_()]
        theirs = [x.clone().requires_grad_(), o.clone().requires_grad_()]
        if fn is _set_values:  # (x, m, values)
            got, want = jf(ours[0], m, ours[1]), fn(theirs[0], m, theirs[1])
        else:
            got, want = jf(*ours, m), fn(*theirs, m)
        torch.testing.assert_close(got, want)
        w = torch.randn(6, 6, generator=g)
        (got * w).sum().backward()
        (want * w).sum().backward()
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a.grad, b.grad)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0 and stats.last_split_reason is None
    if fn is not _set_values:  # (its values' shape is an input's, a guard of the default cache)
        assert stats.compilations == 1


def _views_then_decision(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    v1 = a.unsqueeze(0).expand(2, *a.shape)
    a.add_(1.5)
    v2 = a[1:]
    if a.sum() > 0:  # a decision on data after a write: the writes are deferred past it
        a.mul_(2)
    a[a > 0] = a[a > 0] * 2 + 1
    return a, v1, v2


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_returned_views_of_written_inputs_alias_them_as_eagers(cache: str | None) -> None:
    jitted = thunder.jit(_views_then_decision, **({} if cache is None else {"cache": cache}))
    for i in range(4):
        a = torch.randn(5) + (i - 2)
        b = a.clone()
        expected, got = _views_then_decision(a), jitted(b)
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e)
            assert g.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
        got[2].fill_(7.0)  # a write through a returned view reaches the input and the others
        expected[2].fill_(7.0)
        torch.testing.assert_close(b, a)
        torch.testing.assert_close(got[1], expected[1])


def _masked_write_then_layouts(a, w):
    a.add_(1.5)
    a[a > 0] = a[a > 0] * 2 + 1  # its count's check comes after the first write: deferred
    return a * w, a.exp(), a[0], a


def _masked_columns_of_input(a, w):
    a.mul_(2)
    cols = a[0] > 0
    a[:, cols] = w[:, cols] * 3
    if a.sum() > 0:
        a.add_(1)
    # views or copies by the input's strides, as eager's
    return a.t() * 2, a.flatten(), a.reshape(2, -1), a


def _masked_write_saved_then_written(a, w):
    # (found by the views fuzz) eager's mul saves the input, written after it: eager's backward
    # raises, and so does thunder's
    a.copy_(w)
    a[a > 0] = a[a > 0] * 2 + 1
    c = w * a
    a.mul_(0.5)
    return a.sum(0), c


@pytest.mark.parametrize("cache", [None, "symbolic values"])
@pytest.mark.parametrize(
    "fn",
    [_masked_write_then_layouts, _masked_columns_of_input, _masked_write_saved_then_written],
)
def test_masked_writes_into_inputs_keep_eagers_layouts_aliases_and_backward(fn, cache):
    # Inputs transposed, stepped, with a storage offset: results' strides and offsets, views of
    # the input, the caller's memory and gradients (or eager's backward error) as eager's.
    from test_deferred_writes_strides import assert_like_eager

    assert_like_eager(fn, cache)


# Values of another dtype: eager writes a one-element value through a mask as masked_fill_ (it
# casts) and raises for any other count (index_put_'s dtype check); an index_put at the mask's
# indices raised for every count.


def _outcome(fn, *args):
    try:
        return fn(*args), None
    except RuntimeError as e:
        return None, str(e).split("\n")[0]


def _same_as_eager_over_calls(fn, calls, cache, grad, autocast=False):
    jf = thunder.jit(fn, cache=cache)
    outcomes = set()
    for args in calls:
        ours = [a.detach().clone().requires_grad_(grad and a.is_floating_point()) for a in args]
        theirs = [a.detach().clone().requires_grad_(grad and a.is_floating_point()) for a in args]
        with warnings.catch_warnings(), torch.autocast("cpu", enabled=autocast):
            warnings.simplefilter("ignore")  # it may run split
            got, got_error = _outcome(jf, *ours)
            want, want_error = _outcome(fn, *theirs)
        assert got_error == want_error
        outcomes.add(want_error is None)
        if want is None:
            continue
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        if not grad:
            continue
        w = torch.randn(want.shape)
        (got * w).sum().backward()
        (want * w).sum().backward()
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a.grad, b.grad)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0
    return outcomes, stats.last_split_reason is None


def _columns_set_to(x, v):
    y = x * 1
    y[:, x[0] > 0] = v
    return y


def _first_row(selected, cols=5):
    x = torch.randn(3, cols)
    x[0] = -torch.rand(cols) - 0.1
    x[0, :selected] = torch.rand(selected) + 0.1
    return x


@pytest.mark.parametrize("grad", [False, True], ids=["no grad", "grad"])
@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    ("dtype", "value", "compiled"),
    [
        (torch.float32, torch.tensor(3), True),
        (torch.float32, torch.tensor(1.5, dtype=torch.bfloat16), True),
        (torch.float32, torch.tensor([[True]]), True),
        (torch.float64, torch.tensor([-7], dtype=torch.int16), True),
        # casts that may overflow (eager's masked_fill_ then raises) run split
        (torch.float32, torch.tensor([2.5], dtype=torch.float64), False),
        (torch.float16, torch.tensor(2.5), False),
        (torch.float16, torch.tensor(1e6), False),
    ],
    ids=["int64", "bfloat16", "bool", "int16 to float64", "float64", "float32 to half", "overflow"],
)
def test_one_element_value_of_another_dtype_among_other_indices_is_cast_as_in_eager(
    cache, grad, dtype, value, compiled
):
    calls = [[_first_row(n).to(dtype), value] for n in (2, 0, 1, 5, 3)]
    outcomes, split_free = _same_as_eager_over_calls(_columns_set_to, calls, cache, grad)
    assert outcomes == ({False} if value.item() == 1e6 else {True})
    assert split_free == compiled


def _set_selected_of_other(x, v):
    y = x * 1
    m = x > 0
    y[m] = v[m]
    return y


def _selecting(n, size=6):
    x = -torch.rand(size) - 0.1
    x[torch.randperm(size)[:n]] = torch.rand(n) + 0.1
    return x


@pytest.mark.parametrize("grad", [False, True], ids=["no grad", "grad"])
@pytest.mark.parametrize("cache", CACHES)
def test_values_of_another_dtype_one_per_selected_element_cast_only_for_one_as_in_eager(
    cache, grad
):
    calls = [[_selecting(n), torch.randn(6).bfloat16()] for n in (1, 0, 1, 3, 6, 1)]
    # eager: cast for one selected element, index_put_'s dtype error for other counts
    outcomes, split_free = _same_as_eager_over_calls(_set_selected_of_other, calls, cache, grad)
    assert outcomes == {True, False} and split_free  # one program: eager's error its own check


def _set_selected_of_product(x, a, b):
    y = x * 1
    v = (a @ b).flatten()  # bfloat16 under autocast
    m = x > 0
    y[m] = v[m]
    return y


@pytest.mark.parametrize("grad", [False, True], ids=["no grad", "grad"])
@pytest.mark.parametrize("cache", CACHES)
def test_autocast_values_one_per_selected_element_as_in_eager(cache, grad):
    calls = [[_selecting(n), torch.randn(6, 3), torch.randn(3, 1)] for n in (1, 0, 1, 2, 6)]
    outcomes, split_free = _same_as_eager_over_calls(
        _set_selected_of_product, calls, cache, grad, autocast=True
    )
    assert outcomes == {True, False} and split_free


def _set_selected_of_other_into_input(x, v):
    m = x > 0
    x[m] = v[m]
    return x


@pytest.mark.parametrize("cache", CACHES)
def test_values_of_another_dtype_written_into_the_input_as_in_eager(cache):
    calls = [[_selecting(n), torch.randn(6).bfloat16()] for n in (1, 2, 1, 0, 6)]
    outcomes, split_free = _same_as_eager_over_calls(
        _set_selected_of_other_into_input, calls, cache, grad=False
    )
    assert outcomes == {True, False} and split_free
