"""The model zoo's names, defaults and parameter counts, without torch.

``waferflow models`` lists this table, and every command checks a model name against
it (case-insensitively, with a "did you mean") before torch is imported. For the
Hugging Face models, ``param_count`` gives the number of parameters from the config by
closed form (the model's own formula, checked against the built model in
``tests/frontend/test_catalog.py``), so that a model too large for a whole wafer is
refused before it is traced (``waferflow.capacity``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

from waferflow.errors import TraceError


@dataclass(frozen=True, slots=True)
class HFSpec:
    """One Hugging Face zoo entry: how to build it and its default sizes."""

    family: str  # gpt2 | llama | mixtral | bert | vit
    config: tuple[tuple[str, Any], ...]
    batch: int
    seq: int | None  # None for image models
    description: str


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
    "gpt2-tiny": HFSpec(
        "gpt2",
        (("n_layer", 2), ("n_embd", 64), ("n_head", 4), ("n_positions", 128), *_TINY_TEXT),
        8,  # divisible by dp x micro-batches of the plans in the README and docs
        32,
        "GPT-2 shaped, for tests: 2 layers, d=64, 4 heads, vocab 512",
    ),
    "gpt3-175b": HFSpec(
        "gpt2",
        (
            ("n_layer", 96),
            ("n_embd", 12288),
            ("n_head", 96),
            ("n_positions", 2048),
            ("vocab_size", 50257),
        ),
        1,
        2048,
        "GPT-3 175B shaped (dense GPT-2 blocks): 96 layers, d=12288, 96 heads, context 2048",
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
    "llama-13b": HFSpec(
        "llama",
        (
            ("hidden_size", 5120),
            ("num_hidden_layers", 40),
            ("num_attention_heads", 40),
            ("num_key_value_heads", 40),
            ("intermediate_size", 13824),
            ("vocab_size", 32000),
            ("max_position_embeddings", 2048),
        ),
        1,
        2048,
        "LLaMA 13B (13.0B): 40 layers, d=5120, 40 heads, FFN 13824, vocab 32000",
    ),
    "llama-70b": HFSpec(
        "llama",
        (
            ("hidden_size", 8192),
            ("num_hidden_layers", 80),
            ("num_attention_heads", 64),
            ("num_key_value_heads", 8),
            ("intermediate_size", 28672),
            ("vocab_size", 32000),
            ("max_position_embeddings", 4096),
        ),
        1,
        4096,
        "Llama 2 70B (69.0B): 80 layers, d=8192, 64 heads (8 KV heads), FFN 28672, vocab 32000",
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


@dataclass(frozen=True, slots=True)
class CNNSpec:
    """One CNN zoo entry (built by ``zoo_cnn``): its default batch, per-sample input
    shape and description."""

    input_shape: tuple[int, ...]  # per sample
    batch: int
    description: str


CNNS: dict[str, CNNSpec] = {
    "amcoda": CNNSpec(
        (16, 56, 56),
        32,
        "AMCoDA seed CNN: 3 conv (16-16-32-32, 3x3) + ReLU, 7x7 avg pool, fc 512->16",
    ),
    "amcoda4": CNNSpec(
        (8, 32, 32),
        32,
        "a 4-conv CNN for the seed machine: 8x32x32, 5x5 / 3x3 s2 / 3x3 / 1x1 conv, fc 1024->10",
    ),
    "resnet-tiny": CNNSpec(
        (3, 32, 32),
        8,
        "tiny residual CNN with batch norm: stem + 2 basic blocks, 32x32 images, 10 classes",
    ),
}

# the transformers config defaults the zoo relies on (a key not set in HFSpec.config)
_DEFAULTS: dict[str, dict[str, Any]] = {
    "gpt2": {"vocab_size": 50257, "n_positions": 1024, "n_embd": 768, "n_layer": 12,
             "n_inner": None},
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
              "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": None,
              "tie_word_embeddings": False},
    "mixtral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
                "num_local_experts": 8, "tie_word_embeddings": False},
    "bert": {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
             "intermediate_size": 3072, "max_position_embeddings": 512, "type_vocab_size": 2},
    "vit": {"hidden_size": 768, "num_hidden_layers": 12, "intermediate_size": 3072,
            "image_size": 224, "patch_size": 16, "num_channels": 3, "num_labels": 2},
}  # fmt: skip


def list_models() -> list[tuple[str, str]]:
    """(spec, description) of every zoo model, in a fixed order."""
    out = [(f"hf:{k}", v.description) for k, v in SPECS.items()]
    out += [(f"cnn:{k}", v.description) for k, v in CNNS.items()]
    return out


def is_file_spec(spec: str) -> bool:
    """``path/to/file.py:factory``: a model built by a user's file."""
    path, sep, _ = spec.rpartition(":")
    return bool(sep) and path.endswith(".py")


def canonical_model(spec: str) -> str:
    """The zoo name ``spec`` means (names are case-insensitive: ``HF:GPT2`` is
    ``hf:gpt2``), or ``spec`` itself for a model file; a ``TraceError`` with a "did
    you mean" for a name the zoo does not have."""
    if not isinstance(spec, str):
        raise TraceError(f"a model is a zoo name or path/to/file.py:factory, got {spec!r}")
    if is_file_spec(spec):
        return spec
    names = [name for name, _ in list_models()]
    lowered = {name.lower(): name for name in names}
    text = spec.strip().lower()
    if text in lowered:
        return lowered[text]
    bare = [n for n in names if ":" not in text and n.partition(":")[2] == text]  # gpt2
    close = bare or [lowered[c] for c in difflib.get_close_matches(text[:100], list(lowered), n=1)]
    hint = f"; did you mean {close[0]}?" if close else "."
    raise TraceError(
        f"unknown model {spec!r}{hint} The zoo has {', '.join(names)} (see `waferflow "
        "models`); or give path/to/file.py:factory"
    )


def _config(spec: HFSpec) -> dict[str, Any]:
    return {**_DEFAULTS[spec.family], **dict(spec.config)}


def expert_count(spec: str) -> int | None:
    """Experts per mixture-of-experts layer of a zoo model (0: a dense model);
    ``None`` for a model file, whose layers are known only once it is built."""
    prefix, _, key = canonical_model(spec).partition(":")
    if prefix == "cnn":
        return 0
    entry = SPECS.get(key) if prefix == "hf" else None
    return None if entry is None else int(_config(entry).get("num_local_experts", 0))


def experts_per_token(spec: str) -> int | None:
    """Experts each token is routed to (top-k) in a zoo model with experts; ``None``
    for a dense model or a model file."""
    prefix, _, key = canonical_model(spec).partition(":")
    entry = SPECS.get(key) if prefix == "hf" else None
    if entry is None or not _config(entry).get("num_local_experts", 0):
        return None
    return int(_config(entry).get("num_experts_per_tok", 2))


def param_count(spec: str) -> int | None:
    """The number of parameters of a Hugging Face zoo model (tied weights once), from
    its config; ``None`` for a model this table cannot count (CNNs, model files)."""
    prefix, _, key = canonical_model(spec).partition(":")
    entry = SPECS.get(key) if prefix == "hf" else None
    if entry is None:
        return None
    c = _config(entry)
    if entry.family == "gpt2":
        d, inner = c["n_embd"], c["n_inner"] or 4 * c["n_embd"]
        layer = 2 * d + (3 * d * d + 3 * d) + (d * d + d) + 2 * d + 2 * d * inner + inner + d
        return c["vocab_size"] * d + c["n_positions"] * d + c["n_layer"] * layer + 2 * d
    if entry.family in ("llama", "mixtral"):
        d, heads = c["hidden_size"], c["num_attention_heads"]
        kv = (c["num_key_value_heads"] or heads) * (d // heads)
        ffn = 3 * d * c["intermediate_size"]  # gate, up and down projections
        if entry.family == "mixtral":  # one FFN per expert, and the router (no bias)
            ffn = c["num_local_experts"] * ffn + d * c["num_local_experts"]
        layer = 2 * d * d + 2 * d * kv + ffn + 2 * d
        head = 0 if c["tie_word_embeddings"] else c["vocab_size"] * d
        return c["vocab_size"] * d + c["num_hidden_layers"] * layer + d + head
    d, inner = c["hidden_size"], c["intermediate_size"]
    layer = 4 * (d * d + d) + 2 * d + (d * inner + inner) + (inner * d + d) + 2 * d
    body = c["num_hidden_layers"] * layer
    if entry.family == "bert":  # embeddings + layers + the MLM head (decoder tied)
        emb = (c["vocab_size"] + c["max_position_embeddings"] + c["type_vocab_size"]) * d + 2 * d
        return emb + body + (d * d + d) + 2 * d + c["vocab_size"]
    patches = (c["image_size"] // c["patch_size"]) ** 2  # vit
    emb = d + (patches + 1) * d + c["num_channels"] * c["patch_size"] ** 2 * d + d
    return emb + body + 2 * d + d * c["num_labels"] + c["num_labels"]


__all__ = ["CNNS", "SPECS", "CNNSpec", "HFSpec", "canonical_model", "expert_count",
           "experts_per_token",
           "is_file_spec", "list_models", "param_count"]  # fmt: skip
