"""Conformance: Python code that CPython calls implicitly (special methods, descriptors, callables
handed to builtins) is interpreted.

Every snippet defines ``f`` returning ``(result, LOG)``; the special methods it exercises call
``seen(tag)``, which logs the tag with ``is_interpreting()``. The interpreted run must give
CPython's result, log the same tags in the same order, and log each as interpreted (so hooks
and lookasides fire inside the special method); the native run logs none as interpreted.
"""

from __future__ import annotations

import re
import textwrap
from typing import Any

import pytest
from conformance import run_cpython, run_interpreted

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")

PRELUDE = """
from thunder_interp import is_interpreting
LOG = []
def seen(tag):
    LOG.append((tag, is_interpreting()))
"""


def snippet(id: str, body: str) -> Any:
    return pytest.param(PRELUDE + textwrap.dedent(body), id=id)


SNIPPETS = [
    snippet(
        "bool_and_not",
        """
        class B:
            def __init__(self, v):
                self.v = v
            def __bool__(self):
                seen("bool")
                return self.v
        def f():
            out = []
            for v in (True, False):
                b = B(v)
                out.append(1 if b else 2)
                out.append(not b)
                out.append(bool(b))
                out.append(b and 3)
                out.append(b or 4)
                while b:
                    b = B(False)
            return out, LOG
        """,
    ),
    snippet(
        "len_truth_and_errors",
        """
        class L:
            def __init__(self, n):
                self.n = n
            def __len__(self):
                seen("len")
                return self.n
        class Bad:
            def __len__(self):
                seen("bad")
                return -1
        class Bool:
            def __bool__(self):
                seen("bool")
                return 1
        def f():
            out = [len(L(3)), bool(L(0)), 5 if L(2) else 6]
            for thing in (Bad(), Bool()):
                try:
                    out.append(len(thing) if isinstance(thing, Bad) else bool(thing))
                except (TypeError, ValueError) as e:
                    out.append((type(e).__name__, str(e)))
            return out, LOG
        """,
    ),
    snippet(
        "iteration_protocol",
        """
        class Count:
            def __init__(self, n):
                self.n = n
            def __iter__(self):
                seen("iter")
                return CountIt(self.n)
        class CountIt:
            def __init__(self, n):
                self.i, self.n = 0, n
            def __iter__(self):
                return self
            def __next__(self):
                seen("next")
                if self.i >= self.n:
                    raise StopIteration
                self.i += 1
                return self.i
        def f():
            out = [x for x in Count(2)]
            a, b = Count(2)
            out += [a, b, list(Count(2)), tuple(Count(1)), sum(Count(3))]
            out += [list(enumerate(Count(2), 5)), list(zip(Count(2), "ab"))]
            out += [any(Count(2)), all(Count(2)), sorted(Count(3), reverse=True)]
            out += [list(map(lambda v: v * 10, Count(2))), list(filter(None, Count(2)))]
            out += [next(iter(Count(1))), [*Count(2)], min(Count(3)), max(Count(3))]
            try:
                a, b = Count(3)
            except ValueError as e:
                out.append(str(e))
            return out, LOG
        """,
    ),
    snippet(
        "sequence_protocol_getitem",
        """
        class Seq:
            def __getitem__(self, i):
                seen(f"getitem {i}")
                if i >= 3:
                    raise IndexError(i)
                return i * i
            def __len__(self):
                seen("len")
                return 3
        def f():
            return [list(Seq()), 4 in Seq(), list(reversed(Seq()))], LOG
        """,
    ),
    snippet(
        "getattr_property_and_descriptors",
        """
        class Desc:
            def __get__(self, obj, owner):
                seen("desc get")
                return 7 if obj is not None else "class"
            def __set__(self, obj, value):
                seen("desc set")
                obj.__dict__["_d"] = value
        class P:
            d = Desc()
            def __init__(self):
                self._x = 1
            @property
            def x(self):
                seen("x get")
                return self._x
            @x.setter
            def x(self, v):
                seen("x set")
                self._x = v
            @x.deleter
            def x(self):
                seen("x del")
                self._x = None
            def __getattr__(self, name):
                seen(f"getattr {name}")
                if name == "missing":
                    raise AttributeError(name)
                return name.upper()
        def f():
            p = P()
            p.x = 5
            p.d = 3
            out = [p.x, p.d, p.other, getattr(p, "missing", "dflt"), hasattr(p, "x"), p._d]
            del p.x
            out.append(p._x)
            try:
                p.missing
            except AttributeError as e:
                out.append(str(e))
            p.__dict__["x"] = "shadowed"
            out.append(p.x)
            return out, LOG
        """,
    ),
    snippet(
        "descriptor_on_class",
        """
        class Desc:
            def __get__(self, obj, owner):
                seen(f"get {obj is None}")
                return owner.__name__ if obj is None else 1
        class C:
            d = Desc()
            @classmethod
            def make(cls):
                return cls.d
        def f():
            return [C.d, C().d, C.make(), getattr(C, "d"), C.__name__], LOG
        """,
    ),
    snippet(
        "getattribute_setattr_delattr",
        """
        class G:
            def __getattribute__(self, name):
                seen(f"getattribute {name}")
                if name == "boom":
                    raise AttributeError("no boom")
                return object.__getattribute__(self, name)
            def __getattr__(self, name):
                seen(f"getattr {name}")
                return 0
            def __setattr__(self, name, value):
                seen(f"setattr {name}")
                object.__setattr__(self, name, value * 2)
            def __delattr__(self, name):
                seen(f"delattr {name}")
                object.__delattr__(self, name)
        def f():
            g = G()
            g.a = 2
            setattr(g, "b", 3)
            out = [g.a, g.b, g.boom]
            del g.a
            delattr(g, "b")
            out.append(g.__dict__ == {})
            return out, LOG
        """,
    ),
    snippet(
        "class_calls_and_raise",
        """
        class Meta(type):
            def __call__(cls, *args):
                seen("meta call")
                return super().__call__(*args)
        class A(metaclass=Meta):
            def __new__(cls, v):
                seen("new")
                return super().__new__(cls)
            def __init__(self, v):
                seen("init")
                self.v = v
        class Err(Exception):
            def __init__(self):
                seen("err init")
                super().__init__("made")
        def f():
            out = [A(3).v]
            try:
                raise Err
            except Err as e:
                out.append(str(e))
            return out, LOG
        """,
    ),
    snippet(
        "context_managers",
        """
        class CM:
            def __enter__(self):
                seen("enter")
                return 1
            def __exit__(self, *exc):
                seen(f"exit {exc[0].__name__ if exc[0] else None}")
                return True
        def f():
            with CM() as v:
                pass
            with CM():
                raise KeyError
            return v, LOG
        """,
    ),
    snippet(
        "operators_and_reflection",
        """
        class N:
            def __init__(self, v):
                self.v = v
            def __add__(self, o):
                seen("add")
                return N(self.v + (o.v if isinstance(o, N) else o)) if not isinstance(o, str) else NotImplemented
            def __radd__(self, o):
                seen("radd")
                return N(o + self.v)
            def __iadd__(self, o):
                seen("iadd")
                self.v += o
                return self
            def __neg__(self):
                seen("neg")
                return N(-self.v)
            def __lt__(self, o):
                seen("lt")
                return self.v < o.v
            def __eq__(self, o):
                seen("eq")
                return isinstance(o, N) and self.v == o.v
            __hash__ = None
        class Sub(N):
            def __radd__(self, o):
                seen("sub radd")
                return "sub first"
        def f():
            a, b = N(1), N(2)
            c = a + b
            d = 3 + a
            a += 4
            out = [c.v, d.v, a.v, (-b).v, a < b, b > a, a == N(5), a != N(5), N(1) + Sub(2)]
            try:
                a + "s"
            except TypeError as e:
                out.append(str(e))
            try:
                a <= b
            except TypeError as e:
                out.append(str(e))
            out.append(N(2) in [N(1), N(2)])
            return out, LOG
        """,
    ),
    snippet(
        "items_and_contains",
        """
        class M:
            def __init__(self):
                self.d = {}
            def __getitem__(self, k):
                seen(f"get {k}")
                return self.d[k]
            def __setitem__(self, k, v):
                seen(f"set {k}")
                self.d[k] = v
            def __delitem__(self, k):
                seen(f"del {k}")
                del self.d[k]
            def __contains__(self, k):
                seen(f"contains {k}")
                return k in self.d
        class I:
            def __index__(self):
                seen("index")
                return 1
        def f():
            m = M()
            m["a"] = 1
            m["a"] += 1
            out = [m["a"], "a" in m, "b" not in m, [10, 20, 30][I()]]
            del m["a"]
            out.append(m.d)
            return out, LOG
        """,
    ),
    snippet(
        "str_repr_format",
        """
        class S:
            def __str__(self):
                seen("str")
                return "S!"
            def __repr__(self):
                seen("repr")
                return "S()"
            def __format__(self, spec):
                seen(f"format {spec}")
                return f"<{spec}>"
        class R:
            def __repr__(self):
                seen("R repr")
                return "R()"
        class Bad:
            def __str__(self):
                seen("bad str")
                return 3
        def f():
            s = S()
            out = [str(s), repr(s), f"{s}", f"{s:>4}", f"{s!r}", f"{s!s}", format(s, "x"), str(R())]
            out.append(f"{R()}")
            try:
                str(Bad())
            except TypeError as e:
                out.append(str(e))
            return out, LOG
        """,
    ),
    snippet(
        "callables_handed_to_builtins",
        """
        import functools
        def key(v):
            seen(f"key {v}")
            return -v
        def add(a, b):
            seen(f"add {a} {b}")
            return a + b
        class V:
            def __init__(self, v):
                self.v = v
            def __lt__(self, o):
                seen(f"lt {self.v} {o.v}")
                return self.v < o.v
        def f():
            xs = [3, 1, 2]
            ys = list(xs)
            ys.sort(key=key)
            out = [sorted(xs, key=key), ys, min(xs, key=key), max(xs, key=key)]
            out.append(functools.reduce(add, xs))
            out.append([v.v for v in sorted([V(2), V(1)])])
            return out, LOG
        """,
    ),
    snippet(
        "instancecheck_and_subclasscheck",
        """
        class Meta(type):
            def __instancecheck__(cls, obj):
                seen("instancecheck")
                return obj == 3
            def __subclasscheck__(cls, sub):
                seen("subclasscheck")
                return sub is int
        class Three(metaclass=Meta):
            pass
        def f():
            return [isinstance(3, Three), isinstance(4, Three), issubclass(int, Three),
                    issubclass(str, Three), isinstance(Three(), Three), isinstance(3, (int, str))], LOG
        """,
    ),
    snippet(
        "dunder_on_type_not_instance",
        """
        class X:
            def __bool__(self):
                seen("class bool")
                return False
            def __len__(self):
                seen("class len")
                return 0
        def f():
            x = X()
            x.__bool__ = lambda: True
            x.__len__ = lambda: 5
            return [bool(x), len(x), not x], LOG
        """,
    ),
    snippet(
        "super_attribute_descriptors",
        """
        class Desc:
            def __get__(self, obj, owner):
                seen("desc_get")
                return ("desc", obj is None, owner.__name__)
        class A:
            d = Desc()
            @property
            def p(self):
                seen("prop_get")
                return "A.p"
            def m(self):
                return "A.m"
            @classmethod
            def c(cls):
                return ("A.c", cls.__name__)
            @classmethod
            def sup_in_classmethod(cls):
                return super().__repr__ is not None
        class B(A):
            @property
            def p(self):
                seen("prop_get_b")
                return "B.p+" + super().p
            def m(self):
                return "B.m+" + super().m()
            def get_d(self):
                return super().d
            @classmethod
            def c(cls):
                return ("B.c", super().c(), super().d)
        class C(B):
            pass
        def f():
            c = C()
            out = [c.p, c.m(), c.get_d(), C.c(), super(B, c).p, super(A, c).__class__.__name__]
            try:
                super(B, c).missing
            except AttributeError as e:
                out.append(str(e))
            return out, LOG
        """,
    ),
    snippet(
        "operator_getters_and_itertools_callables",
        """
        import itertools
        import operator
        class Box:
            def __init__(self, v):
                self.v = v
            @property
            def twice(self):
                seen("twice")
                return Box(self.v * 2)
            def plus(self, k, scale=1):
                seen("plus")
                return (self.v + k) * scale
            def __add__(self, other):
                seen("add")
                return Box(self.v + other.v)
            def __mul__(self, other):
                seen("mul")
                return Box(self.v * other.v)
            def __repr__(self):
                return f"Box({self.v})"
        def mul(a, b):
            return a * b
        def f():
            b = Box(3)
            out = [
                operator.attrgetter("twice.v")(b),
                operator.attrgetter("v", "twice")(b),
                operator.methodcaller("plus", 1)(b),
                operator.methodcaller("plus", 1, scale=2)(b),
                list(itertools.accumulate([Box(1), Box(2), Box(3)])),
                list(itertools.accumulate([Box(1), Box(2)], mul, initial=Box(5))),
                list(itertools.starmap(Box.plus, [(b, 1), (b, 2)])),
            ]
            return out, LOG
        """,
    ),
    snippet(
        "dir_and_format",
        """
        class D:
            def __dir__(self):
                seen("dir")
                return ["b", "a"]
        class R:
            def __repr__(self):
                return "R()"
        def f():
            return [dir(D()), f"{[R()]}", f"{(R(),)}", f"{ {'k': R()} }", format([R()])], LOG
        """,
    ),
]


def _split(outcome: Any) -> tuple[Any, list[str], list[bool]]:
    assert outcome.kind == "return", outcome.describe()
    result, log = outcome.value
    return result, [tag for tag, _ in log], [flag for _, flag in log]


@pytest.mark.parametrize("source", SNIPPETS)
def test_implicit_calls_are_interpreted(source: str) -> None:
    _check(source)


def _check(source: str) -> None:
    native = run_cpython(source)
    interpreted = run_interpreted(source)
    expected, native_tags, native_flags = _split(native)
    got, tags, flags = _split(interpreted)
    assert _ADDRESS.sub("0x?", repr(got)) == _ADDRESS.sub("0x?", repr(expected))
    assert tags == native_tags
    assert not any(native_flags)
    assert all(flags), [tag for tag, flag in zip(tags, flags) if not flag]


def test_yield_from_a_python_iterator_is_interpreted() -> None:
    source = PRELUDE + textwrap.dedent(
        """
        class It:
            def __init__(self):
                self.n = 0
            def __iter__(self):
                seen("iter")
                return self
            def __next__(self):
                seen("next")
                self.n += 1
                if self.n > 2:
                    raise StopIteration
                return self.n
        def gen():
            yield from It()
        def f():
            return list(gen()), LOG
        """
    )
    _check(source)
