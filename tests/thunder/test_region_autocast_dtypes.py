"""Fusion regions compiled by inductor give the dtypes, shapes and layouts their torch calls give,
under CPU autocast too: inductor's decompositions of the normalizations return their statistics
in the input's dtype on a CPU (bf16 for a bf16 input), where eager's kernels given float32
parameters (as CPU autocast leaves a BatchNorm, a GroupNorm) return float32. A region compiled
so rounded the running statistics to bf16 on every step and handed the backward's kernel bf16
statistics, which it refuses ("mixed dtype (CPU): expect parameter to have scalar type of
Float"). The compile path also checks the compiled program's outputs against the torch calls'
on the example inputs, and keeps the torch calls where they differ (``RegionOutputMismatch``)."""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import thunder
from thunder_executors import background_compile
from thunder_executors import torchcompile as tc_module

_EXECUTORS = ["torchcompile", "torch_ops", "torch"]


class _BatchNormNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.hardswish(self.bn(self.conv(x))).flatten(1))


class _GroupNormNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.head = nn.Linear(8 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(F.silu(self.gn(self.conv(x))).flatten(1))


class _LayerNormSoftmaxNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(6 * 6, 32)
        self.ln = nn.LayerNorm(32)
        self.down = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln(self.up(x.flatten(2)))
        return self.down(torch.softmax(h, dim=-1) * h).sum(1)


class _NestedDisableNet(_BatchNormNet):
    """The BatchNorm net with a block that turns autocast off inside the autocast one."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.bn(self.conv(x))
        with torch.autocast("cpu", enabled=False):
            h = self.bn(h.float() * 0.5)  # float32 BatchNorm, the same running statistics
        return self.head(F.hardswish(h).flatten(1))


_MODELS: dict[str, Callable[[], nn.Module]] = {
    "batchnorm": _BatchNormNet,
    "groupnorm": _GroupNormNet,
    "layernorm-softmax-linear": _LayerNormSoftmaxNet,
    "nested-autocast-disable": _NestedDisableNet,
}


@contextlib.contextmanager
def _no_region_refused() -> Iterator[None]:
    """Fails where a region's compile failed or was refused: the compiled programs must run."""
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*could not compile a fusion region.*")
        yield


def _train_like_eager(
    make: Callable[[], nn.Module],
    compiled: Callable[[nn.Module], Callable[..., torch.Tensor]],
    *,
    dtype: torch.dtype = torch.bfloat16,
    steps: int = 4,
    batch_sizes: tuple[int, ...] = (4,),
    before_steps: Callable[[], None] | None = None,
) -> None:
    torch.manual_seed(0)
    eager = make()
    mine = copy.deepcopy(eager)
    fn = compiled(mine)
    opts = [torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9) for m in (eager, mine)]
    for step in range(steps):
        x = torch.randn(batch_sizes[step % len(batch_sizes)], 3, 6, 6) * 2 + 0.5
        outs = []
        for f, model, opt in ((eager, eager, opts[0]), (fn, mine, opts[1])):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=dtype):
                out = f(x)
            out.float().square().mean().backward()
            outs.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
            opt.step()
        (want, want_grads), (got, got_grads) = outs
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
        for g, w in zip(got_grads, want_grads, strict=True):
            assert g.dtype == w.dtype
            torch.testing.assert_close(g, w, rtol=3e-2, atol=3e-2 * float(w.abs().max()))
        for name, buf in eager.named_buffers():
            other = dict(mine.named_buffers())[name]
            assert other.dtype == buf.dtype
            # fp32 statistics computed from the same low-precision values, equal but for the
            # order of the sums and the small differences the weights gather over the steps
            # (rounded to bf16 they were 1e-3 off).
            scale = float(buf.float().abs().max())
            torch.testing.assert_close(other, buf, rtol=1e-4, atol=1e-4 * scale)
        if step == 0 and before_steps is not None:
            before_steps()


@pytest.mark.parametrize("model", list(_MODELS), ids=list(_MODELS))
def test_training_under_bf16_autocast_like_eager(model: str) -> None:
    with _no_region_refused():
        _train_like_eager(_MODELS[model], lambda m: thunder.jit(m, executors=_EXECUTORS))


def test_training_under_fp16_autocast_like_eager() -> None:
    with _no_region_refused():
        _train_like_eager(
            _BatchNormNet, lambda m: thunder.jit(m, executors=_EXECUTORS), dtype=torch.float16
        )


def test_symbolic_values_cache_under_autocast_like_eager() -> None:
    # Symbolic sizes compile through dynamo (dynamic shapes), the rewritten region included.
    with _no_region_refused():
        _train_like_eager(
            _GroupNormNet,
            lambda m: thunder.jit(m, executors=_EXECUTORS, cache="symbolic values"),
            batch_sizes=(4, 3, 5),
        )


@pytest.mark.parametrize("model", ["batchnorm", "groupnorm"])
def test_thunder_compile_after_background_compiles_like_eager(model: str) -> None:
    # The first step runs the torch calls; every later one the compiled programs, which gave
    # the backward bf16 statistics it refused.
    with _no_region_refused():
        _train_like_eager(
            _MODELS[model],
            thunder.compile,
            steps=4,
            before_steps=lambda: background_compile.wait_for_background_compiles(timeout=600),
        )


def test_a_compiled_program_of_other_dtypes_is_refused(monkeypatch: Any) -> None:
    # Without the rewrite, inductor's GroupNorm returns bf16 statistics: the check refuses the
    # compiled program, warns, and the region runs its torch calls (eager's numbers). (Training
    # BatchNorm no longer gives a region such a call: its statistics and running-statistics
    # update are one op computed from float32 copies, ``native_batch_norm_updating``.)
    monkeypatch.setattr(tc_module, "_for_inductor", lambda calls: list(calls))
    # Regions other tests compiled (rewritten) are not reused.
    monkeypatch.setattr(tc_module.torchcompile_executor, "_cache", {})
    with pytest.warns(RuntimeWarning, match="RegionOutputMismatch.*dtype torch.bfloat16"):
        _train_like_eager(
            _GroupNormNet,
            lambda m: thunder.jit(m, executors=_EXECUTORS),
            steps=3,
        )


def test_output_mismatch() -> None:
    a = torch.zeros(2, 3)
    assert tc_module.output_mismatch((a,), (a.clone(),)) is None
    assert "dtype" in str(tc_module.output_mismatch((a.bfloat16(),), (a,)))
    assert "shape" in str(tc_module.output_mismatch((a.t(),), (a,)))
    assert "strides" in str(tc_module.output_mismatch((a.t().contiguous().t(),), (a,)))
    assert "outputs" in str(tc_module.output_mismatch((a, a), (a,)))
    # Where the torch calls' output is not dense (an expanded one), its layout is not required.
    expanded = torch.zeros(3, 1).expand(3, 4)
    assert tc_module.output_mismatch((torch.zeros(3, 4),), (expanded,)) is None
    # Size-1 dimensions' strides do not matter.
    assert tc_module.output_mismatch((torch.zeros(1, 3),), (torch.zeros(3, 1).t(),)) is None


def _avg_reflect(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return F.adaptive_avg_pool2d(x * 3, 2), F.pad(x.tanh(), (2, 1, 1, 2), mode="reflect")


def test_a_compiled_gradient_keeps_eager_layout() -> None:
    # Inductor's gradient of a channels-last input here is contiguous: the region's compiled
    # program copies it into eager's layout instead of being refused.
    jf = thunder.jit(_avg_reflect, executors=["torchcompile"])
    with _no_region_refused():
        for _ in range(3):
            x = torch.randn(2, 3, 7, 6).contiguous(memory_format=torch.channels_last)
            mine = x.detach().clone(memory_format=torch.preserve_format).requires_grad_()
            x.requires_grad_()
            for f, a in ((_avg_reflect, x), (jf, mine)):
                p, q = f(a)
                (p.square().sum() + q.sum()).backward()
            assert mine.grad is not None and x.grad is not None
            assert mine.grad.stride() == x.grad.stride()
            torch.testing.assert_close(mine.grad, x.grad)
