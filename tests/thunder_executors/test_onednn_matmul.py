"""Matrix products through oneDNN (``thunder_executors.onednn_matmul``): the same values, shapes
and strides as eager's products, eager's own op wherever oneDNN does not apply (autograd
recording, a dispatch mode, oneDNN off, another dtype), the choice measured once per size, and
programs (forward and backward) that match eager with it."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import thunder
from thunder_executors import onednn_matmul
from thunder_executors.onednn_matmul import linear, matmul, mm

pytestmark = pytest.mark.skipif(not onednn_matmul.available(), reason="no oneDNN product here")


def _assert_like(got: torch.Tensor, want: torch.Tensor) -> None:
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert got.shape == want.shape and got.stride() == want.stride()


@settings(max_examples=40, deadline=None)
@given(
    lead=st.lists(st.integers(1, 5), min_size=0, max_size=2),
    m=st.integers(1, 40),
    k=st.integers(1, 48),
    n=st.integers(1, 40),
    bias=st.booleans(),
    transposed=st.sampled_from(["none", "input", "weight", "both"]),
)
def test_products_equal_eagers(
    lead: list[int], m: int, k: int, n: int, bias: bool, transposed: str
) -> None:
    x = (
        torch.randn(*lead, k, m).transpose(-1, -2)
        if transposed in ("input", "both")
        else (torch.randn(*lead, m, k))
    )
    w = torch.randn(k, n).t() if transposed in ("weight", "both") else torch.randn(n, k)
    b = torch.randn(n) if bias else None
    _assert_like(linear(x, w, b), F.linear(x, w, b))
    _assert_like(matmul(x, w.t()), torch.matmul(x, w.t()))
    x2 = x.reshape(-1, k)
    _assert_like(mm(x2, w.t()), torch.mm(x2, w.t()))


def test_recorded_by_autograd_it_is_eagers_op() -> None:
    x = torch.randn(6, 8, requires_grad=True)
    w = torch.randn(4, 8, requires_grad=True)
    y = linear(x, w)
    assert y.grad_fn is not None
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.ones(6, 4) @ w.detach())
    with torch.no_grad():
        assert linear(x, w).grad_fn is None  # (oneDNN's, nothing records it)


def test_under_a_dispatch_mode_or_with_onednn_off_it_is_eagers_op() -> None:
    from torch.utils.flop_counter import FlopCounterMode

    x, w = torch.randn(16, 32), torch.randn(8, 32)
    with FlopCounterMode(display=False) as counter:
        linear(x, w)
        mm(x, w.t())
        matmul(x, w.t())
    assert counter.get_total_flops() == 3 * 2 * 16 * 32 * 8
    calls: list[Any] = []
    real = onednn_matmul._onednn
    with torch.backends.mkldnn.flags(enabled=False):
        onednn_matmul._onednn = lambda *a: calls.append(a) or real(*a)  # type: ignore[assignment]
        try:
            _assert_like(linear(x, w), F.linear(x, w))
        finally:
            onednn_matmul._onednn = real  # type: ignore[assignment]
    assert not calls
    d = torch.randn(5, 3, dtype=torch.float64)
    _assert_like(linear(d, d), F.linear(d, d))


class _Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(48, 96)
        self.b = torch.nn.Linear(96, 48, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.a(x))
        return self.b(h) @ self.a.weight[:, :48].t() + torch.matmul(x, x.transpose(-1, -2)).sum()


@pytest.mark.parametrize(
    "setting, executors",
    [("1", None), ("0", None), ("1", ("torchcompile", "torch_ops", "torch"))],
    ids=["onednn", "eager-kernels", "onednn-between-torch.compile-regions"],
)
def test_programs_match_eager_forward_and_backward(
    setting: str, executors: tuple[str, ...] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if executors is not None:
        from thunder_executors import get_available_executors

        if "torchcompile" not in {e.name for e in get_available_executors()}:
            pytest.skip("no torch.compile executor here")
    monkeypatch.setenv("THUNDER_ONEDNN_MATMUL", setting)
    torch.manual_seed(0)
    model = _Mlp()
    jm = thunder.jit(model) if executors is None else thunder.jit(model, executors=executors)
    for shape in [(4, 10, 48), (7, 48)]:
        x = torch.randn(shape, requires_grad=True)
        want = model(x)
        (gx_want, *gp_want) = torch.autograd.grad(want.square().sum(), [x, *model.parameters()])
        got = jm(x)
        (gx, *gp) = torch.autograd.grad(got.square().sum(), [x, *model.parameters()])
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
        for g, gw in zip([gx, *gp], [gx_want, *gp_want]):
            torch.testing.assert_close(g, gw, rtol=1e-3, atol=1e-3)  # (float32 sums of 4k terms)
    forward = str(thunder.last_traces(jm)[-1])
    backward = str(thunder.last_backward_traces(jm)[-1])
    if setting == "1":
        assert "onednn_linear" in forward and "onednn_" in backward, forward + backward
    else:
        assert "onednn_" not in forward + backward


def test_measured_once_per_size_and_logged(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("THUNDER_ONEDNN_MATMUL", raising=False)
    monkeypatch.setattr(onednn_matmul, "_decisions", {})
    measured: list[tuple[int, int, int]] = []
    real = onednn_matmul._measure

    def counting(m: int, k: int, n: int) -> bool:
        measured.append((m, k, n))
        return real(m, k, n)

    monkeypatch.setattr(onednn_matmul, "_measure", counting)
    with caplog.at_level(logging.INFO, logger="thunder.compiles"):
        first = onednn_matmul.pays(64, 32, 48)
        assert onednn_matmul.pays(64, 32, 48) == first
        onednn_matmul.pays(1 << 20, 64, 64)  # measured on fewer rows
    assert measured == [(64, 32, 48), (1 << 20, 64, 64)]
    lines = [r.getMessage() for r in caplog.records]
    assert any("64x32 @ 32x48" in line for line in lines), lines
    assert any(f"on {(1 << 27) // (64 * 64)} rows" in line for line in lines), lines


def test_measuring_draws_nothing_from_the_programs_generator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("THUNDER_ONEDNN_MATMUL", raising=False)
    monkeypatch.setattr(onednn_matmul, "_decisions", {})
    torch.manual_seed(3)
    want = torch.rand(4)
    torch.manual_seed(3)
    onednn_matmul.pays(40, 24, 56)
    assert torch.equal(torch.rand(4), want)
