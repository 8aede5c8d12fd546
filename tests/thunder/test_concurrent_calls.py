"""Calls of one jitted function from several threads share its cache (a server's request
threads, a data loader's workers). No call raises out of the cache's bookkeeping nor misses an
entry another thread is reordering; concurrent misses of the same inputs compile one program
(the others wait for it and reuse it), so warming up from many threads does not fill the cache
up to the recompile limit with copies. Waiting never deadlocks: a thread compiling or running a
call eagerly for one function that calls another jitted function, or itself, does not wait, nor
does a call whose compiling thread is blocked on a lock the caller holds.

Thread switches are made frequent (``sys.setswitchinterval``) and threads start together
(barriers); the loops are bounded in time.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

import thunder


@pytest.fixture
def frequent_switches() -> Iterator[None]:
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(interval)


def _in_threads(n: int, work: Callable[[int], None], timeout: float = 300.0) -> None:
    """``work(i)`` on ``n`` threads; raises the first error; fails where one is still running
    after ``timeout`` seconds (a deadlock: the threads are daemons, left behind)."""
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            work(i)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    assert not any(t.is_alive() for t in threads), "a thread is still waiting: a deadlock"
    if errors:
        raise errors[0]


def _entries(jf: Any) -> int:
    function = getattr(jf, "_thunder_function", jf)
    return sum(len(b) for s in function._structures for b in s.buckets.values())


def test_concurrent_first_calls_compile_one_program(frequent_switches: None) -> None:
    def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return (x * w).sin() + x.cos().sum(dim=-1, keepdim=True)

    jf = thunder.jit(f)
    start = threading.Barrier(8)

    def work(i: int) -> None:
        start.wait()
        for _ in range(3):
            x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4)
            x_eager = x.detach().clone().requires_grad_()
            out, expected = jf(x, w), f(x_eager, w)
            torch.testing.assert_close(out, expected)
            grad = torch.randn_like(out)
            out.backward(grad)
            expected.backward(grad)
            torch.testing.assert_close(x.grad, x_eager.grad)

    _in_threads(8, work)
    stats = thunder.compile_stats(jf)
    assert (stats.compilations, _entries(jf), len(stats.history)) == (1, 1, 1)
    assert (stats.cache_misses, stats.cache_hits, stats.eager_fallbacks) == (1, 23, 0)


def test_concurrent_first_calls_leave_room_for_new_inputs(frequent_switches: None) -> None:
    # With the default limit of 8, eight copies of one program made every later input run
    # eagerly ("hit the recompile limit").
    def f(x: torch.Tensor) -> torch.Tensor:
        return x.sin() * 2 + 1

    jf = thunder.jit(f)
    start = threading.Barrier(8)

    def work(i: int) -> None:
        start.wait()
        x = torch.randn(4)
        torch.testing.assert_close(jf(x), f(x))

    _in_threads(8, work)
    for shape in [(5, 3), (2, 2, 2)]:
        x = torch.randn(shape)
        torch.testing.assert_close(jf(x), f(x))
    stats = thunder.compile_stats(jf)
    assert (stats.compilations, stats.eager_fallbacks, _entries(jf)) == (3, 0, 3)


def test_concurrent_misses_of_new_inputs_compile_once_each(frequent_switches: None) -> None:
    def f(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.addcmul(x, x, y).relu()

    jf = thunder.jit(f)
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    torch.testing.assert_close(jf(x, y), f(x, y))
    start = threading.Barrier(8)

    def work(i: int) -> None:
        # two new keys, four threads each: another dtype, an input that requires grad
        start.wait()
        for _ in range(2):
            if i % 2:
                x, y = (
                    torch.randn(2, 3, dtype=torch.float64),
                    torch.randn(2, 3, dtype=torch.float64),
                )
                torch.testing.assert_close(jf(x, y), f(x, y))
                continue
            x, y = torch.randn(2, 3, requires_grad=True), torch.randn(2, 3)
            x_eager = x.detach().clone().requires_grad_()
            out, expected = jf(x, y), f(x_eager, y)
            torch.testing.assert_close(out, expected)
            out.sum().backward()
            expected.sum().backward()
            torch.testing.assert_close(x.grad, x_eager.grad)

    _in_threads(8, work)
    stats = thunder.compile_stats(jf)
    assert (stats.compilations, _entries(jf)) == (3, 3)
    assert (stats.cache_misses, stats.cache_hits) == (3, 14)


def test_calls_sharing_a_bucket_never_raise_nor_compile_again(frequent_switches: None) -> None:
    # Four entries in one bucket (one per decision on data): the entry that served a call moves
    # to the front while other threads look through the bucket. That raised IndexError out of
    # the call, and calls that missed an entry being moved compiled it again.
    def f(x: torch.Tensor) -> torch.Tensor:
        s = x.sum()
        if s > 2:
            return x * 2
        if s > 0:
            return x + 3
        if s > -2:
            return x - 1
        return x / 2

    jf = thunder.jit(f)
    for value in (1.0, 0.1, -0.1, -1.0):
        x = torch.full((4,), value)
        torch.testing.assert_close(jf(x), f(x))
    stats = thunder.compile_stats(jf)
    assert (stats.compilations, _entries(jf), stats.cache_hits) == (4, 4, 0)
    start = threading.Barrier(8)
    deadline = time.monotonic() + 5.0
    calls = [0] * 8

    def work(i: int) -> None:
        start.wait()
        generator = torch.Generator().manual_seed(i)
        while calls[i] < 2000 and time.monotonic() < deadline:
            x = torch.randn(4, generator=generator) * 3
            torch.testing.assert_close(jf(x), f(x))
            calls[i] += 1

    _in_threads(8, work)
    assert (stats.compilations, _entries(jf), stats.eager_fallbacks) == (4, 4, 0)
    assert (stats.cache_misses, stats.cache_hits) == (4, sum(calls))


def test_concurrent_calls_of_a_module(frequent_switches: None) -> None:
    # A module's program reads its parameters from its state: the prologue's guard tree is
    # built by calls on several threads at once.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.LayerNorm(8), torch.nn.GELU())
    jm = thunder.jit(model)
    start = threading.Barrier(6)

    def work(i: int) -> None:
        start.wait()
        for _ in range(20):
            x = torch.randn(5, 6, requires_grad=True)
            x_eager = x.detach().clone().requires_grad_()
            out, expected = jm(x), model(x_eager)
            torch.testing.assert_close(out, expected)
            (grad,) = torch.autograd.grad(out.sum(), x)
            (grad_eager,) = torch.autograd.grad(expected.sum(), x_eager)
            torch.testing.assert_close(grad, grad_eager)

    _in_threads(6, work)
    stats = thunder.compile_stats(jm)
    assert (stats.compilations, _entries(jm)) == (1, 1)
    assert (stats.cache_misses, stats.cache_hits) == (1, 6 * 20 - 1)
    (entry,) = (e for b in jm._thunder_function._buckets.values() for e in b)
    tree = getattr(entry.prologue, "guard_tree", None)
    if tree is not None:  # one tree, built once: calls meanwhile ran the Python prologue
        assert tree.builds == 1 and tree.tree is not None


@pytest.mark.filterwarnings("ignore:thunder.jit")
def test_eager_runs_calling_each_others_jitted_functions_do_not_wait() -> None:
    # Tracing refuses these functions (``is_compiling`` is True while thunder traces), so each
    # call runs eagerly in its function's compile turn, and those eager runs call the other
    # function: were a thread holding a turn to wait for another's, both would wait forever.
    both_running = threading.Barrier(2, timeout=120)

    def make(factor: float) -> Callable[..., torch.Tensor]:
        def f(x: torch.Tensor, inner: bool) -> torch.Tensor:
            if torch.compiler.is_compiling():
                raise RuntimeError("not while tracing")
            if inner:
                return x + factor
            both_running.wait()  # the other thread runs its function eagerly too
            other = jf2 if factor == 1 else jf1
            return other(x, True) * factor

        return f

    f1, f2 = make(1.0), make(2.0)
    jf1, jf2 = thunder.jit(f1), thunder.jit(f2)
    x = torch.randn(3)
    results: dict[int, torch.Tensor] = {}

    def work(i: int) -> None:
        results[i] = (jf1, jf2)[i](x, False)

    _in_threads(2, work)
    torch.testing.assert_close(results[0], (x + 2.0) * 1.0)
    torch.testing.assert_close(results[1], (x + 1.0) * 2.0)


@pytest.mark.filterwarnings("ignore:thunder.jit")
def test_recursive_calls_in_an_eager_run() -> None:
    def f(x: torch.Tensor, n: int) -> torch.Tensor:
        if torch.compiler.is_compiling():
            raise RuntimeError("not while tracing")
        return x if n == 0 else jf(x, n - 1) * 2

    jf = thunder.jit(f)
    x = torch.randn(3)

    def work(i: int) -> None:
        torch.testing.assert_close(jf(x, 3), x * 8)

    _in_threads(2, work, timeout=120)


def test_a_call_waiting_for_a_compile_blocked_on_its_lock_compiles_itself() -> None:
    # The traced code takes a lock for real; the lock's holder calls the function meanwhile
    # and would wait for that compile, which waits for the lock.
    lock = threading.RLock()

    def f(x: torch.Tensor) -> torch.Tensor:
        with lock:
            y = x * 2
        return y + 1

    jf = thunder.jit(f)
    holding = threading.Event()
    results: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def work(i: int) -> None:
        x = torch.randn(4)
        if i == 0:  # holds the lock while the other thread compiles, then calls
            with lock:
                holding.set()
                deadline = time.monotonic() + 60
                while getattr(jf, "_compiling", 1) is None and time.monotonic() < deadline:
                    time.sleep(0.01)
                time.sleep(0.2)  # the compiling thread reaches the lock
                results["holder"] = (jf(x), f(x))
        else:
            holding.wait()
            results["compiler"] = (jf(x), f(x))

    _in_threads(2, work, timeout=120)
    for out, expected in results.values():
        torch.testing.assert_close(out, expected)
    assert len(results) == 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_process_compiles_while_a_thread_of_its_parent_held_the_turn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A data loader's workers fork the process, maybe while another thread compiles: the
    # child has the turn's owner recorded, not its thread.
    import thunder.jit_function as jit_function

    def f(x: torch.Tensor) -> torch.Tensor:
        return x.exp() - 1

    jf = thunder.jit(f)
    compile_entry = jit_function.compile_entry
    hold = threading.Event()
    holder = threading.Thread(target=lambda: jf(torch.randn(4)), daemon=True)

    def held_compile(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is holder:
            hold.wait(120)
        return compile_entry(*args, **kwargs)

    monkeypatch.setattr(jit_function, "compile_entry", held_compile)
    holder.start()
    deadline = time.monotonic() + 60
    while getattr(jf, "_compiling", True) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    pid = os.fork()
    if pid == 0:  # the child: exits with 0 where its call compiled and matched eager
        code = 1
        try:
            x = torch.randn(5)
            code = 0 if torch.allclose(jf(x), f(x)) else 1
        finally:
            os._exit(code)
    try:
        deadline = time.monotonic() + 120
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if done[0] == 0:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        assert done[0] == pid and os.waitstatus_to_exitcode(done[1]) == 0
    finally:
        hold.set()
        holder.join(60)
    x = torch.randn(4)
    torch.testing.assert_close(jf(x), f(x))
    assert thunder.compile_stats(jf).compilations == 1


def test_concurrent_first_calls_of_thunder_compile(frequent_switches: None) -> None:
    # thunder.compile's fusion regions compile on its background thread meanwhile.
    def f(x: torch.Tensor) -> torch.Tensor:
        return (x.sin() * x.cos()).exp() + 1

    cf = thunder.compile(f)
    start = threading.Barrier(4)

    def work(i: int) -> None:
        start.wait()
        for _ in range(3):
            x = torch.randn(16)
            torch.testing.assert_close(cf(x), f(x))

    _in_threads(4, work)
    stats = thunder.compile_stats(cf)
    assert (stats.compilations, _entries(cf)) == (1, 1)
