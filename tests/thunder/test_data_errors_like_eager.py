"""Errors eager's kernels raise from the values of their tensor inputs, as in eager.

An op whose kernel checks its inputs' values (a Cholesky factorization of a matrix that is not
positive-definite, the inverse of a singular one, an index out of range) raises in eager whether
or not its result is used: dead code elimination keeps it. Tracing runs on values it does not
check, so a program's ``try`` around such an op never sees the error while tracing: where the op
raises at run time, the call runs again eagerly (nothing took effect before it), so that the
program's handler decides, as in eager; calls whose data the op accepts run compiled.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Any, cache: str | None) -> Any:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


def _clone(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad)
    return x


def _run(fn: Callable[..., Any], args: Sequence[Any]) -> tuple[Any, BaseException | None]:
    try:
        return fn(*args), None
    except Exception as e:  # compared with the other side's
        return None, e


def _tensors(x: Any) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for y in x for t in _tensors(y)]
    return []


def _compare(fn: Callable[..., Any], jf: Callable[..., Any], args: Sequence[Any]) -> bool:
    """Runs ``fn`` and ``jf`` on copies of ``args``; asserts the same result (values, gradients)
    or the same exception type. Returns whether eager raised."""
    eager_args = [_clone(a) for a in args]
    jit_args = [_clone(a) for a in args]
    expected, eager_error = _run(fn, eager_args)
    got, jit_error = _run(jf, jit_args)
    if eager_error is not None:
        assert jit_error is not None, f"eager raised {eager_error!r}, thunder returned"
        assert type(jit_error) is type(eager_error), (eager_error, jit_error)
        return True
    assert jit_error is None, f"thunder raised {jit_error!r}, eager returned"
    te, tj = _tensors(expected), _tensors(got)
    assert len(te) == len(tj)
    for a, b in zip(te, tj):
        torch.testing.assert_close(b, a)
        assert a.requires_grad == b.requires_grad
    outs = [(a, b) for a, b in zip(te, tj) if a.requires_grad]
    leaves_e = [t for t in eager_args if isinstance(t, torch.Tensor) and t.requires_grad]
    leaves_j = [t for t in jit_args if isinstance(t, torch.Tensor) and t.requires_grad]
    if outs and leaves_e:
        cots = [torch.randn_like(a) for a, _ in outs]
        ge = torch.autograd.grad([a for a, _ in outs], leaves_e, cots, allow_unused=True)
        gj = torch.autograd.grad([b for _, b in outs], leaves_j, cots, allow_unused=True)
        for a, b in zip(ge, gj):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(b, a)
    return False


def _spd(n: int = 3, requires_grad: bool = False) -> torch.Tensor:
    a = torch.randn(n, n, dtype=torch.float64)
    return (a @ a.mT + n * torch.eye(n, dtype=torch.float64)).requires_grad_(requires_grad)


def _not_pd(n: int = 3, requires_grad: bool = False) -> torch.Tensor:
    s = _spd(n)
    shifted = s - (torch.linalg.eigvalsh(s)[0] + 1.0) * torch.eye(n, dtype=torch.float64)
    return shifted.requires_grad_(requires_grad)


def _singular(n: int = 3, requires_grad: bool = False) -> torch.Tensor:
    a = torch.randn(n, n, dtype=torch.float64)
    a[-1] = 0.0  # exactly singular: its LU has a zero pivot
    return a.requires_grad_(requires_grad)


# -- results unused: the op still runs and raises ------------------------------------------


def _chol_unused(a: torch.Tensor) -> torch.Tensor:
    torch.linalg.cholesky(a)  # validation only
    return a + 1


def _chol_ex_checked_unused(a: torch.Tensor) -> torch.Tensor:
    torch.linalg.cholesky_ex(a, check_errors=True)
    return a + 1


def _inv_unused(a: torch.Tensor) -> torch.Tensor:
    torch.linalg.inv(a)
    return a * 2


def _solve_unused(a: torch.Tensor) -> torch.Tensor:
    torch.linalg.solve(a, torch.ones(3, dtype=a.dtype))
    return a - 1


UNUSED_LINALG = [
    (_chol_unused, _spd, _not_pd),
    (_chol_ex_checked_unused, _spd, _not_pd),
    (_inv_unused, _spd, _singular),
    (_solve_unused, _spd, _singular),
]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn, good, bad", UNUSED_LINALG, ids=[f.__name__ for f, _, _ in UNUSED_LINALG]
)
def test_unused_linalg_result_still_raises(
    fn: Callable[..., Any], good: Any, bad: Any, cache: str | None
) -> None:
    jf = _jit(fn, cache)
    raised = [_compare(fn, jf, [make()]) for make in (good, bad, good, bad, bad, good)]
    assert raised == [False, True, False, True, True, False]


def _index_unused(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    x[i]
    return x + 1


def _index_select_unused(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    torch.index_select(x, 0, i)
    return x * 3


def _gather_unused(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    torch.gather(x, 0, i[:, None].expand(-1, x.shape[1]))
    return x.sum(0)


def _embedding_unused(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    torch.nn.functional.embedding(i, x)
    return x.exp()


def _take_unused(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    torch.take(x, i)
    return x.cos()


UNUSED_INDEXING = [
    _index_unused,
    _index_select_unused,
    _gather_unused,
    _embedding_unused,
    _take_unused,
]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", UNUSED_INDEXING, ids=[f.__name__ for f in UNUSED_INDEXING])
def test_unused_index_out_of_range_still_raises(fn: Callable[..., Any], cache: str | None) -> None:
    jf = _jit(fn, cache)
    raised = []
    for i in ([0, 2], [1, 17], [3, 1], [29, 0], [2, 2]):
        x = torch.randn(4, 3, requires_grad=True)
        raised.append(_compare(fn, jf, [x, torch.tensor(i)]))
    assert raised == [False, True, False, True, False]


def test_unused_assert_async_still_raises() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        torch._assert_async(x.sum() > 0)
        return x * 2

    jf = thunder.jit(fn)
    for sign in (1, -1, 1, -1):
        _compare(fn, jf, [sign * torch.rand(3) + sign * 0.1])


def test_compile_keeps_unused_checking_ops() -> None:
    from thunder_executors.background_compile import wait_for_background_compiles

    for fn, good, bad in UNUSED_LINALG:
        cf = thunder.compile(fn)
        for make in (good, bad, good, bad):
            _compare(fn, cf, [make()])
            wait_for_background_compiles()
    for fn in UNUSED_INDEXING:
        cf = thunder.compile(fn)
        for i in ([0, 2], [1, 17], [3, 1], [29, 0]):
            _compare(fn, cf, [torch.randn(4, 3), torch.tensor(i)])
            wait_for_background_compiles()


def test_unused_pure_ops_are_still_dropped() -> None:
    def fn(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        torch.exp(x)
        x.sin() * 2
        torch.linalg.cholesky_ex(x @ x.mT)  # reports errors in its info: nothing raises
        return x[i] + 1

    jf = thunder.jit(fn)
    x, i = torch.randn(3, 3), torch.tensor([0, 2])
    torch.testing.assert_close(jf(x, i), fn(x, i))
    execution = str(thunder.last_traces(jf)[-1])
    assert "exp" not in execution and "sin" not in execution and "cholesky" not in execution


# -- a handler of the program catches the error --------------------------------------------


def _psd_safe_cholesky(a: torch.Tensor) -> torch.Tensor:
    """GPyTorch's pattern: on failure, add jitter to the diagonal and try again."""
    try:
        return torch.linalg.cholesky(a)
    except torch.linalg.LinAlgError:
        eye = torch.eye(a.shape[-1], dtype=a.dtype)
        for jitter in (1e-6, 1e-4, 1e-2, 1.0, 10.0, 100.0):
            try:
                return torch.linalg.cholesky(a + jitter * eye)
            except torch.linalg.LinAlgError:
                continue
        raise


def _solve_or_lstsq(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    try:
        return torch.linalg.solve(a, b)
    except RuntimeError:  # singular: least squares (LinAlgError is a RuntimeError)
        return torch.linalg.pinv(a) @ b


def _index_or_first(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    try:
        y = x[i]
    except IndexError:
        y = x[:1]
    return y * 2


def _uses_helper(a: torch.Tensor) -> torch.Tensor:
    return _psd_safe_cholesky(a * 2).sum(-1) + a.diagonal()


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("fn", [_psd_safe_cholesky, _uses_helper])
def test_jitter_retry_after_linalg_error(
    fn: Callable[..., Any], requires_grad: bool, cache: str | None
) -> None:
    jf = _jit(fn, cache)
    for pd in (True, False, True, False, False, True):
        a = _spd(requires_grad=requires_grad) if pd else _not_pd(requires_grad=requires_grad)
        assert not _compare(fn, jf, [a])
    # calls whose matrix factors ran compiled; the others ran eagerly once each
    assert thunder.compile_stats(jf).eager_fallbacks == 3


def test_jitter_retry_order_bad_first() -> None:
    jf = thunder.jit(_psd_safe_cholesky)
    for pd in (False, True, False, True):
        assert not _compare(_psd_safe_cholesky, jf, [_spd() if pd else _not_pd()])


def test_no_jitter_helps_raises_eagers_error() -> None:
    jf = thunder.jit(_psd_safe_cholesky)
    nan = torch.full((3, 3), float("nan"), dtype=torch.float64)
    for a in (_spd(), nan, _spd()):
        _compare(_psd_safe_cholesky, jf, [a])


@pytest.mark.parametrize("cache", CACHES)
def test_solve_falls_back_to_pinv(cache: str | None) -> None:
    jf = _jit(_solve_or_lstsq, cache)
    for regular in (True, False, True, False):
        a = _spd(requires_grad=True) if regular else _singular()
        b = torch.randn(3, 2, dtype=torch.float64)
        assert not _compare(_solve_or_lstsq, jf, [a, b])


@pytest.mark.parametrize("cache", CACHES)
def test_index_error_falls_back(cache: str | None) -> None:
    jf = _jit(_index_or_first, cache)
    for i in ([0, 3], [1, 9], [2, 2], [-7, 0]):
        x = torch.randn(4, 3, requires_grad=True)
        assert not _compare(_index_or_first, jf, [x, torch.tensor(i)])


def test_handler_catching_another_type_lets_the_error_through() -> None:
    def fn(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        try:
            y = x[i]
        except KeyError:
            y = x
        return y + 1

    jf = thunder.jit(fn)
    raised = [_compare(fn, jf, [torch.randn(4), torch.tensor(i)]) for i in ([1], [8], [2], [9])]
    assert raised == [False, True, False, True]


class _Counting(torch.nn.Module):
    """Writes a buffer and a Python counter before the guarded op, and a counter in its handler:
    eager makes each write once, whichever branch the data takes."""

    def __init__(self, reads_written: bool) -> None:
        super().__init__()
        self.reads_written = reads_written
        self.register_buffer("calls", torch.zeros((), dtype=torch.float64))
        self.register_buffer("cov", torch.zeros(3, 3, dtype=torch.float64))
        self.steps = 0
        self.jittered = 0

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        self.steps += 1
        if self.reads_written:
            self.cov.copy_(a)
            a = self.cov
        try:
            chol = torch.linalg.cholesky(a)
        except torch.linalg.LinAlgError:
            self.jittered += 1
            chol = torch.linalg.cholesky(a + 10.0 * torch.eye(3, dtype=a.dtype))
        return chol * self.calls


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("reads_written", [False, True])
def test_module_writes_before_caught_error_made_once(
    reads_written: bool, cache: str | None
) -> None:
    eager, compiled = _Counting(reads_written), _Counting(reads_written)
    jm = _jit(compiled, cache)
    for pd in (True, False, True, False, False, True):
        a = _spd() if pd else _not_pd()
        assert not _compare(eager, jm, [a])
        torch.testing.assert_close(compiled.calls, eager.calls)
        torch.testing.assert_close(compiled.cov, eager.cov)
        assert (compiled.steps, compiled.jittered) == (eager.steps, eager.jittered)
    assert thunder.compile_stats(jm).eager_fallbacks == 3


def test_uncaught_error_after_buffer_write_keeps_eagers_write() -> None:
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("calls", torch.zeros(()))

        def forward(self, x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
            self.calls += 1
            return x[i] * self.calls

    eager, compiled = M(), M()
    jm = thunder.jit(compiled)
    for i in ([0], [5], [1], [6]):
        x = torch.randn(3)
        _compare(eager, jm, [x, torch.tensor(i)])
        torch.testing.assert_close(compiled.calls, eager.calls)


@pytest.mark.parametrize("requires_grad", [False, True])
def test_caught_op_after_random_draws_draws_eagers_numbers(requires_grad: bool) -> None:
    """The eager run after the op's error starts from the generator's state the call found."""

    def fn(a: torch.Tensor) -> torch.Tensor:
        ones = torch.ones(3, dtype=a.dtype)
        noisy = a + torch.diag(torch.nn.functional.dropout(ones, 0.2) * torch.rand_like(ones))
        try:
            return torch.linalg.cholesky(noisy) + torch.rand(3, dtype=a.dtype)
        except torch.linalg.LinAlgError:
            return noisy * torch.rand(3, dtype=a.dtype)

    jf = thunder.jit(fn)
    for pd in (True, False, True, False):
        a = (_spd() * 10 if pd else _not_pd()).requires_grad_(requires_grad)
        torch.manual_seed(7)
        expected = fn(a)
        expected_next = torch.rand(2)
        torch.manual_seed(7)
        got = jf(a)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(torch.rand(2), expected_next)
        if requires_grad:
            (ge,) = torch.autograd.grad(expected.sum(), a)
            (gj,) = torch.autograd.grad(got.sum(), a)
            torch.testing.assert_close(gj, ge)
    assert thunder.compile_stats(jf).eager_fallbacks == 2


def test_compile_runs_handlers_as_eager() -> None:
    from thunder_executors.background_compile import wait_for_background_compiles

    cf = thunder.compile(_psd_safe_cholesky)
    for pd in (True, False, True, False):
        assert not _compare(_psd_safe_cholesky, cf, [_spd() if pd else _not_pd()])
        wait_for_background_compiles()
    cf = thunder.compile(_index_or_first)
    for i in ([0, 3], [1, 9], [2, 2], [-7, 0]):
        assert not _compare(_index_or_first, cf, [torch.randn(4, 3), torch.tensor(i)])
        wait_for_background_compiles()


def test_torchs_own_handlers_do_not_guard_ops() -> None:
    """Only the program's own handlers guard ops (torch's module call, with hooks, has one that
    re-raises): an index op after a random draw still compiles."""

    class Embed(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.nn.Parameter(torch.randn(5, 3))

        def forward(self, i: torch.Tensor) -> torch.Tensor:
            table = torch.nn.functional.dropout(self.table, 0.5, training=True)
            return torch.nn.functional.embedding(i, table)

    model = Embed()
    model.register_forward_hook(lambda module, args, out: out * 2)
    jm = thunder.jit(model)
    for i in ([0, 4], [2, 2], [1, 3]):
        torch.manual_seed(3)
        expected = model(torch.tensor(i))
        torch.manual_seed(3)
        torch.testing.assert_close(jm(torch.tensor(i)), expected)
    assert thunder.compile_stats(jm).eager_fallbacks == 0


def _suppressed(a: torch.Tensor) -> torch.Tensor:
    with contextlib.suppress(torch.linalg.LinAlgError):
        torch.linalg.cholesky(a)  # validation only; eager goes on where it fails
    return a * 2


def _caught_around_no_grad(a: torch.Tensor) -> torch.Tensor:
    try:
        with torch.no_grad():
            chol = torch.linalg.cholesky(a)
    except torch.linalg.LinAlgError:
        chol = torch.zeros_like(a)
    return chol + a


@pytest.mark.parametrize("fn", [_suppressed, _caught_around_no_grad])
def test_with_blocks_around_checking_ops(fn: Callable[..., Any]) -> None:
    jf = thunder.jit(fn)
    for pd in (True, False, True, False):
        a = _spd(requires_grad=True) if pd else _not_pd(requires_grad=True)
        assert not _compare(fn, jf, [a])


def test_a_finally_block_that_raises_again_is_no_handler() -> None:
    # Library wrappers restore state in a ``finally`` (transformers' output capturing): the
    # index op inside stays an ordinary op (compiled, no data check), and an error still
    # propagates after the finally block ran once, as in eager.
    restored: list[int] = []

    def fn(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        try:
            y = x[i] * 2
        finally:
            restored.append(1)
        return y

    jf = thunder.jit(fn)
    for i in ([0, 3], [1, 2], [1, 9]):
        before = len(restored)
        raised = _compare(fn, jf, [torch.randn(4, 3), torch.tensor(i)])
        assert len(restored) - before == 2  # once for eager, once for thunder
        assert raised == (9 in i)
    trace = thunder.last_traces(jf)[0]
    assert not trace.caught_op_outputs


def test_a_finally_block_that_returns_swallows_the_error() -> None:
    def fn(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        y = x[0]
        try:
            y = x[i].sum(0)
        finally:
            return y * 2  # noqa: B012

    jf = thunder.jit(fn)
    for i in ([0, 3], [1, 9], [2, 2]):
        assert not _compare(fn, jf, [torch.randn(4, 3), torch.tensor(i)])


class _SwallowIndexErrors:
    def __enter__(self) -> _SwallowIndexErrors:
        return self

    def __exit__(self, kind: Any, value: Any, tb: Any) -> bool:
        return kind is not None and issubclass(kind, IndexError)


@contextlib.contextmanager
def _fallback_on_index_error() -> Any:
    try:
        yield
    except IndexError:
        pass


def _in_user_manager(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    y = x[0] * 2
    with _SwallowIndexErrors():
        y = x[i].sum(0) * 3
    return y


def _in_generator_manager(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
    y = x[0] * 2
    with _fallback_on_index_error():
        y = x[i].sum(0) * 3
    return y


@pytest.mark.parametrize("fn", [_in_user_manager, _in_generator_manager])
@pytest.mark.parametrize("cache", CACHES)
def test_a_user_manager_that_swallows_the_error(fn: Callable[..., Any], cache: str | None) -> None:
    # An ``__exit__`` returning True, or a ``@contextmanager`` generator with an ``except``
    # clause, is a handler: the index op that raises on some calls is a data check there.
    jf = _jit(fn, cache)
    for i in ([0, 3], [1, 9], [2, 2], [-7, 1]):
        assert not _compare(fn, jf, [torch.randn(4, 3), torch.tensor(i)])


def test_managers_that_only_reraise_are_no_handlers() -> None:
    @contextlib.contextmanager
    def restoring() -> Any:
        try:
            yield
        finally:
            pass

    def fn(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        with torch.no_grad(), restoring():
            return x[i] * 2

    jf = thunder.jit(fn)
    for i in ([0, 3], [1, 2]):
        assert not _compare(fn, jf, [torch.randn(4, 3), torch.tensor(i)])
    assert not thunder.last_traces(jf)[0].caught_op_outputs
