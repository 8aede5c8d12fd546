"""thunder.jit through Python code CPython calls implicitly: a torch op inside a property, a
``__getattr__``, a ``__bool__`` or a ``__len__`` is traced (it appears in the trace and follows
the inputs), and an outside read inside them is guarded."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import thunder

SCALE = 2.0


class Holder:
    """A user object whose special methods compute with tensors."""

    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    @property
    def doubled(self) -> torch.Tensor:
        return torch.sin(self.t) * SCALE  # SCALE: a global read inside a property

    def __getattr__(self, name: str) -> torch.Tensor:
        if name == "cosine":
            return torch.cos(self.t)
        raise AttributeError(name)

    def __bool__(self) -> bool:
        return bool(self.t.shape[0] > 2)

    def __len__(self) -> int:
        return int(torch.tanh(self.t).shape[0])


def _x(*shape: int) -> torch.Tensor:
    return torch.randn(*shape)


def _symbols(j: Any) -> str:
    assert not thunder.compile_stats(j).eager_fallbacks  # traced, not run eagerly
    return str(thunder.last_traces(j)[0])


def test_torch_op_in_property_is_traced() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return Holder(x).doubled

    j = thunder.jit(f)
    for _ in range(2):  # fresh inputs: a constant result would be caught
        x = _x(3)
        torch.testing.assert_close(j(x), f(x))
    assert "sin" in _symbols(j)


def test_global_read_in_property_is_guarded() -> None:
    global SCALE

    def f(x: torch.Tensor) -> torch.Tensor:
        return Holder(x).doubled

    j = thunder.jit(f)
    x = _x(3)
    torch.testing.assert_close(j(x), f(x))
    old = SCALE
    try:
        SCALE = 5.0
        torch.testing.assert_close(j(x), f(x))  # no stale 2.0
        assert thunder.cache_misses(j) == 2
        assert "sin" in _symbols(j)
    finally:
        SCALE = old


def test_torch_op_in_getattr_is_traced() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return Holder(x).cosine + 1

    j = thunder.jit(f)
    x = _x(4)
    torch.testing.assert_close(j(x), f(x))
    assert "cos" in _symbols(j)


def test_torch_op_in_len_and_bool_is_traced() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        h = Holder(x)
        if h:
            return x * len(h)
        return x - len(h)

    j = thunder.jit(f)
    for n in (4, 2):
        x = _x(n)
        torch.testing.assert_close(j(x), f(x))
    assert "tanh" in _symbols(j)


def test_module_property_and_iteration() -> None:
    class Blocks(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(2))

        @property
        def first_weight_t(self) -> torch.Tensor:
            return self.layers[0].weight.t()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = layer(x)
            return x @ self.first_weight_t

    m = Blocks()
    j = thunder.jit(m)
    x = _x(2, 4)
    torch.testing.assert_close(j(x), m(x))
    with torch.no_grad():
        m.layers[0].weight.mul_(2)  # parameters are inputs: no stale weight
    torch.testing.assert_close(j(x), m(x))
    assert "linear" in _symbols(j)


@pytest.mark.parametrize("seed", range(3))
def test_gradients_through_property(seed: int) -> None:
    torch.manual_seed(seed)

    def f(x: torch.Tensor) -> torch.Tensor:
        return Holder(x).doubled.sum()

    x = _x(5).requires_grad_()
    xe = x.detach().clone().requires_grad_()
    j = thunder.jit(f)
    j(x).backward()
    f(xe).backward()
    torch.testing.assert_close(x.grad, xe.grad)
    assert "sin" in _symbols(j)


class _Base(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4))

    @property
    def scaled(self) -> torch.Tensor:
        return torch.tanh(self.w) * SCALE


class _Child(_Base):
    @property
    def scaled(self) -> torch.Tensor:
        return super().scaled + 1  # the parent's property, through super()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scaled


def test_parent_property_through_super_is_traced_and_differentiated() -> None:
    m = _Child()
    jm = thunder.jit(m)
    x = torch.randn(4)
    torch.testing.assert_close(jm(x), m(x))
    assert "tanh" in str(thunder.last_traces(jm)[-1])
    with torch.no_grad():
        m.w.mul_(3)  # new values, same parameter: read on every call
    out_j, out_e = jm(x), m(x)
    torch.testing.assert_close(out_j, out_e)
    (g_j,) = torch.autograd.grad(out_j.sum(), m.w)
    (g_e,) = torch.autograd.grad(out_e.sum(), m.w)
    torch.testing.assert_close(g_j, g_e)
