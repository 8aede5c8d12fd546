"""Edges of how a jitted program meets Python: an attribute answered by Python code (a
property's getter, a descriptor's ``__get__``, ``__getattr__``) runs as often as in eager, its
effects included; membership in a module's globals reached through ``f.__globals__`` or a
frame's ``f_globals`` follows globals defined and deleted between calls; a program that makes
an object with a ``__del__`` or registers a weakref finalizer runs its finalizer on every call.
Each test compares with eager over several calls, fresh inputs each, and the outside state
after every call."""

from __future__ import annotations

import gc
import inspect
import itertools
import sys
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import pytest
import torch
from gc_new_objects import only_new_objects_collected

import thunder

CACHES = [None, "symbolic values"]


def _jit(fn: Callable[..., Any], cache: str | None) -> Callable[..., Any]:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


def _quietly(fn: Callable[[], Any]) -> Any:
    """``fn()`` with thunder's warnings (a call that ran eagerly) ignored."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn()


# -- attributes answered by Python code --------------------------------------------------------

LOG: list[Any] = []


class Logged:
    """Attributes whose Python code has an effect each time it answers."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.reads = 0
        self.draws = itertools.count()

    @property
    def logged(self) -> float:
        LOG.append("property")
        return self.scale

    @property
    def counted(self) -> float:
        self.reads += 1
        return self.scale

    def __getattr__(self, name: str) -> float:
        if name.startswith("dyn_"):
            LOG.append(name)
            return float(name[4:])
        raise AttributeError(name)


class LoggingDescriptor:
    def __get__(self, obj: Any, owner: Any = None) -> Any:
        LOG.append("descriptor")
        return 3.0 if obj is None else obj.scale + 1


class WithDescriptor(Logged):
    plus_one = LoggingDescriptor()


def _read_property(x: torch.Tensor, o: Logged) -> torch.Tensor:
    return x * o.logged


def _read_twice(x: torch.Tensor, o: Logged) -> torch.Tensor:
    return x * o.logged + o.logged


def _read_counted(x: torch.Tensor, o: Logged) -> torch.Tensor:
    return x * o.counted


def _read_descriptor(x: torch.Tensor, o: WithDescriptor) -> torch.Tensor:
    return x * o.plus_one


def _read_getattr(x: torch.Tensor, o: Logged) -> torch.Tensor:
    return x * o.dyn_2


def _read_hasattr(x: torch.Tensor, o: Logged) -> torch.Tensor:
    return x * 2 if hasattr(o, "dyn_5") else x


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn",
    [_read_property, _read_twice, _read_counted, _read_descriptor, _read_getattr, _read_hasattr],
)
def test_attribute_code_runs_as_in_eager(fn: Callable[..., Any], cache: str | None) -> None:
    cls = WithDescriptor if fn is _read_descriptor else Logged
    eager_obj, jit_obj = cls(2.0), cls(2.0)
    jf = _jit(fn, cache)
    for _ in range(4):
        x = torch.randn(3)
        LOG.clear()
        expected = fn(x, eager_obj)
        eager_log = list(LOG)
        LOG.clear()
        got = _quietly(lambda: jf(x, jit_obj))
        assert list(LOG) == eager_log
        assert torch.allclose(got, expected)
        assert jit_obj.reads == eager_obj.reads


class Gated(torch.nn.Module):
    """A module whose weight is read through a property that counts its reads."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))
        self.reads = 0

    @property
    def gated(self) -> torch.Tensor:
        self.reads += 1
        LOG.append("gated")
        return self.w.tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.gated).sum()


def test_property_of_a_module_with_gradients() -> None:
    eager = Gated()
    jitted = Gated()
    jitted.load_state_dict(eager.state_dict())
    jm = thunder.jit(jitted)
    for _ in range(3):
        x = torch.randn(3)
        LOG.clear()
        eager(x).backward()
        eager_log = list(LOG)
        LOG.clear()
        jm(x).backward()
        assert LOG == eager_log
        assert jitted.reads == eager.reads
        assert torch.allclose(jitted.w.grad, eager.w.grad)
        eager.w.grad = jitted.w.grad = None


def test_replaced_property_recompiles() -> None:
    class Holder:
        @property
        def k(self) -> float:
            LOG.append("k")
            return 2.0

    def fn(x: torch.Tensor, o: Holder) -> torch.Tensor:
        return x * o.k

    o = Holder()
    jf = thunder.jit(fn)
    x = torch.randn(3)
    assert torch.allclose(jf(x, o), x * 2)
    Holder.k = property(lambda self: 5.0)  # type: ignore[assignment,method-assign]
    assert torch.allclose(jf(x, o), x * 5)


def test_getattr_answer_shadowed_later() -> None:
    def fn(x: torch.Tensor, o: Logged) -> torch.Tensor:
        return x * o.dyn_2

    o = Logged(1.0)
    jf = thunder.jit(fn)
    x = torch.randn(3)
    assert torch.allclose(jf(x, o), x * 2)
    o.dyn_2 = 7.0  # type: ignore[attr-defined]  (found now without __getattr__)
    assert torch.allclose(jf(x, o), x * 7)
    del o.dyn_2  # type: ignore[attr-defined]
    assert torch.allclose(jf(x, o), x * 2)


def test_non_data_descriptor_shadowed_later() -> None:
    def fn(x: torch.Tensor, o: WithDescriptor) -> torch.Tensor:
        return x * o.plus_one

    o = WithDescriptor(1.0)
    jf = thunder.jit(fn)
    x = torch.randn(3)
    assert torch.allclose(jf(x, o), x * 2)
    o.plus_one = 9.0  # type: ignore[assignment]
    assert torch.allclose(jf(x, o), x * 9)


# -- a module's globals reached by other paths ----------------------------------------------


def _helper() -> None:
    pass


def _in_function_globals(x: torch.Tensor) -> torch.Tensor:
    return x + (1 if "ROUND7_FLAG" in _helper.__globals__ else 0)


def _get_function_globals(x: torch.Tensor) -> torch.Tensor:
    return x + (1 if _helper.__globals__.get("ROUND7_FLAG") is not None else 0)


def _in_own_globals(x: torch.Tensor) -> torch.Tensor:
    return x + (1 if "ROUND7_FLAG" in _in_own_globals.__globals__ else 0)


def _in_keys(x: torch.Tensor) -> torch.Tensor:
    return x + (1 if "ROUND7_FLAG" in _helper.__globals__.keys() else 0)


def _in_frame_globals(x: torch.Tensor) -> torch.Tensor:
    return x + (1 if "ROUND7_FLAG" in sys._getframe(0).f_globals else 0)


def _in_inspect_frame_globals(x: torch.Tensor) -> torch.Tensor:
    frame = inspect.currentframe()
    assert frame is not None
    return x + (1 if "ROUND7_FLAG" in frame.f_globals else 0)


def _in_module_dict(x: torch.Tensor) -> torch.Tensor:
    return x + (1 if "ROUND7_FLAG" in sys.modules[__name__].__dict__ else 0)


def _in_method_globals(x: torch.Tensor) -> torch.Tensor:
    return x + (1 if "ROUND7_FLAG" in Logged.__init__.__globals__ else 0)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn",
    [
        _in_function_globals,
        _get_function_globals,
        _in_own_globals,
        _in_keys,
        _in_frame_globals,
        _in_inspect_frame_globals,
        _in_module_dict,
        _in_method_globals,
    ],
)
def test_global_defined_and_deleted_between_calls(
    fn: Callable[..., Any], cache: str | None
) -> None:
    jf = _jit(fn, cache)
    try:
        for i in range(6):
            if i % 3 == 1:
                globals()["ROUND7_FLAG"] = i
            else:
                globals().pop("ROUND7_FLAG", None)
            x = torch.randn(3)
            assert torch.equal(_quietly(lambda: jf(x)), fn(x))
    finally:
        globals().pop("ROUND7_FLAG", None)


# -- finalizers of what the program makes -----------------------------------------------------


class Finalized:
    def __del__(self) -> None:
        LOG.append("del")


class FinalizedWithInit:
    def __init__(self, tag: str) -> None:
        self.tag = tag

    def __del__(self) -> None:
        LOG.append(self.tag)


class Plain:
    pass


def _makes_finalized(x: torch.Tensor) -> torch.Tensor:
    Finalized()
    return x * 2


def _makes_finalized_with_init(x: torch.Tensor) -> torch.Tensor:
    kept = FinalizedWithInit("init")
    return x * 2 + len(kept.tag)


def _registers_finalize(x: torch.Tensor) -> torch.Tensor:
    weakref.finalize(Plain(), LOG.append, "finalize")
    return x * 2


def _registers_weakref_callback(x: torch.Tensor) -> torch.Tensor:
    obj = Plain()
    ref = weakref.ref(obj, lambda r: LOG.append("callback"))
    del obj
    return x * 2 if ref() is None else x


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "fn",
    [
        _makes_finalized,
        _makes_finalized_with_init,
        _registers_finalize,
        _registers_weakref_callback,
    ],
)
@only_new_objects_collected()  # its 8 collections walk what it makes, not the whole process
def test_finalizers_run_on_every_call(fn: Callable[..., Any], cache: str | None) -> None:
    jf = _jit(fn, cache)
    warned = []
    for _ in range(4):
        x = torch.randn(3)
        LOG.clear()
        expected = fn(x)
        gc.collect()
        eager_log = list(LOG)
        LOG.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = jf(x)
            gc.collect()
        assert LOG == eager_log
        assert torch.allclose(got, expected)
        warned += [str(w.message) for w in caught if "ran eagerly" in str(w.message)]
    assert warned  # the call ran eagerly, visibly
    assert thunder.compile_stats(jf).last_eager_reason is not None


def test_weakref_without_callback_still_compiles() -> None:
    def fn(x: torch.Tensor, o: Plain) -> torch.Tensor:
        return x * 2 if weakref.ref(o)() is o else x

    o = Plain()
    jf = thunder.jit(fn)
    for _ in range(3):
        x = torch.randn(3)
        assert torch.allclose(jf(x, o), fn(x, o))
    assert thunder.compile_stats(jf).last_eager_reason is None


def _subscript_function_globals(x: torch.Tensor) -> torch.Tensor:
    return x * _helper.__globals__["ROUND7_SCALE"]


def _get_frame_globals(x: torch.Tensor) -> torch.Tensor:
    return x * sys._getframe(0).f_globals.get("ROUND7_SCALE", 1.0)


ROUND7_SCALE = 2.0


@pytest.mark.parametrize(
    "fn", [_subscript_function_globals, _get_function_globals, _get_frame_globals]
)
def test_one_name_read_guards_that_name_only(fn: Callable[..., Any]) -> None:
    """``f.__globals__["k"]``, ``.get(k)``: the name read is guarded, not every name of the
    module (a global defined later elsewhere does not recompile)."""
    jf = thunder.jit(fn)
    x = torch.randn(3)
    assert torch.equal(jf(x), fn(x))
    globals()["ROUND7_UNRELATED"] = 1
    try:
        assert torch.equal(jf(x), fn(x))
        assert thunder.compile_stats(jf).cache_misses == 1
    finally:
        globals().pop("ROUND7_UNRELATED", None)


def test_name_read_by_get_follows_deletion() -> None:
    jf = thunder.jit(_get_frame_globals)
    global ROUND7_SCALE
    try:
        for value in (2.0, None, 3.0, None):
            if value is None:
                globals().pop("ROUND7_SCALE", None)
            else:
                ROUND7_SCALE = value
            x = torch.randn(3)
            assert torch.equal(jf(x), _get_frame_globals(x))
    finally:
        ROUND7_SCALE = 2.0
