"""Conformance: structural pattern matching (match statements)."""

import pytest
from conformance import case

CASES = [
    case(
        "match_literals",
        """
        def f():
            def classify(x):
                match x:
                    case 0:
                        return "zero"
                    case 1 | 2 | 3:
                        return "small"
                    case "hi":
                        return "greeting"
                    case None:
                        return "none"
                    case True:
                        return "true"
                    case -1.5:
                        return "neg float"
                    case _:
                        return "other"
            return [classify(v) for v in (0, 2, "hi", None, True, -1.5, 99, 1.0)]
        """,
    ),
    case(
        "match_true_vs_one",
        """
        def f():
            def m(x):
                match x:
                    case True:
                        return "is True"
                    case 1:
                        return "is 1"
                return "none"
            return m(1), m(True), m(1.0)
        """,
    ),
    case(
        "match_capture_and_wildcard",
        """
        def f(v):
            match v:
                case 0:
                    return "zero"
                case other:
                    return ("captured", other)
        """,
        42,
    ),
    case(
        "match_sequence_patterns",
        """
        def f():
            def m(x):
                match x:
                    case []:
                        return "empty"
                    case [a]:
                        return ("one", a)
                    case [a, b]:
                        return ("two", a, b)
                    case [first, *rest] if len(rest) > 2:
                        return ("long", first, rest)
                    case (a, b, c):
                        return ("three", a + b + c)
                    case _:
                        return "other"
            return [m(v) for v in ([], [1], (1, 2), [1, 2, 3], [1, 2, 3, 4, 5], "ab", {1, 2})]
        """,
    ),
    case(
        "match_sequence_star_middle",
        """
        def f():
            def m(x):
                match x:
                    case [a, *mid, z]:
                        return a, mid, z
            return m(range(5)), m([1, 2]), m([1])
        """,
    ),
    case(
        "match_string_not_sequence",
        """
        def f():
            match "abc":
                case [a, b, c]:
                    return "sequence"
                case str() as s:
                    return "string " + s
        """,
    ),
    case(
        "match_mapping_patterns",
        """
        def f():
            def m(d):
                match d:
                    case {"type": "point", "x": x, "y": y}:
                        return ("point", x, y)
                    case {"type": "circle", "r": r, **rest}:
                        return ("circle", r, rest)
                    case {}:
                        return "some mapping"
                    case _:
                        return "not a mapping"
            return [m({"type": "point", "x": 1, "y": 2, "extra": 0}), m({"type": "circle", "r": 3, "c": "red"}), m({"a": 1}), m([1])]
        """,
    ),
    case(
        "match_mapping_custom_get",
        """
        import collections
        def f():
            d = collections.defaultdict(int, {"k": 1})
            match d:
                case {"missing": v}:
                    r = ("missing", v)
                case {"k": v}:
                    r = ("k", v)
            return r, "missing" in d
        """,
    ),
    case(
        "match_class_patterns_keyword",
        """
        def f():
            class Point:
                def __init__(self, x, y):
                    self.x, self.y = x, y
            def where(p):
                match p:
                    case Point(x=0, y=0):
                        return "origin"
                    case Point(x=0, y=y):
                        return f"y-axis {y}"
                    case Point(x=x, y=0):
                        return f"x-axis {x}"
                    case Point():
                        return "elsewhere"
                    case _:
                        return "not a point"
            return [where(Point(0, 0)), where(Point(0, 5)), where(Point(3, 0)), where(Point(1, 1)), where(5)]
        """,
    ),
    case(
        "match_class_patterns_positional_match_args",
        """
        def f():
            class Vec:
                __match_args__ = ("x", "y")
                def __init__(self, x, y):
                    self.x, self.y = x, y
            match Vec(1, 2):
                case Vec(1, y):
                    return "first is one, y=" + str(y)
        """,
    ),
    case(
        "match_class_patterns_builtins",
        """
        def f():
            def m(v):
                match v:
                    case bool(b):
                        return ("bool", b)
                    case int(n) if n < 0:
                        return ("negative int", n)
                    case int(n):
                        return ("int", n)
                    case float() | complex():
                        return "number"
                    case str(s):
                        return ("str", s)
                    case list([x, *_]):
                        return ("list starting", x)
                    case _:
                        return "?"
            return [m(v) for v in (True, -3, 4, 1.5, 2j, "s", [9, 8], ())]
        """,
    ),
    case(
        "match_dataclass",
        """
        import dataclasses
        def f():
            @dataclasses.dataclass
            class Cmd:
                name: str
                args: list
            def run(c):
                match c:
                    case Cmd("go", [direction]):
                        return "going " + direction
                    case Cmd("quit", []):
                        return "bye"
                    case Cmd(name, args):
                        return f"unknown {name} {args}"
            return [run(Cmd("go", ["north"])), run(Cmd("quit", [])), run(Cmd("x", [1, 2]))]
        """,
    ),
    case(
        "match_guards",
        """
        def f():
            out = []
            for p in [(1, 1), (1, 2), (3, -3), (0, 5)]:
                match p:
                    case (x, y) if x == y:
                        out.append("diagonal")
                    case (x, y) if x == -y:
                        out.append("anti")
                    case (0, _):
                        out.append("x zero")
                    case _:
                        out.append("other")
            return out
        """,
    ),
    case(
        "match_guard_side_effects_order",
        """
        def f():
            log = []
            def g(tag, r):
                log.append(tag)
                return r
            match [1, 2]:
                case [a, b] if g("first", False):
                    pass
                case [a, b] if g("second", True):
                    log.append(("matched", a, b))
            return log
        """,
    ),
    case(
        "match_or_patterns_with_capture",
        """
        def f():
            def m(x):
                match x:
                    case [1, y] | [y, 1]:
                        return ("has one", y)
                    case {"a": y} | {"b": y}:
                        return ("key", y)
                    case _:
                        return None
            return [m([1, 5]), m([7, 1]), m({"b": 2}), m([2, 2])]
        """,
    ),
    case(
        "match_as_patterns",
        """
        def f():
            match [1, [2, 3]]:
                case [int() as first, [_, _] as pair] as whole:
                    return first, pair, whole
        """,
    ),
    case(
        "match_value_patterns_dotted",
        """
        import enum
        def f():
            class Color(enum.Enum):
                RED = 1
                GREEN = 2
            class Consts:
                LIMIT = 10
            def m(x):
                match x:
                    case Color.RED:
                        return "red"
                    case Consts.LIMIT:
                        return "limit"
                    case Color():
                        return "some color"
                    case _:
                        return "?"
            return [m(Color.RED), m(Color.GREEN), m(10), m(3)]
        """,
    ),
    case(
        "match_no_case_matches",
        """
        def f():
            r = "unchanged"
            match 5:
                case 1:
                    r = "one"
                case "5":
                    r = "string five"
            return r
        """,
    ),
    case(
        "match_nested_structures",
        """
        def f():
            def m(msg):
                match msg:
                    case {"op": "add", "args": [int(a), int(b)]}:
                        return a + b
                    case {"op": "neg", "args": [int(a)]}:
                        return -a
                    case {"op": op, "args": [*args]}:
                        return f"bad {op} with {len(args)} args"
            return [m({"op": "add", "args": [1, 2]}), m({"op": "neg", "args": [4]}), m({"op": "add", "args": ["x", 1]})]
        """,
    ),
    case(
        "match_capture_binds_after_partial_failure",
        """
        def f():
            match (1, 2):
                case (x, 3):
                    pass
                case (y, z):
                    pass
            return y, z
        """,
    ),
    case(
        "match_class_pattern_too_many_positional",
        """
        def f():
            class P:
                __match_args__ = ("a",)
                def __init__(self):
                    self.a = 1
            match P():
                case P(x, y):
                    return "matched"
        """,
    ),
    case(
        "match_class_pattern_not_a_class",
        """
        def f():
            notclass = 5
            match 1:
                case notclass():
                    return "x"
        """,
    ),
    case(
        "match_tuple_subject_and_len",
        """
        def f():
            out = []
            for cmd in ["go north", "look", "take lamp key", ""]:
                match cmd.split():
                    case ["go", direction]:
                        out.append(("go", direction))
                    case ["look"]:
                        out.append("look")
                    case ["take", *items]:
                        out.append(("take", items))
                    case []:
                        out.append("empty")
            return out
        """,
    ),
    case(
        "match_mapping_rest_is_copy",
        """
        def f():
            d = {"a": 1, "b": 2, "c": 3}
            match d:
                case {"a": 1, **rest}:
                    rest["z"] = 0
                    return rest, d
        """,
    ),
    case(
        "match_in_loop_with_break_continue",
        """
        def f():
            out = []
            for x in [1, "skip", 2, None, 3]:
                match x:
                    case "skip":
                        continue
                    case None:
                        break
                    case n:
                        out.append(n)
            return out
        """,
    ),
    case(
        "match_in_generator",
        """
        def f():
            def tokens(items):
                for it in items:
                    match it:
                        case int(n):
                            yield ("num", n)
                        case str(s):
                            yield ("word", s)
            return list(tokens([1, "a", 2.0, 3]))
        """,
    ),
    case(
        "match_bytes_and_negative_literals",
        """
        def f():
            def m(v):
                match v:
                    case b"raw":
                        return "bytes"
                    case -1:
                        return "minus one"
                    case 1 + 2j:
                        return "complex"
                    case _:
                        return "?"
            return [m(b"raw"), m(-1), m(1 + 2j), m("raw")]
        """,
    ),
    case(
        "match_self_match_types",
        """
        def f():
            out = []
            for v in [b"ab", bytearray(b"x"), frozenset({1}), {"k": 1}, (1,), 3.5]:
                match v:
                    case bytes(x):
                        out.append(("bytes", x))
                    case bytearray(x):
                        out.append(("bytearray", bytes(x)))
                    case frozenset(x):
                        out.append(("frozenset", sorted(x)))
                    case dict(x):
                        out.append(("dict", x))
                    case tuple(x):
                        out.append(("tuple", x))
                    case float(x):
                        out.append(("float", x))
            return out
        """,
    ),
]


@pytest.mark.parametrize("snippet", CASES)
def test_match(snippet):
    snippet.assert_ok()
