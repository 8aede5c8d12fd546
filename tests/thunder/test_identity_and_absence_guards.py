"""Facts a program relies on that are neither values nor types: whether two outside objects are
one (``is``, ``==`` of objects without ``__eq__``), an attribute's absence where the program
catches the ``AttributeError``, a class reached through ``type(obj)`` or an object's dict
through ``vars(obj)``. Each is guarded: a later call where the fact changed recompiles (compared
with eager after every change)."""

from __future__ import annotations

import warnings
from typing import Any

import torch

import thunder

SENTINEL = object()


def _agree(jf: Any, f: Any, *args: Any) -> None:
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(jf(x, *args), f(x, *args), rtol=0, atol=0)


def test_is_between_arguments():
    def f(x, a, b):
        return x + (1 if a is b else 0) + (10 if a is not b else 0)

    jf = thunder.jit(f)
    o1, o2 = object(), object()
    for args in [(o1, o2), (o1, o1), (o2, o1), (o2, o2), ([1], [1])]:
        _agree(jf, f, *args)


def test_is_between_an_argument_and_a_global_sentinel():
    def f(x, o):
        if o is SENTINEL:
            return x * 2
        return x - 1

    jf = thunder.jit(f)
    for o in [object(), SENTINEL, object(), SENTINEL]:
        _agree(jf, f, o)


def test_is_between_items_of_an_argument_list():
    def f(x, objs):
        return x + sum(1 for o in objs if o is objs[0])

    jf = thunder.jit(f)
    a, b = object(), object()
    for objs in [[a, b], [a, a], [b, a, b]]:
        _agree(jf, f, objs)


class Plain:
    pass


def test_equality_of_objects_without_eq_is_identity():
    def f(x, a, b):
        return x * (2 if a == b else 3) + (a != b)

    jf = thunder.jit(f)
    p, q = Plain(), Plain()
    _agree(jf, f, p, q)
    _agree(jf, f, p, p)
    Plain.__eq__ = lambda self, other: True  # type: ignore[assignment,method-assign]
    try:
        _agree(jf, f, p, q)
    finally:
        del Plain.__eq__


class Holder:
    pass


def test_attribute_error_caught_by_the_program():
    def f(x, h):
        try:
            return x * h.v
        except AttributeError:
            return x - 1

    jf = thunder.jit(f)
    h = Holder()
    _agree(jf, f, h)
    h.v = 3.0
    _agree(jf, f, h)
    del h.v
    _agree(jf, f, h)
    Holder.v = 4.0  # type: ignore[attr-defined]
    try:
        _agree(jf, f, h)
    finally:
        del Holder.v  # type: ignore[attr-defined]


class Scaled:
    def scale(self):
        return 2.0


class ScaledChild(Scaled):
    pass


def test_method_read_through_type_of_the_object():
    def f(x, a):
        return x * type(a).scale(a)

    jf = thunder.jit(f)
    a = ScaledChild()
    _agree(jf, f, a)
    ScaledChild.scale = lambda self: 5.0  # type: ignore[method-assign]
    _agree(jf, f, a)
    Scaled.scale = lambda self: 7.0  # type: ignore[method-assign]  # shadowed: no change
    _agree(jf, f, a)


def test_method_replaced_on_the_class_after_compilation():
    class A:
        def scale(self):
            return 2.0

        def __len__(self):
            return 2

        @property
        def p(self):
            return 1.5

    class B(A):
        pass

    def f(x, a):
        return x * a.scale() * len(a) * a.p

    jf = thunder.jit(f)
    b = B()
    _agree(jf, f, b)
    A.scale = lambda self: 3.0  # type: ignore[method-assign]
    _agree(jf, f, b)
    B.__len__ = lambda self: 4  # type: ignore[method-assign]
    _agree(jf, f, b)
    A.p = property(lambda self: -1.0)  # type: ignore[assignment,method-assign]
    _agree(jf, f, b)
    b.scale = lambda: 9.0  # type: ignore[method-assign]
    _agree(jf, f, b)


def test_an_objects_dict_read_through_vars():
    def f(x, o):
        return x * sum(v for v in vars(o).values() if isinstance(v, float))

    jf = thunder.jit(f)
    o = Holder()
    o.a = 2.0  # type: ignore[attr-defined]
    _agree(jf, f, o)
    o.a = 3.5  # type: ignore[attr-defined]
    _agree(jf, f, o)
    o.b = 1.0  # type: ignore[attr-defined]
    _agree(jf, f, o)
