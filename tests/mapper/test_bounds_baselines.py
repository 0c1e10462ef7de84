"""Baselines, bounds, local search and the comparison table, against hand-computed values."""

from __future__ import annotations

import pytest

from tests.mapper.helpers import FAST, SRAM, chain_assign, chain_floorplan
from waferflow.mapper.bounds import largest_alive_rectangle, rectangle_areas
from waferflow.mapper.local import swap_descent
from waferflow.mapper.placement import (
    AssignProblem,
    FloorplanProblem,
    Flow,
    Grid,
    Group,
    ObjectiveWeights,
    Rect,
    compare,
    equal_strips,
    evaluate_floorplan,
    greedy,
    pair_lower_bound,
    row_major,
    slowest_time_bound,
    snake,
    star_lower_bound,
    work_strips,
)
from waferflow.mapper.shelves import shelf_layouts


def test_row_major_and_snake_orders() -> None:
    p = chain_assign(2, 3, flows=(1.0,) * 4)
    assert row_major(p).core_of_actor == (0, 1, 2, 3, 4)
    assert snake(p).core_of_actor == (0, 1, 2, 5, 4)
    assert row_major(p).cost == 1 + 1 + 3 + 1  # 2 -> 3 wraps to the next row
    assert snake(p).cost == 4.0


def test_baselines_skip_dead_cores() -> None:
    p = chain_assign(2, 3, flows=(1.0, 1.0), dead={(0, 1)})
    assert row_major(p).core_of_actor == (0, 2, 3)
    assert snake(p).core_of_actor == (0, 2, 5)


def test_greedy_keeps_a_chain_together() -> None:
    p = chain_assign(3, 3, flows=(5.0, 4.0, 3.0, 2.0))
    assert greedy(p).cost == 14.0  # every flow one hop


def test_star_and_pair_bounds_by_hand() -> None:
    # a hub with six unit flows: 4 partners fit at one hop, 2 need two: (8 + 6) / 2 = 7
    flows = tuple(Flow(0, i, 1.0) for i in range(1, 7))
    p = AssignProblem(Grid(3, 3), 7, (1,) * 7, flows, SRAM)
    assert pair_lower_bound(p) == 6.0
    assert star_lower_bound(p) == 7.0
    assert greedy(p).cost == 8.0  # and 8 is optimal: two partners sit on corners


def test_pair_bound_lets_sharable_actors_meet() -> None:
    p = AssignProblem(Grid(1, 2), 2, (1, 1), (Flow(0, 1, 9.0),), SRAM, max_actors_per_core=2)
    assert pair_lower_bound(p) == 0.0
    q = AssignProblem(Grid(1, 2), 2, (600, 600), (Flow(0, 1, 9.0),), 1000, max_actors_per_core=2)
    assert pair_lower_bound(q) == 9.0  # together they would overflow a core


def test_slowest_time_bound_uses_whole_rectangles() -> None:
    # 2x2 grid, work of 3 and 1 core-seconds: at 1 s the big group needs 3 cores, and no
    # rectangle on a 2x2 grid has 3 cores; at 1.5 s it needs 2 and all fits.
    groups = (Group("a", 3e9, 1), Group("b", 1e9, 1))
    p = FloorplanProblem(Grid(2, 2), groups, (), 1e9, 1000, ObjectiveWeights(1, 0, 0))
    assert slowest_time_bound(p) == pytest.approx(1.5, rel=1e-6)
    assert rectangle_areas(2, 2)[3] == 4


def test_largest_alive_rectangle() -> None:
    assert largest_alive_rectangle(Grid(3, 4, frozenset({(1, 1)}))) == 6  # rows 0..2 x cols 2..3
    assert largest_alive_rectangle(Grid(2, 2)) == 4


def test_strip_baselines() -> None:
    p = chain_floorplan(2, 6, works=(1e9, 2e9, 3e9))
    assert [r.width for r in equal_strips(p).rects] == [2, 2, 2]
    assert [r.width for r in work_strips(p).rects] == [1, 2, 3]
    assert work_strips(p).cost.slowest_time == pytest.approx(0.5)


def test_shelves_find_a_balanced_layout_strips_cannot() -> None:
    # 4 groups of equal work on a 4x2 grid: strips need 4 columns, shelves stack 2 x 2
    p = chain_floorplan(4, 2, works=(2e9,) * 4, flows=(1.0,) * 3)
    layouts = shelf_layouts(p)
    assert layouts
    best = evaluate_floorplan(p, layouts[0])
    assert best.feasible and best.slowest_time == pytest.approx(1.0)


def test_swap_descent_never_worsens_and_keeps_rules() -> None:
    p = chain_assign(3, 3, flows=(5.0, 4.0, 3.0, 2.0, 1.0))
    start = row_major(p).core_of_actor
    out = swap_descent(p, start)
    from waferflow.mapper.placement import assignment_cost, assignment_violations

    assert assignment_cost(p, out) <= assignment_cost(p, start)
    assert not assignment_violations(p, out)


def test_compare_table_for_floorplans() -> None:
    p = chain_floorplan(2, 6, works=(1e9, 2e9, 3e9), flows=(1e8, 1e8))
    table = compare(p, FAST)
    assert [r.method for r in table.rows] == ["cp-sat", "equal strips", "work strips"]
    assert table.row("cp-sat").ratio == 1.0
    assert table.row("equal strips").ratio >= 1.0
    assert table.bound <= table.solver.objective
    text = str(table)
    assert "lower bound" in text and "vs CP-SAT" in text and "gap to bound" in text


def test_compare_marks_baselines_that_do_not_apply() -> None:
    p = chain_floorplan(4, 2, works=(2e9,) * 4, flows=(1.0,) * 3)
    table = compare(p, FAST)
    assert table.row("equal strips").objective is None
    assert "not applicable" in table.row("equal strips").note
    assert table.row("cp-sat").objective == pytest.approx(1.0 + 3e-9 * 1.5, rel=1e-3)


def test_compare_table_for_assignments() -> None:
    table = compare(chain_assign(2, 3, flows=(1.0,) * 4), FAST)
    assert [r.method for r in table.rows] == ["cp-sat", "row-major", "snake", "greedy"]
    assert table.row("row-major").ratio == pytest.approx(6.0 / 4.0)
    assert table.row("cp-sat").gap_to_bound == 0.0


def test_rect_geometry() -> None:
    r = Rect(1, 2, 3, 4)
    assert r.area == 12 and r.centre2 == (5, 8) and r.centre_core == (2, 3)
    assert r.transposed() == Rect(2, 1, 4, 3)
    assert r.overlaps(Rect(3, 5, 1, 1)) and not r.overlaps(Rect(4, 2, 1, 1))
