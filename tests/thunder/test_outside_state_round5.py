"""Outside state C code reads or writes without a hook (numpy arrays, a ``Counter``), a class's
``__dict__``, a ``MappingProxyType`` attribute, and global module hooks in the split path:
guarded, replayed or run natively, never stale. Each test compares with eager over several
calls, changing the state between them."""

from __future__ import annotations

import collections
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from torch.nn.modules.module import register_module_forward_hook, register_module_forward_pre_hook

import thunder

ARRAY = np.arange(4.0)


def _fresh_array() -> np.ndarray:
    return np.random.default_rng().standard_normal(4)


def _compare_over_calls(
    fn: Callable[[torch.Tensor], torch.Tensor], change: Callable[[int], None], calls: int = 4
) -> Any:
    """``fn`` jitted against eager, with ``change(i)`` applied to the outside state after call
    ``i``; warnings (a call run split) are allowed."""
    jf = thunder.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for i in range(calls):
            x = torch.randn(3, dtype=torch.float64)
            torch.testing.assert_close(jf(x), fn(x))
            change(i)
    return jf


def _set_array(i: int) -> None:
    ARRAY[:] = _fresh_array()


@pytest.mark.parametrize(
    "read",
    [
        pytest.param(lambda x: x * float(np.mean(ARRAY)), id="np.mean"),
        pytest.param(lambda x: x * float(np.dot(ARRAY, ARRAY)), id="np.dot"),
        pytest.param(lambda x: x * float(np.mean(ARRAY[1:])), id="mean-of-a-view"),
        pytest.param(lambda x: x * float((ARRAY + 1)[0]), id="native-operator"),
        pytest.param(lambda x: x * sum(float(v) for v in ARRAY), id="iterating"),
        pytest.param(lambda x: x * float((ARRAY > 0).sum()), id="comparison"),
    ],
)
def test_a_global_array_changed_in_place_is_read_again(read: Any) -> None:
    ARRAY[:] = np.arange(4.0)
    _compare_over_calls(read, _set_array)


def test_an_argument_array_changed_in_place_is_read_again() -> None:
    def f(x: torch.Tensor, a: np.ndarray) -> torch.Tensor:
        return x * float(np.mean(a))

    jf = thunder.jit(f)
    a = _fresh_array()
    for _ in range(3):
        x = torch.randn(3, dtype=torch.float64)
        torch.testing.assert_close(jf(x, a), f(x, a))
        a += 1.0


def test_an_array_only_made_a_tensor_is_not_guarded_by_its_values() -> None:
    jf = _compare_over_calls(lambda x: x * torch.from_numpy(ARRAY).sum(), _set_array)
    assert thunder.compile_stats(jf).compilations == 1


@pytest.mark.parametrize(
    "write",
    [
        pytest.param(lambda a: np.add(a, 1, out=a), id="np.add-out"),
        pytest.param(lambda a: np.copyto(a, a * 2), id="np.copyto"),
        pytest.param(lambda a: a.sort(), id="sort"),
        pytest.param(lambda a: np.negative(a[1:], out=a[1:]), id="through-a-view"),
    ],
)
def test_a_write_into_an_outside_array_happens_on_every_call(write: Any) -> None:
    eager_state, jit_state = np.array([3.0, 1.0, 2.0]), np.array([3.0, 1.0, 2.0])

    def program(state: np.ndarray) -> Callable[[torch.Tensor], torch.Tensor]:
        def f(x: torch.Tensor) -> torch.Tensor:
            write(state)
            return x + 1

        return f

    jf = thunder.jit(program(jit_state))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for i in range(3):
            x = torch.randn(3)
            torch.testing.assert_close(jf(x), program(eager_state)(x))
            np.testing.assert_array_equal(jit_state, eager_state)
            eager_state[0] = jit_state[0] = 10.0 - i


def test_counter_update_on_an_outside_counter_happens_on_every_call() -> None:
    eager_counts, jit_counts = collections.Counter(), collections.Counter()

    def program(counts: collections.Counter[str]) -> Callable[[torch.Tensor], torch.Tensor]:
        def f(x: torch.Tensor) -> torch.Tensor:
            counts.update("ab")
            return x * 2

        return f

    jf = thunder.jit(program(jit_counts))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(3):
            x = torch.randn(3)
            torch.testing.assert_close(jf(x), program(eager_counts)(x))
            assert jit_counts == eager_counts


class _Holder:
    def method(self) -> int:
        return 1


@pytest.mark.parametrize(
    "names",
    [
        pytest.param(lambda o: type(o).__dict__, id="type-dict"),
        pytest.param(lambda o: vars(type(o)), id="vars-of-type"),
    ],
)
def test_a_method_added_to_the_class_is_seen(names: Any) -> None:
    cls = type("Fresh", (_Holder,), {"first": lambda self: 1})
    obj = cls()

    def f(x: torch.Tensor) -> torch.Tensor:
        return x * len([n for n in names(obj) if not n.startswith("_")])

    _compare_over_calls(f, lambda i: setattr(cls, f"added{i}", lambda self: i))


def test_a_method_of_the_class_replaced_is_seen() -> None:
    cls = type("Fresh", (_Holder,), {"first": lambda self: 1})
    obj = cls()

    def f(x: torch.Tensor) -> torch.Tensor:
        return x * sum(v(obj) for k, v in vars(type(obj)).items() if k == "first")

    _compare_over_calls(f, lambda i: setattr(cls, "first", lambda self, i=i: i + 2))


class _WithMappingProxy(torch.nn.Module):
    def __init__(self, table: dict[str, float]) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3, dtype=torch.float64)
        self.cfg = (types.MappingProxyType(table),)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.cfg[0]["a"] + len(self.cfg[0])


def test_a_mapping_proxy_attribute_is_read_and_guarded() -> None:
    table = {"a": 1.0}
    model = _WithMappingProxy(table)
    jm = thunder.jit(model)
    for i in range(3):
        x = torch.randn(2, 3, dtype=torch.float64)
        torch.testing.assert_close(jm(x), model(x))
        table["a"] = float(i + 2)
        table[f"k{i}"] = 0.0
    assert thunder.compile_stats(jm).eager_fallbacks == 0  # traced, not run eagerly


_LINEAR = torch.nn.Linear(3, 3)


@torch.compiler.disable
def _run_natively(y: torch.Tensor) -> torch.Tensor:
    return y


def _split_program(x: torch.Tensor) -> torch.Tensor:
    y = _run_natively(_LINEAR(x))
    return _LINEAR(y) * 2


@pytest.mark.parametrize(
    "register", [register_module_forward_hook, register_module_forward_pre_hook]
)
def test_split_path_sees_global_module_hooks_registered_later(register: Any) -> None:
    def hook(module: Any, inputs: Any, *output: Any) -> Any:
        return output[0] + 1 if output else (inputs[0] * 3,)

    jf = thunder.jit(_split_program)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        x = torch.randn(2, 3)
        for _ in range(2):
            torch.testing.assert_close(jf(x), _split_program(x))
        handle = register(hook)
        try:
            for _ in range(2):
                torch.testing.assert_close(jf(x), _split_program(x))
        finally:
            handle.remove()
        torch.testing.assert_close(jf(x), _split_program(x))
    assert thunder.compile_stats(jf).split_calls > 0


LOG: list[Any] = []


def _appends_to_the_log(x: torch.Tensor) -> torch.Tensor:
    LOG.append(x.sum())
    return x * 2


def _extends_the_log(x: torch.Tensor) -> torch.Tensor:
    LOG.extend([x.sum(), x.mean()])
    return x + 1


def _appends_and_reads_the_length(x: torch.Tensor) -> torch.Tensor:
    LOG.append(x.sum())
    return x * len(LOG)


def _appends_and_sums_the_log(x: torch.Tensor) -> torch.Tensor:
    LOG.append(1.0)
    return x * sum(LOG)


def _appends_then_iterates(x: torch.Tensor) -> torch.Tensor:
    LOG.append(2.0)
    return x * len([v for v in LOG])


def _tests_truth_then_appends(x: torch.Tensor) -> torch.Tensor:
    scale = 2.0 if LOG else 3.0
    LOG.append(x.sum())
    return x * scale


def _tests_length_then_appends(x: torch.Tensor) -> torch.Tensor:
    scale = len(LOG) < 3
    LOG.append(1.0)
    return x * (2.0 if scale else 5.0)


def _run_both(fn: Callable[[torch.Tensor], torch.Tensor], calls: int = 5) -> Any:
    """``fn`` jitted and eagerly, each with its own log (the same start), compared after every
    call: the results and what the log holds."""
    eager_log: list[Any] = []
    jit_log: list[Any] = []
    jf = thunder.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(calls):
            x = torch.randn(3)
            LOG[:] = eager_log
            expected = fn(x)
            eager_log = list(LOG)
            LOG[:] = jit_log
            torch.testing.assert_close(jf(x), expected)
            jit_log = list(LOG)
            assert len(jit_log) == len(eager_log)
            for a, b in zip(jit_log, eager_log):
                torch.testing.assert_close(torch.as_tensor(a), torch.as_tensor(b))
    LOG.clear()
    return jf


@pytest.mark.parametrize("fn", [_appends_to_the_log, _extends_the_log])
def test_appending_to_an_outside_list_is_one_program(fn: Any) -> None:
    jf = _run_both(fn)
    assert thunder.compile_stats(jf).compilations == 1


@pytest.mark.parametrize(
    "fn",
    [
        _appends_and_reads_the_length,
        _appends_and_sums_the_log,
        _appends_then_iterates,
        _tests_truth_then_appends,
        _tests_length_then_appends,
    ],
)
def test_a_list_appended_to_and_read_gives_eagers_result(fn: Any) -> None:
    _run_both(fn)


class _Recorder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.history: list[torch.Tensor] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        self.history.append(y.sum())
        return y


def test_a_module_appending_to_its_history_is_one_program() -> None:
    model = _Recorder()
    jm = thunder.jit(model)
    for i in range(5):
        x = torch.randn(2, 3)
        torch.testing.assert_close(jm(x), model.lin(x))
        assert len(model.history) == i + 1
        torch.testing.assert_close(model.history[-1], model.lin(x).sum())
    assert thunder.compile_stats(jm).compilations == 1


class _WithBuffer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 4)
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.scale


def test_functional_call_on_the_jitted_module_uses_the_given_tensors() -> None:
    model = _WithBuffer()
    jm = thunder.jit(model)
    for _ in range(3):
        x = torch.randn(5, 3)
        state = {k: torch.randn_like(v, requires_grad=True) for k, v in model.named_parameters()}
        state["scale"] = torch.randn(4)
        expected = torch.func.functional_call(model, state, (x,))
        (expected_grad,) = torch.autograd.grad(expected.sum(), [state["lin.weight"]])
        actual = torch.func.functional_call(jm, state, (x,))
        (actual_grad,) = torch.autograd.grad(actual.sum(), [state["lin.weight"]])
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(actual_grad, expected_grad)
        torch.testing.assert_close(jm(x), model(x))  # its own tensors again afterwards
    assert "scale" not in jm.__dict__ and jm.scale is model.scale


def test_a_split_call_leaves_distribution_validation_as_the_caller_set_it() -> None:
    """torch.compile's first compilation switches torch.distributions' argument validation off
    for the process; eager code after a call that runs split still validates."""

    def sample_text(mu: torch.Tensor) -> str:
        return f"{torch.distributions.Normal(mu, 1.0).mean}"  # text of a tensor: runs split

    jf = thunder.jit(sample_text)
    before = torch.distributions.Distribution._validate_args
    try:
        torch.distributions.Distribution.set_default_validate_args(True)
        mu = torch.randn(2)
        assert jf(mu) == sample_text(mu)
        assert thunder.compile_stats(jf).split_calls == 1
        with pytest.raises(ValueError):
            torch.distributions.Normal(mu, -1.0)
    finally:
        torch.distributions.Distribution.set_default_validate_args(before)
