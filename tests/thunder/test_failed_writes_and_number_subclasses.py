"""Writes to outside state that raise natively inside the program's ``try`` (eager writes
nothing and goes on), numbers of subclasses of int/float (an IntEnum member), symbolic numbers
returned by a user's ``__bool__``/``__index__``/``__hash__``, and a dict of tuples keyed by a
symbolic size: thunder matches eager over several calls, with no eager fallback."""

from __future__ import annotations

import copy
import enum
import warnings
from collections import OrderedDict, namedtuple
from typing import Any

import pytest
import torch

import thunder

CACHES = ("constant values", "symbolic values")


def _run_like_eager(make_state, fn, calls=4, cache="constant values", between=None):
    """``fn(state, x)`` eagerly and jitted (each on its own copy of ``make_state()``), several
    calls: the same results and the same state after each call, no warning."""
    eager_state, jit_state = make_state(), make_state()
    jfn = thunder.jit(lambda x: fn(jit_state, x), cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(calls):
            if between is not None:
                between(eager_state, i)
                between(jit_state, i)
            x = torch.randn(3)
            expected = fn(eager_state, x)
            got = jfn(x)
            torch.testing.assert_close(got, expected)
            assert _state_view(jit_state) == _state_view(eager_state), i


def _state_view(state: Any) -> Any:
    if isinstance(state, dict):
        return {k: _state_view(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return [_state_view(v) for v in state]
    if isinstance(state, (set, frozenset)):
        return sorted(state, key=repr)
    if isinstance(state, torch.Tensor):
        return state.tolist()
    if isinstance(state, (int, float, str)):
        return state
    slots = getattr(type(state), "__slots__", ())
    found = {k: _state_view(getattr(state, k)) for k in slots if hasattr(state, k)}
    return type(state).__name__, found, _state_view(getattr(state, "__dict__", {}))


# -- failed container mutations ------------------------------------------------------------------


def _del_missing(s, x):
    try:
        del s["d"]["missing"]
        y = x + 1
    except KeyError:
        y = x - 1
    return y


def _remove_missing(s, x):
    try:
        s["log"].remove(99)
        return x * 2
    except ValueError:
        return x * 3


def _pop_missing(s, x):
    try:
        s["d"].pop("missing")
        return x * 2
    except KeyError:
        return x * 3


def _set_remove_missing(s, x):
    try:
        s["set"].remove(99)
        return x * 2
    except KeyError:
        return x * 3


def _unhashable_key(s, x):
    try:
        s["d"][[1]] = 2
        return x * 2
    except TypeError:
        return x * 3


def _move_to_end_missing(s, x):
    try:
        s["od"].move_to_end("missing")
        return x * 2
    except KeyError:
        return x * 3


def _index_out_of_range(s, x):
    try:
        s["log"][10] = 1
        return x * 2
    except IndexError:
        return x * 3


def _pop_empty(s, x):
    try:
        s["empty"].pop()
        return x * 2
    except IndexError:
        return x * 3


def _failed_then_good_write(s, x):
    try:
        del s["d"]["missing"]
    except KeyError:
        s["d"]["b"] = 5
    s["log"].append(len(s["d"]))
    return x * len(s["log"])


def _state():
    return {
        "d": {"a": 1},
        "log": [1, 2],
        "set": {1, 2},
        "od": OrderedDict(a=1, b=2),
        "empty": [],
    }


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn",
    [
        _del_missing,
        _remove_missing,
        _pop_missing,
        _set_remove_missing,
        _unhashable_key,
        _move_to_end_missing,
        _index_out_of_range,
        _pop_empty,
        _failed_then_good_write,
    ],
)
def test_failed_container_mutation_is_not_replayed(fn, cache):
    _run_like_eager(_state, fn, cache=cache)


def _add_missing_every_other_call(s, i):
    # the failure depends on the contents: a later call finds the item and succeeds
    if i % 2:
        s["d"]["missing"] = 0
        s["log"].append(99)
        s["set"].add(99)
        s["od"]["missing"] = 0


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn",
    [_del_missing, _remove_missing, _pop_missing, _set_remove_missing, _move_to_end_missing],
)
def test_failed_mutation_guards_the_contents(fn, cache):
    _run_like_eager(_state, fn, calls=5, cache=cache, between=_add_missing_every_other_call)


def _sort_mixed(s, x):
    try:
        s["mixed"].sort()
        return x * 2
    except TypeError:
        return x * 3


def _update_part_way(s, x):
    try:
        s["d"].update([("b", 2), 5])
        return x * 2
    except TypeError:
        return x * 3


@pytest.mark.parametrize("fn", [_sort_mixed, _update_part_way])
def test_mutation_failing_part_way_leaves_state_as_eager(fn):
    def make():
        return {"mixed": [2, 1, 4, 3, "a"], "d": {"a": 1}}

    eager_state, jit_state = make(), make()
    jfn = thunder.jit(lambda x: fn(jit_state, x))
    for _ in range(3):
        x = torch.randn(3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (it may run eagerly, saying so)
            got = jfn(x)
        torch.testing.assert_close(got, fn(eager_state, x))
        assert _state_view(jit_state) == _state_view(eager_state)


# -- failed attribute stores ---------------------------------------------------------------------


class _Slots:
    __slots__ = ("a",)

    def __init__(self):
        self.a = 1


class _ReadOnly:
    def __init__(self):
        self._v = 2.0

    @property
    def v(self):
        return self._v


_Pair = namedtuple("_Pair", "a b")


def _set_attrs(s, x):
    hits = 0
    for obj, name in ((s["slots"], "c"), (s["plain"], "c"), (s["pair"], "a"), (s["ro"], "v")):
        try:
            setattr(obj, name, 5)
        except AttributeError:
            hits += 1
    try:
        s["slots"].c = 1
    except AttributeError:
        hits += 10
    try:
        del s["ro"].v
    except AttributeError:
        hits += 100
    return x * hits + s["ro"].v + s["slots"].a


def _attr_state():
    return {"slots": _Slots(), "plain": object(), "pair": _Pair(1, 2), "ro": _ReadOnly()}


@pytest.mark.parametrize("cache", CACHES)
def test_failed_attribute_store_is_not_replayed(cache):
    def between(s, i):
        s["ro"]._v = float(i)  # what the property reads changes: the read is guarded
        s["slots"].a = i

    _run_like_eager(_attr_state, _set_attrs, calls=4, cache=cache, between=between)


class _WithParam(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        try:
            self.w = x * 2  # a plain tensor for a parameter: TypeError in eager
            y = x
        except TypeError:
            y = x * self.w
        return y.sum()


def test_plain_tensor_to_parameter_raises_and_goes_on():
    torch.manual_seed(0)
    m = _WithParam()
    jm = thunder.jit(copy.deepcopy(m))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            x = torch.randn(3)
            expected = m(x)
            got = jm(x)
            torch.testing.assert_close(got, expected)
            (g,) = torch.autograd.grad(got, jm.w)
            (ge,) = torch.autograd.grad(expected, m.w)
            torch.testing.assert_close(g, ge)
            assert isinstance(jm.w, torch.nn.Parameter)
            with torch.no_grad():  # the parameter changes between calls, in both
                m.w.add_(1.0)
                jm.w.add_(1.0)


# -- number subclasses ---------------------------------------------------------------------------


class _Lvl(enum.IntEnum):
    LOW = 1
    HIGH = 2


class _MyInt(int):
    def extra(self):
        return 10


class _MyFloat(float):
    pass


def _with_number_subclasses(x):
    return (
        x * _Lvl.HIGH
        + x**_Lvl.HIGH
        - x * _MyInt(3)
        + _MyFloat(1.5) * x
        + (x > _Lvl.LOW)
        + torch.full((3,), _MyInt(2))
        + torch.tensor(_MyFloat(2.5)) * x[_Lvl.LOW]
        + torch.arange(_MyInt(3)) * x.reshape(_MyInt(3)).sum(_Lvl.LOW - 1)
    )


def _number_argument(x, n):
    if isinstance(n, enum.Enum):
        return x * n.value + 100
    if type(n) is _MyInt:
        return x * n.extra()
    return x * n


@pytest.mark.parametrize("cache", CACHES)
def test_number_subclasses_are_their_base_numbers(cache):
    jf = thunder.jit(_with_number_subclasses, cache=cache)
    jg = thunder.jit(_number_argument, cache=cache, recompile_limit=64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(3):
            x = torch.randn(3, requires_grad=True)
            expected = _with_number_subclasses(x)
            got = jf(x)
            torch.testing.assert_close(got, expected)
            assert got.dtype == expected.dtype
            (g,) = torch.autograd.grad(got.sum(), x)
            (ge,) = torch.autograd.grad(expected.sum(), x)
            torch.testing.assert_close(g, ge)
            for n in (_Lvl.HIGH, 2, _MyInt(2), _Lvl.LOW, 1, _MyFloat(i + 0.5), _MyInt(i)):
                y = torch.randn(3)
                expected = _number_argument(y, n)
                got = jg(y, n)
                torch.testing.assert_close(got, expected)
                assert got.dtype == expected.dtype


# -- symbolic numbers from a user's specials ----------------------------------------------------


class _Stepper:
    def __init__(self):
        self.n = 0

    def __bool__(self):
        return self.n % 2 == 0

    def __index__(self):
        return self.n % 3

    def __hash__(self):
        return self.n % 5


def _specials(s, x):
    s.n += 1
    y = x * 2 if s else x * 3
    y = y + [1.0, 2.0, 3.0][s]
    return y + hash(s)


@pytest.mark.parametrize("cache", CACHES)
def test_specials_returning_symbolic_numbers(cache):
    eager_s, jit_s = _Stepper(), _Stepper()
    jfn = thunder.jit(lambda x: _specials(jit_s, x), cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(7):
            x = torch.randn(3)
            torch.testing.assert_close(jfn(x), _specials(eager_s, x))
            assert jit_s.n == eager_s.n


# -- a dict of tuples keyed by a symbolic size ---------------------------------------------------


class _Rotary(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self._cache = {}

    def forward(self, x):
        n = x.shape[1]
        if n not in self._cache:
            t = torch.arange(n, dtype=torch.float32)
            self._cache[n] = (t.cos(), t.sin())
        c, s = self._cache[n]
        return x * c + s


@pytest.mark.parametrize("cache", CACHES)
def test_dict_of_tuples_keyed_by_sequence_length(cache):
    m, jm = _Rotary(), thunder.jit(_Rotary(), cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for n in (4, 4, 6, 4, 6, 5, 4):
            x = torch.randn(2, n, requires_grad=True)
            expected = m(x)
            got = jm(x)
            torch.testing.assert_close(got, expected)
            (g,) = torch.autograd.grad(got.sum(), x)
            (ge,) = torch.autograd.grad(expected.sum(), x)
            torch.testing.assert_close(g, ge)
            assert sorted(jm._cache) == sorted(m._cache)


class _Validated:
    def __init__(self):
        self._x = 1.0
        self.log = []

    @property
    def x(self):
        return self._x

    @x.setter
    def x(self, v):
        self.log.append(v)  # written before it raises: eager keeps it
        if v < 0:
            raise ValueError("negative")
        self._x = v


def _set_validated(p, x, v):
    try:
        p.x = v
    except ValueError:
        return x * 0 + p.x + len(p.log)
    return x * p.x + len(p.log)


@pytest.mark.parametrize("cache", CACHES)
def test_setter_that_writes_then_raises(cache):
    eager_p, jit_p = _Validated(), _Validated()
    jfn = thunder.jit(lambda x, v: _set_validated(jit_p, x, v), cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for v in (2.0, -1.0, 3.0, -2.0, -3.0, 4.0):
            x = torch.randn(2)
            torch.testing.assert_close(jfn(x, v), _set_validated(eager_p, x, v))
            assert (jit_p.log, jit_p._x) == (eager_p.log, eager_p._x)


_MODE = _Lvl.HIGH
_K = _MyInt(2)


def _reads_number_globals(x):
    y = x * _MODE + x[_MODE - 1] + x.sum(_Lvl.LOW - 1) * _K
    if _MODE == _Lvl.HIGH:
        y = y + 1
    if isinstance(_K, _MyInt):
        y = y * 2
    return y


@pytest.mark.parametrize("cache", CACHES)
def test_number_subclass_globals_are_guarded(cache):
    global _MODE, _K
    jf = thunder.jit(_reads_number_globals, cache=cache)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for mode, k in [(_Lvl.HIGH, _MyInt(2)), (_Lvl.LOW, 2), (2, _MyInt(3)), (_Lvl.HIGH, 3)]:
                _MODE, _K = mode, k
                x = torch.randn(3, 3)
                torch.testing.assert_close(jf(x), _reads_number_globals(x))
    finally:
        _MODE, _K = _Lvl.HIGH, _MyInt(2)


def test_interpreter_reports_failed_writes():
    from thunder_interp import Callbacks, interpret

    failed: list[Any] = []
    callbacks = Callbacks(
        store_item=lambda c, k, v: ("item", k),
        delete_item=lambda c, k: ("del item", k),
        store_attribute=lambda o, n, v: ("attr", n),
        delete_attribute=lambda o, n: ("del attr", n),
        write_failed=failed.append,
    )

    def program(d, lst, obj):
        for write in (
            lambda: d.__delitem__("missing"),
            lambda: lst.__setitem__(5, 0),
            lambda: setattr(obj, "c", 1),
            lambda: object.__setattr__(obj, "c", 1),
            lambda: delattr(obj, "a"),
        ):
            try:
                write()
            except (KeyError, IndexError, AttributeError):
                pass
        try:
            del d["missing"]
        except KeyError:
            pass
        try:
            d[[1]] = 1
        except TypeError:
            pass
        try:
            obj.c = 1
        except AttributeError:
            pass
        try:
            del obj.c
        except AttributeError:
            pass
        try:
            lst[0:1] = 5
        except TypeError:
            pass
        d["ok"] = 1  # succeeds: not reported
        obj.a = 2
        return len(d)

    obj = _Slots()
    assert interpret(program, callbacks=callbacks)({}, [1], obj) == 1
    assert failed == [
        ("attr", "c"),
        ("attr", "c"),
        ("del item", "missing"),
        ("item", [1]),
        ("attr", "c"),
        ("del attr", "c"),
        ("item", slice(0, 1)),
    ]
    assert obj.a == 2
