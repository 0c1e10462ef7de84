"""Floorplanning: hand-computed optima, limits, determinism, dead cores."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.mapper.helpers import FAST, chain_floorplan
from waferflow.errors import PlanError
from waferflow.mapper.placement import (
    DeadCores,
    FloorplanProblem,
    Flow,
    Formulation,
    Grid,
    Group,
    ObjectiveWeights,
    Rect,
    SolveOptions,
    Status,
    evaluate_floorplan,
    floorplan_lower_bound,
    solve_floorplan,
)


def test_chain_on_1x3_is_in_order() -> None:
    # one core each; slowest 1 s; flows 1e8 and 2e8 bytes over one hop at 1e-9 per byte-hop
    res = solve_floorplan(chain_floorplan(1, 3), FAST)
    assert res.objective == pytest.approx(1.0 + 0.1 + 0.2)
    assert res.rects[1] == Rect(0, 1, 1, 1)  # the middle stage in the middle
    assert {res.rects[0].col, res.rects[2].col} == {0, 2}
    assert res.report.status is Status.OPTIMAL
    assert res.report.gap <= FAST.gap_limit


def test_chain_on_2x2_neighbours_touch() -> None:
    res = solve_floorplan(chain_floorplan(2, 2), FAST)
    assert res.objective == pytest.approx(1.3)
    assert res.cost.traffic == pytest.approx(3e8)  # both flows one hop
    assert res.report.status is Status.OPTIMAL


def test_heavy_middle_stage_takes_two_cores() -> None:
    # g1 has twice the work: on two cores the slowest time halves (2 s -> 1 s) while its
    # centre moves half a hop further from both partners: 1 + 1.5 x 0.3 = 1.45 < 2.3
    res = solve_floorplan(chain_floorplan(2, 2, works=(1e9, 2e9, 1e9)), FAST)
    assert res.objective == pytest.approx(1.45)
    assert res.rects[1].area == 2
    assert res.cost.slowest_time == pytest.approx(1.0)
    assert res.report.status is Status.OPTIMAL


def _brute_force(problem: FloorplanProblem) -> float:
    g = problem.grid
    rects = [
        Rect(r, c, h, w)
        for r in range(g.rows)
        for c in range(g.cols)
        for h in range(1, g.rows - r + 1)
        for w in range(1, g.cols - c + 1)
    ]
    best = float("inf")
    for combo in itertools.product(rects, repeat=len(problem.groups)):
        cost = evaluate_floorplan(problem, combo)
        if cost.feasible:
            best = min(best, cost.objective)
    return best


@settings(
    max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    works=st.lists(st.sampled_from([1e9, 2e9, 3e9, 5e9]), min_size=2, max_size=3),
    traffic=st.sampled_from([0.0, 1e-9, 1e-8]),
    size=st.sampled_from([(2, 3), (3, 2), (2, 2), (3, 3)]),
    dead=st.sampled_from([frozenset(), frozenset({(0, 1)}), frozenset({(1, 1)})]),
    policy=st.sampled_from(list(DeadCores)),
)
def test_matches_brute_force_and_bound_is_valid(works, traffic, size, dead, policy) -> None:
    groups = tuple(Group(f"g{i}", w, 1) for i, w in enumerate(works))
    flows = tuple(Flow(i, i + 1, 1e8) for i in range(len(works) - 1))
    grid = Grid(*size, dead=dead if size[0] * size[1] > 4 else frozenset())
    assume(len(grid.islands()) == 1)
    p = FloorplanProblem(
        grid, groups, flows, 1e9, 1000, ObjectiveWeights(1.0, traffic, 0.0), policy
    )
    opt = _brute_force(p)
    assume(opt < float("inf"))
    res = solve_floorplan(p, FAST)
    assert res.objective == pytest.approx(opt, rel=1e-9)
    assert res.report.best_bound <= opt * (1 + 1e-9)
    assert floorplan_lower_bound(p) <= opt * (1 + 1e-9)


def test_same_seed_same_result_byte_for_byte() -> None:
    p = chain_floorplan(6, 6, works=(3e9, 1e9, 4e9, 2e9, 5e9), flows=(1e8, 3e8, 2e8, 1e8))
    opts = SolveOptions(time_limit=1.0, seed=7)
    a = solve_floorplan(p, opts)
    b = solve_floorplan(p, opts)
    assert a.rects == b.rects
    assert a.to_json() == b.to_json()
    assert json.loads(a.to_json())["rects"] == [[r.row, r.col, r.height, r.width] for r in a.rects]


def test_tiny_time_limit_still_returns_a_layout_with_its_gap() -> None:
    p = chain_floorplan(8, 8, works=(3e9, 1e9, 4e9, 2e9, 5e9, 2e9), flows=(1e8,) * 5)
    res = solve_floorplan(p, SolveOptions(time_limit=0.01))
    assert res.report.status in (Status.FEASIBLE, Status.OPTIMAL)
    assert evaluate_floorplan(p, res.rects).feasible
    assert 0.0 <= res.report.gap < 1.0
    assert res.report.best_bound <= res.objective


@pytest.mark.parametrize("limit", [0.0, -1.0])
def test_non_positive_time_limit_is_an_error(limit: float) -> None:
    with pytest.raises(PlanError, match="time limit must be positive"):
        SolveOptions(time_limit=limit)


def test_group_too_big_names_group_and_bytes() -> None:
    groups = (Group("embed", 1e9, 10), Group("huge", 1e9, 5_000_000))
    with pytest.raises(PlanError, match=r"'huge' needs .*5000000 bytes"):
        FloorplanProblem(Grid(2, 2), groups, (), 1e9, 1_000_000, ObjectiveWeights(1, 0, 0))


def test_disconnected_alive_cores_list_the_islands() -> None:
    dead = frozenset((r, 1) for r in range(3))  # a dead column cuts the grid in two
    with pytest.raises(PlanError, match=r"2 islands: \[\(0, 0\), \(1, 0\), \(2, 0\)\]; \[\(0, 2\)"):
        chain_floorplan(3, 3, dead=dead)


@settings(
    max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(dead=st.sets(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=4))
def test_dead_cores_are_never_inside_a_rectangle(dead) -> None:
    grid = Grid(5, 5, frozenset(dead))
    assume(len(grid.islands()) == 1)
    p = chain_floorplan(5, 5, works=(2e9, 1e9, 3e9), dead=dead)
    res = solve_floorplan(p, SolveOptions(time_limit=0.5))
    for r in res.rects:
        assert not set(r.cores()) & set(dead)
    assert evaluate_floorplan(p, res.rects).feasible


def test_idle_policy_lets_regions_span_dead_cores_but_not_count_them() -> None:
    # 3x3 with a dead centre; work 5 and 3 core-seconds. Spanning the dead core, a 2x3
    # block holds 5 alive cores and the last row 3: both finish in 1 s. As obstacles,
    # no dead-free rectangle beside another holds 5 cores.
    base = chain_floorplan(3, 3, works=(5e9, 3e9), flows=(1e8,), dead={(1, 1)})
    idle = FloorplanProblem(
        base.grid,
        base.groups,
        base.flows,
        base.core_flops,
        base.core_sram,
        base.weights,
        DeadCores.IDLE,
    )
    res = solve_floorplan(idle, FAST)
    assert res.cost.slowest_time == pytest.approx(1.0)
    assert sum(idle.region_cores(r) for r in res.rects) == 8
    assert any((1, 1) in r.cores() for r in res.rects)
    obstacle = solve_floorplan(base, FAST)
    assert obstacle.cost.slowest_time > 1.2


def test_strips_formulation_gives_full_height_strips_in_order() -> None:
    p = chain_floorplan(4, 8, works=(1e9, 3e9, 2e9, 2e9), flows=(1e6,) * 3)
    res = solve_floorplan(p, FAST, Formulation.STRIPS)
    assert all(r.row == 0 and r.height == 4 for r in res.rects)
    assert [r.col for r in res.rects] == sorted(r.col for r in res.rects)
    assert [r.width for r in res.rects] == [1, 3, 2, 2]  # widths in proportion to work
    assert res.cost.slowest_time == pytest.approx(0.25)


def test_die_crossings_are_counted_between_centres() -> None:
    grid = Grid(1, 4, die_cols=2)
    groups = (Group("a", 1e9, 1), Group("b", 1e9, 1))
    p = FloorplanProblem(
        grid, groups, (Flow(0, 1, 10.0),), 1e9, 1000, ObjectiveWeights(1.0, 0.0, 1.0)
    )
    cost = evaluate_floorplan(p, (Rect(0, 1, 1, 1), Rect(0, 2, 1, 1)))
    assert cost.d2d == 10.0  # cols 1 and 2 lie on different dies
    res = solve_floorplan(p, FAST)
    assert res.cost.d2d == 0.0  # the solver keeps the pair on one die


def test_export_model_writes_a_proto(tmp_path) -> None:
    path = tmp_path / "fp.pb"
    solve_floorplan(chain_floorplan(2, 3), SolveOptions(time_limit=0.5, export_model=path))
    assert path.exists() and path.stat().st_size > 0


def test_report_view_draws_groups_and_dead_cores() -> None:
    res = solve_floorplan(chain_floorplan(1, 4, dead={(0, 3)}), FAST)
    assert res.report.view.endswith("#")
    assert sorted(res.report.view[:3]) == ["0", "1", "2"]


def test_parallel_workers_are_flagged_non_deterministic() -> None:
    # CP-SAT's parallel portfolio (even interleaved) is not reproducible: say so
    p = chain_floorplan(6, 6, works=(3e9, 1e9, 4e9, 2e9), flows=(1e8, 3e8, 2e8))
    res = solve_floorplan(p, SolveOptions(time_limit=0.5, seed=5, num_workers=2))
    assert evaluate_floorplan(p, res.rects).feasible
    assert "parallel:2-workers(non-deterministic)" in res.report.techniques
    assert res.report.best_bound <= res.objective
