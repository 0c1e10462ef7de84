"""place_parallel / place_actors / the place pass on tiny models."""

from __future__ import annotations

import dataclasses

import pytest

from waferflow.errors import PassError, PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.plan import plan_to_json, verify_plan
from waferflow.ir.target import get_wafer
from waferflow.mapper import bridge
from waferflow.mapper.placement import Status
from waferflow.passes import PassContext, PassManager, parse_pipeline
from waferflow.passes.lower_plan import lower_to_plan
from waferflow.passes.place import (
    PlacedResult,
    PlaceOptions,
    place_actors,
    place_compare,
    place_parallel,
)
from waferflow.passes.route import RoutedPlan, routes_touch_dead

FAST = PlaceOptions(time_limit=1.0)
PIPE = "dp=1,tp=4,pp=4,microbatches=4,span=1"  # one rank per core


def _baselines(r: PlacedResult) -> list:
    return [c for c in r.candidates if not c.method.startswith("cp-sat")]


def test_small_pipeline_placement_beats_or_equals_the_baselines(gpt2_tiny: Graph) -> None:
    w = get_wafer("mesh16x16")
    r = place_parallel(gpt2_tiny, w, PIPE, options=FAST)
    methods = [c.method for c in r.candidates]
    assert methods[0] == "strips (default)"
    assert {"cp-sat floorplan", "cp-sat + rank LNS", "snake", "work strips"} <= set(methods)
    bases = _baselines(r)
    best_cp = min(c.rank_cost for c in r.candidates if c.method.startswith("cp-sat"))
    assert best_cp <= min(c.rank_cost for c in bases)
    # the kept plan is the fastest that fits: never slower than a baseline
    assert r.kept.fits
    assert r.kept.step_time <= min(c.step_time for c in bases if c.fits)
    # on this pipeline the floorplan puts stages next to each other: far less traffic
    assert r.candidate("cp-sat floorplan").inter_stage_byte_hops < bases[0].inter_stage_byte_hops
    # the floorplan's bound holds for every candidate that is a floorplan
    assert r.floorplan_bound is not None
    for c in r.candidates:
        if c.floorplan is not None:
            assert c.floorplan >= r.floorplan_bound * (1 - 1e-9)
    assert r.parallel is not None and r.parallel.layout == r.layout
    assert {a.core for a in r.plan.actors} == set(bridge.flat_cores(r.layout.cores))
    text = str(r)
    assert "cp-sat floorplan" in text and "floorplan bound" in text and "solver (floorplan)" in text
    assert "view: floorplan (a rectangle per stage): CP-SAT on mesh16x16" in text
    assert "on mesh16x16 (16x16 cores)" in text  # the title: the view in full


def test_same_seed_gives_byte_identical_plans(gpt2_tiny: Graph) -> None:
    w = get_wafer("mesh16x16")
    a = place_parallel(gpt2_tiny, w, PIPE, options=FAST)
    b = place_parallel(gpt2_tiny, w, PIPE, options=FAST)
    assert plan_to_json(a.plan) == plan_to_json(b.plan)
    assert [r.to_json() for _, r in a.reports] == [r.to_json() for _, r in b.reports]


def test_one_percent_dead_cores_never_used_or_crossed(gpt2_tiny: Graph) -> None:
    w = get_wafer("mesh16x16").with_dead_cores(0.01, seed=7)
    assert len(w.dead_cores) == 3
    r = place_parallel(gpt2_tiny, w, "dp=2,tp=2,pp=2,microbatches=2,span=1", options=FAST)
    verify_plan(r.plan, w)  # no actor on a dead core
    dead = {w.core_id(c) for c in w.dead_cores}
    assert not dead & {a.core for a in r.plan.actors}
    assert all(m.route is not None for m in r.plan.messages)
    assert routes_touch_dead(r.plan, w) == []
    for c in r.candidates:
        assert c.step_time > 0


def test_time_limit_returns_a_feasible_placement_with_its_gap(gpt2_tiny: Graph) -> None:
    w = get_wafer("mesh16x16")
    r = place_parallel(gpt2_tiny, w, PIPE, options=PlaceOptions(time_limit=0.05))
    for _, rep in r.reports:
        assert rep.status in (Status.OPTIMAL, Status.FEASIBLE)
        assert 0 <= rep.gap < 1 and rep.best_bound <= rep.objective
    assert r.kept.step_time > 0


@pytest.mark.parametrize("limit", [0, -1.0])
def test_a_time_limit_that_is_not_positive_is_an_error(limit: float) -> None:
    with pytest.raises(PlanError, match="time limit must be positive"):
        PlaceOptions(time_limit=limit)


def test_naive_plans_are_placed_actor_by_actor(gpt2_tiny: Graph) -> None:
    w = get_wafer("mesh4x4")
    naive = lower_to_plan(gpt2_tiny, w)
    r = place_actors(naive, w, options=FAST)
    assert r.kind == "actors"
    assert r.reports[0][0] == "actors"
    cp = r.candidate("cp-sat assignment")
    bases = [c for c in r.candidates if c.method in ("row-major", "snake", "greedy")]
    assert cp.rank_cost <= min(c.rank_cost for c in bases)
    assert r.kept.step_time <= min(c.step_time for c in r.candidates)
    verify_plan(r.plan, w)
    assert bridge.order_consistent(r.plan)
    per_core = max(len(ids) for _, ids in r.plan.order)
    assert per_core <= -(-len(naive.actors) // 16)
    assert f"at most {per_core}" in str(r) or per_core < -(-len(naive.actors) // 16)


def test_the_place_and_route_passes_in_a_pipeline(gpt2_tiny: Graph) -> None:
    from waferflow.parallel.driver import clone_graph

    w = get_wafer("mesh16x16")
    ctx = PassContext(wafer=w)
    pipe = parse_pipeline(
        f'parallelize{{plan="{PIPE}"}},insert-collectives,place{{time=1.0}},plan-memory,'
        "route{order=balance}"
    )
    PassManager(pipe).run(clone_graph(gpt2_tiny), ctx)
    placed = ctx.results["place"]
    assert isinstance(placed, PlacedResult)
    routed = ctx.results["route"]
    assert isinstance(routed, RoutedPlan)
    assert routed.report.order == "balance"
    assert len(routed.plan.actors) == len(placed.plan.actors)
    assert ctx.results["plan-memory"].fits


def test_bad_pass_options_name_the_option() -> None:
    with pytest.raises(PassError, match="dead-cores"):
        parse_pipeline("place{dead-cores=sometimes}")
    with pytest.raises(PassError, match="time limit must be positive"):
        parse_pipeline("place{time=0.0}")


def test_crossbars_keep_the_default_layout(gpt2_tiny: Graph) -> None:
    w = dataclasses.replace(get_wafer("mesh4x4"), topology=get_wafer("amcoda").topology)
    assert w.topology.value == "crossbar"
    r = place_parallel(gpt2_tiny, w, "dp=2", options=FAST)
    assert [c.method for c in r.candidates] == ["strips (default)"]
    assert r.reports == ()
    assert "is a crossbar" in str(r)
    verify_plan(r.plan, w)


def test_place_compare_prints_cp_sat_against_baselines_and_bounds(gpt2_tiny: Graph) -> None:
    text = place_compare(gpt2_tiny, "mesh16x16", PIPE, FAST)
    for needle in ("cp-sat floorplan", "strips (default)", "snake", "work strips",
                   "floorplan bound", "ranks bound", "kept:"):  # fmt: skip
        assert needle in text


def test_the_kept_plan_is_what_a_fresh_build_with_its_layout_gives(gpt2_tiny: Graph) -> None:
    from waferflow.parallel import build_parallel_plan

    w = get_wafer("mesh16x16")
    r = place_parallel(gpt2_tiny, w, PIPE, options=dataclasses.replace(FAST, route="none"))
    assert r.layout is not None
    fresh = build_parallel_plan(gpt2_tiny, w, PIPE, layout=r.layout, check_memory=False)
    assert plan_to_json(fresh.plan) == plan_to_json(r.plan)


def test_scattered_dead_cores_as_idle_cells_of_the_floorplan(gpt2_tiny: Graph) -> None:
    from waferflow.mapper.placement import DeadCores

    w = get_wafer("mesh16x16").with_dead_cores(0.05, seed=1)  # 13 dead: idle by default
    r = place_parallel(gpt2_tiny, w, PIPE, options=FAST)
    fp = dict(r.reports)["floorplan"]
    assert "dead:idle-count" in fp.techniques
    verify_plan(r.plan, w)
    assert routes_touch_dead(r.plan, w) == []
    obstacle = dataclasses.replace(FAST, dead_cores=DeadCores.OBSTACLE)
    r2 = place_parallel(gpt2_tiny, w, PIPE, options=obstacle)
    verify_plan(r2.plan, w)


def test_dead_cores_that_cut_the_mesh_apart_are_reported_with_the_islands(
    gpt2_tiny: Graph,
) -> None:
    w = get_wafer("mesh4x4")
    w = dataclasses.replace(w, dead_cores=frozenset((r, 1) for r in range(4)))
    islands = r"island 1: 8 cores \(rows 0-3, cols 2-3\); island 2: 4 cores \(rows 0-3, cols 0-0\)"
    with pytest.raises(PlanError, match=islands):
        place_parallel(gpt2_tiny, w, "dp=2", options=FAST)
    with pytest.raises(PlanError, match="2 islands"):
        place_actors(lower_to_plan(gpt2_tiny, w), w, options=FAST)


def test_floorplans_leave_the_weak_nodes_of_a_ragged_coarse_view_alone(gpt2_tiny: Graph) -> None:
    w = get_wafer("mesh16x16").coarsen(3)  # 6 x 6 nodes: the last row and column hold 1/3
    r = place_parallel(gpt2_tiny, w, PIPE, options=FAST)
    assert "partial nodes the floorplan leaves out" in r.candidate("snake").note
    weak = {w.core_id(c) for c, _ in w.partial_cores}
    for c in r.candidates:
        if c.method.startswith("cp-sat floorplan"):
            assert "partial nodes" not in c.note
    assert not weak & {a.core for a in r.plan.actors}
    assert "mesh16x16@3x (6x6 nodes" in str(r)


def test_the_summary_line_names_the_kept_placement(gpt2_tiny: Graph) -> None:
    r = place_parallel(gpt2_tiny, get_wafer("mesh16x16"), PIPE, options=FAST)
    line = r.summary()
    assert line.startswith(f"placed: kept {r.chosen}, step ")
    assert "the least baseline's" in line and "floorplan" in line


def test_export_writes_the_first_cp_sat_model(gpt2_tiny: Graph, tmp_path) -> None:
    path = tmp_path / "floorplan.pb.txt"
    opts = dataclasses.replace(FAST, export_model=path, refine=False)
    place_parallel(gpt2_tiny, get_wafer("mesh16x16"), PIPE, options=opts)
    text = path.read_text()
    assert "no_overlap_2d" in text or "variables" in text


def test_a_layout_offered_twice_is_timed_once_with_the_same_figures(gpt2_tiny: Graph) -> None:
    r = place_parallel(gpt2_tiny, get_wafer("mesh16x16"), "dp=2,tp=2,span=1", options=FAST)
    same = [c for c in r.candidates if "(same layout)" in c.note]
    assert same  # one stage: the CP-SAT floorplans and the strips land on the same cores
    by_method = {c.method: c for c in r.candidates}
    for c in same:
        first = by_method[c.note.split("= ", 1)[1].removesuffix(" (same layout)")]
        assert "(same layout)" not in first.note
        assert (c.byte_hops, c.step_time, c.fits) == (first.byte_hops, first.step_time, first.fits)
