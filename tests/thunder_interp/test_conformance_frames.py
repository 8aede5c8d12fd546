"""Conformance: interpreted code sees its own frames, not the interpreter's.

``sys._getframe``, ``sys._getframemodulename``, ``inspect``, ``traceback.extract_stack``, the
module of classes made by ``namedtuple``/``Enum``/``dataclasses``/``typing``/``type()``, the file
and line a warning is attributed to, and the caller ``logging`` records.
"""

import sys

import pytest
from conformance import case

from thunder_interp import interpret

MODULES = [
    case(
        "module_of_generated_classes",
        """
        import collections, dataclasses, enum, typing, types, abc
        def f():
            made = [
                collections.namedtuple("P", "a b"),
                enum.Enum("Color", "RED GREEN"),
                enum.IntEnum("Level", ["LOW", "HIGH"]),
                dataclasses.make_dataclass("D", ["a"]),
                typing.NamedTuple("T", [("a", int)]),
                typing.TypedDict("TD", {"a": int}),
                type("K", (), {}),
                type("KM", (), {"__module__": "elsewhere"}),
                types.new_class("N"),
                abc.ABCMeta("A", (), {}),
            ]
            class Local:
                pass
            @dataclasses.dataclass
            class Data:
                x: int = 0
            class Shade(enum.Enum):
                DARK = 1
            class Pair(typing.NamedTuple):
                a: int
            made += [Local, Data, Shade, Pair]
            return [(c.__name__, c.__module__) for c in made]
        """,
    ),
    case(
        "generated_classes_pickle",
        """
        import collections, enum, pickle, typing
        def f():
            global Point, Color, Pair
            Point = collections.namedtuple("Point", "x y")
            Color = enum.Enum("Color", "RED GREEN")
            Pair = typing.NamedTuple("Pair", [("a", int), ("b", int)])
            values = [Point(1, 2), Color.GREEN, Pair(3, 4)]
            return [pickle.loads(pickle.dumps(v)) == v for v in values]
        """,
    ),
    case(
        "getframemodulename",
        """
        import sys
        def f():
            def inner():
                return [sys._getframemodulename(d) for d in range(3)]
            return inner(), sys._getframemodulename(depth=0), sys._getframemodulename(10**6)
        """,
        min_version=(3, 12),
    ),
]

GETFRAME = [
    case(
        "getframe_code_names_and_locals",
        """
        import sys
        def f():
            x = 41
            def inner():
                y = "inner local"
                here = sys._getframe(0)
                up = sys._getframe(1)
                return (
                    here.f_code.co_name,
                    here.f_locals["y"],
                    up.f_code.co_name,
                    up.f_locals["x"],
                    up.f_globals is globals(),
                    sys._getframe().f_code is inner.__code__,
                    up.f_code is f.__code__,
                )
            return inner()
        """,
    ),
    case(
        "getframe_chain_and_lines",
        """
        import sys
        def a():
            return b()
        def b():
            return c()
        def c():
            frame = sys._getframe()
            out = []
            while frame is not None and frame.f_code.co_filename.startswith("<snippet"):
                out.append((frame.f_code.co_name, frame.f_lineno, frame.f_back.f_code.co_name))
                frame = frame.f_back
            return out
        def f():
            return a()
        """,
    ),
    case(
        "getframe_is_a_frame_and_errors",
        """
        import sys, types
        def f():
            out = [isinstance(sys._getframe(), types.FrameType)]
            out.append(sys._getframe(-3).f_code.co_name)
            for bad in (10**6, "x", 1.5):
                try:
                    sys._getframe(bad)
                except (ValueError, TypeError) as e:
                    out.append((type(e).__name__, str(e)))
            return out
        """,
    ),
    case(
        "frame_seen_later",
        """
        import sys
        def f():
            frame = sys._getframe()
            x = 1
            first = (frame.f_locals["x"], frame.f_lineno)
            x = 2
            second = (frame.f_locals["x"], frame.f_lineno)
            return first, second
        """,
    ),
    case(
        "frames_in_generators_class_bodies_lambdas_comprehensions",
        """
        import sys
        def names(depth):
            return [sys._getframe(d).f_code.co_name for d in range(1, depth + 1)]
        def gen():
            yield names(2)
        def consumer():
            return next(gen())
        def f():
            class Body:
                seen = names(2)
            by_lambda = (lambda: names(2))()
            in_comprehension = [names(2) for _ in range(1)]
            return consumer(), Body.seen, by_lambda, in_comprehension
        """,
    ),
    case(
        "caller_outside_the_interpretation",
        """
        import sys
        def f():
            frame = sys._getframe()
            while frame.f_code.co_filename.startswith("<snippet"):
                frame = frame.f_back
            return frame.f_code.co_name
        """,
    ),
]

INSPECT = [
    case(
        "inspect_currentframe",
        """
        import inspect
        def where():
            frame = inspect.currentframe()
            return frame.f_code.co_name, frame.f_back.f_code.co_name, frame.f_back.f_lineno
        def f():
            return where()
        """,
    ),
    case(
        "inspect_stack_and_getframeinfo",
        """
        import inspect
        def inner():
            stack = inspect.stack()
            info = inspect.getframeinfo(inspect.currentframe())
            mine = [(s.function, s.lineno) for s in stack if s.filename.startswith("<snippet")]
            outer = inspect.getouterframes(inspect.currentframe())[1]
            return mine, (info.function, info.lineno), (outer.function, outer.lineno)
        def f():
            return inner()
        """,
    ),
    case(
        "traceback_extract_stack",
        """
        import traceback
        def inner():
            return [
                (fs.name, fs.lineno)
                for fs in traceback.extract_stack()
                if fs.filename.startswith("<snippet")
            ]
        def f():
            return inner()
        """,
    ),
]

WARNINGS = [
    case(
        "warning_stacklevels",
        """
        import warnings
        def helper(level):
            warnings.warn("careful", UserWarning, stacklevel=level)
        def middle(level):
            helper(level)
        def f():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for level in (1, 2, 3, 0, -1):
                    middle(level)
                warnings.warn(DeprecationWarning("instance"))
            return [(w.filename, w.lineno, w.category.__name__, str(w.message)) for w in caught]
        """,
    ),
    case(
        "warning_beyond_the_snippet",
        """
        import warnings
        def f():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                warnings.warn("far", stacklevel=2)
                warnings.warn("farther", stacklevel=10**6)
            return [(w.filename.rsplit("/", 1)[-1], w.lineno, str(w.message)) for w in caught]
        """,
    ),
    case(
        "warning_registry_of_the_caller",
        """
        import warnings
        def helper():
            warnings.warn("once per location", stacklevel=2)
        def f():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("default")
                for _ in range(3):
                    helper()
                helper()
            return [(w.lineno, str(w.message)) for w in caught], "__warningregistry__" in globals()
        """,
    ),
    case(
        "warning_as_error_traceback",
        """
        import traceback, warnings
        def helper():
            warnings.warn("strict", RuntimeWarning, stacklevel=2)
        def f():
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                try:
                    helper()
                except RuntimeWarning as e:
                    return str(e), [(fs.name, fs.lineno) for fs in traceback.extract_tb(e.__traceback__)]
        """,
    ),
    case(
        "warning_bad_arguments",
        """
        import warnings
        def f():
            out = []
            for args, kwargs in [(("m", int), {}), (("m",), {"stacklevel": "x"}), ((), {})]:
                try:
                    warnings.warn(*args, **kwargs)
                except TypeError as e:
                    out.append(str(e))
            return out
        """,
    ),
    case(
        "warning_skip_file_prefixes",
        """
        import warnings
        def helper():
            warnings.warn("skip", stacklevel=1, skip_file_prefixes=("<snippet",))
        def f():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                helper()
            return [(w.filename.rsplit("/", 1)[-1], w.lineno) for w in caught]
        """,
        min_version=(3, 12),
    ),
]

LOGGING = [
    case(
        "logging_caller",
        """
        import io, logging
        def log_here(logger):
            logger.warning("here")
        def log_above(logger):
            logger.warning("above", stacklevel=2)
        def f():
            stream = io.StringIO()
            handler = logging.StreamHandler(stream)
            handler.setFormatter(
                logging.Formatter("%(funcName)s %(lineno)d %(module)s %(filename)s %(message)s")
            )
            logger = logging.getLogger("conformance.frames")
            logger.addHandler(handler)
            logger.propagate = False
            try:
                log_here(logger)
                log_above(logger)
                try:
                    {}["k"]
                except KeyError:
                    logger.exception("failed")
            finally:
                logger.removeHandler(handler)
            return stream.getvalue()
        """,
    ),
    case(
        "logging_stack_info",
        """
        import io, logging
        def f():
            stream = io.StringIO()
            handler = logging.StreamHandler(stream)
            logger = logging.getLogger("conformance.frames.stack")
            logger.addHandler(handler)
            logger.propagate = False
            try:
                logger.warning("with stack", stack_info=True)
            finally:
                logger.removeHandler(handler)
            return [line for line in stream.getvalue().splitlines() if "<snippet" in line]
        """,
    ),
]

CASES = MODULES + GETFRAME + INSPECT + WARNINGS + LOGGING


@pytest.mark.parametrize("snippet", CASES)
def test_frames(snippet):
    snippet.assert_ok()


def _names_and_depth():
    names = []
    frame = sys._getframe()
    while frame is not None and frame.f_code.co_name != "test_nested_interpretation":
        names.append(frame.f_code.co_name)
        frame = frame.f_back
    reached = [0]

    def down(n):
        reached[0] = n
        down(n + 1)

    try:
        down(0)
    except RecursionError:
        pass
    return names, reached[0]


def _replacement():
    return interpret(_names_and_depth)()


def _original():
    raise AssertionError("replaced by a lookaside")


def _outer():
    return _original()


def test_nested_interpretation():
    # A lookaside that interprets again: the inner interpretation sees the outer one's frames,
    # and its recursion limit counts them as CPython would count the same program run natively.
    def native_outer():
        return _replacement_native()

    def _replacement_native():
        return _names_and_depth()

    interpreted = interpret(_outer, lookasides={_original: _replacement})()
    assert interpreted[0] == ["_names_and_depth", "_replacement", "_outer"]
    native = native_outer()
    assert interpreted[1] == native[1]
