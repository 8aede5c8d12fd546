"""Arguments whose contents the cache must see: mappings and sequences that are not plain dicts
and lists (a BatchEncoding, a UserDict, a deque, an array), the order of ``**kwargs``, a bound
method's object, and iterators (which tracing would consume: the call runs eagerly). Each later
call equals eager's on the changed argument, never the first call's answer."""

from __future__ import annotations

import array
import collections
import warnings

import pytest
import torch

import thunder


def _embed(batch):
    ids = batch["input_ids"].float()
    if "attention_mask" in batch:
        ids = ids * batch["attention_mask"]
    return ids * len(batch)


def _dict_subclass(d):
    return type("Batch", (dict,), {})(d)


def _batch_encoding(d):
    from transformers import BatchEncoding

    return BatchEncoding(d)


@pytest.mark.parametrize(
    "make", [collections.UserDict, _dict_subclass, collections.OrderedDict, _batch_encoding]
)
def test_keys_added_to_a_mapping_argument_are_seen(make):
    jf = thunder.jit(_embed)
    ids = torch.tensor([[1, 2, 3]])
    small = make({"input_ids": ids})
    big = make({"input_ids": ids, "attention_mask": torch.tensor([[1, 1, 0]])})
    for batch in (small, big, small, big):
        torch.testing.assert_close(jf(batch), _embed(batch))


def _count(c, x):
    return x * len(c) + (x if 3.0 in c else 0)


@pytest.mark.parametrize(
    "make",
    [
        collections.deque,
        lambda v: array.array("d", v),
        lambda v: type("S", (set,), {})(v),
        collections.Counter,
        lambda v: dict.fromkeys(v).keys(),
    ],
    ids=["deque", "array", "set subclass", "Counter", "keys view"],
)
def test_items_of_a_collection_argument_are_seen(make):
    jf = thunder.jit(_count)
    x = torch.ones(2)
    for values in ([1.0, 2.0], [1.0, 2.0, 3.0], [1.0], [3.0]):
        c = make(values)
        torch.testing.assert_close(jf(c, x), _count(c, x))


def test_the_order_of_keyword_arguments_is_seen():
    def g(x, **kw):
        return x * torch.tensor(list(kw.values())).cumsum(0)[0], list(kw)

    jg = thunder.jit(g)
    x = torch.ones(2)
    for kw in ({"a": 1.0, "b": 5.0}, {"b": 5.0, "a": 1.0}, {"a": 1.0, "b": 5.0}):
        got, want = jg(x, **kw), g(x, **kw)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]


def test_what_a_bound_method_argument_reads_from_its_object_is_guarded():
    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, t):
            return t * self.k

    def run(fn, x):
        return fn(x)

    jrun = thunder.jit(run)
    s, x = Scaler(3.0), torch.ones(2)
    torch.testing.assert_close(jrun(s.apply, x), run(s.apply, x))
    s.k = 4.0
    torch.testing.assert_close(jrun(s.apply, x), run(s.apply, x))
    other = Scaler(5.0)
    torch.testing.assert_close(jrun(other.apply, x), run(other.apply, x))


def _total(x, it):
    return sum(x * v for v in it)


@pytest.mark.parametrize(
    "make",
    [
        lambda: (torch.tensor(float(v)) for v in (1, 2, 3)),
        lambda: iter([torch.tensor(1.0), torch.tensor(2.0)]),
        lambda: map(torch.tensor, [1.0, 2.0, 3.0]),
        lambda: torch.nn.Linear(2, 2).parameters(),
    ],
    ids=["generator", "list iterator", "map", "parameters"],
)
def test_an_iterator_argument_runs_eagerly_unconsumed(make):
    jf = thunder.jit(_total)
    x = torch.ones(2)
    for _ in range(2):
        torch.manual_seed(0)
        want = _total(x, make())
        torch.manual_seed(0)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = jf(x, make())
        torch.testing.assert_close(got, want)
        assert any("iterator" in str(w.message) for w in caught)
    assert thunder.compile_stats(jf).compilations == 0
