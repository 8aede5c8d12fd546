"""Autograd's version checks of a jitted program are eager's: a backward raises "modified by an
inplace operation" exactly where eager's does, and otherwise gives eager's gradients.

- batch_norm updates its running statistics without bumping their version counter (eager's kernel
  does the same): a model with a train-mode BatchNorm called twice before one backward runs;
- what eager's nodes save (a bias, a loss's target, cumsum's input are not saved) decides whether
  a tensor written between forward and backward breaks the backward;
- an in-place op that saves a tensor it then overwrites (``y.mul_(y)``, ``leaky_relu_`` then a
  write) raises as eager's does;
- outputs that are views of another output can be written in place, as eager's.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import thunder

nn = torch.nn
CACHES = [None, "symbolic values"]


def _jit(fn: Any, cache: str | None) -> Any:
    return thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)


def _outcome(run: Callable[[], Any]) -> str:
    try:
        run()
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e), str(e)
        return "raises"
    return "ok"


# 1. Running statistics of a train-mode norm layer ------------------------------------------------


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize(
    "make",
    [
        lambda: nn.Sequential(nn.Conv1d(4, 4, 1), nn.BatchNorm1d(4), nn.ReLU()),
        lambda: nn.Sequential(nn.Conv1d(4, 4, 1), nn.InstanceNorm1d(4, track_running_stats=True)),
        lambda: nn.Sequential(nn.Conv1d(4, 4, 1), nn.BatchNorm1d(4, momentum=None)),
    ],
    ids=["batch_norm", "instance_norm", "batch_norm_cumulative"],
)
def test_norm_called_twice_then_one_backward(make: Callable[[], nn.Module], cache: str | None):
    torch.manual_seed(0)
    model = make()
    mj = copy.deepcopy(model)
    jm = _jit(mj, cache)
    for _ in range(3):
        x1, x2 = torch.randn(8, 4, 5), torch.randn(8, 4, 5)
        (model(x1) - model(x2)).pow(2).mean().backward()
        (jm(x1) - jm(x2)).pow(2).mean().backward()
        for p, q in zip(model.parameters(), mj.parameters(), strict=True):
            torch.testing.assert_close(q.grad, p.grad, atol=1e-5, rtol=1e-5)
        for (name, b), (_, c) in zip(model.named_buffers(), mj.named_buffers(), strict=True):
            torch.testing.assert_close(c, b, msg=name)
            assert c._version == b._version, name
        model.zero_grad()
        mj.zero_grad()


@pytest.mark.parametrize("cache", CACHES)
def test_target_under_no_grad_between_forward_and_backward(cache: str | None):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    mj = copy.deepcopy(model)
    jm = _jit(mj, cache)
    for _ in range(3):
        x1, x2 = torch.randn(8, 4), torch.randn(8, 4)
        for m in (model, jm):
            y = m(x1)
            with torch.no_grad():
                t = m(x2)
            (y - t).pow(2).mean().backward()
        for p, q in zip(model.parameters(), mj.parameters(), strict=True):
            torch.testing.assert_close(q.grad, p.grad, atol=1e-5, rtol=1e-5)
        model.zero_grad()
        mj.zero_grad()


class _EvalThenTrain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.bn.eval()
        y = self.bn(x)  # reads (eager saves) the running statistics
        self.bn.train()
        return y + self.bn(x)  # updates them in place


@pytest.mark.parametrize("cache", CACHES)
def test_saved_running_stat_updated_in_the_same_program(cache: str | None):
    torch.manual_seed(0)
    me = _EvalThenTrain()
    mj = copy.deepcopy(me)
    jm = _jit(mj, cache)
    bn = nn.BatchNorm1d(4)
    bnj = copy.deepcopy(bn)

    def times_running_var(m: nn.Module) -> Callable[[torch.Tensor], torch.Tensor]:
        return lambda x: x * m.running_var + m(x)

    f, jf = times_running_var(bn), _jit(times_running_var(bnj), cache)
    for _ in range(3):
        x = torch.randn(3, 4, requires_grad=True)
        xj = x.detach().clone().requires_grad_()
        me(x).pow(2).sum().backward()
        jm(xj).pow(2).sum().backward()
        torch.testing.assert_close(xj.grad, x.grad)
        torch.testing.assert_close(mj.bn.running_mean, me.bn.running_mean)
        x.grad = xj.grad = None
        f(x).pow(2).sum().backward()
        jf(xj).pow(2).sum().backward()
        torch.testing.assert_close(xj.grad, x.grad)
        torch.testing.assert_close(bnj.running_var, bn.running_var)


@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("cache", CACHES)
def test_running_stat_written_by_the_caller_still_raises(training: bool, cache: str | None):
    def f(x: torch.Tensor, rm: torch.Tensor, rv: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(x, rm, rv, training=training)

    jf = _jit(f, cache)
    for _ in range(2):
        outcomes = []
        for h in (f, jf):
            x = torch.randn(3, 4, requires_grad=True)
            rm, rv = torch.zeros(4), torch.ones(4)
            out = h(x, rm, rv)
            rv.add_(1)
            outcomes.append(_outcome(lambda out=out: out.pow(2).sum().backward()))
        assert outcomes == ["raises", "raises"]


# 2. Inputs written between forward and backward --------------------------------------------------

_WRITTEN_INPUT_CASES: dict[str, tuple[Callable[..., torch.Tensor], int, int]] = {
    # name: (function, number of inputs, input written)
    "cumsum": (lambda x, w: x.cumsum(1), 2, 0),
    "double": (lambda x, w: x.double(), 2, 0),
    "sort": (lambda x, w: x.sort(1).values, 2, 0),
    "topk": (lambda x, w: x.topk(2).values, 2, 0),
    "max_dim": (lambda x, w: x.max(1).values, 2, 0),
    "l1_loss_input": (lambda x, t: F.l1_loss(x, t), 2, 0),
    "l1_loss_target": (lambda x, t: F.l1_loss(x, t), 2, 1),
    "cross_entropy": (lambda x, w: F.cross_entropy(x, w.softmax(-1)), 2, 0),
    "lerp_start": (lambda x, y: torch.lerp(x, y, 0.3), 2, 0),
    "lerp_end": (lambda x, y: torch.lerp(x, y, 0.3), 2, 1),
    "addcmul_added": (lambda x, w, b: torch.addcmul(x, w, b), 3, 0),
    "addmm_bias": (lambda x, w, b: torch.addmm(b, x, w), 3, 2),
    "conv1d_bias": (lambda x, w, b: F.conv1d(x[None], w[:, :, None], b[0]), 3, 2),
    "group_norm_bias": (lambda x, w, b: F.group_norm(x, 2, w[0], b[0]), 3, 2),
    "batch_norm_bias": (
        lambda x, w, b: F.batch_norm(x, None, None, w[0], b[0], training=True),
        3,
        2,
    ),
    "softmin": (lambda x, w: F.softmin(x, -1), 2, 0),
    # eager raises for these: thunder must too
    "mul_operand": (lambda x, w: x * w, 2, 0),
    "addcmul_factor": (lambda x, w, b: torch.addcmul(x, w, b), 3, 1),
    "addmm_matrix": (lambda x, w, b: torch.addmm(b, x, w), 3, 0),
    "conv1d_weight": (lambda x, w, b: F.conv1d(x[None], w[:, :, None], b[0]), 3, 1),
    "group_norm_weight": (lambda x, w, b: F.group_norm(x, 2, w[0], b[0]), 3, 1),
    "max_all": (lambda x, w: x.max(), 2, 0),
    "lerp_tensor_weight": (lambda x, y, w: torch.lerp(x, y, w.sigmoid()), 3, 0),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", list(_WRITTEN_INPUT_CASES))
def test_input_written_between_forward_and_backward(name: str, cache: str | None):
    fn, n, k = _WRITTEN_INPUT_CASES[name]
    jfn = _jit(fn, cache)
    for seed in range(2):
        results = []
        for h in (fn, jfn):
            torch.manual_seed(seed)
            args = [torch.randn(4, 4, requires_grad=True) for _ in range(n)]
            out = h(*args)
            with torch.no_grad():
                args[k].mul_(1.5).add_(0.25)
            outcome = _outcome(lambda out=out: out.double().pow(2).sum().backward())
            results.append((outcome, [a.grad for a in args]))
        (eager, eager_grads), (jitted, jitted_grads) = results
        assert jitted == eager
        if eager == "ok":
            for ge, gj in zip(eager_grads, jitted_grads, strict=True):
                assert (ge is None) == (gj is None)
                if ge is not None:
                    torch.testing.assert_close(gj, ge, atol=1e-4, rtol=1e-3)


# 3. In-place ops that save what they overwrite ----------------------------------------------------

_SELF_OVERWRITING = {
    "leaky_relu_then_mul_": lambda x: F.leaky_relu(x * 1, 0.1, inplace=True).mul_(2),
    "elu_then_mul_": lambda x: F.elu(x * 1, inplace=True).mul_(2),
    "mul_self": lambda x: (lambda y: y.mul_(y))(x * 1),
    "addcmul_self": lambda x: (lambda y: y.addcmul_(y, y))(x * 1),
    # eager runs these: its node saves a clone of the overwritten value, or nothing
    "hardtanh_then_mul_": lambda x: F.hardtanh(x * 1, inplace=True).mul_(2),
    "mul_other": lambda x: (lambda y: y.mul_(x))(x * 1),
    "add_self": lambda x: (lambda y: y.add_(y))(x * 1),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", list(_SELF_OVERWRITING))
def test_in_place_op_overwriting_what_it_saved(name: str, cache: str | None):
    fn = _SELF_OVERWRITING[name]
    jfn = _jit(fn, cache)
    for seed in range(2):
        results = []
        for h in (fn, jfn):
            x = torch.randn(3, 4, generator=torch.Generator().manual_seed(seed))
            x.requires_grad_()
            outcome = _outcome(lambda h=h, x=x: h(x).sum().backward())
            results.append((outcome, x.grad))
        (eager, ge), (jitted, gj) = results
        assert jitted == eager
        if eager == "ok":
            torch.testing.assert_close(gj, ge)


# 4. Outputs that are views of another output -----------------------------------------------------


def _slice_of_intermediate(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x * 2
    return y, y[1:]


def _view_before_base(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x * 2
    return y.view(16), y


def _two_views_and_base(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    y = x + 1
    return y[:1], y, y[2:].t()


def _view_of_saved_result(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    y = x.exp()  # eager saves y: a write into its view breaks the backward
    return y, y[1:]


_VIEW_OUTPUT_CASES = {
    "write_view": (_slice_of_intermediate, lambda o: o[1].mul_(0), 0),
    "write_base": (_slice_of_intermediate, lambda o: o[0].add_(1), 1),
    "write_base_grad_view": (_view_before_base, lambda o: o[1].add_(1), 0),
    "write_view_grad_base": (_view_before_base, lambda o: o[0].mul_(3), 1),
    "two_views": (_two_views_and_base, lambda o: o[2].mul_(2), None),
    "saved_result": (_view_of_saved_result, lambda o: o[1].mul_(0), 0),
    "no_write": (_two_views_and_base, lambda o: None, None),
}


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("name", list(_VIEW_OUTPUT_CASES))
def test_written_output_view_of_another_output(name: str, cache: str | None):
    fn, write, k = _VIEW_OUTPUT_CASES[name]
    jfn = _jit(fn, cache)
    for seed in range(2):
        results = []
        for h in (fn, jfn):
            x = torch.randn(4, 4, generator=torch.Generator().manual_seed(seed))
            x.requires_grad_()
            outs = h(x)
            write(outs)
            used = outs if k is None else (outs[k],)
            loss = sum((o * (i + 2)).sum() for i, o in enumerate(used))
            outcome = _outcome(lambda loss=loss: loss.backward())
            results.append((outcome, x.grad, [o.detach().clone() for o in outs]))
        (eager, ge, oe), (jitted, gj, oj) = results
        assert jitted == eager
        for a, b in zip(oe, oj, strict=True):
            torch.testing.assert_close(b, a)
        if eager == "ok":
            torch.testing.assert_close(gj, ge)


# 5. What a fusing executor's backward recomputes --------------------------------------------------

_RECOMPUTED_CASES: dict[str, tuple[Callable[..., torch.Tensor], int]] = {
    # eager saves tanh's and sigmoid's results, not their inputs: a write into x is fine
    "tanh": (lambda x, w: torch.tanh(x * 2) * w, 0),
    "sigmoid": (lambda x, w: torch.sigmoid(x) * w, 0),
    # eager saves w for the product: the write raises
    "product": (lambda x, w: torch.sigmoid(x) * w, 1),
}


@pytest.mark.parametrize("name", list(_RECOMPUTED_CASES))
def test_fused_backward_reads_what_eager_saves(name: str):
    fn, k = _RECOMPUTED_CASES[name]
    jfn = thunder.jit(fn, executors=["torchcompile", "torch_ops", "torch"])
    for seed in range(2):
        results = []
        for h in (fn, jfn):
            torch.manual_seed(seed)
            args = [torch.randn(4, 4, requires_grad=True) for _ in range(2)]
            out = h(*args)
            with torch.no_grad():
                args[k].mul_(1.5).add_(0.25)
            outcome = _outcome(lambda out=out: out.double().pow(2).sum().backward())
            results.append((outcome, [a.grad for a in args]))
        (eager, eager_grads), (jitted, jitted_grads) = results
        assert jitted == eager
        if eager == "ok":
            for ge, gj in zip(eager_grads, jitted_grads, strict=True):
                torch.testing.assert_close(gj, ge, atol=1e-4, rtol=1e-3)


class _KeepsDetached(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)
        self.last: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x.unsqueeze(-1)).squeeze(-1)
        self.last = y.detach()  # shares y's memory: y must not be remade from it
        return y


@pytest.mark.parametrize("cache", CACHES)
def test_a_view_output_sharing_memory_with_a_detached_output_keeps_its_gradient(
    cache: str | None,
) -> None:
    eager = _KeepsDetached()
    jitted_module = copy.deepcopy(eager)
    jitted = _jit(jitted_module, cache)
    for _ in range(3):
        x = torch.randn(4)
        expected, got = eager(x), jitted(x)
        assert got.requires_grad and expected.requires_grad
        torch.testing.assert_close(got, expected)
        expected.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(jitted_module.last, eager.last)
        assert jitted_module.last is not None and not jitted_module.last.requires_grad
    for p, q in zip(jitted_module.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
