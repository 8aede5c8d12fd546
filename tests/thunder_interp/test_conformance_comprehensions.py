"""Conformance: comprehensions, star-unpacking, walrus, slicing."""

import pytest
from conformance import case

COMPREHENSIONS = [
    case(
        "listcomp_basic",
        """
        def f(n):
            return [i * 2 for i in range(n)]
        """,
        6,
    ),
    case(
        "listcomp_condition",
        """
        def f():
            return [x for x in range(20) if x % 3 == 0 if x % 2 == 0]
        """,
    ),
    case(
        "listcomp_nested_loops",
        """
        def f():
            return [(i, j) for i in range(3) for j in range(i, 3) if i != j]
        """,
    ),
    case(
        "listcomp_nested_comprehension",
        """
        def f():
            return [[i * j for j in range(4)] for i in range(3)]
        """,
    ),
    case(
        "listcomp_ternary_element",
        """
        def f():
            return ["even" if i % 2 == 0 else "odd" for i in range(4)]
        """,
    ),
    case(
        "setcomp",
        """
        def f():
            return {x % 4 for x in range(20)}
        """,
    ),
    case(
        "dictcomp",
        """
        def f():
            return {k: v for k, v in zip("abc", range(3)) if v != 1}
        """,
    ),
    case(
        "dictcomp_key_order_and_overwrite",
        """
        def f():
            return list({x % 3: x for x in range(10)}.items())
        """,
    ),
    case(
        "comprehension_closure_reads_enclosing",
        """
        def f(k):
            return [x + k for x in range(3)], {x: k for x in "ab"}
        """,
        10,
    ),
    case(
        "comprehension_in_class_body",
        """
        def f():
            class A:
                xs = [1, 2, 3]
                doubled = [x * 2 for x in xs]
            return A.doubled
        """,
    ),
    case(
        "comprehension_in_class_body_cannot_see_class_names",
        """
        def f():
            class A:
                n = 2
                try:
                    r = [x * n for x in range(3)]
                except NameError as e:
                    r = "NameError: " + str(e)
            return A.r
        """,
    ),
    case(
        "comprehension_lambdas_capture",
        """
        def f():
            fs = [lambda: x for x in range(3)]
            gs = [(lambda y: lambda: y)(x) for x in range(3)]
            return [g() for g in fs], [g() for g in gs]
        """,
    ),
    case(
        "comprehension_tuple_unpacking_target",
        """
        def f():
            pairs = [(1, (2, 3)), (4, (5, 6))]
            return [a + b * c for a, (b, c) in pairs]
        """,
    ),
    case(
        "comprehension_star_target",
        """
        def f():
            return [(h, t) for h, *t in ["abc", "de", "f"]]
        """,
    ),
    case(
        "comprehension_exception_propagates",
        """
        def f():
            return [1 // x for x in [1, 2, 0, 4]]
        """,
    ),
    case(
        "comprehension_iter_variable_isolated",
        """
        def f():
            i = "keep"
            [i for i in range(3)]
            {i for i in range(3)}
            {i: i for i in range(3)}
            return i
        """,
    ),
    case(
        "comprehension_uses_outer_iterable_name",
        """
        def f():
            x = [1, 2, 3]
            x = [x for x in x]
            return x
        """,
    ),
    case(
        "comprehension_big",
        """
        def f():
            return sum([i % 7 for i in range(3000)])
        """,
    ),
    case(
        "nested_dict_of_lists_comprehension",
        """
        def f():
            words = ["apple", "avocado", "banana", "blueberry", "cherry"]
            return {c: [w for w in words if w[0] == c] for c in sorted({w[0] for w in words})}
        """,
    ),
]

UNPACKING = [
    case(
        "tuple_unpacking_swap",
        """
        def f(a, b):
            a, b = b, a
            return a, b
        """,
        1,
        2,
    ),
    case(
        "star_unpacking_middle",
        """
        def f():
            first, *mid, last = range(6)
            return first, mid, last
        """,
    ),
    case(
        "star_unpacking_empty",
        """
        def f():
            a, *rest = [1]
            *init, z = "z"
            return a, rest, init, z
        """,
    ),
    case(
        "nested_unpacking",
        """
        def f():
            (a, b), [c, (d, *e)] = (1, 2), [3, (4, 5, 6)]
            return a, b, c, d, e
        """,
    ),
    case(
        "unpacking_too_many_values",
        """
        def f():
            a, b = [1, 2, 3]
        """,
    ),
    case(
        "unpacking_not_enough_values",
        """
        def f():
            a, b, c = "ab"
        """,
    ),
    case(
        "unpacking_star_not_enough",
        """
        def f():
            a, b, *c = [1]
        """,
    ),
    case(
        "unpacking_non_iterable",
        """
        def f():
            a, b = 5
        """,
    ),
    case(
        "star_in_list_tuple_set_display",
        """
        def f():
            xs = [1, 2]
            return [0, *xs, *"ab"], (*xs, 3), {*xs, *xs}
        """,
    ),
    case(
        "double_star_in_dict_display",
        """
        def f():
            a = {"x": 1, "y": 2}
            return {**a, "y": 20, **{"z": 3}}
        """,
    ),
    case(
        "unpack_dict_into_tuple",
        """
        def f():
            k1, k2 = {"a": 1, "b": 2}
            return k1, k2
        """,
    ),
    case(
        "chained_assignment",
        """
        def f():
            a = b = c = []
            a.append(1)
            x, y = z = (3, 4)
            return b, c is a, x, y, z
        """,
    ),
    case(
        "unpack_generator_and_custom_iterable",
        """
        def f():
            def gen():
                yield from (1, 2, 3)
            a, *b = gen()
            class It:
                def __iter__(self):
                    return iter([7, 8])
            c, d = It()
            return a, b, c, d
        """,
    ),
    case(
        "assignment_into_subscript_and_attribute_targets",
        """
        def f():
            class O:
                pass
            o = O()
            d = {}
            o.x, d["k"], [p, q] = 1, 2, (3, 4)
            return o.x, d, p, q
        """,
    ),
    case(
        "for_loop_unpacking_targets",
        """
        def f():
            out = []
            for i, (k, v) in enumerate(sorted({"b": 2, "a": 1}.items())):
                out.append((i, k, v))
            return out
        """,
    ),
]

WALRUS = [
    case(
        "walrus_in_while",
        """
        def f():
            data = [3, 2, 1, 0, 5]
            out = []
            i = 0
            while (x := data[i]) != 0:
                out.append(x)
                i += 1
            return out, x
        """,
    ),
    case(
        "walrus_in_comprehension_binds_outer",
        """
        def f():
            ys = [y for x in range(5) if (y := x * x) > 3]
            return ys, y
        """,
    ),
    case(
        "walrus_in_if",
        """
        def f(s):
            if (n := len(s)) > 3:
                return "long", n
            return "short", n
        """,
        "hello",
    ),
    case(
        "walrus_running_total",
        """
        def f():
            total = 0
            return [total := total + x for x in range(5)], total
        """,
    ),
    case(
        "walrus_in_nested_function_comprehension",
        """
        def f():
            def g():
                [last := c for c in "xyz"]
                return last
            return g()
        """,
    ),
]

SLICING = [
    case(
        "slice_basic",
        """
        def f(xs):
            return xs[1:3], xs[:2], xs[3:], xs[:], xs[-2:], xs[::-1], xs[::2], xs[5:1:-2]
        """,
        list(range(8)),
    ),
    case(
        "slice_string_and_tuple",
        """
        def f():
            s = "abcdefg"
            t = tuple(s)
            return s[::3], s[-3:-1], t[1::2], s[100:], s[-100:2]
        """,
    ),
    case(
        "slice_assignment",
        """
        def f():
            xs = list(range(10))
            xs[2:5] = ["a"]
            xs[::3] = [None] * len(xs[::3])
            xs[:0] = [-1, -2]
            return xs
        """,
    ),
    case(
        "slice_assignment_wrong_size_extended",
        """
        def f():
            xs = list(range(10))
            xs[::2] = [1, 2]
        """,
    ),
    case(
        "slice_delete",
        """
        def f():
            xs = list(range(10))
            del xs[::2]
            del xs[:1]
            return xs
        """,
    ),
    case(
        "slice_objects",
        """
        def f():
            s = slice(1, None, 2)
            xs = list(range(7))
            return xs[s], s.indices(7), (s.start, s.stop, s.step)
        """,
    ),
    case(
        "slice_custom_getitem",
        """
        def f():
            class S:
                def __getitem__(self, key):
                    return key
            s = S()
            return s[1:2], s[::3], s[1, 2:3], s[..., 0], s[:]
        """,
    ),
    case(
        "slice_zero_step",
        """
        def f():
            return [1, 2, 3][::0]
        """,
    ),
    case(
        "slice_bytes_and_range",
        """
        def f():
            return b"hello"[1:4], range(10)[2:8:3], bytearray(b"xyz")[::-1], memoryview(b"abcd")[1:3].tobytes()
        """,
    ),
    case(
        "index_errors",
        """
        def f():
            out = []
            for seq in ([1], "a", (1,), range(1)):
                try:
                    seq[5]
                except IndexError as e:
                    out.append(str(e))
            return out
        """,
    ),
    case(
        "index_with_non_int",
        """
        def f():
            k = "0"
            return [1, 2][k]
        """,
    ),
    case(
        "index_dunder_index",
        """
        def f():
            class I:
                def __index__(self):
                    return 2
            return [10, 20, 30][I()], "abcd"[I():], list(range(5))[:I()]
        """,
    ),
]

CASES = COMPREHENSIONS + UNPACKING + WALRUS + SLICING


@pytest.mark.parametrize("snippet", CASES)
def test_comprehensions(snippet):
    snippet.assert_ok()
