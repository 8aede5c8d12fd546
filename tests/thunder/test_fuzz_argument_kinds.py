"""Differential fuzzing of arguments whose Python kind changes from call to call ("never wrong,
never crash").

Each example calls ONE jitted function 3-7 times, each time with an argument of any kind: ints,
floats, bools, None, strings, slices, ``torch.Size``, dtypes, devices, tensors of other ranks and
dtypes, lists, tuples, dicts and sets of those (nested), and user objects (plain, unhashable,
with an ``__eq__`` that raises or returns a tensor). Between calls an object the argument holds
may be mutated. The functions read the argument in ways that depend on its kind (isinstance
branches, iteration, attributes, indexing, torch ops taking it as a size, dim, dtype or index),
so a program compiled for one kind served for another is a wrong result. After every call the
result must match eager's, or both raise the same exception type; a thunder refusal is accepted.
An exception from thunder's own code (a cache lookup, a guard) where eager returns is a failure.

Budget: ``THUNDER_FUZZ_EXAMPLES`` (see fuzz_common); the whole file gets one budget.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

import torch
from fuzz_common import (
    Differential,
    check_example,
    fuzz_settings,
    quiet_call,
)
from hypothesis import given
from hypothesis import strategies as st

import thunder


class Obj:
    def __init__(self, v: float) -> None:
        self.v = v

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.v!r})"


class NoHash(Obj):
    __hash__ = None  # type: ignore[assignment]


class RaisingEq(Obj):
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("RaisingEq.__eq__ was called")

    def __hash__(self) -> int:
        return 7


class TensorEq(Obj):
    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        return torch.tensor([True, False])

    def __hash__(self) -> int:
        return 7


OBJECT_CLASSES = (Obj, NoHash, RaisingEq, TensorEq)


# -- the functions ----------------------------------------------------------------------------


def score(x, a):
    """A tensor computed from ``a`` by its kind: every kind takes another path."""
    if isinstance(a, torch.Tensor):
        return x.sum() + a.to(x.dtype).sum() * a.ndim
    if isinstance(a, bool):
        return x * 2 if a else x - 1
    if isinstance(a, (int, float)):
        return x * a
    if a is None:
        return x + 0.5
    if isinstance(a, str):
        return x * len(a)
    if isinstance(a, slice):
        return x[a].sum() + x.sum()
    if isinstance(a, torch.Size):
        return x.sum() + len(a) + sum(a)
    if isinstance(a, torch.dtype):
        return x.to(a).to(x.dtype) + a.is_floating_point
    if isinstance(a, torch.device):
        return x.to(a) + 3
    if isinstance(a, (list, tuple)):
        out = x * len(a)
        for item in a:
            out = out + score(x, item)
        return out
    if isinstance(a, dict):
        out = x - len(a)
        for k, v in a.items():
            out = out + score(x, v) * len(str(k))
        return out
    if isinstance(a, (set, frozenset)):
        out = x * len(a) + len([i for i in a if isinstance(i, int)])
        return out + sum(i.v for i in a if isinstance(i, Obj))
    if isinstance(a, Obj):
        return x * a.v
    return x


def index(x, a):
    return x[a]


def hsplit(x, a):
    return torch.hsplit(x, a)


def reshape(x, a):
    return x.reshape(a)


def reduce_dim(x, a):
    return x.sum(a)


def convert(x, a):
    return x.to(a)


def count(x, a):
    n = len(a) if hasattr(a, "__len__") and not isinstance(a, torch.Tensor) else 1
    if isinstance(a, (list, tuple)) and a and a[0] is a[-1]:
        n += 10
    return x + n


def keyword(x, *, a=None):
    return score(x, a)


FUNCTIONS = (score, index, hsplit, reshape, reduce_dim, convert, count, keyword)


# -- the arguments ----------------------------------------------------------------------------

_scalars = st.one_of(
    st.integers(-3, 6),
    st.sampled_from([0.5, -1.25, 2.0, float("inf")]),
    st.booleans(),
    st.none(),
    st.sampled_from(["", "ab", "x"]),
)
_slices = st.builds(
    slice,
    st.none() | st.integers(-4, 4),
    st.none() | st.integers(-4, 6),
    st.sampled_from([None, 1, 2]),
)
_sizes = st.lists(st.integers(1, 6), max_size=3).map(torch.Size)
_dtypes = st.sampled_from([torch.float32, torch.float64, torch.int64, torch.bool, torch.bfloat16])
_devices = st.just(torch.device("cpu"))


@st.composite
def _tensors(draw: st.DrawFn) -> torch.Tensor:
    shape = draw(st.lists(st.integers(1, 4), max_size=3))
    dtype = draw(st.sampled_from([torch.float32, torch.float64, torch.int64, torch.bool]))
    t = torch.randn(shape) * 3
    return t > 0 if dtype is torch.bool else t.to(dtype)


_objects = st.builds(
    lambda cls, v: cls(v), st.sampled_from(OBJECT_CLASSES), st.sampled_from([0.5, 2.0, -3.0])
)
_leaves = st.one_of(_scalars, _slices, _sizes, _dtypes, _devices, _tensors(), _objects)
_plain = st.one_of(st.integers(-3, 6), st.sampled_from(["a", "b", 1.5, None, True]))
ARGUMENTS = st.recursive(
    _leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
        st.frozensets(_plain, max_size=3),
        st.sets(_plain, max_size=3),
        st.sets(st.builds(Obj, st.sampled_from([0.5, 2.0])), max_size=3),
    ),
    max_leaves=6,
)


def _objects_in(a: Any) -> list[Obj]:
    if isinstance(a, Obj):
        return [a]
    if isinstance(a, (list, tuple, set, frozenset)):
        return [o for item in a for o in _objects_in(item)]
    if isinstance(a, dict):
        return [o for v in a.values() for o in _objects_in(v)]
    return []


@dataclass
class Program:
    fn: Any
    cache: str
    x_shape: tuple[int, ...]
    # (argument, value to set on the objects it holds before this call, or None)
    calls: list[tuple[Any, float | None]]

    @property
    def source(self) -> str:
        return inspect.getsource(self.fn)

    def reproducer(self) -> str:
        lines = [
            "# in tests/thunder: .venv/bin/python -c '...' with this text",
            "from test_fuzz_argument_kinds import *",
            f"jf = thunder.jit({self.fn.__name__}, cache={self.cache!r})",
            f"x = torch.randn({self.x_shape})",
        ]
        for a, v in self.calls:
            call = f"jf(x, a={a!r})" if self.fn is keyword else f"jf(x, {a!r})"
            lines.append(f"{call}  # objects' v set to {v}" if v is not None else call)
        return "\n".join(lines)


@st.composite
def programs(draw: st.DrawFn) -> Program:
    fn = draw(st.sampled_from(FUNCTIONS))
    cache = draw(st.sampled_from(["constant values", "symbolic values"]))
    x_shape = draw(st.sampled_from([(4, 6), (3, 4, 2), (6,)]))
    n = draw(st.integers(3, 7))
    calls: list[tuple[Any, float | None]] = []
    for _ in range(n):
        if calls and draw(st.integers(0, 3)) == 0:  # the same argument again, maybe mutated
            a = calls[-1][0]
        else:
            a = draw(ARGUMENTS)
        mutate = draw(st.sampled_from([None, None, 4.0, -0.5])) if _objects_in(a) else None
        calls.append((a, mutate))
    return Program(fn, cache, x_shape, calls)


def _run(program: Program) -> None:
    check = Differential("argument_kinds", program)
    jf = thunder.jit(program.fn, cache=program.cache)
    x = torch.randn(program.x_shape)
    for i, (a, mutate) in enumerate(program.calls):
        if mutate is not None:
            for o in _objects_in(a):
                o.v = mutate
        check.log.add(f"  call {i}: a={a!r}")
        if program.fn is keyword:
            eager, jitted = quiet_call(program.fn, x, a=a), quiet_call(jf, x, a=a)
        else:
            eager, jitted = quiet_call(program.fn, x, a), quiet_call(jf, x, a)
        kind = check.outcomes(i, eager, jitted, list, "")
        if kind is None:
            return  # refused: the example ends
        if kind == "ok":
            check.results(i, eager[1], jitted[1], strides=False)


@fuzz_settings()
@given(programs())
def test_arguments_changing_kind(program: Program) -> None:
    check_example("argument_kinds", _run, program)
