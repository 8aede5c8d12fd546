"""A ``ThunderModule`` takes attribute writes, deletions, ``__class__`` assignments and class tests
as its wrapped module does: ``jm.X = v`` is ``model.X = v`` (class defaults, property setters, new
attributes, plain tensors in place of a parameter), so the ``torch.nn.utils`` reparametrizations
(weight_norm, spectral_norm, prune, parametrize) work on ``jm``, and ``isinstance(jm, nn.Linear)``
holds for a jitted Linear, as the init walks over ``model.modules()`` test."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.utils.prune as prune
from torch import nn
from torch.nn.utils import parametrizations, parametrize

import thunder

CACHES = [None, "symbolic values"]


def _jit(module: nn.Module, cache: str | None) -> Any:
    return thunder.jit(module) if cache is None else thunder.jit(module, cache=cache)


class _Scaled(nn.Module):
    scale_out = 1.0  # a class default, overridden per instance

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self._temperature = 1.0

    @property
    def temperature(self) -> float:
        return self._temperature

    @temperature.setter
    def temperature(self, value: float) -> None:
        self._temperature = value

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x) * self.scale_out / self.temperature
        extra = getattr(self, "extra_bias", None)
        return y if extra is None else y + extra


def _pair(make: Callable[[], nn.Module], cache: str | None) -> tuple[nn.Module, Any]:
    torch.manual_seed(0)
    eager = make()
    torch.manual_seed(0)
    return eager, _jit(make(), cache)


def _assert_same_calls(
    eager: nn.Module, jm: Any, shape: tuple[int, ...], calls: int = 3, *, forward: bool = False
) -> None:
    """Outputs and gradients (input and every parameter, by eager's names) equal eager's, of
    calls of the modules or (``forward``) of their ``forward``."""
    for _ in range(calls):
        x = torch.randn(*shape)
        xe, xj = x.clone().requires_grad_(), x.clone().requires_grad_()
        ye, yj = (eager.forward(xe), jm.forward(xj)) if forward else (eager(xe), jm(xj))
        torch.testing.assert_close(yj, ye)
        params_e = dict(eager.named_parameters())
        params_j = dict(jm.named_parameters())
        assert list(params_j) == list(params_e)
        grads_e = torch.autograd.grad(
            ye.square().sum(), [xe, *params_e.values()], allow_unused=True
        )
        grads_j = torch.autograd.grad(
            yj.square().sum(), [xj, *params_j.values()], allow_unused=True
        )
        for ge, gj in zip(grads_e, grads_j):
            assert (ge is None) == (gj is None)
            if ge is not None:
                torch.testing.assert_close(gj, ge)


# -- jm.X = v is model.X = v ----------------------------------------------------------------------


@pytest.mark.parametrize("cache", CACHES)
def test_class_default_property_and_new_attribute_reach_the_model(cache: str | None) -> None:
    eager, jm = _pair(_Scaled, cache)
    _assert_same_calls(eager, jm, (2, 4), calls=1)
    steps: list[tuple[str, Any]] = [
        ("scale_out", 3.0),
        ("temperature", 0.5),
        ("extra_bias", torch.full((4,), 10.0)),
        ("scale_out", 2.0),
    ]
    for name, value in steps:
        setattr(eager, name, value)
        setattr(jm, name, value)
        assert getattr(jm, name) is getattr(eager, name) or getattr(jm, name) == value
        assert name not in vars(jm)  # the model's, not the wrapper's
        _assert_same_calls(eager, jm, (2, 4))
    for name in ("extra_bias", "scale_out"):  # back to no attribute, to the class default
        delattr(eager, name)
        delattr(jm, name)
        _assert_same_calls(eager, jm, (2, 4))
    assert jm.scale_out == 1.0 and not hasattr(jm, "extra_bias")


@pytest.mark.parametrize("cache", CACHES)
def test_hf_loss_function_set_on_the_jitted_model(cache: str | None) -> None:
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=20, n_positions=16)
    config._attn_implementation = "eager"  # sdpa's reads tensor data: the call would run eagerly
    torch.manual_seed(0)
    eager = transformers.GPT2LMHeadModel(config).eval()  # eval: no dropout to compare
    torch.manual_seed(0)
    jm = _jit(transformers.GPT2LMHeadModel(config).eval(), cache)

    def squared_logits_loss(logits: torch.Tensor, labels: torch.Tensor, vocab_size: int, **_: Any):
        return logits.float().square().mean()

    eager.loss_function = squared_logits_loss
    jm.loss_function = squared_logits_loss
    assert "loss_function" not in vars(jm)
    for _ in range(3):
        ids = torch.randint(0, 20, (2, 5))
        loss_e, loss_j = eager(ids, labels=ids).loss, jm(ids, labels=ids).loss
        torch.testing.assert_close(loss_j, loss_e)
        grads_e = torch.autograd.grad(loss_e, list(eager.parameters()))
        grads_j = torch.autograd.grad(loss_j, list(jm.parameters()))
        for ge, gj in zip(grads_e, grads_j):
            torch.testing.assert_close(gj, ge)
    assert thunder.compile_stats(jm).eager_fallbacks == 0  # the compiled program's loss


def test_the_wrappers_own_attributes_stay_its_own() -> None:
    model = nn.Linear(4, 4)
    jm = thunder.jit(model)
    calls: list[str] = []
    jm.register_forward_hook(lambda *_: calls.append("hook"))
    assert not model._forward_hooks  # its call hooks are the wrapper's
    jm(torch.randn(2, 4))
    assert calls == ["hook"]
    jm.training = False  # a property of the wrapper's: the model's flag
    assert not model.training and "training" not in vars(jm)
    jm.train()


def test_accelerates_note_of_the_wrappers_forward_stays_on_the_wrapper() -> None:
    # accelerate sets it beside the autocast forward it sets on the wrapper, and pops it from
    # the wrapper's __dict__ when it unwraps (unwrap_model(keep_fp32_wrapper=False))
    jm = thunder.jit(nn.Linear(4, 4))
    jm._original_forward = jm.forward
    assert "_original_forward" in vars(jm) and "_original_forward" not in vars(jm.get_model())


# -- del jm.weight; jm.weight = t, and the torch.nn.utils reparametrizations ------------------


def _delete_and_set_weight(module: nn.Module) -> None:
    torch.manual_seed(1)
    del module.weight
    module.weight = torch.randn(3, 4)


def _weight_norm(module: nn.Module) -> None:
    with pytest.warns(FutureWarning):
        torch.nn.utils.weight_norm(module)


def _spectral_norm(module: nn.Module) -> None:
    torch.manual_seed(1)  # its u, v start random
    torch.nn.utils.spectral_norm(module)


def _prune(module: nn.Module) -> None:
    prune.l1_unstructured(module, "weight", 0.5)


def _parametrized_weight_norm(module: nn.Module) -> None:
    parametrizations.weight_norm(module)


def _orthogonal(module: nn.Module) -> None:
    # orthogonal() completes a non-square weight into a square orthogonal ``base`` from
    # torch.randn: the same seed gives the eager and the jitted module the same base.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        parametrizations.orthogonal(module)


class _Doubled(nn.Module):
    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return w * 2


def _register_parametrization(module: nn.Module) -> None:
    parametrize.register_parametrization(module, "weight", _Doubled())
    parametrize.register_parametrization(module, "bias", _Doubled())


REPARAMETRIZATIONS = [
    _delete_and_set_weight,
    _weight_norm,
    _spectral_norm,
    _prune,
    _parametrized_weight_norm,
    _orthogonal,
    _register_parametrization,
]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("apply", REPARAMETRIZATIONS, ids=[f.__name__ for f in REPARAMETRIZATIONS])
def test_reparametrizing_the_jitted_linear(cache: str | None, apply: Callable[..., None]) -> None:
    eager, jm = _pair(lambda: nn.Linear(4, 3), cache)
    _assert_same_calls(eager, jm, (2, 4), calls=1)  # compiled before the change
    apply(eager)
    apply(jm)
    assert type(jm) is thunder.ThunderModule
    # the model got the class parametrize makes (one per module)
    assert type(jm.get_model()).__qualname__ == type(eager).__qualname__
    assert jm.__class__ is type(jm.get_model())
    assert sorted(jm.state_dict()) == sorted(eager.state_dict())
    _assert_same_calls(eager, jm, (2, 4))
    eager.eval()
    jm.eval()
    _assert_same_calls(eager, jm, (2, 4))


def test_orthogonal_after_the_first_compiled_call() -> None:
    eager, jm = _pair(lambda: nn.Linear(4, 3), None)
    _assert_same_calls(eager, jm, (2, 4), calls=1)
    _orthogonal(eager)
    _orthogonal(jm)
    _assert_same_calls(eager, jm, (2, 4))


@pytest.mark.parametrize("cache", CACHES)
def test_removing_a_parametrization_from_the_jitted_linear(cache: str | None) -> None:
    eager, jm = _pair(lambda: nn.Linear(4, 3), cache)
    for module in (eager, jm):
        parametrizations.weight_norm(module)
    _assert_same_calls(eager, jm, (2, 4))
    for module in (eager, jm):
        parametrize.remove_parametrizations(module, "weight")
    assert type(jm.get_model()) is nn.Linear and not parametrize.is_parametrized(jm)
    _assert_same_calls(eager, jm, (2, 4))


def test_parametrized_jitted_module_deep_copies_as_a_thunder_module() -> None:
    eager, jm = _pair(lambda: nn.Linear(4, 3), None)
    for module in (eager, jm):
        parametrizations.weight_norm(module)
    copied = copy.deepcopy(jm)
    assert type(copied) is thunder.ThunderModule
    assert copied.get_model() is not jm.get_model()
    _assert_same_calls(eager, copied, (2, 4))


def test_class_assignment_on_the_wrapper_is_the_models() -> None:
    class Shifted(nn.Linear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return super().forward(x) + 1

    torch.manual_seed(0)
    model = nn.Linear(4, 4)
    jm = thunder.jit(model)
    x = torch.randn(2, 4)
    torch.testing.assert_close(jm(x), nn.Linear.forward(model, x))
    jm.__class__ = Shifted
    assert type(model) is Shifted and type(jm) is thunder.ThunderModule
    assert jm.__class__ is Shifted
    torch.testing.assert_close(jm(x), nn.Linear.forward(model, x) + 1)


# -- class tests: a jitted layer is one of its class ----------------------------------------------


def _make_sequential() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))


def _init_linears(model: nn.Module) -> None:
    for sub in model.modules():
        if isinstance(sub, nn.Linear):
            nn.init.ones_(sub.weight)
            nn.init.zeros_(sub.bias)


@pytest.mark.parametrize("cache", CACHES)
def test_init_walk_over_modules_reaches_a_jitted_layer(cache: str | None) -> None:
    eager = _make_sequential()
    model = _make_sequential()
    model[2] = _jit(model[2], cache)
    assert isinstance(model[2], nn.Linear) and isinstance(model[2], thunder.ThunderModule)
    assert type(model[2]) is thunder.ThunderModule
    # the tree walks as eager's: the same names, keys and parameters
    assert [n for n, _ in model.named_modules()] == [n for n, _ in eager.named_modules()]
    assert list(model.state_dict()) == list(eager.state_dict())
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in eager.named_parameters()]
    _init_linears(eager)
    _init_linears(model)
    _assert_same_calls(eager, model, (3, 4))


def test_a_jitted_module_still_pickles_and_reprs_as_a_thunder_module() -> None:
    torch.manual_seed(0)
    jm = thunder.jit(nn.Linear(2, 2))
    assert jm.__class__ is nn.Linear and isinstance(jm, nn.Linear)
    assert repr(jm).startswith("ThunderModule(")
    copied = pickle.loads(pickle.dumps(jm))
    assert type(copied) is thunder.ThunderModule and isinstance(copied, nn.Linear)
    x = torch.randn(3, 2)
    torch.testing.assert_close(copied(x), jm(x))


# -- jm.forward(x) is model.forward(x): none of the module's own hooks ----------------------------


def _make_mlp() -> nn.Sequential:
    return nn.Sequential(nn.Linear(4, 4), nn.Tanh(), nn.Linear(4, 2))


def _scale_output(module: nn.Module, args: Any, out: torch.Tensor) -> torch.Tensor:
    return out * 3


def _double_input(module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
    return (args[0] * 2,)


def _shift_output(module: nn.Module, args: Any, out: torch.Tensor) -> torch.Tensor:
    return out + 1


@pytest.mark.parametrize("cache", CACHES)
def test_forward_of_the_jitted_module_runs_without_the_modules_hooks(cache: str | None) -> None:
    eager, jm = _pair(_make_mlp, cache)
    model = jm.get_model()
    for module in (eager, model):
        module.register_forward_hook(_scale_output)
        module.register_forward_pre_hook(_double_input)
    # hooks on the wrapper run around its call, as hooks on the module do in eager
    eager.register_forward_hook(_shift_output)
    jm.register_forward_hook(_shift_output)
    for _ in range(2):
        _assert_same_calls(eager, jm, (3, 4), calls=2, forward=True)
        _assert_same_calls(eager, jm, (3, 4), calls=2)


def test_forward_of_a_module_without_hooks_is_its_compiled_call() -> None:
    eager, jm = _pair(_make_mlp, None)
    _assert_same_calls(eager, jm, (3, 4), forward=True)
    _assert_same_calls(eager, jm, (3, 4))
    stats = thunder.compile_stats(jm)
    assert stats.compilations == 1 and stats.cache_hits == 5  # one program for both


def test_forward_of_the_jitted_module_fires_global_hooks_for_its_children_only() -> None:
    eager, jm = _pair(_make_mlp, None)
    fired: list[str] = []

    def record(module: nn.Module, args: Any, out: Any) -> None:
        fired.append(type(module).__name__)

    handle = torch.nn.modules.module.register_module_forward_hook(record)
    try:
        x = torch.randn(3, 4)
        torch.testing.assert_close(jm.forward(x), eager.forward(x))
        assert fired[: len(fired) // 2] == fired[len(fired) // 2 :] == ["Linear", "Tanh", "Linear"]
        fired.clear()
        torch.testing.assert_close(jm(x), eager(x))
        assert fired == ["Linear", "Tanh", "Linear", "Sequential"] * 2
    finally:
        handle.remove()


@pytest.mark.parametrize("cache", CACHES)
def test_a_jitted_layer_inside_a_traced_function_has_eagers_type_and_class(
    cache: str | None,
) -> None:
    torch.manual_seed(0)
    layer = thunder.jit(nn.Linear(4, 4))

    def f(x: torch.Tensor) -> tuple[Any, ...]:
        scale = 2.0 if isinstance(layer, nn.Linear) else 3.0
        return type(layer).__name__, layer.__class__.__name__, layer(x) * scale

    jf = _jit(f, cache)  # type: ignore[arg-type]
    for _ in range(3):
        x = torch.randn(2, 4)
        name_j, class_j, y_j = jf(x)
        name_e, class_e, y_e = f(x)
        assert (name_j, class_j) == (name_e, class_e) == ("ThunderModule", "Linear")
        torch.testing.assert_close(y_j, y_e)
    assert thunder.compile_stats(jf).compilations == 1
