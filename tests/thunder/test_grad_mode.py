"""Grad mode and inference mode entered inside a jitted function: the program's mode changes
(never the process's), and no gradient flows through what a no-grad region computes, as in
eager PyTorch. Each case compares outputs and every gradient with eager on fresh inputs."""

from __future__ import annotations

import pytest
import torch

import thunder


def _with_block(x, w):
    with torch.no_grad():
        s = (x * w).sum()
        frozen = x * 3
    assert not frozen.requires_grad and not s.requires_grad
    return x * w * s + frozen + float(torch.is_grad_enabled())


@torch.no_grad()
def _decorated(x):
    return x * 2


def _with_decorated(x, w):
    return _decorated(x * w) + x * w


def _set_grad_enabled(x, w):
    with torch.set_grad_enabled(False):
        a = x.exp() * w
    with torch.enable_grad():
        b = (x * w).sin()
    return a + b


def _nested(x, w):
    with torch.no_grad():
        a = x * w
        with torch.enable_grad():
            b = a * w  # a is constant; b depends on w
    return a + b


def _inference_block(x, w):
    with torch.inference_mode():
        a = x * w
        flag = torch.is_inference_mode_enabled()
    return x * w + a * 0.5 + float(flag)


def _rotary_like(x, w):
    """The pattern of rotary embeddings: frequencies computed under no_grad."""
    with torch.no_grad():
        freqs = torch.arange(x.shape[-1], dtype=x.dtype) * 0.1
        cos, sin = freqs.cos(), freqs.sin()
    return x * cos * w + x.flip(-1) * sin


@pytest.mark.parametrize(
    "fn",
    [_with_block, _with_decorated, _set_grad_enabled, _nested, _inference_block, _rotary_like],
)
def test_grad_regions_match_eager(fn):
    x, w = torch.randn(4), torch.randn(4)
    xs = [x.clone().requires_grad_(), w.clone().requires_grad_()]
    es = [x.clone().requires_grad_(), w.clone().requires_grad_()]
    got = thunder.jit(fn)(*xs)
    want = fn(*es)
    torch.testing.assert_close(got, want)
    assert got.requires_grad == want.requires_grad
    got.sum().backward()
    want.sum().backward()
    for g, e in zip(xs, es):
        torch.testing.assert_close(g.grad, e.grad)
    assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()


def test_enabling_grad_under_no_grad_runs_as_eager():
    """Was refused; the result now requires grad and carries eager's gradient (more cases in
    test_grad_mode_writes)."""

    def f(x):
        with torch.enable_grad():
            return x * 2

    x = torch.randn(2, requires_grad=True)
    with torch.no_grad():
        out = thunder.jit(f)(x)
    assert out.requires_grad
    out.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((2,), 2.0))


def test_tracing_never_leaves_process_state_changed():
    def f(x):
        with torch.inference_mode():
            y = x * 2
        return y + 1

    thunder.jit(f)(torch.ones(2))
    assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()


def test_writes_in_a_no_grad_region_carry_no_gradient():
    """A buffer written from a value that requires grad, inside no_grad: later reads of the
    buffer carry no gradient (eager writes the value without history)."""

    def f(x, w, buf):
        y = x * w
        with torch.no_grad():
            buf.copy_(y)
        return y + buf * w

    x, w = torch.randn(3), torch.randn(3)
    outs, grads = [], []
    for fn in (thunder.jit(f), f):
        ww = w.clone().requires_grad_()
        buf = torch.zeros(3)
        out = fn(x, ww, buf)
        out.sum().backward()
        outs.append((out, buf))
        grads.append(ww.grad)
    torch.testing.assert_close(outs[0][0], outs[1][0])
    torch.testing.assert_close(outs[0][1], outs[1][1])
    torch.testing.assert_close(grads[0], grads[1])


def test_a_no_grad_write_into_a_tensor_that_requires_grad_runs_as_eager():
    """Was refused; the parameter is written and keeps receiving its gradient, as in eager
    (more cases in test_grad_mode_writes)."""

    def make():
        w = torch.nn.Parameter(torch.ones(2))

        def f(x):
            with torch.no_grad():
                w.mul_(0.9)
            return x * w

        return w, f

    w_e, f_e = make()
    w_j, f_j = make()
    x = torch.tensor([1.0, 2.0])
    f_e(x).sum().backward()
    thunder.jit(f_j)(x).sum().backward()
    torch.testing.assert_close(w_j.detach(), w_e.detach())
    torch.testing.assert_close(w_j.grad, w_e.grad)


# -- calls made under no_grad ------------------------------------------------------------------
# A program compiled with grad mode off runs its ops below torch's autograd dispatch layer (see
# compile_entry._below_autograd). What that layer would still do with grad mode off (forward-mode
# tangents, torch.func transforms) must stay, and what the ops return must be eager's.


def _views_and_writes(x, w, buf):
    buf.add_(x.sum())
    y = (x * w).t()
    return y, x[1:], buf.view(-1)


def test_under_no_grad_results_are_ordinary_tensors_with_eagers_views_and_versions():
    x, w = torch.randn(3, 4), torch.randn(3, 4)
    results = []
    for fn in (thunder.jit(_views_and_writes), _views_and_writes):
        buf = torch.zeros(2, 2)
        with torch.no_grad():
            fn(x, w, buf)  # the first call compiles; the second runs the cached program
            before = buf._version
            out = fn(x, w, buf)
        results.append((out, buf, buf._version - before))
    (got, gbuf, gbumps), (want, ebuf, ebumps) = results
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(gbuf, ebuf)
    assert gbumps == ebumps > 0  # the in-place write bumps the buffer's version as eager's does
    for g, e in zip(got, want):
        assert g.stride() == e.stride() and g._is_view() == e._is_view()
        assert not g.requires_grad and not g.is_inference()
    assert got[1]._base is x and got[2]._base is gbuf
    # results are ordinary tensors: autograd can use them once grad mode is back on
    v = torch.randn(4, 3, requires_grad=True)
    (got[0] * v).sum().backward()
    torch.testing.assert_close(v.grad, want[0])


def test_under_no_grad_forward_mode_tangents_flow_as_in_eager():
    import torch.autograd.forward_ad as fwAD

    def f(x, w):
        return (x * w).sin().t() @ w

    jf = thunder.jit(f)
    x, w, tangent = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)
    with torch.no_grad():
        jf(x, w)  # compiled outside any dual level; the dual call runs eagerly (forward AD)
        with fwAD.dual_level():
            dual = fwAD.make_dual(x, tangent)
            got = fwAD.unpack_dual(jf(dual, w))
            want = fwAD.unpack_dual(f(dual, w))
    torch.testing.assert_close(got.primal, want.primal)
    assert got.tangent is not None
    torch.testing.assert_close(got.tangent, want.tangent)


def test_under_no_grad_a_torch_func_transform_of_the_program_matches_eager():
    def f(x, w):
        return (x * w).cos().sum(0)

    jf = thunder.jit(f)
    x, w = torch.randn(5, 3, 4), torch.randn(3, 4)
    with torch.no_grad():
        jf(x[0], w)
        got = torch.func.vmap(jf, in_dims=(0, None))(x, w)
        want = torch.func.vmap(f, in_dims=(0, None))(x, w)
        x0 = x[0]
        got_jvp = torch.func.jvp(lambda a: jf(a, w), (x0,), (torch.ones_like(x0),))
        want_jvp = torch.func.jvp(lambda a: f(a, w), (x0,), (torch.ones_like(x0),))
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got_jvp, want_jvp)


def _enables_grad(x, w):
    with torch.enable_grad():
        y = x * w
    return y, y.requires_grad, torch.is_grad_enabled()


def _enables_grad_inside_inference_mode(x, w):
    with torch.inference_mode():
        with torch.enable_grad():
            y = x * w
            on = torch.is_grad_enabled()
    return y * 2, y.requires_grad, on


@pytest.mark.parametrize("ambient", [True, False], ids=["called-under", "entered-inside"])
def test_enable_grad_under_inference_mode_records_no_gradient(ambient):
    """Under inference mode, enable_grad() changes what torch.is_grad_enabled() answers, but
    nothing the block computes gets a gradient history (eager's tensors there are inference
    tensors)."""
    f = _enables_grad if ambient else _enables_grad_inside_inference_mode
    jf = thunder.jit(f)
    w = torch.randn(3, requires_grad=True)
    for _ in range(3):
        x = torch.randn(3)
        with torch.inference_mode() if ambient else torch.enable_grad():
            got, want = jf(x, w), f(x, w)
        assert got[1:] == want[1:]
        assert got[0].requires_grad == want[0].requires_grad
        torch.testing.assert_close(got[0], want[0])
