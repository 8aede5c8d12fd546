"""End to end: whole models under thunder.jit equal eager PyTorch (eval, no grad), on fresh
random inputs, and reuse their compiled program."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import thunder
from thunder.models import GPT, GPTConfig


class BertSelfAttention(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.dropout = nn.Dropout(0.1)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        return x.view(b, t, self.heads, c // self.heads).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]) + mask
        ctx = self.dropout(F.softmax(scores, dim=-1)) @ v
        b, h, t, d = ctx.shape
        ctx = ctx.permute(0, 2, 1, 3).reshape(b, t, h * d)
        return self.norm(x + self.dropout(self.out(ctx)))


class BertLayer(nn.Module):
    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.attention = BertSelfAttention(hidden, heads)
        self.intermediate = nn.Linear(hidden, 4 * hidden)
        self.output = nn.Linear(4 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.attention(x, mask)
        return self.norm(x + self.output(F.gelu(self.intermediate(x))))


class BertEncoder(nn.Module):
    """A BERT-style encoder: word + position + token-type embeddings, post-norm layers, pooler."""

    def __init__(
        self, vocab: int = 300, hidden: int = 64, heads: int = 4, layers: int = 2, max_len: int = 32
    ):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_len, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden, heads) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, ids: torch.Tensor, token_types: torch.Tensor, attention_mask: torch.Tensor):
        t = ids.shape[1]
        positions = torch.arange(t, device=ids.device).unsqueeze(0)
        x = self.norm(self.word(ids) + self.position(positions) + self.token_type(token_types))
        mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, mask)
        return x, torch.tanh(self.pooler(x[:, 0]))


class MLPWithNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(16, 32),
            nn.BatchNorm1d(32),
            nn.ReLU(),
            nn.Dropout(0.3),
            nn.Linear(32, 32),
            nn.BatchNorm1d(32),
            nn.Tanh(),
            nn.Dropout(0.3),
            nn.Linear(32, 4),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def _check_reuse(jm, model, make_inputs, calls=3):
    with torch.no_grad():
        for _ in range(calls):
            inputs = make_inputs()
            torch.testing.assert_close(jm(*inputs), model(*inputs))
    assert thunder.cache_misses(jm) == 1
    assert thunder.cache_hits(jm) == calls - 1


def test_nanogpt_matches_eager():
    torch.manual_seed(0)
    config = GPTConfig(n_layer=2, n_head=4, n_embd=64, vocab_size=128, block_size=32)
    model = GPT(config).eval()
    jm = thunder.jit(model)
    _check_reuse(jm, model, lambda: (torch.randint(0, 128, (2, 32)),))
    trace = thunder.last_traces(jm)[-1].python()
    assert "def computation(idx" in trace


def test_nanogpt_default_config_matches_eager():
    torch.manual_seed(1)
    model = GPT().eval()
    jm = thunder.jit(model)
    _check_reuse(jm, model, lambda: (torch.randint(0, 512, (2, 64)),), calls=2)


def test_bert_encoder_matches_eager():
    torch.manual_seed(0)
    model = BertEncoder().eval()
    jm = thunder.jit(model)

    def inputs():
        ids = torch.randint(0, 300, (2, 16))
        types = torch.randint(0, 2, (2, 16))
        mask = torch.ones(2, 16, dtype=torch.long)
        mask[1, 10:] = 0
        return ids, types, mask

    _check_reuse(jm, model, inputs)


def test_mlp_with_batchnorm_and_dropout_in_eval():
    torch.manual_seed(0)
    model = MLPWithNorm()
    with torch.no_grad():  # non-trivial running statistics
        for bn in (model.net[1], model.net[5]):
            bn.running_mean.uniform_(-1, 1)
            bn.running_var.uniform_(0.5, 2)
    model.eval()
    jm = thunder.jit(model)
    _check_reuse(jm, model, lambda: (torch.randn(8, 16),))


def test_thunder_module_shares_parameters_and_state_dict():
    torch.manual_seed(0)
    model = MLPWithNorm().eval()
    jm = thunder.jit(model)
    assert isinstance(jm, thunder.ThunderModule)
    assert [n for n, _ in jm.named_parameters()] == [n for n, _ in model.named_parameters()]
    assert all(a is b for a, b in zip(jm.parameters(), model.parameters()))
    sd = jm.state_dict()
    assert sd.keys() == model.state_dict().keys()
    x = torch.randn(4, 16)
    with torch.no_grad():
        before = jm(x)
        new_sd = {k: v + 1 if v.is_floating_point() else v for k, v in sd.items()}
        jm.load_state_dict(new_sd)
        torch.testing.assert_close(jm(x), model(x))
        assert not torch.allclose(jm(x), before)
    assert thunder.cache_misses(jm) == 1  # in-place weight updates need no recompilation


def test_hooks_on_the_thunder_module_and_on_all_modules_run_as_on_any_module():
    torch.manual_seed(0)
    model = MLPWithNorm().eval()
    jm = thunder.jit(model)
    x = torch.randn(4, 16)
    calls: list[str] = []
    with torch.no_grad():
        plain = model(x)
        torch.testing.assert_close(jm(x), plain)  # no hook: the jitted call alone
        pre = jm.register_forward_pre_hook(lambda m, args: (calls.append("pre"), (args[0] * 2,))[1])
        post = jm.register_forward_hook(lambda m, args, out: out + 1)
        torch.testing.assert_close(jm(x), model(x * 2) + 1)
        pre.remove()
        post.remove()
        torch.testing.assert_close(jm(x), plain)
        seen = torch.nn.modules.module.register_module_forward_hook(
            lambda m, args, out: calls.append(type(m).__name__)
        )
        try:
            jm(x)
            eager_calls = len(calls)
            model(x)
        finally:
            seen.remove()
        jm(x)
    # the global hook runs once for each module of the user's tree, the model itself included,
    # as in eager, and never for the ThunderModule wrapper (it stands for the model)
    jitted, eager = calls[1:eager_calls], calls[eager_calls:]
    assert calls[0] == "pre" and "ThunderModule" not in calls, calls
    assert jitted == eager and jitted.count("MLPWithNorm") == 1, calls


def test_eval_and_train_switch_recompiles_once_per_mode():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5))
    jm = thunder.jit(model)
    x = torch.randn(4, 8)
    with torch.no_grad():
        jm.eval()
        torch.testing.assert_close(jm(x), model(x))
        jm.train()
        jm(x)
        jm.eval()
        torch.testing.assert_close(jm(x), model(x))
    assert thunder.cache_misses(jm) == 2


@pytest.mark.parametrize("executors", [("torch",), ("torchcompile",)])
def test_executors_option(executors):
    from thunder_executors import get_executor

    if not get_executor(executors[0]).is_available():
        pytest.skip(f"{executors[0]} not available")
    j = thunder.jit(lambda a, b: torch.nn.functional.gelu(a @ b) * 2, executors=executors)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    torch.testing.assert_close(j(a, b), torch.nn.functional.gelu(a @ b) * 2)
