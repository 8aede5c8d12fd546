"""Code run by ``exec``/``eval`` and module code wrapped in a function are interpreted: their global
reads and writes (names whose namespace is the globals) reach the load/store callbacks."""

from __future__ import annotations

import types

from thunder_interp import Callbacks, interpret


def _recording() -> tuple[list[tuple[str, str]], Callbacks]:
    seen: list[tuple[str, str]] = []

    def load_global(name, value, globals_, provenance):
        seen.append(("load", name))
        return value

    def store_global(name, value, globals_):
        seen.append(("store", name))

    return seen, Callbacks(load_global=load_global, store_global=store_global)


def test_exec_and_eval_code_is_interpreted_with_hooks():
    seen, cb = _recording()

    def f():
        ns = {"base": 3}
        exec("doubled = base * 2", ns)
        return eval("doubled + len('ab')", ns)

    assert interpret(f, callbacks=cb)() == 8
    assert seen == [
        ("load", "exec"),
        ("load", "base"),
        ("store", "doubled"),
        ("load", "eval"),
        ("load", "doubled"),
        ("load", "len"),
    ]


def test_exec_with_separate_locals_stores_no_globals():
    seen, cb = _recording()

    def f():
        g = {"base": 1}
        local_ns: dict[str, int] = {}
        exec("value = base", g, local_ns)
        return local_ns

    assert interpret(f, callbacks=cb)() == {"value": 1}
    assert ("store", "value") not in seen
    assert ("load", "base") in seen


def test_module_code_through_function_type_is_a_global_store():
    seen, cb = _recording()
    g: dict[str, object] = {"__builtins__": __builtins__}
    code = compile("x = 1\ny = x + 1", "<s>", "exec")

    def f():
        types.FunctionType(code, g)()
        return g["y"]

    assert interpret(f, callbacks=cb)() == 2
    assert [entry for entry in seen if entry[1] in "xy"] == [
        ("store", "x"),
        ("load", "x"),
        ("store", "y"),
    ]
