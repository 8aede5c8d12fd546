"""Conformance: integer/float arithmetic, comparisons, boolean short-circuit, loops with else,
builtins and itertools."""

import pytest
from conformance import case

ARITHMETIC = [
    case(
        "int_basic_ops",
        """
        def f(a, b):
            return [a + b, a - b, a * b, a / b, a // b, a % b, a ** 2, -a, +b, ~a, a & b, a | b, a ^ b, a << 3, a >> 1]
        """,
        17,
        5,
    ),
    case(
        "negative_floor_division_and_modulo",
        """
        def f():
            pairs = [(7, 2), (-7, 2), (7, -2), (-7, -2), (0, -3), (-1, 5)]
            return [(a // b, a % b, divmod(a, b)) for a, b in pairs]
        """,
    ),
    case(
        "float_floor_division_and_modulo",
        """
        def f():
            pairs = [(7.5, 2), (-7.5, 2), (7.5, -2.0), (-0.0, 1.0), (1e300, 1e-300)]
            return [(a // b, a % b, divmod(a, b)) for a, b in pairs]
        """,
    ),
    case(
        "true_division_results",
        """
        def f():
            return [1 / 3, 10 / 5, -7 / 2, 2 ** 53 / 3, (10 ** 30) / 7, 1 / -0.5]
        """,
    ),
    case(
        "big_ints",
        """
        def f():
            a = 2 ** 200
            b = 3 ** 150
            return a * b, a // b, a % b, -a // 7, a - b, (a * b) >> 100, str(10 ** 50 + 1), a.bit_length(), (-b).bit_length()
        """,
    ),
    case(
        "power_edge_cases",
        """
        def f():
            return [2 ** -1, (-2) ** 3, (-2) ** -2, 0 ** 0, 10 ** -3, 2.0 ** 0.5, pow(3, 4, 5), pow(2, -1, 7), (-8) ** (1 / 3), 0.0 ** 0]
        """,
    ),
    case(
        "power_zero_negative_error",
        """
        def f():
            return 0 ** -1
        """,
    ),
    case(
        "divmod_zero_error",
        """
        def f():
            return divmod(5, 0)
        """,
    ),
    case(
        "float_special_values",
        """
        import math
        def f():
            inf = float("inf")
            nan = float("nan")
            return [inf + 1, -inf, inf - inf, nan == nan, nan != nan, math.isnan(inf * 0), min(inf, 3), 1e308 * 10, -0.0, 0.0 == -0.0, math.copysign(1, -0.0)]
        """,
    ),
    case(
        "float_repr_and_rounding",
        """
        def f():
            return [0.1 + 0.2, round(2.5), round(3.5), round(-2.5), round(1.2345, 2), round(1234, -2), int(-3.9), int(3.9), float("1e-5"), 1e16, 1.5e-7, 100.0]
        """,
    ),
    case(
        "int_conversions",
        """
        def f():
            return [int("  42 "), int("-0x1f", 16), int("0b101", 0), int(True), float("  -1.5"), str(-0), hex(-255), oct(8), bin(5), int("1_000")]
        """,
    ),
    case(
        "int_float_mixed_and_complex",
        """
        def f():
            z = 3 + 4j
            return [1 + 2.0, 3 * 0.5, 7 // 2.0, True + True, abs(z), z.conjugate(), z * 1j, (1j) ** 2, complex(1, -1) / 2]
        """,
    ),
    case(
        "int_methods",
        """
        def f():
            n = 255
            return [n.to_bytes(2, "big"), int.from_bytes(b"\\x01\\x00", "little"), (-5).__abs__(), n.__index__(), (10).__divmod__(3), (7).as_integer_ratio(), (0.75).as_integer_ratio(), (2.0).is_integer()]
        """,
    ),
    case(
        "math_module",
        """
        import math
        def f():
            return [math.floor(-2.5), math.ceil(-2.5), math.trunc(-2.7), math.gcd(84, 36), math.factorial(12), math.isqrt(99), math.comb(10, 3), math.prod([1, 2, 3, 4]), round(math.pi, 5), math.fsum([0.1] * 10), math.log2(1024)]
        """,
    ),
    case(
        "math_domain_error",
        """
        import math
        def f():
            return math.sqrt(-1)
        """,
    ),
    case(
        "shift_negative_error",
        """
        def f():
            return 1 << -1
        """,
    ),
    case(
        "float_int_overflow_conversion",
        """
        def f():
            return int(float("inf"))
        """,
    ),
    case(
        "decimal_and_fraction",
        """
        import decimal, fractions
        def f():
            d = decimal.Decimal("1.10") + decimal.Decimal("2.205")
            q = fractions.Fraction(1, 3) + fractions.Fraction(1, 6)
            return str(d), q, q * 2, float(q), fractions.Fraction("0.75")
        """,
    ),
    case(
        "operator_precedence",
        """
        def f():
            return [2 + 3 * 4 ** 2, -2 ** 2, (-2) ** 2, 2 ** 3 ** 2, 10 - 4 - 3, 100 // 10 // 3, 1 + 2 << 1, 6 & 3 | 8, not 1 == 2, 5 % 3 * 2]
        """,
    ),
]

COMPARISONS = [
    case(
        "chained_comparisons",
        """
        def f():
            x = 5
            return [1 < x < 10, 1 < x > 10, x == 5 == 5.0, 1 <= x <= 5 < 6, 3 > x > 1, 0 < x != 5]
        """,
    ),
    case(
        "chained_comparison_evaluates_middle_once",
        """
        def f():
            log = []
            def v(n):
                log.append(n)
                return n
            r = v(1) < v(2) < v(0) < v(3)
            return r, log
        """,
    ),
    case(
        "identity_and_membership",
        """
        def f():
            a = [1]
            b = a
            c = [1]
            return [a is b, a is c, a is not c, a == c, None is None, 1 in a, 2 not in a, "k" in {"k": 1}, 3 in range(5)]
        """,
    ),
    case(
        "boolean_short_circuit",
        """
        def f():
            log = []
            def t(name, v):
                log.append(name)
                return v
            r1 = t("a", 0) and t("b", 1)
            r2 = t("c", "") or t("d", []) or t("e", "last")
            r3 = t("f", 1) or t("g", 2)
            r4 = not t("h", None)
            return [r1, r2, r3, r4], log
        """,
    ),
    case(
        "boolean_ops_return_operands",
        """
        def f():
            return [0 or 5, 3 and 4, [] and 1, "" or None, None or 0, 1 and [] or "x", (0, 1) and "t"]
        """,
    ),
    case(
        "conditional_expression_short_circuit",
        """
        def f(x):
            return ("div", 10 // x) if x else "zero"
        """,
        0,
    ),
    case(
        "truthiness_of_builtins",
        """
        def f():
            return [bool(v) for v in (0, 0.0, 0j, "", b"", [], (), {}, set(), range(0), None, 1, "0", [0], -1)]
        """,
    ),
]

LOOPS = [
    case(
        "while_else_no_break",
        """
        def f(n):
            i = 0
            out = []
            while i < n:
                out.append(i)
                i += 1
            else:
                out.append("else")
            return out
        """,
        3,
    ),
    case(
        "while_else_with_break",
        """
        def f():
            i = 0
            while True:
                i += 1
                if i > 4:
                    break
            else:
                return "unreachable"
            return i
        """,
    ),
    case(
        "for_else_search",
        """
        def f():
            def find(xs, target):
                for i, x in enumerate(xs):
                    if x == target:
                        break
                else:
                    return -1
                return i
            return find([4, 5, 6], 5), find([4, 5, 6], 9), find([], 1)
        """,
    ),
    case(
        "nested_loops_break_continue",
        """
        def f():
            out = []
            for i in range(4):
                for j in range(4):
                    if j > i:
                        break
                    if (i + j) % 2:
                        continue
                    out.append((i, j))
                else:
                    out.append("never")
            return out
        """,
    ),
    case(
        "while_with_continue_and_else",
        """
        def f():
            n = 10
            odds = []
            while n > 0:
                n -= 1
                if n % 2 == 0:
                    continue
                odds.append(n)
            else:
                odds.append("done")
            return odds
        """,
    ),
    case(
        "loop_with_return_inside",
        """
        def f():
            for i in range(10):
                while True:
                    if i == 3:
                        return "found", i
                    break
            return "none"
        """,
    ),
    case(
        "long_loop_accumulate",
        """
        def f(n):
            total = 0
            i = 0
            while i < n:
                if i % 3 == 0:
                    total += i
                elif i % 3 == 1:
                    total -= 1
                else:
                    total ^= i
                i += 1
            return total
        """,
        5000,
    ),
    case(
        "for_over_various_iterables",
        """
        def f():
            out = []
            for c in "ab":
                out.append(c)
            for k in {"x": 1, "y": 2}:
                out.append(k)
            for v in (1.5,):
                out.append(v)
            for b in b"\\x01\\x02":
                out.append(b)
            for i in range(10, 0, -4):
                out.append(i)
            return out
        """,
    ),
    case(
        "if_elif_else_chain",
        """
        def f():
            def grade(s):
                if s >= 90:
                    return "A"
                elif s >= 80:
                    return "B"
                elif s >= 70:
                    return "C"
                else:
                    return "F"
            return [grade(s) for s in (95, 85, 75, 10, 90, 80)]
        """,
    ),
    case(
        "empty_loops_and_pass",
        """
        def f():
            for _ in []:
                pass
            while False:
                pass
            else:
                x = "while else"
            if True:
                pass
            return x
        """,
    ),
]

BUILTINS = [
    case(
        "sorted_min_max_with_key",
        """
        def f():
            words = ["pear", "fig", "banana", "kiwi"]
            return sorted(words, key=len), sorted(words, key=lambda w: (-len(w), w)), min(words, key=len), max(words), max([], default="none"), min(3, 1, 2)
        """,
    ),
    case(
        "map_filter_zip_enumerate",
        """
        def f():
            nums = [1, 2, 3, 4, 5]
            return list(map(lambda x: x * x, nums)), list(filter(lambda x: x % 2, nums)), list(filter(None, [0, 1, "", "a"])), list(zip(nums, "abc")), list(enumerate("xy", start=5)), list(map(pow, [2, 3], [3, 2]))
        """,
    ),
    case(
        "sum_any_all_abs_round",
        """
        def f():
            return sum([1, 2, 3]), sum([[1], [2]], []), sum(range(5), 10), any([]), all([]), any([0, "", 3]), all([1, 0]), abs(-7.5), round(7.456, 1)
        """,
    ),
    case(
        "isinstance_with_tuples_and_abc",
        """
        import collections.abc
        def f():
            return [isinstance(1, (str, int)), isinstance(True, int), isinstance([], collections.abc.Sequence), isinstance({}, collections.abc.Mapping), isinstance(iter([]), collections.abc.Iterator), isinstance("", (list, tuple)), issubclass(bool, (int,))]
        """,
    ),
    case(
        "getattr_with_defaults",
        """
        def f():
            class O:
                a = 1
            return getattr(O, "a"), getattr(O, "b", "default"), getattr(O(), "a", None), getattr([], "append").__name__
        """,
    ),
    case(
        "getattr_missing_no_default",
        """
        def f():
            return getattr(object(), "zzz")
        """,
    ),
    case(
        "type_id_hash_callable",
        """
        def f():
            x = [1]
            return type(x).__name__, id(x) == id(x), hash(1) == hash(1.0), callable(len), callable(3), type(None).__name__
        """,
    ),
    case(
        "range_properties",
        """
        def f():
            r = range(2, 20, 3)
            return list(r), len(r), r[2], r[-1], 8 in r, 9 in r, r.index(11), list(range(5, 0, -2)), range(0) == range(2, 2)
        """,
    ),
    case(
        "chr_ord_repr_ascii",
        """
        def f():
            return chr(97), ord("€"), repr("a'b"), ascii("ü"), repr(b"\\x00a"), str(3.0), repr(1e100)
        """,
    ),
    case(
        "vars_dir_contains",
        """
        def f():
            class A:
                def __init__(self):
                    self.p = 1
                def m(self):
                    pass
            a = A()
            return vars(a), "m" in dir(a), "p" in dir(a)
        """,
    ),
    case(
        "print_variants",
        """
        def f():
            print("a", 1, None, [1, "x"], sep="|", end="!\\n")
            print()
            print("no newline", end="")
            print(" then", 2.5)
            import io
            buf = io.StringIO()
            print("to buffer", file=buf)
            return buf.getvalue()
        """,
    ),
    case(
        "iter_next_default_and_reversed",
        """
        def f():
            it = iter([1, 2])
            return next(it), next(it), next(it, "end"), list(reversed([1, 2, 3])), list(reversed(range(3))), list(reversed("ab"))
        """,
    ),
    case(
        "exec_and_eval_inside",
        """
        def f():
            ns = {}
            exec("y = 2 * 21", ns)
            return ns["y"], eval("1 + 2"), eval("a * b", {"a": 3, "b": 4})
        """,
    ),
    case(
        "builtin_functions_as_values",
        """
        def f():
            ops = [len, str.upper, abs, sorted]
            args = ["abc", "abc", -3, "cba"]
            return [op(a) for op, a in zip(ops, args)]
        """,
    ),
    case(
        "operator_module",
        """
        import operator
        def f():
            items = [{"n": 3}, {"n": 1}]
            getter = operator.itemgetter("n")
            pairs = [(1, "b"), (0, "a")]
            return sorted(items, key=getter), operator.add(1, 2), sorted(pairs, key=operator.itemgetter(1)), operator.attrgetter("real")(5), operator.methodcaller("upper")("x")
        """,
    ),
]

ITERTOOLS = [
    case(
        "itertools_basic",
        """
        import itertools
        def f():
            return [list(itertools.chain([1], "ab", range(2))), list(itertools.islice(itertools.count(10, 5), 4)), list(itertools.repeat("x", 3)), list(itertools.accumulate([1, 2, 3, 4])), list(itertools.zip_longest("ab", [1], fillvalue=0))]
        """,
    ),
    case(
        "itertools_combinatorics",
        """
        import itertools
        def f():
            return [list(itertools.product("ab", repeat=2)), list(itertools.permutations([1, 2, 3], 2)), list(itertools.combinations(range(4), 2)), list(itertools.combinations_with_replacement("ab", 2))]
        """,
    ),
    case(
        "itertools_groupby_and_takewhile",
        """
        import itertools
        def f():
            data = "aaabccdd"
            return [(k, len(list(g))) for k, g in itertools.groupby(data)], list(itertools.takewhile(lambda x: x < 3, [1, 2, 3, 1])), list(itertools.dropwhile(lambda x: x < 3, [1, 2, 3, 1])), list(itertools.filterfalse(lambda x: x % 2, range(6)))
        """,
    ),
    case(
        "itertools_with_generator_input",
        """
        import itertools
        def f():
            def squares():
                n = 0
                while True:
                    yield n * n
                    n += 1
            return list(itertools.islice(squares(), 2, 6)), list(itertools.compress("abcdef", [1, 0, 1, 0, 1, 1])), list(itertools.starmap(pow, [(2, 3), (3, 2)]))
        """,
    ),
    case(
        "itertools_tee_and_cycle",
        """
        import itertools
        def f():
            a, b = itertools.tee(iter([1, 2, 3]))
            c = itertools.cycle("xy")
            return list(a), list(b), [next(c) for _ in range(5)]
        """,
    ),
    case(
        "itertools_pairwise_and_batched",
        """
        import itertools, sys
        def f():
            out = [list(itertools.pairwise("abcd"))] if sys.version_info >= (3, 10) else []
            if sys.version_info >= (3, 12):
                out.append(list(itertools.batched(range(7), 3)))
            else:
                out.append([(0, 1, 2), (3, 4, 5), (6,)])
            return out
        """,
    ),
]

CASES = ARITHMETIC + COMPARISONS + LOOPS + BUILTINS + ITERTOOLS


@pytest.mark.parametrize("snippet", CASES)
def test_arith(snippet):
    snippet.assert_ok()
