"""``cache="same input"``: a call with the previous call's argument objects takes its program
only when those objects still hold what that program was made for (a list that grew, a dict
that gained a key, a nested list that shrank), as eager reads them on every call."""

from __future__ import annotations

import torch

import thunder


def _total(xs):
    return sum(x.sum() for x in xs)


def _values(d):
    return sum(v * 2 for v in d.values())


def _nested(batch):
    return torch.cat([x for x in batch["items"]]) * batch["scale"]


def test_a_list_that_grows_between_calls() -> None:
    jf = thunder.jit(_total, cache="same input")
    xs = [torch.randn(3) for _ in range(2)]
    for _ in range(4):
        torch.testing.assert_close(jf(xs), _total(xs))
        xs.append(torch.randn(3))
        torch.testing.assert_close(jf(xs), _total(xs))  # the same list, one item more
        xs.pop(0)
        torch.testing.assert_close(jf(xs), _total(xs))


def test_a_dict_that_gains_and_loses_keys() -> None:
    jf = thunder.jit(_values, cache="same input")
    d = {"a": torch.randn(2)}
    for i in range(4):
        torch.testing.assert_close(jf(d), _values(d))
        d[f"k{i}"] = torch.randn(2)
        torch.testing.assert_close(jf(d), _values(d))
    del d["a"]
    torch.testing.assert_close(jf(d), _values(d))


def test_a_nested_list_that_shrinks_and_a_number_that_changes() -> None:
    jf = thunder.jit(_nested, cache="same input")
    batch = {"items": [torch.randn(2) for _ in range(3)], "scale": 2.0}
    for step in range(4):
        torch.testing.assert_close(jf(batch), _nested(batch))
        batch["items"].pop()
        if not batch["items"]:
            batch["items"] = [torch.randn(3)]
        batch["scale"] = float(step)
        torch.testing.assert_close(jf(batch), _nested(batch))


def test_the_same_objects_unchanged_take_the_previous_program() -> None:
    jf = thunder.jit(_total, cache="same input")
    xs = [torch.randn(3) for _ in range(3)]
    for _ in range(5):
        torch.testing.assert_close(jf(xs), _total(xs))
        with torch.no_grad():
            xs[0].add_(1.0)  # values change in place; the program reads them on every call
    assert thunder.compile_stats(jf).cache_misses == 1
