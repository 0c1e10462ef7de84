"""Mixture of experts in the frontend: Mixtral traces on meta tensors with routing as
typed ops on a capacity set by the load assumption; the routing ops are each other's
backward and do what they say on real tensors."""

from __future__ import annotations

import math

import pytest
import torch

from waferflow.errors import TraceError
from waferflow.frontend import load_model, trace
from waferflow.frontend.moe import capacity, moe_combine, moe_dispatch
from waferflow.ir.graph import Graph, Phase
from waferflow.ir.opkind import OpKind

K = OpKind
TOKENS, TOP_K, EXPERTS, HIDDEN, INNER = 4 * 32, 2, 4, 64, 128  # hf:mixtral-tiny, batch 4


@pytest.fixture(scope="module")
def mixtral() -> tuple[Graph, Graph]:
    b = load_model("hf:mixtral-tiny")
    infer = trace(b.module, b.example_inputs, mode="infer", name=b.name)
    train = trace(b.module, b.example_inputs, mode="train", loss_fn=b.loss_fn, name=b.name)
    return infer, train


def _of(g: Graph, kind: OpKind, phase: Phase | None = None) -> list:
    return [op for op in g.ops if op.kind is kind and (phase is None or op.phase is phase)]


def test_routing_is_typed_in_both_modes(mixtral: tuple[Graph, Graph]) -> None:
    infer, train = mixtral
    for g in (infer, train):
        assert not _of(g, K.OPAQUE)
        assert len(_of(g, K.TOPK)) == 2  # one router per layer
        assert len(_of(g, K.MOE_DISPATCH, Phase.FWD)) == len(_of(g, K.MOE_COMBINE, Phase.FWD)) == 2
    # the backward of a combine is a dispatch and the other way round
    assert len(_of(train, K.MOE_DISPATCH, Phase.BWD)) == len(_of(train, K.MOE_COMBINE, Phase.BWD))
    assert len(_of(train, K.MOE_DISPATCH, Phase.BWD)) == 2


def test_uniform_load_sizes_each_expert_for_its_mean_share(mixtral: tuple[Graph, Graph]) -> None:
    infer, _ = mixtral
    cap = TOKENS * TOP_K // EXPERTS
    for op in _of(infer, K.MOE_DISPATCH):
        assert op.attrs.get("capacity") == cap and op.attrs.get("skew") == 1.0
        assert op.results[0].type.shape == (EXPERTS, cap, HIDDEN)
        assert op.cost.flops == 0  # routing moves data only


def test_a_skewed_load_pads_every_expert_to_the_busiest(mixtral: tuple[Graph, Graph]) -> None:
    infer, _ = mixtral
    b = load_model("hf:mixtral-tiny")
    skewed = trace(b.module, b.example_inputs, mode="infer", name=b.name, moe_skew=1.5)
    cap = math.ceil(1.5 * TOKENS * TOP_K / EXPERTS)
    assert {op.attrs.get("capacity") for op in _of(skewed, K.MOE_DISPATCH)} == {cap}

    def expert_flops(g: Graph) -> int:
        return sum(op.cost.flops for op in _of(g, K.BMM) if op.prov.module.endswith("experts"))

    # gate-up and down projections: 2 (2 I H + H I) FLOPs per slot of every expert
    per_slot = 2 * (2 * INNER * HIDDEN + HIDDEN * INNER)
    assert expert_flops(infer) == 2 * EXPERTS * (TOKENS * TOP_K // EXPERTS) * per_slot
    assert expert_flops(skewed) == 2 * EXPERTS * cap * per_slot
    # the model is handed back as it was
    assert "forward" not in vars(b.module.model.layers[0].mlp.experts)


def test_bad_skew_is_refused() -> None:
    b = load_model("hf:mixtral-tiny")
    with pytest.raises(TraceError, match="skew"):
        trace(b.module, b.example_inputs, mode="infer", moe_skew=0.5)


def test_capacity() -> None:
    assert capacity(128, 2, 4, 1.0) == 64
    assert capacity(128, 2, 4, 1.25) == 80
    assert capacity(3, 1, 4, 1.0) == 1


def test_dispatch_and_combine_on_real_tensors() -> None:
    """Tokens land in their experts' slots in arrival order and come back; a copy beyond
    an expert's capacity is dropped (reads zeros); each op is the other's gradient."""
    x = torch.arange(3 * 2 * 2, dtype=torch.float64).reshape(3, 2, 2)
    idx = torch.tensor([[0, 1], [1, 2], [1, 0]])
    slots = moe_dispatch(x, idx, 3, 2, 1.0)
    assert torch.equal(slots[0, 0], x[0, 0]) and torch.equal(slots[0, 1], x[2, 1])
    assert torch.equal(slots[1, 0], x[0, 1]) and torch.equal(slots[1, 1], x[1, 0])
    back = moe_combine(slots, idx, 3, 1.0)
    assert torch.equal(back[:2], x[:2]) and torch.equal(back[2, 1], x[2, 1])
    assert torch.equal(back[2, 0], torch.zeros(2, dtype=torch.float64))  # expert 1 was full
    xr = x.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: moe_dispatch(t, idx, 3, 2, 1.0), (xr,))
    yr = slots.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: moe_combine(t, idx, 3, 1.0), (yr,))
