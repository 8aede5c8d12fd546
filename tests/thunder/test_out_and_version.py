"""``out=`` arguments of ops thunder mirrors, and the version counter a program reads: torch runs
those calls (split), so the values, the written buffers and the counters are eager's on every
call; never a stale constant, never an internal error."""

from __future__ import annotations

import warnings

import pytest
import torch
from runs_by_torch import call_split

import thunder


@pytest.mark.parametrize(
    "op",
    [
        lambda x, o: torch.add(x, 1, out=o),
        lambda x, o: torch.mul(x, x, out=o),
        lambda x, o: torch.sin(x, out=o),
        lambda x, o: torch.clamp(x, -0.5, 0.5, out=o),
        lambda x, o: (
            torch.cat([x, x], out=o) if o.numel() == 2 * x.numel() else torch.exp(x, out=o)
        ),
    ],
)
def test_out_argument_writes_as_eager(op):
    def f(x, o):
        op(x, o)
        return o * 2

    jf = thunder.jit(f)
    for _ in range(2):
        x = torch.randn(3)
        o, oe = torch.empty(3), torch.empty(3)
        got = call_split(jf, x, o, match="out=")
        want = f(x, oe)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(o, oe)


def test_out_argument_of_a_buffer_the_program_reads_back():
    buf = torch.zeros(3)

    def f(x):
        torch.add(x, 1, out=buf)
        return buf.sum() + x

    jf = thunder.jit(f)
    for _ in range(2):
        x = torch.randn(3)
        got = call_split(jf, x, match="out=")
        torch.testing.assert_close(buf, x + 1)
        torch.testing.assert_close(got, (x + 1).sum() + x)


def test_the_version_counter_is_read_on_every_call():
    def f(x):
        return x * x._version

    jf = thunder.jit(f)
    x = torch.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(3):
            torch.testing.assert_close(jf(x), f(x))
            x.add_(1)


def _no_internal_error(caught) -> None:
    assert not [w for w in caught if "please report" in str(w.message)], [
        str(w.message) for w in caught
    ]


def test_setting_tensor_data_runs_through_torch():
    def g(x):
        x.data = x.data * 2
        return x + 1

    jg = thunder.jit(g)
    a, b = torch.arange(3.0), torch.arange(3.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = jg(a)
    _no_internal_error(caught)
    torch.testing.assert_close(got, g(b))
    torch.testing.assert_close(a, b)


def test_hook_on_an_input_scales_its_gradient():
    def g(x):
        x.register_hook(lambda grad: grad * 10)
        return x * 3

    for fn in (g, thunder.jit(g)):
        x = torch.ones(2, requires_grad=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn(x).sum().backward()
        _no_internal_error(caught)
        torch.testing.assert_close(x.grad, torch.full((2,), 30.0))
