"""Benchmark: thunder_interp against CPython on small workloads.

Prints, for each workload, CPython's time and the ratio interpreted/CPython with provenance off
and on. Run: ``python benchmarks/interpreter.py [--quick]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from thunder_interp import interpret


def int_loop(n: int) -> int:
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def fib(n: int) -> int:
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


class Point:
    def __init__(self, x: int, y: int) -> None:
        self.x = x
        self.y = y

    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)

    def shifted(self, d: int) -> Point:
        return Point(self.x + d, self.y - d)


def method_calls(n: int) -> int:
    p = Point(1, 2)
    total = 0
    for i in range(n):
        total += p.norm1()
        p = p.shifted(i % 3 - 1)
    return total


class Vec:
    """Special methods and a property, called implicitly by the interpreted loop."""

    def __init__(self, x: int) -> None:
        self.x = x

    def __add__(self, other: Vec) -> Vec:
        return Vec(self.x + other.x)

    def __len__(self) -> int:
        return self.x % 5

    def __bool__(self) -> bool:
        return self.x != 0

    @property
    def double(self) -> int:
        return 2 * self.x


def special_methods(n: int) -> int:
    v = Vec(0)
    one = Vec(1)
    total = 0
    for _ in range(n):
        v = v + one
        if v:
            total += len(v) + v.double
    return total


def numbers(n: int) -> Any:
    yield from range(n)


def squares(xs: Any) -> Any:
    for x in xs:
        yield x * x


def evens(xs: Any) -> Any:
    for x in xs:
        if x % 2 == 0:
            yield x


def generator_pipeline(n: int) -> int:
    return sum(evens(squares(numbers(n))))


def _time_interleaved(fns: list[Callable[[], Any]], repeat: int) -> list[float]:
    """Best CPU time of each function, run in turn (robust to a machine whose load varies)."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            start = time.process_time()
            fn()
            best[k] = min(best[k], time.process_time() - start)
    return best


WORKLOADS: list[tuple[str, Callable[[int], Any], int]] = [
    ("integer loop", int_loop, 200_000),
    ("recursion (fib)", fib, 20),
    ("method calls", method_calls, 30_000),
    ("generator pipeline", generator_pipeline, 50_000),
    ("special methods", special_methods, 20_000),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller inputs, one repetition")
    options, _unknown = parser.parse_known_args()
    repeat = 1 if options.quick else 7
    print(f"Python {sys.version.split()[0]}")
    header = (
        f"{'workload':<22}{'CPython':>12}{'interp':>12}{'ratio':>9}{'interp+prov':>14}{'ratio':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, fn, n in WORKLOADS:
        if options.quick:
            n = max(n // 10, 10) if fn is not fib else 15
        expected = fn(n)
        plain = interpret(fn)
        with_provenance = interpret(fn, provenance=True)
        assert plain(n) == expected and with_provenance(n) == expected
        base, t_plain, t_prov = _time_interleaved(
            [lambda: fn(n), lambda: plain(n), lambda: with_provenance(n)], repeat
        )
        print(
            f"{name:<22}{base * 1e3:>10.2f}ms{t_plain * 1e3:>10.1f}ms{t_plain / base:>8.1f}x"
            f"{t_prov * 1e3:>12.1f}ms{t_prov / base:>8.1f}x"
        )


if __name__ == "__main__":
    main()
