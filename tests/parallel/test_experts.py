"""Expert parallelism (``ep=N``) on hf:mixtral-tiny: experts dealt out over the ranks,
tokens exchanged by all-to-all, bytes against the closed form.

hf:mixtral-tiny at batch 4, seq 32: T = 128 tokens, top-2 of E = 4 experts, hidden
H = 64, f32, uniform load: each MoE layer dispatches into [E, C, H] = [4, 64, 64]
slots, S = E C H 4 = 65,536 bytes. Along ep = n each rank fills 1/n of every
expert's slots (its tokens) and the experts' matmuls need the slots of their own
E/n experts: an all-to-all in which each rank keeps 1/n of its S/n bytes and sends
the rest, (n - 1) S / n bytes over all ranks; the combine needs them back, another.
Per layer: 2 in the forward, 2 more in the backward (the gradients of both).
"""

from __future__ import annotations

import pytest

from waferflow.errors import PlanError
from waferflow.frontend import load_model, trace
from waferflow.ir import print_graph
from waferflow.ir.graph import Graph, Phase
from waferflow.ir.opkind import OpKind
from waferflow.ir.parser import parse_graph
from waferflow.ir.sharding import MeshAxis, Split
from waferflow.ir.verifier import verify_graph
from waferflow.parallel import ParallelResult, build_parallel_plan
from waferflow.parallel.experts import ep_choices, expert_figures

from .graphs import fast_wafer

K = OpKind
S = 4 * 64 * 64 * 4  # the slots of one MoE layer, bytes
LAYERS = 2
EXPERT_WEIGHTS = LAYERS * (4 * 256 * 64 + 4 * 64 * 128) * 4  # gate_up + down, bytes


@pytest.fixture(scope="module")
def mixtral() -> dict[str, Graph]:
    b = load_model("hf:mixtral-tiny")
    return {
        mode: trace(b.module, b.example_inputs, mode=mode, loss_fn=b.loss_fn, name=b.name)
        for mode in ("infer", "train")
    }


def _build(g: Graph, plan: str) -> ParallelResult:
    return build_parallel_plan(g, fast_wafer(4), f"{plan},span=1,algo=direct")


def _a2a_bytes(r: ParallelResult) -> list[int]:
    """Bytes each all-to-all instance moves, over all ranks (messages into its steps)."""
    per: dict[str, int] = {}
    for m in r.plan.messages:
        a = r.plan.actors[m.dst_actor]
        if a.op_kind is K.ALL_TO_ALL and m.bytes:
            name = a.name.split(".s")[0]
            per[name] = per.get(name, 0) + m.bytes
    return sorted(per.values())


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize(("mode", "per_layer"), [("infer", 2), ("train", 4)])
def test_all_to_all_bytes_match_the_closed_form(
    mixtral: dict[str, Graph], mode: str, per_layer: int, n: int
) -> None:
    r = _build(mixtral[mode], f"ep={n}")
    verify_graph(r.graph)
    assert _a2a_bytes(r) == [(n - 1) * S // n] * (per_layer * LAYERS)
    kinds = {c.kind for c in r.collectives if c.axis == "ep"}
    assert "all_to_all" in kinds


@pytest.mark.parametrize("n", [2, 4])
def test_each_rank_keeps_its_experts_only(mixtral: dict[str, Graph], n: int) -> None:
    dense = _build(mixtral["train"], "dp=1").memory.cores[0].resident_part("weights")
    r = _build(mixtral["train"], f"ep={n}")
    for core in r.memory.cores:
        assert core.resident_part("weights") == dense - EXPERT_WEIGHTS + EXPERT_WEIGHTS // n
    experts = [op.results[0] for op in r.graph.ops if op.kind is K.PARAM
               and op.results[0].name.endswith(("gate_up_proj", "down_proj"))]  # fmt: skip
    assert len(experts) == 2 * LAYERS
    for v in experts:
        assert v.sharding.get(MeshAxis.EP) == Split(0, 4 // n)
    # the experts' gradients stay with their experts: only the dense ones are reduced
    reduced = {op.operands[0].name for op in r.graph.ops if op.kind is K.ALL_REDUCE}
    assert not any(name.startswith(("model.layers.0.mlp.experts", "model.layers.1.mlp.experts"))
                   for name in reduced)  # fmt: skip


def test_the_plan_round_trips_and_simulates(mixtral: dict[str, Graph]) -> None:
    from waferflow.backend_sim import simulate

    r = _build(mixtral["train"], "dp=2,ep=2")
    text = print_graph(r.graph)
    assert "ep=2" in text.splitlines()[0]
    assert print_graph(parse_graph(text)) == text
    assert simulate(r.plan, r.wafer).step_time > 0
    fwd = [op for op in r.graph.ops if op.kind is K.ALL_TO_ALL and op.phase is Phase.FWD]
    assert len(fwd) == 2 * LAYERS


def test_ep_needs_experts_it_divides(mixtral: dict[str, Graph], gpt2_tiny: Graph) -> None:
    with pytest.raises(PlanError, match="has none"):
        build_parallel_plan(gpt2_tiny, fast_wafer(4), "ep=2,span=1")
    b = load_model("hf:mixtral-tiny", batch=6)
    g = trace(b.module, b.example_inputs, mode="infer", name=b.name)
    with pytest.raises(PlanError, match="does not divide the 4 experts"):
        build_parallel_plan(g, fast_wafer(4), "ep=3,span=1")


def test_the_search_tries_expert_parallel_degrees(mixtral: dict[str, Graph]) -> None:
    figs = expert_figures(mixtral["train"])
    assert (figs.experts, figs.weight_bytes) == (4, EXPERT_WEIGHTS)
    assert figs.exchanged_bytes == 4 * LAYERS * S  # two dispatches, two combines per layer
    assert ep_choices(figs, 4) == [1, 2, 4]
    assert ep_choices(figs, 2) == [1, 2]
