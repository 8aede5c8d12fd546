"""A set the program reads is guarded by its items in the order the traced call iterated them.

A copy of a set can iterate in another order than the set (its hash table is built afresh): a
guard that compared the live set with a copy, order included, rejected the very set the program
was compiled for (``x.dim_order()`` reads torch's own set of memory formats and raised
"the program compiled for these inputs rejects them").
"""

from __future__ import annotations

import pytest
import torch

import thunder


def _set_iterating(items: list[int]) -> set[int]:
    """A set of ``items`` whose iteration order differs from a fresh copy's: built large, then
    emptied down to ``items`` (its table keeps the large size)."""
    s = set(range(200))
    for i in range(200):
        if i not in items:
            s.discard(i)
    return s


ORDER_SENSITIVE: set[int] | tuple[set[int], ...] = set()


def _fold(x: torch.Tensor) -> torch.Tensor:
    for k in ORDER_SENSITIVE:
        x = x * 2 + k
    return x


def _fold_nested(x: torch.Tensor) -> torch.Tensor:
    for group in ORDER_SENSITIVE:
        for k in group:
            x = x * 2 + k
    return x


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_dim_order_reads_torchs_set_of_memory_formats(cache: str | None) -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x * len(x.dim_order()) + x.dim_order()[-1]

    jf = thunder.jit(f, cache=cache) if cache else thunder.jit(f)
    for shape in [(3, 2), (4, 2), (2, 3, 4)]:
        x = torch.randn(shape)
        torch.testing.assert_close(jf(x), f(x))


def test_set_whose_copy_iterates_otherwise() -> None:
    global ORDER_SENSITIVE
    live = _set_iterating([1, 8])
    assert list(live) != list(set(list(live)))  # the situation of the test
    ORDER_SENSITIVE = live
    jf = thunder.jit(_fold)
    for _ in range(3):
        x = torch.randn(4)
        torch.testing.assert_close(jf(x), _fold(x))
    assert thunder.compile_stats(jf).compilations == 1


def test_equal_set_in_another_order_is_not_the_same_program() -> None:
    global ORDER_SENSITIVE
    ORDER_SENSITIVE = _set_iterating([1, 3, 16])
    jf = thunder.jit(_fold)
    x = torch.randn(4)
    torch.testing.assert_close(jf(x), _fold(x))
    reordered = {16, 1, 3}
    assert reordered == ORDER_SENSITIVE and list(reordered) != list(ORDER_SENSITIVE)
    ORDER_SENSITIVE = reordered  # equal, iterated in another order: another result
    for _ in range(2):
        x = torch.randn(4)
        torch.testing.assert_close(jf(x), _fold(x))


def test_sets_inside_a_tuple() -> None:
    global ORDER_SENSITIVE
    ORDER_SENSITIVE = (_set_iterating([1, 8]), _set_iterating([1, 3, 16]))
    jf = thunder.jit(_fold_nested)
    for _ in range(3):
        x = torch.randn(4)
        torch.testing.assert_close(jf(x), _fold_nested(x))
    ORDER_SENSITIVE = ({8, 1}, {16, 1, 3})  # equal sets, iterated in another order
    x = torch.randn(4)
    torch.testing.assert_close(jf(x), _fold_nested(x))
