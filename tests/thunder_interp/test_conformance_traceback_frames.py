"""Conformance: the frames of a traceback caught in interpreted code (``tb.tb_frame``) are those
CPython shows: the real code object, globals, locals, current line and caller of each function.

Each snippet walks ``e.__traceback__`` (or ``sys.exc_info()[2]``) inside the interpreted code
and returns what it read, so CPython's values and the interpreter's are compared exactly.
"""

import textwrap

import pytest
from conformance import case

HELPERS = """
import sys
import traceback

def describe(tb, top=None):
    out = []
    while tb is not None:
        frame = tb.tb_frame
        code = frame.f_code
        out.append(
            (
                code.co_name,
                code.co_firstlineno,
                tb.tb_lineno - code.co_firstlineno,
                frame.f_lineno - code.co_firstlineno,
                code is globals().get(code.co_name, describe).__code__,
                frame.f_globals is globals(),
            )
        )
        tb = tb.tb_next
    return out

def own_locals(frame):
    return {k: v for k, v in frame.f_locals.items() if not k.startswith("_")}
"""


def tbf_case(id, body, *args, **kwargs):
    return case(id, HELPERS + textwrap.dedent(body), *args, **kwargs)


CASES = [
    tbf_case(
        "code_globals_and_lines",
        """
        def inner(a):
            b = a * 2
            return 1 / (b - b)
        def middle(x):
            y = x + 1
            return inner(y)
        def f():
            try:
                middle(3)
            except ZeroDivisionError as e:
                return describe(e.__traceback__), describe(sys.exc_info()[2])
        """,
    ),
    tbf_case(
        "line_offset_from_first_line",
        """
        def inner():
            x = 1
            raise ValueError(x)
        def f():
            try:
                inner()
            except ValueError as e:
                tb = e.__traceback__
                return [
                    (t.tb_frame.f_code.co_name, t.tb_lineno - t.tb_frame.f_code.co_firstlineno)
                    for t in (tb, tb.tb_next)
                ]
        """,
    ),
    tbf_case(
        "locals_of_each_frame",
        """
        def inner(a, *rest, **named):
            b = [a, rest, named]
            c = None
            del c
            raise KeyError(a)
        def middle(x):
            y = x + 1
            z = "z"
            return inner(y, 1, 2, k=3)
        def f():
            w = "w"
            try:
                middle(3)
            except KeyError as _e:
                tb = _e.__traceback__.tb_next
                return own_locals(tb.tb_frame), own_locals(tb.tb_next.tb_frame)
        """,
    ),
    tbf_case(
        "locals_of_cells_and_recursion",
        """
        def rec(n):
            captured = n * 10
            def use():
                return captured
            if n == 0:
                raise ValueError("bottom")
            return rec(n - 1)
        def f():
            try:
                rec(2)
            except ValueError as _e:
                out = []
                tb = _e.__traceback__.tb_next
                while tb is not None:
                    frame = tb.tb_frame
                    out.append((frame.f_locals["n"], frame.f_locals["captured"], tb.tb_lineno))
                    tb = tb.tb_next
                return out
        """,
    ),
    tbf_case(
        "f_back_links_the_frames",
        """
        def inner():
            raise ValueError("v")
        def middle():
            return inner()
        def f():
            try:
                middle()
            except ValueError as e:
                tb = e.__traceback__
                frames = []
                while tb is not None:
                    frames.append(tb.tb_frame)
                    tb = tb.tb_next
                return (
                    [fr.f_back is prev for prev, fr in zip(frames, frames[1:])],
                    [fr.f_back.f_code.co_name for fr in frames[1:]],
                    frames[0] is sys._getframe(),
                )
        """,
    ),
    tbf_case(
        "current_line_of_the_catching_frame",
        """
        def inner():
            raise ValueError("v")
        def f():
            try:
                inner()
            except ValueError as e:
                frame = e.__traceback__.tb_frame
                first = frame.f_lineno - f.__code__.co_firstlineno
                second = frame.f_lineno - f.__code__.co_firstlineno
                inner_frame = e.__traceback__.tb_next.tb_frame
                return first, second, inner_frame.f_lineno - inner.__code__.co_firstlineno
        """,
    ),
    tbf_case(
        "extract_tb_and_format",
        """
        def inner(d):
            return d["missing"]
        def f():
            try:
                inner({})
            except KeyError as e:
                summary = traceback.extract_tb(e.__traceback__)
                return (
                    [(fs.name, fs.lineno, fs.line) for fs in summary],
                    [(fr.f_code.co_name, line) for fr, line in traceback.walk_tb(e.__traceback__)],
                )
        """,
    ),
    tbf_case(
        "methods_and_generators",
        """
        class Box:
            def __init__(self, v):
                self.v = v
            def boom(self):
                items = (1 / x for x in [self.v])
                return list(items)
        def f():
            try:
                Box(0).boom()
            except ZeroDivisionError as e:
                out = []
                tb = e.__traceback__
                while tb is not None:
                    code = tb.tb_frame.f_code
                    out.append((code.co_name, tb.tb_lineno - code.co_firstlineno))
                    out.append(sorted(k for k in tb.tb_frame.f_locals if k != "e"))
                    tb = tb.tb_next
                return out
        """,
    ),
    tbf_case(
        "callback_called_from_a_builtin",
        """
        def key(x):
            return 1 / x
        def f():
            try:
                sorted([2, 0, 1], key=key)
            except ZeroDivisionError as e:
                tb = e.__traceback__
                frames = []
                while tb is not None:
                    frames.append(tb.tb_frame)
                    tb = tb.tb_next
                return describe(e.__traceback__), frames[-1].f_back is frames[0]
        """,
    ),
    tbf_case(
        "reraised_through_frames",
        """
        def inner():
            raise KeyError("k")
        def middle():
            try:
                inner()
            except KeyError:
                local = "m"
                raise
        def outer():
            try:
                middle()
            except KeyError as e:
                raise RuntimeError("wrapped") from e
        def f():
            try:
                outer()
            except RuntimeError as e:
                return (
                    describe(e.__traceback__),
                    describe(e.__cause__.__traceback__),
                    own_locals(e.__cause__.__traceback__.tb_next.tb_frame),
                )
        """,
    ),
    tbf_case(
        "through_a_generator_with_inspect",
        """
        import inspect
        def inner(a):
            b = a + 1
            raise ValueError(b)
        def gen():
            yield 1
            inner(5)
        def f():
            try:
                list(gen())
            except ValueError as e:
                tb = e.__traceback__
                frames = []
                while tb is not None:
                    frames.append(tb.tb_frame)
                    tb = tb.tb_next
                summary = traceback.StackSummary.extract(
                    traceback.walk_tb(e.__traceback__), capture_locals=True
                )
                return (
                    [(fi.function, fi.lineno, fi.code_context) for fi in inspect.getinnerframes(
                        e.__traceback__
                    )],
                    [(fi.function, fi.lineno) for fi in inspect.trace()],
                    [(fs.name, fs.lineno, sorted(fs.locals or ())) for fs in summary],
                    [fr.f_back.f_code.co_name if fr.f_back else None for fr in frames[1:]],
                )
        """,
    ),
    tbf_case(
        "frames_freed_with_their_exception",
        """
        import gc
        import weakref
        class Big:
            pass
        refs = []
        def inner(x):
            b = Big()
            refs.append(weakref.ref(b))
            try:
                raise KeyError(x)
            except KeyError:
                if x == 1:
                    raise
                raise ValueError(x) from None
        def gen():
            b = Big()
            refs.append(weakref.ref(b))
            yield 1
            inner(1)
        def catcher(x):
            b = Big()
            refs.append(weakref.ref(b))
            try:
                inner(x)
            except (KeyError, ValueError) as e:
                e.__traceback__.tb_next.tb_frame.f_back
            try:
                list(gen())
            except KeyError:
                pass
        def f():
            gc.disable()
            try:
                for x in (1, 2):
                    catcher(x)
                return [r() is None for r in refs]
            finally:
                gc.enable()
        """,
    ),
    tbf_case(
        "read_natively_after_return",
        """
        def inner():
            x = 1
            raise ValueError(x)
        def f():
            try:
                inner()
            except ValueError as e:
                return e
        def check(e):
            out = []
            tb = e.__traceback__
            while tb is not None:
                code = tb.tb_frame.f_code
                out.append((code.co_name, code.co_filename, tb.tb_lineno - code.co_firstlineno))
                tb = tb.tb_next
            return out, tb is None
        """,
        check="check",
    ),
]


@pytest.mark.parametrize("snippet", CASES)
def test_traceback_frames(snippet):
    snippet.assert_ok()
