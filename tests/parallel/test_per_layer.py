"""Per-layer plans (cut=layer), the seed machine's plan words in the general grammar,
resharding between stages, and an op's datapath passes."""

from __future__ import annotations

import pytest

from waferflow.backend_sim import simulate
from waferflow.errors import PlanError
from waferflow.ir.dtypes import DType, TensorType
from waferflow.ir.graph import Attrs, Graph
from waferflow.ir.opkind import OpKind
from waferflow.ir.plan import Gemm, OpWork
from waferflow.ir.sharding import PARTIAL as P
from waferflow.ir.sharding import MeshAxis, Sharding, Split
from waferflow.ir.target import get_wafer
from waferflow.ir.work import op_work
from waferflow.parallel import build_parallel_plan
from waferflow.parallel.per_layer import needed_ranks, resolve, stage_letters
from waferflow.parallel.plan_spec import (
    CollectiveAlgo,
    GradReduce,
    ParallelPlan,
    PipelineSchedule,
    StageCut,
    parse_plan,
)
from waferflow.parallel.redistribute import pieces
from waferflow.parallel.stages import forward_units

AMCODA = get_wafer("amcoda")
DP, TP = MeshAxis.DP, MeshAxis.TP


# -- the grammar ---------------------------------------------------------------------------


def test_seed_words_parse_to_per_layer_plans() -> None:
    pipe = parse_plan("pipe")
    assert (pipe.cut, pipe.schedule, pipe.pp, pipe.microbatches) == (
        StageCut.LAYER, PipelineSchedule.GPIPE, 0, 1
    )  # fmt: skip
    g4 = parse_plan("gpipe=4")
    assert g4.microbatches == 4 and g4.cut is StageCut.LAYER
    assert parse_plan(str(g4)) == g4
    assert parse_plan("cut=layer").pp == 0  # from the model
    for text, needle in [("gpipe", "gpipe needs a number"), ("pipe=2", "pipe takes no value"),
                         ("gpipe=2,schedule=1f1b", "pipe / gpipe=M mean schedule=gpipe"),
                         ("layers=dsx,ways=2", r"s \(single rank\)")]:  # fmt: skip
        with pytest.raises(PlanError, match=needle):
            parse_plan(text)


def test_seed_forms_resolve_against_the_model(amcoda_cnn: Graph) -> None:
    """The seed CNN has six layers: conv1+relu1, conv2+relu2, conv3+relu3, pool, fc,
    loss; a three-letter pattern is the seed's per-layer form."""
    assert resolve(amcoda_cnn, parse_plan("pipe")).pp == 6
    seed = resolve(amcoda_cnn, parse_plan("layers=ddt,ways=4"))
    assert seed.layers == "ddts" and seed.pp == 6 and seed.cut is StageCut.LAYER
    assert seed.grad_reduce is GradReduce.ROOT and seed.algo is CollectiveAlgo.ROOT
    assert seed.schedule is PipelineSchedule.GPIPE
    assert resolve(amcoda_cnn, seed) == seed  # resolving is idempotent
    # what the user gave is kept
    ring = resolve(amcoda_cnn, parse_plan("layers=ddt,ways=4,algo=direct"))
    assert ring.algo is CollectiveAlgo.DIRECT
    letters = stage_letters(amcoda_cnn, seed, forward_units(amcoda_cnn))
    assert letters == ["d", "d", "t", "s", "s", "s"]  # pool and loss take fc's letter
    assert needed_ranks(amcoda_cnn, seed) == (15, "stages of 4+4+4+1+1+1 rank(s)")
    # a full-length pattern stays the general form: one stage, four ranks
    full = resolve(amcoda_cnn, parse_plan("layers=ddtd,ways=4"))
    assert full.cut is StageCut.BALANCED and full.pp == 1
    with pytest.raises(PlanError, match="has 6 layers; leave pp out"):
        resolve(amcoda_cnn, ParallelPlan(pp=3, cut=StageCut.LAYER))


def test_per_layer_plan_structure(amcoda_cnn: Graph) -> None:
    r = build_parallel_plan(amcoda_cnn, AMCODA, "layers=dt,ways=2")
    assert [len(s) for s in r.layout.cores] == [2, 2, 1, 1, 1, 1]  # conv3 on one rank
    stages = {a.stage for a in r.plan.actors}
    assert stages == set(range(6))
    # values move between stages by resharding; the only collective left is the d
    # layers' gradient reduction to replica 0: a t layer's ReLU runs on its part's
    # channels, also when the layer after it is data parallel (tdt)
    for plan in ("layers=dt,ways=2", "layers=tdt,ways=2"):
        got = build_parallel_plan(amcoda_cnn, AMCODA, plan)
        assert {(c.kind, c.axis) for c in got.collectives} == {("reduce", "dp")}, plan
    # d -> t: each conv1 replica's half batch goes to both conv2 parts as one broadcast
    conv1_out = [m for m in r.plan.messages if m.bcast >= 0]
    assert len(conv1_out) == 4 and {m.bytes for m in conv1_out} == {32 * 16 * 56 * 56 * 2}
    # the conv1 replicas add the two parts' partial input gradients (an ADD pass)
    relu_bwd = [a for a in r.plan.actors if a.name.endswith(".B0.relu1")]
    assert len(relu_bwd) == 2
    for a in relu_bwd:
        assert [w.kind for w in a.work] == [OpKind.ADD, OpKind.ACT_BACKWARD]
        assert a.work[0].reads == (32 * 16 * 56 * 56 * 2,) * 2


# -- resharding between stages --------------------------------------------------------------


def _mesh(n: int):  # the per-layer pattern's mesh: dp and tp on one axis of n ranks
    return ParallelPlan(layers="d", ways=n).mesh()


def test_pieces_gather_broadcast_split_and_sum() -> None:
    shape = (8, 4)
    d = Sharding.of({DP: Split(0, 4)})  # batch halves
    t = Sharding.of({TP: Split(1, 2)})  # column halves
    whole = Sharding()
    m2 = _mesh(2)
    # d -> whole (a t layer's input, or a one-rank layer): both halves, 16 elements each
    got = pieces(shape, d, whole, m2, [0, 1], 0)
    assert [(p.src_rank, p.elements, p.partial) for p in got] == [(0, 16, False), (1, 16, False)]
    assert pieces(shape, d, whole, m2, [0, 1], 1)[0].region == got[0].region  # a broadcast
    # whole on one rank -> d: each replica gets its half from rank 0 (a split)
    assert [(p.src_rank, p.elements) for p in pieces(shape, whole, d, m2, [0], 1)] == [(0, 16)]
    # t -> d: rank 1 needs rows 4..7 of both column halves
    got = pieces(shape, t, d, m2, [0, 1], 1)
    assert [(p.src_rank, p.elements) for p in got] == [(0, 8), (1, 8)]
    assert got[0].region == (((4, 8),), ((0, 2),))
    # partial sums over tp -> d: each part's share of the rank's rows, to be added
    psum = Sharding.of({TP: P})
    got = pieces(shape, psum, d, m2, [0, 1], 0)
    assert [(p.src_rank, p.elements, p.partial) for p in got] == [(0, 16, True), (1, 16, True)]
    assert got[0].region == got[1].region


def test_pieces_of_replicated_holders_round_robin_and_cyclic_blocks() -> None:
    whole = Sharding()
    m4 = _mesh(4)
    assert [p.src_rank for p in pieces((8,), whole, whole, m4, [0, 1], 3)] == [1]
    # a block-cyclic split (block 1 over 2 ranks: even / odd) to a contiguous one
    cyc = Sharding.of({DP: Split(0, 1)})
    half = Sharding.of({DP: Split(0, 4)})
    got = pieces((8,), cyc, half, _mesh(2), [0, 1], 0)
    assert [(p.src_rank, p.elements) for p in got] == [(0, 2), (1, 2)]
    assert got[0].region == (((0, 1), (2, 3)),)


# -- datapath passes ------------------------------------------------------------------------


def _conv_bwd(mask: tuple[bool, bool, bool]) -> Graph:
    g = Graph("c")
    ty = TensorType((2, 4, 8, 8), DType.F32)
    w = TensorType((4, 4, 3, 3), DType.F32)
    srcs = [g.add_op(OpKind.INPUT, (), [t], names=[n]).results[0]
            for n, t in (("gy", ty), ("x", ty), ("w", w))]  # fmt: skip
    outs = [t for t, on in zip((ty, w, TensorType((4,), DType.F32)), mask, strict=True) if on]
    g.add_op(OpKind.CONV_BACKWARD, srcs, outs, attrs=Attrs.of(output_mask=mask))
    return g


def test_op_work_splits_a_convolution_backward_into_its_gradients() -> None:
    op = _conv_bwd((True, True, False)).ops[-1]
    # dX = dY (128 pixels x 4 channels) x W (4 x 4*3*3) then col2im; dW = dY^T x im2col(X)
    dx, dw = Gemm(m=128, n=36, k=4), Gemm(m=4, n=36, k=128)
    assert op_work(op, [10, 20, 3], [20, 3], 101) == (
        OpWork(OpKind.CONV_BACKWARD, 51, (10, 3), (20,), (dx,)),  # dX reads dY and W
        OpWork(OpKind.CONV_BACKWARD, 50, (20, 10), (3,), (dw,)),  # dW reads X and dY
    )
    assert 2 * dx.macs == 2 * dw.macs == 2 * 2 * 4 * 8 * 8 * 4 * 9  # the forward's FLOPs
    bias = _conv_bwd((False, True, True)).ops[-1]
    assert op_work(bias, [10, 20, 3], [3, 1], 100) == (
        OpWork(OpKind.CONV_BACKWARD, 100, (20, 10), (3,), (dw,)),
        OpWork(OpKind.CONV_BACKWARD, 0, (10,), (1,)),  # db reads dY: a reduction, no product
    )


def test_per_layer_plans_on_a_mesh_keep_the_default_layout() -> None:
    """The seed's plans mean the same on any wafer; stages of different widths are not
    placed by CP-SAT yet: auto keeps the default layout and says so, cpsat refuses."""
    import waferflow as wf

    c = wf.compile("cnn:amcoda", wafer="mesh16x16", mode="train", plan="layers=dt,ways=2",
                   batch=8)  # fmt: skip
    assert c.placement is None and "default layout" in c.notes[-1]
    assert [len(s) for s in c.parallel.layout.cores] == [2, 2, 1, 1, 1, 1]
    assert c.simulate().step_time > 0
    with pytest.raises(PlanError, match="does not place yet"):
        wf.compile("cnn:amcoda", wafer="mesh16x16", mode="train", plan="layers=dt,ways=2",
                   batch=8, place="cpsat")  # fmt: skip


def test_a_per_layer_pipeline_split_anywhere_gives_the_same_ir(amcoda_cnn: Graph) -> None:
    """The per-layer plan lives in the IR too: its header says the stages reshard
    (``reshard=true``), the stage widths come back from the plan and the graph, and a
    pipeline cut after any pass and continued from the printed text gives the same IR
    and the same actor plan (its host transfers included) on the seed machine."""
    from waferflow.ir.parser import parse_graph
    from waferflow.ir.plan import plan_to_json
    from waferflow.ir.printer import print_graph
    from waferflow.parallel.driver import clone_graph
    from waferflow.passes import PassContext, PassManager, parse_pipeline

    steps = (
        'split-backward,parallelize{plan="layers=ddt,ways=2"},insert-collectives,schedule,'
        "lower-collectives,plan-memory"
    )

    def run(pipeline: str, graph: Graph) -> tuple[str, PassContext]:
        ctx = PassContext(wafer=AMCODA)
        return print_graph(PassManager(pipeline, verify_each=True).run(graph, ctx)), ctx

    whole, ctx = run(steps, clone_graph(amcoda_cnn))
    assert "cut=layer" in whole.splitlines()[0] and "reshard=true" in whole.splitlines()[0]
    plan = ctx.get_result("lower-collectives", object).actor_plan  # type: ignore[attr-defined]
    assert plan.host and len(plan.cores) == 9
    passes = [str(p) for p in parse_pipeline(steps)]
    for cut in range(2, len(passes)):
        first, _ = run(",".join(passes[:cut]), clone_graph(amcoda_cnn))
        second, ctx2 = run(",".join(passes[cut:]), parse_graph(first))
        assert second == whole, f"cut after {passes[cut - 1]}"
        if cut <= 4:  # lower-collectives ran in the second half: the same actor plan
            again = ctx2.get_result("lower-collectives", object).actor_plan  # type: ignore[attr-defined]
            assert plan_to_json(again) == plan_to_json(plan), f"cut after {passes[cut - 1]}"


def test_a_language_models_loss_layer_on_one_rank_takes_its_labels_whole(
    llama_tiny: Graph,
) -> None:
    """A language model shifts its labels (an input, split over the batch) for the
    loss with ops of no module; on a one-rank (``s``) loss layer they run whole: the
    plan builds and runs (a gather over ranks the stage does not have was an
    IndexError)."""
    wafer = get_wafer("fred-mesh")
    res = build_parallel_plan(llama_tiny, wafer, "layers=t,ways=2")  # "tss": 5 layers
    assert [len(s) for s in res.layout.cores] == [2, 2, 1, 1, 1]
    assert simulate(res.plan, res.wafer or wafer).step_time > 0
