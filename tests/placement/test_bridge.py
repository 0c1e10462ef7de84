"""The plain-data bridge: grids from wafers, tiling, rank flows, traffic, actor problems."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waferflow.errors import PlanError
from waferflow.ir.plan import Actor, Message, Plan
from waferflow.ir.target import get_wafer
from waferflow.mapper import bridge
from waferflow.mapper.placement import Rect


def _plan(
    cores: list[int], pairs: list[tuple[int, int, int]], stages: list[int] | None = None
) -> Plan:
    stages = stages or [0] * len(cores)
    actors = [
        Actor(i, f"a{i}", c, stage=s) for i, (c, s) in enumerate(zip(cores, stages, strict=True))
    ]
    msgs = [Message(k, a, b, n) for k, (a, b, n) in enumerate(pairs)]
    return Plan.build("t", "mesh4x4", actors, msgs)


def test_plan_traffic_counts_bytes_times_hops() -> None:
    w = get_wafer("mesh4x4")
    # (0,0)->(3,3): 6 hops x 10 B; (0,0)->(0,1) across stages: 1 hop x 7 B; local: 0
    plan = _plan([0, 15, 1, 0], [(0, 1, 10), (0, 2, 7), (0, 3, 5)], stages=[0, 0, 1, 0])
    t = bridge.plan_traffic(plan, w)
    assert t.bytes == 22
    assert t.byte_hops == 6 * 10 + 7
    assert (t.inter_stage_bytes, t.inter_stage_byte_hops) == (7, 7)


def test_plan_traffic_follows_detours_around_dead_cores() -> None:
    w = dataclasses.replace(get_wafer("mesh4x4"), dead_cores=frozenset({(0, 1)}))
    plan = _plan([0, 2], [(0, 1, 3)])  # (0,0) -> (0,2) with (0,1) dead: 4 hops
    assert bridge.plan_traffic(plan, w).byte_hops == 3 * 4


def test_rank_flows_aggregate_by_rank_pair_and_stage() -> None:
    layout = ((0, 1), (4, 5))  # stage 0 on cores 0, 1; stage 1 on cores 4, 5
    plan = _plan(
        [0, 1, 4, 5, 0], [(0, 1, 10), (1, 0, 5), (0, 2, 7), (4, 3, 1)], stages=[0, 0, 1, 1, 0]
    )
    f = bridge.rank_flows(plan, layout)
    assert f.pairs == ((0, 1, 15.0), (0, 2, 7.0), (0, 3, 1.0))
    assert f.stage_flows == ((0, 1, 8.0),)
    # rank i on core cores[i]: 15 x 1 + 7 x 1 + 1 x 2
    assert bridge.layout_cost(f, (0, 1, 4, 5), 4) == 15 + 7 + 2


def test_rank_flows_refuse_a_plan_off_the_layout() -> None:
    plan = _plan([0, 9], [(0, 1, 4)])
    with pytest.raises(PlanError, match="not both cores of ranks"):
        bridge.rank_flows(plan, ((0,), (1,)))


def test_tiling_puts_tensor_parallel_groups_along_rows() -> None:
    usable = np.ones((4, 6), dtype=bool)
    # dp=2 replicas of tp=3 in a 2 x 3 rectangle at (1, 2): rank d*3+t at (1+d, 2+t)
    (cores,) = bridge.tile_stages([Rect(1, 2, 2, 3)], 2, 3, usable, None)
    assert cores == tuple((1 + d) * 6 + 2 + t for d in range(2) for t in range(3))


def test_tiling_skips_dead_cores_and_uses_distinct_cores() -> None:
    usable = np.ones((4, 4), dtype=bool)
    usable[1, 1] = False
    tiles = bridge.tile_stages([Rect(0, 0, 2, 4), Rect(2, 0, 2, 4)], 2, 3, usable, None)
    flat = [c for t in tiles for c in t]
    assert len(set(flat)) == 12
    assert 1 * 4 + 1 not in flat
    assert all(c < 8 for c in tiles[0]) and all(c >= 8 for c in tiles[1])


def test_tiling_a_rectangle_too_small_is_an_error() -> None:
    usable = np.ones((4, 4), dtype=bool)
    usable[0, 0] = False
    with pytest.raises(PlanError, match=r"stage 0: rectangle .* holds 3 usable cores for 4 ranks"):
        bridge.tile_stages([Rect(0, 0, 2, 2)], 1, 4, usable, None)


def test_tiling_follows_the_flows_to_the_stage_before() -> None:
    # stage 0 fixed in column 0; stage 1 gets column 1 of a 4-tall, 2-wide free area:
    # with its rank i talking to rank i of stage 0, the tiling lines them up row by row
    usable = np.ones((4, 3), dtype=bool)
    flows = bridge.RankFlows(2, 4, tuple((i, 4 + i, 100.0) for i in range(4)), ((0, 1, 400.0),))
    tiles = bridge.tile_stages([Rect(0, 0, 4, 1), Rect(0, 1, 4, 2)], 1, 4, usable, flows)
    assert bridge.layout_cost(flows, bridge.flat_cores(tiles), 3) == 400.0


def test_ragged_coarse_nodes_are_not_usable() -> None:
    w = get_wafer("mesh16x16").coarsen(3)  # 6 x 6 nodes; the last row / column hold 1/3
    mask = bridge.usable_mask(w)
    assert mask.shape == (6, 6)
    assert not mask[5].any() and not mask[:, 5].any() and mask[:5, :5].all()
    assert bridge.placement_grid(w).num_alive == 25
    # unless that leaves too few nodes
    assert bridge.usable_mask(w, need=30).all()
    assert "mesh16x16@3x (6x6 nodes" in bridge.describe_view(w)


def test_full_nodes_first_then_nearly_full_then_three_quarters() -> None:
    # 15 x 16 cores by 4: node rows 0-2 are full, row 3 holds 3 of its 4 fine rows (75%)
    w = dataclasses.replace(get_wafer("mesh16x16"), rows=15).coarsen(4)
    assert w.capacity((3, 0)) == 0.75
    assert bridge.usable_mask(w, need=12)[:3].all() and not bridge.usable_mask(w, need=12)[3].any()
    assert bridge.usable_mask(w, need=13).all()  # 12 full nodes are too few: take the 75% row


def test_actor_problem_shares_cores_when_actors_outnumber_them() -> None:
    w = get_wafer("mesh4x4")
    plan = _plan([*range(16), 0, 1], [(i, i + 1, 8) for i in range(17)])
    problem, note = bridge.actor_problem(plan, w, bridge.placement_grid(w))
    assert problem.n_actors == 18 and problem.max_actors_per_core == 2
    assert len(problem.flows) == 17
    assert note.startswith("memory: at most")


def test_remap_keeps_graph_order_per_core_and_drops_old_routes() -> None:
    plan = _plan([0, 1, 2], [(0, 1, 8), (1, 2, 8)])
    plan = dataclasses.replace(plan, messages=(Message(0, 0, 1, 8, (0, 1)), plan.messages[1]))
    moved = bridge.remap_plan(plan, [3, 3, 3], note="moved", source="test")
    assert moved.order == ((3, (0, 1, 2)),)
    assert all(m.route is None for m in moved.messages)
    assert bridge.order_consistent(moved)
    assert moved.notes[-1] == "moved"


def test_usable_box_and_crop_cut_a_ragged_edge() -> None:
    mask = np.ones((4, 5), dtype=bool)
    mask[:, 4] = False
    mask[1, 2] = False
    box = bridge.usable_box(mask)
    assert box == Rect(0, 0, 4, 4)
    grid = bridge.grid_from_mask(get_wafer("mesh4x4"), mask)
    sub = bridge.crop_grid(grid, box)
    assert (sub.rows, sub.cols, sub.dead) == (4, 4, frozenset({(1, 2)}))


@settings(max_examples=60, deadline=None)
@given(
    h=st.integers(1, 6),
    w=st.integers(1, 6),
    dp=st.integers(1, 4),
    tp=st.integers(1, 6),
    dead=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=6),
)
def test_tiling_uses_distinct_usable_cores_of_the_rectangle_or_says_why(
    h: int, w: int, dp: int, tp: int, dead: list[tuple[int, int]]
) -> None:
    usable = np.ones((6, 6), dtype=bool)
    for r, c in dead:
        usable[r, c] = False
    rect = Rect(0, 0, h, w)
    room = int(usable[:h, :w].sum())
    if room < dp * tp:
        with pytest.raises(PlanError, match="usable cores"):
            bridge.tile_stages([rect], dp, tp, usable, None)
        return
    (cores,) = bridge.tile_stages([rect], dp, tp, usable, None)
    assert len(set(cores)) == dp * tp
    for c in cores:
        r, col = divmod(c, 6)
        assert r < h and col < w and usable[r, col]


@pytest.mark.parametrize("a,b", [(2, 2), (2, 6), (3, 4), (4, 3), (2, 3), (3, 2), (4, 4)])
def test_blocks_with_an_even_number_of_cells_have_a_one_hop_ring_order(a: int, b: int) -> None:
    orders = bridge.block_orders(a, b)
    for order in orders:
        assert sorted(order) == [(i, j) for i in range(a) for j in range(b)]
    ring = orders[-1]
    closed = [*ring, ring[0]]
    assert all(abs(x[0] - y[0]) + abs(x[1] - y[1]) == 1 for x, y in itertools.pairwise(closed))


def test_odd_blocks_have_no_cycle_order() -> None:
    assert len(bridge.block_orders(3, 3)) == 2  # row-major and snake
    assert len(bridge.block_orders(1, 5)) == 1


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(["mesh4x4", "torus8x8", "fred", "amcoda", "dead"]),
    data=st.data(),
)
def test_traffic_from_the_run_equals_plan_traffic(name: str, data: st.DataObject) -> None:
    """Placement prices a candidate's traffic from the links its simulation routed over
    (``run_traffic``): the same figures as routing every message again."""
    from waferflow.backend_sim import run_plan
    from waferflow.passes.place_result import run_traffic

    if name == "dead":
        w = dataclasses.replace(get_wafer("mesh4x4"), dead_cores=frozenset({(1, 1), (2, 2)}))
    else:
        w = get_wafer(name)
    alive = [c for c in range(w.num_cores) if divmod(c, w.cols) not in w.dead_cores]
    n = data.draw(st.integers(2, 8))
    cores = data.draw(st.lists(st.sampled_from(alive), min_size=n, max_size=n))
    stages = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    pairs = data.draw(
        st.lists(
            st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.integers(0, 1 << 20)).filter(
                lambda t: t[0] < t[1]
            ),
            max_size=10,
        )
    )
    actors = [
        Actor(i, f"a{i}", c, flops=1000, stage=s)
        for i, (c, s) in enumerate(zip(cores, stages, strict=True))
    ]
    msgs = [Message(k, a, b, nb) for k, (a, b, nb) in enumerate(pairs)]
    plan = Plan.build("t", w.name, actors, msgs)
    assert run_traffic(run_plan(plan, w)) == bridge.plan_traffic(plan, w)
