"""Thunder's own segments around a function run natively (the default;
``THUNDER_OWN_SEGMENTS=0`` switches them off): the program up to the native call compiled, the native call on real values, the
continuation compiled with its guards after the native call. Equal to eager, values and
gradients, on fresh random inputs over several calls; the split runs as thunder's segments
(``split_graphs`` lists them), not through torch.compile."""

from __future__ import annotations

import collections
import warnings

import pytest
import torch

import thunder


@pytest.fixture(autouse=True)
def _own_segments(monkeypatch):
    monkeypatch.setenv("THUNDER_OWN_SEGMENTS", "1")


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args, **kwargs)


def _is_segment(program):
    return type(program).__name__ == "SegmentProgram"  # (thunder.own_segments)


def _ran_as_segments(jitted, continuations=1):
    stats = thunder.compile_stats(jitted)
    kinds = [getattr(g, "kind", None) for g in stats.split_graphs]
    assert all(_is_segment(g) for g in stats.split_graphs), kinds
    assert kinds.count("first segment") == 1, kinds
    assert kinds.count("continuation") >= continuations, kinds
    assert f"{__file__}:" in stats.last_split_reason


def _check_grads(got, want, got_leaves, want_leaves):
    torch.testing.assert_close(got, want)
    g = torch.randn_like(want)
    gg = torch.autograd.grad(got, got_leaves, g)
    wg = torch.autograd.grad(want, want_leaves, g)
    for a, b in zip(gg, wg):
        torch.testing.assert_close(a, b)


class _Counted(torch.nn.Module):
    def __init__(self, calls):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("seen", torch.zeros(4))
        self.scale = 1.0
        self.calls = calls

    @thunder.run_natively
    def observe(self, h):
        self.calls.append(1)
        self.scale = float(h.detach().abs().mean()) + 0.5
        self.seen.add_(h.detach().sum(0))
        return h.detach().max().item()

    def forward(self, x):
        h = torch.tanh(self.lin(x))
        peak = self.observe(h)
        return h * self.scale + self.seen * peak


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_outside_state_the_native_function_writes_is_seen_by_the_continuation(cache):
    eager_calls, jit_calls = [], []
    eager = _Counted(eager_calls)
    model = _Counted(jit_calls)
    model.load_state_dict(eager.state_dict())
    jm = thunder.jit(model, cache=cache)
    for _ in range(4):
        x = torch.randn(3, 4)
        xe, xj = x.clone().requires_grad_(), x.clone().requires_grad_()
        want, got = eager(xe), _quiet(jm, xj)
        _check_grads(got, want, (xj, model.lin.weight), (xe, eager.lin.weight))
        torch.testing.assert_close(model.seen, eager.seen)
        assert model.scale == eager.scale
        assert len(jit_calls) == len(eager_calls)  # the native function once per call
    assert thunder.compile_stats(jm).split_calls == 4
    _ran_as_segments(jm)


@thunder.run_natively
def _clamp_to_median(y):
    return y.clamp(max=float(y.detach().median()))


def _inner(y, w):
    z = torch.relu(y @ w)
    c = _clamp_to_median(z)
    return c * 2 + z


def _middle(x, w):
    t = torch.sin(x)
    return t + _inner(t, w).cos()


def _outer(x, w, b):
    return _middle(x, w) * b + x


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_native_call_in_nested_functions(cache):
    jf = thunder.jit(_outer, cache=cache)
    for _ in range(3):
        x, w, b = (torch.randn(3, 3, requires_grad=True) for _ in range(3))
        got = _quiet(jf, x, w, b)
        want = _outer(x, w, b)
        _check_grads(got, want, (x, w, b), (x, w, b))
    _ran_as_segments(jf)


@thunder.run_natively
def _normalize(x):
    return x / x.detach().abs().max()


def _loop(x, ws):
    for i in range(3):
        x = _normalize(torch.tanh(x * (i + 1)))
    for w in ws:
        x = _normalize(x @ w) + x
    return x


def test_native_calls_in_loops():
    jf = thunder.jit(_loop)
    for _ in range(3):
        x = torch.randn(2, 3, requires_grad=True)
        ws = [torch.randn(3, 3, requires_grad=True) for _ in range(2)]
        got = _quiet(jf, x, ws)
        want = _loop(x, ws)
        _check_grads(got, want, (x, *ws), (x, *ws))
    _ran_as_segments(jf, continuations=5)


class _Switch:
    flag = False


_switch = _Switch()


@thunder.run_natively
def _toggle(x):
    _switch.flag = not _switch.flag
    return x.detach().sum().item()


def _branches_after_native(x):
    y = x.exp()
    s = _toggle(y)
    if _switch.flag:  # decided by what the native call did: a guard of the continuation
        return y * s
    return y - s


def test_a_guard_miss_in_the_continuation_follows_the_native_calls_effect():
    jf = thunder.jit(_branches_after_native, cache="symbolic values")
    results = []
    for _ in range(4):
        x = torch.randn(3, requires_grad=True)
        _switch.flag = False
        want = _branches_after_native(x)
        _switch.flag = False
        got = _quiet(jf, x)
        _check_grads(got, want, (x,), (x,))
        results.append(_switch.flag)
    _ran_as_segments(jf)
    _switch.flag = True  # the native call turns it off: the other branch
    x = torch.randn(3)
    got = _quiet(jf, x)
    _switch.flag = True
    torch.testing.assert_close(got, _branches_after_native(x))
    stats = thunder.compile_stats(jf)
    continuation = next(g for g in stats.split_graphs if g.kind == "continuation")
    assert thunder.compile_stats(continuation.jitted).compilations == 2


@thunder.run_natively
def _shift(x, by):
    return x + by.detach().mean()


def _two_native_calls(x, w):
    a = torch.tanh(x @ w)
    b = _shift(a, x)
    c = b.sigmoid() * a
    d = _shift(c, b)
    return d * x + c


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_two_native_calls(cache):
    jf = thunder.jit(_two_native_calls, cache=cache)
    for _ in range(3):
        x = torch.randn(4, 4, requires_grad=True)
        w = torch.randn(4, 4, requires_grad=True)
        got = _quiet(jf, x, w)
        want = _two_native_calls(x, w)
        _check_grads(got, want, (x, w), (x, w))
    _ran_as_segments(jf, continuations=2)


@thunder.run_natively
def _refuse_negative(x):
    if float(x.detach().sum()) < 0:
        raise ValueError("negative")
    return x * 1


def _catches_the_native_error(x):
    y = x * 3
    try:
        z = _refuse_negative(y)
    except ValueError:
        z = -y
    return z.square()


def test_an_error_of_the_native_call_reaches_the_programs_handler():
    jf = thunder.jit(_catches_the_native_error)
    for sign in (1, -1, 1, -1):
        x = (torch.rand(3) + 0.1) * sign
        x.requires_grad_()
        got = _quiet(jf, x)
        want = _catches_the_native_error(x)
        _check_grads(got, want, (x,), (x,))
    _ran_as_segments(jf)


@thunder.run_natively
def _scale_in_place(t):
    t.mul_(2)
    return None


def _reads_after_an_in_place_native_write(x, buf):
    y = x + buf
    _scale_in_place(buf)
    return y * buf


def test_a_tensor_the_native_call_writes_in_place_is_read_after_it():
    jf = thunder.jit(_reads_after_an_in_place_native_write)
    buf_j, buf_e = torch.ones(3), torch.ones(3)
    for _ in range(3):
        x = torch.randn(3, requires_grad=True)
        got = _quiet(jf, x, buf_j)
        want = _reads_after_an_in_place_native_write(x, buf_e)
        _check_grads(got, want, (x,), (x,))
        torch.testing.assert_close(buf_j, buf_e)
    _ran_as_segments(jf)


def test_a_closure_reading_outside_cells_runs_as_segments():
    scale = torch.tensor(3.0)
    offsets = [1.0]

    def closure(x):
        y = _normalize(x * scale) + scale
        return y * offsets[0]

    jf = thunder.jit(closure)
    for i in range(3):
        x = torch.randn(4, requires_grad=True)
        offsets[0] = float(i)  # read after the native call: guarded by the continuation
        _check_grads(_quiet(jf, x), closure(x), (x,), (x,))
    _ran_as_segments(jf)


def test_what_the_segments_refuse_runs_split_by_torch_compile():
    def over_a_dict(x, d):  # an OrderedDict's iterator at the native call: torch.compile runs it
        for k in d:
            x = _normalize(x * d[k])
        return x

    jf = thunder.jit(over_a_dict)
    for _ in range(2):
        x = torch.randn(4)
        d = collections.OrderedDict(a=2.0, b=3.0)
        torch.testing.assert_close(_quiet(jf, x, d), over_a_dict(x, d))
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 2
    assert not any(_is_segment(g) for g in stats.split_graphs)


def _native_under_no_grad(x, w):
    y = x @ w
    with torch.no_grad():  # the native call runs under no_grad, as in eager
        z = _normalize(y)
    return y * z


def _native_after_set_grad_enabled(x):
    y = x.exp()
    torch.set_grad_enabled(False)
    try:
        z = _normalize(y)
    finally:
        torch.set_grad_enabled(True)
    return y * z


def test_grad_mode_around_the_native_call_is_eagers():
    jf = thunder.jit(_native_under_no_grad)
    jg = thunder.jit(_native_after_set_grad_enabled)
    for _ in range(2):
        x = torch.randn(3, 3, requires_grad=True)
        w = torch.randn(3, 3, requires_grad=True)
        _check_grads(_quiet(jf, x, w), _native_under_no_grad(x, w), (x, w), (x, w))
        _check_grads(_quiet(jg, x), _native_after_set_grad_enabled(x), (x,), (x,))


def _closure_made_before_the_native_call(x):
    y = x * 2
    g = lambda: y  # noqa: E731  (holds the frame's cell of y across the native call)
    z = _normalize(x)
    return z + g()


def _closure_made_after_the_native_call(x):
    y = x * 2
    z = _normalize(x)
    g = lambda: y  # noqa: E731
    return z + g()


def test_a_cell_a_closure_holds_at_the_native_call_is_not_made_again():
    # Made again for the continuation, the cell would no longer be the closure's: the call runs
    # split by torch.compile. A closure made after the native call is the continuation's own.
    for fn, segments in (
        (_closure_made_before_the_native_call, False),
        (_closure_made_after_the_native_call, True),
    ):
        jf = thunder.jit(fn)
        for _ in range(2):
            x = torch.randn(4, requires_grad=True)
            _check_grads(_quiet(jf, x), fn(x), (x,), (x,))
        graphs = thunder.compile_stats(jf).split_graphs
        assert graphs and all(_is_segment(g) == segments for g in graphs), graphs
