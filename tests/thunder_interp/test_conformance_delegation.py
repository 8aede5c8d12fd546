"""Conformance: send/throw/close delegated through ``yield from`` and ``await`` chains (one and two
levels), and ``asend``/``athrow`` on async generators.

Each snippet drives a generator (or coroutine) with a script of operations and records what every
step produced or raised. ``f`` runs the script inside interpreted code; the ``*_outside`` variants
return the interpreted generator and let ``check`` (native code) drive it.
"""

import textwrap

import pytest
from conformance import case

DRIVER = """
def drive(g, steps):
    log = []
    for step in steps:
        name, *args = step
        try:
            if name == "next":
                log.append(("yield", next(g)))
            elif name == "send":
                log.append(("yield", g.send(args[0])))
            elif name == "throw":
                log.append(("yield", g.throw(args[0])))
            elif name == "close":
                log.append(("closed", g.close()))
        except StopIteration as e:
            log.append(("return", e.value))
        except BaseException as e:
            log.append(("raise", type(e).__name__, str(e)))
    return log

class Pending:
    # An awaitable that suspends its awaiter once, yielding a tag; evaluates to what is sent.
    def __init__(self, tag):
        self.tag = tag
    def __await__(self):
        return (yield self.tag)
"""


def delegation_case(id: str, source: str, *args: object, **kwargs: object) -> object:
    return case(id, DRIVER + textwrap.dedent(source), *args, **kwargs)


GENERATORS = [
    delegation_case(
        "throw_inner_catches_and_returns",
        """
        def inner():
            try:
                yield 1
            except KeyError as e:
                return "caught " + str(e)
        def outer():
            r = yield from inner()
            print("outer got", r)
            yield r
            return "outer done"
        def f():
            return drive(outer(), [("next",), ("throw", KeyError("k")), ("next",)])
        """,
    ),
    delegation_case(
        "throw_two_levels_innermost_catches_and_returns",
        """
        def inner():
            try:
                yield 1
            except KeyError:
                return "inner value"
        def middle():
            r = yield from inner()
            print("middle got", r)
            return r + "!"
        def outer():
            r = yield from middle()
            print("outer got", r)
            yield r
        def f():
            return drive(outer(), [("next",), ("throw", KeyError()), ("next",)])
        """,
    ),
    delegation_case(
        "throw_inner_catches_and_yields",
        """
        def inner():
            while True:
                try:
                    yield "ready"
                except ValueError as e:
                    yield "handled " + str(e)
        def outer():
            yield from inner()
        def f():
            return drive(outer(), [("next",), ("throw", ValueError("a")), ("next",),
                                   ("throw", ValueError("b")), ("close",), ("next",)])
        """,
    ),
    delegation_case(
        "throw_two_levels_inner_catches_and_yields",
        """
        def inner():
            try:
                yield 1
            except ValueError:
                yield 2
            yield 3
        def middle():
            yield from inner()
        def outer():
            yield from middle()
            yield "after"
        def f():
            return drive(outer(), [("next",), ("throw", ValueError()), ("next",), ("next",),
                                   ("next",)])
        """,
    ),
    delegation_case(
        "throw_not_caught_by_inner_caught_by_outer",
        """
        def inner():
            try:
                yield 1
            finally:
                print("inner finally")
        def outer():
            try:
                yield from inner()
            except KeyError as e:
                print("outer caught", repr(e))
                yield "recovered"
            return "end"
        def f():
            return drive(outer(), [("next",), ("throw", KeyError("x")), ("next",)])
        """,
    ),
    delegation_case(
        "throw_not_caught_anywhere",
        """
        def inner():
            yield 1
        def middle():
            yield from inner()
        def outer():
            yield from middle()
        def f():
            g = outer()
            return drive(g, [("next",), ("throw", TypeError("t")), ("next",)])
        """,
    ),
    delegation_case(
        "throw_stopiteration_into_delegating_generator",
        """
        def inner():
            try:
                yield 1
            except StopIteration:
                return "from inner"
        def outer():
            r = yield from inner()
            yield r
        def f():
            return drive(outer(), [("next",), ("throw", StopIteration("s")), ("next",)])
        """,
    ),
    delegation_case(
        "throw_into_delegation_to_plain_iterator",
        """
        def outer():
            try:
                r = yield from iter([1, 2, 3])
            except KeyError:
                yield "caught in outer"
                return
            yield ("done", r)
        def f():
            return drive(outer(), [("next",), ("throw", KeyError()), ("next",)])
        """,
    ),
    delegation_case(
        "throw_stopiteration_into_delegation_to_plain_iterator",
        """
        def outer():
            r = yield from iter([1, 2, 3])
            yield ("after", r)
        def f():
            return drive(outer(), [("next",), ("throw", StopIteration("v")), ("next",)])
        """,
    ),
    delegation_case(
        "throw_into_delegation_to_iterator_with_throw_method",
        """
        class Echo:
            def __iter__(self):
                return self
            def __next__(self):
                return "next"
            def throw(self, exc):
                if isinstance(exc, KeyError):
                    raise StopIteration("returned by throw")
                return "threw " + type(exc).__name__
        def outer():
            r = yield from Echo()
            yield r
        def f():
            return drive(outer(), [("next",), ("throw", ValueError()), ("throw", KeyError()),
                                   ("next",)])
        """,
    ),
    delegation_case(
        "send_through_two_levels_and_return_values",
        """
        def inner():
            total = 0
            while True:
                x = yield total
                if x is None:
                    return total
                total += x
        def middle():
            r = yield from inner()
            return r * 10
        def outer():
            r = yield from middle()
            print("outer got", r)
            return r + 1
        def f():
            return drive(outer(), [("next",), ("send", 2), ("send", 3), ("send", None)])
        """,
    ),
    delegation_case(
        "close_two_levels_runs_finally_blocks",
        """
        def inner():
            try:
                yield 1
            except GeneratorExit:
                print("inner saw GeneratorExit")
                raise
            finally:
                print("inner finally")
        def middle():
            try:
                yield from inner()
            finally:
                print("middle finally")
        def outer():
            try:
                yield from middle()
            except GeneratorExit:
                print("outer saw GeneratorExit")
                raise
        def f():
            return drive(outer(), [("next",), ("close",), ("next",)])
        """,
    ),
    delegation_case(
        "close_inner_catches_generatorexit_and_returns",
        """
        def inner():
            try:
                yield 1
            except GeneratorExit:
                return "ignored"
        def outer():
            try:
                r = yield from inner()
                print("unreachable", r)
            except GeneratorExit:
                print("outer saw GeneratorExit")
                raise
        def f():
            return drive(outer(), [("next",), ("close",)])
        """,
    ),
    delegation_case(
        "close_inner_yields_on_generatorexit",
        """
        def inner():
            try:
                yield 1
            except GeneratorExit:
                yield "refuses"
        def outer():
            yield from inner()
        def f():
            return drive(outer(), [("next",), ("close",)])
        """,
    ),
    delegation_case(
        "close_inner_raises_other_exception",
        """
        def inner():
            try:
                yield 1
            finally:
                raise ValueError("from inner finally")
        def outer():
            try:
                yield from inner()
            except ValueError as e:
                print("outer caught", e)
                raise
        def f():
            return drive(outer(), [("next",), ("close",)])
        """,
    ),
    delegation_case(
        "throw_generatorexit_into_delegating_generator",
        """
        def inner():
            try:
                yield 1
            finally:
                print("inner closed")
        def outer():
            try:
                yield from inner()
            except GeneratorExit:
                yield "outer yields after GeneratorExit"
        def f():
            return drive(outer(), [("next",), ("throw", GeneratorExit()), ("next",)])
        """,
    ),
    delegation_case(
        "throw_exception_chaining_through_delegation",
        """
        def inner():
            try:
                yield 1
            except KeyError as e:
                raise ValueError("converted") from e
        def outer():
            try:
                yield from inner()
            except ValueError as e:
                return (repr(e), repr(e.__cause__), repr(e.__context__))
        def f():
            return drive(outer(), [("next",), ("throw", KeyError("k"))])
        """,
    ),
    delegation_case(
        "driven_outside_throw_inner_catches_and_returns",
        """
        def inner():
            try:
                yield 1
            except KeyError:
                return "caught"
        def middle():
            return (yield from inner())
        def outer():
            r = yield from middle()
            yield r
            return "end"
        def f():
            return outer()
        def check(g):
            return drive(g, [("next",), ("throw", KeyError()), ("next",)])
        """,
        check="check",
    ),
    delegation_case(
        "driven_outside_send_and_close",
        """
        def inner():
            try:
                while True:
                    x = yield
                    print("inner got", x)
            finally:
                print("inner finally")
        def outer():
            yield from inner()
        def f():
            return outer()
        def check(g):
            return drive(g, [("next",), ("send", 1), ("send", "two"), ("close",), ("close",)])
        """,
        check="check",
    ),
    delegation_case(
        "driven_outside_throw_uncaught",
        """
        def inner():
            yield 1
        def outer():
            yield from inner()
        def f():
            return outer()
        def check(g):
            return drive(g, [("next",), ("throw", OSError("io")), ("next",)])
        """,
        check="check",
    ),
    delegation_case(
        "close_returns_value_of_closed_generator",
        """
        def inner():
            try:
                yield 1
            except GeneratorExit:
                return "closing value"
        def f():
            g = inner()
            next(g)
            return g.close()
        """,
    ),
]

COROUTINES = [
    delegation_case(
        "await_throw_inner_catches_and_returns",
        """
        async def inner():
            try:
                await Pending("inner")
            except KeyError as e:
                return "caught " + repr(e)
        async def outer():
            r = await inner()
            print("outer got", r)
            await Pending("outer")
            return r
        def f():
            return drive(outer(), [("send", None), ("throw", KeyError("k")), ("send", None)])
        """,
    ),
    delegation_case(
        "await_throw_two_levels_catches_and_returns",
        """
        async def inner():
            try:
                return await Pending("inner")
            except KeyError:
                return "inner value"
        async def middle():
            r = await inner()
            return r + "!"
        async def outer():
            r = await middle()
            print("outer got", r)
            return r
        def f():
            return drive(outer(), [("send", None), ("throw", KeyError())])
        """,
    ),
    delegation_case(
        "await_throw_inner_catches_and_awaits_again",
        """
        async def inner():
            try:
                await Pending(1)
            except ValueError:
                x = await Pending(2)
                return x
        async def outer():
            return await inner()
        def f():
            return drive(outer(), [("send", None), ("throw", ValueError()), ("send", "sent")])
        """,
    ),
    delegation_case(
        "await_throw_not_caught",
        """
        async def inner():
            await Pending(1)
        async def outer():
            try:
                await inner()
            finally:
                print("outer finally")
        def f():
            return drive(outer(), [("send", None), ("throw", RuntimeError("r")), ("send", None)])
        """,
    ),
    delegation_case(
        "await_send_values_through_two_levels",
        """
        async def inner():
            a = await Pending("a")
            b = await Pending("b")
            return a + b
        async def middle():
            return await inner() * 2
        async def outer():
            return await middle() + 1
        def f():
            return drive(outer(), [("send", None), ("send", 3), ("send", 4)])
        """,
    ),
    delegation_case(
        "await_close_two_levels",
        """
        async def inner():
            try:
                await Pending(1)
            finally:
                print("inner finally")
        async def outer():
            try:
                await inner()
            except GeneratorExit:
                print("outer saw GeneratorExit")
                raise
        def f():
            return drive(outer(), [("send", None), ("close",), ("send", None)])
        """,
    ),
    delegation_case(
        "await_driven_outside",
        """
        async def inner():
            try:
                await Pending("waiting")
            except KeyError:
                return "caught"
        async def outer():
            r = await inner()
            await Pending(r)
            return "end"
        def f():
            return outer()
        def check(c):
            return drive(c, [("send", None), ("throw", KeyError()), ("send", None)])
        """,
        check="check",
    ),
    delegation_case(
        "types_coroutine_generator_delegation",
        """
        import types
        @types.coroutine
        def legacy():
            try:
                yield "legacy"
            except KeyError:
                return "legacy caught"
        async def outer():
            return await legacy()
        def f():
            return drive(outer(), [("send", None), ("throw", KeyError())])
        """,
    ),
]

SUSPENDED_IN_BLOCKS = [
    delegation_case(
        "throw_into_yield_inside_with_block",
        """
        class Manager:
            def __enter__(self):
                print("enter")
            def __exit__(self, *exc):
                print("exit", exc[0].__name__ if exc[0] else None)
                return exc[0] is KeyError
        def gen():
            with Manager():
                yield 1
                yield 2
            yield "after"
        def f():
            return drive(gen(), [("next",), ("throw", KeyError()), ("next",)])
        """,
    ),
    delegation_case(
        "throw_into_yield_from_inside_with_block",
        """
        class Manager:
            def __enter__(self):
                print("enter")
            def __exit__(self, *exc):
                print("exit", exc[0].__name__ if exc[0] else None)
                return True
        def inner():
            yield 1
        def gen():
            with Manager():
                yield from inner()
            yield "after"
        def f():
            return drive(gen(), [("next",), ("throw", ValueError()), ("next",)])
        """,
    ),
    delegation_case(
        "throw_into_await_inside_async_with",
        """
        class Manager:
            async def __aenter__(self):
                await Pending("entering")
            async def __aexit__(self, *exc):
                print("exit", exc[0].__name__ if exc[0] else None)
                return True
        async def job():
            async with Manager():
                await Pending("inside")
            return "done"
        def f():
            return drive(job(), [("send", None), ("send", None), ("throw", KeyError()),
                                 ("send", None)])
        """,
    ),
    delegation_case(
        "throw_into_yield_in_finally_and_except",
        """
        def gen():
            try:
                yield 1
            except KeyError:
                yield "in except"
            finally:
                yield "in finally"
        def f():
            return drive(gen(), [("next",), ("throw", KeyError()), ("throw", ValueError("v")),
                                 ("next",)])
        """,
    ),
    delegation_case(
        "return_await_in_try_delegate_raises",
        """
        async def inner():
            await Pending(1)
        async def outer():
            try:
                return await inner()
            except KeyError:
                return "caught around return await"
        def f():
            return drive(outer(), [("send", None), ("throw", KeyError())])
        """,
    ),
    delegation_case(
        "return_yield_from_in_try_delegate_raises",
        """
        def inner():
            yield 1
        def outer():
            try:
                return (yield from inner())
            except KeyError:
                return "caught around return yield from"
        def f():
            return drive(outer(), [("next",), ("throw", KeyError())])
        """,
    ),
]

ASYNC_GENERATORS = [
    delegation_case(
        "async_generator_asend_athrow",
        """
        async def agen():
            try:
                x = yield 1
                print("got", x)
                await Pending("inside")
                yield 2
            except KeyError:
                yield "caught"
        def step(awaitable, value=None):
            try:
                return ("suspended", awaitable.send(value))
            except StopIteration as e:
                return ("value", e.value)
            except BaseException as e:
                return ("raise", type(e).__name__, str(e))
        def f():
            g = agen()
            log = [step(g.asend(None))]
            a = g.asend("x")
            log.append(step(a))
            log.append(step(a))
            log.append(step(g.athrow(KeyError())))
            log.append(step(g.asend(None)))
            return log
        """,
    ),
    delegation_case(
        "async_generator_awaits_coroutine_catching_throw",
        """
        async def inner():
            try:
                await Pending("inner")
            except KeyError:
                return "inner caught"
        async def agen():
            r = await inner()
            yield r
        def step(awaitable, value=None, exc=None):
            try:
                if exc is not None:
                    return ("suspended", awaitable.throw(exc))
                return ("suspended", awaitable.send(value))
            except StopIteration as e:
                return ("value", e.value)
            except BaseException as e:
                return ("raise", type(e).__name__, str(e))
        def f():
            g = agen()
            a = g.asend(None)
            return [step(a), step(a, exc=KeyError()), step(g.asend(None))]
        """,
    ),
    delegation_case(
        "async_generator_aclose",
        """
        async def agen():
            try:
                yield 1
            finally:
                print("agen finally")
        def step(awaitable):
            try:
                return ("suspended", awaitable.send(None))
            except StopIteration as e:
                return ("value", e.value)
            except BaseException as e:
                return ("raise", type(e).__name__, str(e))
        def f():
            g = agen()
            return [step(g.asend(None)), step(g.aclose()), step(g.asend(None))]
        """,
    ),
]

CASES = GENERATORS + COROUTINES + SUSPENDED_IN_BLOCKS + ASYNC_GENERATORS


@pytest.mark.parametrize("snippet", CASES)
def test_delegation(snippet):
    snippet.assert_ok()
