"""Which tensor an object is (``is``, ``id()``, ``hash()``, dict keys, set members) and Python
code that answers an attribute read, under thunder.jit as in eager, over several calls."""

import sys
import types
import warnings

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]


def _compare(make, inputs, cache):
    """Runs eager's and thunder's copies of a program on the same inputs, call by call."""
    eager_fn, eager_state = make()
    jit_fn, jit_state = make()
    jf = thunder.jit(jit_fn, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x in inputs:
            torch.testing.assert_close(jf(x), eager_fn(x), rtol=0, atol=0)
    return eager_state, jit_state


class _State:
    last = None
    other = None


@pytest.mark.parametrize("cache", CACHES)
def test_argument_is_tensor_held_from_last_call(cache):
    def make():
        s = _State()

        def f(x):
            same = s.last is x
            s.last = x
            return x * (2 if same else 3)

        return f, s

    x1, x2, x3 = torch.randn(3), torch.randn(3), torch.randn(3)
    _compare(make, [x1, x1, x2, x2, x1, x3, x3, x2], cache)


@pytest.mark.parametrize("cache", CACHES)
def test_two_outside_tensors_compared_by_identity(cache):
    a, b = torch.randn(3), torch.randn(3)

    def make():
        s = _State()

        def f(x):
            return x * (2 if s.last is s.other else 3) + s.last

        return f, s

    eager_fn, es = make()
    jit_fn, js = make()
    jf = thunder.jit(jit_fn, cache=cache)
    for first, second in [(a, b), (a, a), (b, a), (b, b), (a, b)]:
        es.last, es.other = first, second
        js.last, js.other = first, second
        x = torch.randn(3)
        torch.testing.assert_close(jf(x), eager_fn(x), rtol=0, atol=0)


def _memo_by(key_of):
    def make():
        memo = {}

        def f(x):
            k = key_of(x)
            if k in memo:
                return x + memo[k]
            memo[k] = 100.0
            return x * 2

        return f, memo

    return make


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("key_of", [id, hash, lambda t: t], ids=["id", "hash", "tensor"])
def test_tensor_argument_identity_as_memo_key(cache, key_of):
    x1, x2 = torch.randn(3), torch.randn(3)
    eager_memo, jit_memo = _compare(_memo_by(key_of), [x1, x1, x2, x2, x1], cache)
    assert len(eager_memo) == len(jit_memo) == 2


@pytest.mark.parametrize("cache", CACHES)
def test_tensor_argument_in_outside_set(cache):
    def make():
        seen = set()

        def f(x):
            if x in seen:
                return x + 1
            seen.add(x)
            return x * 2

        return f, seen

    x1, x2 = torch.randn(3), torch.randn(3)
    eager_seen, jit_seen = _compare(make, [x1, x1, x2, x2], cache)
    assert len(eager_seen) == len(jit_seen) == 2


@pytest.mark.parametrize("cache", CACHES)
def test_parameter_identity_as_state_key(cache):
    lin = torch.nn.Linear(3, 3)
    state = {lin.weight: torch.full((3, 3), 0.5)}

    def make():
        memo = {}

        def f(x):
            k = id(lin.weight)
            bump = 1.0 if k in memo else 0.0
            memo[k] = True
            w = state[lin.weight] if lin.weight in state else torch.ones(3, 3)
            return x @ w + bump

        return f, memo

    _compare(make, [torch.randn(2, 3) for _ in range(4)], cache)


def test_parameters_in_a_local_set_still_compile():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            n = sum(p.numel() for p in self.parameters())  # (a local ``memo`` set of params)
            index = {p: i for i, p in enumerate(self.parameters())}
            return self.lin(x) * n + index[self.lin.bias]

    m = M()
    jm = thunder.jit(m)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no call runs eagerly
        for _ in range(3):
            x = torch.randn(2, 3, requires_grad=True)
            x2 = x.detach().clone().requires_grad_()
            out, expected = jm(x), m(x2)
            torch.testing.assert_close(out, expected)
            out.sum().backward()
            expected.sum().backward()
            torch.testing.assert_close(x.grad, x2.grad)
    assert thunder.cache_hits(jm) == 2


LOG: list = []
SCALE = [2.0]


class _Missing:
    def __getattr__(self, name):
        LOG.append(name)
        raise AttributeError(name)


class _Descriptor:
    def __get__(self, obj, owner=None):
        LOG.append("get")
        return SCALE[0]


class _HoldsDescriptor:
    d = _Descriptor()


class _Meta(type):
    def __getattr__(cls, name):
        LOG.append(name)
        return SCALE[0] + 1


class _WithMeta(metaclass=_Meta):
    pass


class _MetaWithProperty(type):
    @property
    def scale(cls):
        LOG.append("meta property")
        return SCALE[0] * 3


class _WithMetaProperty(metaclass=_MetaWithProperty):
    pass


_MISSING = _Missing()

# A module with a ``__getattr__`` (PEP 562) that logs, answering from a global of its own.
_LAZY = types.ModuleType("_thunder_test_lazy_module")
exec(
    "LOG = []\n"
    "SCALE = 3.0\n"
    "def __getattr__(name):\n"
    "    LOG.append(name)\n"
    "    if name == 'scale':\n"
    "        return SCALE\n"
    "    raise AttributeError(name)\n",
    _LAZY.__dict__,
)
_LAZY.__file__ = __file__  # (inspect.getmodule asks every module without one)
sys.modules[_LAZY.__name__] = _LAZY

ATTRIBUTE_CODE = {
    "getattr_default_miss": lambda x: x * getattr(_MISSING, "zz", 1.5),
    "hasattr_miss": lambda x: x * (2 if hasattr(_MISSING, "yy") else 3),
    "class_nondata_descriptor": lambda x: x * _HoldsDescriptor.d,
    "metaclass_getattr": lambda x: x * _WithMeta.anything,
    "metaclass_property": lambda x: x * _WithMetaProperty.scale,
    "module_getattr": lambda x: x * _LAZY.scale,
    "module_getattr_miss": lambda x: x * getattr(_LAZY, "zz", 1.5),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("case", sorted(ATTRIBUTE_CODE))
def test_attribute_code_runs_as_often_as_eager(case, cache):
    fn = ATTRIBUTE_CODE[case]
    jf = thunder.jit(fn, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(4):
            SCALE[0] = 2.0 if i < 2 else 4.0  # what the code reads changes: guarded
            _LAZY.SCALE = 3.0 if i < 2 else 5.0
            x = torch.randn(3)
            LOG.clear()
            _LAZY.LOG.clear()
            expected = fn(x)
            eager_log = [*LOG, *_LAZY.LOG]
            LOG.clear()
            _LAZY.LOG.clear()
            torch.testing.assert_close(jf(x), expected)
            assert [*LOG, *_LAZY.LOG] == eager_log, f"call {i}"
