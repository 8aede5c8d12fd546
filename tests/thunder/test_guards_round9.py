"""Values the prologue must tell apart (round 9): containers of numbers compared strictly (type,
sign of zero, NaN, dict order), value objects (slices, Decimal, Fraction), long containers,
numbers read as inputs inside nested containers, C callables, conversions through Python
specials, user modules named like libraries, and bound methods of values."""

from __future__ import annotations

import collections
import copy
import dataclasses
import decimal
import fractions
import math
import operator
import sys

import pytest
import torch
from torch import nn

import thunder

CACHES = ["constant values", "symbolic values"]


def _same(a, b):
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        torch.testing.assert_close(a, b, equal_nan=True, rtol=1e-6, atol=1e-6)
        return
    assert type(a) is type(b) and a == b


def _run(module, jitted, states, make_input=lambda: torch.randn(2, 6)):
    """Each state applied to the module, then eager and thunder compared on a fresh input."""
    for state in states:
        state(module)
        x = make_input()
        _same(module.forward(x) if isinstance(module, nn.Module) else module(x), jitted(x))


def _setter(**values):
    def apply(m):
        for k, v in values.items():
            setattr(m, k, v)

    return apply


# -- 1. containers of numbers: compared with their types, signs and order --------------------


class _Holds(nn.Module):
    def __init__(self, **kw):
        super().__init__()
        for k, v in kw.items():
            setattr(self, k, v)


@pytest.mark.parametrize("cache", CACHES)
def test_tuple_of_numbers_sign_of_zero_and_int_or_float(cache):
    class M(_Holds):
        def forward(self, x):
            return 1.0 / (x * min(self.offs)), torch.arange(*self.rng) + x.sum()

    m = M(offs=(0.0, 0.0), rng=(0, 4))
    jm = thunder.jit(m, cache=cache)
    states = [
        ((0.0, 0.0), (0, 4)),
        ((-0.0, 0.0), (0, 4.0)),
        ((0.0, 0.0), (0, 4)),
        ((-0.0, 0.0), (0, 4.0)),
    ]
    _run(m, jm, [_setter(offs=o, rng=r) for o, r in states])


@pytest.mark.parametrize("cache", CACHES)
def test_dict_values_int_or_float_and_order(cache):
    class M(_Holds):
        def forward(self, x):
            return x.long() * sum(self.w.values()), x * next(iter(self.w.values()))

    m = M(w={"a": 1, "b": 2})
    jm = thunder.jit(m, cache=cache)
    states = [{"a": 1, "b": 2}, {"a": 1.0, "b": 2}, {"b": 2, "a": 1}, {"a": 1, "b": 2}]
    _run(m, jm, [_setter(w=dict(s)) for s in states])


def test_dict_reordered_in_place():
    class M(_Holds):
        def forward(self, x):
            return x * next(iter(self.w.values()))

    m = M(w={"a": 2.0, "b": 3.0})
    jm = thunder.jit(m)

    def rotate(m):
        k = next(iter(m.w))
        m.w[k] = m.w.pop(k)

    _run(m, jm, [rotate] * 4)


@pytest.mark.parametrize("cache", CACHES)
def test_set_and_nested_containers_int_or_float(cache):
    class M(_Holds):
        def forward(self, x):
            return x.long() * next(iter(self.v)), x.long() * self.nested[1][0]

    m = M(v={2}, nested=((1,), [3]))
    jm = thunder.jit(m, cache=cache)
    states = [
        ({2}, ((1,), [3])),
        ({2.0}, ((1,), [3.0])),
        ({2}, ((1,), [3])),
        ({2.0}, ((1,), [3.0])),
    ]
    _run(m, jm, [_setter(v=set(a), nested=b) for a, b in states])


def test_nan_in_a_tuple_is_the_same_constant():
    class M(_Holds):
        def forward(self, x):
            return x + self.t[0] + self.t[1]

    m = M(t=(float("nan"), 1.0))
    jm = thunder.jit(m)
    for _ in range(3):
        m.t = (float("nan"), 1.0)  # a new nan each call: the same program
        x = torch.randn(3)
        _same(m.forward(x), jm(x))
    assert thunder.cache_misses(jm) == 1


@dataclasses.dataclass
class _Cfg:
    k: float = 2
    offs: float = 0.0


@pytest.mark.parametrize("cache", CACHES)
def test_deepcopy_of_config_int_or_float(cache):
    class M(_Holds):
        def forward(self, x):
            c = copy.deepcopy(self.cfg)
            return x.long() * c.k, 1.0 / (x * 0 + c.offs)

    m = M(cfg=_Cfg())
    jm = thunder.jit(m, cache=cache)

    def cfg(k, offs):
        def apply(m):
            m.cfg.k, m.cfg.offs = k, offs

        return apply

    _run(m, jm, [cfg(2, 0.0), cfg(2.0, 0.0), cfg(2, -0.0), cfg(2.0, -0.0)])


def test_deque_of_numbers_int_or_float():
    class M(_Holds):
        def forward(self, x):
            return x.long() * sum(self.q)

    m = M(q=collections.deque([1, 2]))
    jm = thunder.jit(m)
    _run(m, jm, [_setter(q=collections.deque(v)) for v in ([1, 2], [1.0, 2], [1, 2], [1.0, 2])])


def test_same_values_hit_the_cache():
    class M(_Holds):
        def forward(self, x):
            return x * sum(self.offs) * self.w["a"]

    m = M(offs=(1.0, 2.0), w={"a": 2.0, "b": 1})
    jm = thunder.jit(m)
    for _ in range(4):
        m.offs, m.w = (1.0, 2.0), {"a": 2.0, "b": 1}  # new, equal objects
        x = torch.randn(3)
        _same(m.forward(x), jm(x))
    assert thunder.cache_misses(jm) == 1


# -- 2. slices, Decimal, Fraction ------------------------------------------------------------


KEEP = slice(0, 2)


def _slice_reader(m):
    cell = slice(0, 2)

    def set_cell(v):
        nonlocal cell
        cell = v

    def f(x):
        return x[:, m.keep], x[:, KEEP], x[:, cell], x[:, m.pair[1]]

    return f, set_cell


def test_slices_in_attribute_global_cell_and_tuple():
    global KEEP
    m = _Holds(keep=slice(0, 2), pair=(0, slice(0, 2)))
    f, set_cell = _slice_reader(m)
    jf = thunder.jit(f)
    try:
        for sl in [slice(0, 2), slice(1, 3), slice(None, None, 2), slice(0, 2), slice(1, None)]:
            m.keep, KEEP, m.pair = sl, sl, (0, sl)
            set_cell(sl)
            x = torch.randn(2, 6)
            _same(f(x), jf(x))
    finally:
        KEEP = slice(0, 2)


def test_slice_attribute():
    class M(_Holds):
        def forward(self, x):
            return x[:, self.keep]

    m = M(keep=slice(0, 2))
    jm = thunder.jit(m)
    _run(
        m,
        jm,
        [_setter(keep=s) for s in (slice(0, 2), slice(1, 3), slice(None, None, 2), slice(0, 2))],
    )


def test_decimal_and_fraction_attributes():
    class M(_Holds):
        def forward(self, x):
            return x * float(self.d), x * str(self.d).count("0"), x * float(self.fr)

    m = M(d=decimal.Decimal("1.0"), fr=fractions.Fraction(1, 2))
    jm = thunder.jit(m)
    states = [("1.0", (1, 2)), ("2.5", (1, 3)), ("1.00", (1, 2)), ("-0", (3, 2))]
    _run(m, jm, [_setter(d=decimal.Decimal(d), fr=fractions.Fraction(*fr)) for d, fr in states])


# -- 3. numbers read as inputs inside nested containers ----------------------------------------


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("wrap", ["dict", "list", "tuple"])
def test_number_in_long_list_nested(cache, wrap):
    def make(values):
        return {"w": values} if wrap == "dict" else [values] if wrap == "list" else (values,)

    class M(_Holds):
        def forward(self, x):
            key = "w" if wrap == "dict" else 0
            return x * self.cfg[key][69]

    m = M(cfg=make([1.0] * 70))
    jm = thunder.jit(m, cache=cache)

    def change(i):
        def apply(m):
            key = "w" if wrap == "dict" else 0
            m.cfg[key][69] = float(i)

        return apply

    _run(m, jm, [change(i) for i in range(1, 7)])


# -- 4. long containers ----------------------------------------------------------------------


@pytest.mark.parametrize("n", [300, 1000])
def test_long_list_and_dict_are_guarded(n):
    class M(_Holds):
        def forward(self, x):
            return (
                x * torch.tensor(self.weights).sum(),
                x * len(self.seen),
                x * sum(self.table.values()),
            )

    m = M(weights=[1.0] * n, seen=[0] * n, table={i: 1 for i in range(n)})
    jm = thunder.jit(m)

    def change(i):
        def apply(m):
            if i:
                m.weights[3] = 10.0 * i
                m.seen.append(1)
                m.table[5] = i
            if i == 3:
                m.weights[4] = 1  # int for float: same sum, another dtype of nothing; still equal
                m.table[5] = 3.0

        return apply

    _run(m, jm, [change(i) for i in range(5)], make_input=lambda: torch.randn(1))


def test_long_list_of_modules_is_guarded():
    class M(_Holds):
        def forward(self, x):
            for f in self.fns:
                x = f(x)
            return x

    fns = [torch.nn.Identity() for _ in range(300)]
    m = M(fns=fns)
    jm = thunder.jit(m)

    def swap(i):
        def apply(m):
            if i:
                m.fns[7] = torch.nn.ReLU() if i % 2 else torch.nn.Tanh()

        return apply

    _run(m, jm, [swap(i) for i in range(4)], make_input=lambda: torch.randn(5))


def test_long_deque_is_guarded():
    class M(_Holds):
        def forward(self, x):
            return x * sum(self.q)

    m = M(q=collections.deque([1.0] * 300))
    jm = thunder.jit(m)

    def push(i):
        def apply(m):
            if i:
                m.q.append(float(i))

        return apply

    _run(m, jm, [push(i) for i in range(4)], make_input=lambda: torch.randn(2))


# -- 5. C callables kept as attributes -------------------------------------------------------


def test_itemgetter_and_method_descriptor_attributes():
    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(4, 4, batch_first=True)
            self.pick = operator.itemgetter(0)
            self.pool = torch.Tensor.mean
            self.act = torch.tanh
            self.cls = nn.ReLU

        def forward(self, x):
            return self.cls()(self.act(self.pool(self.pick(self.rnn(x)), 1)))

    m = Head()
    jm = thunder.jit(m)
    states = [
        (operator.itemgetter(0), torch.Tensor.mean, torch.tanh, nn.ReLU),
        (operator.itemgetter(1), torch.Tensor.mean, torch.tanh, nn.ReLU),
        (operator.itemgetter(0), torch.Tensor.sum, torch.tanh, nn.ReLU),
        (operator.itemgetter(0), torch.Tensor.sum, torch.sigmoid, nn.ReLU),
        (operator.itemgetter(0), torch.Tensor.sum, torch.sigmoid, nn.Tanh),
    ]
    _run(
        m,
        jm,
        [_setter(pick=p, pool=q, act=a, cls=c) for p, q, a, c in states],
        make_input=lambda: torch.randn(1, 3, 4),
    )


def test_attrgetter_and_methodcaller_attributes():
    class M(_Holds):
        def forward(self, x):
            return self.get(x), self.call(x)

    m = M(get=operator.attrgetter("T"), call=operator.methodcaller("sum", 0))
    jm = thunder.jit(m)
    states = [
        (operator.attrgetter("T"), operator.methodcaller("sum", 0)),
        (operator.attrgetter("mT"), operator.methodcaller("sum", 1)),
        (operator.attrgetter("T"), operator.methodcaller("mean", 0)),
    ]
    _run(m, jm, [_setter(get=g, call=c) for g, c in states], make_input=lambda: torch.randn(2, 3))


# -- 6. conversions through Python specials --------------------------------------------------


class _Temperature:
    def __init__(self, v):
        self.v = v

    def __float__(self):
        return float(self.v)


class _Steps:
    def __init__(self, n):
        self.n = n

    def __index__(self):
        return self.n


class _Rounded:
    def __init__(self, v):
        self.v = v

    def __float__(self):
        return self.v

    def __round__(self, nd=None):
        return round(self.v, nd)

    def __floor__(self):
        return math.floor(self.v)

    def __ceil__(self):
        return math.ceil(self.v)

    def __trunc__(self):
        return math.trunc(self.v)


@pytest.mark.parametrize("cache", CACHES)
def test_conversions_of_mutated_objects(cache):
    class M(_Holds):
        def forward(self, x):
            return (
                x / float(self.temp),
                x * math.sqrt(self.temp),
                x * float(self.frac),
                x * int(self.steps),
                x * len(range(self.steps)),
                x * complex(self.temp).real,
                x * round(self.r),
                x * round(self.r, 1),
                x * math.floor(self.r),
                x * math.ceil(self.r),
                x * math.trunc(self.r),
                x * math.floor(self.temp),
                x * math.factorial(self.steps),
            )

    m = M(temp=_Temperature(1.0), frac=fractions.Fraction(1, 2), steps=_Steps(2), r=_Rounded(1.26))
    jm = thunder.jit(m, cache=cache)

    def change(i):
        def apply(m):
            m.temp.v = float(2**i)
            m.frac = fractions.Fraction(i + 1, 2)
            m.steps.n = i + 2
            m.r.v = 1.26 + 0.7 * i

        return apply

    _run(m, jm, [change(i) for i in range(4)], make_input=lambda: torch.randn(2))


def test_conversion_special_returning_wrong_type_raises_like_eager():
    class Bad:
        def __float__(self):
            return 1

    def f(x, b):
        return x * float(b)

    jf = thunder.jit(f)
    with pytest.raises(TypeError):
        f(torch.ones(1), Bad())
    with pytest.raises(TypeError):
        jf(torch.ones(1), Bad())


# -- 7. user modules named like libraries ----------------------------------------------------


@pytest.mark.parametrize("name", ["torch_helpers", "mathutils", "thunderbolt_utils"])
def test_user_module_named_like_a_library(name, tmp_path, monkeypatch):
    (tmp_path / f"{name}.py").write_text(
        "import torch\nACT = torch.relu\ndef norm(x):\n    return x / 2\n"
        "def block(x):\n    return norm(ACT(x))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = __import__(name)
    try:

        def f(x):
            return mod.block(x)

        jf = thunder.jit(f)
        for i in range(3):
            if i == 1:
                mod.ACT = torch.tanh
            if i == 2:
                mod.norm = lambda x: x * 0 + 3
            x = torch.randn(4)
            _same(f(x), jf(x))
    finally:
        sys.modules.pop(name, None)


# -- 8. bound methods of values as attributes ------------------------------------------------


def test_bound_methods_of_values_as_attributes():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.log = []
            self.record = self.log.append
            self.shift = (0.5).__add__
            self.big = (10**30).__mod__
            self.text = "abc".upper
            self.size = torch.Size([2, 3]).numel

        def forward(self, x):
            y = x.sum() + self.shift(1.0) + self.big(7) + len(self.text()) + self.size()
            self.record(1)
            return y

    m = M()
    jm = thunder.jit(m)
    for i in range(3):
        x = torch.randn(2)
        _same(m.forward(x), jm(x))
    assert m.log == [1] * 6
    m.shift = (1.5).__add__
    x = torch.randn(2)
    _same(m.forward(x), jm(x))
