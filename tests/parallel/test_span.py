"""A plan's span: each rank on a block of span x span nodes (``waferflow.parallel.span``)."""

from __future__ import annotations

import dataclasses

import pytest

from waferflow.backend_sim import simulate
from waferflow.errors import PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.plan import verify_plan
from waferflow.ir.target import get_wafer
from waferflow.parallel import build_parallel_plan
from waferflow.parallel.plan_spec import SPAN_AUTO, parse_plan
from waferflow.parallel.span import HEADROOM, choose_span, strong_nodes

MESH = get_wafer("mesh16x16")


def test_span_parses_auto_and_integers_and_prints_back() -> None:
    assert parse_plan("dp=2").span == SPAN_AUTO
    assert parse_plan("dp=2,span=auto").span == SPAN_AUTO
    assert parse_plan("dp=2,span=3").span == 3
    assert str(parse_plan("dp=2,span=3")) == "dp=2,tp=1,pp=1,microbatches=1,span=3"
    assert "span" not in str(parse_plan("dp=2,span=auto"))
    with pytest.raises(PlanError, match="'auto' or an integer"):
        parse_plan("span=big")
    with pytest.raises(PlanError, match="'auto' or an integer >= 1"):
        parse_plan("span=0")


def test_auto_takes_the_largest_block_that_leaves_headroom() -> None:
    # 16 ranks on 16x16 cores: 3x3 blocks leave 5x5 full ones (25 >= 17.6); 4x4 leave 16
    choice = choose_span(MESH, parse_plan("dp=2,tp=4,pp=2"))
    assert choice.span == 3 and choice.auto
    assert choice.view == MESH.coarsen(3) and choice.view.name == "mesh16x16@3x"
    assert strong_nodes(choice.view) >= HEADROOM * 16
    assert strong_nodes(MESH.coarsen(4)) < HEADROOM * 16
    # as many ranks as cores: one core each
    assert choose_span(MESH, parse_plan("dp=16,tp=16")).span == 1


def test_explicit_span_checks_the_room() -> None:
    assert choose_span(MESH, parse_plan("dp=2,span=8")).view.rows == 2
    with pytest.raises(PlanError, match="span=5 leaves 16 blocks"):
        choose_span(MESH, parse_plan("dp=2,tp=4,pp=4,span=5"))
    with pytest.raises(PlanError, match="larger than the 16x16 grid"):
        choose_span(MESH, parse_plan("dp=2,span=17"))


def test_a_spanned_plan_pools_a_block_and_runs_on_its_view(gpt2_tiny: Graph) -> None:
    one = build_parallel_plan(
        gpt2_tiny, MESH, "dp=1,tp=2,pp=2,microbatches=2,span=1", check_memory=False
    )
    four = build_parallel_plan(gpt2_tiny, MESH, "dp=1,tp=2,pp=2,microbatches=2,span=4")
    assert one.wafer == MESH and four.wafer == MESH.coarsen(4)
    assert four.spec.span == 4 and "4x4 nodes" in four.span_note
    verify_plan(four.plan, four.wafer)
    # the same actors; a 4x4 block has 16x the compute and SRAM of a core
    assert len(four.plan.actors) == len(one.plan.actors)
    full = [c for c in four.memory.cores if c.capacity_bytes == 16 * MESH.sram_bytes]
    assert full and all(c.peak_bytes == one.memory.peak_bytes for c in full[:1])
    assert not one.memory.fits and four.memory.fits  # 2.09 MiB per rank: 1 MiB vs 16 MiB
    t1 = simulate(one.plan, one.wafer).step_time_ps
    t4 = simulate(four.plan, four.wafer).step_time_ps
    assert t4 < t1


def test_a_plan_is_refused_on_another_view(gpt2_tiny: Graph) -> None:
    r = build_parallel_plan(gpt2_tiny, MESH, "dp=1,tp=2,pp=2,microbatches=2,span=4")
    with pytest.raises(PlanError, match=r"made for wafer view .mesh16x16@4x.*--wafer mesh16x16@4x"):
        simulate(r.plan, MESH)


def test_crossbars_have_no_blocks() -> None:
    xbar = dataclasses.replace(get_wafer("mesh4x4"), topology=get_wafer("amcoda").topology)
    assert choose_span(xbar, parse_plan("dp=2")).span == 1
    with pytest.raises(PlanError, match="crossbar"):
        choose_span(xbar, parse_plan("dp=2,span=2"))


def test_the_simulator_frees_recomputed_activations(gpt2_tiny: Graph) -> None:
    plan = "dp=1,tp=2,pp=2,microbatches=2,span=4"
    keep = build_parallel_plan(gpt2_tiny, MESH, plan, check_memory=False)
    redo = build_parallel_plan(gpt2_tiny, MESH, plan + ",recompute=true", check_memory=False)
    assert any(not m.holds for m in redo.plan.messages)
    assert all(m.holds for m in keep.plan.messages)
    sim_keep = max(c.peak_mem_bytes for c in simulate(keep.plan, keep.wafer).cores)
    sim_redo = max(c.peak_mem_bytes for c in simulate(redo.plan, redo.wafer).cores)
    assert sim_redo < sim_keep
    # both memory models agree that recompute lowers the peak
    assert redo.memory.peak_bytes < keep.memory.peak_bytes


def test_a_view_is_named_and_found_by_its_name() -> None:
    view = get_wafer("mesh16x16@4x")
    assert view == MESH.coarsen(4) and view.name == "mesh16x16@4x"
    assert get_wafer("mesh16x16@2x").coarsen(2) == view  # views of views name the product


def test_the_default_layout_skips_short_nodes_while_the_rest_is_enough() -> None:
    from waferflow.parallel.layout import strip_layout

    view = MESH.coarsen(3)  # 6x6 nodes; the last row and column hold 3 or 1 of 9 cores
    weak = view.nodes_below(1.0)
    assert len(weak) == 11
    used = {view.coord(c) for c in strip_layout(view, 2, 8, 4).all_cores()}
    assert len(used) == 16 and not used & weak
    # 30 ranks need more than the 25 full nodes: then every alive node is used
    assert len(strip_layout(view, 5, 6, 2).all_cores()) == 30


def test_the_default_layout_walks_strong_nodes_rather_than_strip_onto_short_ones() -> None:
    from waferflow.parallel.layout import strip_layout

    view = MESH.coarsen(3)  # 5x5 full nodes, a short last row and column
    # 6-wide strips of 12 ranks fit the 6x6 view only through the short nodes
    layout = strip_layout(view, 2, 12, 6)
    assert layout.kind == "snake"
    assert not {view.coord(c) for c in layout.all_cores()} & view.nodes_below(1.0)


def test_auto_keeps_blocks_inside_dies_whose_links_differ() -> None:
    from waferflow.ir.target.parts import LinkSpec

    diced = dataclasses.replace(MESH, die_rows=4, die_cols=4, d2d_link=LinkSpec(25e9, 5e-9))
    plan = parse_plan("dp=2,tp=2,pp=2")  # 8 ranks: 5x5 blocks would leave 9 >= 8.8
    assert choose_span(MESH, plan).span == 5
    choice = choose_span(diced, plan)  # 5 cuts the 4x4-core dies; 4 (16 blocks) does not
    assert choice.span == 4 and choice.view.die_rows == 4 and choice.view.d2d_link is not None
    same = dataclasses.replace(diced, d2d_link=MESH.link)  # links alike: dies may be cut
    assert choose_span(same, plan).span == 5
