"""torch.nn and torch library code that keeps state outside its tensors (RNN modules' weak
references to their weights, parametrizations that change grad mode, distributions checking for
tensor-likes): compiled, or run through torch where thunder cannot compile it, and equal to eager
in values, gradients and the state it leaves (grad mode)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from runs_by_torch import call_split
from torch import nn

import thunder


def _twins(make: Callable[[], nn.Module]) -> tuple[nn.Module, nn.Module]:
    a = make()
    b = make()
    b.load_state_dict(a.state_dict())
    return a, b


def _assert_same_step(eager: nn.Module, jitted: nn.Module, x: torch.Tensor) -> None:
    want, got = eager(x), jitted(x)
    want = want[0] if isinstance(want, tuple) else want
    got = got[0] if isinstance(got, tuple) else got
    torch.testing.assert_close(got, want)
    cot = torch.randn_like(want)
    want.backward(cot)
    got.backward(cot)
    for (name, p), q in zip(eager.named_parameters(), jitted.parameters()):
        torch.testing.assert_close(q.grad, p.grad, msg=name)


class _Recurrent(nn.Module):
    def __init__(self, kind: type[nn.Module], bidirectional: bool) -> None:
        super().__init__()
        self.rnn = kind(4, 5, num_layers=2, batch_first=True, bidirectional=bidirectional)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rnn(x)[0]


@pytest.mark.parametrize("bidirectional", [False, True], ids=["one-way", "bidirectional"])
@pytest.mark.parametrize("kind", [nn.LSTM, nn.GRU, nn.RNN], ids=lambda k: k.__name__)
def test_recurrent_modules_compile_and_train_like_eager(kind, bidirectional) -> None:
    # RNN modules keep weak references to their weights and compare them with the weights
    # they read (`ref() is not weight`): the proxy of a weight is that weight.
    torch.manual_seed(0)
    eager, model = _twins(lambda: _Recurrent(kind, bidirectional))
    jitted = thunder.jit(model)
    for length in (3, 3):
        _assert_same_step(eager, jitted, torch.randn(2, length, 4))
    stats = thunder.compile_stats(jitted)
    assert stats.eager_fallbacks == 0 and stats.split_calls == 0
    assert stats.compilations == 1


class _Normal(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.loc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.distributions.Normal(self.loc(x), 1.5).log_prob(x)


def test_a_distribution_built_from_proxies_compiles() -> None:
    # broadcast_all asks torch.overrides.is_tensor_like of each argument
    torch.manual_seed(0)
    eager, model = _twins(_Normal)
    jitted = thunder.jit(model)
    _assert_same_step(eager, jitted, torch.randn(3, 4))
    stats = thunder.compile_stats(jitted)
    assert stats.eager_fallbacks == 0 and stats.split_calls == 0


def test_spectral_norm_compiles_and_leaves_grad_mode_as_eager() -> None:
    # Its power iteration writes into buffers through out= under no_grad: computed, then copied
    # into them (tests/thunder/test_splits_that_compile.py). No grad mode may leak to the caller.
    torch.manual_seed(0)
    make = lambda: nn.utils.parametrizations.spectral_norm(nn.Linear(4, 3))  # noqa: E731
    eager, model = _twins(make)
    jitted = thunder.jit(model)
    for _ in range(2):
        x = torch.randn(2, 4)
        torch.testing.assert_close(jitted(x), eager(x))
        assert torch.is_grad_enabled()
    assert thunder.compile_stats(jitted).split_calls == 0
    state, want = model.state_dict(), eager.state_dict()
    for name in want:  # the power iteration's buffers moved as eager's
        torch.testing.assert_close(state[name], want[name], msg=name)


@pytest.mark.parametrize("ambient", [True, False], ids=["grad", "no_grad"])
def test_a_function_leaving_grad_mode_changed_runs_split_and_leaves_it_as_eager(ambient) -> None:
    def switch(x: torch.Tensor) -> torch.Tensor:
        torch.set_grad_enabled(not ambient)  # not restored: the caller continues with it
        return x * 2

    x = torch.randn(3, requires_grad=True)
    jitted = thunder.jit(switch)
    try:
        for _ in range(2):
            torch.set_grad_enabled(ambient)
            want = switch(x)
            want_mode = torch.is_grad_enabled()
            torch.set_grad_enabled(ambient)
            got = call_split(jitted, x, match="grad mode switched")
            assert torch.is_grad_enabled() == want_mode == (not ambient)
            assert got.requires_grad == want.requires_grad
            torch.testing.assert_close(got, want)
    finally:
        torch.set_grad_enabled(True)
