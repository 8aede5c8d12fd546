"""Python's comparisons of tensors inside containers (``list.count``, ``index``, ``remove``,
``in``, ``==`` between lists, dict lookups with tensor keys, ``sorted``/``min``/``max``) give
eager's result or raise eager's exception, whichever path a call takes: the traced program, a
call run split by torch.compile with thunder's backend (dynamo's own handlers of ``count``,
``in`` and ``min``/``max`` sum, or or, the comparison tensors: ``thunder/dynamo/
python_comparisons.py``), ``thunderfx``, or an eager rerun; on every call, with fresh values."""

from __future__ import annotations

import collections
import operator
import types
import warnings

import pytest
import torch
import torch._dynamo

import thunder
from thunder.dynamo import ThunderCompiler


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


@torch.compiler.disable
def _native(x):
    return x


# Expressions of ``x`` (a tensor) and ``lst`` (three tensors, ``x`` the second).
OPS = {
    "list.count(int)": "lst.count(0)",
    "list.count(tensor in it)": "lst.count(lst[1])",
    "tuple.count": "tuple(lst).count(0)",
    "deque.count": "collections.deque(lst).count(0)",
    "ints.count(tensor)": "[1, 0, 2].count(x)",
    "operator.countOf": "operator.countOf(lst, 0)",
    "list.index(int)": "lst.index(0)",
    "list.index(tensor in it)": "lst.index(lst[1])",
    "list.remove(int)": "lst.remove(0) or len(lst)",
    "list.remove(tensor in it)": "lst.remove(lst[1]) or len(lst)",
    "int in list": "0 in lst",
    "int not in list": "0 not in lst",
    "if int in list": "1 if 0 in lst else 2",
    "tensor in list": "lst[1] in lst",
    "tensor in its tuple": "x in (x, 0)",
    "tensor in ints": "x in [1, 0, 2]",
    "int in tuple": "0 in tuple(lst)",
    "int in deque": "0 in collections.deque(lst)",
    "list.__contains__": "lst.__contains__(0)",
    "operator.contains": "operator.contains(lst, 0)",
    "int in dict values": "0 in {i: t for i, t in enumerate(lst)}.values()",
    "list == copy": "lst == list(lst)",
    "list == other": "lst == [t + 0 for t in lst]",
    "list != other": "lst != [t + 0 for t in lst]",
    "list < other": "lst < [t + 1 for t in lst]",
    "dict[tensor key]": "{t: i for i, t in enumerate(lst)}[lst[1]]",
    "other tensor in dict": "(x + 0) in {t: i for i, t in enumerate(lst)}",
    "sorted": "sorted(lst)",
    "list.sort": "lst.sort() or len(lst)",
    "min(list)": "min(lst)",
    "max(list)": "max(lst)",
    "max(a, b)": "max(lst[0], lst[2])",
    "min(*list)": "min(*lst)",
    "max(tensor, int)": "max(x, 0)",
    "max(int, tensor)": "max(0, x)",
    "min(tensor, float)": "min(x, 1.0)",
    "min(generator)": "min(t for t in lst)",
}

PATHS = ("traced", "split", "thunderfx")


def _function(expression: str, split: bool) -> types.FunctionType:
    source = (
        "def f(x, lst):\n"
        f"    {'x = _native(x)' if split else 'pass'}\n"
        f"    r = {expression}\n"
        "    return x * 2, r\n"
    )
    namespace = {"_native": _native, "operator": operator, "collections": collections}
    exec(compile(source, f"<{expression}>", "exec"), namespace)
    return namespace["f"]


def _compiled(fn, path: str, cache: str | None):
    options = {} if cache is None else {"cache": cache}
    if path == "thunderfx":
        return torch.compile(fn, backend=ThunderCompiler(**options))
    return thunder.jit(fn, **options)


def _inputs(numel: int, call: int, seed: int):
    """Fresh values each call; with one element, every other call has a ``0`` in the list (and
    ``x == 0``), so the decisions on data change from call to call."""
    g = torch.Generator().manual_seed(seed * 100 + call)
    x = torch.randn(numel, generator=g)
    lst = [torch.randn(numel, generator=g), x, torch.randn(numel, generator=g)]
    if numel == 1 and call % 2:
        lst[0] = torch.zeros(1)
        x[0] = 0.0
    return x, lst


def _run(fn, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        try:
            return fn(*args)
        except Exception as e:
            return e


def _assert_same(got, want, where: str) -> None:
    if isinstance(want, Exception) or isinstance(got, Exception):
        assert type(got) is type(want), f"{where}: got {got!r}, eager {want!r}"
        return
    assert type(got) is type(want), f"{where}: got {got!r}, eager {want!r}"
    if isinstance(want, (list, tuple)):
        assert len(got) == len(want), f"{where}: got {got!r}, eager {want!r}"
        for g, w in zip(got, want):
            _assert_same(g, w, where)
    elif isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want, msg=lambda m: f"{where}: {m}")
    else:
        assert got == want, f"{where}: got {got!r}, eager {want!r}"


@pytest.mark.parametrize("numel", [1, 2], ids=["one_element", "two_elements"])
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("name", list(OPS))
def test_comparisons_of_tensors_in_containers_like_eager(name, path, numel):
    fn = _function(OPS[name], split=path == "split")
    compiled = _compiled(fn, path, None)
    for call in range(4):
        x, lst = _inputs(numel, call, seed=len(name))
        xe, lste = _inputs(numel, call, seed=len(name))
        want = _run(fn, xe, lste)
        got = _run(compiled, x, lst)
        where = f"{name} ({path}, call {call})"
        _assert_same(got, want, where)
        _assert_same(lst, lste, f"{where}, the list after the call")
    if path == "split":
        assert thunder.compile_stats(compiled).split_calls == 4


@pytest.mark.parametrize("path", ["split", "thunderfx"])
@pytest.mark.parametrize(
    "name", ["list.count(int)", "int in list", "max(list)", "max(tensor, int)", "int in tuple"]
)
def test_comparisons_with_symbolic_values(name, path):
    fn = _function(OPS[name], split=path == "split")
    compiled = _compiled(fn, path, "symbolic values")
    for call in range(4):
        numel = (1, 1, 2, 2)[call]
        x, lst = _inputs(numel, call, seed=7)
        xe, lste = _inputs(numel, call, seed=7)
        want = _run(fn, xe, lste)
        got = _run(compiled, x, lst)
        _assert_same(got, want, f"{name} ({path}, call {call})")


@pytest.mark.parametrize("path", PATHS)
def test_min_max_of_one_element_tensors_gradients_like_eager(path):
    """``max(a, b)`` is one of its arguments in eager (``a``'s gradient or ``b``'s, never a mix
    of both), the same object: a split call decides it natively."""

    def fn(a, b, c):
        if path == "split":
            a = _native(a)
        hi = max(a, b, c)
        lo = min([a, b, c])
        return hi * 3 + lo * 2, hi is a, lo is c

    compiled = _compiled(fn, path, None)
    for call in range(4):
        g = torch.Generator().manual_seed(call)
        values = [torch.randn(1, generator=g) for _ in range(3)]
        eager_args = [v.clone().requires_grad_() for v in values]
        args = [v.clone().requires_grad_() for v in values]
        want = fn(*eager_args)
        got = _run(compiled, *args)
        _assert_same(got, want, f"{path}, call {call}")
        want[0].sum().backward()
        got[0].sum().backward()
        for a, e in zip(args, eager_args):
            torch.testing.assert_close(a.grad, e.grad)


G_L: list = []


def _append_and_count(x, k):
    G_L.append(x)
    G_L[-1].add_(1)
    return x + G_L.count(k)


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_count_of_a_global_list_of_tensors_raises_on_every_call(cache):
    """The fuzz's case: a global list written and then counted; eager raises on every call (a
    tensor of two elements has no truth value). Thunder's first call reruns eagerly after its
    trace raised, the next ones run split (the list is written and read): each raises, and the
    list holds what eager's holds."""
    eager_list: list = []
    jit_list: list = []
    fn = _append_and_count
    jf = thunder.jit(fn, **({} if cache is None else {"cache": cache}))
    for call in range(4):
        x = torch.randn(2)
        for which, f, holder in (("eager", fn, eager_list), ("thunder", jf, jit_list)):
            G_L[:] = holder
            out = _run(f, x.clone(), 0)
            holder[:] = G_L
            assert isinstance(out, RuntimeError), f"{which}, call {call}: {out!r}"
        assert len(jit_list) == len(eager_list) == call + 1
        for a, e in zip(jit_list, eager_list):
            torch.testing.assert_close(a, e)
    G_L.clear()


class _Tracker(torch.nn.Module):
    """A module whose forward, split at a native call, counts the one-element tensors it kept
    (``list.count`` in a helper, under ``no_grad``) and takes a ``max`` of tensors in a loop."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.seen: list[torch.Tensor] = []

    def remember(self, h: torch.Tensor) -> int:
        self.seen.append(h.detach()[0, :1].round())
        return self.seen.count(0.0) + (1 if 1.0 in self.seen else 0)

    def forward(self, x: torch.Tensor):
        h = _native(self.lin(x))
        with torch.no_grad():
            k = self.remember(h)
        out = h
        for i in range(2):
            out = out + max(h[0, :1], h[1, :1]) * (k + i)
        return out, k


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_a_split_module_counting_its_tensors_like_eager(cache):
    eager = _Tracker()
    model = _Tracker()
    model.load_state_dict(eager.state_dict())
    jm = thunder.jit(model, **({} if cache is None else {"cache": cache}))
    for call in range(5):
        x = torch.randn(2, 3)
        if call % 2:  # a row whose first value rounds to 0 or 1: the count changes
            with torch.no_grad():
                x[0] = torch.linalg.solve(eager.lin.weight, call % 3 / 2 - eager.lin.bias)
        want = eager(x)
        got = _run(jm, x)
        _assert_same(got, want, f"call {call}")
        want[0].sum().backward()
        got[0].sum().backward()
        torch.testing.assert_close(model.lin.weight.grad, eager.lin.weight.grad)
        torch.testing.assert_close(model.lin.bias.grad, eager.lin.bias.grad)
    assert thunder.compile_stats(jm).split_calls == 5
