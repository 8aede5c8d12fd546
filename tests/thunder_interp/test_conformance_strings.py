"""Conformance: f-strings, str/bytes/dict/set operations."""

import pytest
from conformance import case

FSTRINGS = [
    case(
        "fstring_basic",
        """
        def f(name, n):
            return f"hello {name}, you are {n} years old; next year {n + 1}"
        """,
        "ada",
        36,
    ),
    case(
        "fstring_format_specs",
        """
        def f():
            x = 3.14159
            n = 1234567
            return [f"{x:.2f}", f"{x:10.3e}", f"{n:,}", f"{n:_x}", f"{255:#06x}", f"{42:>8}", f"{'s':*^9}", f"{-5:+d}", f"{0.25:%}", f"{7:b}", f"{12:o}"]
        """,
    ),
    case(
        "fstring_conversions",
        """
        def f():
            s = "it's"
            return f"{s!r}", f"{s!s}", f"{s!a}", f"{'é'!a}", f"{[1, 'a']!r:>15}"
        """,
    ),
    case(
        "fstring_nested_spec",
        """
        def f():
            width, prec = 10, 3
            v = 2.718281828
            return f"{v:{width}.{prec}f}|", f"{'x':{'<'}{width}}|"
        """,
    ),
    case(
        "fstring_equals_specifier",
        """
        def f():
            x = 7
            name = "n"
            return f"{x=}", f"{x + 1 = }", f"{name=!r}", f"{x=:>4}", f"{3.5=:.1f}"
        """,
    ),
    case(
        "fstring_braces_and_escapes",
        """
        def f():
            v = 1
            return f"{{literal}} {v}", f"tab\\t{v}\\n", f"{v!r:}{{"
        """,
    ),
    case(
        "fstring_expressions_inside",
        """
        def f():
            d = {"k": [1, 2, 3]}
            return f"{d['k'][1:]}", f"{len(d)}", f"{'yes' if d else 'no'}", f"{(lambda z: z * 2)(4)}", f"{[i for i in range(3)]}"
        """,
    ),
    case(
        "fstring_custom_format_and_str",
        """
        def f():
            class P:
                def __str__(self):
                    return "P-str"
                def __repr__(self):
                    return "P-repr"
                def __format__(self, spec):
                    return "P-format(" + spec + ")"
            p = P()
            return f"{p}", f"{p!s}", f"{p!r}", f"{p:xyz}", "{} {!r} {:q}".format(p, p, p)
        """,
    ),
    case(
        "fstring_multiline_and_concat",
        """
        def f():
            a, b = 1, 2
            s = (f"a={a} "
                 "plain "
                 f"b={b}")
            return s
        """,
    ),
    case(
        "fstring_datetime_format",
        """
        import datetime
        def f():
            d = datetime.date(2024, 3, 9)
            return f"{d:%Y/%m/%d}", f"{d!r}"
        """,
    ),
    case(
        "fstring_invalid_spec",
        """
        def f():
            return f"{5:q}"
        """,
    ),
    case(
        "percent_and_format_methods",
        """
        def f():
            return "%s-%d-%05.1f-%r" % ("a", 3, 2.25, "q"), "{0}{1}{0}".format("a", "b"), "{x:>{w}}".format(x=1, w=4), "%(k)s" % {"k": "v"}
        """,
    ),
]

STRINGS = [
    case(
        "str_methods",
        """
        def f(s):
            return [s.upper(), s.lower(), s.title(), s.strip(), s.split(), s.replace("o", "0"), s.find("o"), s.rfind("o"), s.count("o"), s.startswith(" he"), s.strip().endswith("d"), s.swapcase()]
        """,
        " hello world ",
    ),
    case(
        "str_join_split_partition",
        """
        def f():
            s = "k1=v1;k2=v2;k3"
            parts = s.split(";")
            return parts, [p.partition("=") for p in parts], "|".join(parts), s.rsplit(";", 1), "a\\nb\\r\\nc".splitlines()
        """,
    ),
    case(
        "str_predicates_and_padding",
        """
        def f():
            return ["123".isdigit(), "abc".isalpha(), "a1".isalnum(), "  ".isspace(), "Ab".istitle(), "7".zfill(3), "ab".ljust(4, "."), "ab".rjust(4), "x".center(4, "-")]
        """,
    ),
    case(
        "str_indexing_iteration_and_ord",
        """
        def f():
            s = "héllo"
            return s[1], s[-1], len(s), [ord(c) for c in s], "".join(chr(ord(c) + 1) for c in "abc"), s.encode("utf-8")
        """,
    ),
    case(
        "str_multiplication_and_comparison",
        """
        def f():
            return "ab" * 3, 0 * "x", "abc" < "abd", "Z" < "a", "a" in "cat", "" in "x", sorted(["b", "A", "a", "B"])
        """,
    ),
    case(
        "str_translate_and_maketrans",
        """
        def f():
            table = str.maketrans("abc", "xyz", "d")
            return "abcdabcd".translate(table), "Hello".casefold(), "a-b_c".replace("-", "_").split("_")
        """,
    ),
    case(
        "str_immutable_error",
        """
        def f():
            s = "abc"
            s[0] = "z"
        """,
    ),
    case(
        "str_index_error_and_value_error",
        """
        def f():
            out = []
            try:
                "abc".index("z")
            except ValueError as e:
                out.append(str(e))
            try:
                "abc"[10]
            except IndexError as e:
                out.append(str(e))
            return out
        """,
    ),
    case(
        "bytes_operations",
        """
        def f():
            b = b"Hello, World"
            return [b.lower(), b.split(b", "), b[0], b[-1:], b.hex(), bytes.fromhex("4142"), b + b"!", b.decode("ascii"), list(b[:3]), b.find(b"W"), bytes(3), bytes([65, 66])]
        """,
    ),
    case(
        "bytearray_mutation",
        """
        def f():
            ba = bytearray(b"abc")
            ba[0] = ord("X")
            ba.extend(b"de")
            ba += b"f"
            del ba[1]
            ba.insert(0, 33)
            return ba, bytes(ba), len(ba)
        """,
    ),
    case(
        "bytes_str_mixing_error",
        """
        def f():
            return b"a" + "b"
        """,
    ),
    case(
        "bytes_decode_error",
        """
        def f():
            return b"\\xff\\xfe".decode("utf-8")
        """,
    ),
]

DICTS_SETS = [
    case(
        "dict_operations",
        """
        def f():
            d = {"b": 2, "a": 1}
            d["c"] = 3
            d.update(z=26, a=10)
            d.setdefault("a", 999)
            d.setdefault("new", [])
            popped = d.pop("b")
            return list(d.items()), popped, d.get("missing"), d.get("missing", 0), "a" in d, len(d)
        """,
    ),
    case(
        "dict_iteration_order_and_views",
        """
        def f():
            d = dict.fromkeys("hello", 0)
            for ch in "hello":
                d[ch] += 1
            keys = d.keys()
            d["!"] = 1
            return list(keys), list(d.values()), list(reversed(d)), keys & {"h", "z"}
        """,
    ),
    case(
        "dict_merge_operators",
        """
        def f():
            a = {"x": 1, "y": 2}
            b = {"y": 20, "z": 30}
            c = a | b
            a |= {"w": 0}
            return c, a, b | a
        """,
    ),
    case(
        "dict_mutation_during_iteration_error",
        """
        def f():
            d = {1: 1, 2: 2}
            for k in d:
                d[k + 10] = 0
        """,
    ),
    case(
        "dict_popitem_and_clear",
        """
        def f():
            d = {i: i * i for i in range(4)}
            last = d.popitem()
            c = d.copy()
            d.clear()
            try:
                d.popitem()
            except KeyError as e:
                err = str(e)
            return last, c, d, err
        """,
    ),
    case(
        "dict_equality_and_order_independent_eq",
        """
        def f():
            return {"a": 1, "b": 2} == {"b": 2, "a": 1}, list({"a": 1, "b": 2}) == list({"b": 2, "a": 1})
        """,
    ),
    case(
        "collections_usage",
        """
        import collections
        def f():
            c = collections.Counter("mississippi")
            dd = collections.defaultdict(list)
            for w in ["apple", "avocado", "banana"]:
                dd[w[0]].append(w)
            Pt = collections.namedtuple("Pt", "x y")
            p = Pt(1, y=2)
            dq = collections.deque([1, 2, 3], maxlen=3)
            dq.append(4)
            dq.appendleft(0)
            od = collections.OrderedDict(a=1, b=2)
            od.move_to_end("a")
            return c.most_common(2), dict(dd), p, p._replace(x=9), p.x + p[1], list(dq), list(od)
        """,
    ),
    case(
        "set_operations",
        """
        def f():
            a = {1, 2, 3, 4}
            b = {3, 4, 5}
            return sorted(a | b), sorted(a & b), sorted(a - b), sorted(a ^ b), a <= a | b, {1, 2} < a, a.isdisjoint({9}), sorted(frozenset(b) | {0})
        """,
    ),
    case(
        "set_mutation_methods",
        """
        def f():
            s = set()
            s.add(3)
            s.update([1, 2], (5,))
            s.discard(99)
            s.remove(1)
            s -= {5}
            s |= {7}
            s &= {2, 3, 7, 8}
            try:
                s.remove(100)
            except KeyError as e:
                err = str(e)
            return sorted(s), err, len(s)
        """,
    ),
    case(
        "frozenset_hashable",
        """
        def f():
            d = {frozenset({1, 2}): "pair"}
            return d[frozenset({2, 1})], len({frozenset(), frozenset()})
        """,
    ),
    case(
        "list_methods",
        """
        def f():
            xs = [5, 3, 8, 1]
            xs.append(7)
            xs.extend([2, 2])
            xs.insert(1, 99)
            xs.remove(2)
            p = xs.pop(0)
            xs.sort()
            ys = xs.copy()
            ys.reverse()
            return xs, ys, p, xs.index(7), xs.count(2), xs * 2, [0] + xs[:2]
        """,
    ),
    case(
        "list_sort_stability_and_key",
        """
        def f():
            rows = [("b", 2), ("a", 2), ("c", 1), ("a", 1)]
            return sorted(rows, key=lambda r: r[1]), sorted(rows, key=lambda r: (r[1], r[0]), reverse=True)
        """,
    ),
    case(
        "list_comparison_and_nesting",
        """
        def f():
            return [1, 2] < [1, 3], [1, [2]] == [1, [2]], (1, 2) < (1, 2, 0), [[0] * 2] * 2, [] or "empty"
        """,
    ),
    case(
        "tuple_methods_and_hash",
        """
        def f():
            t = (1, 2, 2, 3)
            return t.count(2), t.index(3), hash(t) == hash((1, 2, 2, 3)), t + (4,), t * 2, tuple(reversed(t))
        """,
    ),
]

CASES = FSTRINGS + STRINGS + DICTS_SETS


@pytest.mark.parametrize("snippet", CASES)
def test_strings(snippet):
    snippet.assert_ok()
