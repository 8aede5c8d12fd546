"""Torch callables run by the fallback that write their arguments in their kernels (QAT's
fake-quantize observer, batch norm's running statistics called directly): recorded as the
callable on copies and a write the trace sees, so neither the forward nor the backward's re-run
writes the caller's tensors twice; and modules with their own ``__getattribute__``."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn as nn

import thunder

A = torch.ops.aten

# name -> f(x, running_mean, running_var), every one updating the running statistics in training
BATCH_NORMS = {
    "torch.batch_norm": lambda x, rm, rv: torch.batch_norm(
        x, None, None, rm, rv, True, 0.1, 1e-5, False
    ),
    "torch.native_batch_norm": lambda x, rm, rv: torch.native_batch_norm(
        x, None, None, rm, rv, True, 0.1, 1e-5
    )[0],
    "torch.native_batch_norm keywords": lambda x, rm, rv: torch.native_batch_norm(
        x, None, None, running_mean=rm, running_var=rv, training=True, momentum=0.2, eps=1e-5
    )[0],
    "torch._native_batch_norm_legit": lambda x, rm, rv: torch._native_batch_norm_legit(
        x, None, None, rm, rv, True, 0.1, 1e-5
    )[0],
    "aten._native_batch_norm_legit.default": lambda x, rm, rv: A._native_batch_norm_legit.default(
        x, None, None, rm, rv, True, 0.1, 1e-5
    )[0],
    "aten.native_batch_norm": lambda x, rm, rv: A.native_batch_norm(
        x, None, None, rm, rv, True, 0.1, 1e-5
    )[0],
    "aten.native_batch_norm.default": lambda x, rm, rv: A.native_batch_norm.default(
        x, None, None, rm, rv, True, 0.1, 1e-5
    )[0],
    "aten.batch_norm": lambda x, rm, rv: A.batch_norm(
        x, None, None, rm, rv, True, 0.1, 1e-5, False
    ),
    "aten._batch_norm_with_update": lambda x, rm, rv: A._batch_norm_with_update(
        x, torch.ones(3), torch.zeros(3), rm, rv, 0.1, 1e-5
    )[0],
    "torch._batch_norm_impl_index": lambda x, rm, rv: torch._batch_norm_impl_index(
        x, None, None, rm, rv, True, 0.1, 1e-5, False
    )[0],
}


@pytest.mark.parametrize("cache", [None, "symbolic values"])
@pytest.mark.parametrize("name", sorted(BATCH_NORMS))
def test_batch_norm_called_directly_updates_running_stats_once(name, cache):
    bn = BATCH_NORMS[name]

    def f(x, rm, rv):
        return bn(x, rm, rv) * 2, rm * 1

    jf = thunder.jit(f) if cache is None else thunder.jit(f, cache=cache)
    g = torch.Generator().manual_seed(0)
    ours, theirs = [torch.zeros(3), torch.ones(3)], [torch.zeros(3), torch.ones(3)]
    for _ in range(3):
        x = torch.randn(4, 3, 5, generator=g)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        expected, got = f(xa, *theirs), jf(xb, *ours)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(ours, theirs)  # updated once by the forward
        w = torch.randn(expected[0].shape, generator=g)
        (expected[0] * w).sum().backward()
        (got[0] * w).sum().backward()
        torch.testing.assert_close(ours, theirs)  # and not again by the backward
        torch.testing.assert_close(xb.grad, xa.grad)
        assert [t._version for t in ours] == [t._version for t in theirs]
    assert thunder.compile_stats(jf).eager_fallbacks == 0


def test_batch_norm_called_directly_in_eval_reads_running_stats_only():
    def f(x, rm, rv):
        return torch.batch_norm(x, None, None, rm, rv, False, 0.1, 1e-5, False)

    jf = thunder.jit(f)
    with torch.inference_mode():  # inference tensors: eager never writes them
        rm, rv = torch.randn(3), torch.rand(3) + 0.5
    for seed in range(2):
        x = torch.randn(4, 3, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(jf(x, rm, rv), f(x, rm, rv))
    assert "copy_" not in str(thunder.last_traces(jf)[-1])


def _fake_quant_state() -> list[torch.Tensor]:
    return [torch.tensor(-1.0), torch.tensor(1.0), torch.ones(1), torch.zeros(1, dtype=torch.int32)]


FAKE_QUANTS = {
    "torch.fused_moving_avg_obs_fake_quant": torch.fused_moving_avg_obs_fake_quant,
    "aten.fused_moving_avg_obs_fake_quant.default": A.fused_moving_avg_obs_fake_quant.default,
    "torch._fused_moving_avg_obs_fq_helper": lambda *a: torch._fused_moving_avg_obs_fq_helper(*a)[
        0
    ],
}


@pytest.mark.parametrize("cache", [None, "symbolic values"])
@pytest.mark.parametrize("name", sorted(FAKE_QUANTS))
def test_fake_quant_observer_updated_once_per_call(name, cache):
    op = FAKE_QUANTS[name]

    def f(x, on, mn, mx, sc, zp):
        return op(x, on, on, mn, mx, sc, zp, 0.01, 0, 255, -1) * 1

    jf = thunder.jit(f) if cache is None else thunder.jit(f, cache=cache)
    on = torch.ones(1, dtype=torch.long)
    ours, theirs = _fake_quant_state(), _fake_quant_state()
    g = torch.Generator().manual_seed(1)
    for _ in range(3):
        x = torch.randn(8, generator=g) * 3
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        expected, got = f(xa, on, *theirs), jf(xb, on, *ours)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        expected.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
        torch.testing.assert_close(xb.grad, xa.grad, rtol=0, atol=0)


def test_qat_fake_quantize_module_trains_as_eager():
    from torch.ao.quantization.fake_quantize import FusedMovingAvgObsFakeQuantize

    torch.manual_seed(0)
    eager = nn.Sequential(nn.Linear(4, 4), FusedMovingAvgObsFakeQuantize())
    ours = copy.deepcopy(eager)
    jm = thunder.jit(ours)
    g = torch.Generator().manual_seed(2)
    for _ in range(3):
        x = torch.randn(5, 4, generator=g)
        expected, got = eager(x), jm(x)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
        expected.square().sum().backward()
        got.square().sum().backward()
        for (name, a), b in zip(eager.state_dict().items(), ours.state_dict().values()):
            torch.testing.assert_close(b, a, rtol=0, atol=0, msg=name)
        for a, b in zip(eager.parameters(), ours.parameters()):
            torch.testing.assert_close(b.grad, a.grad)
    assert thunder.compile_stats(jm).eager_fallbacks == 0


def test_kernel_writes_read_from_schemas():
    from thunder_ir.ops.fallback_mutating import kernel_writes

    fq = kernel_writes(torch.fused_moving_avg_obs_fake_quant)
    assert fq is not None
    assert [n for _, n in fq.written] == ["running_min", "running_max", "scale", "zero_point"]
    for fn in (torch.batch_norm, A.native_batch_norm.default, A._native_batch_norm_legit):
        found = kernel_writes(fn)
        assert found is not None and [n for _, n in found.written] == [
            "running_mean",
            "running_var",
        ]
    # out= variants, in-place names and ops writing nothing are not such callables
    for fn in (torch.topk, torch.max, torch.relu_, torch.add, A._native_batch_norm_legit.no_stats):
        assert kernel_writes(fn) is None


def test_rrelu_with_noise_writes_its_noise_once():
    def f(x, noise):
        return torch._C._nn.rrelu_with_noise(x, noise, 0.1, 0.3, True) * 2

    jf = thunder.jit(f)
    for seed in range(3):
        x = torch.randn(6, generator=torch.Generator().manual_seed(seed))
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ours, theirs = torch.zeros(6), torch.zeros(6)
        torch.manual_seed(seed)
        expected = f(xa, theirs)
        torch.manual_seed(seed)
        got = jf(xb, ours)
        torch.testing.assert_close(got, expected)
        expected.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(ours, theirs)
        torch.testing.assert_close(xb.grad, xa.grad)


# -- modules with their own __getattribute__ --------------------------------------------------------


class _Negating(nn.Module):
    """Answers ``k`` negated once ``flag`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.k = 2.0
        self.flag = False

    def __getattribute__(self, name: str):
        v = object.__getattribute__(self, name)
        if name == "k" and object.__getattribute__(self, "flag"):
            return -v
        return v

    def forward(self, x):
        return x * self.k


class _Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = _Negating()

    def forward(self, x):
        return self.inner(x) + self.inner.k


def _jit(fn, cache):
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


@pytest.mark.parametrize("cache", [None, "symbolic values"])
@pytest.mark.parametrize("where", ["root", "submodule", "argument"])
def test_module_getattribute_answers_follow_its_state(where, cache):
    eager_m = _Negating() if where != "submodule" else _Outer()
    ours_m = copy.deepcopy(eager_m)
    if where == "argument":
        jf = _jit(lambda x, mod: mod(x), cache)
        call_ours, call_eager = (lambda x: jf(x, ours_m)), (lambda x: eager_m(x))
    else:
        jm = _jit(ours_m, cache)
        call_ours, call_eager = jm, eager_m
    g = torch.Generator().manual_seed(3)
    for i in range(4):
        if i == 1:
            for m in (eager_m, ours_m):
                (m if where != "submodule" else m.inner).flag = True
        if i == 3:
            for m in (eager_m, ours_m):
                (m if where != "submodule" else m.inner).k = 5.0
        x = torch.randn(3, generator=g)
        torch.testing.assert_close(call_ours(x), call_eager(x))


class _Delegating(nn.Module):
    """Its ``__getattribute__`` answers through ``super()``; members come from
    ``nn.Module.__getattr__``."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(4, 4)
        self.w = nn.Parameter(torch.randn(4, 4))
        self.register_buffer("b", torch.ones(4))
        self.k = 2.0

    def __getattribute__(self, name: str):
        if name == "k2":
            return object.__getattribute__(self, "k") * 2
        return super().__getattribute__(name)

    def forward(self, x):
        y = self.l(x) @ self.w * self.b * self.k2
        if hasattr(self, "extra"):
            y = y + self.extra
        return y


class _Mixin:
    def __getattribute__(self, name: str):
        if name == "k2":
            return object.__getattribute__(self, "k") + 1
        return super().__getattribute__(name)


class _MixedIn(_Mixin, _Delegating):
    pass


def _replace_linear(m):
    m.l = nn.Linear(4, 4)


def _replace_weight(m):
    m.w = nn.Parameter(torch.full((4, 4), 0.5))


def _replace_buffer(m):
    m.b = torch.full((4,), 3.0)


def _set_k(m):
    m.k = -1.0


def _add_extra(m):
    m.register_buffer("extra", torch.full((4,), 7.0))


@pytest.mark.parametrize("cls", [_Delegating, _MixedIn])
def test_module_getattribute_reaching_members_through_module_getattr(cls):
    torch.manual_seed(0)
    eager = cls()
    ours = copy.deepcopy(eager)
    jm = thunder.jit(ours)
    changes = [None, _replace_linear, _replace_weight, _replace_buffer, _set_k, _add_extra, None]
    g = torch.Generator().manual_seed(5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager fallback, no warning
        for change in changes:
            if change is not None:
                torch.manual_seed(1)
                change(eager)
                torch.manual_seed(1)
                change(ours)
            x = torch.randn(3, 4, generator=g)
            xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
            expected, got = eager(xa), jm(xb)
            torch.testing.assert_close(got, expected)
            expected.square().sum().backward()
            got.square().sum().backward()
            torch.testing.assert_close(xb.grad, xa.grad)
            for (name, a), b in zip(eager.named_parameters(), ours.parameters()):
                torch.testing.assert_close(b.grad, a.grad, msg=name)
    assert thunder.compile_stats(jm).eager_fallbacks == 0


# -- TorchScript callables: run natively (split), said so plainly ----------------------------------


class _WithScripted(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            self.a = torch.jit.script(nn.Linear(4, 4))
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        return self.b(self.a(x).relu())


def test_scripted_submodule_runs_natively_and_matches_eager():
    torch.manual_seed(0)
    eager = _WithScripted()
    torch.manual_seed(0)
    ours = _WithScripted()  # (a deepcopy of a ScriptModule does not train its copy)
    jm = thunder.jit(ours)
    g = torch.Generator().manual_seed(6)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            x = torch.randn(2, 4, generator=g)
            xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
            expected, got = eager(xa), jm(xb)
            torch.testing.assert_close(got, expected)
            expected.square().sum().backward()
            got.square().sum().backward()
            torch.testing.assert_close(xb.grad, xa.grad)
            for a, b in zip(eager.parameters(), ours.parameters()):
                torch.testing.assert_close(b.grad, a.grad)
    said = [str(w.message) for w in caught if "thunder" in str(w.message)]
    assert said and all("please report" not in s for s in said)
    assert any("TorchScript" in s for s in said)


def _sin_twice(x):
    return x.sin() * 2


def test_scripted_function_runs_natively_and_matches_eager():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(_sin_twice)

    def f(x):
        return scripted(x) + 1

    jf = thunder.jit(f)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for seed in range(3):
            x = torch.randn(3, generator=torch.Generator().manual_seed(seed))
            xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
            expected, got = f(xa), jf(xb)
            torch.testing.assert_close(got, expected)
            expected.sum().backward()
            got.sum().backward()
            torch.testing.assert_close(xb.grad, xa.grad)
    assert all("please report" not in str(w.message) for w in caught)


def test_writing_callable_keeps_its_named_result():
    def f(x, on, mn, mx, sc, zp):
        r = torch._fused_moving_avg_obs_fq_helper(x, on, on, mn, mx, sc, zp, 0.01, 0, 255, -1)
        return r.output * 2, r.mask, type(r).__name__

    jf = thunder.jit(f)
    on = torch.ones(1, dtype=torch.long)
    ours, theirs = _fake_quant_state(), _fake_quant_state()
    for seed in range(3):
        x = torch.randn(8, generator=torch.Generator().manual_seed(seed)) * 3
        got, expected = jf(x, on, *ours), f(x, on, *theirs)
        assert got[2] == expected[2]
        torch.testing.assert_close(got[:2], expected[:2], rtol=0, atol=0)
        torch.testing.assert_close(ours, theirs, rtol=0, atol=0)
