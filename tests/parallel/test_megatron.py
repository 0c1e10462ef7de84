"""Tensor parallelism: Megatron's column / row split falls out of propagation, and
every rank's share of an op's FLOPs sums to the op's FLOPs."""

from __future__ import annotations

from waferflow.ir.graph import Graph
from waferflow.ir.opkind import COLLECTIVE, MATMUL_LIKE, OpKind
from waferflow.ir.sharding import PARTIAL, MeshAxis, Sharding, Split
from waferflow.parallel.driver import clone_graph, parallelize
from waferflow.parallel.insert import insert_collectives
from waferflow.parallel.plan_spec import parse_plan
from waferflow.parallel.propagate import propagate
from waferflow.parallel.shardcost import op_cost

from .graphs import fast_wafer, mlp


def test_mlp_is_column_then_row_parallel() -> None:
    g = mlp()
    r = propagate(g, parse_plan("tp=2").mesh(), batch=8)
    tp = MeshAxis.TP
    assert r.values["w1"] == Sharding.of({tp: Split(1, 32)})  # column parallel
    assert r.values["w2"] == Sharding.of({tp: Split(0, 32)})  # row parallel
    assert r.values["hid"].get(tp) == Split(1, 32)
    assert r.values["y"].get(tp) == PARTIAL
    # gradients come out placed like their weights: no gradient communication
    assert r.values["g_w1"] == r.values["w1"] and r.values["g_w2"] == r.values["w2"]
    # every matmul, forward and backward, is split
    for op in g.ops:
        if op.kind in MATMUL_LIKE:
            assert tp in r.ops[op].divided, op


def test_mlp_communicates_like_megatron() -> None:
    g = mlp()
    state = parallelize(g, fast_wafer(2), "tp=2")
    inserted = insert_collectives(g, state.sharding, state.stages, state.plan)
    kinds = sorted((c.op.kind.value, c.op.operands[0].name) for c in inserted)
    # one all-reduce after the row-parallel fc2 (forward), one on the input gradient
    assert kinds == [("all_reduce", "g_t"), ("all_reduce", "y")]
    assert sum(op.kind in COLLECTIVE for op in g.ops) == 2


def _shares_sum(g: Graph, plan: str) -> None:
    mesh = parse_plan(plan).mesh()
    batch = next(op for op in g.ops if op.kind is OpKind.INPUT).results[0].type.shape[0]
    r = propagate(g, mesh, batch=batch)
    split_ops = 0
    for op in g.ops:
        if op.is_source or op.cost.flops == 0:
            continue
        info = r.ops[op]
        shares = [
            op_cost(op, info, [r.of(x) for x in op.results], mesh, rank, -1, False)[0]
            for rank in range(mesh.size)
        ]
        if MeshAxis.TP in info.divided:
            split_ops += 1
            assert sum(shares) == op.cost.flops, op
        else:
            assert all(s == op.cost.flops for s in shares), op
    assert split_ops > 0


def test_tp_shares_sum_to_the_op_flops_on_gpt2(gpt2_tiny: Graph) -> None:
    _shares_sum(gpt2_tiny, "tp=4")


def test_tp_shares_sum_to_the_op_flops_on_llama(llama_tiny: Graph) -> None:
    _shares_sum(llama_tiny, "tp=2")


def test_gpt2_every_matmul_is_split_and_little_is_replicated(gpt2_tiny: Graph) -> None:
    g = clone_graph(gpt2_tiny)
    r = propagate(g, parse_plan("tp=4").mesh(), batch=8)
    total = sum(op.cost.flops for op in g.ops)
    replicated = sum(
        op.cost.flops for op in g.ops if op in r.ops and MeshAxis.TP not in r.ops[op].divided
    )
    assert all(MeshAxis.TP in r.ops[op].divided for op in g.ops if op.kind in MATMUL_LIKE)
    assert replicated / total < 0.01
    assert not r.notes  # no fallback anywhere
    # the tied embedding is split over the vocabulary, the attention by heads
    assert r.values["transformer.wte.weight"].get(MeshAxis.TP) == Split(0, 128)
    assert r.values["transformer.h.0.attn.c_attn.weight"].get(MeshAxis.TP) == Split(1, 16)


def test_every_matmul_weight_is_split(gpt2_tiny: Graph, llama_tiny: Graph) -> None:
    for g in (gpt2_tiny, llama_tiny):
        batch = next(op for op in g.ops if op.kind is OpKind.INPUT).results[0].type.shape[0]
        r = propagate(g, parse_plan("tp=2").mesh(), batch=batch)
        weights = [
            op.results[0].name
            for op in g.ops
            if op.kind is OpKind.PARAM and op.results[0].type.rank == 2
        ]
        assert weights
        for name in weights:
            assert r.values[name].get(MeshAxis.TP) != Sharding().get(MeshAxis.TP), name
