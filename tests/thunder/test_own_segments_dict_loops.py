"""Thunder's own segments where the native call is inside a loop over a dict: a ``ModuleList``
or ``ModuleDict`` (their ``_modules``), a dict argument's keys, values or items. The loop's
iterator is part of the state the continuation resumes; values and gradients equal eager's over
fresh random inputs, the call runs as thunder's segments (not torch.compile), and a native call
that adds or removes keys meets CPython's error, as eager does."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import thunder


@pytest.fixture(autouse=True)
def _own_segments(monkeypatch):
    monkeypatch.setenv("THUNDER_OWN_SEGMENTS", "1")


def _kinds(jitted):
    stats = thunder.compile_stats(jitted)
    return [getattr(g, "kind", type(g).__name__) for g in stats.split_graphs]


def _ran_as_segments(jitted):
    kinds = _kinds(jitted)
    assert kinds.count("first segment") == 1, kinds
    assert set(kinds) == {"first segment", "continuation"}, kinds


@thunder.run_natively
def _native(h):
    return h * 1.5 + 0.25


class _Layers(torch.nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = _native(layer(x)).tanh()
        return x


class _Named(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleDict(
            {"a": torch.nn.Linear(4, 4), "b": torch.nn.Linear(4, 4), "c": torch.nn.Linear(4, 4)}
        )

    def forward(self, x, how):
        if how == "items":
            for name, block in self.blocks.items():
                x = _native(block(x)) + (1.0 if name == "b" else 0.0)
        elif how == "keys":
            for name in self.blocks:
                x = _native(self.blocks[name](x)).sin()
        else:
            for block in self.blocks.values():
                x = _native(block(x)).cos()
        return x


def _train_like_eager(model, call, steps=3):
    jm = thunder.jit(copy.deepcopy(model))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(steps):
            x = torch.randn(2, 4)
            want, got = call(model, x), call(jm, x)
            torch.testing.assert_close(got, want)
            g = torch.randn_like(want)
            want.backward(g)
            got.backward(g)
    for pe, pj in zip(model.parameters(), jm.parameters(), strict=True):
        torch.testing.assert_close(pj.grad, pe.grad)
    return jm


@pytest.mark.parametrize("n", [1, 3])
def test_a_module_list_loop_around_a_native_call(n):
    jm = _train_like_eager(_Layers(n), lambda m, x: m(x))
    _ran_as_segments(jm)
    assert _kinds(jm).count("continuation") == n  # one per place in the loop, each compiled once


@pytest.mark.parametrize("how", ["items", "keys", "values"])
def test_a_module_dict_loop_around_a_native_call(how):
    jm = _train_like_eager(_Named(), lambda m, x: m(x, how))
    _ran_as_segments(jm)


def test_a_dict_argument_iterated_around_a_native_call():
    def f(tensors, x):
        total = x
        for key, t in tensors.items():
            total = _native(total * t) + len(key)
        for t in tensors.values():
            total = _native(total) - t
        return total

    jf = thunder.jit(f)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(3):
            ts = {"p": torch.randn(3), "qq": torch.randn(3)}
            x = torch.randn(3, requires_grad=True)
            want, got = f(ts, x), jf(ts, x)
            torch.testing.assert_close(got, want)
            (gw,) = torch.autograd.grad(want, x, torch.ones(3))
            (gg,) = torch.autograd.grad(got, x, torch.ones(3))
            torch.testing.assert_close(gg, gw)
    _ran_as_segments(jf)


class _Growing(torch.nn.Module):
    """Its native call adds (or removes) a layer while the loop over the layers runs."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(2))
        self.change = None
        self.replacement = torch.randn(4, 4)

    @thunder.run_natively
    def observe(self, h):
        if self.change == "add":
            self.layers._modules["extra"] = torch.nn.Identity()
        elif self.change == "remove":
            self.layers._modules.pop(str(len(self.layers._modules) - 1))
        elif self.change == "replace":  # the next layer: the loop reads it, as eager's does
            self.layers[1] = torch.nn.Linear(4, 4)
            self.layers[1].weight.data.copy_(self.replacement)
            self.layers[1].bias.data.zero_()
        self.change = None
        return h

    def forward(self, x):
        for layer in self.layers:
            x = self.observe(layer(x))
        return x


@pytest.mark.parametrize("change", ["add", "remove"])
def test_a_native_call_that_changes_the_dict_meets_cpythons_error(change):
    eager = _Growing()
    jm = thunder.jit(copy.deepcopy(eager))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for _ in range(2):  # compiled first, with the layers unchanged
            x = torch.randn(2, 4)
            torch.testing.assert_close(jm(x), eager(x))
        _ran_as_segments(jm)
        x = torch.randn(2, 4)
        eager.change = jm._model.change = change
        with pytest.raises(RuntimeError, match="dictionary changed size during iteration"):
            eager(x)
        with pytest.raises(RuntimeError, match="dictionary changed size during iteration"):
            jm(x)


def test_a_native_call_that_replaces_the_next_module_is_seen():
    eager = _Growing()
    jm = thunder.jit(copy.deepcopy(eager))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        for step in range(4):
            x = torch.randn(2, 4)
            if step >= 2:
                eager.change = jm._model.change = "replace"
            torch.testing.assert_close(jm(x), eager(x))
            torch.testing.assert_close(jm._model.layers[1].weight, eager.layers[1].weight)
            torch.testing.assert_close(jm._model.layers[1].bias, eager.layers[1].bias)
    _ran_as_segments(jm)
