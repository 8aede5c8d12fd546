"""The OpInfo figure: every op of torch's ``op_db`` run by ``thunder.jit`` on its CPU float32
samples and compared with eager.

Each op's functional variant (``op.op``) is jitted and called on its first samples (seeded, so
the figure is reproducible); results are compared with eager by ``torch.testing.assert_close``
(``equal_nan=True``). Ops whose values are random or uninitialized memory are compared by shape
and dtype only. An op counts as equal to eager when every sample that eager can run matches. The
others must raise an error: a result that differs from eager is a test failure (never a silent
pass). ``FLOOR`` is the achieved figure; the test fails if it drops.

Run ``python tests/thunder/test_op_db.py`` to print the figure and a histogram of the errors.
"""

from __future__ import annotations

import collections
import re
import warnings
from typing import Any

import pytest
import torch

import thunder

FLOOR = 640  # measured: 640 of 677 (calls run eagerly or split by torch are not counted)
SHARDS = 4
FLOORS = (158, 161, 164, 157)  # FLOOR by shard (every SHARDS-th op), measured
# (to_sparse runs split: a trace holds no sparse tensor, and one traced as dense gave wrong
# `is_sparse`/`layout` answers and crashes inside programs)
assert sum(FLOORS) == FLOOR
SAMPLES = 2

# Random or uninitialized results: compared by shape and dtype only.
_SHAPE_ONLY = re.compile(
    r"^(empty|empty_like|new_empty|new_empty_strided|empty_permuted|empty_strided|bernoulli|"
    r"multinomial|normal|rand_like|randn_like|randint_like|randint|uniform|cauchy|exponential|"
    r"geometric|log_normal|nn\.functional\.(dropout.*|alpha_dropout|feature_alpha_dropout.*|rrelu|"
    r"fractional_max_pool.*|gumbel_softmax))(\..*)?$"
)


_LOCATION = re.compile(r" at /\S+")


def _key(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _same_structure(got: Any, expected: Any) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, torch.Tensor), type(got)
        assert got.shape == expected.shape and got.dtype == expected.dtype
    elif isinstance(expected, (tuple, list)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            _same_structure(g, e)


def _call(op: Any, *args: Any, **kwargs: Any) -> Any:
    return op.op(*args, **kwargs)


def run_op(op: Any) -> str:
    """``"ok"``, ``"mismatch: ..."`` or the error the jitted op raised (type and first line)."""
    key = _key(op)
    torch.manual_seed(0)
    samples = list(op.sample_inputs("cpu", torch.float32))[:SAMPLES]
    for sample in samples:
        args = (sample.input, *sample.args)
        kwargs = dict(sample.kwargs)
        torch.manual_seed(1)
        try:
            expected = op.op(*args, **kwargs)
        except Exception:
            continue  # eager refuses this sample too
        jitted = thunder.jit(lambda *a, **k: _call(op, *a, **k))
        torch.manual_seed(1)
        try:
            got = jitted(*args, **kwargs)
        except Exception as e:
            first = _LOCATION.sub("", str(e).splitlines()[0] if str(e) else "")
            return f"{type(e).__name__}: {first}"
        stats = thunder.compile_stats(jitted)
        if stats.eager_fallbacks:
            return "ran eagerly: tracing raised"  # eager's result, not thunder's: not counted
        if stats.split_calls:  # torch ran what thunder could not compile: not counted either
            return f"ran split: {_LOCATION.sub('', stats.last_split_reason or '')[:100]}"
        try:
            if _SHAPE_ONLY.match(key):
                _same_structure(got, expected)
            else:
                torch.testing.assert_close(got, expected, equal_nan=True)
        except AssertionError as e:
            return f"mismatch: {str(e).strip().splitlines()[0]}"
    return "ok"


def op_db_results(shard: int | None = None) -> dict[str, str]:
    """Each op's result; with ``shard``, only every ``SHARDS``-th op from that index."""
    from torch.testing._internal.common_methods_invocations import op_db

    ops = [op for op in op_db if torch.float32 in op.supported_dtypes("cpu")]
    if shard is not None:
        ops = ops[shard::SHARDS]
    results: dict[str, str] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for op in ops:
            results[_key(op)] = run_op(op)
    return results


@pytest.mark.parametrize("shard", range(SHARDS))
def test_op_db_figure(shard: int) -> None:
    # In shards, so that parallel test runs spread the figure's minutes over their workers.
    pytest.importorskip("expecttest")  # torch.testing._internal needs it
    results = op_db_results(shard)
    mismatches = {k: v for k, v in results.items() if v.startswith("mismatch")}
    assert not mismatches, f"results that differ from eager: {mismatches}"
    ok = sum(v == "ok" for v in results.values())
    floor = FLOORS[shard]
    assert ok >= floor, f"{ok} of {len(results)} ops equal to eager, below the floor {floor}"


def main() -> None:
    results = op_db_results()
    ok = sum(v == "ok" for v in results.values())
    print(f"{ok} of {len(results)} OpInfo ops equal to eager")
    classes: collections.Counter[str] = collections.Counter()
    examples: dict[str, list[str]] = collections.defaultdict(list)
    for key, status in results.items():
        if status != "ok":
            cls = re.sub(r"\d+", "N", status)[:120]
            classes[cls] += 1
            examples[cls].append(key)
    for cls, n in classes.most_common():
        print(f"{n:4d}  {cls}  e.g. {examples[cls][:5]}")


if __name__ == "__main__":
    main()
