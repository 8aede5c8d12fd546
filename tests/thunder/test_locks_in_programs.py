"""A jitted function that takes locks (``threading`` Lock, RLock, Condition, Semaphore,
BoundedSemaphore, as context managers or by acquire/release) keeps eager's mutual exclusion for
the outside state it reads and writes under them: the compiled call takes the locks the traced
run took, from its prologue through its epilogue. Compared with eager across threads (counts
exact, every value read once) and in one thread (acquire's result, RLock re-entry, a Condition
as a lock); what the compiled call cannot take as eager does runs split."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from runs_by_torch import call_split

import thunder

STATE: dict[str, Any] = {"n": 0}
GUARD: Any = threading.Lock()  # rebound by the tests to the lock under test
OTHER: Any = threading.Lock()

LOCKS: dict[str, Callable[[], Any]] = {
    "Lock": threading.Lock,
    "RLock": threading.RLock,
    "Condition": threading.Condition,
    "Condition(Lock)": lambda: threading.Condition(threading.Lock()),
    "Semaphore": threading.Semaphore,
    "BoundedSemaphore": threading.BoundedSemaphore,
}


def _count_with(x: torch.Tensor) -> torch.Tensor:
    with GUARD:
        n = STATE["n"]
        STATE["n"] = n + 1
        return x * n + torch.sin(x)


def _count_acquire(x: torch.Tensor) -> torch.Tensor:
    GUARD.acquire()
    try:
        n = STATE["n"]
        y = x * n + torch.sin(x)
        STATE["n"] = n + 1
    finally:
        GUARD.release()
    return y


@pytest.fixture
def interleaving() -> Iterator[None]:
    """Threads switch as often as the interpreter allows: an unlocked read-modify-write loses
    updates within a few hundred calls."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _hammer(
    fn: Callable[..., Any], threads: int = 4, calls: int = 400, from_zero: bool = True
) -> list[int]:
    """Calls ``fn(x)`` from ``threads`` threads, ``calls`` times each, from a count of 0: the
    values each call read (``fn`` returns ``x * n + sin(x)`` for ``x`` of ones)."""
    if from_zero:
        STATE["n"] = 0
    x = torch.ones(1)
    seen: list[int] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            mine = [round(float(fn(x) - torch.sin(x))) for _ in range(calls)]
        except BaseException as e:  # reported by the test, not lost in the thread
            errors.append(e)
            return
        seen.extend(mine)

    workers = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not any(w.is_alive() for w in workers), "deadlocked"
    assert not errors, errors
    return seen


def _compiled_whole(jf: Any) -> None:
    stats = thunder.compile_stats(jf)
    assert stats.compilations >= 1
    assert stats.split_calls == 0, stats.last_split_reason
    assert stats.eager_fallbacks == 0, stats.last_eager_reason


def _finishes(fn: Callable[[], Any], timeout: float = 60.0) -> Any:
    """``fn()`` on another thread, asserted to finish (a deadlock fails the test)."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    worker.start()
    worker.join(timeout)
    assert not worker.is_alive(), "deadlocked"
    assert out, "raised"
    return out[0]


def _waits_for(release: Callable[[], Any], fn: Callable[..., Any], *args: Any) -> None:
    """``fn(*args)`` on another thread is still waiting after half a second, and finishes once
    ``release()`` has run (as eager's call waits for a lock another thread holds)."""
    worker = threading.Thread(target=fn, args=args, daemon=True)
    try:
        worker.start()
        worker.join(0.5)
        assert worker.is_alive()
    finally:
        release()
    worker.join(60)
    assert not worker.is_alive()


@pytest.mark.parametrize("style", [_count_with, _count_acquire], ids=["with", "acquire"])
@pytest.mark.parametrize("kind", list(LOCKS))
def test_threads_never_lose_an_update_made_under_a_lock(
    kind: str, style: Callable[..., Any], interleaving: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "GUARD", LOCKS[kind]())
    jf = thunder.jit(style)
    for _ in range(3):  # compiled; the count becomes an input of the program
        x = torch.randn(3)
        n = STATE["n"]
        torch.testing.assert_close(jf(x), x * n + torch.sin(x))
    expected = _hammer(style)
    assert sorted(expected) == list(range(1600)) and STATE["n"] == 1600  # eager
    seen = _hammer(jf)
    assert STATE["n"] == 1600
    assert sorted(seen) == list(range(1600))  # every count read once: the calls excluded each other
    _compiled_whole(jf)
    free = GUARD.acquire(blocking=False)
    assert free  # left as found
    GUARD.release()


@pytest.mark.parametrize("kind", list(LOCKS))
def test_a_call_waits_while_another_thread_holds_the_lock(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = LOCKS[kind]()
    monkeypatch.setattr(sys.modules[__name__], "GUARD", lock)
    jf = thunder.jit(_count_with)
    STATE["n"] = 0
    jf(torch.ones(2))
    jf(torch.ones(2))
    lock.acquire()
    worker = threading.Thread(target=jf, args=(torch.ones(2),), daemon=True)
    try:
        worker.start()
        worker.join(0.5)
        assert worker.is_alive()  # waiting for the lock, as eager's call waits
        assert STATE["n"] == 2
    finally:
        lock.release()
    worker.join(60)
    assert not worker.is_alive() and STATE["n"] == 3
    _compiled_whole(jf)


class _Box:
    def __init__(self) -> None:
        self.n = 0


def test_the_lock_passed_to_the_call_is_the_one_taken() -> None:
    def f(x: torch.Tensor, lock: Any, box: _Box) -> torch.Tensor:
        with lock:
            box.n += 1
            return x + box.n

    jf = thunder.jit(f)
    first, second = threading.Lock(), threading.Lock()
    box = _Box()
    for lock in (first, second, first):
        x = torch.randn(3)
        out = jf(x, lock, box)
        torch.testing.assert_close(out, x + box.n)
    second.acquire()
    try:
        worker = threading.Thread(target=jf, args=(torch.ones(2), first, box), daemon=True)
        worker.start()
        worker.join(60)
        assert not worker.is_alive()  # another lock than the one held: no wait
        worker = threading.Thread(target=jf, args=(torch.ones(2), second, box), daemon=True)
        worker.start()
        worker.join(0.5)
        assert worker.is_alive()
    finally:
        second.release()
    worker.join(60)
    assert not worker.is_alive() and box.n == 5
    _compiled_whole(jf)


def test_acquire_returns_true_and_an_rlock_is_reentered_as_in_eager() -> None:
    rlock = threading.RLock()

    def f(x: torch.Tensor) -> tuple[torch.Tensor, bool, bool, Any]:
        first = rlock.acquire()
        second = rlock.acquire(True)
        try:
            STATE["n"] += 1
            y = x * STATE["n"]
        finally:
            rlock.release()
            rlock.release()
        with rlock:
            entered = rlock.__enter__()
            rlock.__exit__(None, None, None)
        return y, first, second, entered

    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(3)
        STATE["n"] = 5
        expected = f(x)
        STATE["n"] = 5
        got = jf(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:] == (True, True, True)
        assert STATE["n"] == 6
    rlock.acquire()  # held by the caller: the call enters it again, as eager does
    try:
        x = torch.randn(3)
        torch.testing.assert_close(jf(x)[0], x * 7)
    finally:
        rlock.release()

    def free() -> bool:  # given back in full: another thread takes it
        taken = rlock.acquire(blocking=False)
        if taken:
            rlock.release()
        return taken

    assert _finishes(free)
    _compiled_whole(jf)


@pytest.mark.parametrize("inner", [threading.RLock, threading.Lock], ids=["RLock", "Lock"])
def test_a_condition_used_as_a_lock(inner: Callable[[], Any]) -> None:
    cond = threading.Condition(inner())

    def f(x: torch.Tensor) -> tuple[torch.Tensor, bool]:
        with cond:
            STATE["n"] += 1
        taken = cond.acquire()
        try:
            return x + STATE["n"], taken
        finally:
            cond.release()

    jf = thunder.jit(f)
    STATE["n"] = 0
    for i in range(3):
        x = torch.randn(2)
        y, taken = jf(x)
        torch.testing.assert_close(y, x + i + 1)
        assert taken is True
    assert cond.acquire(blocking=False)  # left free
    _waits_for(cond.release, jf, torch.ones(2))
    assert STATE["n"] == 4
    _compiled_whole(jf)


def test_a_semaphore_is_taken_once_per_call_and_given_back() -> None:
    semaphore = threading.BoundedSemaphore(2)

    def f(x: torch.Tensor) -> torch.Tensor:
        with semaphore:
            STATE["n"] += 1
            return x * 2

    jf = thunder.jit(f)
    STATE["n"] = 0
    for _ in range(3):
        x = torch.randn(2)
        torch.testing.assert_close(jf(x), x * 2)
    assert STATE["n"] == 3
    # Its count is the semaphore's, not a value of the program: one unit taken elsewhere, the
    # call takes the other; both taken, it waits.
    semaphore.acquire()
    torch.testing.assert_close(_finishes(lambda: jf(torch.ones(2))), torch.ones(2) * 2)
    semaphore.acquire()
    _waits_for(semaphore.release, jf, torch.ones(2))
    semaphore.release()
    assert STATE["n"] == 5
    with pytest.raises(ValueError):
        semaphore.release()  # back at its bound: every call gave back what it took
    _compiled_whole(jf)


def test_a_lock_taken_twice_in_sequence_and_locks_nested(interleaving: None) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        with GUARD:
            STATE["n"] += 1
        y = x * 2
        with GUARD, OTHER:
            STATE["n"] += 1
            y = y + STATE["n"]
        with OTHER:
            STATE["n"] += 1
        return y

    jf = thunder.jit(f)
    for i in range(3):  # (the count an input from the second call: none compiled meanwhile)
        x = torch.randn(3)
        STATE["n"] = i
        expected = f(x)
        STATE["n"] = i
        torch.testing.assert_close(jf(x), expected)
        assert STATE["n"] == i + 3
    assert not GUARD.locked() and not OTHER.locked()
    seen = _hammer(lambda x: jf(x) - 2 * x + torch.sin(x))  # (the count after its second update)
    assert STATE["n"] == 3 * 1600  # no update lost
    assert len(set(seen)) == 1600
    _compiled_whole(jf)


def _reversed_order(x: torch.Tensor) -> torch.Tensor:
    with OTHER, GUARD:  # the other order than the jitted function's
        STATE["n"] += 1
        return x * 0 + STATE["n"] + torch.sin(x)


def test_locks_taken_one_after_another_are_held_together_without_deadlock(
    interleaving: None,
) -> None:
    # The call holds both for its whole run, where the function takes one after the other; it
    # never waits for one while holding the other, so eager code taking them the other way round
    # (holding OTHER, waiting for GUARD) never deadlocks with it.
    def f(x: torch.Tensor) -> torch.Tensor:
        with GUARD:
            n = STATE["n"]
            STATE["n"] = n + 1
        y = x * n + torch.sin(x)
        with OTHER:
            STATE["m"] += 1
        return y

    jf = thunder.jit(f)
    for i in range(3):
        x = torch.randn(3)
        STATE["n"], STATE["m"] = i, i
        expected = f(x)
        STATE["n"], STATE["m"] = i, i
        torch.testing.assert_close(jf(x), expected)
        assert STATE["n"] == i + 1 and STATE["m"] == i + 1
    assert not GUARD.locked() and not OTHER.locked()
    OTHER.acquire()
    try:
        worker = threading.Thread(target=jf, args=(torch.ones(2),), daemon=True)
        worker.start()
        worker.join(0.3)
        assert GUARD.acquire(timeout=60)  # this thread holds OTHER and takes GUARD: no deadlock
        GUARD.release()
    finally:
        OTHER.release()
    worker.join(60)
    assert not worker.is_alive()
    STATE["n"], STATE["m"] = 0, 0
    reversed_calls = threading.Thread(
        target=_hammer, args=(_reversed_order, 1, 400, False), daemon=True
    )
    reversed_calls.start()
    assert len(_hammer(jf, threads=3, from_zero=False)) == 1200
    reversed_calls.join(120)
    assert not reversed_calls.is_alive(), "deadlocked"
    assert STATE["n"] == 1600 and STATE["m"] == 1200  # no update lost
    _compiled_whole(jf)


def test_tracing_holds_the_locks_until_its_writes_are_undone(interleaving: None) -> None:
    # Tracing writes outside state for real and puts it back when it ends: a call on another
    # thread taking the lock in between would see that write, and lose its own to the undo.
    log: list[int] = []

    def f(x: torch.Tensor) -> torch.Tensor:
        with GUARD:
            log.append(1)
        k = 0
        for i in range(20000):  # slow to trace, nothing to run
            k += i
        return x * 2 + k

    jf = thunder.jit(f)
    jf(torch.ones(2))
    log.clear()
    stop = threading.Event()
    calls = [0]

    def work() -> None:
        while not stop.is_set():
            jf(torch.ones(2))
            calls[0] += 1

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    try:
        for dtype in (torch.float64, torch.float16, torch.bfloat16):  # each one traced
            torch.testing.assert_close(
                jf(torch.ones(3, dtype=dtype)), torch.ones(3, dtype=dtype) * 2 + 199990000
            )
    finally:
        stop.set()
        worker.join(60)
    assert not worker.is_alive()
    assert len(log) == calls[0] + 3
    _compiled_whole(jf)


def test_tracing_never_waits_for_a_lock_while_holding_one_the_program_released() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        with GUARD:
            STATE["n"] += 1
        with OTHER:
            STATE["n"] += 1
        return x * STATE["n"]

    jf = thunder.jit(f)
    STATE["n"] = 0
    OTHER.acquire()
    try:  # traced on another thread: it waits for OTHER, giving GUARD back meanwhile
        worker = threading.Thread(target=jf, args=(torch.ones(2),), daemon=True)
        worker.start()
        worker.join(0.3)
        assert GUARD.acquire(timeout=60)  # this thread holds OTHER and takes GUARD
        GUARD.release()
    finally:
        OTHER.release()
    worker.join(60)
    assert not worker.is_alive() and STATE["n"] == 2  # traced again: the writes made once
    x = torch.randn(3)
    torch.testing.assert_close(jf(x), x * 4)
    _compiled_whole(jf)


@pytest.mark.parametrize(
    "attempt",
    [
        lambda lock: lock.acquire(blocking=False),
        lambda lock: lock.acquire(False),
        lambda lock: lock.acquire(timeout=0.01),
        lambda lock: lock.acquire(True, 0.01),
    ],
    ids=["blocking=False", "False", "timeout=", "True, timeout"],
)
@pytest.mark.parametrize("kind", ["Lock", "RLock", "Semaphore"])
def test_an_acquire_that_may_fail_runs_split_and_answers_as_eager(
    kind: str, attempt: Callable[[Any], bool]
) -> None:
    lock = threading.Semaphore(1) if kind == "Semaphore" else LOCKS[kind]()

    def f(x: torch.Tensor) -> torch.Tensor:
        if attempt(lock):
            try:
                return x + 1
            finally:
                lock.release()
        return x - 1

    jf = thunder.jit(f)
    x = torch.randn(3)
    torch.testing.assert_close(call_split(jf, x, match="without waiting"), x + 1)
    torch.testing.assert_close(jf(x), x + 1)
    taken = threading.Event()
    let_go = threading.Event()

    def holder() -> None:  # held by another thread: the call's acquire fails there, as eager's
        lock.acquire()
        taken.set()
        let_go.wait(60)
        lock.release()

    other = threading.Thread(target=holder, daemon=True)
    other.start()
    taken.wait(60)
    try:
        x = torch.randn(3)
        torch.testing.assert_close(jf(x), f(x))
        torch.testing.assert_close(jf(x), x - 1)
    finally:
        let_go.set()
        other.join(60)
    x = torch.randn(3)
    torch.testing.assert_close(jf(x), x + 1)


def test_releasing_a_lock_the_function_did_not_take_runs_split() -> None:
    signal = threading.Semaphore(0)

    def f(x: torch.Tensor) -> torch.Tensor:
        signal.release()  # wakes a waiting thread on every call
        return x * 2

    jf = thunder.jit(f)
    x = torch.randn(3)
    torch.testing.assert_close(call_split(jf, x, match="did not acquire"), x * 2)
    for _ in range(2):
        torch.testing.assert_close(jf(x), x * 2)
    assert [signal.acquire(blocking=False) for _ in range(4)] == [True, True, True, False]


def test_a_branch_that_takes_no_lock_never_waits_for_it() -> None:
    flag = {"locked": True}

    def f(x: torch.Tensor) -> torch.Tensor:
        if flag["locked"]:
            with GUARD:
                STATE["n"] += 1
                return x + 1
        return x - 1

    jf = thunder.jit(f)
    for locked in (True, False, True, False):
        flag["locked"] = locked
        x = torch.randn(2)
        torch.testing.assert_close(jf(x), x + 1 if locked else x - 1)
    flag["locked"] = False
    GUARD.acquire()
    try:  # the entry that takes the lock is tried first, and does not wait for it
        x = torch.randn(2)
        torch.testing.assert_close(_finishes(lambda: jf(x)), x - 1)
    finally:
        GUARD.release()
    _compiled_whole(jf)


def test_the_lock_is_given_back_when_the_program_raises() -> None:
    # The computation raises at run time (an index out of range): the call runs again eagerly,
    # which takes the lock itself, and raises eager's error after eager's update.
    def f(x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        with GUARD:
            STATE["n"] += 1
            return torch.index_select(x, 0, i) * 2

    jf = thunder.jit(f)
    STATE["n"] = 0
    x = torch.randn(3)
    for i in range(3):
        index = torch.tensor([i])
        torch.testing.assert_close(jf(x, index), x[index] * 2)
    error = _finishes(lambda: _raises_through(jf, x, torch.tensor([7])))
    assert isinstance(error, (IndexError, RuntimeError)), error
    assert not GUARD.locked()
    assert STATE["n"] == 4  # eager's update before its error, once
    torch.testing.assert_close(jf(x, torch.tensor([1])), x[1:2] * 2)
    assert STATE["n"] == 5


def _raises_through(jf: Any, *args: Any) -> BaseException:
    try:
        jf(*args)
    except BaseException as e:
        return e
    raise AssertionError("did not raise")


def test_a_lock_rebound_to_another_type_recompiles(monkeypatch: pytest.MonkeyPatch) -> None:
    jf = thunder.jit(_count_with)
    STATE["n"] = 0
    for kind in ("Lock", "Semaphore", "RLock"):
        monkeypatch.setattr(sys.modules[__name__], "GUARD", LOCKS[kind]())
        for _ in range(2):
            x = torch.randn(2)
            n = STATE["n"]
            torch.testing.assert_close(jf(x), x * n + torch.sin(x))
        assert GUARD.acquire(blocking=False)
        GUARD.release()
    _compiled_whole(jf)


def test_a_program_without_locks_runs_its_stages_unwrapped() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        STATE["n"] += 1
        return x * 2

    jf = thunder.jit(f)
    jf(torch.randn(2))
    entry = thunder.compile_stats(jf).last_program
    assert not hasattr(entry.prologue, "__wrapped__")
    assert not hasattr(entry.epilogue, "__wrapped__")
    jl = thunder.jit(_count_with)
    jl(torch.randn(2))
    assert hasattr(thunder.compile_stats(jl).last_program.prologue, "__wrapped__")
