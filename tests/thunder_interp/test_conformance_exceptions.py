"""Conformance: try/except/else/finally, control flow through finally, exception chaining,
raise from, assert, and the messages of common exceptions."""

import pytest
from conformance import case

TRY = [
    case(
        "try_except_basic",
        """
        def f(x):
            try:
                return 10 // x
            except ZeroDivisionError:
                return "div by zero"
        """,
        0,
    ),
    case(
        "try_except_else_finally_order",
        """
        def f():
            log = []
            for x in (1, 0):
                try:
                    log.append(("try", x))
                    1 / x
                except ZeroDivisionError as e:
                    log.append(("except", str(e)))
                else:
                    log.append("else")
                finally:
                    log.append("finally")
            return log
        """,
    ),
    case(
        "except_tuple_and_order",
        """
        def f():
            out = []
            for exc in (KeyError("k"), IndexError("i"), ValueError("v"), TypeError("t")):
                try:
                    raise exc
                except (KeyError, IndexError) as e:
                    out.append(("lookup", type(e).__name__))
                except ValueError:
                    out.append("value")
                except Exception as e:
                    out.append(("other", str(e)))
            return out
        """,
    ),
    case(
        "except_base_class_catches_subclass",
        """
        def f():
            try:
                {}["x"]
            except LookupError as e:
                return type(e).__name__, isinstance(e, KeyError)
        """,
    ),
    case(
        "uncaught_propagates",
        """
        def f():
            try:
                raise ValueError("not caught here")
            except KeyError:
                return "wrong"
        """,
    ),
    case(
        "bare_raise_reraises",
        """
        def f():
            try:
                try:
                    raise ValueError("orig")
                except ValueError:
                    raise
            except ValueError as e:
                return str(e), e.__context__
        """,
    ),
    case(
        "bare_raise_outside_handler",
        """
        def f():
            raise
        """,
    ),
    case(
        "raise_class_instantiates",
        """
        def f():
            try:
                raise KeyError
            except KeyError as e:
                return type(e).__name__, e.args
        """,
    ),
    case(
        "raise_non_exception",
        """
        def f():
            raise 42
        """,
    ),
    case(
        "except_non_exception_class",
        """
        def f():
            try:
                raise ValueError()
            except 5:
                pass
        """,
    ),
    case(
        "finally_runs_on_return",
        """
        def f():
            log = []
            def g():
                try:
                    return "from try"
                finally:
                    log.append("finally ran")
            return g(), log
        """,
    ),
    case(
        "finally_return_overrides_return",
        """
        def f():
            def g():
                try:
                    return 1
                finally:
                    return 2
            return g()
        """,
    ),
    case(
        "finally_return_swallows_exception",
        """
        def f():
            def g():
                try:
                    raise ValueError("lost")
                finally:
                    return "swallowed"
            return g()
        """,
    ),
    case(
        "return_value_evaluated_before_finally",
        """
        def f():
            def g():
                x = [1]
                try:
                    return x
                finally:
                    x.append(2)
                    x = "rebound"
            return g()
        """,
    ),
    case(
        "break_through_finally",
        """
        def f():
            log = []
            for i in range(5):
                try:
                    if i == 2:
                        break
                    log.append(i)
                finally:
                    log.append(("fin", i))
            return log
        """,
    ),
    case(
        "continue_through_finally",
        """
        def f():
            log = []
            for i in range(4):
                try:
                    if i % 2:
                        continue
                    log.append(i)
                finally:
                    log.append(("fin", i))
            return log
        """,
    ),
    case(
        "break_in_finally_swallows_exception",
        """
        def f():
            for i in range(3):
                try:
                    raise ValueError(i)
                finally:
                    break
            return "swallowed", i
        """,
    ),
    case(
        "nested_finally_order",
        """
        def f():
            log = []
            def g():
                try:
                    try:
                        return "inner"
                    finally:
                        log.append("inner finally")
                finally:
                    log.append("outer finally")
            return g(), log
        """,
    ),
    case(
        "exception_in_finally_replaces",
        """
        def f():
            try:
                try:
                    raise ValueError("first")
                finally:
                    raise KeyError("second")
            except KeyError as e:
                return str(e), type(e.__context__).__name__, str(e.__context__)
        """,
    ),
    case(
        "exception_in_except_has_context",
        """
        def f():
            try:
                try:
                    1 / 0
                except ZeroDivisionError:
                    [][0]
            except IndexError as e:
                return type(e.__context__).__name__, e.__cause__, e.__suppress_context__
        """,
    ),
    case(
        "exception_in_except_escapes_with_context",
        """
        def f():
            try:
                1 / 0
            except ZeroDivisionError:
                raise ValueError("while handling")
        """,
    ),
    case(
        "raise_from_sets_cause",
        """
        def f():
            try:
                try:
                    int("x")
                except ValueError as e:
                    raise RuntimeError("wrapped") from e
            except RuntimeError as e:
                return type(e.__cause__).__name__, e.__suppress_context__, e.__context__ is e.__cause__
        """,
    ),
    case(
        "raise_from_escapes",
        """
        def f():
            try:
                {}["k"]
            except KeyError as e:
                raise LookupError("outer") from e
        """,
    ),
    case(
        "raise_from_none",
        """
        def f():
            try:
                try:
                    {}["k"]
                except KeyError:
                    raise ValueError("clean") from None
            except ValueError as e:
                return e.__cause__, e.__suppress_context__, type(e.__context__).__name__
        """,
    ),
    case(
        "raise_from_none_escapes",
        """
        def f():
            try:
                {}["k"]
            except KeyError:
                raise ValueError("clean") from None
        """,
    ),
    case(
        "raise_from_class",
        """
        def f():
            try:
                raise ValueError("v") from KeyError
            except ValueError as e:
                return type(e.__cause__).__name__, e.__cause__.args
        """,
    ),
    case(
        "raise_from_invalid",
        """
        def f():
            raise ValueError("v") from 5
        """,
    ),
    case(
        "context_not_set_for_same_exception",
        """
        def f():
            err = ValueError("same")
            try:
                try:
                    raise err
                except ValueError:
                    raise err
            except ValueError as e:
                return e.__context__ is None
        """,
    ),
    case(
        "context_chain_three_levels",
        """
        def f():
            try:
                try:
                    try:
                        raise KeyError("a")
                    except KeyError:
                        raise IndexError("b")
                except IndexError:
                    raise ValueError("c")
            except ValueError as e:
                chain = []
                while e is not None:
                    chain.append(type(e).__name__)
                    e = e.__context__
                return chain
        """,
    ),
    case(
        "exc_info_inside_handler",
        """
        import sys
        def f():
            before = sys.exc_info()
            try:
                raise TypeError("t")
            except TypeError:
                inside = sys.exc_info()[0].__name__, str(sys.exc_info()[1])
            after = sys.exc_info()
            return before, inside, after
        """,
    ),
    case(
        "exception_handled_in_callee_does_not_leak",
        """
        import sys
        def f():
            def g():
                try:
                    raise KeyError("x")
                except KeyError:
                    return "handled"
            r = g()
            return r, sys.exc_info()
        """,
    ),
    case(
        "nested_handler_restores_outer_exception",
        """
        import sys
        def f():
            try:
                raise ValueError("outer")
            except ValueError:
                try:
                    raise KeyError("inner")
                except KeyError:
                    pass
                return str(sys.exc_info()[1])
        """,
    ),
    case(
        "traceback_present",
        """
        def f():
            try:
                raise ValueError("x")
            except ValueError as e:
                return e.__traceback__ is not None, type(e.__traceback__).__name__
        """,
    ),
    case(
        "with_traceback_and_add_note",
        """
        import sys
        def f():
            e = ValueError("x")
            e2 = e.with_traceback(None)
            if sys.version_info >= (3, 11):
                e.add_note("a note")
                return e2 is e, e.__notes__
            return e2 is e, ["a note"]
        """,
    ),
    case(
        "exception_args_and_repr",
        """
        def f():
            e = OSError(2, "No such file")
            k = KeyError("key")
            return e.args, e.errno, e.strerror, repr(k), str(k), str(KeyError()), repr(ValueError("a", 1))
        """,
    ),
    case(
        "exception_hierarchy_checks",
        """
        def f():
            return [issubclass(ZeroDivisionError, ArithmeticError), issubclass(KeyError, LookupError),
                    issubclass(StopIteration, Exception), issubclass(GeneratorExit, Exception),
                    issubclass(KeyboardInterrupt, BaseException), issubclass(RecursionError, RuntimeError)]
        """,
    ),
    case(
        "try_in_loop_with_else_and_continue",
        """
        def f():
            out = []
            for v in ["1", "x", "3", None]:
                try:
                    n = int(v)
                except ValueError:
                    out.append("bad")
                    continue
                except TypeError as e:
                    out.append(str(e))
                    break
                else:
                    out.append(n)
            return out
        """,
    ),
    case(
        "deep_recursion_error_caught",
        """
        def f():
            def down(n):
                return down(n + 1)
            try:
                down(0)
            except RecursionError as e:
                return "recursion", "recursion" in str(e)
        """,
    ),
    case(
        "exception_from_builtin_callback",
        """
        def f():
            def key(x):
                if x == 3:
                    raise ValueError("bad key " + str(x))
                return -x
            try:
                sorted([1, 2, 3, 4], key=key)
            except ValueError as e:
                return str(e)
        """,
    ),
    case(
        "exception_object_reraise_later",
        """
        def f():
            saved = None
            try:
                raise KeyError("saved")
            except KeyError as e:
                saved = e
            raise saved
        """,
    ),
    case(
        "traceback_points_to_user_line",
        """
        import traceback
        def f():
            def inner():
                x = 1
                raise ValueError("here")
            try:
                inner()
            except ValueError as e:
                last = traceback.extract_tb(e.__traceback__)[-1]
                return last.name, last.lineno - inner.__code__.co_firstlineno, last.line
        """,
    ),
    case(
        "getattr_fallback_error_escapes_without_context",
        """
        def f():
            class P:
                def __getattr__(self, name):
                    raise AttributeError("no " + name)
            return P().thing
        """,
    ),
    case(
        "missing_dunder_escapes_without_context",
        """
        def f():
            class D(dict):
                def __missing__(self, key):
                    raise LookupError("missing " + repr(key))
            return D()["k"]
        """,
    ),
    case(
        "name_error_inside_handler_has_context",
        """
        def f():
            try:
                raise KeyError("first")
            except KeyError:
                return not_defined_anywhere
        """,
    ),
    case(
        "builtin_name_lookup_no_context",
        """
        def f():
            try:
                return undefined_builtin_like_name
            except NameError as e:
                return e.__context__, e.__cause__, str(e)
        """,
    ),
    case(
        "exception_in_generator_has_context_of_handler",
        """
        def f():
            def gen():
                try:
                    yield 1
                    raise KeyError("in gen")
                except KeyError:
                    yield 2
                    raise ValueError("second")
            return list(gen())
        """,
    ),
    case(
        "systemexit_is_catchable",
        """
        import sys
        def f():
            try:
                sys.exit(3)
            except SystemExit as e:
                return e.code
        """,
    ),
]

ASSERTS = [
    case(
        "assert_passes",
        """
        def f(x):
            assert x > 0
            assert x, "message"
            return x
        """,
        3,
    ),
    case(
        "assert_fails_no_message",
        """
        def f(x):
            assert x > 10
        """,
        3,
    ),
    case(
        "assert_fails_with_message",
        """
        def f(x):
            assert x > 10, f"x too small: {x}"
        """,
        3,
    ),
    case(
        "assert_message_not_evaluated_when_true",
        """
        def f():
            def boom():
                raise RuntimeError("evaluated")
            assert True, boom()
            return "ok"
        """,
    ),
    case(
        "assert_message_object",
        """
        def f():
            try:
                assert [], ("tuple", 1)
            except AssertionError as e:
                return e.args
        """,
    ),
    case(
        "assert_with_shadowed_assertionerror_name",
        """
        def f():
            AssertionError = ValueError
            try:
                assert False, "x"
            except Exception as e:
                return type(e).__name__
        """,
    ),
]

MESSAGES = [
    case(
        "keyerror_message",
        """
        def f():
            d = {"a": 1}
            return d["b"]
        """,
    ),
    case(
        "keyerror_tuple_key",
        """
        def f():
            return {}[(1, 2)]
        """,
    ),
    case(
        "indexerror_list",
        """
        def f():
            return [1, 2, 3][3]
        """,
    ),
    case(
        "indexerror_pop_empty",
        """
        def f():
            return [].pop()
        """,
    ),
    case(
        "zerodivision_int",
        """
        def f(a, b):
            return a // b
        """,
        5,
        0,
    ),
    case(
        "zerodivision_float",
        """
        def f():
            return 1.0 / 0
        """,
    ),
    case(
        "zerodivision_modulo",
        """
        def f():
            return 7 % 0
        """,
    ),
    case(
        "typeerror_unhashable",
        """
        def f():
            return {[1]: 2}
        """,
    ),
    case(
        "typeerror_not_subscriptable",
        """
        def f():
            x = None
            return x[0]
        """,
    ),
    case(
        "typeerror_item_assignment",
        """
        def f():
            t = (1, 2)
            t[0] = 5
        """,
    ),
    case(
        "typeerror_string_concat",
        """
        def f():
            return "a" + 1
        """,
    ),
    case(
        "typeerror_not_iterable_for",
        """
        def f():
            for x in 3:
                pass
        """,
    ),
    case(
        "typeerror_builtin_arg_count",
        """
        def f():
            return len(1, 2)
        """,
    ),
    case(
        "typeerror_method_arg_count",
        """
        def f():
            class A:
                def m(self, x):
                    return x
            return A().m(1, 2)
        """,
    ),
    case(
        "valueerror_int_parse",
        """
        def f():
            return int("12abc")
        """,
    ),
    case(
        "valueerror_list_index",
        """
        def f():
            return [1, 2].index(5)
        """,
    ),
    case(
        "attributeerror_none",
        """
        def f():
            x = None
            return x.foo
        """,
    ),
    case(
        "attributeerror_module",
        """
        import math
        def f():
            return math.not_there
        """,
    ),
    case(
        "attributeerror_set_on_builtin",
        """
        def f():
            (1).x = 2
        """,
    ),
    case(
        "overflow_error_float",
        """
        def f():
            return 10.0 ** 400
        """,
    ),
    case(
        "stopiteration_from_next",
        """
        def f():
            return next(iter([]))
        """,
    ),
    case(
        "unboundlocal_message",
        """
        def f(flag):
            if flag:
                value = 1
            return value
        """,
        False,
    ),
    case(
        "recursion_message_type",
        """
        def f():
            def r():
                return r()
            r()
        """,
    ),
    case(
        "exception_str_in_printed_output",
        """
        def f():
            for e in (ValueError("v"), KeyError("k"), OSError(1, "perm")):
                print(type(e).__name__, e, repr(e))
            return None
        """,
    ),
]

CASES = TRY + ASSERTS + MESSAGES


@pytest.mark.parametrize("snippet", CASES)
def test_exceptions(snippet):
    snippet.assert_ok()
