"""OrderedDict, defaultdict, deque and SimpleNamespace the program builds and returns or stores
outside (torchvision's segmentation models return an OrderedDict) are rebuilt on every call
from the program's values: equal to eager's, of eager's type, with gradients."""

import collections
import types
import warnings

import pytest
import torch

import thunder

CACHES = ["constant values", "symbolic values"]


class Segmenter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.aux = torch.nn.Conv2d(4, 2, 1)

    def forward(self, x):
        features = self.body(x)
        out = collections.OrderedDict()
        out["out"] = features.relu()
        out["aux"] = self.aux(features)
        return out


def namespace(x, w):
    return types.SimpleNamespace(logits=x @ w, loss=(x @ w).square().mean(), n=x.shape[0])


def grouped(x, w):
    groups = collections.defaultdict(list)
    for i, row in enumerate(x @ w):
        groups[i % 2].append(row.sum())
    return groups


def window(x, w):
    q = collections.deque(maxlen=2)
    for k in range(3):
        q.append(x @ w * k)
    return q, collections.OrderedDict(a=x, b=(q, w.sum()))


def _leaves(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, types.SimpleNamespace):
        value = vars(value)
    if isinstance(value, dict):
        return [t for k in value for t in _leaves(value[k])]
    if isinstance(value, (list, tuple, collections.deque)):
        return [t for v in value for t in _leaves(v)]
    return []


def _same_structure(got, expected):
    assert type(got) is type(expected)
    if isinstance(expected, types.SimpleNamespace):
        got, expected = vars(got), vars(expected)
    if isinstance(expected, dict):
        assert list(got) == list(expected)
        if isinstance(expected, collections.defaultdict):
            assert got.default_factory is expected.default_factory
        for k in expected:
            _same_structure(got[k], expected[k])
    elif isinstance(expected, (list, tuple, collections.deque)):
        assert len(got) == len(expected)
        if isinstance(expected, collections.deque):
            assert got.maxlen == expected.maxlen
        for g, e in zip(got, expected):
            _same_structure(g, e)
    elif isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected)
    else:
        assert got == expected


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("fn", [namespace, grouped, window])
def test_returned_containers_like_eager(fn, cache):
    jf = thunder.jit(fn, cache=cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # compiled: no split or eager run
        for rows in (4, 5, 4):
            x = torch.randn(rows, 3)
            w = torch.randn(3, 3, requires_grad=True)
            expected, got = fn(x, w), jf(x, w)
            assert got is not jf(x, w)  # a new object on every call, as eager's
            _same_structure(got, expected)
            (ge,) = torch.autograd.grad(sum(t.sum() for t in _leaves(expected)), w)
            (gg,) = torch.autograd.grad(sum(t.sum() for t in _leaves(got)), w)
            torch.testing.assert_close(gg, ge)


def test_segmentation_model_output_ordered_dict():
    torch.manual_seed(0)
    model = Segmenter()
    jm = thunder.jit(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            x = torch.randn(2, 3, 8, 8)
            expected, got = model(x), jm(x)
            _same_structure(got, expected)
            (sum(t.sum() for t in got.values())).backward()
            grads = [p.grad.clone() for p in model.parameters()]
            model.zero_grad()
            (sum(t.sum() for t in expected.values())).backward()
            for g, p in zip(grads, model.parameters()):
                # (a bias gradient sums 128 elements: the kernels' reduction order may differ)
                torch.testing.assert_close(g, p.grad, rtol=1e-5, atol=1e-4)
            model.zero_grad()
    assert thunder.compile_stats(jm).compilations == 1


STORE: dict = {}


def stores_ordered_dict(x):
    STORE["last"] = collections.OrderedDict(double=x * 2, ns=types.SimpleNamespace(y=x + 1))
    return x.sum()


def test_stored_outside_like_eager():
    jf = thunder.jit(stores_ordered_dict)
    for _ in range(3):
        x = torch.randn(3)
        jf(x)
        got = STORE.pop("last")
        stores_ordered_dict(x)
        _same_structure(got, STORE.pop("last"))


def test_defaultdict_with_a_factory_the_program_made_runs_like_eager():
    def f(x):
        d = collections.defaultdict(lambda: x.new_zeros(()))
        d["a"] += x.sum()
        return d

    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # not compiled: it runs split or eagerly, warned
        for _ in range(2):
            x = torch.randn(3)
            got, expected = jf(x), f(x)
            assert type(got) is collections.defaultdict
            torch.testing.assert_close(got["a"], expected["a"])
            torch.testing.assert_close(got["b"], expected["b"])  # the factory still works
