"""Conformance: what ``locals()``, ``vars()``, ``dir()`` and ``exec``/``eval`` without mappings see.

The expectations differ by version and come from running each snippet under CPython: before 3.13
``locals()`` in a function returns the same dict on every call, refreshed from the local variables
(edits and extra keys persist until then); 3.13 (PEP 667) returns a fresh snapshot each time.
"""

import pytest
from conformance import case

FUNCTIONS = [
    case(
        "locals_twice_same_dict_or_snapshot",
        """
        def f():
            a = 1
            first = locals()
            b = 2
            second = locals()
            return first is second, sorted(first), sorted(second)
        """,
    ),
    case(
        "locals_edit_persists_until_next_call",
        """
        def f():
            a = 1
            d = locals()
            d["a"] = 100
            d["extra"] = "kept"
            seen = (a, d["a"], d.get("extra"))
            again = locals()
            return seen, a, d["a"], again["a"], d.get("extra"), again.get("extra")
        """,
    ),
    case(
        "locals_refresh_drops_deleted_variables",
        """
        def f():
            a = 1
            b = 2
            d = locals()
            del a
            before = sorted(d)
            after = sorted(locals())
            return before, after, sorted(d)
        """,
    ),
    case(
        "locals_refresh_drops_unbound_exception_name",
        """
        def f():
            try:
                raise KeyError(1)
            except KeyError as e:
                inside = sorted(locals())
            return inside, sorted(locals())
        """,
    ),
    case(
        "exec_one_argument_writes_into_locals",
        """
        def f():
            a = 1
            exec("y = 7")
            exec("a = 2")
            d = locals()
            return a, d.get("y"), d["a"]
        """,
    ),
    case(
        "exec_reads_locals_edits",
        """
        def f():
            a = 1
            locals()["a"] = 5
            return eval("a"), a
        """,
    ),
    case(
        "eval_default_locals",
        """
        def f(x):
            y = x * 2
            return eval("x + y"), eval("sorted(locals())")
        """,
        3,
    ),
    case(
        "vars_and_dir_without_arguments",
        """
        def f():
            a = 1
            v = vars()
            v["extra"] = 1
            names = dir()
            return v is locals(), names, sorted(v)
        """,
    ),
    case(
        "locals_with_cells_and_free_variables",
        """
        def f():
            x = 1
            def inner():
                y = x
                return sorted(locals().items())
            z = 3
            def uses_z():
                return z
            d = locals()
            return inner(), sorted(k for k in d if k != "d"), d["z"]
        """,
    ),
    case(
        "locals_of_unassigned_cell",
        """
        def f():
            before = sorted(locals())
            x = 1
            def g():
                return x
            return before, sorted(locals())
        """,
    ),
    case(
        "locals_in_generator_across_yields",
        """
        def gen():
            a = 1
            d = locals()
            d["mark"] = "kept"
            yield sorted(d)
            b = 2
            yield d is locals(), sorted(d), d.get("mark")
        def f():
            return list(gen())
        """,
    ),
    case(
        "locals_in_comprehension",
        """
        def f():
            a = 1
            results = [locals() for x in range(2)]
            return [sorted(k for k in d if not k.startswith(".")) for d in results], (
                results[0] is results[1]
            ), [d.get("x") for d in results]
        """,
    ),
    case(
        "locals_in_lambda_and_nested_function",
        """
        def f(p):
            g = lambda q: sorted(locals().items())
            def h(r, *args, k=1, **kw):
                return sorted(locals())
            return g(2), h(1, 2, k=3, z=4)
        """,
        1,
    ),
]

NAMESPACES = [
    case(
        "locals_in_class_body_is_the_namespace",
        """
        def f():
            class C:
                a = 1
                ns = locals()
                same = ns is locals()
                ns["injected"] = 2
                keys = sorted(ns)
            return C.same, C.injected, [k for k in C.keys if not k.startswith("__")]
        """,
    ),
    case(
        "locals_in_class_body_with_super_cell",
        """
        def f():
            class C:
                def m(self):
                    return super()
                keys = sorted(locals())
            return C.keys
        """,
    ),
    case(
        "locals_in_comprehension_in_class_body",
        """
        def f():
            class C:
                y = 1
                r = [locals() for x in range(2)]
                keys = [sorted(k for k in d if k != ".0") for d in r]
                same = r[0] is r[1]
                is_namespace = r[0] is locals()
            return C.keys, C.same, C.is_namespace, sorted(k for k in vars(C) if k in "rxy")
        """,
    ),
    case(
        "locals_in_class_body_with_type_alias",
        """
        def f():
            class C:
                type A = int
                def m[T](self): pass
                keys = sorted(locals())
                r = [sorted(locals()) for x in range(1)]
            return C.keys, C.r, sorted(k for k in vars(C) if not k.startswith("__d"))
        """,
        min_version=(3, 12),
    ),
    case(
        # (CPython 3.13.0 crashes when a comprehension calling locals() precedes this one.)
        "locals_in_class_body_comprehension_with_cell_variable",
        """
        def f():
            class C:
                type A = int
                r = [sorted(locals()) for x in range(1) for g in [lambda: x]]
            return C.r, sorted(k for k in vars(C) if not k.startswith("__d"))
        """,
        min_version=(3, 12),
    ),
]

CASES = FUNCTIONS + NAMESPACES


@pytest.mark.parametrize("snippet", CASES)
def test_locals(snippet):
    snippet.assert_ok()
