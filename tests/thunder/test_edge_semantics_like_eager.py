"""Small corners where eager's answer is the contract: comparing a tensor with None, softmax and
logsumexp over an empty dimension, one_hot's range check."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
import torch.nn.functional as F

import thunder


def _jit_strict(fn):
    jf = thunder.jit(fn)

    def call(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no eager fallback, no internal error
            return jf(*args)

    return call


def test_tensor_compared_with_none():
    def f(x):
        return x == None, x != None, None == x  # noqa: E711 - the comparison under test

    assert _jit_strict(f)(torch.ones(2)) == f(torch.ones(2)) == (False, True, False)

    def ordered(x):
        return x < None

    with pytest.raises(TypeError):
        ordered(torch.ones(2))
    with pytest.raises(TypeError):
        thunder.jit(ordered)(torch.ones(2))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x.logsumexp(1),
        lambda x: torch.logsumexp(x, (0, 1), keepdim=True),
        lambda x: x.softmax(1),
        lambda x: x.log_softmax(-1),
        lambda x: F.softmin(x, 1),
    ],
)
def test_softmax_family_over_an_empty_dimension(fn):
    x = torch.randn(3, 0)
    got, want = _jit_strict(fn)(x), fn(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)


def test_one_hot_checks_the_classes():
    def f(x):
        return F.one_hot(x, 4)

    jf = thunder.jit(f)
    x = torch.tensor([0, 3, 1])
    torch.testing.assert_close(jf(x), f(x))
    for bad, message in (([4], "smaller than num_classes"), ([-1], "non-negative")):
        with pytest.raises(RuntimeError, match=message):
            f(torch.tensor(bad))
        with pytest.raises(RuntimeError, match=message):
            jf(torch.tensor(bad))


@pytest.mark.parametrize("op", ["sub", "add", "mul", "truediv", "pow"])
def test_number_on_the_left_written_in_place_later(op):
    import operator

    fn = getattr(operator, op)

    def f(x, y):
        s = fn(2.0, x)  # ``2 - x``: the tensor's reflected operator
        s += y  # written in place later (DeBERTa's ``score = 0; score += ...``)
        return s

    x = torch.rand(3) + 0.5
    y = torch.randn(3)
    for requires_grad in (True, False):
        xg = x.clone().requires_grad_(requires_grad)
        with torch.no_grad():
            torch.testing.assert_close(_jit_strict(f)(xg, y), f(xg, y))


def test_print_inside_the_program_prints_eagers_values_on_every_call(capsys):
    # Recorded once while tracing, print showed proxies and only on the first call.
    def f(x):
        y = x * 2
        print("y is", y, sep=": ")
        return y + 1

    jf = thunder.jit(f)
    for i in range(3):
        x = torch.full((2,), float(i))
        with pytest.warns(UserWarning, match="print") if i == 0 else contextlib.nullcontext():
            got = jf(x)
        printed = capsys.readouterr().out
        assert printed == f"y is: {x * 2}\n"
        torch.testing.assert_close(got, f(x))
        capsys.readouterr()  # eager's own print


def test_text_of_a_tensor_inside_the_program_is_eagers_on_every_call():
    # It was the proxy's name ('<TensorProxy t0: cpu f32[2]>'), fixed in the program, and a
    # format spec on a 0-d tensor raised inside thunder.
    texts = {
        "f-string": lambda y: f"{y}",
        "conversions": lambda y: f"{y!s}|{y!r}|{y!a}",
        "str": lambda y: str(y),
        "repr": lambda y: repr(y),
        "str of a list": lambda y: str([y, 1]),
        "format spec": lambda y: f"{y.sum():.2f}",
        "an input": None,
    }
    for name, text in texts.items():

        def f(x, text=text):
            y = x * 2
            return y + 1, (text(y) if text is not None else f"{x}")

        jf = thunder.jit(f)
        for i in range(3):
            x = torch.full((2,), float(i))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the split's notice
                got = jf(x)
            want = f(x)
            torch.testing.assert_close(got[0], want[0])
            assert got[1] == want[1], name
        assert thunder.compile_stats(jf).eager_fallbacks == 0, name
