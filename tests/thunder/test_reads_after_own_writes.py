"""A program that writes outside state and reads it back in the same call: the read must not
become a guard of the state the call starts with, and the write must happen on every call, as
in eager."""

import copy
import warnings

import pytest
import torch

import thunder

torch.set_num_threads(1)


def _compare(fn, make_state, calls=3, jit_fn=None):
    """Runs ``fn`` eagerly and jitted on their own copies of the state, several calls each,
    comparing the results and the state after each call."""
    eager_state, jit_state = make_state(), make_state()
    jf = jit_fn or thunder.jit(fn)
    for i in range(calls):
        x = torch.full((2,), float(i + 1))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            got = jf(x, *jit_state)
        expected = fn(x, *eager_state)
        torch.testing.assert_close(got, expected)
        assert _state(jit_state) == _state(eager_state), i
    return jf


def _state(state):
    return [vars(s) if hasattr(s, "__dict__") else copy.copy(s) for s in state]


def test_sort_after_reading_an_item():
    def f(x, lst):
        first = lst[0]
        lst.sort(reverse=True)
        return x * first + lst[0]

    _compare(f, lambda: ([1, 2, 3],))
    # a new list each call: the prologue checks the entry contents, not the sorted ones
    jf = thunder.jit(f)
    for lst in ([1, 2, 3], [5, 1, 4], [1, 2, 3]):
        le = list(lst)
        torch.testing.assert_close(jf(torch.ones(2), lst), f(torch.ones(2), le))
        assert lst == le


def test_sort_is_replayed():
    def f(x, lst):
        lst.sort()
        lst.append(0)
        return x + len(lst)

    _compare(f, lambda: ([3, 1, 2],))


class _Scaled:
    @property
    def scale(self):
        return self._scale if hasattr(self, "_scale") else 1.0

    @scale.setter
    def scale(self, v):
        self._scale = v
        self.sets = getattr(self, "sets", 0) + 1  # run once per store, as in eager


def test_property_setter_updated_in_the_function():
    def f(x, p):
        y = x * p.scale
        p.scale = p.scale * 2
        return y + p.scale

    _compare(f, lambda: (_Scaled(),))


def test_property_deleter_then_hasattr():
    class D:
        @property
        def v(self):
            return self._v

        @v.deleter
        def v(self):
            del self._v

    def f(x, d):
        del d.v
        return x + (1 if hasattr(d, "_v") else 2)

    def make():
        d = D()
        d._v = 3
        return (d,)

    eager_d, jit_d = make()[0], make()[0]
    torch.testing.assert_close(thunder.jit(f)(torch.ones(2), jit_d), f(torch.ones(2), eager_d))
    assert vars(jit_d) == vars(eager_d) == {}


def test_module_property_setter_in_forward():
    class M(torch.nn.Module, _Scaled):
        def __init__(self):
            super().__init__()
            self.lst = torch.nn.Linear(2, 2)

        def forward(self, x):
            y = self.lst(x) * self.scale
            self.scale = self.scale * 2
            return y

    torch.manual_seed(0)
    m = M()
    me = copy.deepcopy(m)
    jm = thunder.jit(m)
    for _ in range(3):
        x = torch.randn(2)
        torch.testing.assert_close(jm(x), me(x))
        assert (m._scale, m.sets) == (me._scale, me.sets)


def test_delete_then_hasattr():
    class Obj:
        pass

    def f(x, o):
        del o.k
        return x + (1 if hasattr(o, "k") else 2)

    def make():
        o = Obj()
        o.k = 1
        return (o,)

    eager_o, jit_o = make()[0], make()[0]
    torch.testing.assert_close(thunder.jit(f)(torch.ones(2), jit_o), f(torch.ones(2), eager_o))
    assert vars(jit_o) == vars(eager_o)


def test_dict_read_after_setting_an_attribute():
    class Obj:
        pass

    def f(x, o):
        o.k = 1
        o.__dict__.update({})  # as functools.update_wrapper does
        return x + 1

    _compare(f, lambda: (Obj(),))

    def g(x, o):
        o.n = 5
        return x + vars(o)["n"]

    _compare(g, lambda: (Obj(),))


CALLS = 0


def test_write_through_globals():
    def f(x):
        g = globals()
        g["CALLS"] = g["CALLS"] + 1
        return x + g["CALLS"]

    global CALLS
    jf = thunder.jit(f)
    CALLS = 0
    got = [jf(torch.ones(1)).item() for _ in range(3)]
    jit_calls = CALLS
    CALLS = 0
    expected = [f(torch.ones(1)).item() for _ in range(3)]
    assert (got, jit_calls) == (expected, CALLS)


def test_global_read_through_globals_get():
    def f(x):
        return x + globals().get("CALLS")

    global CALLS
    jf = thunder.jit(f)
    for n in (1, 2, 3):
        CALLS = n
        torch.testing.assert_close(jf(torch.ones(1)), f(torch.ones(1)))


@pytest.mark.parametrize(
    "update",
    [
        lambda lst: lst.__iadd__([1]),
        lambda lst: lst.__imul__(1) or lst.append(1),
    ],
)
def test_list_in_place_methods_after_reading_its_length(update):
    def f(x, lst):
        n = len(lst)
        update(lst)
        return x * n + len(lst)

    _compare(f, lambda: ([],))


def test_in_place_operators_on_outside_containers():
    def f(x, lst, d, s):
        lst += [len(lst)]
        d |= {len(d): 1}
        s |= {len(s)}
        return x + len(lst) + len(d) + len(s)

    _compare(f, lambda: ([], {}, set()), calls=4)
