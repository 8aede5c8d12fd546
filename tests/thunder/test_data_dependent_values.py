"""Python values read from tensor data (``t.item()``, ``bool(t)``, ``int(t)``, ``float(t)``):
compiled, checked on every call inside the computation, equal to eager on fresh data whose
decisions change from call to call, forward and gradients, for both caches."""

from __future__ import annotations

import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import thunder

CACHES = ["constant values", "symbolic values"]


def _fresh(args: tuple, grad: bool) -> tuple:
    return tuple(
        a.detach().clone().requires_grad_(grad and a.is_floating_point())
        if isinstance(a, torch.Tensor)
        else a
        for a in args
    )


def _matches_eager(fn, calls, cache="constant values", grad=False):
    """Runs ``thunder.jit(fn)`` and ``fn`` on each argument tuple of ``calls`` (fresh copies):
    results, gradients and the arguments afterwards equal; no call ran eagerly."""
    jf = thunder.jit(fn, cache=cache)
    for args in calls:
        ours, theirs = _fresh(args, grad), _fresh(args, grad)
        got, want = jf(*ours), fn(*theirs)
        torch.testing.assert_close(got, want)
        for a, b in zip(ours, theirs):
            if isinstance(a, torch.Tensor):
                torch.testing.assert_close(a.detach(), b.detach())
        if grad:
            got.sum().backward()
            want.sum().backward()
            for a, b in zip(ours, theirs):
                if isinstance(a, torch.Tensor) and a.requires_grad:
                    torch.testing.assert_close(a.grad, b.grad)
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0, stats.last_eager_reason
    return jf


def _sign_branch(x):
    if x.sum() > 0:
        return x * 2
    return x.exp() - 1


def _item_arithmetic(x):
    m = x.max().item()
    return x * m + m / 2


def _sliding_window(k, pos):
    max_pos = pos.max().item()
    if max_pos < 4:
        k = k[:, : max_pos + 1]
    return k.sum(1)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("grad", [False, True])
def test_branch_on_data_takes_eagers_path_every_call(cache, grad):
    g = torch.Generator().manual_seed(0)
    calls = [(torch.randn(5, generator=g),) for _ in range(8)]
    jf = _matches_eager(_sign_branch, calls, cache, grad)
    # one program per outcome, however often the outcome changes
    assert thunder.compile_stats(jf).compilations == 2


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("grad", [False, True])
def test_item_in_arithmetic_stays_symbolic(cache, grad):
    g = torch.Generator().manual_seed(1)
    calls = [(torch.randn(4, 3, generator=g),) for _ in range(5)]
    jf = _matches_eager(_item_arithmetic, calls, cache, grad)
    assert thunder.compile_stats(jf).compilations == 1
    source = str(thunder.last_traces(jf)[-1])
    assert "prims.item(" in source
    prologue = str(thunder.compile_stats(jf).last_prologue_traces[-1])
    assert "item" not in prologue  # never a guard: the prologue cannot read it


def _int_and_float_of_data(x, t, n):
    k = int(n)  # an integer tensor: a size
    scale = float(t) + int(t)  # a float tensor: int() truncates toward zero, as eager's
    return x[:k] * scale + torch.zeros(k).sum() + float(n) / 3


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("grad", [False, True])
def test_int_and_float_of_a_tensor_stay_symbolic_like_item(cache, grad):
    g = torch.Generator().manual_seed(2)
    calls = [
        (torch.randn(8, generator=g), torch.randn((), generator=g) * 3, torch.tensor(k))
        for k in (2, 5, 7, 1, 8)
    ]
    jf = _matches_eager(_int_and_float_of_data, calls, cache, grad)
    # one program for every value read (int() of a read value was fixed to it by a check)
    assert thunder.compile_stats(jf).compilations == 1


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_int_of_a_value_python_cannot_convert_raises_as_eager(value):
    def fn(x, t):
        return x * int(t)

    args = (torch.ones(2), torch.tensor(value))
    with pytest.raises((ValueError, OverflowError)) as want:
        fn(*args)
    with pytest.raises(want.type, match=str(want.value)):
        thunder.jit(fn)(*args)


def test_slice_bound_read_from_data_one_program_per_branch():
    k = torch.randn(2, 8)
    calls = [(k, torch.tensor([p, p // 2])) for p in range(8)]
    jf = _matches_eager(_sliding_window, calls)
    assert thunder.compile_stats(jf).compilations == 2


def test_loop_on_data_and_integer_index():
    def halve_until_small(x):
        while x.abs().max() > 1:
            x = x / 2
        return x

    def pick(x, i):
        return x[int(i)] * float(i + 1)

    g = torch.Generator().manual_seed(2)
    _matches_eager(halve_until_small, [(torch.randn(4, generator=g) * 3,) for _ in range(5)])
    _matches_eager(pick, [(torch.randn(3, 2), torch.tensor(i % 3)) for i in range(5)])


def test_a_write_after_the_decision_runs_once_per_call():
    def read_then_write(x, buf):
        m = x.sum().item()
        buf.add_(x)
        if m > 0:
            return buf * 2
        return buf - 1

    g = torch.Generator().manual_seed(3)
    calls = [(torch.randn(3, generator=g), torch.zeros(3)) for _ in range(6)]
    _matches_eager(read_then_write, calls)  # compares buf after each call


def _draws_as_eager(fn, seed: int, calls: int = 6):
    """``thunder.jit(fn)`` on fresh inputs, each call from its own seed: results and the
    generator's state afterwards as eager's; returns the jitted function."""
    jf = thunder.jit(fn)
    g = torch.Generator().manual_seed(seed)
    for s in range(calls):
        x = torch.randn(3, generator=g)
        torch.manual_seed(s)
        got, after = jf(x), torch.rand(2)
        torch.manual_seed(s)
        want, want_after = fn(x), torch.rand(2)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(after, want_after)  # the generator advanced as eager's
    assert thunder.compile_stats(jf).eager_fallbacks == 0
    return jf


def test_random_after_the_decision_draws_as_eager():
    def read_then_draw(x):
        m = x.sum().item()
        noise = torch.rand(3)
        return x * noise if m > 0 else x - noise

    _draws_as_eager(read_then_draw, seed=4)


def _decide_after_writing_the_input(x):
    x.add_(1)
    return x * 2 if x.sum() > 0 else x - 1


def test_reads_of_memory_written_before():
    def write_then_read(x, scale):
        y = x * 2
        y.add_(scale)  # into memory the program made
        x.mul_(scale)  # into the caller's tensor
        return y * y.sum().item() + x.max().item()

    g = torch.Generator().manual_seed(6)
    calls = [(torch.randn(4, generator=g), torch.randn(4, generator=g)) for _ in range(4)]
    jf = _matches_eager(write_then_read, calls)  # the caller's x written once per call
    assert thunder.compile_stats(jf).compilations == 1


def _decide_after_writing_through_a_view(x, buf):
    buf[1:].add_(x[1:])
    if buf.sum() > 0:
        return buf  # the written input itself
    return buf[:2] * x[:2]


def _decide_twice_between_writes(x, buf):
    buf.mul_(x)
    y = buf * 3 if buf.max() > 0.5 else buf + 1
    buf.sub_(y.mean().item())
    return y * x if bool(buf.min() < 0) else y


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, buf: _decide_after_writing_the_input(buf) * x,
        _decide_after_writing_through_a_view,
        _decide_twice_between_writes,
    ],
)
def test_decisions_after_writes_into_inputs_write_them_after_the_last_check(fn):
    g = torch.Generator().manual_seed(11)
    calls = [(torch.randn(4, generator=g), torch.randn(4, generator=g) - 1) for _ in range(8)]
    jf = _matches_eager(fn, calls)  # each input written once per call, as eager writes it
    body = thunder.last_traces(jf)[0].bound_symbols
    names = [b.sym.name for b in body]
    last_check = max(i for i, n in enumerate(names) if n == "check_data")
    assert "copy_" in names[last_check:] and "copy_" not in names[:last_check]


def test_a_module_buffer_counted_before_a_decision():
    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", torch.zeros(()))

        def forward(self, x):
            self.seen += (x > 0).sum()
            return x * 2 if self.seen > 6 else x - 1

    eager, jm = Counting(), thunder.jit(Counting())
    g = torch.Generator().manual_seed(2)
    for _ in range(6):
        x = torch.randn(3, generator=g)
        torch.testing.assert_close(jm(x), eager(x))
        torch.testing.assert_close(jm.seen, eager.seen)
    assert thunder.compile_stats(jm).eager_fallbacks == 0


def _decide_after_writing_a_shared_input(a, b):
    a.add_(1)
    return b * 2 if b.sum() > 0 else b - 1


def test_reads_tracing_cannot_repeat_run_eagerly_with_the_reason():
    fn, reason = _decide_after_writing_a_shared_input, "share memory"
    jf = thunder.jit(fn)
    x = torch.randn(3)
    ours, theirs = x.clone(), x.clone()
    with pytest.warns(UserWarning, match=reason):
        got = jf(ours, ours[1:])
    torch.testing.assert_close(got, fn(theirs, theirs[1:]))
    torch.testing.assert_close(ours, theirs)
    assert reason in thunder.compile_stats(jf).last_eager_reason


def test_recompile_says_the_data_decision_changed():
    jf = thunder.jit(_sign_branch)
    jf(torch.ones(3))
    jf(-torch.ones(3))
    reason = thunder.compile_stats(jf).last_recompile_reason
    assert reason is not None and "tensor data" in reason


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-3, 3, allow_nan=False), min_size=1, max_size=6), st.integers(0, 99))
def test_decisions_on_data_match_eager_on_any_sequence_of_calls(offsets, seed):
    """Whatever order the outcomes come in, each call takes eager's path: programs compiled for
    other outcomes never answer it."""

    def f(x, t):
        s = (x.sum() + t).item()
        if s > 1:
            y = x * s
        elif s > -1:
            y = x - s
        else:
            y = x.abs()
        return y.sum(0) if bool(y.mean() > 0) else y.mean(0)

    g = torch.Generator().manual_seed(seed)
    calls = [(torch.randn(3, 2, generator=g), torch.tensor(o)) for o in offsets]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager run, no recompile-limit warning
        _matches_eager(f, calls)


def test_equal_allclose_and_tolist_are_read_from_data():
    def f(a, b):
        if torch.equal(a, b):
            return a + 1
        if torch.allclose(a, b, atol=0.5):
            return a * b
        return a - sum(b.tolist())

    def pick(x, idx):
        return x[idx.tolist()]

    g = torch.Generator().manual_seed(5)
    calls = []
    for k in range(6):
        a = torch.randn(3, generator=g)
        b = (a.clone(), a + 0.1, torch.randn(3, generator=g))[k % 3]
        calls.append((a, b))
    jf = _matches_eager(f, calls)
    assert thunder.compile_stats(jf).compilations == 3  # one per outcome
    _matches_eager(pick, [(torch.randn(4, 2), torch.tensor([i % 4, 1])) for i in range(4)])


def test_isclose_is_torchs_rule():
    a = torch.tensor([1.0, float("nan"), float("inf"), 2.0, -float("inf"), 0.0])
    b = torch.tensor([1.05, float("nan"), float("inf"), 3.0, float("inf"), 1e-9])
    for kwargs in ({}, {"rtol": 0.1}, {"equal_nan": True}, {"atol": 1e-8, "rtol": 0.0}):
        jf = thunder.jit(lambda a, b, kwargs=kwargs: torch.isclose(a, b, **kwargs))
        torch.testing.assert_close(jf(a, b), torch.isclose(a, b, **kwargs))


def test_reads_under_autocast_and_inside_an_autocast_region():
    def region(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
        return y.float() * 2 if y.float().sum() > 0 else y.float() - 1

    def ambient(x, w):
        return (x @ w) * (x @ w).sum().item()

    g = torch.Generator().manual_seed(7)
    calls = [(torch.randn(8, 8, generator=g), torch.randn(8, 8, generator=g)) for _ in range(4)]
    _matches_eager(region, calls)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _matches_eager(ambient, calls)


def test_values_of_random_draws_read_as_the_program_draws_them():
    def f(x):
        noise = torch.rand(3)
        return x * noise.sum().item() + torch.randn(3)

    _draws_as_eager(f, seed=8, calls=4)


def test_decisions_after_random_draws_put_the_generator_back():
    """A check that fails after draws puts the generator's state back before the next program
    runs: the numbers and the generator afterwards are eager's, whichever program answers."""

    def f(x):
        y = x + torch.rand(3)
        if y.sum() > 1.5:
            return y * 2 + torch.rand(3)
        return y - torch.randn(3)

    jf = _draws_as_eager(f, seed=9, calls=8)
    assert thunder.compile_stats(jf).compilations == 2


def test_reads_of_tensors_with_symbolic_sizes():
    # the fuzzer's case: a global set from float() of a tensor whose size is symbolic
    def f(x, t):
        y = x + t.sum()
        try:
            scale = float(y.sum())
        except Exception:
            scale = -1.0
        return y * scale

    g = torch.Generator().manual_seed(10)
    calls = [(torch.randn(n, generator=g), torch.arange(3.0)) for n in (2, 3, 5, 2)]
    _matches_eager(f, calls, cache="symbolic values")  # float() is a value: one program each


def test_a_read_that_fails_is_never_caught_by_the_program(monkeypatch):
    """Whatever goes wrong while tracing reads data, the program's own except clause must not
    see it (it would take a path eager does not): the call runs eagerly."""
    from thunder.binding.data_reads import TensorDataReader

    def broken(self, t):
        raise RuntimeError("broken read")

    monkeypatch.setattr(TensorDataReader, "_read", broken)

    def f(x):
        try:
            return x * float(x.sum())
        except Exception:
            return x - 100

    x = torch.randn(3)
    with pytest.warns(UserWarning, match="broken read"):
        torch.testing.assert_close(thunder.jit(f)(x), f(x))


def test_examine_and_the_statistics_say_where_data_is_read_and_decided():
    x, pos = torch.randn(2, 8), torch.tensor([1, 2])
    report = thunder.examine(_sliding_window, x, pos, show=False)
    here = f"{__file__}:"
    assert any(here in r and "read from tensor data (item)" in r for r in report.data_reads)
    assert any(here in r and "decides (i0 < " in r for r in report.data_reads)
    assert report.eager_reason is None
    jf = thunder.jit(_sliding_window)
    jf(x, pos)
    assert thunder.compile_stats(jf).last_data_reads == report.data_reads


def test_examine_says_when_a_call_runs_split_and_where():
    # A function run natively no longer makes the whole call eager: the call runs split by
    # torch.compile, and examine says so, with the line.
    @torch.compiler.disable
    def helper(x):
        return x.numpy().sum()

    def f(x):
        return x * helper(x)

    report = thunder.examine(f, torch.randn(3), show=False)
    assert report.eager_reason is None
    assert "torch.compiler.disable" in report.split_reason
    assert f"{__file__}:" in report.split_reason
    assert "SPLIT" in str(report)


def test_examine_says_when_a_call_runs_eagerly_and_where():
    def f(x):
        x.sum().backward()  # differentiating inside the program: the call runs eagerly
        return x * 2

    report = thunder.examine(f, torch.randn(3, requires_grad=True), show=False)
    assert "torch.autograd.backward" in report.eager_reason
    assert f"{__file__}:" in report.eager_reason
    assert "EAGERLY" in str(report)


def test_a_decision_that_does_not_read_the_written_memory_moves_before_the_write():
    def decode_step(k, cache, pos):
        cache.index_copy_(0, pos, k)  # a KV-cache write, then a decision on the position
        n = pos.max().item()
        return cache[: n + 1].sum(0) if n < 5 else cache.mean(0)

    cache = torch.zeros(8, 3)
    calls = [(torch.randn(1, 3), cache, torch.tensor([i])) for i in range(8)]
    jf = thunder.jit(decode_step)
    want_cache = cache.clone()
    for k, c, pos in calls:
        torch.testing.assert_close(jf(k, c, pos), decode_step(k, want_cache, pos))
        torch.testing.assert_close(c, want_cache)
    assert thunder.compile_stats(jf).eager_fallbacks == 0
    names = [b.sym.name for b in thunder.last_traces(jf)[0].bound_symbols]
    # the write stays in place (no copy of the whole cache), after the decision
    assert "copy_" not in names
    assert max(i for i, n in enumerate(names) if n == "check_data") < names.index("index_copy_")


_STEPS = ("write_buf", "write_buf_view", "write_out", "decide_x", "decide_buf", "read_into_y")


def _program_of(steps):
    """A program of ``steps``: writes into the input ``buf`` (whole or through a view), into
    memory of its own, reads of data (of ``x``, which is never written, or of ``buf``) and
    decisions on them, in any order."""

    def f(x, buf):
        y = x * 1.5
        for step in steps:
            if step == "write_buf":
                buf.mul_(0.5).add_(x)
            elif step == "write_buf_view":
                buf[1:].sub_(y[1:])
            elif step == "write_out":
                y.add_(buf)
            elif step == "decide_x":
                y = y * 2 if x.sum() > 0 else y - 1
            elif step == "decide_buf":
                y = y + buf if buf.max() > 0.5 else y * buf
            else:
                y = y * buf.sum().item()
        return y

    return f


@settings(deadline=None, max_examples=30)
@given(steps=st.lists(st.sampled_from(_STEPS), min_size=1, max_size=6), seed=st.integers(0, 99))
def test_writes_and_decisions_in_any_order_match_eager(steps, seed):
    g = torch.Generator().manual_seed(seed)
    calls = [(torch.randn(4, generator=g), torch.randn(4, generator=g)) for _ in range(4)]
    _matches_eager(_program_of(steps), calls)  # results and buf after each call


def test_decisions_comparing_data_with_symbolic_sizes_and_numbers():
    # cache="symbolic values": the sizes and numbers passed in are symbols of the program; a
    # decision comparing a value read from data with them is checked with their values.
    def window(k, pos, limit):
        m = pos.max().item()
        if m < k.shape[1] and m < limit:
            k = k[:, : m + 1]
        return k.sum(1)

    jf = thunder.jit(window, cache="symbolic values")
    g = torch.Generator().manual_seed(8)
    for n in (6, 9, 12):
        for p, limit in ((2, 5), (7, 5), (7, 20), (13, 20)):
            k = torch.randn(2, n, generator=g)
            pos = torch.tensor([p, p // 2])
            torch.testing.assert_close(jf(k, pos, limit), window(k, pos, limit))
    stats = thunder.compile_stats(jf)
    assert stats.eager_fallbacks == 0, stats.last_eager_reason
    assert stats.compilations <= 3  # one per outcome of the decisions, whatever the sizes
