"""``same_value_test(value)``, what the guard tree checks a read value with, decides as
``same_value`` does on any pair of values (its marshal comparison of containers and its float
test are shortcuts, never another answer)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from thunder_ir.prims.prologue import same_value, same_value_test


class _Text(str):
    pass


_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 1, True, 0, False]),
    st.text(max_size=3),
    st.text(max_size=3).map(_Text),
    st.binary(max_size=3),
    st.complex_numbers(allow_nan=False, max_magnitude=4),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=2), st.integers(0, 3)), inner, max_size=3),
        st.frozensets(st.one_of(st.integers(0, 3), st.text(max_size=2)), max_size=3),
    ),
    max_leaves=8,
)


def _variants(value: Any) -> list[Any]:
    """Values a guard may see in place of ``value``: itself, a copy, and near misses."""
    out = [value]
    if isinstance(value, tuple):
        out += [tuple(value), list(value), (*value, 0)]
    if isinstance(value, list):
        out += [list(value), tuple(value), [*value[:-1]]]
    if isinstance(value, dict):
        out += [dict(value), dict(reversed(list(value.items())))]
    if type(value) is float:
        out += [-value, float(int(value)) if math.isfinite(value) else value]
    if type(value) is int:
        out += [float(value) if abs(value) < 2**53 else value, bool(value)]
    return out


@settings(max_examples=400)  # (cheap: the values are small)
@given(_VALUES, _VALUES)
@example(0.0, -0.0)
@example(-0.0, 0.0)
@example(float("nan"), float("nan"))
@example((1, 2), (1.0, 2))
@example([0.0], [-0.0])
@example({"a": True}, {"a": 1})
@example(("a", "b"), (_Text("a"), "b"))
@example([float("nan")], [-float("nan")])  # another NaN: the same to a program
def test_same_value_test_answers_as_same_value(value: Any, other: Any) -> None:
    test = same_value_test(value)
    for x in [*_variants(value), other]:
        assert test(x) == same_value(x, value), (value, x)
