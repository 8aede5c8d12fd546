"""End to end: training steps under thunder.jit equal eager PyTorch. With grad mode on and inputs
(parameters) requiring grad, jit compiles the program through thunder's autodiff (a forward and a
backward trace wired to torch.autograd): the loss, every parameter's ``.grad``, the inputs'
``.grad`` and the parameters after optimizer steps match eager."""

from __future__ import annotations

import copy

import pytest
import torch
from test_models import BertEncoder
from torch import nn
from torch.nn import functional as F

import thunder
from thunder.models import GPT, GPTConfig

SMALL_GPT = GPTConfig(n_layer=2, n_head=4, n_embd=64, vocab_size=128, block_size=32)


def _assert_grads_match(model: nn.Module, reference: nn.Module, **tol: float) -> None:
    params = dict(reference.named_parameters())
    for name, p in model.named_parameters():
        q = params[name]
        assert (p.grad is None) == (q.grad is None), name
        if p.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, msg=lambda m, n=name: f"{n}: {m}", **tol)


def _gpt_loss(model: nn.Module, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    logits = model(idx)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def _gpt_batch(config: GPTConfig) -> tuple[torch.Tensor, torch.Tensor]:
    idx = torch.randint(0, config.vocab_size, (2, config.block_size))
    return idx, torch.randint(0, config.vocab_size, (2, config.block_size))


def test_nanogpt_training_step_matches_eager():
    torch.manual_seed(0)
    model = GPT(SMALL_GPT)
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    for step in range(2):  # the second step reuses the compiled program
        model.zero_grad(set_to_none=True)
        reference.zero_grad(set_to_none=True)
        idx, targets = _gpt_batch(SMALL_GPT)
        loss = _gpt_loss(jm, idx, targets)
        expected = _gpt_loss(reference, idx, targets)
        torch.testing.assert_close(loss, expected)
        loss.backward()
        expected.backward()
        _assert_grads_match(model, reference, atol=1e-5, rtol=1e-4)
    assert thunder.cache_misses(jm) == 1 and thunder.cache_hits(jm) == 1
    backward = thunder.last_backward_traces(jm)
    assert backward and "def computation_backward(" in backward[0].python()
    forward = [t.python() for t in thunder.last_traces(jm)]
    assert any("def computation_forward(" in src for src in forward)


def test_nanogpt_loss_inside_jit_matches_eager():
    torch.manual_seed(0)
    model = GPT(SMALL_GPT)
    reference = copy.deepcopy(model)
    jstep = thunder.jit(lambda idx, targets: _gpt_loss(model, idx, targets))
    idx, targets = _gpt_batch(SMALL_GPT)
    loss = jstep(idx, targets)
    expected = _gpt_loss(reference, idx, targets)
    torch.testing.assert_close(loss, expected)
    loss.backward()
    expected.backward()
    _assert_grads_match(model, reference, atol=1e-5, rtol=1e-4)
    assert thunder.last_backward_traces(jstep)


def test_mlp_input_and_parameter_grads_match_eager():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 4)
    )
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    x = torch.randn(8, 16, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    out, expected = jm(x), reference(x_ref)
    torch.testing.assert_close(out, expected)
    cotangent = torch.randn_like(out)
    out.backward(cotangent)
    expected.backward(cotangent)
    torch.testing.assert_close(x.grad, x_ref.grad)
    _assert_grads_match(model, reference)
    assert thunder.last_backward_traces(jm)


def test_bert_encoder_training_grads_match_eager():
    torch.manual_seed(0)
    model = BertEncoder().eval()  # dropout off: eager and thunder draw different random masks
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    ids = torch.randint(0, 300, (2, 16))
    types = torch.randint(0, 2, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.long)
    mask[1, 10:] = 0

    def loss_of(m: nn.Module) -> torch.Tensor:
        hidden, pooled = m(ids, types, mask)
        return hidden.square().mean() + pooled.sum()

    loss, expected = loss_of(jm), loss_of(reference)
    torch.testing.assert_close(loss, expected)
    loss.backward()
    expected.backward()
    _assert_grads_match(model, reference, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("track_running_stats", [True, False])
def test_batchnorm_training_grads_and_running_stats_match_eager(track_running_stats):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(16, 32),
        nn.BatchNorm1d(32, track_running_stats=track_running_stats),
        nn.ReLU(),
        nn.Linear(32, 4),
    )
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    for _ in range(2):
        x = torch.randn(8, 16)
        loss, expected = jm(x).square().sum(), reference(x).square().sum()
        torch.testing.assert_close(loss, expected)
        loss.backward()
        expected.backward()
    _assert_grads_match(model, reference, atol=1e-5, rtol=1e-4)
    if track_running_stats:
        bn, bn_ref = model[1], reference[1]
        torch.testing.assert_close(bn.running_mean, bn_ref.running_mean)
        torch.testing.assert_close(bn.running_var, bn_ref.running_var)
        assert bn.num_batches_tracked == bn_ref.num_batches_tracked == 2
    assert thunder.cache_misses(jm) == 1


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_optimizer_steps_update_parameters_as_eager(optimizer):
    torch.manual_seed(0)
    model = GPT(SMALL_GPT)
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)

    def make(params):
        if optimizer == "sgd":
            return torch.optim.SGD(params, lr=0.1, momentum=0.9)
        return torch.optim.AdamW(params, lr=1e-3)

    opt, opt_ref = make(model.parameters()), make(reference.parameters())
    for _ in range(3):
        idx, targets = _gpt_batch(SMALL_GPT)
        for m, o in ((jm, opt), (reference, opt_ref)):
            o.zero_grad(set_to_none=True)
            _gpt_loss(m, idx, targets).backward()
            o.step()
    params = dict(reference.named_parameters())
    for name, p in model.named_parameters():
        torch.testing.assert_close(p, params[name], atol=1e-5, rtol=1e-4, msg=name)
    assert thunder.cache_misses(jm) == 1  # parameters updated in place keep the program


def test_grad_mode_is_part_of_the_cache_key():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
    jm = thunder.jit(model)
    x = torch.randn(4, 8)
    with torch.no_grad():
        out = jm(x)
    assert out.grad_fn is None and not thunder.last_backward_traces(jm)
    out = jm(x)  # grad mode on: a second program, through autodiff
    assert out.grad_fn is not None and thunder.last_backward_traces(jm)
    assert "grad mode" in (thunder.compile_stats(jm).last_recompile_reason or "")
    with torch.no_grad():
        assert jm(x).grad_fn is None
    assert jm(x).grad_fn is not None
    assert thunder.cache_misses(jm) == 2 and thunder.cache_hits(jm) == 2


def test_disable_torch_autograd_keeps_the_plain_program():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
    reference = copy.deepcopy(model)
    jm = thunder.jit(model, disable_torch_autograd=True)
    x = torch.randn(4, 8)
    jm(x).sum().backward()  # torch's autograd records the torch calls of the execution trace
    reference(x).sum().backward()
    assert not thunder.last_backward_traces(jm)
    _assert_grads_match(model, reference)


def test_frozen_parameters_get_no_grad():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
    model[0].weight.requires_grad_(False)
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    x = torch.randn(4, 8)
    jm(x).sum().backward()
    reference(x).sum().backward()
    assert model[0].weight.grad is None
    _assert_grads_match(model, reference)
    model[0].weight.requires_grad_(True)  # the prologue's requires_grad guard: recompile
    model.zero_grad(set_to_none=True)
    reference.zero_grad(set_to_none=True)
    reference[0].weight.requires_grad_(True)
    jm(x).sum().backward()
    reference(x).sum().backward()
    _assert_grads_match(model, reference)
    assert thunder.cache_misses(jm) == 2


def test_a_parameter_reached_only_through_an_unused_output_gets_no_grad():
    """A model returns two outputs and the loss uses one: eager's autograd never reaches the
    parameters behind the other, so their ``.grad`` stays None, which optimizers read as "not
    trained this step" (no weight decay, no moment update). A zero tensor would train them."""

    class TwoHeads(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(8, 8)
            self.head = nn.Linear(8, 3)
            self.pooler = nn.Linear(8, 4)

        def forward(self, x):
            h = torch.tanh(self.body(x))
            return self.head(h), self.pooler(h[:, 0])

    torch.manual_seed(0)
    model = TwoHeads()
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    x = torch.randn(2, 5, 8)
    for pick in (0, 1, None):
        model.zero_grad(set_to_none=True)
        reference.zero_grad(set_to_none=True)
        for m, run in ((reference, reference), (model, jm)):
            outs = run(x)
            loss = outs[0].square().mean() if pick is None else outs[pick].sum()
            if pick is None:
                loss = loss + outs[1].mean()
            loss.backward()
        _assert_grads_match(model, reference)
    assert model.pooler.weight.grad is not None
    model.zero_grad(set_to_none=True)
    jm(x)[0].sum().backward()
    assert model.pooler.weight.grad is None and model.pooler.bias.grad is None
    assert model.head.weight.grad is not None and model.body.weight.grad is not None

    # torch.autograd.grad with allow_unused: None, as eager says
    reference.zero_grad(set_to_none=True)
    params = list(model.parameters())
    got = torch.autograd.grad(jm(x)[1].sum(), params, allow_unused=True)
    want = torch.autograd.grad(
        reference(x)[1].sum(), list(reference.parameters()), allow_unused=True
    )
    assert [g is None for g in got] == [g is None for g in want]
    for g, w in zip(got, want):
        if w is not None:
            torch.testing.assert_close(g, w)


def test_an_unused_output_whose_inputs_feed_a_used_one_still_gives_their_grads():
    torch.manual_seed(0)
    w = torch.randn(4, 4, requires_grad=True)
    x = torch.randn(3, 4, requires_grad=True)

    def f(x, w):
        y = x @ w
        return y.sin(), y.cos(), (x * 2).sum()

    jf = thunder.jit(f)
    for used in ((0,), (1,), (2,), (0, 2), (1, 2)):
        got = torch.autograd.grad(sum(jf(x, w)[i].sum() for i in used), (x, w), allow_unused=True)
        want = torch.autograd.grad(sum(f(x, w)[i].sum() for i in used), (x, w), allow_unused=True)
        assert [g is None for g in got] == [g is None for g in want], used
        for g, e in zip(got, want):
            if e is not None:
                torch.testing.assert_close(g, e)


def test_in_place_writes_inside_torch_checkpoint_keep_their_gradients():
    """``out = x @ w; out.add_(bias[ids])`` inside ``torch.utils.checkpoint`` (transformers'
    MoE experts under gradient checkpointing): the bias gets eager's gradient."""
    from torch.utils.checkpoint import checkpoint

    def block(x, w, b, ids):
        out = x @ w
        out.add_(b[ids])
        out.mul_(2.0)
        return out

    def f(x, w, b, ids):
        return checkpoint(block, x, w, b, ids, use_reentrant=False).square().sum()

    torch.manual_seed(0)
    x = torch.randn(6, 4, requires_grad=True)
    w = torch.randn(4, 3, requires_grad=True)
    b = torch.randn(2, 3, requires_grad=True)
    ids = torch.tensor([0, 1, 1, 0, 1, 0])
    want = torch.autograd.grad(f(x, w, b, ids), (x, w, b))
    got = torch.autograd.grad(thunder.jit(f)(x, w, b, ids), (x, w, b))
    for g, e in zip(got, want):
        torch.testing.assert_close(g, e)
