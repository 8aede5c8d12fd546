"""Conformance: code that is not ``CO_OPTIMIZED`` (module code, ``exec``/``eval`` code, class bodies)
stores and loads names in a namespace: the globals when no separate locals mapping is given.

Covers module-style code objects called through ``types.FunctionType``, ``exec``/``eval`` with one
or two dicts or with locals mappings that are not dicts, and class bodies.
"""

import pytest
from conformance import case

FUNCTION_TYPE = [
    case(
        "function_type_around_exec_code_uses_globals_as_locals",
        """
        import types
        def f():
            g = {"__builtins__": __builtins__, "base": 10}
            code = compile("x = base + 1\\ny = x * 2\\ndel x\\nsame = locals() is globals()", "<s>", "exec")
            result = types.FunctionType(code, g)()
            return result, sorted(k for k in g if k != "__builtins__"), g["y"], g["same"]
        """,
    ),
    case(
        "function_type_around_single_code",
        """
        import types
        def f():
            g = {"__builtins__": __builtins__}
            types.FunctionType(compile("x = 1", "<s>", "single"), g)()
            types.FunctionType(compile("y = x + 1", "<s>", "single"), g)()
            return g["x"], g["y"]
        """,
    ),
    case(
        "function_type_around_single_code_in_module_globals",
        """
        import types
        def f():
            types.FunctionType(compile("snippet_value = 41", "<s>", "single"), globals())()
            return globals().pop("snippet_value") + 1
        """,
    ),
    case(
        "single_code_prints_expression_values",
        """
        import sys, types
        def f():
            g = {"__builtins__": __builtins__, "a": 2}
            shown = []
            saved = sys.displayhook
            sys.displayhook = shown.append
            try:
                types.FunctionType(compile("a * 21", "<s>", "single"), g)()
                types.FunctionType(compile("None", "<s>", "single"), g)()
            finally:
                sys.displayhook = saved
            return shown
        """,
    ),
    case(
        "function_type_module_code_missing_name",
        """
        import types
        def f():
            g = {"__builtins__": __builtins__}
            try:
                types.FunctionType(compile("del missing", "<s>", "exec"), g)()
            except NameError as e:
                first = str(e)
            try:
                types.FunctionType(compile("print(missing)", "<s>", "exec"), g)()
            except NameError as e:
                return first, str(e)
        """,
    ),
    case(
        "function_type_module_code_defines_functions_and_classes",
        """
        import types
        SRC = '''
        import math
        def area(r):
            return math.pi * r * r
        class Box:
            size = 3
            def double(self):
                return self.size * 2
        squares = [i * i for i in range(4)]
        result = (round(area(1), 3), Box().double(), squares)
        '''
        def f():
            g = {"__builtins__": __builtins__, "__name__": "generated"}
            types.FunctionType(compile(SRC, "<s>", "exec"), g)()
            return g["result"], g["Box"].__module__, g["area"].__globals__ is g
        """,
    ),
]

EXEC_EVAL = [
    case(
        "exec_code_with_one_dict",
        """
        def f():
            ns = {}
            exec(compile("a = 1\\nb = a + 1\\ndef g():\\n    return a + b\\nc = g()", "<s>", "exec"), ns)
            exec("d = c * 10", ns)
            return sorted(k for k in ns if k != "__builtins__" and k != "g"), ns["d"], (
                type(ns["__builtins__"]).__name__
            )
        """,
    ),
    case(
        "exec_with_two_dicts",
        """
        def f():
            g = {"shared": 1}
            l = {}
            exec("x = shared + 1\\nglobal gl\\ngl = 5\\nshared_seen = shared", g, l)
            try:
                exec("y = 2\\ndef h():\\n    return y\\nr = h()", g, l)
            except NameError as e:
                error = str(e)
            return sorted(l), sorted(k for k in g if k != "__builtins__"), error
        """,
    ),
    case(
        "exec_two_dicts_class_body_and_comprehension",
        """
        def f():
            g = {}
            l = {"k": 3}
            exec("class C:\\n    v = 1\\nitems = [k * i for i in range(3)]", g, l)
            return l["C"].v, sorted(l), "C" in g
        """,
    ),
    case(
        "exec_with_locals_none_uses_globals",
        """
        def f():
            g = {}
            exec("x = 1", g, None)
            return g["x"], eval("x + 1", g, None)
        """,
    ),
    case(
        "exec_returns_none_and_eval_returns_value",
        """
        def f():
            ns = {"v": 4}
            return exec("v + 1", ns), eval("v + 1", ns), eval(compile("v + 2", "<s>", "eval"), ns), (
                eval(compile("w = v", "<s>", "exec"), ns)
            ), ns["w"]
        """,
    ),
    case(
        "eval_with_custom_mapping_locals",
        """
        from collections.abc import Mapping
        class Upper(Mapping):
            def __getitem__(self, key):
                if key.startswith("u_"):
                    return key[2:].upper()
                raise KeyError(key)
            def __iter__(self):
                return iter(())
            def __len__(self):
                return 0
        def f():
            return eval("u_ab + u_cd + str(len(g_value))", {"g_value": [1, 2]}, Upper())
        """,
    ),
    case(
        "eval_with_getitem_only_locals",
        """
        class Lookup:
            def __init__(self):
                self.seen = []
            def __getitem__(self, key):
                self.seen.append(key)
                if key == "x":
                    return 5
                raise KeyError(key)
        def f():
            l = Lookup()
            value = eval("x + y + len('ab')", {"y": 1}, l)
            return value, l.seen
        """,
    ),
    case(
        "eval_locals_mapping_raising_other_error",
        """
        class Broken:
            def __getitem__(self, key):
                raise ValueError("broken " + key)
        def f():
            try:
                eval("x", {}, Broken())
            except ValueError as e:
                return str(e)
        """,
    ),
    case(
        "exec_with_custom_mutable_mapping_locals",
        """
        from collections.abc import MutableMapping
        class Recording(MutableMapping):
            def __init__(self):
                self.data = {}
                self.log = []
            def __getitem__(self, key):
                self.log.append(("get", key))
                return self.data[key]
            def __setitem__(self, key, value):
                self.log.append(("set", key))
                self.data[key] = value
            def __delitem__(self, key):
                self.log.append(("del", key))
                del self.data[key]
            def __iter__(self):
                return iter(self.data)
            def __len__(self):
                return len(self.data)
        def f():
            l = Recording()
            exec("a = 1\\nb = a + 1\\ndel a\\nc = len([b])", {}, l)
            return l.data, l.log
        """,
    ),
    case(
        "exec_errors_from_bad_arguments",
        """
        def f():
            errors = []
            for call in (
                lambda: exec("x = 1", [1]),
                lambda: exec("x = 1", {}, 5),
                lambda: eval("1", [], {}),
                lambda: exec(5),
                lambda: eval(b"1" if False else 5),
                lambda: exec(),
                lambda: exec("1", {}, {}, {}),
            ):
                try:
                    call()
                except TypeError as e:
                    errors.append(str(e))
            return errors
        """,
    ),
    case(
        "exec_code_with_free_variables_is_refused",
        """
        def f():
            y = 1
            def g():
                return y
            try:
                exec(g.__code__, {})
            except TypeError as e:
                return str(e)
        """,
    ),
    case(
        "eval_strips_leading_blanks_and_accepts_bytes",
        """
        def f():
            return eval("  \\t 1 + 2"), eval(b" 3 * 4"), eval(bytearray(b"5"))
        """,
    ),
    case(
        "exec_syntax_and_runtime_errors",
        """
        def f():
            out = []
            try:
                exec("x = ")
            except SyntaxError as e:
                out.append((type(e).__name__, e.msg, e.filename, e.lineno))
            try:
                exec("1 / 0", {})
            except ZeroDivisionError as e:
                out.append(str(e))
            try:
                eval("undefined_name")
            except NameError as e:
                out.append(str(e))
            return out
        """,
    ),
    case(
        "exec_inherits_future_annotations",
        """
        from __future__ import annotations
        def f():
            ns = {}
            exec("def g(x: NotDefinedAnywhere) -> int: pass", ns)
            return ns["g"].__annotations__
        """,
    ),
    case(
        "exec_nested",
        """
        def f():
            ns = {}
            exec("inner = {}\\nexec('v = 7', inner)\\nresult = inner['v'] * 2", ns)
            return ns["result"]
        """,
    ),
    case(
        "exec_globals_dict_subclass",
        """
        class Globals(dict):
            pass
        def f():
            g = Globals(a=1)
            exec("b = a + 1", g)
            return g["b"], type(g).__name__
        """,
    ),
    case(
        "exec_keyword_globals_and_locals",
        """
        def f():
            g = {"a": 1}
            l = {}
            exec("b = a + 1", globals=g, locals=l)
            return l, eval("b * 2", globals=g, locals=l)
        """,
        min_version=(3, 13),
    ),
    case(
        "exec_with_closure",
        """
        def f():
            y = 5
            def g():
                return y
            ns = {}
            exec(g.__code__, ns, closure=g.__closure__)
            return "ran"
        """,
        min_version=(3, 11),
    ),
]

CLASS_BODIES = [
    case(
        "class_body_names_fall_back_to_globals_and_builtins",
        """
        GLOBAL = "g"
        def f():
            class C:
                a = GLOBAL
                b = len("abc")
                GLOBAL = "shadow"
                c = GLOBAL
                del GLOBAL
                d = GLOBAL
            return C.a, C.b, C.c, C.d, hasattr(C, "GLOBAL")
        """,
    ),
    case(
        "class_body_delete_missing_name",
        """
        def f():
            try:
                class C:
                    del nothing_here
            except NameError as e:
                return str(e)
        """,
    ),
    case(
        "class_body_with_custom_prepare_mapping",
        """
        class Recording(dict):
            def __init__(self):
                super().__init__()
                self.log = []
            def __setitem__(self, key, value):
                self.log.append(key)
                super().__setitem__(key, value)
        class Meta(type):
            @classmethod
            def __prepare__(mcs, name, bases):
                return Recording()
            def __new__(mcs, name, bases, ns):
                cls = super().__new__(mcs, name, bases, dict(ns))
                cls.log = [k for k in ns.log if not k.startswith("__")]
                return cls
        def f():
            class C(metaclass=Meta):
                x = 1
                y = x + 1
                def m(self):
                    return self.y
            return C.log, C().m()
        """,
    ),
]

CASES = FUNCTION_TYPE + EXEC_EVAL + CLASS_BODIES


@pytest.mark.parametrize("snippet", CASES)
def test_exec(snippet):
    snippet.assert_ok()
