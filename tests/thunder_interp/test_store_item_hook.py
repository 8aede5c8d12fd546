"""The ``store_item`` callback: called before ``container[key] = value`` (STORE_SUBSCR)."""

from __future__ import annotations

from typing import Any

from thunder_interp import Callbacks, interpret


def test_store_item_hook_sees_every_subscript_store():
    seen = []
    d = {}

    def f(x):
        d["a"] = x
        lst = [0, 0]
        lst[1] = x + 1
        return lst

    cb = Callbacks(store_item=lambda c, k, v: seen.append((type(c).__name__, k, v)))
    assert interpret(f, callbacks=cb)(5) == [0, 6]
    assert d == {"a": 5}
    assert seen == [("dict", "a", 5), ("list", 1, 6)]


def test_store_item_hook_runs_before_the_store():
    d = {}

    def hook(container, key, value):
        assert key not in container

    interpret(
        lambda: d.__setitem__("k", 1) or d.update(j=2), callbacks=Callbacks(store_item=hook)
    )()

    def g():
        d["z"] = 3

    interpret(g, callbacks=Callbacks(store_item=hook))()
    assert d["z"] == 3


def test_load_item_hook_sees_subscript_and_slice_reads():
    seen = []

    def f(d, seq):
        return d["a"] + seq[1] + sum(seq[1:3])

    hook = Callbacks(load_item=lambda c, k, v: seen.append((type(c).__name__, k, v)))
    assert interpret(f, callbacks=hook)({"a": 1}, [10, 20, 30]) == f({"a": 1}, [10, 20, 30])
    assert ("dict", "a", 1) in seen and ("list", 1, 20) in seen
    assert ("list", slice(1, 3, None), [20, 30]) in seen


def test_delete_hooks_fire_before_each_deletion():
    seen: list[tuple[Any, ...]] = []
    hooks = Callbacks(
        delete_global=lambda name, g: seen.append(("global", name, name in g)),
        delete_closure_cell=lambda name, code, cell: seen.append(("cell", name, code.co_name)),
        delete_attribute=lambda obj, name: seen.append(("attr", name, hasattr(obj, name))),
        delete_item=lambda c, k: seen.append(("item", k, k in c)),
    )
    namespace: dict[str, Any] = {}
    exec(
        "X = 1\n"
        "class Box: pass\n"
        "def make():\n"
        "    v = 1\n"
        "    def program(box, d):\n"
        "        nonlocal v\n"
        "        global X\n"
        "        del X\n"
        "        del v\n"
        "        del box.a\n"
        "        del d['k']\n"
        "        return d\n"
        "    return program\n",
        namespace,
    )
    box = namespace["Box"]()
    box.a = 1
    d = {"k": 1, "j": 2}
    assert interpret(namespace["make"](), callbacks=hooks)(box, d) == {"j": 2}
    assert seen == [
        ("global", "X", True),
        ("cell", "v", "program"),
        ("attr", "a", True),
        ("item", "k", True),
    ]
    assert "X" not in namespace and not hasattr(box, "a")


def test_missing_attribute_hook_fires_for_getattr_default_and_hasattr():
    seen: list[tuple[Any, ...]] = []
    hooks = Callbacks(load_attribute_missing=lambda obj, name: seen.append((type(obj), name)))

    class Box:
        present = 1

    def program(box):
        return getattr(box, "absent", 7), hasattr(box, "gone"), hasattr(box, "present")

    assert interpret(program, callbacks=hooks)(Box()) == (7, False, True)
    assert seen == [(Box, "absent"), (Box, "gone")]
