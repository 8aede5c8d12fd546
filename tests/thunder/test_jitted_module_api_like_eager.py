"""``thunder.jit(module)`` acts as the module in ``nn.Module``'s API (thunder/module.py): the
names it and a module holding it give (``named_modules``, ``named_parameters``, ``state_dict``),
what is registered on it (buffers, parameters, submodules, state-dict hooks), its ``training``
flag, the container protocol of an ``nn.Sequential``, and the global module hooks, which fire
once per module as in eager. Each test compares with an identical eager module."""

from __future__ import annotations

import copy
import pickle
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from torch.nn.modules.module import (
    register_module_forward_hook,
    register_module_forward_pre_hook,
    register_module_full_backward_hook,
    register_module_full_backward_pre_hook,
)

import thunder


class _Net(torch.nn.Module):
    """Parameters, a buffer and submodules at the top and below; reads ``training``, an
    attribute and what ``register_buffer``/``add_module`` may add."""

    def __init__(self) -> None:
        super().__init__()
        self.l = torch.nn.Linear(4, 4)
        self.ln = torch.nn.LayerNorm(4)
        self.register_buffer("b", torch.ones(4))
        self.p = torch.nn.Parameter(torch.zeros(4))
        self.scale = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln(self.l(x)) * self.scale + self.b + self.p
        if hasattr(self, "extra"):
            y = y + self.extra
        if hasattr(self, "head"):
            y = self.head(y)
        if hasattr(self, "q"):
            y = y * self.q
        return y * 2 if self.training else y - 1


class _Outer(torch.nn.Module):
    def __init__(self, inner: torch.nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.out = torch.nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.inner(x))


def _pair(make: Callable[[], torch.nn.Module] = _Net) -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    model = make()
    return copy.deepcopy(model), thunder.jit(model)


def _same_outputs_and_grads(
    eager: torch.nn.Module, jitted: torch.nn.Module, calls: int = 3
) -> None:
    for _ in range(calls):
        x = torch.randn(3, 4)
        xe, xj = x.clone().requires_grad_(), x.clone().requires_grad_()
        ye, yj = eager(xe), jitted(xj)
        torch.testing.assert_close(yj, ye)
        ye.sum().backward()
        yj.sum().backward()
        torch.testing.assert_close(xj.grad, xe.grad)
        grads_e = {n: p.grad for n, p in eager.named_parameters()}
        grads_j = {n: p.grad for n, p in jitted.named_parameters()}
        assert grads_j.keys() == grads_e.keys()
        for name, grad in grads_e.items():
            torch.testing.assert_close(grads_j[name], grad)
        eager.zero_grad()
        jitted.zero_grad()


# -- names --------------------------------------------------------------------------------------


def _names(pairs: Iterator[tuple[str, Any]]) -> list[str]:
    return [name for name, _ in pairs]


def test_names_are_the_eager_modules() -> None:
    eager, jm = _pair()
    for method in ("named_modules", "named_children", "named_parameters", "named_buffers"):
        assert _names(getattr(jm, method)()) == _names(getattr(eager, method)()), method
    assert list(jm.state_dict()) == list(eager.state_dict())
    assert len(list(jm.modules())) == len(list(eager.modules()))
    assert len(list(jm.children())) == len(list(eager.children()))
    assert [p.shape for p in jm.parameters()] == [p.shape for p in eager.parameters()]
    model = jm.get_model()
    # the modules below the top are the original's own
    assert dict(jm.named_modules())["l"] is model.l
    assert jm.get_submodule("ln") is model.ln
    assert jm.get_parameter("l.weight") is model.l.weight
    assert jm.get_buffer("b") is model.b  # a top-level buffer too


def test_a_module_holding_a_jitted_one_names_it_as_eager() -> None:
    torch.manual_seed(0)
    inner = _Net()
    eager = _Outer(copy.deepcopy(inner))
    outer = _Outer(thunder.jit(inner))
    outer.out.load_state_dict(eager.out.state_dict())
    for method in ("named_modules", "named_parameters", "named_buffers", "named_children"):
        assert _names(getattr(outer, method)()) == _names(getattr(eager, method)()), method
    assert list(outer.state_dict()) == list(eager.state_dict())
    assert outer.get_submodule("inner.l") is inner.l
    assert outer.get_parameter("inner.p") is inner.p
    # the paths named_parameters gives load, as state_dict's keys do
    paths = dict(outer.named_parameters()) | dict(outer.named_buffers())
    assert outer.load_state_dict({k: v.detach().clone() for k, v in paths.items()})
    _same_outputs_and_grads(eager, outer)


def _weight_decay_groups(model: torch.nn.Module) -> tuple[list[str], list[str]]:
    """nanoGPT's ``configure_optimizers``: modules' names joined with their parameters' names."""
    decay, no_decay = set(), set()
    for mn, module in model.named_modules():
        for pn, _ in module.named_parameters(recurse=False):
            fpn = f"{mn}.{pn}" if mn else pn
            if pn.endswith("bias") or isinstance(module, torch.nn.LayerNorm):
                no_decay.add(fpn)
            else:
                decay.add(fpn)
    params = dict(model.named_parameters())
    assert not (decay | no_decay) ^ params.keys()
    return sorted(decay), sorted(no_decay)


@pytest.mark.parametrize("nested", [False, True], ids=["jitted", "held-by-a-module"])
def test_named_modules_join_with_named_parameters(nested: bool) -> None:
    eager, jm = _pair()
    if nested:
        eager, jm = _Outer(eager), _Outer(jm)
    assert _weight_decay_groups(jm) == _weight_decay_groups(eager)


def test_apply_sees_the_original_modules() -> None:
    def init(module: torch.nn.Module) -> None:
        if isinstance(module, torch.nn.Linear):
            torch.nn.init.constant_(module.weight, 0.5)
        seen.append(type(module).__name__)

    for make in (_Net, lambda: torch.nn.Linear(4, 4)):
        eager, jm = _pair(make)
        seen: list[str] = []
        assert eager.apply(init) is eager
        expected, seen = seen, []
        assert jm.apply(init) is jm
        assert seen == expected
        _same_outputs_and_grads(eager, jm)


def test_to_runs_the_classes_own_apply() -> None:
    class Recording(torch.nn.Linear):
        def _apply(self, fn: Any, recurse: bool = True) -> Any:
            self.applied = getattr(self, "applied", 0) + 1
            return super()._apply(fn, recurse)

    eager, jm = _pair(lambda: Recording(4, 4))
    eager.double()
    assert jm.double() is jm
    assert jm.get_model().applied == eager.applied == 1
    assert jm.weight.dtype is torch.float64
    x = torch.randn(2, 4, dtype=torch.float64)
    torch.testing.assert_close(jm(x), eager(x))


# -- a container --------------------------------------------------------------------------------


def test_a_jitted_sequential_indexes_and_iterates_as_eager() -> None:
    eager, jm = _pair(
        lambda: torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
    )
    model = jm.get_model()
    assert len(jm) == len(eager) == 3
    assert jm[0] is model[0] and jm[-1] is model[2]
    assert [type(m) for m in jm] == [type(m) for m in eager]
    assert type(jm[1:]) is type(eager[1:]) and len(jm[1:]) == 2
    assert model[1] in list(jm) and bool(jm)
    _same_outputs_and_grads(eager, jm)
    jm[1] = torch.nn.Tanh()  # the original's layer is replaced: the program recompiles
    eager[1] = torch.nn.Tanh()
    _same_outputs_and_grads(eager, jm)
    jm.append(torch.nn.Sigmoid())
    eager.append(torch.nn.Sigmoid())
    assert len(jm) == 4
    _same_outputs_and_grads(eager, jm)


def test_a_jitted_module_dict_and_a_plain_module_as_eager() -> None:
    modules = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 2)})
    jm = thunder.jit(copy.deepcopy(modules))
    assert "a" in jm and list(jm) == list(modules) == ["a"] and len(jm) == 1
    plain = thunder.jit(_Net())
    assert bool(plain)  # no __len__ of its own: true, as any module
    with pytest.raises(TypeError):
        len(plain)
    with pytest.raises(TypeError):
        plain[0]


# -- what is registered or set on it ------------------------------------------------------------


def test_registered_buffers_parameters_and_modules_reach_the_forward() -> None:
    eager, jm = _pair()
    _same_outputs_and_grads(eager, jm)
    for module in (eager, jm):
        module.register_buffer("extra", torch.full((4,), 10.0))
        module.register_parameter("q", torch.nn.Parameter(torch.full((4,), 3.0)))
    _same_outputs_and_grads(eager, jm)
    torch.manual_seed(1)
    eager.add_module("head", torch.nn.Linear(4, 4))
    torch.manual_seed(1)
    jm.register_module("head", torch.nn.Linear(4, 4))
    _same_outputs_and_grads(eager, jm)
    assert list(jm.state_dict()) == list(eager.state_dict())
    assert _names(jm.named_parameters()) == _names(eager.named_parameters())
    assert jm.get_buffer("extra") is jm.get_model().extra
    for module in (eager, jm):
        module.scale = 3.0  # an attribute of the module: its forward reads the new value
        del module.extra
    assert jm.get_model().scale == 3.0
    _same_outputs_and_grads(eager, jm)
    assert list(jm.state_dict()) == list(eager.state_dict())


def test_training_is_the_modules_own() -> None:
    eager, jm = _pair()
    model = jm.get_model()
    for switch in (
        lambda m: m.eval(),
        lambda m: m.train(),
        lambda m: m.train(False),
        lambda m: setattr(m, "training", True),
    ):
        switch(eager)
        switch(model)
        assert jm.training == model.training == eager.training
        _same_outputs_and_grads(eager, jm)
    for switch in (lambda m: m.eval(), lambda m: m.train()):
        assert switch(jm) is jm
        switch(eager)
        assert model.training == jm.training == eager.training
        assert [m.training for m in model.modules()] == [m.training for m in eager.modules()]
        _same_outputs_and_grads(eager, jm)
    jm.training = False
    eager.training = False
    assert not model.training
    _same_outputs_and_grads(eager, jm)


def test_state_dict_hooks_registered_on_the_jitted_module_run_as_eager() -> None:
    def register(module: torch.nn.Module, log: list[Any]) -> None:
        module.register_state_dict_pre_hook(lambda *a: log.append("sd_pre"))

        def post(mod: Any, sd: Any, prefix: str, meta: Any) -> None:
            log.append(("sd_post", prefix))
            sd[prefix + "extra"] = torch.ones(1)

        module.register_state_dict_post_hook(post)
        module._register_state_dict_hook(lambda mod, sd, prefix, meta: log.append("sd_hook"))
        module.register_load_state_dict_pre_hook(lambda *a: log.append("load_pre"))
        module.register_load_state_dict_post_hook(lambda *a: log.append("load_post"))

    def run(module: torch.nn.Module, holder: torch.nn.Module, log: list[Any]) -> None:
        register(module, log)
        for m in (module, holder):
            state = m.state_dict()
            log.append(sorted(state))
            state = {k: v for k, v in state.items() if not k.endswith("extra")}
            log.append(m.load_state_dict(state, strict=False))

    eager, jm = _pair()
    logs: dict[str, list[Any]] = {"eager": [], "thunder": []}
    run(eager, _Outer(eager), logs["eager"])
    run(jm, _Outer(jm), logs["thunder"])
    assert logs["thunder"] == logs["eager"]
    # hooks registered on the original run once
    calls: list[str] = []
    jm.get_model().register_state_dict_pre_hook(lambda *a: calls.append("model"))
    jm.state_dict()
    assert calls == ["model"]


# -- global module hooks: once per module, as in eager -------------------------------------------


@contextmanager
def _global_hook(register: Callable[..., Any], hook: Callable[..., Any]) -> Iterator[None]:
    handle = register(hook)
    try:
        yield
    finally:
        handle.remove()


def _hook_calls(
    register: Callable[..., Any], module: torch.nn.Module, calls: int = 3
) -> tuple[list[str], list[torch.Tensor]]:
    """The modules the global hook saw (forward and backward), and the outputs and gradients."""
    seen: list[str] = []

    def hook(mod: Any, first: Any, *rest: Any) -> Any:
        seen.append(type(mod).__name__)
        if register is register_module_forward_hook:
            return rest[0] * 2  # doubles the output of every module it fires for
        return None

    results = []
    torch.manual_seed(5)
    with _global_hook(register, hook):
        for _ in range(calls):
            x = torch.randn(3, 4, requires_grad=True)
            y = module(x)
            y.sum().backward()
            results += [y.detach(), x.grad]
    return seen, results


_FORWARD_HOOKS = [register_module_forward_hook, register_module_forward_pre_hook]
_BACKWARD_HOOKS = [register_module_full_backward_hook, register_module_full_backward_pre_hook]


def _sequential() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())


def _global_hook_calls(register: Any, own_hook: bool) -> tuple[list[str], list[str], Any]:
    eager, jm = _pair(_sequential)
    if own_hook:  # the jitted module takes nn.Module's call path for a hook of its own
        for module in (eager, jm):
            module.register_forward_hook(lambda mod, args, out: out + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # backward hooks run split
        seen_e, results_e = _hook_calls(register, eager)
        seen_j, results_j = _hook_calls(register, jm)
    for got, expected in zip(results_j, results_e, strict=True):
        torch.testing.assert_close(got, expected)
    # and none is left behind, nor hidden
    assert _hook_calls(lambda hook: register(lambda *a: None), jm)[0] == []
    return seen_e, seen_j, jm


@pytest.mark.parametrize("own_hook", [False, True], ids=["no-own-hook", "own-forward-hook"])
@pytest.mark.parametrize("register", _FORWARD_HOOKS, ids=lambda r: r.__name__)
def test_global_module_hooks_fire_once_per_module(register: Any, own_hook: bool) -> None:
    seen_e, seen_j, _ = _global_hook_calls(register, own_hook)
    assert seen_j == seen_e


@pytest.mark.parametrize("own_hook", [False, True], ids=["no-own-hook", "own-forward-hook"])
@pytest.mark.parametrize("register", _BACKWARD_HOOKS, ids=lambda r: r.__name__)
def test_global_backward_hooks_never_fire_for_the_wrapper(register: Any, own_hook: bool) -> None:
    seen_e, seen_j, _ = _global_hook_calls(register, own_hook)
    assert "ThunderModule" not in seen_j
    assert set(seen_e) <= set(seen_j)


@pytest.mark.parametrize("register", _BACKWARD_HOOKS, ids=lambda r: r.__name__)
def test_global_backward_hooks_fire_once_per_module(register: Any) -> None:
    seen_e, seen_j, jm = _global_hook_calls(register, False)
    assert thunder.compile_stats(jm).split_calls > 0
    assert seen_j == seen_e


def test_a_global_hook_registered_by_the_wrappers_own_hook_stays() -> None:
    handles: list[Any] = []

    def registers(mod: Any, args: Any) -> None:
        if not handles:
            handles.append(register_module_forward_hook(lambda m, a, out: out * 3))

    eager, jm = _pair(_sequential)
    x = torch.randn(2, 4)
    for module in (eager, jm):
        module.register_forward_pre_hook(registers)
    with _global_hook(register_module_forward_pre_hook, lambda *a: None):
        try:
            ye = eager(x)
            handles.pop().remove()
            yj = jm(x)
            torch.testing.assert_close(yj, ye)
            torch.testing.assert_close(jm(x), eager(x))  # the registered hook is still there
        finally:
            for handle in handles:
                handle.remove()


# -- copies keep it acting as the module --------------------------------------------------------


def test_copies_act_on_their_own_module() -> None:
    eager, jm = _pair()
    for cp in (copy.deepcopy(jm), pickle.loads(pickle.dumps(jm))):
        model = cp.get_model()
        assert model is not jm.get_model()
        assert cp._parameters is model._parameters and cp._modules is model._modules
        cp.register_buffer("extra", torch.ones(4))
        assert "extra" in model._buffers and "extra" not in jm.state_dict()
        cp.eval()
        assert not model.training and jm.training
        assert _names(cp.named_modules()) == _names(eager.named_modules())
    shallow = copy.copy(jm)
    # eager's copy.copy of a module: its own __dict__, the same containers
    assert shallow.get_model() is not jm.get_model()
    assert shallow.get_model()._buffers is jm.get_model()._buffers
    shallow.register_buffer("extra", torch.ones(4))
    assert "extra" in jm.state_dict()  # the same module's


def test_global_module_hooks_fire_once_on_the_split_path() -> None:
    @torch.compiler.disable
    def natively(y: torch.Tensor) -> torch.Tensor:
        return y + 1

    class Split(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l = torch.nn.Linear(4, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.l(natively(x))

    eager, jm = _pair(Split)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        seen_e, results_e = _hook_calls(register_module_forward_hook, eager)
        seen_j, results_j = _hook_calls(register_module_forward_hook, jm)
    assert thunder.compile_stats(jm).split_calls > 0
    assert seen_j == seen_e
    for got, expected in zip(results_j, results_e, strict=True):
        torch.testing.assert_close(got, expected)


def test_global_module_hooks_fire_once_through_module_compile() -> None:
    eager, jm = _pair(_sequential)
    jm.compile(backend="eager")  # nn.Module.compile(): its call path compiled by dynamo
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        seen_e, results_e = _hook_calls(register_module_forward_hook, eager)
        seen_j, results_j = _hook_calls(register_module_forward_hook, jm)
    assert seen_j == seen_e
    for got, expected in zip(results_j, results_e, strict=True):
        torch.testing.assert_close(got, expected)
