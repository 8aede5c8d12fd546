"""Calls that differed from eager: tensors made under ``torch.inference_mode`` inside the function,
outside lists indexed by a number read from tensor data, ``F.pad`` by such a number with
gradients, ``x.data = t``, ``torch.reshape(x, 6, 4)`` (sizes spread where eager takes one list),
``F.softmax``'s ``_stacklevel`` slot and ``torch.unique(dim=)``. Each compares thunder.jit with
eager on fresh inputs over several calls (a call that runs eagerly after an internal error fails:
tests/conftest.py)."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
import torch.nn.functional as F

import thunder


@contextlib.contextmanager
def _no_internal_error():
    """Fails on thunder's warning that it failed inside (eager's result would hide the bug)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    reported = [str(w.message) for w in caught if "please report this" in str(w.message)]
    assert not reported, reported[0]


# Inference tensors made inside the function -----------------------------------------------------


def _made_in_inference_mode(x, w):
    with torch.inference_mode():
        y = x * w
    return y, y.is_inference()


def _used_after_the_block(x, w):
    with torch.inference_mode():
        y = x * 2
        inside = y.is_inference()
    s = y * 0.5  # records no gradient: a normal tensor
    z = x * w + s
    return z, inside, s.is_inference(), z.is_inference(), z.requires_grad


def test_tensors_made_in_inference_mode_are_inference_tensors():
    for fn in (_made_in_inference_mode, _used_after_the_block):
        jf = thunder.jit(fn)
        for _ in range(3):
            x, w = torch.randn(3), torch.randn(3, requires_grad=True)
            with _no_internal_error():
                got = jf(x, w)
            want = fn(x, w)
            assert got[1:] == want[1:]
            assert got[0].is_inference() == want[0].is_inference()
            assert got[0].requires_grad == want[0].requires_grad
            torch.testing.assert_close(got[0], want[0])


def test_a_returned_inference_tensor_is_refused_by_autograd_as_eager():
    jf = thunder.jit(_made_in_inference_mode)
    w = torch.randn(3, requires_grad=True)
    for fn in (_made_in_inference_mode, jf):
        y, _ = fn(torch.randn(3), w)
        with pytest.raises(RuntimeError, match="[Ii]nference tensor"):
            (y * w).sum().backward()


def test_inference_tensors_that_stay_inside_are_compiled():
    jf = thunder.jit(_used_after_the_block)
    for _ in range(3):
        x, w = torch.randn(3), torch.randn(3, requires_grad=True)
        got, want = jf(x, w), _used_after_the_block(x, w)
        assert got[1:] == want[1:]
        torch.testing.assert_close(got[0], want[0])
    stats = thunder.compile_stats(jf)
    assert stats.compilations == 1 and stats.eager_fallbacks == 0


class _Holder:
    pass


def _views_and_stores(x, holder):
    with torch.inference_mode():
        v = x.view(3)
        a = x[1:]
        holder.t = x * 2
        y = x + 1
        vy = y.view(3)
    return v.is_inference(), a.is_inference(), vy.is_inference(), v, a


def test_views_stores_and_inference_arguments_like_eager():
    jf = thunder.jit(_views_and_stores)
    for inference_argument in (False, True, False):
        with torch.inference_mode(inference_argument):
            x = torch.randn(3)
        got_holder, want_holder = _Holder(), _Holder()
        got, want = jf(x, got_holder), _views_and_stores(x, want_holder)
        assert got[:3] == want[:3]
        for g, w in zip(got[3:], want[3:]):
            assert g.is_inference() == w.is_inference()
            torch.testing.assert_close(g, w)
        assert got_holder.t.is_inference() == want_holder.t.is_inference()
        torch.testing.assert_close(got_holder.t, want_holder.t)


def _saves_an_inference_tensor(x, w):
    with torch.inference_mode():
        y = x * 2
    return y * w  # eager: mul saves y for backward, which it refuses


def test_inference_tensor_saved_for_backward_raises_as_eager():
    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Inference tensors cannot be saved") as want:
        _saves_an_inference_tensor(x, w)
    with pytest.raises(RuntimeError) as got:
        thunder.jit(_saves_an_inference_tensor)(x, w)
    assert str(got.value) == str(want.value)


def test_is_inference_under_the_callers_inference_mode():
    def f(x):
        y = x * 2
        return y, y.is_inference()

    jf = thunder.jit(f)
    for _ in range(3):
        with torch.inference_mode():
            x = torch.randn(3)
            got, want = jf(x), f(x)
        assert got[1] == want[1] and got[0].is_inference() == want[0].is_inference()
        torch.testing.assert_close(got[0], want[0])


def test_inference_mode_off_inside_is_traced():
    def f(x):
        with torch.inference_mode(False):
            y = x * 2
        return y, y.is_inference()

    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(3)
        got, want = jf(x), f(x)
        assert got[1] == want[1] and got[0].is_inference() == want[0].is_inference()
        torch.testing.assert_close(got[0], want[0])
    assert thunder.compile_stats(jf).compilations == 1


# Outside lists and dicts indexed by a number read from data --------------------------------------

_SCALES = [10.0, 20.0, 30.0]
_TABLE = {0: 1.0, 1: 2.0, 2: 3.0}
_FNS = [torch.sin, torch.cos, torch.tanh]


def _global_list_and_dict(x):
    return x * _SCALES[int(x.argmax())] + _TABLE[int(x.argmin())]


def _default_list(x, lut=[1.0, 2.0, 3.0]):  # noqa: B006 (read, never written)
    return x * lut[x.argmax().item()]


def _list_of_functions(x):
    return _FNS[int(x.argmax())](x)


def _negative_index(x):
    return x + _SCALES[int(x.argmax()) - 3]


@pytest.mark.parametrize(
    "fn", [_global_list_and_dict, _default_list, _list_of_functions, _negative_index]
)
def test_outside_containers_indexed_by_values_read_from_data(fn):
    jf = thunder.jit(fn)
    for i in range(8):
        torch.manual_seed(i)
        x = torch.randn(3)
        with _no_internal_error():
            got = jf(x)
        torch.testing.assert_close(got, fn(x))


def test_outside_list_indexed_by_a_value_read_from_data_then_changed():
    lut = [1.0, 2.0, 3.0]

    def f(x):
        return x * lut[int(x.argmax())]

    jf = thunder.jit(f)
    for i in range(6):
        lut[1] = float(i)
        x = torch.randn(3)
        with _no_internal_error():
            got = jf(x)
        torch.testing.assert_close(got, f(x))


# F.pad by an amount read from data, with gradients ----------------------------------------------


def _pad_right(x, n):
    return F.pad(x, (0, int(n)))


def _pad_both(x, n):
    return F.pad(x, (int(n), 1, 0, int(n))) * 2


@pytest.mark.parametrize("fn", [_pad_right, _pad_both])
def test_pad_by_an_amount_read_from_data_with_gradients(fn):
    jf = thunder.jit(fn)
    for n in (2, 1, 0, -1, 3, 0, 2):
        x = torch.randn(2, 3, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        with _no_internal_error():
            got = jf(x, torch.tensor(n))
        want = fn(xe, torch.tensor(n))
        torch.testing.assert_close(got, want)
        g = torch.randn_like(want)
        got.backward(g)
        want.backward(g)
        torch.testing.assert_close(x.grad, xe.grad)
    assert not thunder.compile_stats(jf).split_graphs


# x.data = t ------------------------------------------------------------------------------------


def _sets_data(x, t):
    x.data = t
    return x * 2


def _setattr_data(x, t):
    return setattr(x, "data", t * 3), x + 1


def _sets_data_of_computed(x, t):
    y = x * 2
    y.data = t
    return y, x


@pytest.mark.parametrize("fn", [_sets_data, _setattr_data, _sets_data_of_computed])
def test_setting_tensor_data_like_eager(fn):
    jf = thunder.jit(fn)
    for _ in range(3):
        x, t = torch.randn(3), torch.randn(3)
        xe, te = x.clone(), t.clone()
        with _no_internal_error():
            got = jf(x, t)
        want = fn(xe, te)
        assert type(got[0]) is type(want[0])
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(x, xe)


# Sizes spread where the torch function takes one list --------------------------------------------

_SPREAD = [
    ("reshape", (4, 6)),
    ("permute", (2, 1, 0)),
    ("tile", (2, 2)),
    ("flip", (0, 1)),
    ("broadcast_to", (2, 2, 3, 4)),
]


@pytest.mark.parametrize("name,sizes", _SPREAD, ids=[n for n, _ in _SPREAD])
def test_torch_function_refuses_spread_sizes_as_eager(name, sizes):
    def f(x):
        return getattr(torch, name)(x, *sizes)

    x = torch.randn(2, 3, 4)
    with pytest.raises(TypeError) as want:
        f(x)
    with pytest.raises(TypeError) as got:
        thunder.jit(f)(x)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("name,sizes", _SPREAD, ids=[n for n, _ in _SPREAD])
def test_tensor_method_and_list_forms_take_the_sizes(name, sizes):
    def f(x):
        as_list = getattr(torch, name)(x, sizes)
        if name == "broadcast_to":
            return as_list
        return as_list, getattr(x, name)(*sizes), getattr(torch.Tensor, name)(x, *sizes)

    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(2, 3, 4)
        torch.testing.assert_close(jf(x), f(x))


def test_factories_still_take_spread_sizes():
    def f(x):
        return x + torch.zeros(2, 3) + torch.ones(2, 3)

    x = torch.randn(2, 3)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))


# F.softmax's _stacklevel slot ------------------------------------------------------------------


_SOFTMAXES = [
    lambda x: F.softmax(x, 0, torch.float64),
    lambda x: F.log_softmax(x, 1, torch.float64),
    lambda x: F.softmin(x, 1, torch.float64),
    lambda x: F.softmax(x, 0, 3, torch.float64),
    lambda x: F.softmax(x, 0, _stacklevel=5, dtype=torch.float64),
    lambda x: torch.softmax(x, 0, torch.float64),
    lambda x: x.log_softmax(1, torch.float64),
]


@pytest.mark.parametrize("fn", _SOFTMAXES, ids=[str(i) for i in range(len(_SOFTMAXES))])
def test_softmax_stacklevel_slot_like_eager(fn):
    jf = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(3, 4, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        got, want = jf(x), fn(xe)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want)
        got.sum().backward()
        want.sum().backward()
        torch.testing.assert_close(x.grad, xe.grad)


# torch.unique(dim=) ----------------------------------------------------------------------------


def test_unique_with_dim_compiles_like_eager():
    def f(x):
        return torch.unique(x, dim=0, return_inverse=True, return_counts=True)

    jf = thunder.jit(f)
    with _no_internal_error(), warnings.catch_warnings():
        warnings.simplefilter("error")  # no split, no eager run
        for _ in range(4):
            x = torch.randint(0, 2, (6, 2))
            got, want = jf(x), f(x)
            for g, w in zip(got, want):
                torch.testing.assert_close(g, w)
    assert thunder.compile_stats(jf).compilations >= 1


def test_einsum_takes_its_operands_spread_as_eager() -> None:
    """``einsum(equation, *operands)`` is spread like ``reshape(x, *sizes)``, but its spread
    arguments are tensors, which the function form takes (the sublist form too)."""

    def f(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        two = torch.einsum("ij,jk->ik", a, b)
        three = torch.einsum("ij,jk,kl->il", a, b, c)
        sublist = torch.einsum(a, [0, 1], b, [1, 2], [0, 2])
        return two + three.sum() + sublist

    jf = thunder.jit(f)
    for _ in range(3):
        a = torch.randn(2, 3, requires_grad=True)
        b, c = torch.randn(3, 4), torch.randn(4, 4)
        out = jf(a, b, c)
        expected = f(a, b, c)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(
            torch.autograd.grad(out.sum(), a)[0], torch.autograd.grad(expected.sum(), a)[0]
        )
    assert thunder.compile_stats(jf).eager_fallbacks == 0
