"""Runaway recursion in interpreted code raises RecursionError as in CPython, and never crashes.

The interpreter runs on several real Python frames per interpreted one, so it raises the real
recursion limit while it runs; on 3.10 every Python frame also lives on the C stack, which a
limit raised too far overflows (a segmentation fault, not an exception). These tests run the
recursion in a child process with the common 8 MiB stack (``ulimit -s 8192``), from several
depths of native frames and on threads with small stacks, so that a crash fails the test
instead of killing pytest, and compare with what CPython does in the same child.
"""

import os
import subprocess
import sys
import textwrap

import pytest

STACK_BYTES = 8 << 20

# Scenarios: each defines ``program()``, run natively and interpreted; results must be equal.
SCENARIOS = '''
import functools
import sys

def caught(recurse):
    try:
        recurse()
    except RecursionError as e:
        return "caught", type(e).__name__
    return "no error"

def plain():
    def down(n):
        return down(n + 1)
    return caught(lambda: down(0))

def counted():
    depth = [0]
    def down():
        depth[0] += 1
        down()
    try:
        down()
    except RecursionError:
        pass
    first = depth[0]
    depth[0] = 0
    try:
        down()  # the program continues, and the limit is where it was
    except RecursionError:
        pass
    return first, depth[0]

def calls():
    # Call paths that take more of the interpreter's frames per level.
    def keywords(n, *, k=1):
        return keywords(n + 1, k=k)
    def star(*a):
        return star(*a)
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            return fn(*a, **k)
        return wrapper
    @deco
    def decorated(n):
        return decorated(n + 1)
    def part(n, m):
        return p(m + 1)
    p = functools.partial(part, 0)
    recurse = lambda n: recurse(n + 1)
    def comprehension(n):
        return [comprehension(n + 1) for _ in (1,)]
    def in_with(n):
        with open(__file__ if "__file__" in globals() else sys.executable, "rb"):
            return in_with(n + 1)
    def in_class_body(n):
        class Body:
            value = in_class_body(n + 1)
    return [
        caught(lambda: keywords(0)),
        caught(lambda: star(0)),
        caught(lambda: decorated(0)),
        caught(lambda: p(0)),
        caught(lambda: recurse(0)),
        caught(lambda: comprehension(0)),
        caught(lambda: in_with(0)),
        caught(lambda: in_class_body(0)),
    ]

def methods():
    class Node:
        def __init__(self, n):
            self.child = Node(n + 1)
        def walk(self, n):
            return self.walk(n + 1)
        def __call__(self, n):
            return self(n + 1)
    class Child(Node):
        def walk(self, n):
            return super().walk(n + 1)
    class Meta(type):
        def __call__(cls, n):
            return cls(n + 1)
    class Made(metaclass=Meta):
        pass
    bare = Node.__new__(Node)
    return [
        caught(lambda: Node(0)),
        caught(lambda: bare.walk(0)),
        caught(lambda: bare(0)),
        caught(lambda: Child.__new__(Child).walk(0)),
        caught(lambda: Made(0)),
    ]

def generators():
    def nested(n):
        yield from nested(n + 1)
    def by_next(n):
        yield next(by_next(n + 1))
    async def awaiting(n):
        return await awaiting(n + 1)
    def drive():
        awaiting(0).send(None)
    return [caught(lambda: list(nested(0))), caught(lambda: next(by_next(0))), caught(drive)]

def native_callbacks():
    # Recursion through C (sorted calls the key natively): CPython's frames, C stack included.
    def key(x):
        return sorted([x], key=key)
    return caught(lambda: key(0))

def implicit_calls():
    # Recursion through Python code CPython calls implicitly, which the interpreter interprets
    # (some of it called back from C: sort keys, map, reduce, iteration by list()).
    def key(x):
        return sorted([x], key=key)
    def mapped(x):
        return list(map(mapped, [x]))
    def reduced(a, b):
        return functools.reduce(reduced, [a, b])
    class Loop:
        def __bool__(self):
            return bool(Loop())
        def __len__(self):
            return len(Loop())
        def __iter__(self):
            return iter(list(Loop()))
        def __getattr__(self, name):
            return Loop().missing
        def __add__(self, other):
            return Loop() + other
        def __eq__(self, other):
            return Loop() == other
        def __str__(self):
            return f"{Loop()}"
        @property
        def prop(self):
            return Loop().prop
    return [
        caught(lambda: key(0)),
        caught(lambda: mapped(0)),
        caught(lambda: reduced(0, 1)),
        caught(lambda: bool(Loop())),
        caught(lambda: len(Loop())),
        caught(lambda: list(Loop())),
        caught(lambda: Loop().missing),
        caught(lambda: Loop() + 1),
        caught(lambda: Loop() == 1),
        caught(lambda: str(Loop())),
        caught(lambda: Loop().prop),
    ]

def limit_seen():
    return sys.getrecursionlimit()

PROGRAMS = [plain, counted, methods, generators, native_callbacks, implicit_calls, limit_seen]
CAUGHT = ("caught", "RecursionError")
EXPECTED = {
    "plain": CAUGHT,
    "calls": [CAUGHT] * 8,
    "methods": [CAUGHT] * 5,
    "generators": [CAUGHT] * 3,
    "native_callbacks": CAUGHT,
    "implicit_calls": [CAUGHT] * 11,
}

def run_all(interpret, compare, programs=PROGRAMS):
    """Run each program interpreted (and natively, to compare, when ``compare``)."""
    results = []
    for program in programs:
        native = program() if compare else None
        interpreted = interpret(program)()
        name = program.__name__
        if compare:
            assert interpreted == native, (name, native, interpreted)
        elif name == "counted":  # where the C stack bounds it, the depth is an estimate
            assert min(interpreted) > 0, interpreted
        if name in EXPECTED:
            assert interpreted == EXPECTED[name], (name, interpreted)
        results.append((name, interpreted))
    return results

def nest(depth, fn):
    """Call fn at ``depth`` more frames of native code (a deep library call)."""
    return fn() if depth <= 0 else nest(depth - 1, fn)
'''


def _run_child(
    body: str, timeout: int = 300, stack_bytes: int | None = STACK_BYTES
) -> subprocess.CompletedProcess[str]:
    """Run ``body`` after the scenarios in a child whose main thread has ``stack_bytes`` of stack
    (``ulimit -s``; None: as much as the hard limit allows)."""
    code = SCENARIOS + textwrap.dedent(body)

    def small_stack() -> None:
        import resource

        hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
        if stack_bytes is None:
            soft = hard
        else:
            soft = stack_bytes if hard == resource.RLIM_INFINITY else min(stack_bytes, hard)
        resource.setrlimit(resource.RLIMIT_STACK, (soft, hard))

    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=small_stack,
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )


def _check(result: subprocess.CompletedProcess[str]) -> list[str]:
    assert result.returncode == 0, (
        f"child exited with {result.returncode}\nstdout:\n{result.stdout}\n"
        f"stderr:\n{result.stderr[-4000:]}"
    )
    return result.stdout.splitlines()


pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs POSIX resource limits")


@pytest.mark.parametrize("native_depth", [0, 200, 600, 900])
def test_runaway_recursion_from_native_depth(native_depth: int) -> None:
    lines = _check(
        _run_child(
            f"""
            from thunder_interp import interpret
            results = nest({native_depth}, lambda: run_all(interpret, compare=True))
            print("ok", results)
            """
        )
    )
    assert lines[-1].startswith("ok")


def test_runaway_recursion_with_unlimited_stack() -> None:
    lines = _check(
        _run_child(
            """
            from thunder_interp import interpret
            print("ok", nest(300, lambda: run_all(interpret, compare=True)))
            """,
            stack_bytes=None,
        )
    )
    assert lines[-1].startswith("ok")


def test_counted_depth_matches_cpython() -> None:
    lines = _check(
        _run_child(
            """
            from thunder_interp import interpret
            for depth in (0, 300):
                native = nest(depth, counted)
                interpreted = nest(depth, interpret(counted))
                print(native == interpreted, native, interpreted)
            """
        )
    )
    assert all(line.startswith("True") for line in lines), lines


@pytest.mark.parametrize("stack_size", [128 << 10, 256 << 10, 512 << 10])
def test_runaway_recursion_on_small_thread_stack(stack_size: int) -> None:
    # Where the C stack is this small, CPython itself may overflow it natively (3.10 always,
    # and recursion through sorted's key everywhere): the interpreter must raise RecursionError,
    # possibly earlier than CPython's limit, but never crash. Recursion through C from
    # interpreted code runs natively, as in CPython, so it is left out here.
    lines = _check(
        _run_child(
            f"""
            import threading
            from thunder_interp import interpret
            threading.stack_size({stack_size})
            programs = [p for p in PROGRAMS if p is not native_callbacks]
            out = []
            thread = threading.Thread(
                target=lambda: out.append(run_all(interpret, False, programs))
            )
            thread.start()
            thread.join()
            assert out, "the thread failed"
            print("ok", out[0])
            """
        )
    )
    assert lines[-1].startswith("ok")


def test_raised_user_limit() -> None:
    # A program that raised the limit itself (as hypothesis does while a test runs).
    lines = _check(
        _run_child(
            """
            import sys
            from thunder_interp import interpret
            sys.setrecursionlimit(10_000)
            print(interpret(plain)(), interpret(limit_seen)(), sys.getrecursionlimit())
            """
        )
    )
    assert lines[-1] == "('caught', 'RecursionError') 10000 10000"


def test_raised_user_limit_through_implicit_calls() -> None:
    # With a raised limit, recursion through interpreted callbacks from C (sort keys, list() of a
    # Python iterator) stops with RecursionError before the C stack runs out.
    lines = _check(
        _run_child(
            """
            import sys
            from thunder_interp import interpret
            sys.setrecursionlimit(10_000)
            print(interpret(implicit_calls)())
            """
        )
    )
    assert lines[-1] == str([("caught", "RecursionError")] * 11)


def test_limit_restored_and_threads_share_it() -> None:
    lines = _check(
        _run_child(
            """
            import sys, threading
            from thunder_interp import interpret
            before = sys.getrecursionlimit()
            errors = []
            def work():
                try:
                    for _ in range(3):
                        assert interpret(plain)() == ("caught", "RecursionError")
                        assert interpret(limit_seen)() == before
                except BaseException as e:
                    errors.append(e)
            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            print(errors, sys.getrecursionlimit() == before)
            """
        )
    )
    assert lines[-1] == "[] True"
