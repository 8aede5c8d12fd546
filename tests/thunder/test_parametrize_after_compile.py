"""A ``torch.nn.utils.parametrize`` parametrization registered on a module after its first compiled
call (on the jitted module or on the wrapped model) gives eager's outputs and gradients, over
several calls and after the parametrization's ``original`` is updated in place.

``orthogonal()`` completes a non-square weight into a square orthogonal ``base`` buffer from
``torch.randn``; the output only depends on the weight's columns of it but the gradient of
``original`` depends on all of it, so both modules are parametrized under the same seed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations, parametrize

import thunder

CACHES = [None, "symbolic values"]
ORTHOGONAL_MAPS = ["matrix_exp", "cayley", "householder"]


class _Net(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.lin = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.lin(x)) * 2


class _ScaledSkew(nn.Module):
    """A custom parametrization: a learnt scale of the skew part plus the weight."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(0.5))

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return w + self.scale * (w - w.mT) if w.shape[-1] == w.shape[-2] else w * self.scale.exp()


def _jit(module: nn.Module, cache: str | None) -> Any:
    return thunder.jit(module) if cache is None else thunder.jit(module, cache=cache)


def _pair(shape: tuple[int, int], cache: str | None) -> tuple[nn.Module, nn.Module, Any]:
    torch.manual_seed(0)
    eager = _Net(*shape)
    torch.manual_seed(0)
    model = _Net(*shape)
    return eager, model, _jit(model, cache)


def _orthogonal(orthogonal_map: str) -> Callable[[nn.Module], None]:
    def apply(module: nn.Module) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1)
            parametrizations.orthogonal(module, "weight", orthogonal_map=orthogonal_map)

    return apply


def _custom(module: nn.Module) -> None:
    parametrize.register_parametrization(module, "weight", _ScaledSkew())


def _assert_same_calls(eager: nn.Module, jm: Any, in_features: int, calls: int = 3) -> None:
    for _ in range(calls):
        x = torch.randn(2, in_features)
        xe, xj = x.clone().requires_grad_(), x.clone().requires_grad_()
        ye, yj = eager(xe), jm(xj)
        torch.testing.assert_close(yj, ye)
        params_e, params_j = dict(eager.named_parameters()), dict(jm.named_parameters())
        assert list(params_j) == list(params_e)
        grads_e = torch.autograd.grad(ye.square().sum(), [xe, *params_e.values()])
        grads_j = torch.autograd.grad(yj.square().sum(), [xj, *params_j.values()])
        for name, ge, gj in zip(["input", *params_e], grads_e, grads_j, strict=True):
            torch.testing.assert_close(gj, ge, msg=lambda m, name=name: f"grad of {name}: {m}")


def _assert_same_buffers(eager: nn.Module, jm: Any) -> None:
    """Catches a parametrization whose random state differs between the two modules."""
    for (name, be), bj in zip(eager.named_buffers(), jm.buffers(), strict=True):
        torch.testing.assert_close(bj, be, msg=lambda m, name=name: f"buffer {name}: {m}")


def _update_in_place(*modules: nn.Module) -> None:
    """The same step on every module's parameters, as an optimizer would take."""
    for module in modules:
        torch.manual_seed(2)
        with torch.no_grad():
            for p in module.parameters():
                p.add_(torch.randn_like(p), alpha=0.1)


def _check(
    apply: Callable[[nn.Module], None],
    shape: tuple[int, int],
    cache: str | None,
    *,
    on_wrapper: bool,
) -> None:
    eager, model, jm = _pair(shape, cache)
    _assert_same_calls(eager, jm, shape[0], calls=2)  # compiled before the change
    apply(eager)
    apply(jm if on_wrapper else model)
    assert parametrize.is_parametrized(model.lin, "weight")
    _assert_same_buffers(eager, jm)
    _assert_same_calls(eager, jm, shape[0])
    _update_in_place(eager, model)
    _assert_same_calls(eager, jm, shape[0])


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("on_wrapper", [False, True], ids=["on_model", "on_wrapper"])
@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (4, 4)], ids=str)
@pytest.mark.parametrize("orthogonal_map", ORTHOGONAL_MAPS)
def test_orthogonal_after_the_first_compiled_call(
    orthogonal_map: str, shape: tuple[int, int], on_wrapper: bool, cache: str | None
) -> None:
    def apply(module: nn.Module) -> None:
        _orthogonal(orthogonal_map)(module.lin)

    _check(apply, shape, cache, on_wrapper=on_wrapper)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("on_wrapper", [False, True], ids=["on_model", "on_wrapper"])
@pytest.mark.parametrize("shape", [(4, 3), (4, 4)], ids=str)
def test_custom_parametrization_after_the_first_compiled_call(
    shape: tuple[int, int], on_wrapper: bool, cache: str | None
) -> None:
    def apply(module: nn.Module) -> None:
        _custom(module.lin)

    _check(apply, shape, cache, on_wrapper=on_wrapper)


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("orthogonal_map", ORTHOGONAL_MAPS)
def test_orthogonal_on_the_jitted_linear_after_the_first_compiled_call(
    orthogonal_map: str, cache: str | None
) -> None:
    torch.manual_seed(0)
    eager = nn.Linear(4, 3)
    torch.manual_seed(0)
    jm = _jit(nn.Linear(4, 3), cache)
    _assert_same_calls(eager, jm, 4, calls=1)
    for module in (eager, jm):
        _orthogonal(orthogonal_map)(module)
    assert type(jm) is thunder.ThunderModule
    _assert_same_buffers(eager, jm)
    _assert_same_calls(eager, jm, 4)
    _update_in_place(eager, jm)
    _assert_same_calls(eager, jm, 4)
