"""Conformance: a ``StopIteration``'s ``value`` and ``args`` survive every path that raises or
re-raises it (``next`` on a Python iterator, generators' ``return``, ``yield from``, re-raises,
``raise ... from`` and chaining), and it is the very object that was raised."""

import textwrap

import pytest
from conformance import case

HELPERS = """
class Stops:
    def __init__(self, *args):
        self.args = args
    def __iter__(self):
        return self
    def __next__(self):
        raise StopIteration(*self.args)

class Counts:
    def __init__(self, n, result):
        self.i, self.n, self.result = 0, n, result
    def __iter__(self):
        return self
    def __next__(self):
        if self.i < self.n:
            self.i += 1
            return self.i
        raise StopIteration(self.result)

def seen(e):
    return type(e).__name__, e.value, e.args
"""


def si_case(id, body, *args, **kwargs):
    return case(id, HELPERS + textwrap.dedent(body), *args, **kwargs)


CASES = [
    si_case(
        "next_on_python_iterator",
        """
        def f():
            out = []
            for args in ((5,), (), (None,), ("a", "b"), ([1],)):
                try:
                    next(Stops(*args))
                except StopIteration as e:
                    out.append(seen(e))
            return out
        """,
    ),
    si_case(
        "next_is_the_raised_object",
        """
        stop = StopIteration(5)
        class Same:
            def __iter__(self):
                return self
            def __next__(self):
                raise stop
        def f():
            try:
                next(Same())
            except StopIteration as e:
                return e is stop, seen(e)
        """,
    ),
    si_case(
        "next_with_default",
        """
        def f():
            it = Counts(1, 5)
            out = [next(it, "d"), next(it, "d"), next(Stops(5), None)]
            try:
                next(it)
            except StopIteration as e:
                out.append(seen(e))
            return out
        """,
    ),
    si_case(
        "next_after_items",
        """
        def f():
            it = Counts(2, "done")
            out = [next(it), next(it)]
            try:
                next(it)
            except StopIteration as e:
                out.append(seen(e))
            return out
        """,
    ),
    si_case(
        "dunder_next_called_directly",
        """
        def f():
            try:
                Stops(5).__next__()
            except StopIteration as e:
                return seen(e)
        """,
    ),
    si_case(
        "raised_in_a_called_function",
        """
        def stop(*args):
            raise StopIteration(*args)
        def middle():
            return stop(6, 7)
        def f():
            try:
                middle()
            except StopIteration as e:
                return seen(e)
        """,
    ),
    si_case(
        "generator_return_by_next_and_send",
        """
        def gen():
            yield 1
            return 7
        def f():
            out = []
            g = gen()
            next(g)
            try:
                next(g)
            except StopIteration as e:
                out.append(seen(e))
            g = gen()
            g.send(None)
            try:
                g.send("x")
            except StopIteration as e:
                out.append(seen(e))
            g = gen()
            try:
                g.__next__()
                g.__next__()
            except StopIteration as e:
                out.append(seen(e))
            return out
        """,
    ),
    si_case(
        "generator_return_by_throw",
        """
        def gen():
            try:
                yield 1
            except KeyError:
                return (8, 9)
        def f():
            g = gen()
            next(g)
            try:
                g.throw(KeyError("k"))
            except StopIteration as e:
                return seen(e)
        """,
    ),
    si_case(
        "yield_from_results",
        """
        def inner():
            yield 1
            return "inner"
        def outer():
            a = yield from inner()
            b = yield from Stops(5)
            c = yield from Counts(2, [3])
            d = yield from Stops()
            return a, b, c, d
        def f():
            g = outer()
            items = list(iter(lambda: next(g, "end"), "end"))
            g = outer()
            for _ in range(3):
                next(g)
            try:
                next(g)
            except StopIteration as e:
                return items, seen(e)
        """,
    ),
    si_case(
        "yield_from_throw_returns_value",
        """
        def inner():
            try:
                yield 1
            except KeyError:
                return "caught"
        def outer():
            result = yield from inner()
            yield result
        def f():
            g = outer()
            next(g)
            return g.throw(KeyError("k"))
        """,
    ),
    si_case(
        "bare_reraise_and_reraise_by_name",
        """
        def f():
            out = []
            try:
                try:
                    next(Stops(5))
                except StopIteration:
                    raise
            except StopIteration as e:
                out.append(seen(e))
            try:
                try:
                    next(Stops(6))
                except StopIteration as s:
                    raise s
            except StopIteration as e:
                out.append(seen(e))
            try:
                try:
                    next(Stops(7))
                finally:
                    out.append("finally")
            except StopIteration as e:
                out.append(seen(e))
            return out
        """,
    ),
    si_case(
        "raise_from_and_chaining",
        """
        def f():
            out = []
            try:
                try:
                    next(Stops(5))
                except StopIteration as s:
                    raise ValueError("v") from s
            except ValueError as e:
                out.append((seen(e.__cause__), seen(e.__context__)))
            try:
                try:
                    next(Stops(6))
                except StopIteration:
                    raise KeyError("k")
            except KeyError as e:
                out.append(seen(e.__context__))
            try:
                try:
                    raise KeyError("k")
                except KeyError as k:
                    raise StopIteration(8) from k
            except StopIteration as e:
                out.append((seen(e), repr(e.__cause__)))
            return out
        """,
    ),
    si_case(
        "stop_iteration_in_generator_becomes_runtime_error",
        """
        def gen():
            yield 1
            next(Stops(5))
        def f():
            g = gen()
            next(g)
            try:
                next(g)
            except RuntimeError as e:
                return str(e), seen(e.__cause__), e.__cause__ is e.__context__
        """,
    ),
    si_case(
        "subclass_of_stop_iteration",
        """
        class Done(StopIteration):
            pass
        class It:
            def __iter__(self):
                return self
            def __next__(self):
                raise Done(5, 6)
        def f():
            out = [list(It()), next(It(), "d")]
            try:
                next(It())
            except StopIteration as e:
                out.append(seen(e))
            return out
        """,
    ),
    si_case(
        "next_of_iter_of_python_iterable",
        """
        class Iterable:
            def __iter__(self):
                return Counts(1, "r")
        def f():
            it = iter(Iterable())
            out = [next(it)]
            try:
                next(it)
            except StopIteration as e:
                out.append(seen(e))
            return out
        """,
    ),
    si_case(
        "sequence_iterator_raises_a_new_one",
        """
        class Seq:
            def __init__(self, error):
                self.error = error
            def __getitem__(self, i):
                if i < 1:
                    return i
                raise self.error
        def f():
            out = []
            for error in (IndexError(1), StopIteration(5)):
                it = iter(Seq(error))
                out.append(next(it))
                try:
                    next(it)
                except StopIteration as e:
                    out.append((seen(e), repr(e.__context__), e.__suppress_context__))
                try:
                    raise KeyError("k")
                except KeyError:
                    try:
                        it = iter(Seq(error))
                        next(it)
                        next(it)
                    except StopIteration as e:
                        out.append((seen(e), repr(e.__context__), e.__suppress_context__))
            return out
        """,
    ),
    si_case(
        "builtins_driving_a_python_iterator",
        """
        import itertools
        def f():
            out = []
            makers = (
                lambda: map(str, Stops(5)),
                lambda: zip(Stops(5)),
                lambda: enumerate(Stops(5)),
                lambda: filter(None, Stops(5)),
                lambda: iter(Stops(5)),
                lambda: itertools.chain(Stops(5)),
                lambda: (x for x in Stops(5)),
            )
            for make in makers:
                try:
                    next(make())
                except StopIteration as e:
                    out.append(seen(e))
            return out, list(map(str, Counts(2, 5))), sorted(Counts(3, 5))
        """,
    ),
]


@pytest.mark.parametrize("snippet", CASES)
def test_stop_iteration(snippet):
    snippet.assert_ok()
