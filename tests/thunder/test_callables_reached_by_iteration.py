"""Callables the program reaches by iterating an outside container (``for f in
self.callbacks``, the hook dicts ``nn.Module.__call__`` iterates) are guarded as when reached by
index or attribute: what a bound method reads from its object, a function's defaults and code,
and their side effects on every call. Hooks put into a module's hook dicts without torch's
registration API are run too. Each test compares with eager over several calls whose state
changes between them."""

from __future__ import annotations

import copy
import functools
from collections import OrderedDict
from typing import Any

import pytest
import torch

import thunder

torch.set_num_threads(1)


class Scaler:
    def __init__(self) -> None:
        self.k = 1.0

    def apply(self, y: torch.Tensor) -> torch.Tensor:
        return y * self.k

    def hook(self, mod: Any, args: Any, out: torch.Tensor) -> torch.Tensor:
        return out * self.k


class Counter:
    def __init__(self) -> None:
        self.n = 0

    def step(self, y: torch.Tensor) -> torch.Tensor:
        self.n += 1
        return y + self.n

    def hook(self, mod: Any, args: Any, out: torch.Tensor) -> torch.Tensor:
        self.n += 1
        return out + self.n


class Callbacks(torch.nn.Module):
    """Runs the callbacks it holds, in order, after a linear layer."""

    def __init__(self, callbacks: Any, nested: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(3, 3)
        self.callbacks = callbacks
        self.nested = nested

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        groups = self.callbacks if self.nested else [self.callbacks]
        for group in groups:
            for f in group.values() if isinstance(group, dict) else group:
                y = f(y)
        return y


def _compare(model: torch.nn.Module, change: Any, calls: int = 4) -> None:
    jitted = thunder.jit(model)
    for i in range(calls):
        change(i)
        x = torch.randn(2, 3)
        torch.testing.assert_close(jitted(x), model(x), msg=f"call {i}")


@pytest.mark.parametrize("container", ["list", "tuple", "dict", "nested"])
def test_a_bound_methods_object_read_through_iteration_is_guarded(container: str) -> None:
    scaler = Scaler()
    if container == "list":
        model = Callbacks([scaler.apply])
    elif container == "tuple":
        model = Callbacks((scaler.apply,))
    elif container == "dict":
        model = Callbacks({"scale": scaler.apply})
    else:
        model = Callbacks([[scaler.apply], [torch.tanh]], nested=True)

    def change(i: int) -> None:
        scaler.k = float(i + 1)

    _compare(model, change)


_CONFIG = {"scale": 1.0}


def _scaled(y: torch.Tensor, config: dict[str, float] = _CONFIG) -> torch.Tensor:
    return y * config["scale"]


def test_an_iterated_functions_mutable_default_is_guarded() -> None:
    def change(i: int) -> None:
        _CONFIG["scale"] = float(i + 1)

    try:
        _compare(Callbacks([_scaled]), change)
    finally:
        _CONFIG["scale"] = 1.0


def test_an_iterated_functions_kwdefaults_and_code_are_guarded() -> None:
    def plain(y: torch.Tensor) -> torch.Tensor:
        return y * 1

    def keyword(y: torch.Tensor, *, k: float = 1.0) -> torch.Tensor:
        return y * k

    codes = [(lambda y: y * 1).__code__, (lambda y: y * 5).__code__]

    def change(i: int) -> None:
        keyword.__kwdefaults__ = {"k": float(i + 1)}
        plain.__code__ = codes[i % 2]

    _compare(Callbacks([plain, keyword]), change)


def test_a_closure_reached_by_iteration_reads_its_cell_every_call() -> None:
    box = [1.0]

    def make() -> Any:
        def scaled(y: torch.Tensor) -> torch.Tensor:
            return y * box[0]

        return scaled

    def change(i: int) -> None:
        box[0] = float(i + 1)

    _compare(Callbacks([make()]), change)


def test_side_effects_of_an_iterated_bound_method_run_every_call() -> None:
    eager_counter, jit_counter = Counter(), Counter()
    eager_model = Callbacks([eager_counter.step])
    jit_model = Callbacks([jit_counter.step])
    jitted = thunder.jit(jit_model)
    for i in range(4):
        x = torch.randn(2, 3)
        torch.testing.assert_close(jitted(x), eager_model(x), msg=f"call {i}")
        assert jit_counter.n == eager_counter.n == i + 1


def _linear() -> torch.nn.Sequential:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(4, 4))


@pytest.mark.parametrize("owner", ["object", "module"])
def test_a_forward_hooks_bound_state_is_read_every_call(owner: str) -> None:
    class Gate(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.k = 1.0

        def hook(self, mod: Any, args: Any, out: torch.Tensor) -> torch.Tensor:
            return out * self.k

    scaler: Any = Scaler() if owner == "object" else Gate()
    model = _linear()
    model[0].register_forward_hook(scaler.hook)
    jitted = thunder.jit(model)
    for i in range(4):
        scaler.k = float(i + 1)
        x = torch.randn(2, 4)
        torch.testing.assert_close(jitted(x), model(x), msg=f"call {i}")


def test_a_forward_hooks_side_effects_and_default_run_every_call() -> None:
    def build() -> tuple[torch.nn.Sequential, list[int], Counter]:
        model, log, counter = _linear(), [], Counter()

        def logging_hook(mod: Any, args: Any, out: torch.Tensor, log: list[int] = log) -> None:
            log.append(1)

        model[0].register_forward_hook(logging_hook)
        model[0].register_forward_hook(counter.hook)
        return model, log, counter

    eager, eager_log, eager_counter = build()
    model, log, counter = build()
    jitted = thunder.jit(model)
    for i in range(4):
        x = torch.randn(2, 4)
        torch.testing.assert_close(jitted(x), eager(x), msg=f"call {i}")
        assert (len(log), counter.n) == (len(eager_log), eager_counter.n) == (i + 1, i + 1)


def test_a_hooks_replaced_code_runs() -> None:
    def hook(mod: Any, args: Any, out: torch.Tensor) -> torch.Tensor:
        return out * 1

    model = _linear()
    model[0].register_forward_hook(hook)
    jitted = thunder.jit(model)
    codes = [(lambda mod, args, out: out * 1).__code__, (lambda mod, args, out: out * 5).__code__]
    for i in range(4):
        hook.__code__ = codes[i % 2]
        x = torch.randn(2, 4)
        torch.testing.assert_close(jitted(x), model(x), msg=f"call {i}")


def _times_ten(mod: Any, args: Any, out: torch.Tensor) -> torch.Tensor:
    return out * 10


@pytest.mark.parametrize("guard_tree", [True, False])
@pytest.mark.parametrize("how", ["insert", "new dict", "copied from another module"])
@pytest.mark.parametrize("calls_before", [1, 3])
def test_hooks_put_into_a_modules_hook_dict_directly_run(
    how: str, calls_before: int, guard_tree: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not guard_tree:
        monkeypatch.setenv("THUNDER_GUARD_TREE", "0")  # the Python prologue's own check
    donor = torch.nn.Linear(4, 4)
    donor.register_forward_hook(_times_ten)  # (before the calls: no hook is registered after)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
    eager = copy.deepcopy(model)
    jitted = thunder.jit(model)
    for _ in range(calls_before):
        x = torch.randn(2, 4)
        torch.testing.assert_close(jitted(x), eager(x))
    for m in (model, eager):
        if how == "insert":
            m[0]._forward_hooks[12345] = _times_ten
        elif how == "new dict":
            m[0]._forward_hooks = OrderedDict({1: _times_ten})
        else:
            m[0]._forward_hooks.update(donor._forward_hooks)
    for i in range(2):
        x = torch.randn(2, 4)
        torch.testing.assert_close(jitted(x), eager(x), msg=f"call {i} after the hook")
    for m in (model, eager):
        m[0]._forward_hooks.clear()
    x = torch.randn(2, 4)
    torch.testing.assert_close(jitted(x), eager(x), msg="after the hook is removed")


@pytest.mark.parametrize("guard_tree", [True, False])
def test_a_pre_hook_put_into_the_dict_directly_runs(
    guard_tree: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not guard_tree:
        monkeypatch.setenv("THUNDER_GUARD_TREE", "0")
    model = _linear()
    eager = copy.deepcopy(model)
    jitted = thunder.jit(model)
    x = torch.randn(2, 4)
    torch.testing.assert_close(jitted(x), eager(x))
    for m in (model, eager):
        m[0]._forward_pre_hooks[7] = lambda mod, args: (args[0] * 3,)
    for i in range(2):
        x = torch.randn(2, 4)
        torch.testing.assert_close(jitted(x), eager(x), msg=f"call {i}")


def _record(log: list[int], *rest: Any) -> Any:
    log.append(1)
    return rest[-1] if len(rest) == 1 else None


@pytest.mark.parametrize("where", ["hook", "attribute", "iterated"])
def test_a_partial_whose_bound_list_the_call_appends_to(where: str) -> None:
    class Calls(torch.nn.Module):
        def __init__(self, log: list[int]) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.lin = torch.nn.Linear(4, 4)
            self.cb = functools.partial(_record, log)
            self.cbs = [self.cb]

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.lin(x)
            if where == "attribute":
                return self.cb(y)
            if where == "iterated":
                for f in self.cbs:
                    y = f(y)
            return y

    def build() -> tuple[torch.nn.Module, list[int]]:
        log: list[int] = []
        if where == "hook":
            model: torch.nn.Module = _linear()
            model[0].register_forward_hook(functools.partial(_record, log))
        else:
            model = Calls(log)
        return model, log

    eager, eager_log = build()
    model, log = build()
    jitted = thunder.jit(model)
    for i in range(4):
        x = torch.randn(2, 4)
        torch.testing.assert_close(jitted(x), eager(x), msg=f"call {i}")
        assert len(log) == len(eager_log) == i + 1
