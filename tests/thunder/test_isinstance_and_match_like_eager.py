"""``isinstance`` and ``match`` class patterns on tensors answer as in eager: every classinfo form
Python accepts (unions, ``typing`` aliases, nested tuples, objects with ``__instancecheck__``),
the same TypeError for what it refuses, class patterns with keyword sub-patterns; and the
broadcast error names eager's dimension."""

from __future__ import annotations

import collections.abc
import dataclasses
import typing

import pytest
import torch
from torch import nn

import thunder
import thunder_interp

torch.set_num_threads(1)


class _NdimCheck:
    """Not a class: ``isinstance`` calls its ``__instancecheck__`` with the instance."""

    def __init__(self, ndim):
        self.ndim = ndim

    def __instancecheck__(self, obj):
        return getattr(obj, "ndim", None) == self.ndim


@typing.runtime_checkable
class _HasLen(typing.Protocol):
    def __len__(self) -> int: ...


CLASSINFOS = {
    "Tensor": torch.Tensor,
    "tuple": (torch.Tensor,),
    "Tensor|None": torch.Tensor | None,
    "None|Tensor": None | torch.Tensor,
    "int|Tensor": int | torch.Tensor,
    "int|float": int | float,
    "Tensor|Module": torch.Tensor | nn.Module,
    "Optional[Tensor]": typing.Optional[torch.Tensor],  # noqa: UP045 - the typing form is tested
    "Union[int,Tensor]": typing.Union[int, torch.Tensor],  # noqa: UP007
    "Union[int,str]": typing.Union[int, str],  # noqa: UP007
    "typing.Iterable": typing.Iterable,
    "typing.Sized": typing.Sized,
    "typing.Hashable": typing.Hashable,
    "typing.Sequence": typing.Sequence,
    "typing.Mapping": typing.Mapping,
    "abc.Iterable": collections.abc.Iterable,
    "abc.Sequence": collections.abc.Sequence,
    "Protocol": _HasLen,
    "nested": (int, (str, (torch.Tensor | None,))),
    "nested-no": (int, (str, (float | None,))),
    "tuple-with-typing": (int, typing.Optional[torch.Tensor]),  # noqa: UP045
    "Parameter": nn.Parameter,
    "Parameter|None": nn.Parameter | None,
    "Optional[Parameter]": typing.Optional[nn.Parameter],  # noqa: UP045
    "ndim==1": _NdimCheck(1),
    "ndim==2": _NdimCheck(2),
    "(ndim==2,Tensor)": (_NdimCheck(2), torch.Tensor),
    "short-circuit": (torch.Tensor, 3),
    # refused by Python: the same TypeError
    "int-literal": 3,
    "(int,3)": (int, 3),
    "list[int]": list[int],
    "int|list[int]": int | list[int],
    "typing.List[int]": typing.List[int],  # noqa: UP006
    "typing.Any": typing.Any,
}


def _checks(x, classinfos):
    out = []
    for c in classinfos:
        try:
            out.append(isinstance(x, c))
        except TypeError as e:
            out.append(f"TypeError: {e}")
    return out


def _ids(d):
    return list(d)


@pytest.mark.parametrize("name", _ids(CLASSINFOS))
@pytest.mark.parametrize("which", ["input", "computed"])
def test_isinstance_of_a_tensor_as_eager(name, which):
    c = CLASSINFOS[name]

    def f(x):
        t = x if which == "input" else x * 2
        return _checks(t, [c])

    x = torch.zeros(3)
    assert thunder.jit(f)(x) == f(x)


def test_isinstance_all_forms_in_one_program():
    cs = list(CLASSINFOS.values())

    def f(x):
        return _checks(x, cs), _checks(x + 1, cs)

    x = torch.zeros(2, 3)
    assert thunder.jit(f)(x) == f(x)


@pytest.mark.parametrize("name", _ids(CLASSINFOS))
def test_isinstance_of_a_parameter_as_eager(name):
    # (an input Parameter is answered with its own class by the binder: unions and typing forms
    # naming Parameter included)
    c = CLASSINFOS[name]

    def f(x, w):
        return _checks(w, [c])

    x, w = torch.zeros(3), nn.Parameter(torch.zeros(3))
    assert thunder.jit(f)(x, w) == f(x, w)


def test_isinstance_of_a_module_parameter_as_eager():
    cs = list(CLASSINFOS.values())

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(3))

        def forward(self, x):
            return x * self.weight, _checks(self.weight, cs)

    m = M()
    x = torch.ones(3)
    got, want = thunder.jit(m)(x), m(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1]


@pytest.mark.parametrize(
    "c",
    [torch.Tensor | float, typing.Optional[torch.Tensor], (int, (torch.Tensor | None,))],  # noqa: UP045
    ids=["union", "optional", "nested"],
)
def test_isinstance_chooses_eager_branch(c):
    def f(x, bias):
        if isinstance(bias, c):
            return x + bias
        return x - 1

    x, b = torch.zeros(3), torch.ones(3)
    torch.testing.assert_close(thunder.jit(f)(x, b), f(x, b))


def test_issubclass_of_the_type_of_a_tensor_as_eager():
    cs = [
        torch.Tensor | None,
        int | torch.Tensor,
        (int, (torch.Tensor | None,)),
        collections.abc.Iterable,
        nn.Parameter | None,
    ]

    def f(x, w):
        out = []
        for t in (x, w, x * 2):
            out.append([issubclass(type(t), c) for c in cs])
        return out

    x, w = torch.zeros(3), nn.Parameter(torch.zeros(3))
    assert thunder.jit(f)(x, w) == f(x, w)


def test_isinstance_of_sizes_and_numbers_with_symbolic_values():
    cs = [
        torch.Size,
        torch.Size | None,
        typing.Optional[torch.Size],  # noqa: UP045
        (int, (torch.Size | None,)),
        typing.Sequence,
        tuple | None,
        int | None,
        typing.Union[int, float],  # noqa: UP007
    ]

    def f(x, n):
        return _checks(x.shape, cs), _checks(x.shape[0], cs), _checks(n, cs)

    jf = thunder.jit(f, cache="symbolic values")
    for size, n in ((3, 2), (5, 7)):
        x = torch.zeros(size)
        assert jf(x, n) == f(x, n)


# ---- match statements --------------------------------------------------------------------------


def _scale(x, s):
    match s:
        case torch.Tensor():
            return x * s
        case float() | int():
            return x + s
        case _:
            return x


def _describe(x):
    match x:
        case nn.Parameter():
            return "parameter"
        case torch.Tensor(shape=(3,)):
            return "vector of 3"
        case torch.Tensor(shape=(2, n), dtype=torch.float32):
            return f"2 x {n} float"
        case torch.Tensor(ndim=2, requires_grad=True):
            return "matrix with grad"
        case torch.Tensor(no_such_attribute=1):
            return "impossible"
        case torch.Tensor(ndim=0):
            return "scalar"
        case torch.Tensor():
            return "tensor"
        case _:
            return "other"


def _containers(v):
    match v:
        case [torch.Tensor(), torch.Tensor() as b]:
            return b * 2
        case {"a": torch.Tensor(dtype=torch.float32) as a}:
            return a + 1
        case _:
            return None


def _positional(x):
    try:
        match x:
            case torch.Tensor(y):
                return y
    except TypeError as e:
        return str(e)
    return None


@dataclasses.dataclass
class _Pair:
    a: typing.Any
    b: typing.Any


def _pair(p):
    match p:
        case _Pair(torch.Tensor(shape=(2,)) as a, None):
            return a + 1
        case _Pair(a=torch.Tensor() as a, b=torch.Tensor() as b):
            return a * b
        case _:
            return None


def _assert_same(got, want):
    if isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want)
    else:
        assert got == want


@pytest.mark.parametrize(
    "s", [torch.full((3,), 5.0), 2.0, 3, "x"], ids=["tensor", "float", "int", "str"]
)
def test_match_class_pattern_on_scale(s):
    x = torch.ones(3)
    _assert_same(thunder.jit(_scale)(x, s), _scale(x, s))


@pytest.mark.parametrize(
    "x",
    [
        torch.ones(3),
        torch.ones(2, 4),
        torch.ones(2, 4, dtype=torch.float64),
        torch.ones(5, 4, requires_grad=True),
        torch.tensor(1.0),
        torch.ones(2, 2, 2),
        nn.Parameter(torch.ones(3)),
    ],
    ids=["vec3", "2x4", "2x4-f64", "grad", "scalar", "3d", "parameter"],
)
def test_match_class_pattern_keywords(x):
    assert thunder.jit(_describe)(x) == _describe(x)


def test_match_class_pattern_on_computed_tensors():
    def f(x):
        return _describe(x * 2), _describe(x.sum()), _describe(x.reshape(2, -1))

    x = torch.ones(6)
    assert thunder.jit(f)(x) == f(x)


@pytest.mark.parametrize("case", ["list", "dict", "neither"])
def test_match_class_pattern_in_containers(case):
    t = torch.ones(3)
    v = {"list": [t, t + 1], "dict": {"a": t}, "neither": (1,)}[case]
    _assert_same(thunder.jit(_containers)(v), _containers(v))


@pytest.mark.parametrize("case", ["positional", "keywords", "neither"])
def test_match_class_pattern_of_a_dataclass_holding_tensors(case):
    t = torch.ones(2)
    p = {"positional": _Pair(t, None), "keywords": _Pair(t, t + 1), "neither": _Pair(1, 2)}[case]
    _assert_same(thunder.jit(_pair)(p), _pair(p))


def test_match_class_positional_subpattern_refused_as_eager():
    x = torch.ones(3)
    assert thunder.jit(_positional)(x) == _positional(x)


def test_match_class_asks_the_isinstance_lookaside():
    """The interpreter's MATCH_CLASS asks the ``isinstance`` of its user (as the jit's answers for
    proxies), and reads keyword sub-patterns through ``getattr``'s."""

    class Stand:
        pass

    seen = []

    def my_isinstance(obj, cls):
        seen.append(cls)
        return cls is int or isinstance(obj, cls)

    def fn(v):
        match v:
            case int(real=r):
                return ("int", r)
            case _:
                return "other"

    interpreted = thunder_interp.interpret(fn, lookasides={isinstance: my_isinstance})
    s = Stand()
    s.real = 4
    assert interpreted(s) == ("int", 4)
    assert seen == [int]
    assert interpreted("a") == "other"  # a missing attribute: no match


# ---- broadcast error ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sa,sb",
    [((2, 3), (4,)), ((5, 2, 3), (4, 3)), ((2, 3), (2, 4)), ((4,), (2, 3)), ((3, 1, 2), (5, 3))],
)
def test_broadcast_error_names_eager_dimension(sa, sb):
    def f(a, b):
        try:
            return a + b
        except RuntimeError as e:
            return str(e)

    a, b = torch.zeros(sa), torch.zeros(sb)
    assert thunder.jit(f)(a, b) == f(a, b)
