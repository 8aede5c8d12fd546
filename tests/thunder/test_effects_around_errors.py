"""Effects around errors, checks of values and warnings, as eager has them: the writes a call
makes before an op that raises at run time (an index out of range), the checks of values eager's
kernels make (binary_cross_entropy's range, ``torch._assert_async``), ``warnings.warn`` on every
call under the filters in force, and ``functools.lru_cache`` helpers."""

from __future__ import annotations

import functools
import logging
import warnings
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from runs_by_torch import call_eagerly

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Any, cache: str | None) -> Any:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


def _outcome(fn: Any, *args: Any) -> Any:
    """The result, or the type of the exception raised."""
    try:
        return fn(*args)
    except Exception as e:
        return type(e)


def _same(a: Any, b: Any) -> None:
    if isinstance(a, type) or isinstance(b, type):
        assert a is b, (a, b)
    else:
        torch.testing.assert_close(a, b)


# -- writes made before an op that raises at run time ------------------------------------------


class _Counting(torch.nn.Module):
    """Python-side writes (a counter, a list, a log) before an index op of data."""

    def __init__(self, op: str) -> None:
        super().__init__()
        self.op = op
        self.emb = torch.nn.Embedding(5, 3)
        self.n = 0
        self.seen: list[int] = []

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        self.n += 1
        self.seen.append(idx.shape[0])
        if self.op == "embedding":
            return self.emb(idx)
        if self.op == "gather":
            return self.emb.weight.gather(0, idx[:, None].expand(-1, 3))
        return F.cross_entropy(self.emb.weight[:2].expand(idx.shape[0], -1, -1)[:, 0], idx)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("op", ["embedding", "gather", "cross_entropy"])
def test_python_writes_before_a_runtime_error_are_eagers(op: str, cache: str | None) -> None:
    torch.manual_seed(0)
    eager = _Counting(op)
    jitted_module = _Counting(op)
    jitted_module.load_state_dict(eager.state_dict())
    for order in ([[0, 1], [1, 2], [0, 9], [2, 3], [7, 1], [3, 0, 1]], [[9, 0], [1, 0]]):
        jm = _jit(jitted_module, cache)
        for ids in order:
            idx = torch.tensor(ids) % (3 if op == "cross_entropy" and max(ids) < 5 else 100)
            expected, got = _outcome(eager, idx), _outcome(jm, idx)
            _same(expected, got)
            assert (jitted_module.n, jitted_module.seen) == (eager.n, eager.seen), ids


def test_a_warning_and_a_log_before_a_runtime_error_are_eagers() -> None:
    log = logging.getLogger("thunder_tests.effects_around_errors")
    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    handler = Keep()
    log.addHandler(handler)
    log.propagate = False

    def f(w: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        log.warning("rows %d", idx.shape[0])
        warnings.warn("looking up", UserWarning)
        return F.embedding(idx, w)

    try:
        jf = thunder.jit(f)
        w = torch.randn(4, 2)
        for ids in ([0, 1], [0, 5], [1, 2], [9]):
            idx = torch.tensor(ids)
            outcomes, counts = [], []
            for fn in (f, jf):
                records.clear()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    outcomes.append(_outcome(fn, w, idx))
                counts.append((len(records), len(caught)))
            _same(*outcomes)
            assert counts[0] == counts[1] == (1, 1), (ids, counts)
    finally:
        log.removeHandler(handler)


class _Accumulating(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("acc", torch.zeros(3))

    def forward(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        self.acc.add_(x)  # eager: made before the error
        y = x.gather(0, idx)  # raises for an index out of range
        if y.sum() > -100:  # a decision on data: the write above is deferred past it
            y = y * 2
        return y


@pytest.mark.parametrize("cache", CACHES)
def test_a_write_deferred_past_a_decision_is_made_before_a_runtime_error(
    cache: str | None,
) -> None:
    eager, jitted_module = _Accumulating(), _Accumulating()
    jm = _jit(jitted_module, cache)
    for ids in ([0, 1], [1, 2], [0, 9], [2, 0], [5], [1, 1, 0]):
        x, idx = torch.randn(3), torch.tensor(ids)
        _same(_outcome(eager, x, idx), _outcome(jm, x, idx))
        torch.testing.assert_close(jitted_module.acc, eager.acc)


def test_a_runtime_error_after_a_write_into_an_input_leaves_it_written_once() -> None:
    def f(x: torch.Tensor, acc: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        acc.mul_(2)
        return x.gather(0, idx)

    jf = thunder.jit(f)
    acc_e, acc_j = torch.ones(3), torch.ones(3)
    for ids in ([0, 1], [0, 7], [2, 2], [3]):
        x, idx = torch.randn(3), torch.tensor(ids)
        _same(_outcome(f, x, acc_e, idx), _outcome(jf, x, acc_j, idx))
        torch.testing.assert_close(acc_j, acc_e)


# -- checks of values eager's kernels make -----------------------------------------------------


def _bce_inputs(bad: str | None, requires_grad: bool) -> tuple[torch.Tensor, torch.Tensor]:
    p, t = torch.rand(5), torch.rand(5)
    if bad == "input":
        p[2] = 1.5
    elif bad == "negative":
        p[0] = -0.25
    elif bad == "nan":
        p[1] = float("nan")
    elif bad == "target":
        t[3] = 2.0
    return p.requires_grad_(requires_grad), t


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("requires_grad", [False, True])
def test_binary_cross_entropy_refuses_values_outside_0_1_as_eager(
    reduction: str, requires_grad: bool
) -> None:
    loss = torch.nn.BCELoss(reduction=reduction)
    for order in (
        [None, "input", None, "negative", "nan", "target", None],
        ["input", None, "target"],
    ):
        jl = thunder.jit(loss)
        for bad in order:
            p, t = _bce_inputs(bad, requires_grad)
            expected = _outcome(loss, p, t)
            pj = p.detach().clone().requires_grad_(requires_grad)
            got = _outcome(jl, pj, t)
            _same(expected, got)
            if requires_grad and not isinstance(got, type):
                expected.sum().backward()
                got.sum().backward()
                torch.testing.assert_close(pj.grad, p.grad)
        assert thunder.compile_stats(jl).eager_fallbacks == 0


def test_binary_cross_entropy_message_is_eagers() -> None:
    jf = thunder.jit(F.binary_cross_entropy)
    with pytest.raises(RuntimeError, match="all elements of input should be between 0 and 1"):
        jf(torch.tensor([0.2, 1.7]), torch.rand(2))
    with pytest.raises(RuntimeError, match="all elements of target should be between 0 and 1"):
        jf(torch.tensor([0.2, 0.7]), torch.tensor([0.5, -1.0]))


_VALIDATING = {
    "embedding": (lambda i: F.embedding(i, torch.ones(4, 2)), [0, 4]),
    "embedding_negative": (lambda i: F.embedding(i, torch.ones(4, 2)), [0, -1]),
    "one_hot": (lambda i: F.one_hot(i, 3), [0, 3]),
    "one_hot_negative": (lambda i: F.one_hot(i, 3), [0, -1]),
    "bincount": (lambda i: torch.bincount(i, minlength=4), [0, -1]),
    "nll_loss": (lambda i: F.nll_loss(torch.zeros(2, 3), i), [0, 3]),
    "cross_entropy": (lambda i: F.cross_entropy(torch.zeros(2, 3), i), [0, 3]),
    "cross_entropy_smoothed": (
        lambda i: F.cross_entropy(torch.zeros(2, 3), i, label_smoothing=0.1),
        [0, 3],
    ),
    "gather": (lambda i: torch.arange(3.0).gather(0, i), [0, 3]),
    "scatter": (lambda i: torch.zeros(3).scatter(0, i, torch.ones(2)), [0, 3]),
    "scatter_add": (lambda i: torch.zeros(3).scatter_add(0, i, torch.ones(2)), [0, 3]),
    "index_select": (lambda i: torch.arange(3.0).index_select(0, i), [0, 3]),
    "index": (lambda i: torch.arange(3.0)[i], [0, 3]),
    "index_add": (lambda i: torch.zeros(3).index_add(0, i, torch.ones(2)), [0, 3]),
    "take": (lambda i: torch.arange(3.0).take(i), [0, 3]),
    "multinomial": (lambda i: torch.multinomial(i.float(), 1), [0, -1]),
    "multinomial_zeros": (lambda i: torch.multinomial(i.float(), 1), [0, 0]),
}


@pytest.mark.parametrize("name", sorted(_VALIDATING))
def test_ops_whose_kernels_validate_values_raise_as_eager(name: str) -> None:
    fn, bad = _VALIDATING[name]
    good = [0, 1] if not name.startswith("multinomial") else [1, 2]
    for order in ([good, bad, good, bad], [bad, good, bad]):
        jf = thunder.jit(fn)
        for ids in order:
            i = torch.tensor(ids)
            torch.manual_seed(1)
            expected = _outcome(fn, i)
            torch.manual_seed(1)
            _same(expected, _outcome(jf, i))


_ASSERTS = {
    "assert_async": lambda c: torch._assert_async(c),
    "assert_async_message": lambda c: torch._assert_async(c, "x must be positive"),
    "aten_default": lambda c: torch.ops.aten._assert_async.default(c),
    "aten_message": lambda c: torch.ops.aten._assert_async.msg(c, "x must be positive"),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", sorted(_ASSERTS))
def test_assert_async_checks_every_call(name: str, cache: str | None) -> None:
    check = _ASSERTS[name]

    def f(x: torch.Tensor) -> torch.Tensor:
        check((x > 0).all())
        return x * 2

    for order in ([True, False, True, False], [False, True]):
        jf = _jit(f, cache)
        for positive in order:
            x = torch.rand(3) + 0.1 if positive else torch.tensor([1.0, -1.0, 0.5])
            expected, got = _outcome(f, x), _outcome(jf, x)
            _same(expected, got)
            if not positive:
                with pytest.raises(RuntimeError) as caught_e:
                    f(x)
                with pytest.raises(RuntimeError) as caught_j:
                    jf(x)
                assert str(caught_j.value) == str(caught_e.value)
        assert thunder.compile_stats(jf).eager_fallbacks == 0  # the compiled program raised


def test_assert_async_of_a_number_and_of_many_values_as_eager() -> None:
    def sum_is_nonzero(x: torch.Tensor) -> torch.Tensor:
        torch._assert_async(x.sum())
        return x + 1

    jf = thunder.jit(sum_is_nonzero)
    for x in (torch.randn(2) + 5, torch.tensor([1.0, -1.0]), torch.randn(2) - 5):
        _same(_outcome(sum_is_nonzero, x), _outcome(jf, x))
    assert thunder.compile_stats(jf).eager_fallbacks == 0

    def many(x: torch.Tensor) -> torch.Tensor:
        torch._assert_async(x > 0)
        return x

    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        many(torch.ones(2))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        thunder.jit(many)(torch.ones(2))


# -- warnings.warn in the program ------------------------------------------------------------


def _warns(x: torch.Tensor) -> torch.Tensor:
    if x.shape[0] > 1:
        warnings.warn("batch > 1 is deprecated", FutureWarning)
    return x * 2


def _warns_for_the_caller(x: torch.Tensor) -> torch.Tensor:
    warnings.warn("the caller's line", DeprecationWarning, stacklevel=2)
    return x + 1


def _calls_warning_helper(x: torch.Tensor) -> torch.Tensor:
    return _warns_for_the_caller(x) * 3


def _seen(fn: Any, action: str, calls: int = 3) -> list[tuple[str, str, str, int]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        for _ in range(calls):
            fn(torch.randn(2, 3))  # the same line for eager and thunder
    return [(str(w.message), w.category.__name__, w.filename, w.lineno) for w in caught]


@pytest.mark.parametrize("action", ["always", "default", "once", "module"])
@pytest.mark.parametrize("fn", [_warns, _warns_for_the_caller, _calls_warning_helper])
def test_warnings_on_every_call_under_the_filters_in_force(fn: Any, action: str) -> None:
    jf = thunder.jit(fn)
    # "default" and "module" remember a warning per location: each run starts afresh
    for g in (_warns.__globals__, globals()):
        g.pop("__warningregistry__", None)
    expected = _seen(fn, action)
    for g in (_warns.__globals__, globals()):
        g.pop("__warningregistry__", None)
    assert _seen(jf, action) == expected
    assert thunder.compile_stats(jf).compilations == 1


def test_warnings_as_errors_and_pytest_warns() -> None:
    jf = thunder.jit(_warns)
    jf(torch.randn(2, 3))  # compiled (the warning shown once, as eager's)
    for _ in range(2):
        with pytest.warns(FutureWarning, match="deprecated"):
            jf(torch.randn(2, 3))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(FutureWarning):
                jf(torch.randn(4, 3))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.testing.assert_close(jf(x := torch.randn(2, 3)), x * 2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            jf(torch.randn(1, 3))  # the branch without the warning
        assert not caught


def test_a_warning_in_a_module_forward_names_the_users_line() -> None:
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            warnings.warn(f"rows {x.shape[0]}", UserWarning)
            return x.relu()

    m = M()
    jm = thunder.jit(m)
    for rows in (2, 3, 3):
        x = torch.randn(rows, 2)
        with warnings.catch_warnings(record=True) as caught_e:
            warnings.simplefilter("always")
            m(x)
        with warnings.catch_warnings(record=True) as caught_j:
            warnings.simplefilter("always")
            jm(x)
        assert [(str(w.message), w.filename, w.lineno) for w in caught_j] == [
            (str(w.message), w.filename, w.lineno) for w in caught_e
        ]


# -- functools.lru_cache helpers ------------------------------------------------------------------


def _cached_heads() -> tuple[Any, list[int], Any]:
    calls: list[int] = []

    @functools.lru_cache(None)
    def heads(n: int) -> int:
        calls.append(n)
        return n // 2

    def f(x: torch.Tensor) -> torch.Tensor:
        return x.reshape(x.shape[0], heads(x.shape[1]), -1) * 2

    return f, calls, heads


def test_an_lru_cache_helper_runs_as_eager_with_its_cache() -> None:
    fe, calls_e, heads_e = _cached_heads()
    fj, calls_j, heads_j = _cached_heads()
    jf = thunder.jit(fj)
    for i, width in enumerate((4, 4, 6, 4, 6)):
        x = torch.randn(2, width)
        expected = fe(x)
        got = call_eagerly(jf, x, match="lru_cache") if i == 0 else jf(x)
        torch.testing.assert_close(got, expected)
        assert calls_j == calls_e
        assert heads_j.cache_info() == heads_e.cache_info()
    heads_e.cache_clear()
    heads_j.cache_clear()
    x = torch.randn(2, 4)
    torch.testing.assert_close(jf(x), fe(x))
    assert calls_j == calls_e and heads_j.cache_info() == heads_e.cache_info()
    assert "lru_cache" in (thunder.compile_stats(jf).last_eager_reason or "")


class _CountingInPlace(torch.nn.Module):
    """A buffer written in place, and Python-side writes before and after an op that raises."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(5, 3)
        self.register_buffer("cnt", torch.zeros(()))
        self.n = 0
        self.after = 0
        self.seen: list[int] = []
        self.last: torch.Tensor | None = None

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        self.n += 1
        self.seen.append(idx.shape[0])
        self.cnt += 1
        self.last = self.cnt * 2  # a value computed before the error
        y = self.emb(idx)
        self.after += 1  # eager: not made where the embedding raises
        return y


def _state(m: _CountingInPlace) -> tuple[Any, ...]:
    last = None if m.last is None else m.last.item()
    return m.n, m.after, list(m.seen), m.cnt.item(), last


@pytest.mark.parametrize("cache", CACHES)
def test_python_writes_before_a_runtime_error_after_an_in_place_write(cache: str | None) -> None:
    torch.manual_seed(0)
    eager = _CountingInPlace()
    jitted_module = _CountingInPlace()
    jitted_module.load_state_dict(eager.state_dict())
    for order in ([[0, 1], [1, 2], [0, 9], [2, 3], [7], [3, 0, 1]], [[9, 0], [1, 0]]):
        jm = _jit(jitted_module, cache)
        for ids in order:
            idx = torch.tensor(ids)
            expected, got = _outcome(eager, idx), _outcome(jm, idx)
            _same(expected, got)
            assert _state(jitted_module) == _state(eager), ids
            if not isinstance(got, type):
                expected.sum().backward()
                got.sum().backward()
                torch.testing.assert_close(jitted_module.emb.weight.grad, eager.emb.weight.grad)
