"""Conformance: closures, nonlocal, global, del, and scoping errors (NameError, UnboundLocalError)."""

import pytest
from conformance import case

CLOSURES = [
    case(
        "closure_reads_outer",
        """
        def f(x):
            def g():
                return x * 2
            return g()
        """,
        21,
    ),
    case(
        "closure_counter_nonlocal",
        """
        def f():
            def counter():
                n = 0
                def inc():
                    nonlocal n
                    n += 1
                    return n
                return inc
            c = counter()
            d = counter()
            return [c(), c(), d(), c()]
        """,
    ),
    case(
        "closure_sees_later_assignment",
        """
        def f():
            def g():
                return y
            y = 10
            a = g()
            y = 20
            return a, g()
        """,
    ),
    case(
        "closure_cell_shared_between_functions",
        """
        def f():
            value = 0
            def get():
                return value
            def set_(v):
                nonlocal value
                value = v
            set_(5)
            r = get()
            set_(7)
            return r, get(), value
        """,
    ),
    case(
        "closure_three_levels",
        """
        def f():
            a = 1
            def g():
                b = 2
                def h():
                    nonlocal a
                    a += b
                    return a
                return h
            h = g()
            return h(), h(), a
        """,
    ),
    case(
        "closure_loop_variable_late_binding",
        """
        def f():
            fs = []
            for i in range(4):
                def g():
                    return i
                fs.append(g)
            return [g() for g in fs]
        """,
    ),
    case(
        "closure_over_argument_modified",
        """
        def f(x):
            def g():
                return x
            x = x + 1
            return g()
        """,
        1,
    ),
    case(
        "closure_free_variable_unbound",
        """
        def f():
            def g():
                return z
            r = g()
            z = 1
            return r
        """,
    ),
    case(
        "closure_cell_deleted",
        """
        def f():
            z = 1
            def g():
                return z
            del z
            return g()
        """,
    ),
    case(
        "closure_inspect_cell_contents",
        """
        def f():
            a = [1]
            def g():
                return a
            return g.__closure__[0].cell_contents, g.__code__.co_freevars
        """,
    ),
    case(
        "closure_in_class_body_method",
        """
        def f():
            factor = 3
            class A:
                def scale(self, x):
                    return x * factor
            return A().scale(4)
        """,
    ),
    case(
        "class_body_does_not_leak_to_methods",
        """
        def f():
            class A:
                y = 5
                def get(self):
                    return y
            try:
                return A().get()
            except NameError as e:
                return "NameError", str(e)
        """,
    ),
    case(
        "class_body_reads_enclosing_function_local",
        """
        def f():
            x = "outer"
            class A:
                y = x
                x = "class"
                z = x
            return A.y, A.z
        """,
    ),
    case(
        "nonlocal_in_generator",
        """
        def f():
            total = 0
            def gen():
                nonlocal total
                for i in range(4):
                    total += i
                    yield total
            return list(gen()), total
        """,
    ),
    case(
        "closure_mutates_list",
        """
        def f():
            seen = []
            def record(x):
                seen.append(x)
                return len(seen)
            return [record(c) for c in "abc"], seen
        """,
    ),
    case(
        "closure_recursive_inner",
        """
        def f():
            def walk(tree):
                if isinstance(tree, list):
                    return sum(walk(t) for t in tree)
                return tree
            return walk([1, [2, [3, 4]], 5])
        """,
    ),
]

GLOBALS = [
    case(
        "global_read",
        """
        X = 10
        def f():
            return X + 1
        """,
    ),
    case(
        "global_write",
        """
        counter = 0
        def f():
            global counter
            counter += 5
            counter += 1
            return counter
        """,
    ),
    case(
        "global_create_new",
        """
        def f():
            global created
            created = "yes"
            return created, "created" in globals()
        """,
    ),
    case(
        "global_mutated_container",
        """
        LOG = []
        def f():
            LOG.append(1)
            LOG.append(2)
            return list(LOG)
        """,
    ),
    case(
        "global_del",
        """
        G = 1
        def f():
            global G
            del G
            return "G" in globals()
        """,
    ),
    case(
        "global_del_then_read",
        """
        G = 1
        def f():
            global G
            del G
            return G
        """,
    ),
    case(
        "global_shadowing_builtin",
        """
        def len(x):
            return -1
        def f():
            return len([1, 2, 3])
        """,
    ),
    case(
        "builtin_lookup",
        """
        def f():
            return abs(-3), min(4, 2), __name__
        """,
    ),
    case(
        "global_declared_in_nested",
        """
        V = 1
        def f():
            def g():
                global V
                V = 99
            V = 2
            g()
            return V, globals()["V"]
        """,
    ),
    case(
        "name_error_global",
        """
        def f():
            return undefined_name_xyz
        """,
    ),
    case(
        "name_error_message_caught",
        """
        def f():
            try:
                missing_thing
            except NameError as e:
                return str(e), e.args
        """,
    ),
    case(
        "unbound_local",
        """
        def f():
            x = 1
            def g():
                y = x
                x = 2
                return y
            return g()
        """,
    ),
    case(
        "unbound_local_after_del",
        """
        def f():
            x = 1
            del x
            return x
        """,
    ),
    case(
        "del_local_then_reassign",
        """
        def f():
            x = 1
            del x
            x = 2
            return x
        """,
    ),
    case(
        "del_unbound_local",
        """
        def f(flag):
            if flag:
                y = 1
            del y
        """,
        False,
    ),
    case(
        "del_subscript_and_attribute",
        """
        def f():
            d = {"a": 1, "b": 2}
            del d["a"]
            xs = list(range(6))
            del xs[1:3], xs[-1]
            class O:
                pass
            o = O()
            o.x = 1
            o.y = 2
            del o.x
            return d, xs, vars(o)
        """,
    ),
    case(
        "del_missing_attribute",
        """
        def f():
            class O:
                pass
            o = O()
            del o.nope
        """,
    ),
    case(
        "locals_snapshot",
        """
        def f(a, b=2):
            c = a + b
            return sorted(locals().items())
        """,
        1,
    ),
    case(
        "globals_identity_is_module_dict",
        """
        def f():
            g = globals()
            g["dynamic"] = 42
            return dynamic
        """,
    ),
    case(
        "exception_variable_cleared_after_except",
        """
        def f():
            e = "before"
            try:
                raise ValueError("x")
            except ValueError as e:
                pass
            try:
                return e
            except UnboundLocalError as err:
                return "unbound", str(err)
        """,
    ),
    case(
        "comprehension_variable_not_leaked",
        """
        def f():
            x = "outer"
            ys = [x for x in range(3)]
            return x, ys
        """,
    ),
    case(
        "for_loop_variable_leaks",
        """
        def f():
            for i in range(5):
                pass
            return i
        """,
    ),
]

CASES = CLOSURES + GLOBALS


@pytest.mark.parametrize("snippet", CASES)
def test_scopes(snippet):
    snippet.assert_ok()
