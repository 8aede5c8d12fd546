"""Hooks and provenance in compiled blocks.

With hooks or provenance, a compiled block loads constants, globals and attributes through
shortcuts: a hook is called as the single op calls it, and a load with nothing to record (its
site already recorded what it found, in this interpretation) costs no call. These tests run
loops long enough for their blocks to be compiled and check that every hook call and every
record the single ops make are still made, in each interpretation of the same code.
"""

from __future__ import annotations

from typing import Any

from thunder_interp import Callbacks, ProvenanceKind, interpret

SCALE = 3


class Box:
    def __init__(self, value: int) -> None:
        self.value = value


def _loop(box: Box, n: int) -> list[Any]:
    out = []
    for i in range(n):
        out.append(box.value * SCALE + i * 1000)
    return out


def test_hooks_without_provenance_see_every_load_and_replace_values() -> None:
    calls: list[str] = []

    def load_global(name: str, value: Any, globals_: Any, provenance: Any) -> Any:
        calls.append(name)
        return 10 if name == "SCALE" else value

    def load_attribute(obj: Any, name: str, value: Any, provenance: Any) -> Any:
        calls.append("." + name)
        return value + 1 if name == "value" else value

    interpreted = interpret(
        _loop, callbacks=Callbacks(load_global=load_global, load_attribute=load_attribute)
    )
    n = 50
    assert interpreted(Box(2), n) == [3 * 10 + i * 1000 for i in range(n)]
    assert calls.count("SCALE") == n and calls.count(".value") == n
    assert calls.count("range") == 1


def _module(source: str, **globals_: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "hooked_blocks_module", **globals_}
    exec(compile(source, "<hooked blocks>", "exec"), namespace)
    return namespace


_RECORDED = """
def f(b, n):
    found = None
    for _ in range(n):
        found = (b.value, MARKER, "a constant")
    return found
"""


def test_provenance_is_recorded_in_every_interpretation_of_compiled_code() -> None:
    box = Box(7)
    marker = object()
    f = _module(_RECORDED, MARKER=marker)["f"]
    for _ in range(3):  # the same compiled blocks, each time a new interpretation
        interpreted = interpret(f, provenance=True)
        value, seen, constant = interpreted(box, 60)
        assert seen is marker and value == 7
        global_record = interpreted.provenance_of(marker)
        assert global_record is not None and global_record.kind is ProvenanceKind.GLOBAL
        assert global_record.name == "MARKER"
        constant_record = interpreted.provenance_of(constant)
        assert constant_record is not None
        assert constant_record.kind is ProvenanceKind.CONSTANT


_REBOUND = """
def f(n):
    global REBOUND
    out = []
    for i in range(n):
        out.append(REBOUND)
        if i == n // 2:
            REBOUND = SECOND
    return out
"""


def test_a_global_rebound_in_a_compiled_loop_is_recorded_again() -> None:
    first, second = object(), object()
    f = _module(_REBOUND, REBOUND=first, SECOND=second)["f"]
    interpreted = interpret(f, provenance=True)
    seen = interpreted(80)
    assert seen[0] is first and seen[-1] is second
    for value in (first, second):
        record = interpreted.provenance_of(value)
        assert record is not None and record.kind is ProvenanceKind.GLOBAL


def test_attributes_of_recorded_values_are_recorded_in_compiled_blocks() -> None:
    class Holder:
        def __init__(self) -> None:
            self.payload = object()

    def f(h: Holder, n: int) -> Any:
        got = None
        for _ in range(n):
            got = h.payload
        return got

    holder = Holder()
    for _ in range(2):
        interpreted = interpret(f, provenance=True)
        assert interpreted(holder, 60) is holder.payload
        record = interpreted.provenance_of(holder.payload)
        assert record is not None and record.path() == "args[0].payload"
