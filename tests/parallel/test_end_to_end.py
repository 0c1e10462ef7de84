"""Whole plans on traced models: build, verify, simulate, deterministic, as passes."""

from __future__ import annotations

from waferflow.backend_sim import simulate
from waferflow.ir.graph import Graph
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import plan_to_json, verify_plan
from waferflow.ir.sharding import MeshAxis, Split
from waferflow.ir.target import get_wafer
from waferflow.parallel import build_parallel_plan
from waferflow.parallel.driver import ParallelResult, ParallelState, clone_graph
from waferflow.passes import PassContext, PassManager

MESH = get_wafer("mesh16x16")
PLAN = "dp=2,tp=4,pp=2,microbatches=4,span=1"  # one rank per core


def test_gpt2_dp_tp_pp_with_microbatches(gpt2_tiny: Graph) -> None:
    r = build_parallel_plan(gpt2_tiny, MESH, PLAN)
    verify_plan(r.plan, MESH)
    assert r.memory.fits and len(r.plan.cores) == 16
    sim = simulate(r.plan, MESH)
    assert sim.step_time_ps > 0 and 0 < sim.flop_utilisation <= 1
    # the replicated work of a Megatron plan is small: layer norms, the loss, adds
    assert r.model_flops <= r.plan.total_flops < 1.05 * r.model_flops
    kinds = {(c.kind, c.axis) for c in r.collectives}
    assert ("all_reduce", "tp") in kinds and ("all_reduce", "dp") in kinds
    # every micro-batch and stage is there, and each stage has its own 8 cores
    assert {a.microbatch for a in r.plan.actors} == {0, 1, 2, 3}
    by_stage: dict[int, set[int]] = {}
    for a in r.plan.actors:
        by_stage.setdefault(a.stage, set()).add(a.core)
    assert [len(by_stage[s]) for s in (0, 1)] == [8, 8]
    assert not by_stage[0] & by_stage[1]
    # the static peak bounds the simulator's (which allocates on arrival)
    peaks = {c.core: c.peak_bytes for c in r.memory.cores}
    assert all(c.peak_mem_bytes <= peaks[c.core] for c in sim.cores)


def test_layout_strips(gpt2_tiny: Graph) -> None:
    r = build_parallel_plan(gpt2_tiny, MESH, PLAN)
    assert r.layout.kind == "strips"
    # stage 0 is columns 0-3, stage 1 columns 4-7; a tp group is one row
    assert [divmod(c, 16) for c in r.layout.cores[0]] == [
        (0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)
    ]  # fmt: skip
    assert divmod(r.layout.core(1, 0), 16) == (0, 4)


def test_deterministic(gpt2_tiny: Graph) -> None:
    a = build_parallel_plan(gpt2_tiny, MESH, PLAN)
    b = build_parallel_plan(gpt2_tiny, MESH, PLAN)
    assert plan_to_json(a.plan) == plan_to_json(b.plan)


def test_passes_give_the_same_plan(gpt2_tiny: Graph) -> None:
    direct = build_parallel_plan(gpt2_tiny, MESH, PLAN)
    steps = (
        f'parallelize{{plan="{PLAN}"}},insert-collectives,schedule,lower-collectives,plan-memory'
    )
    ctx = PassContext(wafer=MESH)
    g = PassManager(steps, verify_each=True).run(clone_graph(gpt2_tiny), ctx)
    state = ctx.get_result("lower-collectives", ParallelState)
    assert state.actor_plan is not None
    assert plan_to_json(state.actor_plan) == plan_to_json(direct.plan)
    assert sum(op.kind is OpKind.ALL_REDUCE for op in g.ops) > 0
    one = PassContext(wafer=MESH)
    PassManager(f'parallel-lowering{{plan="{PLAN}"}}').run(clone_graph(gpt2_tiny), one)
    res = one.get_result("parallel-lowering", ParallelResult)
    assert plan_to_json(res.plan) == plan_to_json(direct.plan)


def test_dead_cores_are_skipped(llama_tiny: Graph) -> None:
    wafer = MESH.with_dead_cores(0.1, seed=3)
    r = build_parallel_plan(llama_tiny, wafer, "dp=2,tp=2,pp=2,microbatches=2,span=1")
    used = {divmod(c, 16) for c in r.plan.cores}
    assert not used & set(wafer.dead_cores)
    assert simulate(r.plan, wafer).step_time_ps > 0


def test_seed_style_per_layer_patterns(amcoda_cnn: Graph) -> None:
    wafer = get_wafer("amcoda")
    for ways in (2, 4):
        r = build_parallel_plan(
            amcoda_cnn, wafer, f"layers=ddtr,ways={ways},grad-reduce=root,algo=root"
        )
        sh = r.shardings
        assert sh["conv1.weight"] == "R" and sh["conv2.weight"] == "R"
        assert sh["conv3.weight"] == str(Split(0, 32 // ways)).join(["{tp: ", "}"])
        # data-parallel layers reduce their gradients to the root replica
        assert {(c.kind, c.axis) for c in r.collectives if c.kind == "reduce"} == {("reduce", "dp")}

        # only the root updates the data-parallel layers' weights; tensor-parallel
        # ranks update their own shards
        opt_cores: dict[str, set[int]] = {}
        for a in r.plan.actors:
            if a.phase.value == "opt":
                opt_cores.setdefault(a.layer, set()).add(a.core)
        assert opt_cores["conv1"] == opt_cores["conv2"] == {r.layout.core(0, 0)}
        assert opt_cores["conv3"] == set(r.layout.cores[0])
        assert simulate(r.plan, wafer).step_time_ps > 0


def test_tensor_parallel_convolutions_split_output_channels(amcoda_cnn: Graph) -> None:
    r = build_parallel_plan(amcoda_cnn, get_wafer("amcoda"), "tp=2")
    assert r.shardings["conv1.weight"] == "{tp: S(0/8)}"
    # the seed's channel split: each layer's input is gathered to every rank
    gathers = [c for c in r.collectives if c.kind == "all_gather" and c.axis == MeshAxis.TP.value]
    assert len(gathers) >= 2


def test_sharded_graph_prints_and_parses_back(gpt2_tiny: Graph) -> None:
    from waferflow.ir.parser import parse_graph
    from waferflow.ir.printer import print_graph
    from waferflow.ir.verifier import verify_graph

    r = build_parallel_plan(gpt2_tiny, MESH, "dp=2,tp=2,pp=2,microbatches=2", check_memory=False)
    verify_graph(r.graph)
    text = print_graph(r.graph)
    assert "all_reduce" in text and 'axis="tp"' in text and 'axis="dp"' in text
    assert print_graph(parse_graph(text)) == text


def test_report_text(gpt2_tiny: Graph) -> None:
    from waferflow.parallel import format_report

    r = build_parallel_plan(gpt2_tiny, MESH, PLAN)
    text = format_report(r, MESH, simulate(r.plan, MESH))
    assert "step time" in text and "model FLOPs utilisation" in text
    assert "per-core memory" in text and "weights" in text
