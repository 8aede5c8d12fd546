"""Suspending an interpretation at a call and resuming it, against CPython's direct run.

Each snippet defines ``f`` and calls the global ``native`` (a plain Python function the tests
mark). The snippet runs twice, each time in a fresh namespace: directly under CPython, and
interpreted with ``suspendable=True`` and a lookaside that suspends at every call of ``native``;
the driver then makes the call itself and resumes with its result (or its exception), until ``f``
returns. Both runs must give the same outcome (value, or exception type and message) and the same
log of side effects (which shows that nothing of the program ran at a suspension: no ``finally``,
``except`` or ``__exit__``), and the interpreted run suspends once per call of ``native``.
"""

from __future__ import annotations

import dataclasses
import dis
import sys
import textwrap
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from thunder_interp import (
    UNBOUND,
    Callbacks,
    Suspended,
    SuspendedFrame,
    Suspension,
    SuspensionRefused,
    interpret,
    suspend,
)

CALLS = {"CALL", "CALL_KW", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_METHOD", "CALL_FUNCTION_EX"}


def _namespace(source: str) -> dict[str, Any]:
    log: list[Any] = []

    def native(*args: Any, **kwargs: Any) -> Any:
        log.append(("native", args, tuple(sorted(kwargs.items()))))
        if args and args[0] == "boom":
            raise ValueError("boom from native")
        return sum(a for a in args if isinstance(a, int)) * 10 + len(kwargs)

    ns: dict[str, Any] = {"native": native, "log": log, "__name__": "snippet"}
    exec(compile(textwrap.dedent(source), "<snippet>", "exec"), ns)
    return ns


def _outcome(run: Callable[[], Any]) -> tuple[Any, ...]:
    try:
        return ("value", run())
    except Exception as e:
        return ("raised", type(e).__name__, str(e))


def _drive(ifn: Any, args: tuple[Any, ...], suspensions: list[Suspension]) -> Any:
    """Call ``ifn``; at each suspension make the call and resume with what it gave."""
    try:
        return ifn(*args)
    except Suspended as s:
        suspension = s.suspension
    while True:
        suspensions.append(suspension)
        value: Any = None
        error: BaseException | None = None
        try:
            value = suspension.callable(*suspension.args, **suspension.kwargs)
        except Exception as e:
            error = e
        try:
            return ifn.resume(suspension, value, exception=error)
        except Suspended as s:
            suspension = s.suspension


def _suspending(marked: Any) -> dict[Any, Any]:
    return {marked: lambda *a, **k: suspend(marked, a, k)}


def assert_suspends_ok(source: str, *args: Any, marked: str = "native", **options: Any) -> None:
    expected_ns = _namespace(source)
    expected = _outcome(lambda: expected_ns["f"](*args))
    ns = _namespace(source)
    target = eval(marked, ns)
    ifn = interpret(ns["f"], suspendable=True, lookasides=_suspending(target), **options)
    suspensions: list[Suspension] = []
    got = _outcome(lambda: _drive(ifn, args, suspensions))
    assert got == expected
    assert ns["log"] == expected_ns["log"]
    calls = [e for e in expected_ns["log"] if isinstance(e, tuple) and e[0] == "native"]
    if marked == "native":
        assert len(suspensions) == len(calls) > 0
    else:
        assert suspensions
    for suspension in suspensions:
        for frame in suspension.frames:
            by_offset = {i.offset: i.opname for i in dis.get_instructions(frame.code)}
            assert by_offset[frame.offset] in CALLS


CASES = {
    "one_deep": """
        def f(x):
            return native(x) + 1
    """,
    "values_on_stack": """
        def g(x):
            return native(x) - 1
        def f(a, b, x):
            return a + g(x) * b
    """,
    "three_deep": """
        def h(x):
            log.append(("h", x))
            return native(x, x)
        def g(x):
            return 2 * h(x + 1) + x
        def f(x):
            return [x, g(x), x]
    """,
    "recursion": """
        def f(n):
            if n == 0:
                return native(n)
            return n + native(n) + f(n - 1)
    """,
    "argument_lists": """
        def h(*a):
            return a
        def f(x):
            return h(1, native(x), 3, native(x + 1))
    """,
    "for_over_list": """
        def f(xs):
            out = []
            for v in xs:
                out.append(native(v))
                log.append(("after", v))
            return out
    """,
    "for_over_range_accumulate": """
        def g(i):
            return native(i) // 10
        def f(n):
            total = 0
            for i in range(n):
                total += n + g(i)
            return total
    """,
    "while_loop_break": """
        def f(n):
            i = 0
            while True:
                i += 1
                if native(i) > 25:
                    break
            return i
    """,
    "list_comprehension": """
        def f(xs):
            return [native(v) + 1 for v in xs if v != 2]
    """,
    "dict_and_nested_comprehension": """
        def f(xs):
            d = {v: native(v) for v in xs}
            return d, [[native(a, b) for b in xs] for a in xs[:2]]
    """,
    "keywords": """
        def f(x):
            return native(x, scale=2), native(x, 1, a=1, b=2)
    """,
    "star_args": """
        def f(xs, kw):
            return native(*xs), native(*xs, **kw), native(0, **kw)
    """,
    "interpreted_callee_with_keywords": """
        def g(x, *, k=2, **rest):
            return native(x) * k + len(rest)
        def f(x):
            return g(x, k=3, extra=1) + g(*[x]) + g(**{"x": x})
    """,
    "methods": """
        class Acc:
            def __init__(self):
                self.total = 0
            def add(self, v):
                self.total += native(v)
                return self
        def f(xs):
            acc = Acc()
            for v in xs:
                acc.add(v)
            bound = acc.add
            bound(100)
            return acc.total
    """,
    "callable_object_and_partial": """
        import functools
        class Scale:
            def __init__(self, k):
                self.k = k
            def __call__(self, v):
                return native(v) * self.k
        def g(a, b):
            return native(a, b)
        def f(x):
            return Scale(3)(x) + functools.partial(g, 1)(x)
    """,
    "closures_and_cells": """
        def f(x):
            total = 0
            def add(v):
                nonlocal total
                total += native(v)
                return total
            add(x)
            y = add(x + 1)
            return total, y, (lambda v: native(v) + total)(2)
    """,
    "try_finally": """
        def g(x):
            try:
                log.append("try")
                return native(x)
            finally:
                log.append("finally")
        def f(x):
            try:
                return g(x) + 1
            finally:
                log.append("outer finally")
    """,
    "try_except_around_call": """
        def f(x):
            try:
                y = native(x)
                log.append(("got", y))
                raise KeyError(y)
            except KeyError as e:
                log.append("caught")
                return ("caught", e.args)
    """,
    "raise_in_inner_caught_outside": """
        def g(x):
            y = native(x)
            if y > 5:
                raise ValueError(f"too big: {y}")
            return y
        def f(x):
            try:
                return g(x)
            except ValueError as e:
                log.append(("handled", str(e)))
                return -1
    """,
    "raise_uncaught": """
        def g(x):
            return native(x) / 0
        def f(x):
            try:
                return g(x)
            finally:
                log.append("cleanup")
    """,
    "native_raises_caught": """
        def g(x):
            try:
                return native("boom", x)
            except ValueError as e:
                log.append(("caught", str(e)))
                return 7
        def f(x):
            return g(x) + native(x)
    """,
    "native_raises_into_outer_frame": """
        def g(x):
            return native("boom", x)
        def f(x):
            try:
                g(x)
            except ValueError as e:
                return ("outer caught", str(e))
    """,
    "native_raises_uncaught": """
        def f(x):
            return native("boom", x)
    """,
    "with_blocks": """
        class CM:
            def __init__(self, name, swallow=False):
                self.name, self.swallow = name, swallow
            def __enter__(self):
                log.append(("enter", self.name))
                return self
            def __exit__(self, *exc):
                log.append(("exit", self.name, exc[0].__name__ if exc[0] else None))
                return self.swallow
        def f(x):
            with CM("a") as a, CM("b"):
                y = native(x)
            with CM("c", swallow=True):
                z = native(y)
                raise RuntimeError(z)
            return y, a.name
    """,
    "with_block_exception_propagates": """
        class CM:
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                log.append(("exit", exc[0].__name__ if exc[0] else None))
        def g(x):
            with CM():
                return native(x) // 0
        def f(x):
            try:
                return g(x)
            except ZeroDivisionError:
                return "zde"
    """,
    "boolean_and_conditional_expressions": """
        def f(x):
            a = native(0) or native(x)
            b = native(x) if x > 1 else native(x + 1)
            return a, b, 0 < native(x) < 1000
    """,
    "fstring_subscript_unpacking": """
        def f(x, d):
            s = f"<{native(x)}:{native(x + 1)!r}>"
            v = d[native(1)]
            p, q = native(x), native(2 * x)
            return s, v, p, q
    """,
    "globals_written_after_resume": """
        counter = 0
        def g(x):
            global counter
            counter += native(x)
            return counter
        def f(x):
            g(x)
            g(x + 1)
            return counter
    """,
    "frames_seen_after_resume": """
        import sys
        def g(x):
            y = native(x)
            caller = sys._getframe(1)
            return y, caller.f_code.co_name, caller.f_lineno - caller.f_code.co_firstlineno
        def f(x):
            return g(x)
    """,
    "frame_chain_seen_after_resume": """
        import sys
        def chain():
            frame, names = sys._getframe(1), []
            while frame is not None and frame.f_code.co_filename == "<snippet>":
                names.append((frame.f_code.co_name, frame.f_lineno))
                frame = frame.f_back
            return names
        def h(x):
            native(x)
            return chain()
        def g(x):
            return [x, h(x)]
        def f(x):
            return g(x)
    """,
    "native_raises_in_with": """
        class CM:
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                log.append(("exit", exc[0].__name__ if exc[0] else None, str(exc[1])))
                return True
        def f(x):
            with CM():
                native("boom", x)
                log.append("not reached")
            return "swallowed"
    """,
    "return_in_finally_path": """
        def f(x):
            for i in range(3):
                try:
                    if i == 1:
                        continue
                    log.append(native(i))
                finally:
                    log.append(("fin", i))
            return x
    """,
    "class_body_value": """
        def f(x):
            class K:
                attr = 5
            return native(K.attr, x)
    """,
}

ARGS = {
    "values_on_stack": (3, 4, 5),
    "recursion": (3,),
    "for_over_list": ([1, 2, 3],),
    "for_over_range_accumulate": (4,),
    "while_loop_break": (0,),
    "list_comprehension": ([1, 2, 3],),
    "dict_and_nested_comprehension": ([1, 2, 3],),
    "star_args": ([1, 2], {"k": 3}),
    "methods": ([1, 2],),
    "fstring_subscript_unpacking": (1, {10: "ten"}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_suspend_and_resume_like_cpython(name: str) -> None:
    assert_suspends_ok(CASES[name], *ARGS.get(name, (1,)))


@pytest.mark.parametrize("options", [{"record_history": True}, {"provenance": True}])
def test_other_modes(options: dict[str, Any]) -> None:
    assert_suspends_ok(CASES["three_deep"], 1, **options)
    assert_suspends_ok(CASES["try_finally"], 2, **options)


def test_suspend_at_a_method() -> None:
    source = """
        class C:
            def __init__(self, k):
                self.k = k
            def compute(self, v):
                log.append(("compute", v))
                return v * self.k
        def f(x):
            c = C(3)
            bound = c.compute
            return c.compute(x) + bound(x + 1) + C.compute(c, 2)
    """
    assert_suspends_ok(source, 4, marked="C.compute")


def test_suspend_at_a_builtin_through_the_opaque_call_hook() -> None:
    def f(x: bytes) -> Any:
        return [zlib.crc32(x) + 1, zlib.adler32(x)]

    def opaque_call(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if fn is zlib.crc32:
            suspend(fn, args, kwargs)
        return fn(*args, **kwargs)

    ifn = interpret(f, suspendable=True, callbacks=Callbacks(opaque_call=opaque_call))
    suspensions: list[Suspension] = []
    assert _drive(ifn, (b"abc",), suspensions) == f(b"abc")
    assert [s.callable for s in suspensions] == [zlib.crc32]
    assert suspensions[0].args == (b"abc",)


def _first_suspension(fn: Any, *args: Any, marked: Any = None) -> tuple[Any, Suspension]:
    ifn = interpret(fn, suspendable=True, lookasides=_suspending(marked))
    with pytest.raises(Suspended) as info:
        ifn(*args)
    return ifn, info.value.suspension


def test_the_state_captured() -> None:
    ns = _namespace(
        """
        def h(*a):
            return a
        def g(a, b):
            c = a * 2
            return h(1, native(b), 3)
        def f(x):
            y = [x]
            return len(y) + g(x, x + 1)[1]
        """
    )
    ifn, suspension = _first_suspension(ns["f"], 5, marked=ns["native"])
    assert suspension.callable is ns["native"]
    assert suspension.args == (6,)
    assert suspension.kwargs == {}
    outer, inner = suspension.frames
    assert (outer.function, inner.function) == (ns["f"], ns["g"])
    assert outer.code is ns["f"].__code__
    assert dict(zip(outer.local_names, outer.locals)) == {"x": 5, "y": [5]}
    assert dict(zip(inner.local_names, inner.locals)) == {"a": 5, "b": 6, "c": 10}
    # Below the call: what the enclosing expressions computed so far (and C NULLs, 3.11+).
    assert [v for v in inner.stack if v is not UNBOUND] == [ns["h"], 1]
    assert [v for v in outer.stack if v is not UNBOUND] == [1]
    assert ns["log"] == []  # the native call was not made
    assert ifn.resume(suspension, 60) == 1 + 60


def test_resume_with_other_values() -> None:
    ns = _namespace(
        """
        def f(a, x):
            y = x * 2
            return a + native(y) * y
        """
    )
    ifn, suspension = _first_suspension(ns["f"], 1, 3, marked=ns["native"])
    (frame,) = suspension.frames
    names = frame.local_names
    assert ifn.resume(suspension, 5) == 1 + 5 * 6
    # Another value in a local slot, and below the call.
    new_locals = tuple(100 if n == "y" else v for n, v in zip(names, frame.locals))
    stack = list(frame.stack)
    assert stack[0] == 1
    stack[0] = 1000
    replaced = dataclasses.replace(frame, locals=new_locals, stack=tuple(stack))
    other = dataclasses.replace(suspension, frames=(replaced,))
    assert ifn.resume(other, 5) == 1000 + 5 * 100
    # The same suspension again, unchanged.
    assert ifn.resume(suspension, 7) == 1 + 7 * 6


def test_resume_by_another_suspendable_function() -> None:
    ns = _namespace(CASES["three_deep"])
    _, suspension = _first_suspension(ns["f"], 2, marked=ns["native"])
    other = interpret(lambda: None, suspendable=True, record_history=True)
    assert other.resume(suspension, 10) == [2, 2 * 10 + 2, 2]
    assert any(e.function == "g" for e in other.history)


def test_a_resume_needs_a_call_and_the_slots() -> None:
    ns = _namespace(CASES["one_deep"])
    ifn, suspension = _first_suspension(ns["f"], 1, marked=ns["native"])
    (frame,) = suspension.frames
    with pytest.raises(ValueError, match="not a call instruction"):
        ifn.resume(dataclasses.replace(suspension, frames=(dataclasses.replace(frame, offset=0),)))
    with pytest.raises(ValueError, match="local slots"):
        bad = dataclasses.replace(frame, locals=frame.locals + (1,))
        ifn.resume(dataclasses.replace(suspension, frames=(bad,)))
    built = SuspendedFrame(ns["f"], frame.offset, frame.locals, frame.stack, frame.blocks)
    assert ifn.resume(Suspension((built,), None, (), {}), 41) == 42


REFUSED = {
    "generator": (
        """
        def gen(xs):
            for v in xs:
                yield native(v)
        def f(x):
            return list(gen([x]))
        """,
        "generator",
    ),
    "generator_expression": (
        """
        def f(x):
            return sum(native(v) for v in [x, x])
        """,
        "generator",
    ),
    "except_clause": (
        """
        def f(x):
            try:
                raise KeyError(x)
            except KeyError:
                return native(x)
        """,
        "except clause",
    ),
    "exceptional_finally": (
        """
        def g(x):
            try:
                raise KeyError(x)
            finally:
                native(x)
        def f(x):
            try:
                g(x)
            except KeyError:
                return "k"
        """,
        "except clause",
    ),
    "map": (
        """
        def f(x):
            return list(map(native, [x, x]))
        """,
        "not made by a call instruction",
    ),
    "sorted_key": (
        """
        def f(x):
            return sorted([x, x + 1], key=native)
        """,
        "not made by a call instruction",
    ),
    "class_instantiation": (
        """
        class C:
            def __init__(self, x):
                self.v = native(x)
        def f(x):
            return C(x).v
        """,
        "was called by",
    ),
    "implicit_special_method": (
        """
        class C:
            def __getitem__(self, k):
                return native(k)
        def f(x):
            return C()[x]
        """,
        "was called by",
    ),
    "property": (
        """
        class C:
            @property
            def v(self):
                return native(1)
        def f(x):
            return C().v
        """,
        "was called by",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused(name: str) -> None:
    source, reason = REFUSED[name]
    ns = _namespace(source)
    ifn = interpret(ns["f"], suspendable=True, lookasides=_suspending(ns["native"]))
    with pytest.raises(SuspensionRefused, match=reason) as info:
        ifn(1)
    assert reason in info.value.reason
    # The lookaside may make the call itself where a suspension is refused.
    native = ns["native"]

    def suspend_or_call(*args: Any, **kwargs: Any) -> Any:
        try:
            suspend(native, args, kwargs)
        except SuspensionRefused:
            return native(*args, **kwargs)

    expected_ns = _namespace(source)
    expected = _outcome(lambda: expected_ns["f"](1))
    ns = _namespace(source)
    native = ns["native"]
    ifn = interpret(ns["f"], suspendable=True, lookasides={native: suspend_or_call})
    assert _outcome(lambda: ifn(1)) == expected
    assert ns["log"] == expected_ns["log"]


def test_refused_where_not_suspendable() -> None:
    ns = _namespace(CASES["one_deep"])
    ifn = interpret(ns["f"], lookasides=_suspending(ns["native"]))
    with pytest.raises(SuspensionRefused, match="not suspendable"):
        ifn(1)
    with pytest.raises(SuspensionRefused, match="outside an interpretation"):
        suspend(ns["native"], (1,))


def test_the_program_cannot_catch_a_suspension_or_a_refusal() -> None:
    ns = _namespace(
        """
        def f(x):
            try:
                return native(x)
            except BaseException:
                log.append("caught")
                return "caught"
        """
    )
    ifn = interpret(ns["f"], suspendable=True, lookasides=_suspending(ns["native"]))
    with pytest.raises(Suspended):
        ifn(1)
    assert ns["log"] == []
    plain = interpret(ns["f"], lookasides=_suspending(ns["native"]))
    with pytest.raises(SuspensionRefused):
        plain(1)
    assert ns["log"] == []


def test_suspend_where_the_interpretation_started_in_an_except_clause() -> None:
    try:
        raise KeyError("outside")
    except KeyError:
        assert_suspends_ok(CASES["three_deep"], 1)
        assert_suspends_ok(CASES["try_except_around_call"], 1)


def test_tracebacks_after_resume() -> None:
    source = """
        def g(x):
            y = native(x)
            return y / 0
        def f(x):
            return g(x) + 1
    """

    def frames_of(run: Callable[[], Any]) -> list[tuple[str, int]]:
        try:
            run()
        except ZeroDivisionError as e:
            import traceback

            return [
                (entry.name, entry.lineno or 0)
                for entry in traceback.extract_tb(e.__traceback__)
                if entry.filename == "<snippet>"
            ]
        raise AssertionError("no exception")

    expected_ns = _namespace(source)
    ns = _namespace(source)
    ifn = interpret(ns["f"], suspendable=True, lookasides=_suspending(ns["native"]))
    assert frames_of(lambda: _drive(ifn, (1,), [])) == frames_of(lambda: expected_ns["f"](1))


def test_recursion_limit_after_resume() -> None:
    ns = _namespace(
        """
        def deep(n):
            return 0 if n == 0 else 1 + deep(n - 1)
        def g(x):
            native(x)
            return deep(x)
        def f(x):
            try:
                return g(x)
            except RecursionError:
                return "too deep"
        """
    )
    ifn = interpret(ns["f"], suspendable=True, lookasides=_suspending(ns["native"]))
    assert _drive(ifn, (50,), []) == 50
    assert _drive(ifn, (sys.getrecursionlimit() + 10,), []) == "too deep"
