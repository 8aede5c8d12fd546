"""One Python container or object reached by two paths (two arguments, an argument that is also a
global or a module attribute) that the program writes through one and reads through the other:
a call with another aliasing than the compiled one gets its own program. And a container's
builtin bound method passed as an argument (``got.append``) acts on the caller's container."""

import collections
import warnings
from typing import Any

import pytest
import torch

import thunder

ORDERS = [[False, True, False, True], [True, False, True, False]]
CACHES = ["constant values", "symbolic values"]


def _run(fn, make_args, order, cache):
    """Eager and thunder on fresh inputs, alternating aliasing; returns the per-call results."""
    jfn = thunder.jit(fn, cache=cache)
    for i, same in enumerate(order):
        x = torch.randn(3, requires_grad=True)
        xe = x.detach().clone().requires_grad_(True)
        eager = fn(*make_args(xe, same))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = jfn(*make_args(x, same))
        torch.testing.assert_close(got, eager, msg=lambda m: f"call {i} same={same}: {m}")
        got.sum().backward()
        eager.sum().backward()
        torch.testing.assert_close(x.grad, xe.grad)


def _write_a_read_b(a, b):
    a["k"] = a["x"] * 2
    return b["x"] + b.get("k", 0)


def _dicts(x, same):
    if same:
        d = {"x": x}
        return d, d
    return {"x": x}, {"x": x}


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("cache", CACHES)
def test_two_dict_arguments(order, cache):
    _run(_write_a_read_b, _dicts, order, cache)


def _nested(x, same):
    a, b = _dicts(x, same)
    return ([a, b],)


@pytest.mark.parametrize("order", ORDERS)
def test_one_dict_twice_in_a_list_argument(order):
    def f(pair):
        return _write_a_read_b(*pair)

    _run(f, _nested, order, "constant values")


@pytest.mark.parametrize("order", ORDERS)
def test_two_list_arguments(order):
    def f(x, a, b):
        a.append(1)
        return x * len(b)

    def args(x, same):
        if same:
            lst = []
            return x, lst, lst
        return x, [], []

    _run(f, args, order, "constant values")


@pytest.mark.parametrize("order", ORDERS)
def test_list_argument_inside_another(order):
    def f(x, a, nested):
        a.append(x)
        return x * len(nested[0])

    def args(x, same):
        lst = []
        return x, lst, [lst if same else []]

    _run(f, args, order, "constant values")


class Holder:
    def __init__(self, buf):
        self.buf = buf


@pytest.mark.parametrize("order", ORDERS)
def test_objects_sharing_an_attribute(order):
    def f(x, a, b):
        a.buf["k"] = x * 3
        return x + b.buf.get("k", 0)

    def args(x, same):
        buf = {}
        return x, Holder(buf), Holder(buf if same else {})

    _run(f, args, order, "constant values")


@pytest.mark.parametrize("order", ORDERS)
def test_one_object_twice(order):
    def f(x, a, b):
        a.v = x * 2
        return x + b.v

    def args(x, same):
        h = Holder(None)
        h.v = torch.zeros(3)
        if same:
            return x, h, h
        other = Holder(None)
        other.v = torch.zeros(3)
        return x, h, other

    _run(f, args, order, "constant values")


LOG: list = []
STATE: dict = {}


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("cache", CACHES)
def test_argument_that_is_a_global_list(order, cache):
    def f(x, log):
        LOG.append(1)
        return x * len(log)

    def args(x, same):
        LOG.clear()
        return x, LOG if same else []

    _run(f, args, order, cache)


@pytest.mark.parametrize("order", ORDERS)
def test_argument_that_is_a_global_dict(order):
    def f(x, state):
        STATE["h"] = x * 3
        return state.get("h", x) + 1

    def args(x, same):
        STATE.clear()
        return x, STATE if same else {}

    _run(f, args, order, "constant values")


class WithCache(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}
        self.log = []

    def forward(self, x, cache, log):
        self.cache["k"] = x * 3
        self.log.append(1)
        return x + cache.get("k", 0) + len(log)


@pytest.mark.parametrize("order", ORDERS)
def test_argument_that_is_a_module_attribute(order):
    m = WithCache()
    jm = thunder.jit(m)
    for i, same in enumerate(order):
        x = torch.randn(3)
        m.cache.clear()
        m.log.clear()
        eager = m(x, *((m.cache, m.log) if same else ({}, [])))
        m.cache.clear()
        m.log.clear()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = jm(x, *((m.cache, m.log) if same else ({}, [])))
        torch.testing.assert_close(got, eager, msg=lambda msg: f"call {i}: {msg}")


def test_distinct_arguments_stay_one_program():
    jf = thunder.jit(_write_a_read_b)
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(jf(*_dicts(x, False)), _write_a_read_b(*_dicts(x, False)))
    assert thunder.cache_misses(jf) == 1


# -- a container's builtin bound method as an argument ------------------------------------------


def _callback(x, cb):
    cb(x * 2)
    return x + 1


@pytest.mark.parametrize(
    "make, read",
    [
        (list, lambda c: c[0]),
        (collections.deque, lambda c: c[0]),
        (set, lambda c: next(iter(c))),
    ],
)
def test_builtin_append_argument_stores_tensors(make, read):
    jf = thunder.jit(_callback)
    for _ in range(3):
        got = make()
        x = torch.randn(3)
        method = got.add if isinstance(got, set) else got.append
        torch.testing.assert_close(jf(x, method), x + 1)
        assert len(got) == 1
        value = read(got)
        assert type(value) is torch.Tensor
        torch.testing.assert_close(value, x * 2)


def test_builtin_dict_methods_as_arguments():
    def f(x, setitem, update):
        setitem("a", x * 2)
        update({"b": x * 3})
        return x + 1

    jf = thunder.jit(f)
    for _ in range(3):
        d = {}
        x = torch.randn(3)
        torch.testing.assert_close(jf(x, d.__setitem__, d.update), x + 1)
        assert type(d["a"]) is torch.Tensor and type(d["b"]) is torch.Tensor
        torch.testing.assert_close(d["a"], x * 2)
        torch.testing.assert_close(d["b"], x * 3)


def test_list_insert_and_pop_as_arguments():
    def f(x, insert, pop):
        insert(0, x * 2)
        return pop() + x

    jf = thunder.jit(f)
    for _ in range(3):
        kept = torch.randn(3)
        lst = [kept]
        x = torch.randn(3)
        torch.testing.assert_close(jf(x, lst.insert, lst.pop), kept + x)
        assert len(lst) == 1 and type(lst[0]) is torch.Tensor
        torch.testing.assert_close(lst[0], x * 2)


def test_iterator_next_as_argument_takes_one_item_per_call():
    items = [torch.full((2,), float(i)) for i in range(4)]
    it = iter(items)
    jf = thunder.jit(lambda x, nx: nx() * x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(3):
            torch.testing.assert_close(jf(torch.ones(2), it.__next__), items[i])
    assert list(it) == [items[3]]


@pytest.mark.parametrize("order", ORDERS)
def test_split_call_with_one_dict_twice(order):
    # deque.append on an argument makes the call run split (torch.compile with thunder's
    # backend): the split program is chosen by which container arguments are one object too.
    def f(a, b, dq):
        dq.append(1)
        return _write_a_read_b(a, b)

    def args(x, same):
        return (*_dicts(x, same), collections.deque([0]))

    _run(f, args, order, "constant values")


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_empty_sequence_and_set_arguments(cache: str) -> None:
    # An empty deque or set argument made signature code that did not compile.
    def f(x: torch.Tensor, items: Any) -> torch.Tensor:
        return x + len(items) + sum(items)

    jf = thunder.jit(f, cache=cache)
    for items in [collections.deque(), collections.deque([1]), collections.deque(), set(), {4}]:
        x = torch.randn(3)
        torch.testing.assert_close(jf(x, items), f(x, items))
