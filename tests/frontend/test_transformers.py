"""Hugging Face models: FLOPs of a GPT-2 training step against the closed form,
graph structure (multi-result ops, in-place ops, names, module paths)."""

from __future__ import annotations

import warnings

import pytest
import torch

from waferflow.frontend import UnknownOpWarning, load_model, trace
from waferflow.frontend.zoo_hf import causal_lm_loss
from waferflow.ir import Graph, OpKind, Phase
from waferflow.ir.opkind import MATMUL_LIKE
from waferflow.ir.verifier import verify_graph

K = OpKind
transformers = pytest.importorskip("transformers")

# A GPT-2 large enough for the matmuls to dominate, small enough to trace in a second.
L, D, H, V, B, S = 4, 256, 4, 2048, 2, 256


@pytest.fixture(scope="module")
def gpt2_train() -> Graph:
    config = transformers.GPT2Config(
        n_layer=L,
        n_embd=D,
        n_head=H,
        vocab_size=V,
        n_positions=S,
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="eager",
        use_cache=False,
    )
    with torch.device("meta"):
        model = transformers.GPT2LMHeadModel(config)
    ids = torch.empty(B, S, dtype=torch.long, device="meta")
    return trace(model, (ids,), mode="train", loss_fn=causal_lm_loss, name="gpt2_train")


def test_gpt2_training_flops_match_6pt_plus_attention(gpt2_train: Graph) -> None:
    # Training FLOPs = 6 * P * T + 12 * L * B * S^2 * D, with T = B * S tokens and
    # P = the parameters that take part in matmuls: 12 D^2 per layer (QKV 3D^2,
    # projection D^2, MLP 8D^2) plus the LM head V * D (tied to the token embedding;
    # position embeddings and biases do no matmul work). The attention term: per
    # layer the forward does Q K^T and A V, 2 * 2 * B * S^2 * D FLOPs, and the
    # backward twice that, so 3 * 4 * B * S^2 * D per layer.
    tokens = B * S
    matmul_params = L * 12 * D * D + V * D
    expected = 6 * matmul_params * tokens + 12 * L * B * S * S * D
    matmuls = sum(op.cost.flops for op in gpt2_train.ops if op.kind in MATMUL_LIKE)
    assert matmuls == expected  # torch's formulas, exactly
    total = gpt2_train.total_cost().flops
    assert expected <= total <= 1.10 * expected


def test_gpt2_graph_structure(gpt2_train: Graph) -> None:
    verify_graph(gpt2_train)
    assert not any(op.kind == K.GETITEM for op in gpt2_train.ops)
    norms = [op for op in gpt2_train.ops if op.kind == K.LAYER_NORM]
    assert len(norms) == 2 * L + 1
    assert all(len(op.results) == 3 for op in norms)  # out, mean, rstd
    (nll,) = [op for op in gpt2_train.ops if op.kind == K.NLL_LOSS]
    assert len(nll.results) == 2 and nll.results[0].name == "loss"
    # dropout is traced as in-place ops; each gets a fresh SSA value
    assert any(op.kind == K.DROPOUT and op.prov.aten == "aten.bernoulli_.float" for op in gpt2_train.ops)  # fmt: skip
    params = {op.attrs.get("name") for op in gpt2_train.sources(K.PARAM)}
    assert "transformer.h.0.attn.c_attn.weight" in params
    assert "lm_head.weight" not in params  # tied to transformer.wte.weight
    (wte_grad,) = [v for v in gpt2_train.values() if v.name == "transformer.wte.weight.grad"]
    assert wte_grad.type.shape == (V, D)


def test_gpt2_module_paths_cover_forward_and_backward(gpt2_train: Graph) -> None:
    c_attn = "transformer.h.1.attn.c_attn"
    for phase in (Phase.FWD, Phase.BWD):
        mms = [
            op
            for op in gpt2_train.ops
            if op.prov.module == c_attn and op.phase == phase and op.kind in MATMUL_LIKE
        ]
        # forward: one addmm; backward: input and weight gradients
        assert len(mms) == (1 if phase == Phase.FWD else 2), phase
    update = [op for op in gpt2_train.ops if op.phase == Phase.OPT and op.prov.module == c_attn]
    assert [op.results[0].name for op in update] == [f"{c_attn}.weight.new", f"{c_attn}.bias.new"]


def test_llama_buffers_are_sources_and_rotary_ops_are_typed() -> None:
    bundle = load_model("hf:llama-tiny")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = trace(bundle.module, bundle.example_inputs, mode="train", loss_fn=bundle.loss_fn)
    verify_graph(g)
    # the rotary embedding's cos and sin have their own kinds: no unknown-op warning
    assert not [w for w in caught if w.category is UnknownOpWarning]
    assert not [op for op in g.ops if op.kind == K.OPAQUE]
    assert {K.SIN, K.COS} <= {op.kind for op in g.ops}
    buffers = [op.attrs.get("name") for op in g.sources(K.BUFFER)]
    assert "model.rotary_emb.inv_freq" in buffers
    # 4 heads over 2 KV heads: grouped-query attention shows as k/v projections of half width
    (k_proj,) = [op for op in g.sources(K.PARAM) if op.attrs.get("name") == "model.layers.0.self_attn.k_proj.weight"]  # fmt: skip
    assert k_proj.result.type.shape == (32, 64)
