"""One jitted function called with arguments whose Python kind changes: the cache key never
raises from thunder's own code, and a program compiled for one kind never serves another
(the fuzz family of the same name generates such call sequences; these are the cases found)."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
import torch
from runs_by_torch import call_split
from test_fuzz_argument_kinds import NoHash as Unhashable
from test_fuzz_argument_kinds import Obj as Plain
from test_fuzz_argument_kinds import RaisingEq

import thunder


def _same(a: Any, b: Any) -> None:
    if isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    else:
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def _calls(fn: Any, x: torch.Tensor, arguments: list[Any], **jit_options: Any) -> None:
    jf = thunder.jit(fn, **jit_options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager run after a failed trace, no recompile limit
        for a in arguments:
            _same(jf(x, a), fn(x, a))


def test_hsplit_with_an_int_then_a_list():
    _calls(lambda x, idx: torch.hsplit(x, idx), torch.randn(4, 6), [2, [1, 3], 3, (2, 4), [1, 3]])


def test_indexing_with_an_int_then_slices():
    _calls(
        lambda x, s: x[s],
        torch.randn(4, 6),
        [1, (slice(0, 3), 1), slice(1, None, 2), [0, 2], (Ellipsis, 2), None, 1],
    )


class TensorEq(Plain):
    """Equal to anything, as a one-element tensor (truthy): a cache that compared it would
    take another object for it."""

    def __eq__(self, other: object) -> Any:  # type: ignore[override]
        return torch.tensor(True)

    def __hash__(self) -> int:
        return 7


def score(x, a):
    if isinstance(a, torch.Tensor):
        return x + a.sum() * a.ndim
    if isinstance(a, (list, tuple)):
        return x * len(a) + sum((score(x, i) for i in a), torch.zeros(()))
    if isinstance(a, dict):
        return x - len(a) + sum((score(x, v) for v in a.values()), torch.zeros(()))
    if isinstance(a, (set, frozenset)):
        return x * len(a)
    if isinstance(a, Plain):
        return x * a.v
    if isinstance(a, (int, float)):
        return x * a
    return x + 0.5


ARGUMENTS = [
    2,
    2.5,
    True,
    None,
    "ab",
    slice(1, 3),
    torch.Size([2, 3]),
    torch.float64,
    torch.ones(3),
    torch.ones(2, 2),
    torch.ones(5),
    [torch.ones(2)],
    [torch.ones(4)],
    (1, 2),
    [1, [2, 3]],
    {"a": torch.ones(2)},
    {"a": torch.ones(3), "b": 1},
    {1, 2},
    frozenset({"a"}),
    Plain(3.0),
    Unhashable(4.0),
    RaisingEq(5.0),
    RaisingEq(6.0),
    TensorEq(7.0),
    TensorEq(8.0),
    [Unhashable(2.0), RaisingEq(3.0)],
    {"a": TensorEq(-1.0)},
    slice(torch.tensor(1), 3),
    2,
]


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_every_kind_after_every_kind(cache):
    x = torch.randn(3)
    _calls(score, x, ARGUMENTS, cache=cache, recompile_limit=None)
    _calls(score, x, ARGUMENTS[::-1], cache=cache, recompile_limit=None)


def test_a_tensor_or_list_where_an_object_was_is_another_program():
    """The key held only the type of an object argument: a tensor or list passed there next
    was served by the program compiled for the first tensor's shape (a silent wrong result)."""

    def by_kind(x, o):
        if isinstance(o, Plain):
            return x * o.v
        if isinstance(o, list):
            return x + o[0].sum() * o[0].shape[0]
        if isinstance(o, torch.Tensor):
            return x + o.shape[0]
        return x

    _calls(by_kind, torch.randn(3), [Plain(2.0), [torch.ones(2)], [torch.ones(5)]])
    _calls(by_kind, torch.randn(3), [Plain(2.0), torch.ones(2), torch.ones(7), (1, 2)])


def test_mutated_object_inside_an_argument_is_seen():
    x = torch.randn(3)
    obj = RaisingEq(2.0)
    jf = thunder.jit(score)
    for v in (2.0, 3.0, -1.0):
        obj.v = v
        torch.testing.assert_close(jf(x, [obj]), score(x, [obj]))
        torch.testing.assert_close(jf(x, obj), score(x, obj))


def test_a_set_of_objects_is_guarded_by_its_members():
    """What the program reads from a set's items is guarded, each item found by its position
    in the set's order; the set's members are checked (a set of numbers is keyed by value).
    A set of tensors runs split: the program would see the caller's tensors."""

    def total(x, s):
        out = x * len(s)
        for o in s:
            out = out + (o.v if isinstance(o, Plain) else o)
        return out

    a, b = Plain(2.0), RaisingEq(3.0)
    jf = thunder.jit(total)
    x = torch.randn(3)
    for s in ({a}, {1, 2}, {a, b}, {1, 3}, {a}, frozenset({b})):
        torch.testing.assert_close(jf(x, s), total(x, s))
    a.v = 7.0  # mutated between calls: read again
    torch.testing.assert_close(jf(x, {a}), total(x, {a}))
    tensors = {torch.ones(1)}  # the program would see the caller's tensors: torch runs it
    out = call_split(thunder.jit(lambda x, s: x * len(s)), x, tensors, match="holding tensors")
    torch.testing.assert_close(out, x)


def test_the_same_argument_item_by_two_paths():
    """``a[0] is a[-1]``: the stand-in of a list or tuple holding tensors, read again, is not
    new outside state (its proxies were guarded as the caller's tensors' types and failed)."""
    fn = lambda x, a: x + (a[0] is a[-1])  # noqa: E731
    x = torch.randn(3)
    for a in (
        [{"b": torch.ones(1)}],
        [[torch.ones(1)]],
        [(torch.ones(1),)],
        [[torch.ones(1)], [torch.ones(1)]],
        ((torch.ones(2),),),
    ):
        _calls(fn, x, [a, a])


@pytest.mark.parametrize("dims", [1.0, True, [0.5], {}, {0}, frozenset({1})])
def test_dims_torch_refuses_are_refused(dims):
    x = torch.randn(2, 3)
    with pytest.raises(TypeError):
        x.sum(dims)
    with pytest.raises(TypeError):
        thunder.jit(lambda x, d: x.sum(d))(x, dims)


def test_to_with_a_leading_bool_is_torch_bool():
    x = torch.randn(3)
    for args in [(False,), (True, False)]:
        _same(thunder.jit(lambda x, a: x.to(*a))(x, args), x.to(*args))


def test_an_integer_device_without_an_accelerator_raises_as_eager():
    if torch.accelerator.is_available():
        pytest.skip("an accelerator is present: torch.device(0) is valid")
    x = torch.randn(3)
    with pytest.raises(RuntimeError) as eager:
        x.to(0)
    with pytest.raises(type(eager.value)):
        thunder.jit(lambda x, d: x.to(d))(x, 0)


class StrictInt(int):
    """An int whose equality raises: keyed by identity, never compared."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("StrictInt.__eq__ must not be called by the cache")

    __hash__ = int.__hash__


def test_a_scalar_subclass_with_its_own_equality_is_keyed_by_identity():
    fn = lambda x, n: x * int(n)  # noqa: E731
    two, three = StrictInt(2), StrictInt(3)
    _calls(fn, torch.randn(3), [two, three, two, StrictInt(2), 2, three])


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_numbers_and_strings_passed_as_one_object(cache):
    """``a[0] is a[-1]`` of two equal numbers tells one object from two: which arguments are
    one object is in the key (symbolic numbers: one proxy for one object)."""

    def same(x, a):
        return x + (10 if a[0] is a[-1] else 0) + len(a)

    f = -1.25
    s = "ab"
    arguments = [(f, f), (-1.25, float("-1.25")), (f, f), [s, s], [s, "".join(["a", "b"])]]
    arguments += [(1000, int("1000")), (1000, 1000)]
    _calls(same, torch.randn(3), arguments, cache=cache)


def test_a_container_that_holds_itself_is_refused_clearly():
    looped: list[Any] = [1.0]
    looped.append(looped)
    with pytest.raises(thunder.JitError, match="nested deeper than"):
        thunder.jit(lambda x, a: x * a[0])(torch.randn(2), looped)
