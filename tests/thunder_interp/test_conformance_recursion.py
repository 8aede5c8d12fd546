"""Conformance: recursion limits as interpreted code sees them (RecursionError where CPython raises
it, caught by the program, which then continues; ``sys.getrecursionlimit``/``setrecursionlimit``).

Crash safety (small C stacks, deep native callers) is tested in a child process by
``test_recursion_limits.py``.
"""

import pytest
from conformance import case

CASES = [
    case(
        "depth_reached_equals_cpython",
        """
        def f():
            reached = [0]
            def down(n):
                reached[0] = n
                down(n + 1)
            try:
                down(0)
            except RecursionError as e:
                return reached[0], str(e)
        """,
    ),
    case(
        "traceback_of_recursion_error",
        """
        import traceback
        def f():
            def down(n):
                return down(n + 1)
            try:
                down(0)
            except RecursionError as e:
                entries = traceback.extract_tb(e.__traceback__)
                return len(entries), [(fs.name, fs.lineno) for fs in entries[:2] + entries[-2:]]
        """,
    ),
    case(
        "program_continues_after_recursion_error",
        """
        def f():
            reached = []
            def down(n):
                try:
                    return down(n + 1)
                except RecursionError:
                    reached.append(n)
                    raise
            for _ in range(3):
                try:
                    down(0)
                except RecursionError:
                    pass
            total = sum(range(100))
            return reached[0] == reached[1] == reached[2], reached[0] > 100, total
        """,
    ),
    case(
        "method_recursion_depth",
        """
        def f():
            class Walker:
                def __init__(self):
                    self.depth = 0
                def walk(self, n):
                    self.depth = n
                    return self.walk(n + 1)
            w = Walker()
            try:
                w.walk(0)
            except RecursionError as e:
                return w.depth, str(e)
        """,
    ),
    case(
        "mutual_recursion_depth",
        """
        def f():
            reached = [0]
            def even(n):
                reached[0] = n
                return odd(n + 1)
            def odd(n):
                return even(n + 1)
            try:
                even(0)
            except RecursionError:
                return reached[0]
        """,
    ),
    case(
        "recursion_through_init_caught",
        """
        def f():
            class Node:
                def __init__(self, n):
                    self.child = Node(n + 1)
            try:
                Node(0)
            except RecursionError:
                return "caught"
        """,
    ),
    case(
        "recursion_through_call_caught",
        """
        def f():
            class Again:
                def __call__(self, n):
                    return self(n + 1)
            try:
                Again()(0)
            except RecursionError as e:
                return type(e).__name__
        """,
    ),
    case(
        "generator_recursion_caught",
        """
        def f():
            def nested(n):
                yield n
                yield from nested(n + 1)
            items = []
            try:
                for item in nested(0):
                    items.append(item)
            except RecursionError:
                return "caught", len(items) > 100
        """,
    ),
    case(
        "recursion_through_c_callback",
        """
        def f():
            def key(x):
                return sorted([x], key=key)
            try:
                key(0)
            except RecursionError:
                return "caught"
        """,
    ),
    case(
        "recursion_in_handler_of_recursion_error",
        """
        def f():
            def down(n):
                try:
                    return down(n + 1)
                except RecursionError:
                    if n % 100 == 0:
                        return n
                    raise
            return down(0) >= 0
        """,
    ),
    case(
        "getrecursionlimit",
        """
        import sys
        def f():
            return sys.getrecursionlimit()
        """,
    ),
    case(
        "setrecursionlimit_higher_then_deeper",
        """
        import sys
        def f():
            old = sys.getrecursionlimit()
            reached = [0]
            def down(n):
                reached[0] = n
                down(n + 1)
            sys.setrecursionlimit(old + 500)
            try:
                seen = sys.getrecursionlimit() - old
                try:
                    down(0)
                except RecursionError:
                    pass
            finally:
                sys.setrecursionlimit(old)
            return seen, reached[0], sys.getrecursionlimit() == old
        """,
    ),
    case(
        "setrecursionlimit_lower_then_shallower",
        """
        import sys
        def f():
            old = sys.getrecursionlimit()
            reached = [0]
            def down(n):
                reached[0] = n
                down(n + 1)
            depth = 0
            frame = sys._getframe()
            while frame is not None:
                depth += 1
                frame = frame.f_back
            sys.setrecursionlimit(depth + 50)
            try:
                try:
                    down(0)
                except RecursionError:
                    pass
            finally:
                sys.setrecursionlimit(old)
            return 30 < reached[0] < 50
        """,
    ),
    case(
        "setrecursionlimit_too_low",
        """
        import sys
        def f():
            def inner():
                sys.setrecursionlimit(3)
            try:
                inner()
            except RecursionError as e:
                return str(e)
        """,
    ),
    case(
        "setrecursionlimit_bad_arguments",
        """
        import sys
        def f():
            out = []
            for bad in (0, -5, "x", 1.5):
                try:
                    sys.setrecursionlimit(bad)
                except (ValueError, TypeError) as e:
                    out.append((type(e).__name__, str(e)))
            return out, sys.getrecursionlimit() > 50
        """,
    ),
]


@pytest.mark.parametrize("snippet", CASES)
def test_recursion(snippet):
    snippet.assert_ok()
