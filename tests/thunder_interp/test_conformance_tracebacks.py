"""Conformance: tracebacks of exceptions raised in interpreted code list the frames CPython lists,
with the same names and line numbers (and none of the interpreter's own frames).

Each snippet catches the exception inside the interpreted code and returns its traceback as
``(function, line)`` pairs, so CPython's and the interpreter's are compared exactly.
"""

import sys
import textwrap
import traceback

import pytest
from conformance import case

from thunder_interp import interpret

HELPERS = """
import traceback

def entries(e):
    return [(fs.name, fs.lineno) for fs in traceback.extract_tb(e.__traceback__)]

def walk(tb):
    out = []
    while tb is not None:
        out.append((tb.tb_frame.f_code.co_name, tb.tb_lineno))
        tb = tb.tb_next
    return out
"""


def tb_case(id, body, *args, **kwargs):
    return case(id, HELPERS + textwrap.dedent(body), *args, **kwargs)


CALLS = [
    tb_case(
        "nested_calls",
        """
        def level2(x):
            return 1 / x
        def level1(x):
            return level2(x)
        def f():
            try:
                level1(0)
            except ZeroDivisionError as e:
                return entries(e), walk(e.__traceback__)
        """,
    ),
    tb_case(
        "raise_statement_in_nested_calls",
        """
        def inner(n):
            if n == 0:
                raise ValueError("bottom")
            return inner(n - 1)
        def f():
            try:
                inner(3)
            except ValueError as e:
                return entries(e)
        """,
    ),
    tb_case(
        "same_error_many_times_in_a_loop",
        """
        def parse(text):
            return int(text)
        def f():
            out = []
            for text in ["1", "x", "2", "y", "z", "3", "w"]:
                try:
                    out.append(parse(text))
                except ValueError as e:
                    out.append(entries(e))
            return out
        """,
    ),
    tb_case(
        "methods_classmethods_staticmethods",
        """
        class Box:
            def __init__(self, value):
                if value < 0:
                    raise ValueError("negative")
                self.value = value
            def get(self, key):
                return {"a": 1}[key]
            @classmethod
            def make(cls, value):
                return cls(value)
            @staticmethod
            def check(value):
                assert value, "empty"
        def f():
            out = []
            for action in (lambda: Box.make(-1), lambda: Box(1).get("b"), lambda: Box.check(0)):
                try:
                    action()
                except Exception as e:
                    out.append((type(e).__name__, entries(e)))
            return out
        """,
    ),
    tb_case(
        "super_and_property",
        """
        class Base:
            def run(self):
                raise KeyError("base")
            @property
            def broken(self):
                return self.missing
        class Derived(Base):
            def run(self):
                return super().run()
        def f():
            out = []
            for action in (lambda: Derived().run(), lambda: Derived().broken):
                try:
                    action()
                except Exception as e:
                    out.append(entries(e))
            return out
        """,
    ),
    tb_case(
        "decorated_function_and_lambda",
        """
        import functools
        def deco(fn):
            @functools.wraps(fn)
            def wrapper(*args):
                return fn(*args)
            return wrapper
        @deco
        def target(x):
            return x.upper()
        bad = lambda x: x[10]
        def f():
            out = []
            for action in (lambda: target(1), lambda: bad("abc")):
                try:
                    action()
                except Exception as e:
                    out.append(entries(e))
            return out
        """,
    ),
    tb_case(
        "class_body_and_closure",
        """
        def make():
            secret = {}
            def read():
                return secret["x"]
            return read
        def f():
            out = []
            try:
                class Broken:
                    value = make()()
            except KeyError as e:
                out.append(entries(e))
            return out
        """,
    ),
]

C_FUNCTIONS = [
    tb_case(
        "errors_raised_by_c_functions",
        """
        def f():
            out = []
            actions = [
                lambda: int("x"),
                lambda: [][1],
                lambda: {}["k"],
                lambda: len(5),
                lambda: getattr(None, "nope"),
                lambda: "a" + 1,
                lambda: next(iter([])),
            ]
            for action in actions:
                try:
                    action()
                except Exception as e:
                    out.append((type(e).__name__, entries(e)))
            return out
        """,
    ),
    tb_case(
        "python_callback_called_by_c",
        """
        def key(x):
            if x == 2:
                raise ValueError("key")
            return x
        def double(x):
            return x * None
        def f():
            out = []
            for action in (lambda: sorted([1, 2, 3], key=key), lambda: list(map(double, [1]))):
                try:
                    action()
                except Exception as e:
                    out.append(entries(e))
            return out
        """,
    ),
]

GENERATORS = [
    tb_case(
        "generator_consumed_by_for",
        """
        def gen():
            yield 1
            raise KeyError("k")
        def f():
            try:
                for _ in gen():
                    pass
            except KeyError as e:
                return entries(e)
        """,
    ),
    tb_case(
        "generator_consumed_by_next_list_and_yield_from",
        """
        def gen():
            yield 1
            raise KeyError("k")
        def outer():
            yield from gen()
        def f():
            out = []
            g = gen()
            next(g)
            for action in (lambda: next(g), lambda: list(gen()), lambda: list(outer())):
                try:
                    action()
                except KeyError as e:
                    out.append(entries(e))
            return out
        """,
    ),
    tb_case(
        "generator_throw",
        """
        def gen():
            try:
                yield 1
            except ValueError:
                raise TypeError("converted")
        def f():
            g = gen()
            next(g)
            try:
                g.throw(ValueError("in"))
            except TypeError as e:
                return entries(e), entries(e.__context__)
        """,
    ),
    tb_case(
        "comprehensions",
        """
        def f():
            out = []
            data = [1, 0]
            actions = [
                lambda: [1 / x for x in data],
                lambda: {x: 1 / x for x in data},
                lambda: {1 / x for x in data},
                lambda: list(1 / x for x in data),
                lambda: sum(1 / x for x in data),
            ]
            for action in actions:
                try:
                    action()
                except ZeroDivisionError as e:
                    out.append(entries(e))
            return out
        """,
    ),
]

RERAISES = [
    tb_case(
        "bare_raise_in_handler",
        """
        def inner():
            raise ValueError("v")
        def middle():
            try:
                inner()
            except ValueError:
                raise
        def f():
            try:
                middle()
            except ValueError as e:
                return entries(e)
        """,
    ),
    tb_case(
        "raise_by_name_in_other_function",
        """
        def inner():
            raise ValueError("v")
        def again(e):
            raise e
        def f():
            try:
                inner()
            except ValueError as e:
                try:
                    again(e)
                except ValueError as e2:
                    return entries(e2)
        """,
    ),
    tb_case(
        "raise_from",
        """
        def inner():
            return {}["missing"]
        def outer():
            try:
                inner()
            except KeyError as e:
                raise RuntimeError("wrapped") from e
        def f():
            try:
                outer()
            except RuntimeError as e:
                return entries(e), entries(e.__cause__), e.__suppress_context__
        """,
    ),
    tb_case(
        "error_in_handler_chains_context",
        """
        def f():
            try:
                try:
                    1 / 0
                except ZeroDivisionError:
                    [][0]
            except IndexError as e:
                return entries(e), entries(e.__context__)
        """,
    ),
    tb_case(
        "finally_reraises",
        """
        def inner(log):
            try:
                raise ValueError("v")
            finally:
                log.append("cleanup")
        def f():
            log = []
            try:
                inner(log)
            except ValueError as e:
                return entries(e), log
        """,
    ),
    tb_case(
        "nested_handlers_reraise_through_levels",
        """
        def a():
            raise KeyError("k")
        def b():
            try:
                a()
            except KeyError:
                raise
        def c():
            try:
                b()
            except KeyError as e:
                raise e
        def f():
            try:
                c()
            except KeyError as e:
                return entries(e)
        """,
    ),
    tb_case(
        "with_statement_exit_does_not_suppress",
        """
        class Manager:
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                return False
        class Failing:
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                raise RuntimeError("exit")
        def f():
            out = []
            try:
                with Manager():
                    {}["k"]
            except KeyError as e:
                out.append(entries(e))
            try:
                with Failing():
                    {}["k"]
            except RuntimeError as e:
                out.append((entries(e), entries(e.__context__)))
            return out
        """,
    ),
    tb_case(
        "traceback_text",
        """
        def inner():
            raise ValueError("text")
        def f():
            try:
                inner()
            except ValueError as e:
                return "".join(traceback.format_exception_only(type(e), e)), traceback.format_tb(
                    e.__traceback__
                )
        """,
    ),
]

CASES = CALLS + C_FUNCTIONS + GENERATORS + RERAISES


@pytest.mark.parametrize("snippet", CASES)
def test_tracebacks(snippet):
    snippet.assert_ok()


def _level2(x):
    return 1 / x


def _level1(x):
    return _level2(x)


def _entry(x):
    return _level1(x)


def _summary(fn):
    try:
        fn(0)
    except ZeroDivisionError as e:
        return [(fs.name, fs.lineno) for fs in traceback.extract_tb(e.__traceback__)]
    raise AssertionError("no error")


def test_traceback_of_an_escaping_exception():
    # Past the call boundary the interpreter's entry point shows once, then the user's frames.
    native = _summary(_entry)
    interpreted = _summary(interpret(_entry))
    assert interpreted[0] == native[0]
    assert [entry[0] for entry in interpreted[1:2]] == ["__call__"]
    assert interpreted[2:] == native[1:]
    assert sys.exc_info() == (None, None, None)
