"""Dimension-order routes, torus wrap, crossbar, detours around faults."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waferflow.backend_sim import simulate
from waferflow.errors import PlanError
from waferflow.ir.target.wafer import Topology
from waferflow.mapper.routing import route, xy_route, yx_route

from ._helpers import one_message_plan, wafer


def test_xy_and_yx_on_a_mesh() -> None:
    w = wafer(4, 4)
    assert xy_route(w, (0, 0), (2, 3)) == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 3), (2, 3)]
    assert yx_route(w, (0, 0), (2, 3)) == [(0, 0), (1, 0), (2, 0), (2, 1), (2, 2), (2, 3)]
    assert xy_route(w, (3, 3), (1, 2)) == [(3, 3), (3, 2), (2, 2), (1, 2)]
    assert route(w, (1, 1), (1, 1)) == [(1, 1)]
    assert route(w, (0, 0), (2, 3), order="yx") == yx_route(w, (0, 0), (2, 3))


def test_torus_takes_the_shorter_way() -> None:
    w = wafer(5, 6, topology=Topology.TORUS)
    assert xy_route(w, (0, 0), (0, 5)) == [(0, 0), (0, 5)]
    assert xy_route(w, (0, 1), (4, 1)) == [(0, 1), (4, 1)]
    assert xy_route(w, (0, 0), (0, 3)) == [(0, 0), (0, 1), (0, 2), (0, 3)]  # tie: positive
    assert xy_route(w, (1, 4), (3, 0)) == [(1, 4), (1, 5), (1, 0), (2, 0), (3, 0)]


def test_crossbar_routes_are_direct() -> None:
    w = wafer(2, 3, topology=Topology.CROSSBAR)
    assert route(w, (0, 0), (1, 2)) == [(0, 0), (1, 2)]


def test_detour_around_a_dead_core_is_shortest_and_deterministic() -> None:
    w = wafer(3, 4, dead_cores=[(0, 2)])
    path = route(w, (0, 0), (0, 3))
    assert path == route(w, (0, 0), (0, 3))
    assert len(path) - 1 == 5  # 3 hops blocked; the way round row 1 takes 5
    assert (0, 2) not in path
    assert path[0] == (0, 0) and path[-1] == (0, 3)


def test_detour_around_a_dead_link() -> None:
    w = wafer(2, 3, dead_links=[((0, 1), (0, 2))])
    path = route(w, (0, 0), (0, 2))
    assert path == [(0, 0), (0, 1), (1, 1), (1, 2), (0, 2)]
    pairs = set(itertools.pairwise(path))
    assert ((0, 1), (0, 2)) not in pairs and ((0, 2), (0, 1)) not in pairs


def test_no_path_and_dead_endpoint_are_plan_errors() -> None:
    cut = wafer(1, 4, dead_links=[((0, 1), (0, 2))])
    with pytest.raises(PlanError, match=r"no route \(0, 0\) -> \(0, 3\)"):
        route(cut, (0, 0), (0, 3))
    dead = wafer(2, 2, dead_cores=[(1, 1)])
    with pytest.raises(PlanError, match=r"destination core \(1, 1\) is dead"):
        route(dead, (0, 0), (1, 1))
    with pytest.raises(PlanError, match="outside"):
        route(dead, (0, 0), (5, 1))
    with pytest.raises(PlanError, match="route order"):
        route(dead, (0, 0), (0, 1), order="zx")


@st.composite
def faulty(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    rows, cols = draw(st.integers(1, 5)), draw(st.integers(2, 5))
    topo = draw(st.sampled_from([Topology.MESH, Topology.TORUS]))
    coords = [(r, c) for r in range(rows) for c in range(cols)]
    base = wafer(rows, cols, topology=topo)
    candidates = sorted(
        {(min(a, b), max(a, b)) for a in coords for b in coords if base.is_adjacent(a, b)}
    )
    dead_links = (
        draw(st.lists(st.sampled_from(candidates), max_size=6, unique=True)) if candidates else []
    )
    dead_cores = draw(
        st.lists(st.sampled_from(coords), max_size=min(3, len(coords) - 2), unique=True)
    )
    w = wafer(rows, cols, topology=topo, dead_links=dead_links, dead_cores=dead_cores)
    alive = [c for c in coords if c not in w.dead_cores]
    return w, draw(st.sampled_from(alive)), draw(st.sampled_from(alive))


@settings(max_examples=150, deadline=None)
@given(faulty())
def test_routes_never_use_dead_links_or_cores(case) -> None:  # type: ignore[no-untyped-def]
    w, src, dst = case
    try:
        path = route(w, src, dst)
    except PlanError as e:
        assert str(src) in str(e) and str(dst) in str(e)
        return
    assert path[0] == src and path[-1] == dst
    assert not any(c in w.dead_cores for c in path)
    for a, b in itertools.pairwise(path):
        assert w.has_link(a, b)
    dor = xy_route(w, src, dst)
    assert len(path) >= len(dor)
    healthy = all(c not in w.dead_cores for c in dor) and all(
        w.has_link(a, b) for a, b in itertools.pairwise(dor)
    )
    if healthy:
        assert path == dor
    # and the simulator never puts bytes on a dead link
    cols = w.cols
    plan = one_message_plan(src[0] * cols + src[1], dst[0] * cols + dst[1], 1000)
    for lk in simulate(plan, w).links:
        assert w.has_link(lk.src, lk.dst)


def test_explicit_route_over_a_dead_link_is_a_clear_error() -> None:
    w = wafer(2, 4, dead_links=[((0, 1), (0, 2))])
    plan = one_message_plan(0, 3, 100, route=(0, 1, 2, 3))
    with pytest.raises(PlanError, match=r"messages\[0\]\.route uses dead link \(0, 1\)-\(0, 2\)"):
        simulate(plan, w)
    # the default route detours instead
    res = simulate(one_message_plan(0, 3, 100), w)
    assert res.msg_hops[0] == 5


def test_explicit_route_is_followed_and_checked() -> None:
    w = wafer(2, 4)
    # go down, along row 1, and back up: 5 hops instead of 3
    res = simulate(one_message_plan(0, 3, 100, route=(0, 4, 5, 6, 7, 3)), w)
    assert res.msg_hops[0] == 5
    assert next((lk.src, lk.dst) for lk in res.links) == ((0, 0), (1, 0))
    with pytest.raises(PlanError, match="share no link"):
        simulate(one_message_plan(0, 3, 100, route=(0, 2, 3)), w)
    with pytest.raises(PlanError, match="dead core"):
        simulate(
            one_message_plan(0, 3, 100, route=(0, 4, 5, 6, 7, 3)), wafer(2, 4, dead_cores=[(1, 2)])
        )
