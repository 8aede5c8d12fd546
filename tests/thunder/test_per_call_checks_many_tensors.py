"""The per-call checks of a call with hundreds of tensor arguments: every property the cache key
and the guards cover (dtype, shape, strides where the program reads them, device, layout,
requires_grad, exact type, which arguments share memory) is still checked on every call at any
position of a 300-tensor list, now that the key finds the tensors' metadata of a recent call by
torch's C++ tensor guard, reads the storages in one pass and the guard tree unpacks the list in
one step. Results (and gradients) are compared with eager on fresh inputs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import thunder
from thunder import signature as key_functions
from thunder.signature import alias_pattern, make_signature, storage_address

N = 300
POSITIONS = (0, N // 2, N - 1)


def _tensors(seed: int, n: int = N) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(4, 3, generator=g) for _ in range(n)]


def _uses_three(ts: list[torch.Tensor]) -> torch.Tensor:
    return ts[0] * 2 + ts[N // 2] - ts[N - 1]


def _changed(kind: str, t: torch.Tensor) -> torch.Tensor:
    if kind == "dtype":
        return t.double()
    if kind == "shape":
        return t[:1].clone()  # (broadcasts as before)
    if kind == "requires_grad":
        return t.clone().requires_grad_()
    if kind == "parameter":
        return torch.nn.Parameter(t.clone(), requires_grad=False)
    if kind == "strides":
        return t.t().contiguous().t()
    raise AssertionError(kind)


def _expanded(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A key with its tensors' entry as the values it stands for (keys of two signatures)."""
    entry = key_functions.TensorsKey
    return tuple(x for k in key for x in (k.values if type(k) is entry else (k,)))


def _check_like_eager(
    fn: Callable[..., Any], jf: Callable[..., Any], make: Callable[[], list[Any]]
) -> None:
    expected_args, args = make(), make()
    expected = fn(expected_args)
    got = jf(args)
    torch.testing.assert_close(got, expected)
    assert got.dtype == expected.dtype and got.stride() == expected.stride()
    torch.testing.assert_close(args, expected_args)
    if expected.requires_grad:
        expected.sum().backward()
        got.sum().backward()
        for a, e in zip(args, expected_args):
            if e.requires_grad:
                torch.testing.assert_close(a.grad, e.grad)


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("kind", ["dtype", "shape", "requires_grad", "parameter", "strides"])
def test_a_changed_tensor_at_any_position_gets_its_own_program(position: int, kind: str) -> None:
    jf = thunder.jit(_uses_three)
    for seed in range(3):  # (from the third call, the key's tensor guard answers)
        _check_like_eager(_uses_three, jf, lambda seed=seed: _tensors(seed))
    assert thunder.cache_misses(jf) == 1

    def changed(seed: int) -> list[torch.Tensor]:
        ts = _tensors(seed)
        ts[position] = _changed(kind, ts[position])
        return ts

    for seed in range(3, 6):
        _check_like_eager(_uses_three, jf, lambda seed=seed: changed(seed))
        _check_like_eager(_uses_three, jf, lambda seed=seed: _tensors(seed))
    # The strides are not in the key (a program that reads them guards them, below).
    assert thunder.cache_misses(jf) == (1 if kind == "strides" else 2)


def _branches_on_layout(ts: list[torch.Tensor]) -> torch.Tensor:
    picked = (ts[0], ts[N // 2], ts[N - 1])
    return sum(t * (2.0 if t.is_contiguous() else 3.0) + t.stride(0) for t in picked)


@pytest.mark.parametrize("position", POSITIONS)
def test_strides_read_by_the_program_are_checked_at_any_position(position: int) -> None:
    jf = thunder.jit(_branches_on_layout)
    for seed in range(3):
        _check_like_eager(_branches_on_layout, jf, lambda seed=seed: _tensors(seed))

    def transposed(seed: int) -> list[torch.Tensor]:
        ts = _tensors(seed)
        ts[position] = _changed("strides", ts[position])
        return ts

    for seed in range(3, 6):
        _check_like_eager(_branches_on_layout, jf, lambda seed=seed: transposed(seed))
        _check_like_eager(_branches_on_layout, jf, lambda seed=seed: _tensors(seed))
    assert thunder.cache_misses(jf) == 2


def _writes_one_reads_others(ts: list[torch.Tensor]) -> torch.Tensor:
    ts[0].add_(1.0)
    return ts[N // 2] * 2 + ts[N - 1]


def _sharing(position: int, seed: int, how: str) -> list[torch.Tensor]:
    ts = _tensors(seed)
    other = N // 2 if position == 0 else 0
    if how == "same object":
        ts[position] = ts[other]
    elif how == "view":
        ts[position] = ts[other].view(4, 3)
    else:  # another view of the same storage, at an offset
        base = torch.randn(24, generator=torch.Generator().manual_seed(seed))
        ts[other] = base[:12].view(4, 3)
        ts[position] = base[12:].view(4, 3)
    return ts


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("how", ["same object", "view", "other part of the storage"])
def test_arguments_sharing_memory_at_any_position_are_seen(position: int, how: str) -> None:
    jf = thunder.jit(_writes_one_reads_others)
    for seed in range(3):
        _check_like_eager(_writes_one_reads_others, jf, lambda seed=seed: _tensors(seed))
    for seed in range(3, 6):
        _check_like_eager(
            _writes_one_reads_others, jf, lambda seed=seed: _sharing(position, seed, how)
        )
        _check_like_eager(_writes_one_reads_others, jf, lambda seed=seed: _tensors(seed))
    assert thunder.cache_misses(jf) == 2


def test_an_inplace_step_over_two_lists_like_eager() -> None:
    def step(ps: list[torch.Tensor], gs: list[torch.Tensor]) -> None:
        with torch.no_grad():
            torch._foreach_add_(ps, gs, alpha=-0.1)

    jf = thunder.jit(step)
    ps, gs = _tensors(0), _tensors(1)
    eager_ps = [p.clone() for p in ps]
    for seed in range(2, 6):
        gs = _tensors(seed)
        jf(ps, gs)
        step(eager_ps, gs)
        torch.testing.assert_close(ps, eager_ps)
    aliased = list(gs)
    aliased[N - 1] = ps[0]  # a gradient that is a parameter: eager adds it after it changed
    eager_aliased = list(gs)
    eager_aliased[N - 1] = eager_ps[0]
    jf(ps, aliased)
    step(eager_ps, eager_aliased)
    torch.testing.assert_close(ps, eager_ps)
    assert thunder.cache_misses(jf) == 2


# -- the key itself --------------------------------------------------------------------------


def _key_changes(kind: str, t: torch.Tensor) -> torch.Tensor:
    if kind == "dtype":
        return t.to(torch.float16)
    if kind == "shape":
        return t.reshape(3, 4)
    if kind == "ndim":
        return t.reshape(12, 1, 1)
    if kind == "device":
        return t.to("meta")
    if kind == "requires_grad":
        return t.clone().requires_grad_()
    if kind == "layout":
        return t.to_sparse()
    raise AssertionError(kind)


@pytest.mark.parametrize("grad", [True, False])
@pytest.mark.parametrize("kind", ["dtype", "shape", "ndim", "device", "requires_grad", "layout"])
def test_the_key_tells_each_changed_tensor_at_any_position(kind: str, grad: bool) -> None:
    base = _tensors(0)
    with torch.set_grad_enabled(grad):
        signature = make_signature((base,), {}, False, ("ts",))
        first = signature.fn((base,), {})
        for seed in range(1, 4):  # fresh tensors of the same metadata: the same key entry
            again = signature.fn((_tensors(seed),), {})
            assert (
                again == first
                and again[signature.labels.index("tensor metadata")]
                is (first[signature.labels.index("tensor metadata")])
            )
        for position in POSITIONS:
            ts = _tensors(position)
            ts[position] = _key_changes(kind, ts[position])
            key = signature.fn((ts,), {})
            fresh = make_signature((base,), {}, False, ("ts",)).fn((ts,), {})
            assert _expanded(key) == _expanded(fresh)
            changes = signature.changes(first, key)
            assert changes and all(label.startswith(f"ts[{position}].") for label, _, _ in changes)
            assert signature.fn((_tensors(7),), {}) == first  # and back


@pytest.mark.parametrize("kind", ["parameter", "subclass", "number"])
def test_the_key_refuses_another_kind_at_any_position(kind: str) -> None:
    class Sub(torch.Tensor):
        pass

    base = _tensors(0)
    signature = make_signature((base,), {}, False, ("ts",))
    for seed in range(3):
        signature.fn((_tensors(seed),), {})
    for position in POSITIONS:
        ts = _tensors(position)
        if kind == "parameter":
            ts[position] = torch.nn.Parameter(ts[position])
        elif kind == "subclass":
            ts[position] = ts[position].as_subclass(Sub)
        else:
            ts[position] = 1.0  # type: ignore[call-overload]
        with pytest.raises(LookupError):
            signature.fn((ts,), {})


def test_the_key_under_inference_mode_and_symbolic_sizes() -> None:
    base = _tensors(0)
    signature = make_signature((base,), {}, True, ("ts",))  # ndim, not sizes, per tensor
    first = signature.fn((base,), {})
    for seed in range(1, 4):
        assert signature.fn((_tensors(seed),), {}) == first
    resized = _tensors(4)
    resized[N - 1] = torch.randn(7, 2)
    assert signature.fn((resized,), {}) == first  # (the prologue unpacks the sizes)
    for position in POSITIONS:
        ts = _tensors(position)
        ts[position] = ts[position].reshape(12)
        assert [label for label, _, _ in signature.changes(first, signature.fn((ts,), {}))] == [
            f"ts[{position}].ndim"
        ]
    with torch.inference_mode():
        inside = signature.fn((_tensors(5),), {})
        for _ in range(3):
            assert signature.fn((_tensors(6),), {})[:2] == inside[:2]
        ts = _tensors(6)
        ts[N // 2] = ts[N // 2].double()
        assert signature.changes(inside, signature.fn((ts,), {}))[0][0] == f"ts[{N // 2}].dtype"


def _reference_pattern(tensors: list[Any]) -> tuple[tuple[int, int], ...] | None:
    ptrs = [storage_address(t) for t in tensors]
    if len(set(ptrs)) == len(ptrs):
        return None
    return tuple(
        (ptrs.index(p) if p else i, next(j for j, u in enumerate(tensors) if u is t))
        for i, (p, t) in enumerate(zip(ptrs, tensors))
    )


def test_alias_patterns_of_many_tensors() -> None:
    ts = _tensors(0)
    array = np.zeros(6, dtype=np.float32)
    base = torch.randn(40)
    cases = [
        ts,
        [*ts[:-1], ts[0]],
        [*ts[:10], base[:4], *ts[10:20], base[4:8], *ts[20:30], base[:4].view(2, 2)],
        [*ts[:5], torch.from_numpy(array), *ts[5:], torch.from_numpy(array)],  # one memory
        [torch.empty(0), *ts[:5], torch.empty(0)],  # no memory: shared with none
        [*ts[:5], torch.randn(4).to_sparse(), ts[3]],  # no plain storage
    ]
    for tensors in cases:
        expected = _reference_pattern(tensors)
        assert alias_pattern(*tensors) == expected
        assert key_functions.plain_alias_pattern(*tensors) == expected


def test_a_cached_call_runs_no_python_function_per_tensor(monkeypatch: Any) -> None:
    # (the suite's check of the guard tree against the Python prologue runs that prologue)
    monkeypatch.setenv("THUNDER_VERIFY_GUARD_TREE", "0")

    def first(ps: list[torch.Tensor], gs: list[torch.Tensor]) -> torch.Tensor:
        return ps[0] + gs[-1]

    jf = thunder.jit(first)
    ps, gs = _tensors(0), _tensors(1)
    for _ in range(4):
        torch.testing.assert_close(jf(ps, gs), first(ps, gs))
    calls = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        out = jf(ps, gs)
    finally:
        sys.setprofile(None)
    torch.testing.assert_close(out, first(ps, gs))
    assert len(calls) < 40, sorted(set(calls))


@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_the_key_tells_shared_memory_of_a_few_tensors(count: int) -> None:
    base = torch.randn(40)
    array = np.zeros(6, dtype=np.float32)
    own = [torch.randn(3) for _ in range(count)]
    signature = make_signature(tuple(own), {}, False, ())
    at = signature.labels.index("which tensor arguments share memory")
    for _ in range(3):
        assert signature.fn(tuple(torch.randn(3) for _ in range(count)), {})[at] is None
    for first, second in [(0, count - 1), (count - 2, count - 1)]:
        for shared in (
            (base[:3], base[:3]),  # one storage, two views
            (base[:3], base[5:8]),  # one storage, at an offset
            (own[0], own[0]),  # one object
            (torch.from_numpy(array)[:3], torch.from_numpy(array)[3:]),  # one memory
            (torch.empty(0), torch.empty(0)),  # no memory
            (torch.randn(3).to_sparse(), own[1]),  # no plain storage
        ):
            tensors = list(own)
            tensors[first], tensors[second] = shared
            key = signature.fn(tuple(tensors), {})
            assert key[at] == _reference_pattern(tensors)
            assert key[at] is not None or len({storage_address(t) for t in tensors}) == count
