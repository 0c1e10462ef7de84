"""route_plan: explicit routes, detours around dead cores, balanced XY/YX, link loads."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waferflow.backend_sim import simulate
from waferflow.errors import PlanError
from waferflow.ir.plan import Actor, Message, Plan, verify_plan
from waferflow.ir.target import get_wafer
from waferflow.mapper.placement import Grid
from waferflow.passes.route import route_plan, routes_touch_dead


def _plan(cores: list[int], pairs: list[tuple[int, int, int]], wafer_name: str) -> Plan:
    actors = [Actor(i, f"a{i}", c, flops=1000) for i, c in enumerate(cores)]
    msgs = [Message(k, a, b, n) for k, (a, b, n) in enumerate(pairs)]
    return Plan.build("t", wafer_name, actors, msgs)


def _adjacent(cols: int, a: int, b: int) -> bool:
    (ra, ca), (rb, cb) = divmod(a, cols), divmod(b, cols)
    return abs(ra - rb) + abs(ca - cb) == 1


def test_xy_and_yx_routes_are_dimension_order() -> None:
    w = get_wafer("mesh4x4")
    plan = _plan([0, 15], [(0, 1, 64)], w.name)  # (0,0) -> (3,3)
    xy, rep = route_plan(plan, w, order="xy")
    assert xy.messages[0].route == (0, 1, 2, 3, 7, 11, 15)
    yx, _ = route_plan(plan, w, order="yx")
    assert yx.messages[0].route == (0, 4, 8, 12, 13, 14, 15)
    assert rep.byte_hops == 64 * 6
    assert len(rep.links) == 6 and rep.max_bytes == 64
    verify_plan(xy, w)


@pytest.mark.parametrize("order", ["xy", "balance"])
def test_routing_keeps_everything_but_the_route(order: str) -> None:
    """A routed plan is the same program: broadcast groups, last readers and the
    host's transfers carry over (they were dropped once, which changed what a saved
    plan simulated to)."""
    from waferflow.ir.plan import HostTransfer

    w = get_wafer("mesh4x4")
    actors = [Actor(i, f"a{i}", c, flops=1000) for i, c in enumerate([0, 5, 10, 10])]
    msgs = [Message(0, 0, 1, 64, bcast=0), Message(1, 0, 2, 64, bcast=0, last_use=3),
            Message(2, 1, 3, 8, holds=False)]  # fmt: skip
    host = (HostTransfer(0, 128, "x"),)
    plan = dataclasses.replace(Plan.build("t", w.name, actors, msgs), host=host)
    routed, _ = route_plan(plan, w, order=order)
    assert all(m.route is not None for m in routed.messages)
    unrouted = tuple(dataclasses.replace(m, route=None) for m in routed.messages)
    assert unrouted == plan.messages
    assert routed.host == host and routed.actors == plan.actors and routed.order == plan.order


def test_local_message_gets_a_one_core_route_and_no_link() -> None:
    w = get_wafer("mesh4x4")
    plan = _plan([5, 5], [(0, 1, 100)], w.name)
    routed, rep = route_plan(plan, w, order="balance")
    assert routed.messages[0].route == (5,)
    assert rep.links == () and rep.byte_hops == 0
    assert simulate(routed, w).step_time == simulate(plan, w).step_time


def test_explicit_xy_routes_simulate_like_the_default() -> None:
    w = get_wafer("mesh4x4")
    plan = _plan([0, 15, 6, 9], [(0, 1, 4096), (2, 3, 2048), (0, 3, 1024)], w.name)
    routed, _ = route_plan(plan, w, order="xy")
    assert simulate(routed, w).step_time_ps == simulate(plan, w).step_time_ps


def test_balance_halves_the_busiest_link_where_xy_stacks_messages() -> None:
    # two equal messages (0,0) -> (1,1): XY sends both over (0,0)->(0,1); balance
    # sends one each way, so the busiest link carries one message, not two
    w = get_wafer("mesh4x4")
    plan = _plan([0, 5, 0, 5], [(0, 1, 1000), (2, 3, 1000)], w.name)
    _, xy = route_plan(plan, w, order="xy")
    _, bal = route_plan(plan, w, order="balance")
    assert xy.max_bytes == 2000
    assert bal.max_bytes == 1000
    assert bal.max_busy_s < xy.max_busy_s
    assert bal.xy_choices == 1


def test_unknown_order_is_an_error() -> None:
    w = get_wafer("mesh4x4")
    with pytest.raises(PlanError, match="unknown route order 'zigzag'"):
        route_plan(_plan([0, 1], [(0, 1, 1)], w.name), w, order="zigzag")


def _connected_dead(rows: int, cols: int, cells: list[int]) -> frozenset[tuple[int, int]]:
    """Drop cells from ``cells`` until the alive cores stay connected."""
    dead: set[tuple[int, int]] = set()
    for c in cells:
        trial = dead | {divmod(c, cols)}
        if len(trial) < rows * cols - 1 and len(Grid(rows, cols, frozenset(trial)).islands()) == 1:
            dead = trial
    return frozenset(dead)


@settings(max_examples=40, deadline=None)
@given(
    dead_cells=st.lists(st.integers(0, 35), max_size=8),
    pairs=st.lists(st.tuples(st.integers(0, 35), st.integers(0, 35)), min_size=1, max_size=12),
    order=st.sampled_from(["xy", "yx", "balance"]),
)
def test_routes_are_connected_and_avoid_dead_cores(
    dead_cells: list[int], pairs: list[tuple[int, int]], order: str
) -> None:
    base = get_wafer("mesh4x4")
    w = dataclasses.replace(base, name="mesh6x6", rows=6, cols=6)
    w = dataclasses.replace(w, dead_cores=_connected_dead(6, 6, dead_cells))
    alive = [c for c in range(36) if divmod(c, 6) not in w.dead_cores]
    cores = [alive[a % len(alive)] for p in pairs for a in p]
    msgs = [(2 * k, 2 * k + 1, 100 + k) for k in range(len(pairs))]
    routed, rep = route_plan(_plan(cores, msgs, w.name), w, order=order)
    verify_plan(routed, w)
    assert routes_touch_dead(routed, w) == []
    for m in routed.messages:
        path = m.route
        assert path is not None
        assert path[0] == routed.actors[m.src_actor].core
        assert path[-1] == routed.actors[m.dst_actor].core
        assert all(_adjacent(6, a, b) for a, b in itertools.pairwise(path))
    if order == "balance":
        _, xy = route_plan(_plan(cores, msgs, w.name), w, order="xy")
        assert rep.max_busy_s <= xy.max_busy_s * (1 + 1e-12)
    # load is sorted busiest first and adds up to the byte-hops
    assert [x.busy_s for x in rep.links] == sorted((x.busy_s for x in rep.links), reverse=True)
    assert sum(x.bytes for x in rep.links) == rep.byte_hops
