"""C functions whose results may change between calls run split (torch runs them on every call),
never baked into the program; pure ones run at trace time and give eager's result."""

from __future__ import annotations

import copy
import functools
import logging
import math
import random
import time
from typing import Any

import pytest
import torch
from runs_by_torch import call_eagerly, call_split

import thunder

_outside_iterator = iter(range(100))


@pytest.mark.parametrize("kind", ["random.random", "time.time", "next-outside-iterator"])
def test_impure_call_runs_split_with_the_users_line(kind: str) -> None:
    # Its result would become a constant of a compiled program: torch runs the call (split),
    # asking again on every call, as eager does.
    fn = {
        "random.random": lambda x: x * random.random(),
        "time.time": lambda x: x * time.time(),
        "next-outside-iterator": lambda x: x * next(_outside_iterator),
    }[kind]
    jf = thunder.jit(fn)
    for _ in range(2):
        random.seed(5)
        before, expected_next = time.time(), next(copy.copy(_outside_iterator))
        ones = torch.ones(2, dtype=torch.float64)  # time.time() to the microsecond
        got = call_split(jf, ones, match=r"test_impure_calls\.py:\d+")
        if kind == "random.random":
            random.seed(5)
            torch.testing.assert_close(got, fn(ones))
        elif kind == "time.time":
            assert before <= got[0].item() <= time.time()
        else:
            assert got.tolist() == [expected_next] * 2  # the iterator advanced once per call


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


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


_LOG = logging.getLogger("thunder_tests.logging_in_forward")


@functools.lru_cache(None)
def _warn_once(self: logging.Logger, msg: str) -> None:
    self.warning(msg)


def _logs(x: torch.Tensor) -> torch.Tensor:
    _LOG.warning("rows %d", x.shape[0])
    _LOG.warning_once("only once")  # type: ignore[attr-defined]
    _LOG.debug("sum %s", x.sum())
    _LOG.log(logging.ERROR, "at %s", "error", extra={"tag": 7})
    return x * 2


def test_logging_in_the_function_logs_on_every_call_as_eager() -> None:
    # The logging module takes locks and reads the clock (refused as impure while tracing):
    # a logger's output methods are replayed by the epilogue with each call's values.
    records = _Records()
    _LOG.addHandler(records)
    _LOG.setLevel(logging.DEBUG)
    _LOG.propagate = False
    before = vars(logging.Logger).get("warning_once")  # transformers' own, when imported
    logging.Logger.warning_once = _warn_once  # type: ignore[attr-defined]  # as transformers does
    try:
        inputs = (torch.ones(2), torch.full((2,), 3.0))
        for x in inputs:
            _logs(x)
        expected = [r.getMessage() for r in records.records]
        assert expected[2] == "sum tensor(2.)" and len(expected) == 7
        records.records.clear()
        _warn_once.cache_clear()
        j = thunder.jit(_logs)
        for x in inputs:
            torch.testing.assert_close(j(x), x * 2)
        assert [r.getMessage() for r in records.records] == expected
        assert records.records[3].tag == 7  # type: ignore[attr-defined]
        assert thunder.compile_stats(j).compilations == 1
    finally:
        _LOG.removeHandler(records)
        if before is None:
            del logging.Logger.warning_once  # type: ignore[attr-defined]
        else:
            logging.Logger.warning_once = before  # type: ignore[attr-defined]


# -- functions their library marks as constant for the process ----------------------------------

PROBED: list[str] = []


def _assume_constant(fn: Any) -> Any:
    # What torch._dynamo.assume_constant_result sets (transformers sets it without importing
    # torch on its install probes and version checks).
    fn._dynamo_marked_constant = True
    return fn


@functools.lru_cache
@_assume_constant
def _installed(name: str) -> bool:
    PROBED.append(name)
    return time.time() > 0  # impure inside: run once, as the cache makes eager do


@functools.lru_cache
def _unmarked(name: str) -> bool:
    return time.time() > 0


def test_a_cached_function_marked_constant_runs_once_and_its_result_is_a_constant() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return x * 2 if _installed("torch") else x

    PROBED.clear()
    _installed.cache_clear()
    jitted = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(jitted(x), f(x))
    assert PROBED == ["torch"]  # once, while tracing; then the cache answers, as in eager
    assert thunder.compile_stats(jitted).compilations == 1


def test_a_cached_function_without_the_marker_runs_eagerly() -> None:
    # Its cache decides on each call whether it runs: torch.compile (split) would ignore the
    # cache and run it on every call, so the call runs eagerly (tests/thunder/
    # test_effects_around_errors.py checks the cache's counts and the function's effects).
    def f(x: torch.Tensor) -> torch.Tensor:
        return x * 2 if _unmarked("torch") else x

    x = torch.randn(3)
    torch.testing.assert_close(call_eagerly(thunder.jit(f), x, match="_unmarked"), f(x))
