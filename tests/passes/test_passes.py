"""Behaviour of the first four passes beyond the golden files."""

from __future__ import annotations

import math

import networkx as nx
import pytest

from waferflow.errors import PassError
from waferflow.ir import Attrs, Cost, Graph, OpKind, Phase, print_graph
from waferflow.passes import PassContext, PassManager
from waferflow.passes.annotate_cost import AnnotateCost
from waferflow.passes.canonicalize import Canonicalize
from waferflow.passes.cost_rules import NORMALIZATION_FLOPS_PER_ELEMENT, ir_cost
from waferflow.passes.dce import DeadCodeElimination
from waferflow.passes.fuse_elementwise import FuseElementwise

from . import graphs
from .graphs import Builder, f32

K = OpKind


def _run(pipeline: str, g: Graph) -> Graph:
    return PassManager(pipeline, verify_each=True).run(g, PassContext())


def _needed(g: Graph) -> set[int]:
    """ids of the ops the outputs depend on (with networkx, independently of dce)."""
    nxg = g.to_networkx()
    index = {id(op): i for i, op in enumerate(g.ops)}
    roots = {index[id(v.producer)] for v in g.outputs if v.producer is not None}
    keep = set(roots)
    for r in roots:
        keep |= nx.ancestors(nxg, r)
    return {id(g.ops[i]) for i in keep}


@pytest.mark.parametrize("keep_sources", [True, False])
def test_dce_keeps_exactly_what_outputs_need(keep_sources: bool) -> None:
    g = graphs.mlp_train()
    needed = _needed(g)
    interface = {id(op) for op in g.ops if op.kind in (K.INPUT, K.PARAM, K.BUFFER)}
    expected = needed | interface if keep_sources else needed
    DeadCodeElimination(keep_sources=keep_sources).apply(PassContext(), g)
    assert {id(op) for op in g.ops} == expected


def test_dce_keeps_effect_ops_without_results_but_not_bookkeeping() -> None:
    b = Builder("effects")
    x = b.src(K.INPUT, "x", f32(4))
    b.g.add_op(K.SEND, [x], [], attrs=Attrs.of(peer=1))
    b.g.add_op(K.ASSERT, [x], [])
    g = b.done(x)
    DeadCodeElimination().apply(PassContext(), g)
    assert [op.kind for op in g.ops] == [K.INPUT, K.SEND]


def test_canonicalize_is_idempotent_and_keeps_output_types() -> None:
    for build in (graphs.mlp_train, graphs.views):
        g = build()
        types = [v.type for v in g.outputs]
        once = print_graph(_run("canonicalize", g))
        assert [v.type for v in g.outputs] == types
        assert print_graph(_run("canonicalize", g)) == once


def test_canonicalize_collapses_a_chain_of_no_ops_in_one_sweep() -> None:
    b = Builder("chain")
    v = x = b.src(K.INPUT, "x", f32(2, 3))
    for kind in (K.DETACH, K.VIEW, K.ALIAS, K.CLONE, K.EXPAND, K.DETACH):
        v = b.op(kind, v)
    y = b.op(K.RELU, v, name="y")
    g = b.done(y, v)
    Canonicalize().apply(PassContext(), g)
    assert [op.kind for op in g.ops] == [K.INPUT, K.RELU]
    assert g.ops[1].operands == (x,)
    assert g.outputs == [y, x]


def test_fuse_respects_multi_use_values_and_graph_outputs() -> None:
    g = graphs.multi_use()
    before = {v.name: v for v in g.values()}
    _run("fuse-elementwise", g)
    names = {v.name for v in g.values()}
    # %e feeds the matmul, %n the backward, %r is an output: all stay visible
    assert {"e", "n", "r", "p"} <= names
    # the hidden intermediates are the ones used only inside their group
    assert set(before) - names == {"q", "gz"}
    fused = {op.result.name: op for op in g.ops if op.kind is K.FUSED}
    assert fused["z"].attrs.get("ops") == ("sqrt", "add")
    assert fused["gs"].attrs.get("ops") == ("mul", "sigmoid")
    assert [v.name for v in fused["z"].operands] == ["r", "p"]


@pytest.mark.parametrize("limit", [1, 2, 3, 4, 7, 8])
def test_fuse_max_bounds_the_group_size(limit: int) -> None:
    g = graphs.long_chain(7)
    flops = g.total_cost().flops
    FuseElementwise(max=limit).apply(PassContext(), g)
    body = [op for op in g.ops if not op.is_source]
    sizes = [len(op.attrs.get("ops")) if op.kind is K.FUSED else 1 for op in body]  # type: ignore[arg-type]
    assert all(s <= limit for s in sizes)
    assert sum(sizes) == 7  # every original op is in exactly one group
    assert len(body) == math.ceil(7 / limit)  # groups are filled from the end of the chain
    assert g.total_cost().flops == flops


def test_fuse_never_crosses_a_phase() -> None:
    b = Builder("phases")
    v = b.src(K.INPUT, "x", f32(4))
    for phase in (Phase.FWD, Phase.FWD, Phase.BWD, Phase.BWD, Phase.OPT):
        v = b.op(K.EXP, v, phase=phase)
    g = b.done(v)
    FuseElementwise().apply(PassContext(), g)
    assert [(op.kind, op.phase) for op in g.ops[1:]] == [
        (K.FUSED, Phase.FWD),
        (K.FUSED, Phase.BWD),
        (K.EXP, Phase.OPT),
    ]


def test_fusing_fused_ops_concatenates_their_kinds() -> None:
    g = graphs.long_chain(4)
    FuseElementwise(max=2).apply(PassContext(), g)
    FuseElementwise(max=4).apply(PassContext(), g)
    assert [op.attrs.get("ops") for op in g.ops if op.kind is K.FUSED] == [
        ("relu", "exp", "neg", "abs")
    ]


def test_fuse_then_annotate_equals_annotate_then_fuse() -> None:
    """Members without a cost are counted by annotate-cost's rule, so the order of
    the two passes does not change the FLOPs or bytes."""
    a = _run("canonicalize,dce,fuse-elementwise,annotate-cost", graphs.mlp_train())
    b = _run("canonicalize,dce,annotate-cost,fuse-elementwise", graphs.mlp_train())
    assert print_graph(a) == print_graph(b)


def test_annotate_cost_leaves_costed_ops_alone() -> None:
    g = graphs.costs()
    AnnotateCost().apply(PassContext(), g)
    pre = next(op for op in g.ops if op.results and op.result.name == "pre")
    assert pre.cost == Cost(1, 2, 3)
    AnnotateCost(overwrite=True).apply(PassContext(), g)
    assert pre.cost == Cost(24, 96, 96)


def test_cost_rules_closed_forms() -> None:
    b = Builder("rules")
    a = b.src(K.INPUT, "a", f32(3, 7, 5))
    w = b.src(K.INPUT, "w", f32(3, 5, 2))
    mm = b.g.add_op(K.BMM, [a, w], [f32(3, 7, 2)])
    ln = b.g.add_op(K.SOFTMAX, [a], [f32(3, 7, 5)])
    sq = b.g.add_op(K.MUL, [a, a], [f32(3, 7, 5)])
    assert ir_cost(mm).flops == 2 * 3 * 7 * 2 * 5
    assert ir_cost(ln).flops == NORMALIZATION_FLOPS_PER_ELEMENT * 105
    assert ir_cost(sq) == Cost(105, 105 * 4, 105 * 4)  # %a read once


def test_annotate_cost_reports_a_malformed_matmul() -> None:
    b = Builder("bad")
    a = b.src(K.INPUT, "a", f32(2, 2))
    m = b.op(K.MATMUL, a, name="m")
    g = b.done(m)
    with pytest.raises(PassError, match="cannot cost matmul %m: it has 1 operand"):
        AnnotateCost().apply(PassContext(), g)
    b2 = Builder("bad2")
    e = b2.g.add_op(K.ADDMM, [a, a], [f32(2, 2)], names=["e"]).result
    with pytest.raises(PassError, match="cannot cost addmm %e: it has 2 operand"):
        AnnotateCost().apply(PassContext(), b2.done(e))
