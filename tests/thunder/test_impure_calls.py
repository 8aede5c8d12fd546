"""C functions whose results may change between calls are refused, never baked into the program;
pure ones run at trace time and give eager's result."""

from __future__ import annotations

import math
import random
import time

import pytest
import torch

import thunder

_outside_iterator = iter(range(100))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x * random.random(),
        lambda x: x * time.time(),
        lambda x: x * next(_outside_iterator),
    ],
    ids=["random.random", "time.time", "next-outside-iterator"],
)
def test_impure_call_is_a_clear_error_with_the_users_line(fn):
    with pytest.raises(thunder.ImpureCallError, match=r"test_impure_calls\.py:\d+"):
        thunder.jit(fn)(torch.ones(2))


def test_pure_calls_and_objects_made_by_the_program_are_fine():
    def f(x):
        it = iter([1, 2])
        first = next(it)
        r = random.Random(0).random()  # a generator the call itself seeds: same every call
        values = [3, 1]
        values.sort()
        return x * math.sqrt(4) * len(values) * max(1, 2) * first * round(r, 3) * values[0]

    j = thunder.jit(f)
    x = torch.randn(3)
    for _ in range(2):
        torch.testing.assert_close(j(x), f(x))
