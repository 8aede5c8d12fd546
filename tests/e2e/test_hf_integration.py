"""A jitted Hugging Face model in the library's own tools: ``transformers.Trainer`` trains it like
the eager model (its input columns kept), ``save_model`` writes a checkpoint that loads into an
eager model, and ``generate`` runs the compiled forward. Tiny models from configs, CPU, nothing
downloaded. ``thunder.jit`` stands for ``thunder.compile`` (the same ``ThunderModule``; its
background torch.compile of fusion regions would cost tens of seconds here)."""

from __future__ import annotations

import copy
import inspect
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import thunder

hf_zoo = pytest.importorskip("hf_zoo")
transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")  # Trainer needs it


def _llama() -> nn.Module:
    config = transformers.LlamaConfig(
        vocab_size=99,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return transformers.LlamaForCausalLM(config)


def _bert() -> nn.Module:
    config = transformers.BertConfig(
        vocab_size=99,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    return transformers.BertForSequenceClassification(config)


MODELS = {"llama": _llama, "bert": _bert}


class _Rows(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Rows of dicts, with a column no forward takes: Trainer drops it by the forward's
    signature (``remove_unused_columns``, on by default)."""

    def __init__(self, name: str, n: int = 16, length: int = 8) -> None:
        g = torch.Generator().manual_seed(1)
        self.ids = torch.randint(0, 99, (n, length), generator=g)
        self.classes = torch.randint(0, 2, (n,), generator=g)
        self.name = name

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, Any]:
        labels = self.ids[i] if self.name == "llama" else self.classes[i]
        mask = torch.ones_like(self.ids[i])
        return {"input_ids": self.ids[i], "attention_mask": mask, "labels": labels, "note": "x"}


def _train(model: nn.Module, name: str, out: Path, **options: Any) -> Any:
    return hf_zoo.train_with_trainer(model, _Rows(name), out, **options)


_losses = hf_zoo.trainer_losses


@pytest.mark.parametrize("name", sorted(MODELS))
def test_forward_signature_is_the_models(name: str) -> None:
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    jm = thunder.jit(model)
    assert inspect.signature(jm.forward) == inspect.signature(model.forward)
    ids = torch.randint(0, 99, (2, 8))
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        by_name = jm.forward(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        called = jm(attention_mask=torch.ones_like(ids), input_ids=ids).logits
    torch.testing.assert_close(by_name, expected)
    torch.testing.assert_close(called, expected)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_trainer_trains_saves_and_loads_like_eager(name: str, tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = MODELS[name]()
    eager = _train(copy.deepcopy(model), name, tmp_path / "eager")
    jm = thunder.jit(model)
    jitted = _train(jm, name, tmp_path / "jit")

    assert jitted.label_names == eager.label_names == ["labels"]
    torch.testing.assert_close(_losses(jitted), _losses(eager), rtol=1e-4, atol=1e-5)
    trained = eager.model.state_dict()
    assert list(jm.state_dict()) == list(trained)
    for key, value in jm.state_dict().items():
        torch.testing.assert_close(value, trained[key], rtol=1e-3, atol=1e-4, msg=key)
    stats = thunder.compile_stats(jm)
    assert stats.eager_fallbacks == 0 and stats.cache_hits >= 1
    assert stats.compilations <= 2, stats.last_recompile_reason  # bert sets problem_type once

    jitted.save_model()
    out = tmp_path / "jit"
    assert json.loads((out / "config.json").read_text())["architectures"] == [type(model).__name__]
    loaded = type(model).from_pretrained(out)
    assert type(loaded) is type(model)
    expected = model.state_dict()
    assert list(loaded.state_dict()) == list(expected)
    for key, value in loaded.state_dict().items():
        torch.testing.assert_close(value, expected[key], rtol=0, atol=0, msg=key)


def test_trainer_mixed_precision_autocasts_the_compiled_forward(tmp_path: Path) -> None:
    """accelerate sets its autocast wrapper as the model's ``forward``: the jitted model's call
    goes through it, as nn.Module's does."""
    torch.manual_seed(0)
    model = _llama()
    eager = _train(copy.deepcopy(model), "llama", tmp_path / "eager", bf16=True)
    jm = thunder.jit(model)
    jitted = _train(jm, "llama", tmp_path / "jit", bf16=True)
    assert "forward" in vars(jm)
    assert "bfloat16" in str(thunder.last_traces(jm)[-1])
    torch.testing.assert_close(_losses(jitted), _losses(eager), rtol=1e-3, atol=1e-3)


def test_generate_runs_the_compiled_forward() -> None:
    torch.manual_seed(0)
    model = _llama().eval()
    options = {"max_new_tokens": 12, "min_new_tokens": 12, "do_sample": False}
    prompts = [torch.randint(0, 99, (1, n)) for n in (5, 9)]
    with torch.no_grad():
        expected = [model.generate(p, **options) for p in prompts]
    before = dict(vars(model))
    jm = thunder.jit(model, cache="symbolic values")
    with torch.no_grad():
        for prompt, want in zip(prompts, expected):
            torch.testing.assert_close(jm.generate(prompt, **options), want, rtol=0, atol=0)
    stats = thunder.compile_stats(jm)
    # one program for prompts, one for decoding steps; every other call a cache hit
    assert stats.compilations == 2, stats.last_recompile_reason
    assert stats.cache_hits == 2 * 12 - 2 and stats.eager_fallbacks == 0
    assert vars(model) == before  # the model is as it was
    assert inspect.signature(jm.generate) == inspect.signature(model.generate)


def test_jitted_model_is_a_pretrained_model_that_pickles() -> None:
    torch.manual_seed(0)
    model = _llama().eval()
    jm = thunder.jit(model)
    assert isinstance(jm, transformers.PreTrainedModel) and isinstance(jm, thunder.ThunderModule)
    assert type(jm) is thunder.ThunderModule and jm.__class__ is type(model)
    linear = thunder.jit(nn.Linear(2, 2))  # any module presents its class (an init walk's test)
    assert type(linear) is thunder.ThunderModule and linear.__class__ is nn.Linear
    copied = pickle.loads(pickle.dumps(jm))
    assert type(copied) is thunder.ThunderModule and isinstance(copied, type(model))
    ids = torch.randint(0, 99, (1, 6))
    with torch.no_grad():
        torch.testing.assert_close(copied(ids).logits, model(ids).logits)


class _Stepper(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc(x))

    def roll(self, x: torch.Tensor, n: int) -> torch.Tensor:
        for _ in range(n):
            x = self(x)
        return x

    def roll_nested(self, x: torch.Tensor) -> torch.Tensor:
        return self.roll(self.roll(x, 1), 2)

    def fail(self, x: torch.Tensor) -> torch.Tensor:
        self(x)
        raise ValueError("failed after a call")


def test_methods_of_any_module_call_the_compiled_forward() -> None:
    torch.manual_seed(0)
    model = _Stepper()
    before = dict(vars(model))
    jm = thunder.jit(model)
    x = torch.randn(2, 4, requires_grad=True)  # each call's input requires grad, as its output
    torch.testing.assert_close(jm.roll(x, 3), model.roll(x, 3))
    torch.testing.assert_close(jm.roll_nested(x), model.roll_nested(x))
    stats = thunder.compile_stats(jm)
    assert (stats.compilations, stats.cache_hits) == (1, 5)
    jm.roll(x, 2).sum().backward()
    with pytest.raises(ValueError, match="failed after a call"):
        jm.fail(x)
    assert stats.cache_hits == 8
    assert vars(model) == before  # untouched, also after the method raised
    model(x)  # eager again: the original's own calls are not routed
    model.roll(x, 2)
    assert stats.cache_hits == 8


def test_a_jitted_model_prints_as_a_thunder_module_of_the_model():
    text = repr(thunder.jit(_llama()))
    assert text.startswith("ThunderModule(\n  (_model): LlamaForCausalLM(")
