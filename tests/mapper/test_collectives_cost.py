"""The per-step contention cost model (closed forms) and the algorithm chooser."""

from __future__ import annotations

import pytest

from waferflow.errors import PlanError
from waferflow.mapper.collectives import (
    Algorithm,
    CollectiveKind,
    Schedule,
    Transfer,
    build_schedule,
    choose_algorithm,
    estimate_time,
)

K = CollectiveKind
A = Algorithm
Coord = tuple[int, int]

B = 1e9  # bytes/s per link
ALPHA = 1e-6  # s per hop


def bandwidth(a: Coord, b: Coord) -> float:
    return B


def latency(a: Coord, b: Coord) -> float:
    return ALPHA


def xy_route(src: Coord, dst: Coord) -> list[Coord]:
    """Dimension-order route on a mesh: along the row first, then the column."""
    (r, c), (r2, c2) = src, dst
    path = [src]
    while c != c2:
        c += 1 if c2 > c else -1
        path.append((r, c))
    while r != r2:
        r += 1 if r2 > r else -1
        path.append((r, c))
    return path


def torus_row_route(n: int):
    """Shortest way round a ring of n cores in row 0 (ties go forward)."""

    def route(src: Coord, dst: Coord) -> list[Coord]:
        forward = (dst[1] - src[1]) % n
        step = 1 if forward <= n - forward else -1
        path = [src]
        while path[-1] != dst:
            path.append((0, (path[-1][1] + step) % n))
        return path

    return route


HUB = (-1, -1)


def hub_route(src: Coord, dst: Coord) -> list[Coord]:
    """Every core hangs off one switch: two hops, one uplink and one downlink per core."""
    return [src, HUB, dst]


def row(n: int) -> list[Coord]:
    return [(0, i) for i in range(n)]


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16])
def test_ring_all_reduce_on_one_hop_ring_closed_form(n: int) -> None:
    size = n * 4096
    s = build_schedule(K.ALL_REDUCE, A.RING, n, size)
    t = estimate_time(s, row(n), torus_row_route(n), bandwidth, latency)
    assert t == pytest.approx(2 * (n - 1) / n * size / B + 2 * (n - 1) * ALPHA, rel=1e-12)


@pytest.mark.parametrize("n", [3, 4, 8, 16])
def test_ring_all_reduce_on_a_mesh_row_waits_for_the_long_wrap(n: int) -> None:
    # The wrap n-1 -> 0 goes n-1 hops back over the westward links, which no forward
    # transfer uses: the bandwidth term is unchanged, the latency term is (n-1) alpha.
    size = n * 4096
    s = build_schedule(K.ALL_REDUCE, A.RING, n, size)
    t = estimate_time(s, row(n), xy_route, bandwidth, latency)
    assert t == pytest.approx(2 * (n - 1) * (size / n / B + (n - 1) * ALPHA), rel=1e-12)


@pytest.mark.parametrize("n", [3, 4, 8, 16])
def test_bidirectional_ring_halves_the_bandwidth_term_only_with_wrap_links(n: int) -> None:
    size = 2 * n * 4096
    s = build_schedule(K.ALL_REDUCE, A.BIRING, n, size)
    torus = estimate_time(s, row(n), torus_row_route(n), bandwidth, latency)
    assert torus == pytest.approx(2 * (n - 1) * (size / (2 * n) / B + ALPHA), rel=1e-12)
    # On a mesh row each ring's wrap shares every link of the other ring's direction.
    mesh = estimate_time(s, row(n), xy_route, bandwidth, latency)
    ring = estimate_time(build_schedule(K.ALL_REDUCE, A.RING, n, size), row(n), xy_route,
                         bandwidth, latency)  # fmt: skip
    assert mesh == pytest.approx(ring, rel=1e-12)


def test_single_transfer_is_latency_times_hops_plus_bytes_over_bottleneck() -> None:
    s = Schedule(K.BROADCAST, A.DIRECT, 2, 1000, 1, (Transfer(0, 0, 1, 1000, (0,), False),), 0)

    def slow_middle(a: Coord, b: Coord) -> float:
        return B / 4 if {a, b} == {(0, 1), (0, 2)} else B

    t = estimate_time(s, [(0, 0), (0, 3)], xy_route, slow_middle, latency)
    assert t == pytest.approx(3 * ALPHA + 1000 / (B / 4), rel=1e-12)
    # ranks on the same core: nothing crosses a link
    assert estimate_time(s, [(0, 0), (0, 0)], xy_route, slow_middle, latency) == 0.0


def test_transfers_sharing_a_directed_link_share_its_bandwidth() -> None:
    transfers = (
        Transfer(0, 0, 2, 300, (0,), False),  # (0,0) -> (0,2): links 0>1, 1>2
        Transfer(0, 1, 3, 500, (0,), False),  # (0,1) -> (0,3): links 1>2, 2>3
        Transfer(0, 3, 1, 700, (0,), False),  # westward: shares no directed link
        Transfer(1, 1, 0, 100, (0,), False),
    )
    s = Schedule(K.BROADCAST, A.DIRECT, 4, 1000, 1, transfers, 0)
    t = estimate_time(s, row(4), xy_route, bandwidth, latency)
    assert t == pytest.approx((800 / B + 2 * ALPHA) + (100 / B + ALPHA), rel=1e-12)


def test_routes_without_the_source_are_accepted_and_wrong_ones_rejected() -> None:
    s = build_schedule(K.ALL_REDUCE, A.RING, 4, 4000)
    full = estimate_time(s, row(4), xy_route, bandwidth, latency)
    tail = estimate_time(s, row(4), lambda a, b: xy_route(a, b)[1:], bandwidth, latency)
    assert tail == full
    with pytest.raises(PlanError, match="ends at"):
        estimate_time(s, row(4), lambda a, b: [a], bandwidth, latency)
    with pytest.raises(PlanError, match="placement lists 3 cores for a group of 4"):
        estimate_time(s, row(3), xy_route, bandwidth, latency)
    with pytest.raises(PlanError, match=r"bandwidth 0\.0"):
        estimate_time(s, row(4), xy_route, lambda a, b: 0.0, latency)


def test_chooser_picks_ring_for_large_messages_over_a_long_row() -> None:
    n, size = 16, 1 << 26
    best, cost, costs = choose_algorithm(
        K.ALL_REDUCE, n, size, row(n), xy_route, bandwidth, latency
    )
    assert list(costs) == [A.RING, A.BIRING, A.TREE, A.DIRECT, A.ROOT]  # no grid, no mesh2d
    assert cost == pytest.approx(2 * (n - 1) * (size / n / B + (n - 1) * ALPHA), rel=1e-12)
    # The bidirectional ring ties on a mesh row (its wraps share links); enum order wins.
    assert costs[A.BIRING] == costs[A.RING]
    assert best is A.RING and cost == costs[A.RING]
    assert costs[A.DIRECT] > 4 * cost and costs[A.TREE] > 10 * cost
    # On a torus row the two half rings are strictly better.
    best, _, costs = choose_algorithm(
        K.ALL_REDUCE, n, size, row(n), torus_row_route(n), bandwidth, latency
    )
    assert best is A.BIRING and costs[A.BIRING] < costs[A.RING]


def test_chooser_picks_direct_for_tiny_messages_with_high_latency() -> None:
    n = 16
    best, cost, costs = choose_algorithm(K.ALL_REDUCE, n, 64, row(n), xy_route, bandwidth, latency)
    assert best is A.DIRECT
    # Two steps, each waiting for the 15-hop end-to-end transfers; bytes are negligible.
    assert cost == pytest.approx(2 * 15 * ALPHA, rel=0.05)
    assert costs[A.RING] > 10 * cost


def test_chooser_picks_a_tree_when_injection_bandwidth_is_the_bottleneck() -> None:
    # Broadcast through a switch with S / B about alpha: a binary tree takes 4 levels of
    # 2 alpha + 2 S/B (the last level has one child: 2 alpha + S/B), direct pays the
    # root's uplink 15 S/B at once, the pipelined ring 30 steps of 2 alpha + S/(16B).
    n, size = 16, 1024
    beta = size / B
    best, cost, costs = choose_algorithm(
        K.BROADCAST, n, size, row(n), hub_route, bandwidth, latency
    )
    assert best is A.TREE
    assert cost == pytest.approx(3 * (2 * ALPHA + 2 * beta) + 2 * ALPHA + beta, rel=1e-12)
    assert costs[A.DIRECT] == pytest.approx(2 * ALPHA + 15 * beta, rel=1e-12)
    assert costs[A.RING] == pytest.approx(30 * (2 * ALPHA + beta / 16), rel=1e-12)


def test_chooser_considers_mesh2d_with_a_grid_and_respects_candidates() -> None:
    placement = [(r, c) for r in range(4) for c in range(4)]
    best, cost, costs = choose_algorithm(
        K.ALL_REDUCE, 16, 1 << 24, placement, xy_route, bandwidth, latency, grid_shape=(4, 4)
    )
    assert A.MESH2D in costs and best is min(costs, key=costs.__getitem__)
    assert cost == costs[best]
    only = choose_algorithm(
        K.ALL_REDUCE, 16, 1 << 24, placement, xy_route, bandwidth, latency,
        grid_shape=(4, 4), candidates=[A.ROOT, A.TREE],
    )  # fmt: skip
    assert list(only[2]) == [A.TREE, A.ROOT]
    with pytest.raises(PlanError, match="no tree algorithm for all-gather"):
        choose_algorithm(K.ALL_GATHER, 4, 64, row(4), xy_route, bandwidth, latency,
                         candidates=[A.TREE])  # fmt: skip


def test_chooser_ties_go_to_the_first_algorithm_in_enum_order() -> None:
    best, cost, costs = choose_algorithm(K.ALL_REDUCE, 1, 64, row(1), xy_route, bandwidth, latency)
    assert best is A.RING and cost == 0.0 and set(costs.values()) == {0.0}
