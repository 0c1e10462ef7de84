"""The plan lives in the IR: the parallel passes continue from printed text exactly as
from the live graph; conversions read back from the annotations are the ones
propagation found; tensor parallelism reduces its partial sums whatever the loss."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import waferflow as wf
from waferflow.errors import PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.opkind import OpKind
from waferflow.ir.parser import parse_graph
from waferflow.ir.plan import plan_to_json
from waferflow.ir.printer import print_graph
from waferflow.ir.sharding import MeshAxis
from waferflow.ir.target import get_wafer
from waferflow.ir.verifier import graph_problems
from waferflow.parallel import build_parallel_plan
from waferflow.parallel.driver import clone_graph, parallelize
from waferflow.parallel.insert import conversions_from_ir
from waferflow.parallel.propagate import propagate
from waferflow.parallel.stages import layer_modes
from waferflow.passes import PassContext, PassManager, parse_pipeline

from .graphs import fast_wafer

MESH = get_wafer("mesh16x16")
PLAN = "dp=2,tp=2,pp=2,microbatches=2"
STEPS = (
    f'parallelize{{plan="{PLAN}"}},insert-collectives,schedule,'
    "lower-collectives{algo=ring},plan-memory"
)


class TwoLayerMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.fc2 = nn.Linear(128, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _run(pipeline: str, graph: Graph, wafer=MESH) -> tuple[str, PassContext]:
    ctx = PassContext(wafer=wafer)
    out = PassManager(pipeline, verify_each=True).run(graph, ctx)
    return print_graph(out), ctx


def test_a_pipeline_split_anywhere_gives_the_same_ir(gpt2_tiny: Graph) -> None:
    """Run the parallel pipeline whole, then cut it after every pass: print the IR,
    parse it, continue with the given (not the spanned) wafer. Byte-identical."""
    whole, ctx = _run(STEPS, clone_graph(gpt2_tiny))
    plan = ctx.get_result("lower-collectives", object).actor_plan  # type: ignore[attr-defined]
    passes = [str(p) for p in parse_pipeline(STEPS)]
    for cut in range(1, len(passes)):
        first, _ = _run(",".join(passes[:cut]), clone_graph(gpt2_tiny))
        second, ctx2 = _run(",".join(passes[cut:]), parse_graph(first))
        assert second == whole, f"cut after {passes[cut - 1]}"
        if cut <= 3:  # the actor plan is rebuilt from the IR alike
            again = ctx2.get_result("lower-collectives", object).actor_plan  # type: ignore[attr-defined]
            assert plan_to_json(again) == plan_to_json(plan)
    assert "algo=ring" in whole.splitlines()[0]  # the forced algorithm is in the header


@pytest.mark.parametrize("plan", ["tp=2", "dp=2,tp=2,microbatches=2", "dp=2,pp=2,microbatches=2"])
def test_conversions_read_back_are_propagations(llama_tiny: Graph, plan: str) -> None:
    g = clone_graph(llama_tiny)
    state = parallelize(g, MESH, plan)
    engine = propagate(g, state.plan.mesh(), batch=state.batch, modes=layer_modes(g, state.plan))
    index = {id(op): i for i, op in enumerate(g.ops)}

    def key(c) -> tuple:
        return (index[id(c.op)], c.operand, c.axis.value, str(c.src), str(c.dst))

    derived = conversions_from_ir(g)
    assert sorted(map(key, engine.conversions)) == sorted(key(c) for c in derived if c.op)
    # and every output left partial along a rank axis is to be reduced
    outs = {(c.operand, c.axis) for c in derived if c.op is None}
    assert outs == {
        (k, a) for k, v in enumerate(g.outputs) for a in (MeshAxis.DP, MeshAxis.TP)
        if str(v.sharding.get(a)) == "P"
    }  # fmt: skip


def test_tensor_parallel_mlp_with_the_default_loss_all_reduces_over_the_network() -> None:
    """The default loss is the mean of fc2's output, a partial sum over the tp ranks:
    it is all-reduced before the mean reads it, so bytes cross the network."""
    compiled = wf.compile(
        TwoLayerMLP(), (torch.randn(16, 64),), wafer="mesh16x16", mode="train",
        plan="dp=1,tp=2", place="none",
    )  # fmt: skip
    par = compiled.parallel
    assert par is not None
    tp = [c for c in par.collectives if (c.kind, c.axis) == ("all_reduce", "tp")]
    assert [c.bytes for c in tp] == [16 * 32 * 4]  # fc2's output, f32
    plan = compiled.plan
    network = sum(m.bytes for m in plan.messages
                  if plan.actors[m.src_actor].core != plan.actors[m.dst_actor].core)  # fmt: skip
    # a ring all-reduce of S bytes over 2 ranks: each sends S / 2 twice
    assert network == 2 * 16 * 32 * 4
    reduce_op = next(op for op in par.graph.ops if op.kind is OpKind.ALL_REDUCE)
    assert reduce_op.operands[0].producer is not None
    assert reduce_op.operands[0].producer.prov.module == "fc2"
    assert graph_problems(par.graph) == []


def test_the_readme_snippet_runs_on_a_two_layer_mlp_and_gpt2_tiny() -> None:
    """README: ``wf.compile(model, example_inputs, wafer="mesh16x16", mode="train",
    plan="dp=2,tp=4,pp=2,microbatches=4")`` (placement given 0.2 s here, not 10)."""
    for model, inputs in ((TwoLayerMLP(), (torch.randn(16, 64),)), ("hf:gpt2-tiny", None)):
        plan = wf.compile(model, inputs, wafer="mesh16x16", mode="train",
                          plan="dp=2,tp=4,pp=2,microbatches=4", place_time=0.2)  # fmt: skip
        assert plan.simulate().step_time > 0
        assert plan.parallel is not None and graph_problems(plan.parallel.graph) == []


def test_a_micro_batch_op_reading_the_whole_step_is_named_in_user_terms() -> None:
    from waferflow.ir.dtypes import DType, TensorType
    from waferflow.ir.graph import Provenance

    g = Graph("scaled")
    t = TensorType((8, 4), DType.F32)
    x = g.add_op(OpKind.INPUT, result_types=[t], names=["x"]).result
    h = g.add_op(OpKind.RELU, [x], [t], prov=Provenance("layers.0", "aten.relu.default"),
                 names=["h"]).result  # fmt: skip
    loss = g.add_op(OpKind.SUM, [h], [TensorType((), DType.F32)],
                    prov=Provenance("loss", "aten.sum.default"), names=["loss"]).result  # fmt: skip
    y = g.add_op(OpKind.MUL, [h, loss], [t], prov=Provenance("layers.1", "aten.mul.Tensor"),
                 names=["y"]).result  # fmt: skip
    g.set_outputs([y])
    with pytest.raises(PlanError) as exc:
        build_parallel_plan(g, fast_wafer(1), "microbatches=2")
    assert str(exc.value) == (
        "%y = mul in layers.1 (aten.mul.Tensor) runs once per micro-batch but reads %loss "
        "(%loss = sum in loss (aten.sum.default)) summed over every micro-batch; use "
        "microbatches=1 for this model"
    )
