"""Tiny Hugging Face transformers models (random weights, built from configs): the architectures
the model tests and ``./dev bench models`` run. Nothing is downloaded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

_VOCAB = 99
_DECODER = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
    vocab_size=_VOCAB,
    max_position_embeddings=64,
)
_DROPOUTS = (
    "hidden_dropout_prob", "attention_probs_dropout_prob", "dropout", "attention_dropout",
    "resid_pdrop", "embd_pdrop", "attn_pdrop", "dropout_rate", "activation_dropout",
    "hidden_dropout", "classifier_dropout", "seq_classif_dropout", "qa_dropout",
    "classifier_dropout_prob", "drop_path_rate", "resid_dropout", "emb_pdrop", "summary_last_dropout",
)  # fmt: skip


def _configs() -> dict[str, Callable[[], tuple[Any, Any]]]:
    import transformers as T

    def decoder(config_cls: Any, model_cls: Any, **extra: Any) -> Callable[[], tuple[Any, Any]]:
        return lambda: (config_cls(**{**_DECODER, **extra}), model_cls)

    encoder = dict(_DECODER)
    return {
        "bert": lambda: (T.BertConfig(**encoder), T.BertForSequenceClassification),
        "roberta": lambda: (
            T.RobertaConfig(**{**encoder, "pad_token_id": 1}),
            T.RobertaForSequenceClassification,
        ),
        "distilbert": lambda: (
            T.DistilBertConfig(
                dim=32,
                n_layers=2,
                n_heads=4,
                hidden_dim=64,
                vocab_size=_VOCAB,
                max_position_embeddings=64,
            ),
            T.DistilBertForSequenceClassification,
        ),  # fmt: skip
        "gpt2": lambda: (
            T.GPT2Config(
                n_embd=32,
                n_layer=2,
                n_head=4,
                vocab_size=_VOCAB,
                n_positions=64,
                bos_token_id=0,
                eos_token_id=0,
            ),
            T.GPT2LMHeadModel,
        ),  # fmt: skip
        "llama": decoder(T.LlamaConfig, T.LlamaForCausalLM, num_key_value_heads=2),
        "mistral": decoder(T.MistralConfig, T.MistralForCausalLM, num_key_value_heads=2),
        "qwen2": decoder(T.Qwen2Config, T.Qwen2ForCausalLM, num_key_value_heads=2),
        "qwen3": decoder(T.Qwen3Config, T.Qwen3ForCausalLM, num_key_value_heads=2, head_dim=8),
        "gemma": decoder(T.GemmaConfig, T.GemmaForCausalLM, num_key_value_heads=2, head_dim=8),
        "phi3": decoder(
            T.Phi3Config,
            T.Phi3ForCausalLM,
            num_key_value_heads=2,
            pad_token_id=0,
            bos_token_id=0,
            eos_token_id=0,
        ),  # fmt: skip
        "mixtral": decoder(
            T.MixtralConfig,
            T.MixtralForCausalLM,
            num_key_value_heads=2,
            num_local_experts=4,
            num_experts_per_tok=2,
        ),  # fmt: skip
        "gpt_neox": decoder(T.GPTNeoXConfig, T.GPTNeoXForCausalLM),
        "opt": lambda: (
            T.OPTConfig(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=4,
                ffn_dim=64,
                vocab_size=_VOCAB,
                max_position_embeddings=64,
                word_embed_proj_dim=32,
            ),
            T.OPTForCausalLM,
        ),  # fmt: skip
        "t5": lambda: (
            T.T5Config(
                d_model=32,
                d_kv=8,
                d_ff=64,
                num_layers=2,
                num_heads=4,
                vocab_size=_VOCAB,
                decoder_start_token_id=0,
            ),
            T.T5ForConditionalGeneration,
        ),  # fmt: skip
        "bart": lambda: (
            T.BartConfig(
                d_model=32,
                encoder_layers=2,
                decoder_layers=2,
                encoder_attention_heads=4,
                decoder_attention_heads=4,
                encoder_ffn_dim=64,
                decoder_ffn_dim=64,
                vocab_size=_VOCAB,
                max_position_embeddings=64,
            ),
            T.BartForConditionalGeneration,
        ),  # fmt: skip
        "vit": lambda: (
            T.ViTConfig(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=64,
                image_size=16,
                patch_size=4,
                num_labels=3,
            ),
            T.ViTForImageClassification,
        ),  # fmt: skip
        **_more_configs(T, decoder),
    }


def _more_configs(T: Any, decoder: Any) -> dict[str, Callable[[], tuple[Any, Any]]]:
    """Architectures the model tests also run (not the benchmark): one of each family."""
    gpt = dict(n_embd=32, n_layer=2, n_head=4, vocab_size=_VOCAB, n_positions=64)
    seq2seq = dict(
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        vocab_size=_VOCAB,
        max_position_embeddings=64,
    )
    kv = dict(num_key_value_heads=2)
    return {
        "falcon": lambda: (
            T.FalconConfig(
                hidden_size=32, num_hidden_layers=2, num_attention_heads=4, vocab_size=_VOCAB
            ),
            T.FalconForCausalLM,
        ),  # fmt: skip
        "bloom": lambda: (
            T.BloomConfig(hidden_size=32, n_layer=2, n_head=4, vocab_size=_VOCAB),
            T.BloomForCausalLM,
        ),
        "gpt_bigcode": lambda: (T.GPTBigCodeConfig(**gpt), T.GPTBigCodeForCausalLM),
        "gptj": lambda: (T.GPTJConfig(**gpt, rotary_dim=4), T.GPTJForCausalLM),
        "codegen": lambda: (T.CodeGenConfig(**gpt, rotary_dim=4), T.CodeGenForCausalLM),
        "mpt": lambda: (
            T.MptConfig(d_model=32, n_layers=2, n_heads=4, vocab_size=_VOCAB, max_seq_len=64),
            T.MptForCausalLM,
        ),
        "phi": decoder(T.PhiConfig, T.PhiForCausalLM),
        "stablelm": decoder(T.StableLmConfig, T.StableLmForCausalLM, **kv),
        "starcoder2": decoder(T.Starcoder2Config, T.Starcoder2ForCausalLM, **kv),
        "olmo": decoder(T.OlmoConfig, T.OlmoForCausalLM, **kv),
        "gemma2": decoder(T.Gemma2Config, T.Gemma2ForCausalLM, **kv, head_dim=8),
        "granite": decoder(T.GraniteConfig, T.GraniteForCausalLM, **kv),
        "cohere": decoder(T.CohereConfig, T.CohereForCausalLM, **kv),
        "qwen2_moe": decoder(
            T.Qwen2MoeConfig,
            T.Qwen2MoeForCausalLM,
            **kv,
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=32,
        ),  # fmt: skip
        "electra": decoder(T.ElectraConfig, T.ElectraForSequenceClassification, embedding_size=32),
        "albert": decoder(T.AlbertConfig, T.AlbertForSequenceClassification, embedding_size=16),
        "deberta_v2": decoder(T.DebertaV2Config, T.DebertaV2ForSequenceClassification),
        "xlm_roberta": decoder(
            T.XLMRobertaConfig, T.XLMRobertaForSequenceClassification, pad_token_id=1
        ),
        "megatron_bert": decoder(T.MegatronBertConfig, T.MegatronBertForSequenceClassification),
        "mobilebert": decoder(
            T.MobileBertConfig,
            T.MobileBertForSequenceClassification,
            embedding_size=16,
            intra_bottleneck_size=32,
            true_hidden_size=32,
        ),  # fmt: skip
        "mbart": lambda: (T.MBartConfig(**seq2seq), T.MBartForConditionalGeneration),
        "pegasus": lambda: (T.PegasusConfig(**seq2seq), T.PegasusForConditionalGeneration),
        "mt5": lambda: (
            T.MT5Config(
                d_model=32,
                d_kv=8,
                d_ff=64,
                num_layers=1,
                num_heads=4,
                vocab_size=_VOCAB,
                decoder_start_token_id=0,
            ),
            T.MT5ForConditionalGeneration,
        ),  # fmt: skip
        "swin": lambda: (
            T.SwinConfig(
                image_size=16,
                patch_size=4,
                embed_dim=16,
                depths=[1, 1],
                num_heads=[2, 2],
                window_size=2,
                num_labels=3,
            ),
            T.SwinForImageClassification,
        ),  # fmt: skip
        "resnet": lambda: (
            T.ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], num_labels=3),
            T.ResNetForImageClassification,
        ),
        **_moe_and_vision_configs(T, decoder),
    }


def _moe_and_vision_configs(T: Any, decoder: Any) -> dict[str, Callable[[], tuple[Any, Any]]]:
    """Mixture-of-experts decoders and vision encoders the model tests also run."""
    kv = dict(num_key_value_heads=2)
    experts = dict(num_experts_per_tok=2)
    vision = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        image_size=16,
        patch_size=4,
        num_labels=3,
    )
    # CLIP and SigLIP classify with the vision tower alone; the text tower is built, unused.
    clip_vision = {k: v for k, v in vision.items() if k != "num_labels"}
    text = dict(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
        vocab_size=_VOCAB, max_position_embeddings=64,
    )  # fmt: skip
    return {
        "gpt_oss": decoder(
            T.GptOssConfig,
            T.GptOssForCausalLM,
            **kv,
            **experts,
            head_dim=8,
            num_local_experts=4,
            sliding_window=4,
            layer_types=["sliding_attention", "full_attention"],
        ),  # fmt: skip
        "phimoe": decoder(
            T.PhimoeConfig, T.PhimoeForCausalLM, **kv, **experts, num_local_experts=4
        ),
        "qwen3_moe": decoder(
            T.Qwen3MoeConfig,
            T.Qwen3MoeForCausalLM,
            **kv,
            **experts,
            head_dim=8,
            num_experts=4,
            moe_intermediate_size=32,
        ),  # fmt: skip
        "deepseek_v3": decoder(  # multi-head latent attention: as many key heads as query heads
            T.DeepseekV3Config,
            T.DeepseekV3ForCausalLM,
            **experts,
            n_routed_experts=4,
            moe_intermediate_size=32,
            kv_lora_rank=8,
            q_lora_rank=8,
            qk_rope_head_dim=4,
            v_head_dim=8,
            qk_nope_head_dim=4,
            first_k_dense_replace=1,
            n_group=1,
            topk_group=1,
        ),  # fmt: skip
        "canine": lambda: (
            T.CanineConfig(
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=4,
                intermediate_size=64,
                downsampling_rate=2,
                num_hash_buckets=64,
                local_transformer_stride=4,
            ),
            T.CanineForSequenceClassification,
        ),  # fmt: skip
        "beit": lambda: (
            T.BeitConfig(**vision, use_relative_position_bias=True),
            T.BeitForImageClassification,
        ),
        "dinov2": lambda: (
            T.Dinov2Config(**{**vision, "intermediate_size": None}, mlp_ratio=2),
            T.Dinov2ForImageClassification,
        ),
        "segformer": lambda: (
            T.SegformerConfig(
                num_encoder_blocks=2,
                depths=[1, 1],
                sr_ratios=[2, 1],
                hidden_sizes=[8, 16],
                num_attention_heads=[1, 2],
                decoder_hidden_size=16,
                num_labels=3,
            ),
            T.SegformerForImageClassification,
        ),  # fmt: skip
        "mobilevit": lambda: (
            T.MobileViTConfig(
                image_size=16,
                hidden_sizes=[16, 24, 32],
                neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 48],
                num_labels=3,
            ),
            T.MobileViTForImageClassification,
        ),  # fmt: skip
        "mamba": lambda: (
            T.MambaConfig(
                hidden_size=32,
                num_hidden_layers=2,
                vocab_size=_VOCAB,
                state_size=4,
                use_mambapy=False,
            ),
            T.MambaForCausalLM,
        ),  # fmt: skip
        "gemma3": decoder(
            T.Gemma3TextConfig, T.Gemma3ForCausalLM, **kv, head_dim=8, sliding_window=4
        ),
        "xlnet": lambda: (
            T.XLNetConfig(d_model=32, n_layer=2, n_head=4, d_inner=64, vocab_size=_VOCAB),
            T.XLNetForSequenceClassification,
        ),
        "clip": lambda: (
            T.CLIPConfig(text_config=text, vision_config=clip_vision, num_labels=3),
            T.CLIPForImageClassification,
        ),
        "siglip": lambda: (
            T.SiglipConfig(text_config=text, vision_config=clip_vision, num_labels=3),
            T.SiglipForImageClassification,
        ),
    }


ARCHITECTURES = (
    "bert", "roberta", "distilbert", "gpt2", "llama", "mistral", "qwen2", "qwen3", "gemma",
    "phi3", "mixtral", "gpt_neox", "opt", "t5", "bart", "vit",
)  # fmt: skip


# Tried by the model tests besides ARCHITECTURES (the benchmark's set).
MORE_ARCHITECTURES = (
    "falcon", "bloom", "gpt_bigcode", "gptj", "codegen", "mpt", "phi", "stablelm", "starcoder2",
    "olmo", "gemma2", "granite", "cohere", "qwen2_moe", "electra", "albert", "deberta_v2",
    "xlm_roberta", "megatron_bert", "mobilebert", "mbart", "pegasus", "mt5", "swin", "resnet",
    "gpt_oss", "phimoe", "qwen3_moe", "deepseek_v3", "canine", "beit", "clip", "siglip",
    "dinov2", "segformer", "mobilevit", "mamba", "gemma3", "xlnet",
)  # fmt: skip
IMAGES = ("vit", "swin", "resnet", "beit", "clip", "siglip", "dinov2", "segformer", "mobilevit")
_SEQ2SEQ = ("t5", "bart", "mbart", "pegasus", "mt5")


def build(name: str, seed: int = 0) -> torch.nn.Module:
    """The tiny model ``name`` in eval mode, dropout off, weights drawn from ``seed``."""
    config, model_cls = _configs()[name]()
    for attr in _DROPOUTS:
        if isinstance(getattr(config, attr, None), float):
            setattr(config, attr, 0.0)
    torch.manual_seed(seed)
    return model_cls(config).eval()


def inputs(name: str, seed: int, batch: int = 2, length: int = 8) -> dict[str, torch.Tensor]:
    """Keyword inputs for one forward call of ``name``, drawn from ``seed``."""
    g = torch.Generator().manual_seed(seed)
    if name in IMAGES:
        return {"pixel_values": torch.randn(batch, 3, 16, 16, generator=g)}
    out = {"input_ids": torch.randint(2, _VOCAB, (batch, length), generator=g)}
    if name in _SEQ2SEQ:
        out["decoder_input_ids"] = torch.randint(2, _VOCAB, (batch, length - 3), generator=g)
    return out


def logits(output: Any) -> torch.Tensor:
    """The logits of a model's output (a ``ModelOutput``)."""
    return output["logits"]


def train_with_trainer(model: Any, dataset: Any, out: Any, **options: Any) -> Any:
    """Three steps of transformers' ``Trainer`` on the CPU (batch 4, no saving, no logging
    service), ``options`` added to its ``TrainingArguments``; returns the trainer."""
    import transformers

    args = transformers.TrainingArguments(
        output_dir=str(out),
        use_cpu=True,
        report_to="none",
        max_steps=3,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        logging_steps=1,
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
        **options,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=dataset)
    trainer.train()
    return trainer


def trainer_losses(trainer: Any) -> list[float]:
    """The loss logged at each of the trainer's steps."""
    return [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
