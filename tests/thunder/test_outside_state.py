"""Globals, closures, nonlocals and module attributes: guarded or replayed, never stale (seeds
001 and 002)."""

from __future__ import annotations

import array
import collections
import collections.abc
import functools
import os
import sys
import threading
import warnings
from typing import Any

import pytest
import torch
from runs_by_torch import call_split

import thunder

SCALE = 2.0
CONFIG = {"shift": 1.0}
counter = 0


def scaled(x):
    return x * SCALE


def test_global_changed_between_calls_gives_the_new_result():
    global SCALE
    j = thunder.jit(scaled)
    x = torch.ones(2)
    try:
        torch.testing.assert_close(j(x), x * 2.0)
        SCALE = 5.0
        torch.testing.assert_close(j(x), x * 5.0)
        SCALE = 2.0
        torch.testing.assert_close(j(x), x * 2.0)
    finally:
        SCALE = 2.0
    assert thunder.cache_hits(j) == 1  # the third call reuses the first program
    assert "SCALE" in thunder.compile_stats(j).last_recompile_reason


def test_global_dict_contents_are_guarded():
    j = thunder.jit(lambda x: x + CONFIG["shift"])
    x = torch.zeros(2)
    try:
        torch.testing.assert_close(j(x), x + 1.0)
        CONFIG["shift"] = 3.0
        torch.testing.assert_close(j(x), x + 3.0)
    finally:
        CONFIG["shift"] = 1.0


def test_closure_cell_changed_between_calls():
    factor = 2

    def f(x):
        return x * factor

    j = thunder.jit(f)
    x = torch.ones(3)
    torch.testing.assert_close(j(x), x * 2)
    factor = 4  # noqa: F841  (read through the closure cell)
    torch.testing.assert_close(j(x), x * 4)


def test_nonlocal_list_is_appended_on_every_call():
    def outer():
        lst = []

        def inner(x):
            lst.append("#")
            return x + 1

        return inner, lst

    inner, lst = outer()
    j = thunder.jit(inner)
    x = torch.zeros(1)
    for _ in range(3):
        j(x)
    assert lst == ["#", "#", "#"]
    # Only appended to: its type is guarded, not its growing contents, so one program serves
    # every call (a truth test or len() of it is a load of its own, which guards its contents:
    # tests/thunder/test_outside_state_round5.py).
    assert thunder.compile_stats(j).compilations == 1


def test_nonlocal_list_receives_computed_tensors():
    seen = []

    def f(x):
        y = x * 2
        seen.append(y)
        return y + 1

    j = thunder.jit(f)
    a, b = torch.ones(2), torch.full((2,), 3.0)
    j(a)
    j(b)
    assert len(seen) == 2
    torch.testing.assert_close(seen[1], b * 2)


def test_nonlocal_assignment_happens_on_every_call():
    def make():
        total = 0

        def step(x):
            nonlocal total
            total = 10
            return x + 1

        def get():
            return total

        return step, get

    step, get = make()
    j = thunder.jit(step)
    j(torch.zeros(1))
    assert get() == 10


def test_global_write_is_replayed():
    def bump(x):
        global counter
        counter = 7
        return x

    global counter
    counter = 0
    j = thunder.jit(bump)
    j(torch.zeros(1))
    assert counter == 7
    counter = 0
    j(torch.zeros(1))
    assert counter == 7 and thunder.cache_hits(j) == 1


def test_tracing_leaves_no_trace_of_proxies_in_outside_state():
    store = {}

    def f(x):
        store["last"] = 1
        return x

    thunder.jit(f)(torch.zeros(1))
    assert store == {"last": 1}


def test_symbolic_values_recheck_the_branch():
    def foo(flag):
        if flag > 5:
            return torch.ones(1)
        return torch.zeros(1)

    j = thunder.jit(foo, cache=thunder.CACHE_OPTIONS.SYMBOLIC_VALUES)
    assert j(6).item() == 1.0
    assert j(0).item() == 0.0  # seed 001: the cached program for flag=6 must not be reused
    assert j(7).item() == 1.0
    assert j(-3).item() == 0.0
    assert (thunder.cache_misses(j), thunder.cache_hits(j)) == (2, 2)
    assert "flag <= 5" in thunder.last_prologue_traces(j)[-1].python()


def test_module_attribute_flag_is_guarded():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.use_relu = False

        def forward(self, x):
            return torch.relu(x) if self.use_relu else x * 2

    m = M()
    j = thunder.jit(m)
    x = torch.tensor([-1.0, 2.0])
    torch.testing.assert_close(j(x), x * 2)
    m.use_relu = True
    torch.testing.assert_close(j(x), torch.relu(x))


def test_training_flag_is_guarded():
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    j = thunder.jit(m)
    x = torch.randn(8, 4)
    m.eval()
    torch.testing.assert_close(j(x), m(x))
    m.train()
    torch.manual_seed(0)
    out = j(x)
    assert (out == 0).any()  # dropout is active again
    j.eval()
    torch.testing.assert_close(j(x), m(x))


def test_module_attribute_write_happens_every_call():
    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
            self.last_batch = 0

        def forward(self, x):
            self.last_batch = x.shape[0]
            return self.lin(x)

    m = Counting()
    j = thunder.jit(m)
    j(torch.randn(3, 2))
    assert m.last_batch == 3
    m.last_batch = 0
    j(torch.randn(3, 2))
    assert m.last_batch == 3 and thunder.cache_hits(j) == 1


def test_sharp_edges_error_refuses_globals():
    with pytest.raises(thunder.SharpEdgeError, match="SCALE"):
        thunder.jit(scaled, sharp_edges="error")(torch.ones(1))


def test_calling_a_jitted_function_from_a_jitted_function_is_traced_reentrantly():
    k = 3.0

    @thunder.jit
    def inner(x):
        return x * k

    def outer(x):
        return inner(x) + 1

    j = thunder.jit(outer)
    x = torch.ones(2)
    torch.testing.assert_close(j(x), x * 3 + 1)
    k = 5.0  # noqa: F841  (read through inner's closure)
    torch.testing.assert_close(j(x), x * 5 + 1)
    assert "torch.mul" in thunder.last_traces(j)[-1].python()


def test_calling_a_jitted_module_from_a_jitted_function():
    lin = torch.nn.Linear(2, 2)
    jl = thunder.jit(lin)
    j = thunder.jit(lambda x: jl(x) * 2)
    x = torch.ones(2)
    torch.testing.assert_close(j(x), lin(x) * 2)
    with torch.no_grad():
        lin.weight.mul_(2)
    torch.testing.assert_close(j(x), lin(x) * 2)
    assert thunder.cache_hits(j) == 1


@pytest.mark.parametrize(
    "program",
    ["len_after_append", "item_after_insert", "dict_counter", "slice_after_append"],
)
def test_reading_a_container_the_function_mutates_matches_eager(program):
    """Contents read after a mutation depend on what the call found: they must be guarded, so
    every call gives eager's result (recompiling, and past the limit running eagerly)."""

    def make():
        state = {"log": [], "items": [1], "counter": {"n": 0}, "seq": [1, 2, 3]}

        def len_after_append(x):
            state["log"].append(1)
            return x * len(state["log"])

        def item_after_insert(x):
            state["items"].insert(0, 9)
            return x * state["items"][1]

        def dict_counter(x):
            c = state["counter"]
            c["n"] = c["n"] + 1
            return x * c["n"]

        def slice_after_append(x):
            state["seq"].append(4)
            return x * sum(state["seq"][1:])

        return locals()[program]

    eager, jitted = make(), thunder.jit(make(), recompile_limit=3)
    x = torch.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(5):
            torch.testing.assert_close(jitted(x), eager(x))


def test_write_only_container_is_appended_on_every_call():
    log = []

    def f(x):
        log.append(3)
        return x * 2

    j = thunder.jit(f)
    for _ in range(4):
        j(torch.ones(2))
    assert log == [3, 3, 3, 3]
    # Correct on every call, and one cache entry: only appended to, the list is guarded by its
    # type (a look at its length before appending would be a load guarding its contents).
    assert thunder.cache_misses(j) == 1


def test_objects_inside_outside_containers_are_guarded():
    class Config:
        scale = 2.0

    cfg = Config()
    holders = {"by_key": {"cfg": cfg, "bias": 1.0}, "by_index": [cfg]}

    def by_key(x):
        return x * holders["by_key"]["cfg"].scale + holders["by_key"]["bias"]

    def by_index(x):
        return x * holders["by_index"][0].scale

    x = torch.ones(2)
    for fn in (by_key, by_index):
        j = thunder.jit(fn)
        for scale, bias in ((2.0, 1.0), (5.0, 1.0), (5.0, -3.0)):
            cfg.scale, holders["by_key"]["bias"] = scale, bias
            torch.testing.assert_close(j(x), fn(x))


# -- mappings that are not plain containers (os.environ, library registries) ---------------------


def test_environment_variables_are_guarded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("THUNDER_TEST_FLAG", raising=False)
    monkeypatch.delenv("THUNDER_TEST_OTHER", raising=False)

    def f(x: torch.Tensor) -> torch.Tensor:
        if os.environ.get("THUNDER_TEST_FLAG", "0") == "1":
            return x + 1
        if "THUNDER_TEST_OTHER" in os.environ:
            return x * 3
        return x - 1

    j = thunder.jit(f)
    x = torch.randn(3)
    for setting in ({}, {"THUNDER_TEST_FLAG": "1"}, {"THUNDER_TEST_FLAG": "0"},
                    {"THUNDER_TEST_OTHER": ""}, {}):  # fmt: skip
        monkeypatch.delenv("THUNDER_TEST_FLAG", raising=False)
        monkeypatch.delenv("THUNDER_TEST_OTHER", raising=False)
        for name, value in setting.items():
            monkeypatch.setenv(name, value)
        torch.testing.assert_close(j(x), f(x))  # never the program of another setting


def test_item_of_a_library_style_mapping_is_guarded() -> None:
    class Registry(collections.abc.MutableMapping):  # type: ignore[type-arg]
        def __init__(self) -> None:
            self._data: dict[str, Any] = {"act": torch.relu}

        def __getitem__(self, key: str) -> Any:
            return self._data[key]

        def __setitem__(self, key: str, value: Any) -> None:
            self._data[key] = value

        def __delitem__(self, key: str) -> None:
            del self._data[key]

        def __iter__(self) -> Any:
            return iter(self._data)

        def __len__(self) -> int:
            return len(self._data)

    registry = Registry()

    def f(x: torch.Tensor) -> torch.Tensor:
        act = registry.get("act", torch.tanh)
        return act(x)

    j = thunder.jit(f)
    x = torch.randn(4)
    torch.testing.assert_close(j(x), f(x))
    registry["act"] = torch.sigmoid
    torch.testing.assert_close(j(x), f(x))
    del registry["act"]
    torch.testing.assert_close(j(x), f(x))


def _scaler(k):
    def scale(x):
        return x * k

    return scale


def _counter():
    count = 0

    def bump():
        nonlocal count
        count += 1
        return count

    return bump


def test_closures_of_one_def_are_told_apart():
    """The closures one ``def`` makes share their code: reads and writes of their cells follow
    the cell, not the code (a guard on the wrong closure's cell rejected every call)."""
    double, triple = _scaler(2.0), _scaler(3.0)
    jf = thunder.jit(lambda x: double(x) + triple(x))
    x = torch.randn(3)
    torch.testing.assert_close(jf(x), x * 5.0)
    torch.testing.assert_close(jf(x), x * 5.0)
    assert thunder.compile_stats(jf).cache_misses == 1
    triple.__closure__[0].cell_contents = 4.0
    torch.testing.assert_close(jf(x), x * 6.0)

    a, b = _counter(), _counter()
    b()
    jc = thunder.jit(lambda x: x * a() + b())
    torch.testing.assert_close(jc(x), x * 1 + 2)
    torch.testing.assert_close(jc(x), x * 2 + 3)
    assert (a.__closure__[0].cell_contents, b.__closure__[0].cell_contents) == (2, 3)


def test_a_function_made_in_the_program_reads_the_outer_closure():
    def outer():
        lin = torch.nn.Linear(4, 4)

        def f(x):
            g = lambda a: lin(a).relu()  # noqa: E731  (shares f's cell of lin)
            return g(x)

        return f, lin

    f, lin = outer()
    jf = thunder.jit(f)
    x = torch.randn(2, 4)
    torch.testing.assert_close(jf(x), f(x))
    with torch.no_grad():
        lin.weight.mul_(2)
    torch.testing.assert_close(jf(x), f(x))


G_NESTED: dict[str, Any] = {}
L_NESTED: list[Any] = []


def test_containers_the_program_puts_into_outside_state_keep_later_mutations() -> None:
    def f(x):
        d = {"h": [1]}
        G_NESTED["k"] = d
        d["h"].append(2)
        G_NESTED.setdefault("z", []).append(3)
        L_NESTED.append([])
        L_NESTED[-1].append(4)
        return x * 2

    jf = thunder.jit(f)
    for _ in range(2):
        G_NESTED.clear()
        L_NESTED.clear()
        jf(torch.randn(2))
        assert G_NESTED == {"k": {"h": [1, 2]}, "z": [3]}
        assert L_NESTED == [[4]]


# -- one object reached by several paths ----------------------------------------------------------


class _Settings:
    def __init__(self, scale: float) -> None:
        self.scale = scale


class _Scaled(torch.nn.Module):
    def __init__(self, settings: _Settings) -> None:
        super().__init__()
        self.settings = settings
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.settings.scale


class _Shared(torch.nn.Module):
    """Two layers sharing one settings object (a config held by every layer), and a layer
    reached twice (a tied module)."""

    def __init__(self) -> None:
        super().__init__()
        self.settings = _Settings(2.0)
        self.first = _Scaled(self.settings)
        self.second = _Scaled(self.settings)
        self.again = self.first

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flag = self.settings.scale > 0  # read through the top path first
        return self.again(self.second(self.first(x))) if flag else x


@pytest.mark.parametrize("replace", ["settings_of_second", "module_again", "param_of_again"])
def test_object_replaced_at_one_of_its_paths_gives_the_new_result(replace: str) -> None:
    m = _Shared()
    j = thunder.jit(m)
    x = torch.randn(4, 3)
    torch.testing.assert_close(j(x), m(x))
    if replace == "settings_of_second":
        m.second.settings = _Settings(-5.0)  # the other layers keep the shared object
    elif replace == "module_again":
        m.again = _Scaled(m.settings)
    else:  # the module at one path keeps its identity; the tensor at the other path changes
        m.again = _Scaled(m.settings)
        m.again.lin.weight = m.first.lin.weight
        m.again.lin.bias = torch.nn.Parameter(torch.randn(3))
    expected = m(x)
    torch.testing.assert_close(j(x), expected)
    torch.testing.assert_close(j(x), expected)  # and again from the cache


def test_object_passed_twice_then_two_objects_gives_the_new_result() -> None:
    def f(x: torch.Tensor, a: _Settings, b: _Settings) -> torch.Tensor:
        return x * a.scale + b.scale

    j = thunder.jit(f)
    x = torch.randn(3)
    shared = _Settings(2.0)
    torch.testing.assert_close(j(x, shared, shared), f(x, shared, shared))
    other = _Settings(-7.0)
    torch.testing.assert_close(j(x, shared, other), f(x, shared, other))
    torch.testing.assert_close(j(x, other, shared), f(x, other, shared))


# -- methods replaced on the class after compiling ----------------------------------------------


def _follows_patch(
    fn: Any, x: torch.Tensor, target: Any, name: str, replacement: Any, mp: pytest.MonkeyPatch
) -> Any:
    """Compiles ``fn``, patches ``target.name`` and undoes it, comparing with eager after each
    step (twice after the patch: the recompiled program from the cache too)."""
    j = thunder.jit(fn)
    torch.testing.assert_close(j(x), fn(x))
    mp.setattr(target, name, replacement, raising=False)
    torch.testing.assert_close(j(x), fn(x))
    torch.testing.assert_close(j(x), fn(x))
    mp.undo()  # the original back: the first program serves again
    torch.testing.assert_close(j(x), fn(x))
    return j


class _Inner(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    def helper(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


class _Outer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = _Inner()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner.helper(self.inner(x))


@pytest.mark.parametrize("method", ["helper", "forward"])
def test_method_replaced_on_the_class_gives_the_new_result(
    method: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = _follows_patch(_Outer(), torch.randn(3), _Inner, method, lambda s, x: x - 100, monkeypatch)
    assert thunder.cache_misses(j) == 2


class _Base(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2

    @classmethod
    def offset(cls) -> float:
        return 1.0


class _Child(_Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + super().offset()


@pytest.mark.parametrize("patch", ["method", "classmethod", "defined_between"])
def test_method_found_through_super_replaced_gives_the_new_result(
    patch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Leaf(_Child):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x) * 3 + super().offset()

    m = Leaf()
    j = thunder.jit(m)
    x = torch.randn(3)
    torch.testing.assert_close(j(x), m(x))
    if patch == "method":
        monkeypatch.setattr(_Base, "forward", lambda self, x: x - 100)
    elif patch == "classmethod":
        monkeypatch.setattr(_Base, "offset", classmethod(lambda cls: -7.0))
    else:  # super().offset() in Leaf now finds a method of _Child, before _Base's
        monkeypatch.setattr(_Child, "offset", classmethod(lambda cls: 5.0), raising=False)
    torch.testing.assert_close(j(x), m(x))
    torch.testing.assert_close(j(x), m(x))
    monkeypatch.undo()
    torch.testing.assert_close(j(x), m(x))


class _Box:
    def __getitem__(self, k: int) -> float:
        return 2.0

    def __len__(self) -> int:
        return 3

    def __call__(self, v: torch.Tensor) -> torch.Tensor:
        return v + 1

    def __bool__(self) -> bool:
        return True

    def __iter__(self) -> Any:
        return iter([1.0, 2.0])


class _Twice(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


_BOX = _Box()
_TWICE = _Twice()


def _uses_special_methods(x: torch.Tensor) -> torch.Tensor:
    b = _BOX
    return _TWICE(b(x)) * b[0] + len(b) + (1 if b else 0) + sum(b)


@pytest.mark.parametrize(
    ("cls", "name", "replacement"),
    [
        (_Box, "__getitem__", lambda self, k: 5.0),
        (_Box, "__len__", lambda self: 7),
        (_Box, "__call__", lambda self, v: v * 100),
        (_Box, "__bool__", lambda self: False),
        (_Box, "__iter__", lambda self: iter([9.0])),
        (_Twice, "__call__", lambda self, x: x * 11),
        (_Box, "__getitem__", staticmethod(lambda k: -4.0)),
    ],
    ids=["getitem", "len", "call", "bool", "iter", "module_call", "staticmethod"],
)
def test_special_method_replaced_on_the_class_gives_the_new_result(
    cls: type, name: str, replacement: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = _follows_patch(_uses_special_methods, torch.randn(3), cls, name, replacement, monkeypatch)
    assert thunder.cache_misses(j) == 2


def _times_two(v: torch.Tensor) -> torch.Tensor:
    return v * 2


def _times_seven(v: torch.Tensor) -> torch.Tensor:
    return v * 7


def _calls_times_two(x: torch.Tensor) -> torch.Tensor:
    return _times_two(x)


def test_function_whose_code_is_replaced_gives_the_new_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    x = torch.randn(3)
    j = thunder.jit(_calls_times_two)
    torch.testing.assert_close(j(x), x * 2)
    monkeypatch.setattr(_times_two, "__code__", _times_seven.__code__)
    torch.testing.assert_close(j(x), x * 7)
    monkeypatch.undo()
    torch.testing.assert_close(j(x), x * 2)

    def apply(x: torch.Tensor, fn: Any) -> torch.Tensor:  # a function passed as an argument
        return fn(x)

    j = thunder.jit(apply)
    torch.testing.assert_close(j(x, _times_two), x * 2)
    monkeypatch.setattr(_times_two, "__code__", _times_seven.__code__)
    torch.testing.assert_close(j(x, _times_two), x * 7)


def test_method_shadowed_by_an_attribute_of_the_object_gives_the_new_result() -> None:
    m = _Outer()
    j = thunder.jit(m)
    x = torch.randn(3)
    torch.testing.assert_close(j(x), m(x))
    m.inner.helper = lambda x: x * -3  # type: ignore[method-assign]
    torch.testing.assert_close(j(x), m(x))
    m.forward = lambda x: x + 40  # type: ignore[method-assign]
    torch.testing.assert_close(j(x), m(x))
    del m.forward, m.inner.helper
    torch.testing.assert_close(j(x), m(x))


_SCALE = functools.partial(lambda v, k: v * k, k=3.0)
_SHIFT = functools.partial(torch.add, torch.ones(3))


def _scaled_and_shifted(x: torch.Tensor) -> torch.Tensor:
    return _SHIFT(_SCALE(x))


def test_partial_whose_arguments_change_gives_the_new_result(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    j = thunder.jit(_scaled_and_shifted)
    x = torch.randn(3)
    torch.testing.assert_close(j(x), _scaled_and_shifted(x))
    monkeypatch.setitem(_SCALE.keywords, "k", 9.0)
    torch.testing.assert_close(j(x), _scaled_and_shifted(x))
    _SHIFT.args[0].mul_(5)  # a tensor it holds, changed in place
    torch.testing.assert_close(j(x), _scaled_and_shifted(x))
    assert thunder.compile_stats(j).eager_fallbacks == 0  # traced, not run eagerly


def _uses_library_functions(x: torch.Tensor) -> torch.Tensor:
    import math

    return torch.nn.functional.relu(x) * math.pi + torch.tanh(x)


@pytest.mark.parametrize(
    ("module", "name", "replacement"),
    [
        (torch.nn.functional, "relu", lambda x: x * 100),
        (torch, "tanh", lambda x: x - 7),
        (__import__("math"), "pi", 3.0),
    ],
    ids=["F.relu", "torch.tanh", "math.pi"],
)
def test_library_function_patched_after_compiling_gives_the_new_result(
    module: Any, name: str, replacement: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _follows_patch(_uses_library_functions, torch.randn(4), module, name, replacement, monkeypatch)


def _two_arguments(a, b):
    return a


def _three_arguments(a, b, c):
    return a


_ARITY_SCALE = 1.0


def _scaled_by_arity(x: torch.Tensor) -> torch.Tensor:
    import inspect

    # What transformers' apply_chunking_to_forward asks of its forward function.
    n = len(inspect.signature(_two_arguments).parameters)
    return x * n * _two_arguments.__globals__["_ARITY_SCALE"]


@pytest.mark.parametrize(
    ("name", "replacement"),
    [
        ("__code__", _three_arguments.__code__),  # what a code object holds is not guarded
        ("__wrapped__", _three_arguments),  # checked in the function's __dict__
        ("__defaults__", (1.0,)),
    ],
)
def test_signature_of_a_function_changed_after_compiling_gives_the_new_result(
    name: str, replacement: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    j = _follows_patch(
        _scaled_by_arity, torch.randn(3), _two_arguments, name, replacement, monkeypatch
    )
    # The code object is pinned by identity and its attributes are constants: no guard on them.
    source = thunder.compile_stats(j).last_prologue_traces[-1].python()
    assert "co_argcount" not in source and "check_has_attribute" not in source


def test_a_global_read_through_a_functions_globals_is_guarded_by_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    j = _follows_patch(
        _scaled_by_arity, torch.randn(3), sys.modules[__name__], "_ARITY_SCALE", 5.0, monkeypatch
    )
    # Only the names read are guarded, not every name of the module.
    source = thunder.compile_stats(j).last_prologue_traces[-1].python()
    assert "check_keys" not in source


class _Containers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleDict({"a": torch.nn.Linear(3, 3)})
        self.scales = torch.nn.ParameterList([torch.nn.Parameter(torch.ones(3))])
        self.named = torch.nn.ParameterDict({"p": torch.nn.Parameter(torch.ones(3))})
        self.seq = torch.nn.Sequential(torch.nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if "b" in self.blocks:  # ModuleDict.__contains__: no module is read
            x = x + 100
        if "q" in self.named:
            x = x - 100
        return x * len(self.scales) + sum(1 for _ in self.blocks) + 10 * len(self.seq)


@pytest.mark.parametrize(
    "change",
    [
        lambda m: m.blocks.update({"b": torch.nn.Linear(3, 3)}),
        lambda m: m.blocks.pop("a"),
        lambda m: m.scales.append(torch.nn.Parameter(torch.ones(3))),
        lambda m: m.scales.append(2.0),  # not a parameter: an attribute "1"
        lambda m: m.named.update({"q": torch.nn.Parameter(torch.ones(3))}),
        lambda m: m.seq.append(torch.nn.Tanh()),
    ],
    ids=["dict_add", "dict_pop", "list_append", "list_append_float", "pdict_add", "seq_append"],
)
def test_module_container_changed_after_compiling_gives_the_new_result(change: Any) -> None:
    # The containers' len, iteration and ``in`` run natively: their entries are guarded (each
    # change returned the old program's result).
    m = _Containers()
    j = thunder.jit(m)
    x = torch.randn(2, 3)
    torch.testing.assert_close(j(x), m(x))
    change(m)
    torch.testing.assert_close(j(x), m(x))
    torch.testing.assert_close(j(x), m(x))


def test_membership_and_iteration_of_a_library_config_are_guarded() -> None:
    # A transformers config has no __contains__: ``k in config`` iterates it (its __iter__, a
    # library special method, ran natively and its answer was not guarded).
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=8, num_attention_heads=2, num_hidden_layers=1)

    def f(x: torch.Tensor) -> torch.Tensor:
        flagged = sum(1 for key in config if key.startswith("my_"))
        return x + (1 if "my_flag" in config else -1) + 10 * flagged

    j = thunder.jit(f)
    x = torch.zeros(2)
    torch.testing.assert_close(j(x), f(x))
    config.my_flag = True
    torch.testing.assert_close(j(x), f(x))
    config.my_other = 1
    torch.testing.assert_close(j(x), f(x))


_DEQUE = collections.deque([1.0, 2.0])
_ARRAY = array.array("d", [1.0, 2.0])
_USER_LIST = collections.UserList([1.0, 2.0])


def _reads_items_of_containers(x: torch.Tensor) -> torch.Tensor:
    return x * _DEQUE[0] + _ARRAY[1] * 10 + _USER_LIST[0] * 100


@pytest.mark.parametrize(
    "container", [_DEQUE, _ARRAY, _USER_LIST], ids=["deque", "array", "UserList"]
)
def test_item_of_a_container_read_natively_is_guarded(container: Any) -> None:
    # A C type's __getitem__, or a library class's run natively, is no read the binder sees:
    # the item is guarded by its path (each returned the old program's result).
    j = thunder.jit(_reads_items_of_containers)
    x = torch.ones(2)
    torch.testing.assert_close(j(x), _reads_items_of_containers(x))
    old = list(container)
    try:
        container[0], container[1] = 5.0, 7.0
        torch.testing.assert_close(j(x), _reads_items_of_containers(x))
    finally:
        container[0], container[1] = old


_FLAGS = collections.defaultdict(int, {"a": 1})


@pytest.mark.parametrize(
    ("read", "change"),
    [
        (lambda x: x * len(_DEQUE), lambda: _DEQUE.append(3.0)),
        (lambda x: x * sum(_DEQUE), lambda: _DEQUE.__setitem__(1, 4.0)),
        (lambda x: x * (5 if 2.0 in _DEQUE else 1), lambda: _DEQUE.remove(2.0)),
        (lambda x: x * [v for v in _ARRAY][-1], lambda: _ARRAY.append(9.0)),
        (lambda x: x * (2 if "b" in _FLAGS else 1), lambda: _FLAGS.__setitem__("b", 1)),
    ],
    ids=["deque_len", "deque_sum", "deque_in", "array_iter", "defaultdict_in"],
)
def test_c_collection_changed_after_compiling_gives_the_new_result(read: Any, change: Any) -> None:
    # len, iteration and ``in`` of a deque, an array or a defaultdict run in C, with no read
    # the binder sees: the contents are guarded whole (each returned the old result).
    saved = (collections.deque(_DEQUE), array.array("d", _ARRAY), dict(_FLAGS))
    try:
        j = thunder.jit(read)
        x = torch.ones(2, dtype=torch.float64)
        torch.testing.assert_close(j(x), read(x))
        change()
        torch.testing.assert_close(j(x), read(x))
    finally:
        _DEQUE.clear(), _DEQUE.extend(saved[0])
        _ARRAY[:] = saved[1]
        _FLAGS.clear(), _FLAGS.update(saved[2])


def test_a_method_changing_an_outside_deque_runs_split_once_per_call() -> None:
    # deque.append on an outside deque was taken as pure (collections is a pure module): it ran
    # once while tracing and never again.
    def f(x: torch.Tensor) -> torch.Tensor:
        _DEQUE.append(1.0)
        return x + 1

    before = list(_DEQUE)
    jf = thunder.jit(f)
    for n in (1, 2):  # torch runs it (split): appended once per call, as eager does
        torch.testing.assert_close(call_split(jf, torch.ones(2), match="append"), torch.ones(2) + 1)
        assert list(_DEQUE) == [*before, *[1.0] * n]


class _ConfigBase:
    pass


class _MappedConfig(_ConfigBase):
    """Like a transformers config: its own __getattribute__ maps some names to others."""

    attribute_map = {"width": "hidden"}

    def __init__(self) -> None:
        self.hidden = 2.0

    def __getattribute__(self, key: str) -> Any:
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)


_MAPPED = _MappedConfig()


def _reads_a_mapped_config(x: torch.Tensor) -> torch.Tensor:
    extra = 10.0 if hasattr(_MAPPED, "extra") else 0.0
    return x * _MAPPED.width + extra


@pytest.mark.parametrize(
    "change",
    [
        lambda: setattr(_MAPPED, "hidden", 3.0),
        lambda: setattr(_MAPPED, "extra", 1),
        lambda: setattr(_MappedConfig, "extra", 1),  # found by the class's lookup
        lambda: setattr(_ConfigBase, "extra", 1),  # and by its base's
        lambda: (
            setattr(_MAPPED, "other", 4.0)
            or setattr(_MappedConfig, "attribute_map", {"width": "other"})
        ),
        lambda: setattr(_MAPPED, "other", 5.0) or _MAPPED.attribute_map.update(width="other"),
    ],
    ids=["value", "instance_gains", "class_gains", "base_gains", "map_replaced", "map_changed"],
)
@pytest.mark.parametrize("calls", [1, 3], ids=["prologue", "guard_tree"])
def test_a_class_with_its_own_getattribute_is_read_by_its_generic_lookups(
    change: Any, calls: int
) -> None:
    # The class's __getattribute__ is interpreted: the prologue checks the generic lookups it
    # made (object.__getattribute__), and what they missed, without running it again. After a
    # few calls the guard tree checks them (through the versions of the classes' dicts).
    saved_map = dict(_MappedConfig.attribute_map)
    try:
        j = thunder.jit(_reads_a_mapped_config)
        x = torch.ones(2)
        for _ in range(calls):
            torch.testing.assert_close(j(x), _reads_a_mapped_config(x))
        source = thunder.compile_stats(j).last_prologue_traces[-1].python()
        assert "object.__getattribute__(" in source and "check_has_attribute" not in source
        change()
        torch.testing.assert_close(j(x), _reads_a_mapped_config(x))
    finally:
        _MappedConfig.attribute_map = saved_map
        for obj in (_MAPPED, _MappedConfig, _ConfigBase):
            for name in ("extra", "other"):
                if name in vars(obj):
                    delattr(obj, name)
        _MAPPED.hidden = 2.0


def test_library_item_methods_run_natively_only_for_mappings() -> None:
    # A mapping's item read is guarded by its path; a sequence's or a view's __getitem__ (a
    # transformers config's per_layer_config[i], 4.5 us natively on every call) is interpreted.
    from thunder.lookasides import native_special

    assert native_special(os._Environ.__getitem__)
    assert native_special(collections.UserDict.__setitem__)
    assert not native_special(collections.UserList.__getitem__)
    assert not native_special(_MappedConfig.__getattribute__)  # the user's own: interpreted


class _Optional(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        if hasattr(self, "extra"):
            y = y + 100
        return y + getattr(self.lin, "shift", 0.0)


class _OptionalBase(torch.nn.Module):
    pass


@pytest.mark.parametrize(
    "change",
    [
        lambda m: setattr(m, "extra", 1.0),
        lambda m: m.register_buffer("extra", torch.ones(3)),
        lambda m: m.register_parameter("extra", torch.nn.Parameter(torch.ones(3))),
        lambda m: m.add_module("extra", torch.nn.Identity()),
        lambda m: setattr(type(m.lin), "shift", 3.0),
        lambda m: m.lin.__dict__.update(shift=4.0),
    ],
    ids=["attr", "buffer", "parameter", "module", "class_attr", "instance_dict"],
)
def test_an_attribute_a_module_lacked_then_set_gives_the_new_result(change: Any) -> None:
    # hasattr(module, name) false is checked from the module's dicts and its classes' (no
    # exception raised per call): each way the name can appear recompiles.
    lin_cls = type("_Lin", (torch.nn.Linear,), {})
    m = _Optional()
    m.lin.__class__ = lin_cls
    j = thunder.jit(m)
    x = torch.randn(2, 3)
    torch.testing.assert_close(j(x), m(x))
    source = str(thunder.last_prologue_traces(j)[-1])
    assert "check_module_lacks" in source and "check_has_attribute" not in source
    change(m)
    torch.testing.assert_close(j(x), m(x))
    torch.testing.assert_close(j(x), m(x))


class _Collector:
    slot: Any = None


_COLLECTOR = _Collector()


def _collects(x: torch.Tensor) -> torch.Tensor:
    _COLLECTOR.slot = {"acc": [], "layers": None}
    collected = _COLLECTOR.slot
    collected["acc"].append(x * 2)
    if len(collected["acc"]) == 1:  # reads the list it appended to
        collected["acc"].append(x + 1)
    collected.pop("layers", None)  # mutates the dict, then reads it
    out = sum(collected["acc"]) if "acc" in collected.keys() else x
    _COLLECTOR.slot = None
    return out


def test_a_container_made_in_the_call_and_stored_outside_is_mutated_and_read() -> None:
    # What a container the program made holds is the program's own: no guard on its contents
    # at entry (there are none: it did not exist). transformers' output capturing stores its
    # collector dict on a global this way; the program was refused ("both mutates and reads").
    j = thunder.jit(_collects)
    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(j(x), _collects(x))
        assert _COLLECTOR.slot is None
    assert thunder.compile_stats(j).compilations == 1


# -- functions the program makes and stores outside (hooks, callbacks), and locks -------------

STORED: list[Any] = []
LOCK = threading.Lock()
RLOCK = threading.RLock()


def test_a_closure_stored_outside_is_a_new_function_with_the_calls_values_every_call():
    def f(x):
        y = x + 1
        STORED.append(lambda s=2.0: y * s)
        return y

    jitted = thunder.jit(f)
    STORED.clear()
    try:
        xs = [torch.randn(3) for _ in range(3)]
        for x in xs:
            jitted(x)
        assert len(STORED) == 3 and len({id(g) for g in STORED}) == 3  # a new function each call
        for g, x in zip(STORED, xs):
            torch.testing.assert_close(g(), (x + 1) * 2.0)
            torch.testing.assert_close(g(3.0), (x + 1) * 3.0)
    finally:
        STORED.clear()


def test_a_stored_closure_that_writes_its_variable_has_its_own_variable_per_call():
    def f(x):
        count = 0

        def bump():
            nonlocal count
            count += 1
            return count

        STORED.append(bump)
        return x * 2

    jitted = thunder.jit(f)
    STORED.clear()
    try:
        jitted(torch.ones(2))
        jitted(torch.ones(2))
        first, second = STORED
        assert (first(), first(), second()) == (1, 2, 1)  # as eager: one cell per call
    finally:
        STORED.clear()


def test_a_returned_closure_computes_with_the_calls_tensor():
    def f(x):
        y = x.sin()
        return lambda s: y * s

    jitted = thunder.jit(f)
    for _ in range(2):
        x = torch.randn(4)
        torch.testing.assert_close(jitted(x)(3.0), f(x)(3.0))


def test_assigning_a_variable_a_stored_closure_reads_after_storing_it_runs_split():
    def f(x):
        n = 1
        STORED.append(lambda: n)
        n = 2  # eager's stored function returns 2
        return x + n

    STORED.clear()
    out = call_split(thunder.jit(f), torch.ones(1), match="after storing it")
    torch.testing.assert_close(out, torch.ones(1) + 2)
    assert len(STORED) == 1 and STORED[0]() == 2  # eager's closure; tracing left nothing behind


def test_a_forward_hook_the_module_registers_on_itself_once_runs_as_in_eager():
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            if not getattr(self, "hooked", False):
                scale = 2.0

                def double(module, args, out):
                    return out * scale

                self.lin.register_forward_hook(double)
                self.hooked = True
            return self.lin(x) + 1

    model = Net()
    reference = Net()
    reference.load_state_dict(model.state_dict())
    jitted = thunder.jit(model)
    for _ in range(3):
        x = torch.randn(2, 3)
        torch.testing.assert_close(jitted(x), reference(x))
        assert len(model.lin._forward_hooks) == len(reference.lin._forward_hooks) == 1
    assert model.hooked is True


def test_a_lock_taken_and_released_in_the_function_is_left_free_after_each_call():
    def f(x):
        with LOCK:
            y = x * 2
        RLOCK.acquire()
        RLOCK.acquire()  # reentrant
        try:
            return y + 1
        finally:
            RLOCK.release()
            RLOCK.release()

    jitted = thunder.jit(f)
    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(jitted(x), f(x))
        assert not LOCK.locked()
    assert thunder.compile_stats(jitted).compilations == 1


def test_a_function_that_returns_holding_a_lock_runs_split_and_holds_it_once():
    def keeps(x):
        LOCK.acquire()
        return x + 1

    def raises_inside(x):
        with LOCK:  # a list of over 4096 elements is not read while tracing: tracing stops,
            return x * len(x.tolist())  # with the lock held

    out = call_split(thunder.jit(keeps), torch.ones(2), match="holding a lock")
    torch.testing.assert_close(out, torch.ones(2) + 1)
    assert LOCK.locked()  # as eager leaves it: taken once (tracing released its own)
    LOCK.release()
    x = torch.ones(5000)
    with pytest.warns(UserWarning, match="tolist"):  # runs eagerly
        torch.testing.assert_close(thunder.jit(raises_inside)(x), x * 5000)
    assert not LOCK.locked()


def test_an_object_whose_getattr_raises_key_error_for_unknown_names():
    # A dict-backed config: thunder asked it for an attribute eager never reads (KeyError, an
    # internal error and an eager run).
    class Config:
        def __init__(self):
            self.store = {"k": 2.0}

        def __getattr__(self, name):
            return self.store[name]

    cfg = Config()

    def f(x):
        return x * cfg.k

    jf = thunder.jit(f)
    x = torch.ones(2)
    torch.testing.assert_close(jf(x), f(x))
    cfg.store["k"] = 3.0
    torch.testing.assert_close(jf(x), f(x))
    assert thunder.compile_stats(jf).eager_fallbacks == 0


class _WidthBase:
    @property
    def width(self) -> float:
        return self._w * 2


class _WidthConfig(_WidthBase):
    def __init__(self) -> None:
        self._w = 1.5


_WIDTH = _WidthConfig()


def _reads_a_property(x: torch.Tensor) -> torch.Tensor:
    return x * _WIDTH.width


@pytest.mark.parametrize(
    "change",
    [
        lambda: setattr(_WidthConfig, "width", property(lambda self: self._w * 3)),
        lambda: setattr(_WidthBase, "width", property(lambda self: self._w * 4)),
        lambda: setattr(_WidthConfig, "width", 7.0),  # a plain class attribute shadows it
        lambda: setattr(_WIDTH, "_w", 2.5),
    ],
    ids=["class_replaces", "base_replaces", "class_shadows", "value"],
)
@pytest.mark.parametrize("calls", [1, 3], ids=["prologue", "guard_tree"])
def test_a_property_replaced_on_the_class_or_its_base(change: Any, calls: int) -> None:
    # The property's getter ran interpreted: guarded is that the classes still hold it (after a
    # few calls, by the guard tree through the versions of the classes' dicts).
    saved = _WidthBase.__dict__["width"]
    try:
        j = thunder.jit(_reads_a_property)
        x = torch.ones(2)
        for _ in range(calls):
            torch.testing.assert_close(j(x), _reads_a_property(x))
        change()
        for _ in range(2):
            torch.testing.assert_close(j(x), _reads_a_property(x))
    finally:
        _WidthBase.width = saved  # type: ignore[method-assign]
        if "width" in vars(_WidthConfig):
            del _WidthConfig.width
        _WIDTH._w = 1.5
