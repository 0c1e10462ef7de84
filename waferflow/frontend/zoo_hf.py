"""Hugging Face transformers built from configs in code, on the meta device.

Nothing is downloaded: every model is ``ModelClass(Config(...))`` under
``torch.device("meta")`` (never ``from_pretrained``), with eager attention (the
attention matmuls and softmax stay visible ATen ops with torch FLOP formulas)
and the KV cache off. transformers is imported only when an ``hf:`` model is
asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

IGNORE_INDEX = -100


@dataclass(frozen=True, slots=True)
class HFSpec:
    """One Hugging Face zoo entry: how to build it and its default sizes."""

    family: str  # gpt2 | llama | mixtral | bert | vit
    config: tuple[tuple[str, Any], ...]
    batch: int
    seq: int | None  # None for image models
    description: str


def causal_lm_loss(output: Any, input_ids: torch.Tensor, *rest: Any) -> torch.Tensor:
    """Next-token cross entropy: the labels are the input ids shifted left by one
    (the last position ignored), as Hugging Face's own causal-LM loss does."""
    logits = output.logits
    labels = F.pad(input_ids[:, 1:], (0, 1), value=IGNORE_INDEX)
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE_INDEX
    )


def masked_lm_loss(output: Any, input_ids: torch.Tensor, *rest: Any) -> torch.Tensor:
    """Cross entropy of every position's logits against its own input id."""
    logits = output.logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), input_ids.reshape(-1))


def image_classification_loss(output: Any, *inputs: Any) -> torch.Tensor:
    """Cross entropy against class 0 for every image (labels made in the graph)."""
    logits = output.logits
    labels = torch.zeros(logits.shape[0], dtype=torch.long, device=logits.device)
    return F.cross_entropy(logits, labels)


LOSSES: dict[str, Callable[..., torch.Tensor]] = {
    "gpt2": causal_lm_loss,
    "llama": causal_lm_loss,
    "mixtral": causal_lm_loss,
    "bert": masked_lm_loss,
    "vit": image_classification_loss,
}

_TINY_TEXT = (("vocab_size", 512), ("bos_token_id", 0), ("eos_token_id", 0), ("pad_token_id", 0))

SPECS: dict[str, HFSpec] = {
    "gpt2": HFSpec("gpt2", (), 8, 1024, "GPT-2 small (124M): 12 layers, d=768, 12 heads"),
    "gpt2-medium": HFSpec(
        "gpt2",
        (("n_layer", 24), ("n_embd", 1024), ("n_head", 16)),
        8,
        1024,
        "GPT-2 medium (355M): 24 layers, d=1024, 16 heads",
    ),
    # the layer shapes of the FRED paper's transformer workloads, cut to 4 layers (one
    # per pipeline stage of a 4-stage plan): a per-layer comparison of fabrics
    "gpt3-4l": HFSpec(
        "gpt2",
        (("n_layer", 4), ("n_embd", 12288), ("n_head", 96), ("n_positions", 2048)),
        16,
        2048,
        "GPT-3 175B's layer (d=12288, 96 heads, seq 2048), 4 layers: fabric comparisons",
    ),
    "t17b-4l": HFSpec(
        "gpt2",
        (("n_layer", 4), ("n_embd", 4256), ("n_head", 28), ("n_positions", 2048)),
        16,
        2048,
        "Transformer-17B's layer (Turing-NLG: d=4256, 28 heads, seq 2048), 4 layers",
    ),
    "gpt2-tiny": HFSpec(
        "gpt2",
        (("n_layer", 2), ("n_embd", 64), ("n_head", 4), ("n_positions", 128), *_TINY_TEXT),
        8,  # divisible by dp x micro-batches of the plans in the README and docs
        32,
        "GPT-2 shaped, for tests: 2 layers, d=64, 4 heads, vocab 512",
    ),
    "llama-7b": HFSpec(
        "llama",
        (
            ("hidden_size", 4096),
            ("num_hidden_layers", 32),
            ("num_attention_heads", 32),
            ("num_key_value_heads", 32),
            ("intermediate_size", 11008),
            ("vocab_size", 32000),
            ("max_position_embeddings", 2048),
        ),
        1,
        2048,
        "LLaMA 7B (6.7B): 32 layers, d=4096, 32 heads, FFN 11008, vocab 32000",
    ),
    "llama-tiny": HFSpec(
        "llama",
        (
            ("hidden_size", 64),
            ("num_hidden_layers", 2),
            ("num_attention_heads", 4),
            ("num_key_value_heads", 2),
            ("intermediate_size", 172),
            ("max_position_embeddings", 128),
            *_TINY_TEXT,
        ),
        2,
        32,
        "LLaMA shaped, for tests: 2 layers, d=64, 4 heads (2 KV heads), vocab 512",
    ),
    "mixtral-8x7b": HFSpec(
        "mixtral",
        (
            ("hidden_size", 4096),
            ("num_hidden_layers", 32),
            ("num_attention_heads", 32),
            ("num_key_value_heads", 8),
            ("intermediate_size", 14336),
            ("num_local_experts", 8),
            ("num_experts_per_tok", 2),
            ("vocab_size", 32000),
            ("max_position_embeddings", 32768),
        ),
        1,
        2048,
        "Mixtral 8x7B (46.7B, 12.9B active): 32 layers, d=4096, 8 experts (top-2) of FFN 14336",
    ),
    "mixtral-tiny": HFSpec(
        "mixtral",
        (
            ("hidden_size", 64),
            ("num_hidden_layers", 2),
            ("num_attention_heads", 4),
            ("num_key_value_heads", 2),
            ("intermediate_size", 128),
            ("num_local_experts", 4),
            ("num_experts_per_tok", 2),
            ("max_position_embeddings", 128),
            *_TINY_TEXT,
        ),
        4,
        32,
        "Mixtral shaped, for tests: 2 layers, d=64, 4 experts (top-2) of FFN 128, vocab 512",
    ),
    "bert-base": HFSpec("bert", (), 8, 128, "BERT base (110M) masked LM: 12 layers, d=768"),
    "bert-tiny": HFSpec(
        "bert",
        (
            ("num_hidden_layers", 2),
            ("hidden_size", 64),
            ("num_attention_heads", 4),
            ("intermediate_size", 256),
            ("max_position_embeddings", 128),
            *_TINY_TEXT,
        ),
        2,
        32,
        "BERT shaped masked LM, for tests: 2 layers, d=64, 4 heads, vocab 512",
    ),
    "vit-base": HFSpec(
        "vit", (("num_labels", 1000),), 8, None, "ViT-B/16 (86M) on 224x224 images, 1000 classes"
    ),
    "vit-tiny": HFSpec(
        "vit",
        (
            ("image_size", 32),
            ("patch_size", 8),
            ("hidden_size", 64),
            ("num_hidden_layers", 2),
            ("num_attention_heads", 4),
            ("intermediate_size", 128),
            ("num_labels", 10),
        ),
        2,
        None,
        "ViT shaped, for tests: 32x32 images, 8x8 patches, 2 layers, d=64, 10 classes",
    ),
}


def _classes(family: str) -> tuple[Any, Any]:
    import transformers as tf

    return {
        "gpt2": (tf.GPT2Config, tf.GPT2LMHeadModel),
        "llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
        "mixtral": (tf.MixtralConfig, tf.MixtralForCausalLM),
        "bert": (tf.BertConfig, tf.BertForMaskedLM),
        "vit": (tf.ViTConfig, tf.ViTForImageClassification),
    }[family]


def build(spec: HFSpec) -> tuple[nn.Module, Any]:
    """The model on the meta device and its config."""
    config_cls, model_cls = _classes(spec.family)
    config = config_cls(**dict(spec.config), attn_implementation="eager", use_cache=False)
    with torch.device("meta"):
        model = model_cls(config)
    return model, config


def max_seq(spec: HFSpec, config: Any) -> int | None:
    for key in ("n_positions", "max_position_embeddings"):
        if hasattr(config, key):
            return int(getattr(config, key))
    return None


def example_inputs(spec: HFSpec, config: Any, batch: int, seq: int | None) -> tuple[torch.Tensor]:
    if spec.family == "vit":
        size = int(config.image_size)
        return (torch.empty(batch, int(config.num_channels), size, size, device="meta"),)
    assert seq is not None
    return (torch.empty(batch, seq, dtype=torch.long, device="meta"),)
