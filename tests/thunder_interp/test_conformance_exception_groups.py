"""Conformance: exception groups and except* (Python 3.11+). Sources are strings so that this
module imports on 3.10."""

import sys

import pytest
from conformance import case

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="exception groups and except* need Python 3.11+"
)

CASES = [
    case(
        "exception_group_raised_escapes",
        """
        def f():
            raise ExceptionGroup("many", [ValueError("a"), TypeError("b")])
        """,
    ),
    case(
        "except_star_splits_group",
        """
        def f():
            log = []
            try:
                raise ExceptionGroup("eg", [ValueError("v1"), TypeError("t"), ValueError("v2")])
            except* ValueError as g:
                log.append(("value", [str(e) for e in g.exceptions], type(g).__name__))
            except* TypeError as g:
                log.append(("type", [str(e) for e in g.exceptions]))
            return log
        """,
    ),
    case(
        "except_star_unhandled_remainder_reraised",
        """
        def f():
            try:
                raise ExceptionGroup("eg", [ValueError("v"), KeyError("k")])
            except* ValueError:
                print("handled value")
        """,
    ),
    case(
        "except_star_naked_exception_wrapped",
        """
        def f():
            try:
                raise ValueError("naked")
            except* ValueError as g:
                r = type(g).__name__, g.message, [str(e) for e in g.exceptions]
            return r
        """,
    ),
    case(
        "except_star_nested_groups",
        """
        def f():
            seen = []
            try:
                raise ExceptionGroup("outer", [ValueError("a"), ExceptionGroup("inner", [ValueError("b"), OSError("c")])])
            except* ValueError as g:
                seen.append(repr(g))
            except* OSError as g:
                seen.append(repr(g))
            return seen
        """,
    ),
    case(
        "except_star_raise_in_handler",
        """
        def f():
            try:
                raise ExceptionGroup("eg", [ValueError("v")])
            except* ValueError:
                raise KeyError("from handler")
        """,
    ),
    case(
        "except_star_with_else_finally",
        """
        def f():
            log = []
            for fail in (False, True):
                try:
                    if fail:
                        raise ExceptionGroup("g", [IndexError(1)])
                except* IndexError:
                    log.append("caught")
                else:
                    log.append("else")
                finally:
                    log.append("finally")
            return log
        """,
    ),
    case(
        "except_star_catches_tuple",
        """
        def f():
            try:
                raise ExceptionGroup("g", [KeyError("k"), IndexError("i"), ValueError("v")])
            except* (KeyError, IndexError) as g:
                r = sorted(type(e).__name__ for e in g.exceptions)
            except* ValueError:
                print("value error handled")
            return r
        """,
    ),
    case(
        "exception_group_split_and_subgroup",
        """
        def f():
            eg = ExceptionGroup("g", [ValueError(1), TypeError(2), ValueError(3)])
            match, rest = eg.split(ValueError)
            sub = eg.subgroup(lambda e: isinstance(e, TypeError))
            return [str(e) for e in match.exceptions], [str(e) for e in rest.exceptions], repr(sub)
        """,
    ),
    case(
        "base_exception_group_wraps_base",
        """
        def f():
            g = BaseExceptionGroup("b", [KeyboardInterrupt()])
            h = BaseExceptionGroup("e", [ValueError()])
            return type(g).__name__, type(h).__name__, str(g)
        """,
    ),
    case(
        "except_star_bare_reraise",
        """
        def f():
            try:
                raise ExceptionGroup("g", [ValueError("x"), TypeError("y")])
            except* ValueError:
                raise
        """,
    ),
    case(
        "except_star_group_type_invalid",
        """
        def f():
            try:
                raise ValueError()
            except* ExceptionGroup:
                pass
        """,
    ),
    case(
        "except_star_context_in_handler",
        """
        def f():
            try:
                try:
                    raise ExceptionGroup("g", [ValueError("v")])
                except* ValueError:
                    raise RuntimeError("r")
            except ExceptionGroup as outer:
                inner = outer.exceptions[0]
                return type(outer).__name__, type(inner).__name__, type(inner.__context__).__name__
        """,
    ),
    case(
        "exception_group_in_generator",
        """
        def f():
            def gen():
                try:
                    yield 1
                    raise ExceptionGroup("g", [ValueError("in gen")])
                except* ValueError as g:
                    yield "caught " + str(g.exceptions[0])
            return list(gen())
        """,
    ),
]


@pytest.mark.parametrize("snippet", CASES)
def test_exception_groups(snippet):
    snippet.assert_ok()
