"""Conformance: PEP 695 type parameter syntax (3.12+) and PEP 696 defaults (3.13+).

``type`` aliases, generic classes, functions and methods; bounds, constraints, ``*Ts``, ``**P``;
lazily evaluated bounds, constraints, defaults and alias values; ``__type_params__``,
``__orig_bases__`` and the ``Generic`` base. The snippets are only compiled on Pythons that have
the syntax (``case(..., min_version=...)`` skips them before their source is compiled).
"""

import sys
import textwrap

import pytest
from conformance import case

PY312 = (3, 12)


def describe_source() -> str:
    # A helper every snippet shares: a readable description of a type parameter.
    return """
def describe(p):
    out = [type(p).__name__, p.__name__, p.__module__]
    for attr in ("__bound__", "__constraints__", "__covariant__", "__contravariant__",
                 "__infer_variance__"):
        if hasattr(p, attr):
            out.append((attr, getattr(p, attr)))
    return out
"""


def pep695_case(id: str, source: str, *args: object, **kwargs: object) -> object:
    kwargs.setdefault("min_version", PY312)
    return case(id, describe_source() + textwrap.dedent(source), *args, **kwargs)


ALIASES = [
    pep695_case(
        "type_alias_simple",
        """
        def f():
            type Alias = list[int]
            return (type(Alias).__name__, Alias.__name__, Alias.__value__, Alias.__type_params__,
                    Alias.__module__, repr(Alias))
        """,
    ),
    pep695_case(
        "type_alias_value_is_lazy",
        """
        def f():
            type Later = NotYetDefined
            try:
                Later.__value__
            except NameError as e:
                error = str(e)
            global NotYetDefined
            NotYetDefined = int
            try:
                return error, Later.__value__
            finally:
                del NotYetDefined
        """,
    ),
    pep695_case(
        "type_alias_value_evaluated_once",
        """
        calls = []
        def compute():
            calls.append(1)
            return int
        def f():
            type A = compute()
            return A.__value__, A.__value__, len(calls)
        """,
    ),
    pep695_case(
        "generic_type_alias",
        """
        def f():
            type Pair[K, V: int] = dict[K, V]
            K, V = Pair.__type_params__
            return (describe(K), describe(V), Pair.__value__, Pair[str, int],
                    Pair[str, int].__origin__ is Pair)
        """,
    ),
    pep695_case(
        "type_alias_at_module_level_via_exec",
        """
        def f():
            ns = {"__name__": "aliases"}
            exec("type A[T] = tuple[T, ...]\\nB = A[int]", ns)
            A = ns["A"]
            return A.__module__, A.__value__, ns["B"], describe(A.__type_params__[0])
        """,
    ),
    pep695_case(
        "type_alias_closure_over_function_local",
        """
        def f():
            element = str
            type Items = list[element]
            element = bytes
            return Items.__value__
        """,
    ),
    pep695_case(
        "type_alias_in_class_body_sees_class_names",
        """
        def f():
            class C:
                Inner = int
                type A = list[Inner]
            return C.A.__value__, C.A.__module__, C.A.__name__
        """,
    ),
]

FUNCTIONS = [
    pep695_case(
        "generic_function",
        """
        def f():
            def first[T](items: list[T]) -> T:
                return items[0]
            (T,) = first.__type_params__
            return first([3, 4]), describe(T), first.__annotations__, first.__qualname__
        """,
    ),
    pep695_case(
        "bounds_constraints_variadics",
        """
        def f():
            def g[T, B: int, C: (int, str), *Ts, **P](x: T, *args: *Ts, **kw: P.kwargs) -> B:
                pass
            params = g.__type_params__
            return [describe(p) for p in params], g.__annotations__
        """,
    ),
    pep695_case(
        "bound_is_evaluated_lazily",
        """
        def f():
            def g[T: Undefined]():
                pass
            (T,) = g.__type_params__
            try:
                T.__bound__
            except NameError as e:
                return str(e), T.__name__
        """,
    ),
    pep695_case(
        "constraints_are_evaluated_lazily",
        """
        calls = []
        def note(value):
            calls.append(value)
            return value
        def f():
            def g[T: (note(int), note(str))]():
                pass
            (T,) = g.__type_params__
            before = list(calls)
            constraints = T.__constraints__
            again = T.__constraints__
            return before, constraints, again, calls
        """,
    ),
    pep695_case(
        "bound_closes_over_enclosing_locals",
        """
        def f():
            base = int
            def g[T: base]():
                pass
            base = float
            return g.__type_params__[0].__bound__
        """,
    ),
    pep695_case(
        "generic_function_defaults_and_kwdefaults",
        """
        def f():
            def g[T](x: T = 1, *, y: T = 2) -> tuple[T, T]:
                return x, y
            return g(), g(3, y=4), g.__defaults__, g.__kwdefaults__, g.__type_params__
        """,
    ),
    pep695_case(
        "generic_lambda_free_function_in_closure",
        """
        def f():
            def outer():
                def g[T](x: T) -> T:
                    return x
                return g
            g = outer()
            return g(5), g.__qualname__, g.__type_params__[0].__name__
        """,
    ),
    pep695_case(
        "generic_async_and_generator_functions",
        """
        def f():
            def gen[T](x: T):
                yield x
            async def coro[T](x: T) -> T:
                return x
            c = coro(2)
            try:
                c.send(None)
            except StopIteration as e:
                value = e.value
            return list(gen(1)), value, gen.__type_params__, coro.__type_params__
        """,
    ),
]

CLASSES = [
    pep695_case(
        "generic_class",
        """
        def f():
            class Box[T]:
                def __init__(self, item: T) -> None:
                    self.item = item
                def get(self) -> T:
                    return self.item
            (T,) = Box.__type_params__
            return (Box(3).get(), describe(T), Box.__orig_bases__, Box.__bases__,
                    [c.__name__ for c in Box.__mro__], Box.__parameters__, Box[int],
                    Box.__type_params__ is Box.__dict__["__type_params__"])
        """,
    ),
    pep695_case(
        "generic_class_with_bases_and_keywords",
        """
        class Meta(type):
            def __new__(mcs, name, bases, ns, **kw):
                cls = super().__new__(mcs, name, bases, ns)
                cls.kw = kw
                return cls
        class Base:
            pass
        def f():
            class C[T: int, *Ts](Base, metaclass=Meta, flag=True):
                pass
            return (C.__orig_bases__, [c.__name__ for c in C.__mro__], C.kw, C.__parameters__,
                    [describe(p) for p in C.__type_params__])
        """,
    ),
    pep695_case(
        "generic_class_with_paramspec",
        """
        from typing import Callable
        def f():
            class Wrapper[**P, R]:
                def __init__(self, fn: Callable[P, R]) -> None:
                    self.fn = fn
                def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
                    return self.fn(*args, **kwargs)
            w = Wrapper(lambda a, b=2: a + b)
            return w(1), w(1, b=5), [describe(p) for p in Wrapper.__type_params__], (
                Wrapper.__orig_bases__
            )
        """,
    ),
    pep695_case(
        "generic_methods_in_generic_class",
        """
        def f():
            class Mapper[T]:
                def __init__(self, value: T) -> None:
                    self.value = value
                def apply[S](self, fn: "Callable[[T], S]") -> S:
                    return fn(self.value)
                @classmethod
                def make[U](cls, value: U) -> "Mapper[U]":
                    return cls(value)
                @staticmethod
                def ident[V](v: V) -> V:
                    return v
            m = Mapper.make(3)
            (S,) = Mapper.apply.__type_params__
            return (m.apply(lambda v: v * 2), Mapper.ident("x"), describe(S),
                    Mapper.apply.__annotations__, Mapper.make.__type_params__,
                    Mapper.apply.__qualname__)
        """,
    ),
    pep695_case(
        "method_annotations_see_class_type_param_and_class_names",
        """
        def f():
            class C[T]:
                Alias = int
                def m(self, x: T, y: Alias) -> "C[T]":
                    pass
                def g[S](self, s: S, t: T, a: Alias):
                    pass
            return C.m.__annotations__, C.g.__annotations__
        """,
    ),
    pep695_case(
        "generic_class_super_and_class_cell",
        """
        def f():
            class Base:
                def who(self):
                    return "base"
            class Child[T](Base):
                def who(self):
                    return "child of " + super().who()
                def cls(self):
                    return __class__.__name__
            return Child().who(), Child().cls(), Child.__orig_bases__
        """,
    ),
    pep695_case(
        "nested_generic_classes",
        """
        def f():
            class Outer[T]:
                class Inner[S]:
                    def pair(self, s: S) -> "tuple[T, S]":
                        return s
            return (Outer.Inner.__type_params__, Outer.Inner.__qualname__,
                    Outer.Inner.pair.__annotations__, Outer.__type_params__)
        """,
    ),
    pep695_case(
        "generic_class_subscription_and_subclass",
        """
        def f():
            class Stack[T]:
                pass
            class IntStack(Stack[int]):
                pass
            return (IntStack.__orig_bases__, [c.__name__ for c in IntStack.__mro__],
                    Stack[int].__args__, Stack[int].__origin__ is Stack)
        """,
    ),
    pep695_case(
        "generic_class_type_param_errors",
        """
        def f():
            class C[T]:
                pass
            errors = []
            for call in (lambda: C[int, str], lambda: C.__type_params__[0][int]):
                try:
                    call()
                except TypeError as e:
                    errors.append(str(e))
            return errors
        """,
    ),
    pep695_case(
        "generic_class_in_class_body_uses_classdict",
        """
        def f():
            class Outer:
                Helper = int
                class Inner[T: Helper]:
                    pass
                type Alias[T] = tuple[Helper, T]
            return (Outer.Inner.__type_params__[0].__bound__, Outer.Alias.__value__,
                    sorted(k for k in vars(Outer) if not k.startswith("__d")))
        """,
    ),
]

# The snippets above are compiled with the harness's ``from __future__ import annotations``
# (annotations stay strings); these compile their code without it, so annotations are evaluated.
EVALUATED_ANNOTATIONS = [
    pep695_case(
        "evaluated_annotations_in_generic_class_and_methods",
        """
        from typing import Callable
        SRC = '''
        class Box[T]:
            Alias = int
            def put(self, item: T, extra: Alias) -> "Box[T]":
                return self
            def map[S](self, fn: Callable[[T], S], other: Alias) -> S:
                return fn(1)
            class Nested:
                def g(self, t: T) -> T:
                    pass
        def first[T: (int, str)](xs: list[T]) -> T:
            return xs[0]
        type Pair[K] = tuple[K, K]
        '''
        def f():
            ns = {"Callable": Callable, "__name__": "generated"}
            exec(compile(SRC, "<generated>", "exec", dont_inherit=True), ns)
            Box, first, Pair = ns["Box"], ns["first"], ns["Pair"]
            return (Box.put.__annotations__, Box.map.__annotations__,
                    Box.Nested.g.__annotations__, first.__annotations__, first(["a"]),
                    Pair.__value__, Pair.__module__, Box().map(str, 0), Box.__module__)
        """,
    ),
    pep695_case(
        "evaluated_annotations_through_function_type",
        """
        import types
        SRC = '''
        Alias = float
        def scale[N: (int, float)](x: N, factor: Alias = 2.0) -> N:
            return x * factor
        result = (scale(3), scale.__annotations__, scale.__type_params__[0].__constraints__)
        '''
        def f():
            g = {"__builtins__": __builtins__, "__name__": "made"}
            code = compile(SRC, "<generated>", "exec", dont_inherit=True)
            types.FunctionType(code, g)()
            return g["result"]
        """,
    ),
]

DEFAULTS = [
    pep695_case(
        "type_parameter_defaults",
        """
        def f():
            class C[T = int, **P = [bytes], *Ts = *tuple[str, ...]]:
                pass
            T, P, Ts = C.__type_params__
            return (T.__default__, Ts.__default__, P.__default__, T.has_default(),
                    C[str].__args__, C.__orig_bases__)
        """,
        min_version=(3, 13),
    ),
    pep695_case(
        "type_parameter_default_is_lazy",
        """
        def f():
            def g[T = Missing]():
                pass
            (T,) = g.__type_params__
            try:
                T.__default__
            except NameError as e:
                return str(e), T.has_default()
        """,
        min_version=(3, 13),
    ),
]

CASES = ALIASES + FUNCTIONS + CLASSES + EVALUATED_ANNOTATIONS + DEFAULTS


@pytest.mark.parametrize("snippet", CASES)
def test_pep695(snippet):
    snippet.assert_ok()


def test_pep695_syntax_is_not_compiled_before_3_12() -> None:
    # This module must import on 3.10/3.11: its PEP 695 code lives only in strings.
    assert sys.version_info >= PY312 or all(
        mark.name == "skip" for param in CASES for mark in param.marks
    )
