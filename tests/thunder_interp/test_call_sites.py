"""Calls from compiled blocks: the per-site cache of the callee and the entry superblock.

A call site in a generated block remembers the last Python function it called and enters its
frame directly while the callee stays the same function, with the same code, and without a
lookaside. Everything that may change between calls must still be seen: a global rebound to
another function, a reassigned ``__code__``, another interpretation's lookasides, another
class's method at the same site. The entry of a warm function runs its hot blocks as one
superblock; exceptions raised in it keep their lines and handlers.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from typing import Any

import pytest
from block_thresholds import DEFAULT_THRESHOLDS, set_thresholds

from thunder_interp import Callbacks, interpret, is_interpreting


@pytest.fixture(params=["eager", "early", "superblock_first", "default"])
def thresholds(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Compile blocks and superblocks on first use, after a few runs (the suite's setting, see
    block_thresholds.py), the entry's superblock long before any block of its own, or at the
    interpreter's own warmth."""
    if request.param == "eager":
        set_thresholds(monkeypatch, (0, 1, 1))
    elif request.param == "superblock_first":
        set_thresholds(monkeypatch, (0, 1000, 3))
    elif request.param == "default":
        set_thresholds(monkeypatch, DEFAULT_THRESHOLDS)
    return str(request.param)


def _module(source: str) -> dict[str, Any]:
    """Functions defined in a fresh module namespace (their globals can be rebound freely)."""
    namespace: dict[str, Any] = {"__name__": "call_sites_module"}
    exec(compile(source, "<call sites>", "exec"), namespace)
    return namespace


_CALLER = """
def g(x):
    return x + 1

def h(x):
    return x * 10

def two(x, y):
    return x - y

def caller(x):
    if x < 0:
        return 0
    return g(x) + g(x + 1)
"""


@pytest.mark.usefixtures("thresholds")
def test_a_rebound_global_calls_the_new_function() -> None:
    m = _module(_CALLER)
    interp = interpret(m["caller"])
    for x in range(8):
        assert interp(x) == m["caller"](x)
    m["g"] = m["h"]
    for x in range(4):
        assert interp(x) == m["caller"](x) == 10 * x + 10 * (x + 1)


@pytest.mark.usefixtures("thresholds")
def test_a_reassigned_code_object_runs_the_new_code() -> None:
    m = _module(_CALLER)
    interp = interpret(m["caller"])
    for x in range(8):
        assert interp(x) == m["caller"](x)
    m["g"].__code__ = m["h"].__code__
    assert interp(3) == m["caller"](3) == 70
    # A code with another signature: the call fails as it does natively.
    m["g"].__code__ = m["two"].__code__
    with pytest.raises(TypeError) as native:
        m["caller"](3)
    with pytest.raises(TypeError) as interpreted:
        interp(3)
    assert str(interpreted.value) == str(native.value)


@pytest.mark.usefixtures("thresholds")
def test_each_interpretation_keeps_its_own_lookasides() -> None:
    m = _module(_CALLER)
    plain = interpret(m["caller"])
    replaced = interpret(m["caller"], lookasides={m["g"]: lambda x: -x})
    for x in range(10):
        # The two share the caller's compiled code, and so its call sites.
        assert plain(x) == m["caller"](x)
        assert replaced(x) == -x - (x + 1)


class _A:
    def __init__(self, k: int) -> None:
        self.k = k

    def m(self, x: int) -> int:
        return x + self.k


class _B(_A):
    def m(self, x: int) -> int:
        return x * self.k


def _polymorphic(objs: list[Any], x: int) -> list[int]:
    out = []
    for o in objs:
        out.append(o.m(x))  # one call site, several functions and instances
        f = o.m
        out.append(f(x + 1))
    return out


@pytest.mark.usefixtures("thresholds")
def test_one_site_calling_several_methods_and_instances() -> None:
    objs: list[Any] = [_A(1), _B(2), _A(3), _B(4), _B(5), _A(6)]
    interp = interpret(_polymorphic)
    for x in range(5):
        assert interp(objs, x) == _polymorphic(objs, x)
        objs.reverse()
    # A method replaced on the class after the site saw it.
    original = _B.m
    try:
        _B.m = lambda self, x: -x  # type: ignore[method-assign]
        assert interp(objs, 7) == _polymorphic(objs, 7)
    finally:
        _B.m = original  # type: ignore[method-assign]


def _callee(x: int) -> tuple[bool, int]:
    return is_interpreting(), OFFSET + x


OFFSET = 100


def _calls_callee(n: int) -> list[tuple[bool, int]]:
    return [_callee(i) for i in range(n)] + [_callee(-1)]


@pytest.mark.usefixtures("thresholds")
def test_callees_entered_from_a_site_are_interpreted_with_their_hooks() -> None:
    seen: list[str] = []
    cb = Callbacks(load_global=lambda name, v, g, p: seen.append(name) or v)
    interp = interpret(_calls_callee, callbacks=cb)
    for _ in range(2):
        result = interp(6)
        assert [v for _, v in result] == [v for _, v in _calls_callee(6)]
        assert all(interpreted for interpreted, _ in result)
    assert not any(interpreted for interpreted, _ in _calls_callee(2))
    assert seen.count("OFFSET") == 2 * 7


def _sections(x: int, d: dict[str, int]) -> int:
    if x < 2:
        return x
    total = 0
    for k in range(x):
        try:
            total += d["k"] // (x - 3 - k)  # LINE: divides
        except ZeroDivisionError:
            total -= 1000
    if x > 6:
        return d["missing"]  # LINE: missing key
    return total


def _line_of(marker: str) -> int:
    with open(__file__) as src:
        for number, text in enumerate(src, 1):
            if f"# LINE: {marker}" in text:
                return number
    raise AssertionError(marker)


@pytest.mark.usefixtures("thresholds")
def test_superblock_exceptions_keep_their_handlers_and_lines() -> None:
    interp = interpret(_sections)
    d = {"k": 60}
    for x in [0, 1, 2, 3, 4, 5, 6, 1, 5, 4]:
        assert interp(x, d) == _sections(x, d)
    with pytest.raises(KeyError) as info:
        interp(9, d)
    frames = [(fr.filename, fr.lineno) for fr in traceback.extract_tb(info.value.__traceback__)]
    assert (__file__, _line_of("missing key")) in frames
    assert not any("generated block" in name for name, _ in frames)


def _fib(n: int) -> int:
    if n < 2:
        return n
    return _fib(n - 1) + _fib(n - 2)


@pytest.mark.usefixtures("thresholds")
def test_recursion_through_sites_matches_cpython_and_its_limit() -> None:
    interp = interpret(_fib)
    for n in range(12):
        assert interp(n) == _fib(n)

    def deep(n: int) -> int:
        return 0 if n == 0 else 1 + deep(n - 1)

    limit = sys.getrecursionlimit()
    interp_deep = interpret(deep)
    assert interp_deep(limit // 4) == limit // 4
    with pytest.raises(RecursionError):
        interp_deep(limit * 2)


def _apply_all(fs: list[Callable[[int], int]], x: int) -> list[int]:
    return [f(x) for f in fs]


@pytest.mark.usefixtures("thresholds")
def test_closures_sharing_one_code_at_one_site() -> None:
    def make(k: int) -> Callable[[int], int]:
        def add(x: int) -> int:
            return x + k

        return add

    fs = [make(k) for k in range(20)]
    interp = interpret(_apply_all)
    for x in range(3):
        assert interp(fs, x) == _apply_all(fs, x)


def _three() -> Any:
    got = yield "a"
    yield ("b", got)
    yield "c"


def _gen(n: int) -> Any:
    total = 0
    for i in range(n):
        try:
            got = yield i * i  # a plain yield ends a compiled block
            if got is not None:
                total += got
        finally:
            total += 1
    yield from _three()
    return total


def _drive_gen(n: int) -> list[Any]:
    out: list[Any] = []
    g = _gen(n)
    out.append(next(g))
    for k in range(n + 2):
        try:
            out.append(g.send(k if k % 2 else None))
        except StopIteration as stop:
            out.append(("stop", stop.value))
            break
    g2 = _gen(n)
    out.append(next(g2))
    try:
        g2.throw(ValueError("thrown"))
    except ValueError as e:
        out.append(str(e))
    g3 = _gen(n)
    out.extend([next(g3), next(g3)])
    g3.close()
    out.append(sum(x for x in (i * 2 for i in range(n)) if x % 3))
    return out


@pytest.mark.usefixtures("thresholds")
def test_generators_suspend_and_resume_from_compiled_blocks() -> None:
    interp = interpret(_drive_gen)
    for n in [0, 1, 4, 9, 4]:
        assert interp(n) == _drive_gen(n)


class _Payload:
    """Stands for what a caller's state may hold (a model, a trace)."""


def _helper(x: int) -> int:
    return x + 1


def _calls_helper_and(fn: Callable[[int], int], n: int) -> int:
    total = 0
    for i in range(n):
        total += _helper(i) + fn(i)
    return total


@pytest.mark.usefixtures("thresholds")
def test_call_sites_keep_no_callee_lookaside_or_caller_state_alive() -> None:
    import gc
    import weakref

    payload = _Payload()
    kept = weakref.ref(payload)

    def closure(x: int, _p: _Payload = payload) -> int:  # a callee that holds the payload
        return x * 2

    def lookaside(x: int, _p: _Payload = payload) -> int:  # so does a lookaside
        return -x

    interp = interpret(_calls_helper_and, lookasides={_Payload: lookaside})
    assert interp(closure, 5) == _calls_helper_and(closure, 5)
    del interp, closure, lookaside, payload
    gc.collect()
    assert kept() is None


_FALLS_THROUGH = """
def f(x):
    a = x + 1
    d = {"a": a, "x": x}  # a dict display: the entry's block ends here, single ops go on
    if d["a"] > 5:
        return a - 5
    return a + len(d)
"""
_SETTINGS = ["eager", "early", "superblock_first", "default"]


def test_superblock_of_blocks_that_fall_through_to_single_ops(thresholds: str) -> None:
    # A superblock made of blocks never compiled on their own still goes on where they do.
    # (Code objects that compare equal share their compiled code: the lines differ per setting.)
    f = _module("\n" * _SETTINGS.index(thresholds) + _FALLS_THROUGH)["f"]
    interpreted = interpret(f)
    assert [interpreted(x) for x in range(12)] == [f(x) for x in range(12)]
    caller = _module("def run(f, n):\n    return [f(x) for x in range(n)]\n")["run"]
    assert interpret(caller)(f, 100) == caller(f, 100)
