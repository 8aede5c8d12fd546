"""Benchmark: thunder_interp against CPython on small workloads.

Prints, for each workload, CPython's time and the ratio interpreted/CPython in three settings:
plain ``interpret(fn)``; ``+prov``, ``interpret(fn, provenance=True)``; and ``+hooks``,
``interpret(fn, callbacks=...)`` with the hooks thunder's tracing sets (``Binder.callbacks``:
loads, stores, deletions, opaque calls, special lookups, identity), here doing nothing but
passing values through. Tracing (``thunder.compile_entry``) interprets with those callbacks, not
with provenance; both make the interpreter run its hooked variants. Each setting is measured
twice:

- *warm*: one run of a function the interpreter has run before (best of several);
- *first 3 runs*: the first three runs of code the interpreter has never seen, against CPython's
  first three runs of the same new code. Tracing runs library code a few times (once per
  compile), so this is the cost it pays: decoding, compiling ops and blocks, warming up. Each
  trial compiles the workloads' source anew (new code objects and classes, so no cache of the
  interpreter, all keyed by code object or type, knows them), and each of the three runs is a new
  ``interpret(fn)`` (a compile makes one), as is CPython's new function.

Run: ``python -m benchmarks interpreter [--quick]``.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import itertools
import sys
import time
from collections.abc import Callable
from typing import Any

from thunder_interp import Callbacks, interpret


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


def _time_first_runs(
    make: Callable[[], Callable[[int], Any]], variants: int, repeat: int
) -> list[float]:
    """Per variant ``k``, the best CPU time of calling ``make()(k)`` three times (its first three
    runs: ``make`` compiles the workloads anew), the variants taking turns."""
    best = [float("inf")] * variants
    for _ in range(repeat):
        for k in range(variants):
            run = make()
            start = time.process_time()
            for _ in range(3):
                run(k)
            best[k] = min(best[k], time.process_time() - start)
    return best


_WORKLOAD_OBJECTS: tuple[Any, ...] = (
    int_loop,
    fib,
    Point,
    method_calls,
    Vec,
    special_methods,
    numbers,
    squares,
    evens,
    generator_pipeline,
)


_TRIALS = itertools.count(1)


def _fresh_workloads() -> dict[str, Any]:
    """The workloads compiled anew from their source: new code objects, new classes.

    Each compilation starts on a new line: code objects that compare equal (same bytecode,
    names, constants and lines) share the interpreter's memos, so the lines must differ for the
    code to be new to it."""
    source = "\n\n".join(inspect.getsource(obj) for obj in _WORKLOAD_OBJECTS)
    namespace: dict[str, Any] = {"__name__": __name__, "Any": Any}
    header = "from __future__ import annotations\n" + "\n" * next(_TRIALS)
    exec(compile(header + source, __file__, "exec"), namespace)
    return namespace


def _pass(*args: Any) -> None:
    return None


def _second(first: Any, value: Any, *rest: Any) -> Any:
    return value  # load_global(name, value, ...), load_closure_cell(name, value, ...)


def _third(obj: Any, name: str, value: Any, provenance: Any) -> Any:
    return value  # load_attribute(obj, name, value, provenance)


def _opaque_call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return fn(*args, **kwargs)


# The hooks thunder's tracing sets (thunder/binding/calls.py: CallsMixin.callbacks), passing
# values through.
TRACING_HOOKS = Callbacks(
    load_global=_second,
    load_closure_cell=_second,
    load_attribute=_third,
    load_attribute_missing=_pass,
    load_generic_attribute=_third,
    load_generic_attribute_missing=_pass,
    store_global=_pass,
    store_closure_cell=_pass,
    store_attribute=_pass,
    store_item=_pass,
    load_item=_pass,
    load_item_missing=_pass,
    delete_global=_pass,
    delete_closure_cell=_pass,
    delete_attribute=_pass,
    delete_item=_pass,
    opaque_call=_opaque_call,
    special_lookup=_pass,
    compare_identity=_pass,
)

# The interpreted settings: plain, provenance on, tracing's hooks.
SETTINGS: list[dict[str, Any]] = [{}, {"provenance": True}, {"callbacks": TRACING_HOOKS}]


def _first_runs(name: str, n: int) -> Callable[[], Callable[[int], Any]]:
    """A maker of one trial: variant 0 runs CPython, variant k the interpreter in SETTINGS[k-1]."""

    def make() -> Callable[[int], Any]:
        fn = _fresh_workloads()[name]

        def run(variant: int) -> Any:
            if variant == 0:
                return fn(n)
            return interpret(fn, **SETTINGS[variant - 1])(n)

        return run

    return make


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
    print("ratios interpreted/CPython; warm: one run; first 3: the first three runs of new code")
    header = (
        f"{'workload':<20}{'CPython':>10}{'warm':>7}{'+prov':>7}{'+hooks':>7}"
        f"{'CPython x3':>12}{'first 3':>8}{'+prov':>7}{'+hooks':>7}"
    )
    print(header)
    print("-" * len(header))
    for name, fn, n in WORKLOADS:
        if options.quick:
            n = max(n // 10, 10) if fn is not fib else 15
        expected = fn(n)
        interpreted = [interpret(fn, **setting) for setting in SETTINGS]
        assert all(run(n) == expected for run in interpreted)
        warm = _time_interleaved(
            [lambda: fn(n), *[functools.partial(run, n) for run in interpreted]], repeat
        )
        first = _time_first_runs(_first_runs(fn.__name__, n), 1 + len(SETTINGS), repeat)
        print(
            f"{name:<20}{warm[0] * 1e3:>8.2f}ms"
            + "".join(f"{t / warm[0]:>6.1f}x" for t in warm[1:])
            + f"{first[0] * 1e3:>10.2f}ms"
            + "".join(f"{t / first[0]:>6.1f}x" for t in first[1:])
        )


if __name__ == "__main__":
    main()
