"""Compiled entries: a warm function's calls run its entry block in the function that sets up
its frame (``_blocks._generate_entry``), not in a call of the block from the dispatch loop.

The tests call functions often enough for their entries to be compiled (see ``conftest.py``),
then check what must not change: exceptions (handled in the function, or leaving it, with the
user's lines), frame introspection from callees, recursion limits, special methods,
constructors and properties whose code has a compiled entry.
"""

from __future__ import annotations

import sys
import traceback
import warnings
from typing import Any

import pytest
from block_thresholds import DEFAULT_THRESHOLDS, set_thresholds

from thunder_interp import Callbacks, interpret
from thunder_interp._runtime import enter_frame

N = 12


def _line(marker: str) -> int:
    with open(__file__) as source:
        return next(i for i, text in enumerate(source, start=1) if text.rstrip().endswith(marker))


def _has_compiled_entry(fn: Any, interpreted: Any) -> bool:
    entry = interpreted._codes.get(fn.__code__).enter
    return entry is not enter_frame and hasattr(entry, "block_owners")


def _divide(a: int, b: int) -> float:
    return a / b  # LINE: divide


def _safe(a: int, b: int) -> Any:
    try:
        return a // b
    except ZeroDivisionError as e:
        return type(e).__name__


def _caller(n: int) -> list[Any]:
    out = []
    for i in range(n):
        out.append(_safe(i, i % 3))
        out.append(_divide(i, 2))
    return out


def test_entries_are_compiled_and_handle_exceptions_in_the_function() -> None:
    interpreted = interpret(_caller)
    assert interpreted(N) == _caller(N)
    assert _has_compiled_entry(_divide, interpreted)
    if sys.version_info >= (3, 11):  # (3.10's try starts with SETUP_FINALLY, a single op)
        assert _has_compiled_entry(_safe, interpreted)


def _raise_from_entry(n: int) -> float:
    total = 0.0
    for i in range(n):
        total += _divide(i, 0 if i == n - 1 else 1)
    return total


def test_an_exception_leaving_a_compiled_entry_has_the_users_lines() -> None:
    interpreted = interpret(_raise_from_entry)
    with pytest.raises(ZeroDivisionError) as info:
        interpreted(N)
    frames = [
        (fr.filename, fr.lineno, fr.name) for fr in traceback.extract_tb(info.value.__traceback__)
    ]
    assert (__file__, _line("# LINE: divide"), "_divide") in frames
    assert all("generated block" not in name for name, _, _ in frames)
    assert _has_compiled_entry(_divide, interpreted)


def _where() -> int:
    return sys._getframe(1).f_lineno


def _two_sites() -> tuple[int, int]:
    first = _where()  # LINE: first site
    second = _where()  # LINE: second site
    return first, second


def _many(n: int) -> list[tuple[int, int]]:
    return [_two_sites() for _ in range(n)]


def test_callees_see_the_line_of_the_call_in_a_compiled_entry() -> None:
    interpreted = interpret(_many)
    expected = (_line("# LINE: first site"), _line("# LINE: second site"))
    assert interpreted(N) == [expected] * N
    assert _has_compiled_entry(_two_sites, interpreted)


def _warn() -> None:
    warnings.warn("careful", UserWarning, stacklevel=2)


def _warns() -> None:
    _warn()  # LINE: warned here


def test_warnings_point_at_the_line_in_a_compiled_entry() -> None:
    def run(n: int) -> None:
        for _ in range(n):
            _warns()

    interpreted = interpret(run)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        interpreted(N)
    assert [(w.filename, w.lineno) for w in caught] == [
        (__file__, _line("# LINE: warned here"))
    ] * N


def _depth(n: int) -> int:
    return 0 if n == 0 else 1 + _depth(n - 1)


def test_recursion_through_compiled_entries_stops_where_cpython_does() -> None:
    interpreted = interpret(_depth)
    assert interpreted(50) == 50
    limit = sys.getrecursionlimit()
    with pytest.raises(RecursionError):
        _depth(limit + 10)
    with pytest.raises(RecursionError):
        interpreted(limit + 10)
    assert interpreted(limit // 4) == limit // 4
    assert _has_compiled_entry(_depth, interpreted)


class Vec:
    def __init__(self, x: int) -> None:
        self.x = x

    def __add__(self, other: Vec) -> Vec:
        return Vec(self.x + other.x)

    def __bool__(self) -> bool:
        return self.x % 7 != 3

    @property
    def half(self) -> float:
        return 1 / (self.x % 5)  # LINE: half


def _vectors(n: int) -> list[Any]:
    v = Vec(0)
    out = []
    for _ in range(n):
        v = v + Vec(1)
        try:
            out.append((bool(v), v.half))
        except ZeroDivisionError:
            out.append("zero")
    return out


@pytest.mark.parametrize(
    "callbacks",
    [None, Callbacks(load_attribute=lambda o, name, v, p: v, special_lookup=lambda *a: None)],
)
def test_special_methods_constructors_and_properties_with_compiled_entries(
    callbacks: Callbacks | None,
) -> None:
    interpreted = interpret(_vectors, callbacks=callbacks)
    assert interpreted(3 * N) == _vectors(3 * N)
    for fn in (Vec.__init__, Vec.__add__, Vec.__bool__, Vec.half.fget):
        assert _has_compiled_entry(fn, interpreted)


def test_frames_of_compiled_entries_in_tracebacks() -> None:
    def run(n: int) -> Any:
        v = Vec(1)
        for i in range(n):
            v = Vec(i)
            v.half  # noqa: B018
        return v

    with pytest.raises(ZeroDivisionError) as info:
        interpret(run)(N)
    tb = info.value.__traceback__
    frames = traceback.extract_tb(tb)
    assert (__file__, _line("# LINE: half")) == (frames[-1].filename, frames[-1].lineno)
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert tb.tb_frame.f_code.co_name == "half"


def _branchy(n: int) -> int:
    if n < 2:
        return n
    return _branchy(n - 1) + _branchy(n - 2)


def test_a_function_called_only_on_the_fast_path_compiles_its_entry_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from thunder_interp import _blocks

    generated: list[str] = []
    original = _blocks._generate

    def counting(name: str, *args: Any, **kwargs: Any) -> Any:
        generated.append(name)
        return original(name, *args, **kwargs)

    monkeypatch.setattr(_blocks, "_generate", counting)
    # The interpreter's thresholds: with the tests' early ones, the frames that were already
    # running when the entry was compiled run the other block often enough to compile it.
    set_thresholds(monkeypatch, DEFAULT_THRESHOLDS)
    interpreted = interpret(_branchy)
    assert interpreted(15) == _branchy(15)
    assert _has_compiled_entry(_branchy, interpreted)
    # The compiled entry holds the entry's blocks: they are not compiled on their own too.
    assert generated == ["_compiled_entry_"]
