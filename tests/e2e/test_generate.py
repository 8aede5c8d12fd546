"""``generate()`` of a tiny Hugging Face Llama through a jitted forward with symbolic sizes: the
same tokens as eager, and one program for the prompt plus one for all decoding steps, whatever
the prompt length (issue figure: at most 2 compiles for 32 new tokens)."""

from __future__ import annotations

import pytest
import torch

import thunder

transformers = pytest.importorskip("transformers")


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
    )
    return transformers.LlamaForCausalLM(config).eval()


def test_generate_compiles_twice_for_any_length() -> None:
    model = _model()
    eager_forward = model.forward
    prompts = [torch.randint(0, 128, (1, n)) for n in (8, 11)]

    def generate(prompt: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            out: torch.Tensor = model.generate(
                prompt, max_new_tokens=32, min_new_tokens=32, do_sample=False
            )
        return out

    expected = [generate(p) for p in prompts]
    jitted = thunder.jit(eager_forward, cache="symbolic values")
    model.forward = jitted
    try:
        for prompt, want in zip(prompts, expected):
            torch.testing.assert_close(generate(prompt), want, rtol=0, atol=0)
    finally:
        model.forward = eager_forward
    stats = thunder.compile_stats(jitted)
    assert stats.compilations == 2, stats.last_recompile_reason
    assert stats.eager_fallbacks == 0


@pytest.mark.parametrize("name", ["t5", "bart", "mt5", "gpt2", "gpt_neox", "mistral"])
@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_generate_of_zoo_models_matches_eager(name: str, cache: str) -> None:
    """``generate()`` through a jitted forward, encoder-decoder models included: their forward
    receives the encoder's outputs (a ``ModelOutput`` holding tensors) back as an argument on
    every decoding step. Mistral's sliding-window cache layers hold the length seen so far as
    an int: with symbolic values it is a symbolic input, not a constant per step."""
    hf_zoo = pytest.importorskip("hf_zoo")
    model = hf_zoo.build(name).eval()
    prompt = hf_zoo.inputs(name, 0)["input_ids"][:1]
    options = {"max_new_tokens": 6, "min_new_tokens": 6, "do_sample": False}
    eager_forward = model.forward
    with torch.no_grad():
        expected = model.generate(prompt, **options)
        jitted = thunder.jit(eager_forward, cache=cache)
        model.forward = jitted
        try:
            actual = model.generate(prompt, **options)
        finally:
            model.forward = eager_forward
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    stats = thunder.compile_stats(jitted)
    assert stats.eager_fallbacks == 0
    if cache == "symbolic values":  # the prompt, the first step (a cache), the other steps
        most = 3 if name in ("t5", "bart", "mt5") else 2
        assert stats.compilations <= most, stats.last_recompile_reason
