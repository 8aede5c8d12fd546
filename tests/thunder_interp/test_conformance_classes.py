"""Conformance: classes defined inside interpreted code, super(), descriptors, properties,
__getattr__/__getattribute__, metaclasses, dataclasses, __slots__."""

import pytest
from conformance import case

CLASSES = [
    case(
        "class_basic_instance",
        """
        def f():
            class Point:
                def __init__(self, x, y):
                    self.x = x
                    self.y = y
                def norm1(self):
                    return abs(self.x) + abs(self.y)
            p = Point(3, -4)
            return p.norm1(), p.x, vars(p)
        """,
    ),
    case(
        "class_attributes_vs_instance",
        """
        def f():
            class C:
                shared = []
                count = 0
                def __init__(self):
                    C.count += 1
                    self.count = -1
            a, b = C(), C()
            a.shared.append(1)
            return C.count, a.count, b.shared, "count" in vars(a)
        """,
    ),
    case(
        "class_names_and_qualname",
        """
        def f():
            class Outer:
                class Inner:
                    def m(self):
                        pass
            return Outer.__name__, Outer.Inner.__qualname__, Outer.Inner.m.__qualname__, Outer.__module__
        """,
    ),
    case(
        "class_returned_instance_repr",
        """
        def f():
            class Thing:
                pass
            return Thing()
        """,
    ),
    case(
        "class_repr_and_str",
        """
        def f():
            class V:
                def __init__(self, v):
                    self.v = v
                def __repr__(self):
                    return f"V({self.v!r})"
                def __str__(self):
                    return f"<{self.v}>"
            v = V("a")
            print(v, [v])
            return repr(v), str(v), f"{v}"
        """,
    ),
    case(
        "inheritance_method_resolution",
        """
        def f():
            class A:
                def who(self):
                    return "A"
                def hello(self):
                    return "hello from " + self.who()
            class B(A):
                def who(self):
                    return "B"
            return B().hello(), A().hello(), [c.__name__ for c in B.__mro__]
        """,
    ),
    case(
        "diamond_mro",
        """
        def f():
            class A: pass
            class B(A): pass
            class C(A): pass
            class D(B, C): pass
            return [k.__name__ for k in D.mro()]
        """,
    ),
    case(
        "inconsistent_mro_error",
        """
        def f():
            class A: pass
            class B(A): pass
            class C(A, B): pass
        """,
    ),
    case(
        "isinstance_issubclass",
        """
        def f():
            class A: pass
            class B(A): pass
            b = B()
            return isinstance(b, A), isinstance(b, (int, B)), issubclass(B, A), issubclass(A, B), isinstance(A, type)
        """,
    ),
    case(
        "classmethod_and_staticmethod",
        """
        def f():
            class C:
                made = 0
                def __init__(self, v):
                    self.v = v
                @classmethod
                def make(cls, v):
                    cls.made += 1
                    return cls(v)
                @staticmethod
                def helper(x):
                    return x * 2
            class D(C):
                pass
            d = D.make(3)
            return type(d).__name__, d.v, D.made, C.made, C.helper(4), d.helper(5)
        """,
    ),
    case(
        "bound_and_unbound_methods",
        """
        def f():
            class C:
                def m(self, x):
                    return (type(self).__name__, x)
            c = C()
            bm = c.m
            return bm(1), C.m(c, 2), bm.__self__ is c, bm.__func__ is C.m
        """,
    ),
    case(
        "init_subclass_hook",
        """
        def f():
            registry = []
            class Base:
                def __init_subclass__(cls, tag=None, **kw):
                    super().__init_subclass__(**kw)
                    registry.append((cls.__name__, tag))
            class A(Base, tag="a"):
                pass
            class B(A):
                pass
            return registry
        """,
    ),
    case(
        "set_name_hook",
        """
        def f():
            class Field:
                def __set_name__(self, owner, name):
                    self.name = owner.__name__ + "." + name
            class M:
                a = Field()
                b = Field()
            return M.a.name, M.b.name
        """,
    ),
    case(
        "class_with_slots",
        """
        def f():
            class P:
                __slots__ = ("x", "y")
                def __init__(self):
                    self.x = 1
            p = P()
            try:
                p.z = 3
            except AttributeError as e:
                err = str(e)
            try:
                p.y
            except AttributeError as e:
                err2 = str(e)
            return p.x, err, err2, hasattr(p, "__dict__")
        """,
    ),
    case(
        "dataclass_basic",
        """
        import dataclasses
        def f():
            @dataclasses.dataclass
            class Item:
                name: str
                qty: int = 1
                tags: list = dataclasses.field(default_factory=list)
            a = Item("x")
            b = Item("x", 1)
            return repr(a), a == b, dataclasses.asdict(Item("y", 2, ["t"]))
        """,
    ),
    case(
        "dataclass_frozen_and_order",
        """
        import dataclasses
        def f():
            @dataclasses.dataclass(frozen=True, order=True)
            class V:
                a: int
                b: int = 0
            vs = sorted([V(2, 1), V(1, 5), V(1, 2)])
            try:
                vs[0].a = 9
            except dataclasses.FrozenInstanceError as e:
                err = type(e).__name__
            return [(v.a, v.b) for v in vs], err, hash(V(1, 2)) == hash(V(1, 2))
        """,
    ),
    case(
        "dataclass_post_init_and_replace",
        """
        import dataclasses
        def f():
            @dataclasses.dataclass
            class R:
                w: int
                h: int
                area: int = dataclasses.field(init=False)
                def __post_init__(self):
                    self.area = self.w * self.h
            r = R(2, 3)
            r2 = dataclasses.replace(r, h=10)
            return r.area, r2.area, [f.name for f in dataclasses.fields(R)]
        """,
    ),
    case(
        "metaclass_basic",
        """
        def f():
            class Meta(type):
                def __new__(mcs, name, bases, ns):
                    ns["created_by"] = mcs.__name__
                    return super().__new__(mcs, name, bases, ns)
                def __call__(cls, *a):
                    inst = super().__call__(*a)
                    inst.via_meta = True
                    return inst
            class A(metaclass=Meta):
                def __init__(self, x):
                    self.x = x
            a = A(5)
            return A.created_by, a.x, a.via_meta, type(A).__name__
        """,
    ),
    case(
        "metaclass_prepare_and_kwargs",
        """
        def f():
            class Meta(type):
                @classmethod
                def __prepare__(mcs, name, bases, **kw):
                    return {"order": []}
                def __new__(mcs, name, bases, ns, **kw):
                    ns["kw"] = kw
                    return super().__new__(mcs, name, bases, ns)
                def __init__(cls, name, bases, ns, **kw):
                    super().__init__(name, bases, ns)
            class A(metaclass=Meta, flag=True):
                x = 1
            return A.kw, A.order
        """,
    ),
    case(
        "metaclass_inherited",
        """
        def f():
            class Meta(type):
                count = 0
                def __init__(cls, *args):
                    super().__init__(*args)
                    Meta.count += 1
            class A(metaclass=Meta): pass
            class B(A): pass
            return Meta.count, type(B) is Meta
        """,
    ),
    case(
        "type_three_arg_call",
        """
        def f():
            B = type("B", (object,), {"x": 1, "get": lambda self: self.x * 2})
            return B().get(), B.__name__
        """,
    ),
    case(
        "abc_abstract_method",
        """
        import abc
        def f():
            class Base(abc.ABC):
                @abc.abstractmethod
                def run(self): ...
            class Impl(Base):
                def run(self):
                    return "ran"
            try:
                Base()
            except TypeError as e:
                err = str(e).split(" with")[0]
            return Impl().run(), err
        """,
    ),
    case(
        "class_instantiation_errors",
        """
        def f():
            class A:
                def __init__(self, x):
                    self.x = x
            try:
                A()
            except TypeError as e:
                return str(e)
        """,
    ),
    case(
        "init_returning_value_error",
        """
        def f():
            class A:
                def __init__(self):
                    return 5
            A()
        """,
    ),
    case(
        "dunder_new_custom",
        """
        def f():
            class Singleton:
                _inst = None
                def __new__(cls, *a):
                    if cls._inst is None:
                        cls._inst = super().__new__(cls)
                        cls._inst.n = 0
                    return cls._inst
                def __init__(self, v):
                    self.n += v
            a = Singleton(1)
            b = Singleton(2)
            return a is b, a.n
        """,
    ),
    case(
        "subclass_builtin_types",
        """
        def f():
            class MyList(list):
                def total(self):
                    return sum(self)
            class MyDict(dict):
                def __missing__(self, key):
                    return key * 2
            class MyInt(int):
                def __add__(self, o):
                    return MyInt(int(self) + int(o) + 100)
            ml = MyList([1, 2, 3])
            ml.append(4)
            return ml.total(), MyDict(a=1)["zz"], MyInt(1) + 1, type(MyInt(1) + 1).__name__, isinstance(ml, list)
        """,
    ),
    case(
        "subclass_exception",
        """
        def f():
            class AppError(Exception):
                def __init__(self, code, msg):
                    super().__init__(msg)
                    self.code = code
            try:
                raise AppError(404, "missing")
            except Exception as e:
                return type(e).__name__, e.code, str(e), e.args
        """,
    ),
]

SUPER = [
    case(
        "super_zero_arg_basic",
        """
        def f():
            class A:
                def greet(self):
                    return "A"
            class B(A):
                def greet(self):
                    return "B+" + super().greet()
            return B().greet()
        """,
    ),
    case(
        "super_in_init_chain",
        """
        def f():
            class A:
                def __init__(self):
                    self.log = ["A"]
            class B(A):
                def __init__(self):
                    super().__init__()
                    self.log.append("B")
            class C(B):
                def __init__(self):
                    super().__init__()
                    self.log.append("C")
            return C().log
        """,
    ),
    case(
        "super_cooperative_multiple_inheritance",
        """
        def f():
            class Base:
                def go(self):
                    return ["Base"]
            class L(Base):
                def go(self):
                    return ["L"] + super().go()
            class R(Base):
                def go(self):
                    return ["R"] + super().go()
            class D(L, R):
                def go(self):
                    return ["D"] + super().go()
            return D().go()
        """,
    ),
    case(
        "super_two_arg_form",
        """
        def f():
            class A:
                def m(self):
                    return "A"
            class B(A):
                def m(self):
                    return "B"
            class C(B):
                def m(self):
                    return super(B, self).m()
            return C().m()
        """,
    ),
    case(
        "super_in_classmethod",
        """
        def f():
            class A:
                @classmethod
                def create(cls):
                    return ("A.create", cls.__name__)
            class B(A):
                @classmethod
                def create(cls):
                    return ("B",) + super().create()
            return B.create()
        """,
    ),
    case(
        "super_in_staticmethod_fails",
        """
        def f():
            class A:
                @staticmethod
                def s():
                    return super().s()
            try:
                A.s()
            except RuntimeError as e:
                return "RuntimeError", str(e)
        """,
    ),
    case(
        "super_attribute_and_property",
        """
        def f():
            class A:
                tag = "a-tag"
                @property
                def p(self):
                    return "A.p"
            class B(A):
                tag = "b-tag"
                @property
                def p(self):
                    return "B.p/" + super().p + "/" + super().tag
            return B().p
        """,
    ),
    case(
        "super_in_nested_function_inside_method",
        """
        def f():
            class A:
                def m(self):
                    return 1
            class B(A):
                def m(self):
                    def helper():
                        return super(B, self).m() + 10
                    return helper()
            return B().m()
        """,
    ),
    case(
        "super_with_class_cell_in_comprehension",
        """
        def f():
            class A:
                def val(self, i):
                    return i
            class B(A):
                def vals(self):
                    return [super(B, self).val(i) * 2 for i in range(3)]
            return B().vals()
        """,
    ),
    case(
        "dunder_class_cell",
        """
        def f():
            class A:
                def cls(self):
                    return __class__
            class B(A):
                pass
            return A().cls() is A, B().cls() is A
        """,
    ),
    case(
        "super_missing_attribute",
        """
        def f():
            class A:
                pass
            class B(A):
                def m(self):
                    return super().nope
            B().m()
        """,
    ),
    case(
        "super_new_and_init_subclass_of_builtin",
        """
        def f():
            class Upper(str):
                def __new__(cls, s):
                    return super().__new__(cls, s.upper())
            u = Upper("abc")
            return u, type(u).__name__, u + "d"
        """,
    ),
]

DESCRIPTORS = [
    case(
        "property_get_set_delete",
        """
        def f():
            class T:
                def __init__(self):
                    self._c = 0
                @property
                def celsius(self):
                    return self._c
                @celsius.setter
                def celsius(self, v):
                    if v < -273:
                        raise ValueError("too cold")
                    self._c = v
                @celsius.deleter
                def celsius(self):
                    self._c = None
            t = T()
            t.celsius = 25
            a = t.celsius
            try:
                t.celsius = -300
            except ValueError as e:
                err = str(e)
            del t.celsius
            return a, err, t.celsius
        """,
    ),
    case(
        "property_read_only",
        """
        def f():
            class A:
                @property
                def x(self):
                    return 1
            a = A()
            a.x = 2
        """,
    ),
    case(
        "data_descriptor_precedence",
        """
        def f():
            class D:
                def __get__(self, obj, owner):
                    return ("D.get", obj is None)
                def __set__(self, obj, value):
                    obj.__dict__["stored"] = value
            class A:
                d = D()
            a = A()
            a.d = 5
            a.__dict__["d"] = "instance"
            return a.d, A.d, a.stored
        """,
    ),
    case(
        "non_data_descriptor_shadowed",
        """
        def f():
            class ND:
                def __get__(self, obj, owner):
                    return "from descriptor"
            class A:
                d = ND()
            a = A()
            before = a.d
            a.d = "instance value"
            return before, a.d, A.d
        """,
    ),
    case(
        "descriptor_delete",
        """
        def f():
            log = []
            class D:
                def __get__(self, obj, owner):
                    return 1
                def __delete__(self, obj):
                    log.append("deleted")
            class A:
                d = D()
            del A().d
            return log
        """,
    ),
    case(
        "descriptor_typed_field",
        """
        def f():
            class Typed:
                def __init__(self, kind):
                    self.kind = kind
                def __set_name__(self, owner, name):
                    self.name = "_" + name
                def __get__(self, obj, owner=None):
                    if obj is None:
                        return self
                    return getattr(obj, self.name)
                def __set__(self, obj, value):
                    if not isinstance(value, self.kind):
                        raise TypeError(f"{self.name[1:]} must be {self.kind.__name__}")
                    setattr(obj, self.name, value)
            class P:
                age = Typed(int)
                def __init__(self, age):
                    self.age = age
            p = P(3)
            try:
                P("old")
            except TypeError as e:
                return p.age, str(e), type(P.age).__name__
        """,
    ),
    case(
        "functions_are_descriptors",
        """
        def f():
            def free(self):
                return ("free", type(self).__name__)
            class A:
                pass
            A.method = free
            a = A()
            a.inst_fn = free
            return a.method(), free.__get__(a)(), a.inst_fn(a)
        """,
    ),
    case(
        "getattr_fallback",
        """
        def f():
            class Proxy:
                def __init__(self):
                    self.real = 1
                def __getattr__(self, name):
                    if name.startswith("x"):
                        return name.upper()
                    raise AttributeError(f"no {name}")
            p = Proxy()
            try:
                p.other
            except AttributeError as e:
                err = str(e)
            return p.real, p.xyz, getattr(p, "other", "dflt"), hasattr(p, "xa"), err
        """,
    ),
    case(
        "getattribute_override",
        """
        def f():
            class Loud:
                def __init__(self):
                    self.v = 1
                def __getattribute__(self, name):
                    if name == "secret":
                        return "intercepted"
                    return object.__getattribute__(self, name)
            l = Loud()
            return l.v, l.secret
        """,
    ),
    case(
        "getattribute_raises_falls_to_getattr",
        """
        def f():
            class A:
                def __getattribute__(self, name):
                    raise AttributeError(name)
                def __getattr__(self, name):
                    return "fallback:" + name
            return A().anything
        """,
    ),
    case(
        "setattr_and_delattr_override",
        """
        def f():
            log = []
            class Rec:
                def __setattr__(self, name, value):
                    log.append(("set", name, value))
                    object.__setattr__(self, name, value * 2)
                def __delattr__(self, name):
                    log.append(("del", name))
                    object.__delattr__(self, name)
            r = Rec()
            r.a = 5
            r.a += 1
            del r.a
            return log
        """,
    ),
    case(
        "attribute_error_messages",
        """
        def f():
            class A:
                pass
            out = []
            for obj, name in [(A(), "missing"), (A, "missing"), (5, "nope"), ("s", "nope"), (None, "x")]:
                try:
                    getattr(obj, name)
                except AttributeError as e:
                    out.append(str(e))
            return out
        """,
    ),
    case(
        "getattr_setattr_hasattr_builtins",
        """
        def f():
            class O:
                pass
            o = O()
            setattr(o, "dyn", 3)
            return getattr(o, "dyn"), getattr(o, "nope", None), hasattr(o, "dyn"), hasattr(o, "zz"), sorted(vars(o))
        """,
    ),
    case(
        "class_getitem",
        """
        def f():
            class Box:
                def __class_getitem__(cls, item):
                    return (cls.__name__, item)
            return Box[int], list[int]
        """,
    ),
    case(
        "instance_dict_direct",
        """
        def f():
            class A:
                pass
            a = A()
            a.__dict__["z"] = 26
            a.y = 25
            return a.z, a.__dict__
        """,
    ),
    case(
        "method_on_instance_missing_self",
        """
        def f():
            class A:
                def m():
                    return 1
            return A().m()
        """,
    ),
]

CASES = CLASSES + SUPER + DESCRIPTORS


@pytest.mark.parametrize("snippet", CASES)
def test_classes(snippet):
    snippet.assert_ok()
