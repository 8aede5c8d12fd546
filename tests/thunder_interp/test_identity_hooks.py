"""The hooks that tell a binder which identities and absences a program's path depended on:
``compare_identity`` for ``a is b`` (and ``==`` of objects whose classes keep ``object``'s
``__eq__``), ``load_attribute_missing`` for a plain ``obj.name`` that raised, and ``vars(obj)``
read as ``obj.__dict__``. Run many times so that the block compiler's templates are exercised
as well as the single ops."""

from __future__ import annotations

from typing import Any

import pytest

from thunder_interp import Callbacks, interpret


class Plain:
    pass


def _identities(fn: Any, *args: Any) -> tuple[Any, list[tuple[Any, Any, bool]]]:
    seen: list[tuple[Any, Any, bool]] = []
    jf = interpret(fn, callbacks=Callbacks(compare_identity=lambda a, b, s: seen.append((a, b, s))))
    results = [jf(*args) for _ in range(40)]
    assert all(r == results[0] for r in results)
    return results[0], seen


def test_is_and_is_not_are_reported_with_the_answer() -> None:
    def f(a, b, c):
        r = 0
        if a is b:
            r += 1
        if a is not c:
            r += 10
        if a is None:  # None is never reported: it is a value
            r += 100
        return r

    a, b = Plain(), Plain()
    result, seen = _identities(f, a, b, a)
    assert result == f(a, b, a) == 0
    assert seen[:2] == [(a, b, False), (a, a, True)]
    assert all(x is not None and y is not None for x, y, _ in seen)


def test_equality_of_objects_without_eq_is_reported_as_identity() -> None:
    def f(a, b):
        return (a == b, a != b)

    a, b = Plain(), Plain()
    result, seen = _identities(f, a, b)
    assert result == (False, True)
    assert seen[:2] == [(a, b, False), (a, b, False)]
    _, seen_numbers = _identities(f, 1, 2)
    assert seen_numbers == []


def test_attribute_error_of_a_plain_load_is_reported() -> None:
    missing: list[tuple[Any, str]] = []

    def f(o):
        try:
            return o.v
        except AttributeError:
            return -1

    jf = interpret(
        f, callbacks=Callbacks(load_attribute_missing=lambda o, n: missing.append((o, n)))
    )
    o = Plain()
    assert [jf(o) for _ in range(40)] == [-1] * 40
    assert missing[0] == (o, "v") and len(missing) == 40


def test_vars_of_an_object_is_a_read_of_its_dict() -> None:
    loads: list[str] = []

    def f(o):
        return sorted(vars(o))

    def on_load(obj: Any, name: str, value: Any, prov: Any) -> Any:
        loads.append(name)
        return value

    o = Plain()
    o.a = 1  # type: ignore[attr-defined]
    assert interpret(f, callbacks=Callbacks(load_attribute=on_load))(o) == ["a"]
    assert "__dict__" in loads
    with pytest.raises(TypeError, match="__dict__"):
        interpret(f)(3)
