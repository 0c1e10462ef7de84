"""Hugging Face transformers built from configs in code, on the meta device.

Nothing is downloaded: every model is ``ModelClass(Config(...))`` under
``torch.device("meta")`` (never ``from_pretrained``), with eager attention (the
attention matmuls and softmax stay visible ATen ops with torch FLOP formulas)
and the KV cache off. transformers is imported only when an ``hf:`` model is
asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from waferflow.frontend.catalog import HFSpec

IGNORE_INDEX = -100


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
