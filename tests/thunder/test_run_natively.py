"""The escape hatch: functions marked ``thunder.run_natively`` / ``torch.compiler.disable`` run
natively inside a jitted program, which runs split by torch.compile around them (thunder
compiling the graphs), equal to eager, forward and gradients, on fresh data every call."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo

import thunder


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _quiet(fn, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return fn(*args, **kwargs)


class _Counted(torch.nn.Module):
    """A block whose helper runs natively: it reads data, counts its calls and leaves state the
    compiled code after it reads (an attribute and a buffer written in place)."""

    def __init__(self, calls: list[int]) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("seen", torch.zeros(4))
        self.scale = 1.0
        self.calls = calls

    @thunder.run_natively
    def observe(self, h: torch.Tensor) -> float:
        self.calls.append(1)
        self.scale = float(h.detach().abs().mean()) + 0.5
        self.seen.add_(h.detach().sum(0))
        return h.detach().max().item()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.tanh(self.lin(x))
        peak = self.observe(h)
        return h * self.scale + self.seen * peak


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_a_native_function_runs_once_per_call_and_its_effects_are_seen(cache):
    eager_calls: list[int] = []
    jit_calls: list[int] = []
    eager = _Counted(eager_calls)
    model = _Counted(jit_calls)
    model.load_state_dict(eager.state_dict())
    jm = thunder.jit(model, cache=cache)
    for _ in range(4):
        x = torch.randn(3, 4)
        xe = x.clone().requires_grad_()
        xj = x.clone().requires_grad_()
        want = eager(xe)
        got = _quiet(jm, xj)
        torch.testing.assert_close(got, want)
        want.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(xj.grad, xe.grad)
        torch.testing.assert_close(model.lin.weight.grad, eager.lin.weight.grad)
        torch.testing.assert_close(model.seen, eager.seen)
        assert model.scale == eager.scale
        assert len(jit_calls) == len(eager_calls)  # once per call, as eager
    stats = thunder.compile_stats(jm)
    assert stats.split_calls == 4 and stats.eager_fallbacks == 0
    assert stats.split_graphs and all(g.runs == "thunder" for g in stats.split_graphs)
    assert "thunder.run_natively" in stats.last_split_reason


def test_the_split_is_said_once_with_the_users_line():
    @torch._dynamo.disable
    def helper(x):
        return x.nonzero().float().sum()

    def f(x):
        return torch.sin(x) * helper(x)  # THE-CALL

    jf = thunder.jit(f)
    with pytest.warns(UserWarning, match="runs natively") as record:
        jf(torch.randn(5))
    assert record[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = torch.randn(5)
        torch.testing.assert_close(jf(x), f(x))
    assert f"{__file__}:" in thunder.compile_stats(jf).last_split_reason
    assert "SPLIT" in str(thunder.examine(f, torch.randn(5), show=False))


def test_a_native_function_deep_in_a_model_splits_the_call_not_the_model():
    class Block(torch.nn.Module):
        def __init__(self, native: bool) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(8, 8)
            self.native = native

        def forward(self, x):
            y = torch.relu(self.lin(x))
            if self.native:
                y = _clamp_natively(y)
            return x + y

    torch.manual_seed(0)
    model = torch.nn.Sequential(*(Block(i == 1) for i in range(3)))
    jm = thunder.jit(model)
    for _ in range(3):
        x = torch.randn(2, 8, requires_grad=True)
        got = _quiet(jm, x)
        (gx,) = torch.autograd.grad(got.sum(), x)
        want = model(x)
        (wx,) = torch.autograd.grad(want.sum(), x)
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(gx, wx)
    graphs = thunder.compile_stats(jm).split_graphs
    # Thunder's own segments: every layer is in thunder's programs, the layers up to the native
    # call in the first segment, the rest in the continuation after it.
    assert [getattr(g, "kind", None) for g in graphs] == ["first segment", "continuation"]
    assert all(g.runs == "thunder" for g in graphs)
    linears = [
        [b.sym.name for b in thunder.last_traces(g.jitted)[0].bound_symbols].count("linear")
        for g in graphs
    ]
    assert linears == [2, 1]


@torch.compiler.disable
def _clamp_natively(y):
    return y.clamp(max=float(y.detach().median()))


def test_no_split_where_nothing_runs_natively():
    jf = thunder.jit(lambda x: x * 2)
    jf(torch.ones(2))
    stats = thunder.compile_stats(jf)
    assert stats.split_calls == 0 and stats.split_graphs == [] and stats.compilations == 1


def test_run_natively_takes_functions_only():
    with pytest.raises(TypeError, match="run_natively expects a function"):
        thunder.run_natively(3)
