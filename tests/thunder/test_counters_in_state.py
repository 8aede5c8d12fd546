"""Numbers read from outside state that change on every call (a step counter on a module, a
global, a dict item, a closure cell): after their value guard fails once they are symbolic
inputs of the program, so a few programs serve every call, each result as eager's."""

import copy

import pytest
import torch
import torch.nn as nn

import thunder

CACHES = [{}, {"cache": "symbolic values"}]


def _symbolic(options) -> bool:
    """Under cache="symbolic values" the program's own reads are symbolic from the first call;
    under the default cache once their value changed (one program more per changing number)."""
    return bool(options)


CALLS = 12  # more than the recompile limit (8)


def _jit(fn, options):
    return thunder.jit(fn, **options)


class Counting(nn.Module):
    def __init__(self, branch: bool = False) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.step = 0
        self.total = 0.0
        self.stats = {"n": 0, "sum": 0.0, "name": "s"}
        self.branch = branch

    def forward(self, x):
        self.step += 1
        self.stats["n"] += 1
        self.stats["sum"] += 0.5
        h = self.lin(x) * (self.step / 10)
        if self.branch and self.step <= 2:
            h = h * 0.5
        self.total += 0.25
        return h + self.total


@pytest.mark.parametrize("options", CACHES)
@pytest.mark.parametrize("branch", [False, True])
def test_module_counters_training(options, branch):
    torch.manual_seed(0)
    m1 = Counting(branch)
    m2 = copy.deepcopy(m1)
    jm = _jit(m2, options)
    for _ in range(CALLS):
        x = torch.randn(5, 4)
        l1, l2 = m1(x).square().mean(), jm(x).square().mean()
        torch.testing.assert_close(l2, l1)
        l1.backward()
        l2.backward()
        for p, q in zip(m1.parameters(), m2.parameters()):
            torch.testing.assert_close(q.grad, p.grad)
            with torch.no_grad():
                p -= 0.1 * p.grad
                q -= 0.1 * q.grad
            p.grad = q.grad = None
        assert (m2.step, m2.total, m2.stats) == (m1.step, m1.total, m1.stats)
    # default: one program more per number that changes; then one per side of the branch
    changing = 0 if _symbolic(options) else 4  # step, stats["n"], stats["sum"], total
    assert thunder.cache_misses(jm) <= 1 + changing + branch
    assert thunder.compile_stats(jm).eager_fallbacks == 0


COUNTER = 0


def count_global(x):
    global COUNTER
    COUNTER += 1
    return x * COUNTER


@pytest.mark.parametrize("options", CACHES)
def test_global_counter(options):
    global COUNTER
    jf = _jit(count_global, options)
    for _ in range(CALLS):
        x = torch.randn(3)
        before = COUNTER
        expected = x * (before + 1)
        torch.testing.assert_close(jf(x), expected)
        assert before + 1 == COUNTER
    assert thunder.cache_misses(jf) == (1 if _symbolic(options) else 2)


def make_closure():
    calls = 0
    scale = 1.5

    def f(x):
        nonlocal calls, scale
        calls += 1
        scale = scale * 0.5
        return x * calls + scale

    return f


@pytest.mark.parametrize("options", CACHES)
def test_closure_counter(options):
    f_eager, f_jit = make_closure(), make_closure()
    jf = _jit(f_jit, options)
    for _ in range(CALLS):
        x = torch.randn(3)
        torch.testing.assert_close(jf(x), f_eager(x))
    assert f_jit.__closure__[0].cell_contents == f_eager.__closure__[0].cell_contents
    assert thunder.cache_misses(jf) == (1 if _symbolic(options) else 3)


STATS = {"n": 0}


def count_in_dict(x):
    STATS["n"] += 1
    return x + STATS["n"]


@pytest.mark.parametrize("options", CACHES)
def test_global_dict_counter(options):
    jf = _jit(count_in_dict, options)
    for _ in range(CALLS):
        x = torch.randn(3)
        expected = x + (STATS["n"] + 1)
        torch.testing.assert_close(jf(x), expected)
    assert thunder.cache_misses(jf) == (1 if _symbolic(options) else 2)


class Warmup(nn.Module):
    """Python control flow on the counter: each call takes the branch eager takes."""

    def __init__(self) -> None:
        super().__init__()
        self.step = 0
        self.factors = [1.0, 2.0]

    def forward(self, x):
        self.step += 1
        if self.step <= 3:
            x = x * 0
        for _ in range(self.step % 2):
            x = x + 1
        return x * self.factors[self.step % 2] + self.step


@pytest.mark.parametrize("options", CACHES)
def test_branches_on_counter(options):
    m1 = Warmup()
    m2 = copy.deepcopy(m1)
    jm = _jit(m2, options)
    for _ in range(CALLS):
        x = torch.randn(3)
        torch.testing.assert_close(jm(x), m1(x))
        assert m2.step == m1.step
    # one program per side of the decisions (step <= 3, step % 2), and under the default cache
    # the first one with constants
    assert thunder.cache_misses(jm) <= (4 if _symbolic(options) else 5)
    assert thunder.compile_stats(jm).eager_fallbacks == 0


class Flag(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.flag = False

    def forward(self, x):
        self.flag = not self.flag
        return x * 2 if self.flag else x - 1


@pytest.mark.parametrize("options", CACHES)
def test_bool_stays_constant(options):
    m1 = Flag()
    m2 = copy.deepcopy(m1)
    jm = _jit(m2, options)
    for _ in range(CALLS):
        x = torch.randn(3)
        torch.testing.assert_close(jm(x), m1(x))
    assert thunder.cache_misses(jm) == 2


def test_float_accumulator_from_loss():
    """``self.total += loss.item()``-style: a float written from outside the program each call."""
    m1 = Counting()
    m2 = copy.deepcopy(m1)
    jm = thunder.jit(m2)
    for i in range(CALLS):
        x = torch.randn(5, 4)
        m1.total = m2.total = float(i) * 0.37
        torch.testing.assert_close(jm(x), m1(x))
        assert m2.total == m1.total
    assert thunder.cache_misses(jm) <= 5


def test_explicit_constant_values_keeps_guards():
    """``cache="constant values"`` asked for constants: a changing counter recompiles."""
    m = Counting()
    jm = thunder.jit(m, cache="constant values")
    for _ in range(3):
        jm(torch.randn(5, 4))
    assert thunder.cache_misses(jm) == 3


class Config(nn.Module):
    """Library code's reads (nn.LayerNorm's ``eps``) stay constants under symbolic values."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(4)
        self.heads = 2
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        h = self.norm(x).view(x.shape[0], self.heads, -1)
        return h.sum(-1) * self.calls


@pytest.mark.parametrize("options", CACHES)
def test_library_reads_stay_constant(options):
    m1 = Config()
    m2 = copy.deepcopy(m1)
    jm = _jit(m2, options)
    for i in range(CALLS):
        x = torch.randn(3 + i % 2, 4, requires_grad=True)
        x2 = x.detach().clone().requires_grad_()
        out1, out2 = m1(x), jm(x2)
        torch.testing.assert_close(out2, out1)
        out1.sum().backward()
        out2.sum().backward()
        torch.testing.assert_close(x2.grad, x.grad)
    prologue = thunder.compile_stats(jm).last_prologue_traces[-1].python()
    assert "eps" not in prologue.split("return")[-1]
    assert thunder.compile_stats(jm).eager_fallbacks == 0
    assert thunder.cache_misses(jm) <= 4


STEP_SIZE = 0.5


def moves_by_a_float_global(x):
    return x * STEP_SIZE


@pytest.mark.parametrize("options", CACHES)
def test_global_float_set_from_outside(options):
    """A schedule's value set between calls: one program serves its every value."""
    global STEP_SIZE
    jf = _jit(moves_by_a_float_global, options)
    try:
        for i in range(CALLS):
            STEP_SIZE = 0.5 / (i + 1)
            x = torch.randn(3)
            torch.testing.assert_close(jf(x), x * STEP_SIZE)
    finally:
        STEP_SIZE = 0.5
    assert thunder.cache_misses(jf) == (1 if _symbolic(options) else 2)


def test_int_then_float_recompiles():
    """The value's type is checked: an int counter that becomes a float is another program."""
    m1 = Counting()
    m2 = copy.deepcopy(m1)
    jm = thunder.jit(m2)
    for i in range(6):
        if i == 3:
            m1.step = m2.step = 2.5
        x = torch.randn(5, 4)
        torch.testing.assert_close(jm(x), m1(x))
        assert type(m2.step) is type(m1.step) and m2.step == m1.step
