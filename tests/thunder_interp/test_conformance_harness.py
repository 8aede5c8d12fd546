"""Tests of the conformance harness itself (no interpreter involved): it must notice differences
in return values, exceptions, exception chains, stdout and produced items, and must not report
differences that are only object identity or memory addresses."""

import pytest
from conformance import assert_same, run_cpython


def _outcome(source, *args):
    return run_cpython(source, *args)


def _differs(a, b):
    with pytest.raises(AssertionError):
        assert_same(_outcome(a), _outcome(b))


def test_equal_return_values_pass():
    src = "def f(x):\n    return [x, {'k': x}]\n"
    assert_same(_outcome(src, 1), _outcome(src, 1))


def test_different_return_values_fail():
    _differs("def f():\n    return 1\n", "def f():\n    return 2\n")


def test_int_and_float_are_different():
    _differs("def f():\n    return 1\n", "def f():\n    return 1.0\n")


def test_instances_of_snippet_classes_compare_by_repr():
    src = "def f():\n    class A:\n        pass\n    return [A(), A]\n"
    assert_same(_outcome(src), _outcome(src))


def test_nan_compares_equal_to_itself():
    src = "def f():\n    return float('nan')\n"
    assert_same(_outcome(src), _outcome(src))


def test_stdout_is_compared():
    _differs("def f():\n    print('a')\n", "def f():\n    print('b')\n")


def test_exception_type_and_message_are_compared():
    _differs("def f():\n    raise ValueError('a')\n", "def f():\n    raise ValueError('b')\n")
    _differs("def f():\n    raise ValueError('a')\n", "def f():\n    raise TypeError('a')\n")
    _differs("def f():\n    raise ValueError('a')\n", "def f():\n    return None\n")


def test_exception_context_is_compared():
    plain = "def f():\n    raise ValueError('v')\n"
    chained = "def f():\n    try:\n        1 / 0\n    except ZeroDivisionError:\n        raise ValueError('v')\n"
    suppressed = (
        "def f():\n    try:\n        1 / 0\n    except ZeroDivisionError:\n"
        "        raise ValueError('v') from None\n"
    )
    _differs(plain, chained)
    _differs(chained, suppressed)


def test_generator_items_and_return_value_are_compared():
    src = "def f():\n    yield 1\n    return 'r'\n"
    assert _outcome(src).kind == "iterator"
    assert _outcome(src).items == [1]
    assert _outcome(src).value == "r"
    _differs(src, "def f():\n    yield 1\n    return 's'\n")
    _differs(src, "def f():\n    yield 2\n    return 'r'\n")
    _differs(src, "def f():\n    return iter([1])\n")


def test_coroutines_are_driven():
    src = "class W:\n    def __await__(self):\n        return (yield 'w')\n\nasync def f():\n    return await W()\n"
    outcome = _outcome(src)
    assert (outcome.kind, outcome.items) == ("coroutine", ["w"])


def test_snippets_get_fresh_namespaces():
    src = "COUNT = []\ndef f():\n    COUNT.append(1)\n    return len(COUNT)\n"
    assert _outcome(src).value == _outcome(src).value == 1


def test_arguments_are_copied_per_run():
    src = "def f(xs):\n    xs.append(0)\n    return len(xs)\n"
    xs = [1]
    assert run_cpython(src, xs).value == run_cpython(src, xs).value == 2
    assert xs == [1]
