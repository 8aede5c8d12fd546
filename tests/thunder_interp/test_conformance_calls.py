"""Conformance: call forms, lambdas, decorators, recursion, nested functions, functools."""

import pytest
from conformance import case

CALL_FORMS = [
    case(
        "positional_basic",
        """
        def f(a, b, c):
            return a * 100 + b * 10 + c
        """,
        1,
        2,
        3,
    ),
    case(
        "defaults_used",
        """
        def f(a, b=2, c=3):
            return (a, b, c)
        """,
        1,
    ),
    case(
        "defaults_partially_overridden",
        """
        def f(a, b=2, c=3):
            return (a, b, c)
        """,
        1,
        20,
    ),
    case(
        "keyword_arguments_any_order",
        """
        def f():
            def g(a, b, c=0):
                return (a, b, c)
            return g(c=3, b=2, a=1), g(1, c=5, b=4)
        """,
    ),
    case(
        "kwargs_to_entry",
        """
        def f(a, *, key, other=5):
            return (a, key, other)
        """,
        1,
        key="k",
    ),
    case(
        "keyword_only_required_missing",
        """
        def f():
            def g(a, *, key):
                return (a, key)
            return g(1)
        """,
    ),
    case(
        "keyword_only_defaults",
        """
        def f():
            def g(*, x=1, y=2):
                return x - y
            return g(), g(y=10), g(x=5, y=1)
        """,
    ),
    case(
        "positional_only",
        """
        def f():
            def g(a, b, /, c, *, d):
                return (a, b, c, d)
            return g(1, 2, 3, d=4), g(1, 2, c=3, d=4)
        """,
    ),
    case(
        "positional_only_passed_by_keyword_error",
        """
        def f():
            def g(a, /, b):
                return a + b
            return g(a=1, b=2)
        """,
    ),
    case(
        "positional_only_name_in_kwargs",
        """
        def f():
            def g(a, /, **kw):
                return a, kw
            return g(1, a=2)
        """,
    ),
    case(
        "star_args_collect",
        """
        def f():
            def g(a, *rest):
                return a, rest
            return g(1), g(1, 2, 3)
        """,
    ),
    case(
        "star_star_kwargs_collect",
        """
        def f():
            def g(a, **kw):
                return a, sorted(kw.items())
            return g(1, x=2, y=3)
        """,
    ),
    case(
        "call_with_star_unpacking",
        """
        def f():
            def g(a, b, c, d):
                return [a, b, c, d]
            xs = [2, 3]
            return g(1, *xs, 4), g(*range(4)), g(*"ab", *(1, 2))
        """,
    ),
    case(
        "call_with_double_star_unpacking",
        """
        def f():
            def g(a, b, c=0, **rest):
                return (a, b, c, sorted(rest))
            kw = {"b": 2, "z": 9}
            return g(1, **kw), g(**{"a": 1, "b": 2}, c=3, **{"q": 1})
        """,
    ),
    case(
        "duplicate_keyword_from_unpacking",
        """
        def f():
            def g(**kw):
                return kw
            return g(a=1, **{"a": 2})
        """,
    ),
    case(
        "star_args_not_iterable",
        """
        def f():
            def g(*a):
                return a
            return g(*5)
        """,
    ),
    case(
        "double_star_not_mapping",
        """
        def f():
            def g(**k):
                return k
            return g(**[1, 2])
        """,
    ),
    case(
        "too_many_positional",
        """
        def f():
            def g(a, b):
                return a
            return g(1, 2, 3)
        """,
    ),
    case(
        "missing_positional",
        """
        def f():
            def g(a, b, c):
                return a
            return g(1)
        """,
    ),
    case(
        "unexpected_keyword",
        """
        def f():
            def g(a):
                return a
            return g(1, b=2)
        """,
    ),
    case(
        "multiple_values_for_argument",
        """
        def f():
            def g(a, b):
                return a
            return g(1, a=2)
        """,
    ),
    case(
        "call_non_callable",
        """
        def f():
            x = 5
            return x()
        """,
    ),
    case(
        "mutable_default_shared",
        """
        def f():
            def g(x, acc=[]):
                acc.append(x)
                return list(acc)
            return g(1), g(2), g(3, []), g(4)
        """,
    ),
    case(
        "default_evaluated_at_def_time",
        """
        def f():
            n = 1
            def g(x=n):
                return x
            n = 2
            return g(), n
        """,
    ),
    case(
        "defaults_and_kwdefaults_attributes",
        """
        def f():
            def g(a, b=1, *, c=2):
                return a
            return g.__defaults__, g.__kwdefaults__, g.__name__, g.__code__.co_argcount
        """,
    ),
    case(
        "function_attributes",
        """
        def f():
            def g():
                "docstring here"
            g.tag = 7
            return g.__doc__, g.tag, g.__qualname__
        """,
    ),
    case(
        "call_builtin_with_kwargs",
        """
        def f():
            return sorted([3, 1, 2], reverse=True), int("ff", base=16), max([1, 5, 2], default=0)
        """,
    ),
    case(
        "call_method_with_kwargs",
        """
        def f():
            return "a,b,,c".split(",", maxsplit=2), "x".center(5, "*")
        """,
    ),
    case(
        "call_bound_method_stored",
        """
        def f():
            xs = []
            push = xs.append
            for i in range(3):
                push(i * i)
            return xs
        """,
    ),
    case(
        "call_class_object",
        """
        def f():
            return int(), list("abc"), dict(a=1), tuple(range(3)), type(5)
        """,
    ),
    case(
        "call_all_forms_combined",
        """
        def f():
            def g(a, b=2, /, c=3, *args, d, e=5, **kw):
                return (a, b, c, args, d, e, sorted(kw.items()))
            return [
                g(1, d=4),
                g(1, 2, 3, 4, 5, d=6, z=7),
                g(*[1, 2], **{"d": 0, "e": 1, "w": 2}),
            ]
        """,
    ),
    case(
        "kwargs_dict_is_fresh",
        """
        def f():
            def g(**kw):
                kw["added"] = True
                return kw
            d = {"x": 1}
            r = g(**d)
            return d, r, r is d
        """,
    ),
    case(
        "args_tuple_type",
        """
        def f():
            def g(*a):
                return type(a).__name__, a
            return g(*[1, 2])
        """,
    ),
    case(
        "keyword_argument_non_string_key",
        """
        def f():
            def g(**kw):
                return kw
            return g(**{1: 2})
        """,
    ),
    case(
        "entry_receives_mutable_arg",
        """
        def f(xs, d):
            xs.append(len(xs))
            d["n"] = d.get("n", 0) + 1
            return xs, d
        """,
        [1, 2],
        {"a": 1},
    ),
]

LAMBDAS = [
    case(
        "lambda_basic",
        """
        def f():
            sq = lambda x: x * x
            return [sq(i) for i in range(5)]
        """,
    ),
    case(
        "lambda_defaults_and_star",
        """
        def f():
            g = lambda a, b=10, *r, k=1, **kw: (a, b, r, k, kw)
            return g(1), g(1, 2, 3, k=4, z=5)
        """,
    ),
    case(
        "lambda_closure_late_binding",
        """
        def f():
            fs = [lambda: i for i in range(3)]
            return [g() for g in fs]
        """,
    ),
    case(
        "lambda_closure_default_capture",
        """
        def f():
            fs = [lambda i=i: i for i in range(3)]
            return [g() for g in fs]
        """,
    ),
    case(
        "lambda_as_sort_key",
        """
        def f():
            pairs = [(1, "b"), (2, "a"), (0, "c")]
            return sorted(pairs, key=lambda p: p[1]), max(pairs, key=lambda p: -p[0])
        """,
    ),
    case(
        "lambda_name",
        """
        def f():
            g = lambda: 0
            return g.__name__, g.__qualname__
        """,
    ),
    case(
        "lambda_immediately_invoked",
        """
        def f(x):
            return (lambda y: (lambda z: x + y + z))(2)(3)
        """,
        1,
    ),
    case(
        "lambda_conditional_expression",
        """
        def f():
            sign = lambda x: "neg" if x < 0 else ("zero" if x == 0 else "pos")
            return list(map(sign, [-2, 0, 3]))
        """,
    ),
]

DECORATORS = [
    case(
        "decorator_simple",
        """
        def f():
            def twice(fn):
                def inner(*a, **k):
                    return fn(*a, **k) * 2
                return inner
            @twice
            def g(x):
                return x + 1
            return g(3)
        """,
    ),
    case(
        "decorator_with_arguments",
        """
        def f():
            def add(n):
                def deco(fn):
                    return lambda *a: fn(*a) + n
                return deco
            @add(10)
            @add(1)
            def g(x):
                return x
            return g(5)
        """,
    ),
    case(
        "decorator_order",
        """
        def f():
            log = []
            def tag(name):
                log.append("make " + name)
                def deco(fn):
                    log.append("apply " + name)
                    return fn
                return deco
            @tag("outer")
            @tag("inner")
            def g():
                return 1
            return log, g()
        """,
    ),
    case(
        "decorator_registering",
        """
        def f():
            registry = {}
            def register(fn):
                registry[fn.__name__] = fn
                return fn
            @register
            def alpha():
                return "a"
            @register
            def beta():
                return "b"
            return sorted(registry), registry["beta"]()
        """,
    ),
    case(
        "class_decorator",
        """
        def f():
            def add_hello(cls):
                cls.hello = lambda self: "hello from " + type(self).__name__
                return cls
            @add_hello
            class A:
                pass
            return A().hello()
        """,
    ),
    case(
        "functools_wraps",
        """
        import functools
        def f():
            def deco(fn):
                @functools.wraps(fn)
                def wrapper(*a):
                    return fn(*a)
                return wrapper
            @deco
            def documented(x):
                "the doc"
                return x
            return documented.__name__, documented.__doc__, documented.__wrapped__(3)
        """,
    ),
    case(
        "functools_partial",
        """
        import functools
        def f():
            def g(a, b, c=0):
                return (a, b, c)
            p = functools.partial(g, 1, c=9)
            return p(2), p(3, c=4), p.args, p.keywords
        """,
    ),
    case(
        "functools_lru_cache",
        """
        import functools
        def f():
            calls = []
            @functools.lru_cache(maxsize=None)
            def fib(n):
                calls.append(n)
                return n if n < 2 else fib(n - 1) + fib(n - 2)
            return fib(20), len(calls), fib.cache_info().hits
        """,
    ),
    case(
        "functools_reduce",
        """
        import functools, operator
        def f():
            return functools.reduce(operator.mul, range(1, 8)), functools.reduce(lambda a, b: a + [b], "abc", [])
        """,
    ),
    case(
        "functools_cmp_to_key",
        """
        import functools
        def f():
            def cmp(a, b):
                return (len(a) > len(b)) - (len(a) < len(b)) or ((a > b) - (a < b))
            return sorted(["ccc", "a", "bb", "aa"], key=functools.cmp_to_key(cmp))
        """,
    ),
    case(
        "functools_total_ordering",
        """
        import functools
        def f():
            @functools.total_ordering
            class V:
                def __init__(self, v):
                    self.v = v
                def __eq__(self, o):
                    return self.v == o.v
                def __lt__(self, o):
                    return self.v < o.v
            return V(1) <= V(2), V(3) >= V(2), V(1) > V(1)
        """,
    ),
    case(
        "functools_singledispatch",
        """
        import functools
        def f():
            @functools.singledispatch
            def describe(x):
                return "thing"
            @describe.register
            def _(x: int):
                return "int"
            @describe.register(list)
            def _(x):
                return "list"
            return describe(1), describe([]), describe("s")
        """,
    ),
    case(
        "functools_cached_property",
        """
        import functools
        def f():
            class C:
                n = 0
                @functools.cached_property
                def value(self):
                    C.n += 1
                    return 42
            c = C()
            return c.value, c.value, C.n
        """,
    ),
]

RECURSION = [
    case(
        "recursion_factorial",
        """
        def f(n):
            def fact(k):
                return 1 if k <= 1 else k * fact(k - 1)
            return fact(n)
        """,
        25,
    ),
    case(
        "recursion_via_global_name",
        """
        def f(n):
            if n == 0:
                return []
            return [n] + f(n - 1)
        """,
        6,
    ),
    case(
        "mutual_recursion",
        """
        def f():
            def even(n):
                return True if n == 0 else odd(n - 1)
            def odd(n):
                return False if n == 0 else even(n - 1)
            return [even(i) for i in range(6)]
        """,
    ),
    case(
        "recursion_ackermann_small",
        """
        def f():
            def ack(m, n):
                if m == 0:
                    return n + 1
                if n == 0:
                    return ack(m - 1, 1)
                return ack(m - 1, ack(m, n - 1))
            return ack(2, 3)
        """,
    ),
    case(
        "recursion_permutations",
        """
        def f():
            def perms(xs):
                if len(xs) <= 1:
                    return [xs]
                out = []
                for i, x in enumerate(xs):
                    for p in perms(xs[:i] + xs[i + 1:]):
                        out.append([x] + p)
                return out
            return perms([1, 2, 3])
        """,
    ),
    case(
        "recursion_exception_unwinds",
        """
        def f():
            def down(n):
                if n == 0:
                    raise ValueError("bottom")
                return down(n - 1)
            try:
                down(10)
            except ValueError as e:
                return str(e)
        """,
    ),
    case(
        "nested_function_defaults_capture",
        """
        def f():
            out = []
            for i in range(3):
                def g(x, i=i, scale=i * 10):
                    return x + i + scale
                out.append(g)
            return [g(1) for g in out]
        """,
    ),
    case(
        "nested_function_returns_function",
        """
        def f():
            def make_adder(n):
                def add(x):
                    return x + n
                return add
            a5 = make_adder(5)
            return a5(1), make_adder(-1)(1), a5.__qualname__
        """,
    ),
    case(
        "function_annotations",
        """
        def f():
            def g(a: int, b: "str" = "x") -> list:
                return [a, b]
            return g(1), sorted(g.__annotations__)
        """,
    ),
]

CASES = CALL_FORMS + LAMBDAS + DECORATORS + RECURSION


@pytest.mark.parametrize("snippet", CASES)
def test_calls(snippet):
    snippet.assert_ok()
