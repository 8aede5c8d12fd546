"""Writes into an empty region keep the value in the autograd graph (as eager's CopySlices);
``*_like`` factories of a grad-requiring input keep eager's layout and RNG draws; an int beyond
int64 in ``torch.tensor`` raises eager's error."""

import warnings

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]

warnings.filterwarnings("ignore", category=UserWarning)


def _write_prefix(x, b):
    y = b.clone()
    y[: x.shape[0]] = x
    return y * 2


def _write_empty_slice(x, b):
    y = b.clone()
    y[2:2] = x.sum()
    return y


def _write_empty_tail_column(x, b):
    y = b.clone()
    y[5:, 1] = x[:0, 0]
    return y


def _write_empty_columns(x, b):
    y = b.clone()
    y[:, 4:] = x.sum()
    return y


def _write_empty_stepped(x, b):
    y = b.clone()
    y[1:1:2] = x[:0]
    return y


def _write_empty_then_number(x, b):
    y = b.clone()
    y[2:2] = x.sum()
    y[:, 4:] = 3.0
    return y + 1


def _write_false(x, b):
    y = b.clone()
    y[False] = x[0]  # eager records nothing: the result does not require grad
    return y


EMPTY_WRITES = [
    _write_prefix,
    _write_empty_slice,
    _write_empty_tail_column,
    _write_empty_columns,
    _write_empty_stepped,
    _write_empty_then_number,
    _write_false,
]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", EMPTY_WRITES, ids=lambda f: f.__name__)
def test_empty_write_keeps_value_in_graph(fn, cache):
    jf = thunder.jit(fn, cache=cache)
    rows = [3, 0, 2, 0] if fn is _write_prefix else [3, 4, 3]
    for n in rows:
        x = torch.randn(n, 4, requires_grad=True)
        tx = x.detach().clone().requires_grad_()
        b = torch.randn(5, 4)
        b[0, 0] = -0.0  # the result keeps b's values exactly
        expected, actual = fn(x, b), jf(tx, b)
        assert actual.requires_grad == expected.requires_grad
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        assert torch.equal(actual.signbit(), expected.signbit())
        if expected.requires_grad:
            grad = torch.randn_like(expected)
            expected.backward(grad)
            actual.backward(grad)
            assert tx.grad is not None and x.grad is not None
            assert tx.grad.shape == x.grad.shape
            torch.testing.assert_close(tx.grad, x.grad, rtol=0, atol=0)


LIKES = {
    "zeros_like": lambda x: torch.zeros_like(x),
    "ones_like": lambda x: torch.ones_like(x),
    "empty_like_filled": lambda x: torch.empty_like(x).fill_(1.0),
    "full_like_mul": lambda x: torch.full_like(x, 2.0) * x,
    "zeros_like_plus": lambda x: torch.zeros_like(x) + x,
    "where_ones_like": lambda x: torch.where(x > 0, x, torch.ones_like(x)),
    "rand_like_mul": lambda x: torch.rand_like(x) * x,
    "randn_like_plus": lambda x: torch.randn_like(x) + x.sin(),
}


def _layouts():
    yield "channels_last", torch.randn(2, 3, 4, 4).contiguous(memory_format=torch.channels_last)
    yield "permuted", torch.randn(4, 4, 3, 2).permute(3, 2, 0, 1)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", list(LIKES))
def test_like_factories_keep_layout_with_grad(name, cache):
    fn = LIKES[name]
    jf = thunder.jit(fn, cache=cache)
    for _ in range(2):
        for _kind, x0 in _layouts():
            for requires_grad in (False, True):
                x = x0.clone().requires_grad_(requires_grad)
                tx = x0.clone().requires_grad_(requires_grad)
                torch.manual_seed(1234)
                expected = fn(x)
                torch.manual_seed(1234)
                actual = jf(tx)
                assert actual.stride() == expected.stride()
                assert actual.requires_grad == expected.requires_grad
                torch.testing.assert_close(actual, expected)
                if expected.requires_grad:
                    grad = torch.randn_like(expected)
                    expected.backward(grad)
                    actual.backward(grad)
                    torch.testing.assert_close(tx.grad, x.grad)
                    assert tx.grad.stride() == x.grad.stride()


@pytest.mark.parametrize("cache", CACHES)
def test_tensor_of_int_beyond_int64_raises_eagers_error(cache):
    def fn(x):
        return torch.tensor(x.shape[0] << 60)

    jf = thunder.jit(fn, cache=cache)
    for n in [3, 4, 500, 7]:
        x = torch.ones(n)
        try:
            expected = fn(x)
        except Exception as e:
            with pytest.raises(type(e)):
                jf(x)
        else:
            torch.testing.assert_close(jf(x), expected, rtol=0, atol=0)
