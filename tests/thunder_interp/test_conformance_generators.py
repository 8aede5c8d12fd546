"""Conformance: generators (send/throw/close, yield from), generator expressions, custom iterators,
and coroutines driven by send."""

import pytest
from conformance import case

GENERATORS = [
    case(
        "generator_returned_from_entry",
        """
        def f(n):
            for i in range(n):
                yield i * i
        """,
        5,
    ),
    case(
        "generator_entry_with_return_value",
        """
        def f():
            yield 1
            yield 2
            return "done"
        """,
    ),
    case(
        "generator_entry_raises_midway",
        """
        def f():
            yield 1
            raise KeyError("boom")
        """,
    ),
    case(
        "generator_entry_prints_lazily",
        """
        def f():
            print("start")
            yield 1
            print("middle")
            yield 2
            print("end")
        """,
    ),
    case(
        "generator_list_and_next",
        """
        def f():
            def gen():
                yield "a"
                yield "b"
            g = gen()
            first = next(g)
            return first, list(g), next(g, "default")
        """,
    ),
    case(
        "generator_is_generator_type",
        """
        import inspect, types
        def f():
            def gen():
                yield 1
            g = gen()
            return type(g).__name__, isinstance(g, types.GeneratorType), inspect.isgeneratorfunction(gen), iter(g) is g
        """,
    ),
    case(
        "generator_send",
        """
        def f():
            def acc():
                total = 0
                while True:
                    x = yield total
                    if x is None:
                        return total
                    total += x
            g = acc()
            out = [next(g), g.send(3), g.send(4)]
            try:
                g.send(None)
            except StopIteration as e:
                out.append(("stop", e.value))
            return out
        """,
    ),
    case(
        "generator_send_non_none_to_fresh",
        """
        def f():
            def gen():
                yield 1
            return gen().send(5)
        """,
    ),
    case(
        "generator_throw_caught_inside",
        """
        def f():
            def gen():
                while True:
                    try:
                        yield "ok"
                    except ValueError as e:
                        yield "caught " + str(e)
            g = gen()
            return next(g), g.throw(ValueError("v")), next(g)
        """,
    ),
    case(
        "generator_throw_uncaught",
        """
        def f():
            def gen():
                yield 1
                yield 2
            g = gen()
            next(g)
            try:
                g.throw(TypeError("t"))
            except TypeError as e:
                r = str(e)
            return r, list(g)
        """,
    ),
    case(
        "generator_throw_before_start",
        """
        def f():
            def gen():
                print("never")
                yield 1
            g = gen()
            try:
                g.throw(RuntimeError("early"))
            except RuntimeError as e:
                return str(e), list(g)
        """,
    ),
    case(
        "generator_close_runs_finally",
        """
        def f():
            log = []
            def gen():
                try:
                    yield 1
                    yield 2
                finally:
                    log.append("cleanup")
            g = gen()
            next(g)
            g.close()
            return log, list(g)
        """,
    ),
    case(
        "generator_close_catches_generatorexit",
        """
        def f():
            def gen():
                try:
                    yield 1
                except GeneratorExit:
                    print("exit seen")
                    raise
            g = gen()
            next(g)
            return g.close()
        """,
    ),
    case(
        "generator_close_yielding_again_error",
        """
        def f():
            def gen():
                try:
                    yield 1
                except GeneratorExit:
                    yield 2
            g = gen()
            next(g)
            g.close()
        """,
    ),
    case(
        "generator_finally_on_exhaustion",
        """
        def f():
            def gen():
                try:
                    yield from range(2)
                finally:
                    print("finally")
            return [x for x in gen()]
        """,
    ),
    case(
        "yield_from_return_value",
        """
        def f():
            def inner():
                yield 1
                yield 2
                return "inner-result"
            def outer():
                r = yield from inner()
                yield r
            return list(outer())
        """,
    ),
    case(
        "yield_from_send_delegates",
        """
        def f():
            def inner():
                got = []
                while len(got) < 2:
                    got.append((yield len(got)))
                return got
            def outer():
                r = yield from inner()
                return r
            g = outer()
            out = [next(g), g.send("a")]
            try:
                g.send("b")
            except StopIteration as e:
                out.append(e.value)
            return out
        """,
    ),
    case(
        "yield_from_throw_delegates",
        """
        def f():
            def inner():
                try:
                    yield 1
                except KeyError:
                    yield "inner caught"
            def outer():
                yield from inner()
                yield "after"
            g = outer()
            return next(g), g.throw(KeyError("k")), next(g)
        """,
    ),
    case(
        "yield_from_close_delegates",
        """
        def f():
            def inner():
                try:
                    yield 1
                finally:
                    print("inner closed")
            def outer():
                try:
                    yield from inner()
                finally:
                    print("outer closed")
            g = outer()
            next(g)
            g.close()
            return "ok"
        """,
    ),
    case(
        "yield_from_iterable_non_generator",
        """
        def f():
            def gen():
                yield from [1, 2]
                yield from "ab"
                yield from {"k": 1}
                r = yield from iter(())
                yield r
            return list(gen())
        """,
    ),
    case(
        "yield_from_custom_iterator_send",
        """
        def f():
            class It:
                def __init__(self):
                    self.n = 0
                def __iter__(self):
                    return self
                def __next__(self):
                    self.n += 1
                    if self.n > 2:
                        raise StopIteration(99)
                    return self.n
            def gen():
                r = yield from It()
                yield ("ret", r)
            return list(gen())
        """,
    ),
    case(
        "yield_expression_values",
        """
        def f():
            def gen():
                x = yield
                y = yield x
                yield (x, y)
            g = gen()
            return [next(g), g.send(1), g.send(2)]
        """,
    ),
    case(
        "generator_stopiteration_leak_is_runtimeerror",
        """
        def f():
            def gen():
                yield 1
                raise StopIteration("leak")
            try:
                return list(gen())
            except RuntimeError as e:
                return str(e), type(e.__cause__).__name__, str(e.__cause__)
        """,
    ),
    case(
        "generator_next_on_exhausted_inside_gen",
        """
        def f():
            def gen():
                it = iter([])
                yield next(it)
            return list(gen())
        """,
    ),
    case(
        "generator_return_in_try_finally",
        """
        def f():
            def gen():
                try:
                    yield 1
                    return 5
                finally:
                    print("fin")
            g = gen()
            next(g)
            try:
                next(g)
            except StopIteration as e:
                return e.value
        """,
    ),
    case(
        "generator_already_executing",
        """
        def f():
            def gen():
                yield next(me)
            me = gen()
            try:
                next(me)
            except ValueError as e:
                return str(e)
        """,
    ),
    case(
        "generator_state_inspection",
        """
        import inspect
        def f():
            def gen():
                yield 1
            g = gen()
            states = [inspect.getgeneratorstate(g)]
            next(g)
            states.append(inspect.getgeneratorstate(g))
            list(g)
            states.append(inspect.getgeneratorstate(g))
            return states
        """,
    ),
    case(
        "generator_locals_persist",
        """
        def f():
            def fib():
                a, b = 0, 1
                while True:
                    yield a
                    a, b = b, a + b
            g = fib()
            return [next(g) for _ in range(12)]
        """,
    ),
    case(
        "generator_in_zip_and_enumerate",
        """
        def f():
            def letters():
                yield from "xyz"
            return list(enumerate(letters(), 1)), list(zip(letters(), range(10)))
        """,
    ),
    case(
        "generator_returned_then_driven",
        """
        def f():
            total = 0
            while True:
                x = yield total
                if x is None:
                    break
                total += x
            return total

        def drive(g):
            out = [next(g), g.send(2), g.send(5)]
            try:
                g.send(None)
            except StopIteration as e:
                out.append(e.value)
            return out
        """,
        check="drive",
    ),
    case(
        "generator_returned_then_thrown",
        """
        def f():
            try:
                yield 1
            except ValueError as e:
                yield "handled " + str(e)
            yield "end"

        def drive(g):
            return [next(g), g.throw(ValueError("x")), next(g)]
        """,
        check="drive",
    ),
    case(
        "generator_returned_then_closed",
        """
        def f():
            try:
                yield 1
            finally:
                print("closing")

        def drive(g):
            next(g)
            g.close()
            return "closed"
        """,
        check="drive",
    ),
]

GENEXPRS = [
    case(
        "genexpr_sum",
        """
        def f(n):
            return sum(i * i for i in range(n) if i % 2)
        """,
        10,
    ),
    case(
        "genexpr_lazy",
        """
        def f():
            log = []
            def src():
                for i in range(3):
                    log.append(i)
                    yield i
            g = (x * 10 for x in src())
            first = next(g)
            return first, list(log), list(g), log
        """,
    ),
    case(
        "genexpr_first_iterable_evaluated_eagerly",
        """
        def f():
            try:
                g = (x for x in 5)
            except TypeError as e:
                return "eager", str(e)
            return "lazy"
        """,
    ),
    case(
        "genexpr_nested_for",
        """
        def f():
            return list((a, b) for a in range(3) for b in range(a))
        """,
    ),
    case(
        "genexpr_returned_from_entry",
        """
        def f(xs):
            return (x.upper() for x in xs)
        """,
        ["a", "b"],
    ),
    case(
        "genexpr_closure_over_local",
        """
        def f():
            k = 3
            g = (i * k for i in range(3))
            k = 10
            return list(g)
        """,
    ),
    case(
        "genexpr_any_all_short_circuit",
        """
        def f():
            seen = []
            def check(x):
                seen.append(x)
                return x > 2
            return any(check(x) for x in range(10)), all(check(x) for x in [3, 1, 5]), seen
        """,
    ),
    case(
        "genexpr_in_tuple_and_join",
        """
        def f():
            return tuple(str(i) for i in range(4)), "-".join(c * 2 for c in "abc")
        """,
    ),
]

ITERATORS = [
    case(
        "custom_iterator_class",
        """
        def f():
            class Count:
                def __init__(self, n):
                    self.i, self.n = 0, n
                def __iter__(self):
                    return self
                def __next__(self):
                    if self.i >= self.n:
                        raise StopIteration
                    self.i += 1
                    return self.i
            return list(Count(4)), sum(Count(10)), [x for x in Count(2)]
        """,
    ),
    case(
        "custom_iterable_with_generator_iter",
        """
        def f():
            class Bag:
                def __init__(self, *items):
                    self.items = items
                def __iter__(self):
                    for it in self.items:
                        yield it
            b = Bag(3, 1, 2)
            return sorted(b), list(b), 2 in b
        """,
    ),
    case(
        "getitem_iteration_protocol",
        """
        def f():
            class Seq:
                def __getitem__(self, i):
                    if i >= 3:
                        raise IndexError(i)
                    return i * 10
            return list(Seq()), 20 in Seq()
        """,
    ),
    case(
        "iter_with_sentinel",
        """
        def f():
            data = [1, 2, 3, 0, 4]
            it = iter(data)
            return list(iter(lambda: next(it), 0))
        """,
    ),
    case(
        "iterator_not_iterable_error",
        """
        def f():
            class NoIter:
                pass
            for x in NoIter():
                pass
        """,
    ),
    case(
        "iter_returns_non_iterator",
        """
        def f():
            class Bad:
                def __iter__(self):
                    return 5
            return list(Bad())
        """,
    ),
    case(
        "next_on_non_iterator",
        """
        def f():
            return next([1, 2])
        """,
    ),
    case(
        "for_loop_over_iterator_modified_state",
        """
        def f():
            it = iter(range(10))
            out = []
            for x in it:
                out.append(x)
                if x % 3 == 0:
                    out.append(("skip", next(it, None)))
            return out
        """,
    ),
    case(
        "reversed_custom",
        """
        def f():
            class R:
                def __reversed__(self):
                    return iter("cba")
            class L:
                def __len__(self):
                    return 3
                def __getitem__(self, i):
                    return i
            return list(reversed(R())), list(reversed(L()))
        """,
    ),
    case(
        "iterator_returned_from_entry",
        """
        def f():
            return iter([3, 2, 1])
        """,
    ),
]

COROUTINES = [
    case(
        "coroutine_driven_by_send",
        """
        def f():
            async def add(a, b):
                return a + b
            coro = add(1, 2)
            try:
                coro.send(None)
            except StopIteration as e:
                return e.value
        """,
    ),
    case(
        "coroutine_awaits_custom_awaitable",
        """
        def f():
            class Ticket:
                def __init__(self, v):
                    self.v = v
                def __await__(self):
                    got = yield ("need", self.v)
                    return got * 2
            async def work():
                a = await Ticket(1)
                b = await Ticket(2)
                return a + b
            coro = work()
            trace = [coro.send(None)]
            trace.append(coro.send(10))
            try:
                coro.send(100)
            except StopIteration as e:
                trace.append(("result", e.value))
            return trace
        """,
    ),
    case(
        "coroutine_awaits_coroutine",
        """
        def f():
            class Yield:
                def __await__(self):
                    yield "tick"
            async def inner(x):
                await Yield()
                return x * 3
            async def outer():
                return await inner(2) + await inner(3)
            c = outer()
            ticks = []
            while True:
                try:
                    ticks.append(c.send(None))
                except StopIteration as e:
                    return ticks, e.value
        """,
    ),
    case(
        "coroutine_returned_from_entry",
        """
        class Suspend:
            def __await__(self):
                return (yield "suspended")

        async def f(x):
            y = await Suspend()
            return (x, y)
        """,
        7,
    ),
    case(
        "coroutine_throw",
        """
        def f():
            class Wait:
                def __await__(self):
                    yield "waiting"
            async def job():
                try:
                    await Wait()
                except ValueError as e:
                    return "recovered " + str(e)
            c = job()
            c.send(None)
            try:
                c.throw(ValueError("bad"))
            except StopIteration as e:
                return e.value
        """,
    ),
    case(
        "coroutine_exception_propagates",
        """
        def f():
            async def job():
                raise KeyError("inside")
            c = job()
            try:
                c.send(None)
            except KeyError as e:
                return "caught", str(e)
        """,
    ),
    case(
        "coroutine_await_non_awaitable",
        """
        def f():
            async def job():
                await 5
            c = job()
            try:
                c.send(None)
            except TypeError as e:
                return str(e)
        """,
    ),
    case(
        "async_with_and_async_for",
        """
        def f():
            log = []
            class CM:
                async def __aenter__(self):
                    log.append("enter")
                    return self
                async def __aexit__(self, *exc):
                    log.append("exit")
                    return False
            class AIter:
                def __init__(self):
                    self.i = 0
                def __aiter__(self):
                    return self
                async def __anext__(self):
                    self.i += 1
                    if self.i > 3:
                        raise StopAsyncIteration
                    return self.i
            async def job():
                async with CM():
                    async for x in AIter():
                        log.append(x)
                return "done"
            c = job()
            try:
                c.send(None)
            except StopIteration as e:
                return e.value, log
        """,
    ),
    case(
        "async_generator_driven",
        """
        def f():
            async def agen():
                for i in range(3):
                    yield i * 2
            async def collect():
                return [x async for x in agen()]
            c = collect()
            try:
                c.send(None)
            except StopIteration as e:
                return e.value
        """,
    ),
    case(
        "coroutine_close_unstarted",
        """
        def f():
            async def job():
                return 1
            c = job()
            c.close()
            try:
                c.send(None)
            except RuntimeError as e:
                return str(e)
        """,
    ),
]

CASES = GENERATORS + GENEXPRS + ITERATORS + COROUTINES


@pytest.mark.parametrize("snippet", CASES)
def test_generators(snippet):
    snippet.assert_ok()
