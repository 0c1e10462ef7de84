"""Coarse views whose k does not divide the grid: ragged last row / column of nodes."""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from waferflow.backend_sim.costs import duration_ps
from waferflow.backend_sim.simulate import simulate
from waferflow.errors import ConfigError
from waferflow.ir.dtypes import DType
from waferflow.ir.plan import Actor, Message, Plan
from waferflow.ir.target import LinkSpec, Topology, Wafer, get_wafer
from waferflow.ir.target.coarsen import split_nodes
from waferflow.ir.target.toml_io import parse_wafer_toml, wafer_to_toml
from waferflow.viz import memory_view

LINK = LinkSpec(1e11, 1e-9)
D2D = LinkSpec(5e10, 5e-9)
PEAK = 1e12


def make(rows: int, cols: int, **kw: object) -> Wafer:
    args: dict[str, object] = {
        "name": "r",
        "rows": rows,
        "cols": cols,
        "topology": Topology.MESH,
        "clock_hz": 1e9,
        "peak_flops": ((DType.F32, PEAK),),
        "sram_bytes": 1000,
        "sram_bandwidth": 1e12,
        "link": LINK,
    }
    args.update(kw)
    return Wafer(**args)  # type: ignore[arg-type]


def _flat(v: object) -> list[object]:
    if isinstance(v, LinkSpec):
        return [v.bandwidth, v.latency]
    if isinstance(v, tuple | frozenset):
        items = sorted(v) if isinstance(v, frozenset) else v
        return [x for item in items for x in _flat(item)]
    return [v]


def same(a: Wafer, b: Wafer) -> None:
    """Equal field by field, floats to 1e-12 relative (k's multiply in another order)."""
    for f in dataclasses.fields(Wafer):
        xs, ys = _flat(getattr(a, f.name)), _flat(getattr(b, f.name))
        assert len(xs) == len(ys), f.name
        for x, y in zip(xs, ys, strict=True):
            if isinstance(x, float):
                assert math.isclose(x, y, rel_tol=1e-12), f.name  # type: ignore[arg-type]
            else:
                assert x == y, f.name


def block(c: tuple[int, int], k: int) -> tuple[int, int]:
    return (c[0] // k, c[1] // k)


def alive_fine_cores(w: Wafer) -> int:
    """Alive fine cores a (coarse) wafer stands for, in exact integers."""
    full = w.coarsen_factor**2
    return (w.num_alive - len(w.partial_cores)) * full + sum(n for _, n in w.partial_cores)


# --- shape and capacity ------------------------------------------------------------------


def test_small_ragged_view_by_hand() -> None:
    # 5 x 7 cores, k = 3: node rows cover 3, 2 fine rows; node cols cover 3, 3, 1 fine cols
    w = make(5, 7)
    c = w.coarsen(3)
    assert (c.rows, c.cols, c.coarsen_factor) == (2, 3, 3)
    assert (c.fine_rows, c.fine_cols, c.fine_shape) == (5, 7, (5, 7))
    assert [c.node_shape((r, q)) for r in range(2) for q in range(3)] == [
        (3, 3), (3, 3), (3, 1), (2, 3), (2, 3), (2, 1),
    ]  # fmt: skip
    assert c.partial_cores == (((0, 2), 3), ((1, 0), 6), ((1, 1), 6), ((1, 2), 2))
    assert c.capacity((0, 0)) == 1.0 and c.capacity((1, 2)) == 2 / 9
    assert c.core_peak((1, 2), DType.F32) == pytest.approx(2 * PEAK)
    assert c.core_sram_bytes((1, 2)) == 2 * w.sram_bytes
    assert c.core_sram_bandwidth((1, 1)) == pytest.approx(6 * w.sram_bandwidth)
    assert c.total_sram() == w.total_sram() == 35 * 1000
    assert c.total_peak_flops(DType.F32) == pytest.approx(35 * PEAK, rel=1e-15)
    assert alive_fine_cores(c) == 35
    # links: a row-wise cut crosses the node's height, a column-wise cut its width
    assert c.link_spec((0, 0), (0, 1)).bandwidth == 3 * LINK.bandwidth
    assert c.link_spec((1, 0), (1, 1)).bandwidth == pytest.approx(2 * LINK.bandwidth)
    assert c.link_spec((0, 2), (1, 2)).bandwidth == pytest.approx(1 * LINK.bandwidth)
    assert c.link_spec((1, 2), (0, 2)).bandwidth == pytest.approx(1 * LINK.bandwidth)
    assert c.link_spec((0, 0), (1, 0)) == LinkSpec(3 * LINK.bandwidth, 3 * LINK.latency)
    # latency: every coarse hop counts k fine hops, ragged or not
    assert {x.spec.latency for x in c.links()} == {3 * LINK.latency}


def test_wse2_coarsen_16() -> None:
    w = get_wafer("wse2")
    c = w.coarsen(16)
    assert (w.rows, w.cols) == (1008, 756)
    assert (c.rows, c.cols, c.fine_rows, c.fine_cols) == (63, 48, 0, 756)  # 1008 = 16 * 63
    assert c.node_shape((0, 47)) == (16, 4) and c.node_shape((62, 46)) == (16, 16)
    assert c.partial_cores == tuple(((r, 47), 64) for r in range(63))
    assert c.total_sram() == w.total_sram()
    assert alive_fine_cores(c) == w.num_cores
    for d in (DType.F32, DType.F16):
        assert c.total_peak_flops(d) == pytest.approx(w.total_peak_flops(d), rel=1e-15)
    # dies of 84 x 108 cores do not align with 16; the d2d link equals the on-die link,
    # so the view drops the die cuts (exactly: the figures are the same)
    assert (c.die_rows, c.die_cols) == (1, 1)
    assert c.d2d_link == c.link == LinkSpec(16 * w.link.bandwidth, 16 * w.link.latency)
    assert c.link_spec((5, 47), (6, 47)).bandwidth == pytest.approx(4 * w.link.bandwidth)
    assert len(list(c.links())) == c.num_links()
    same(w.coarsen(4).coarsen(4), c)
    same(w.coarsen(2).coarsen(8), c)  # coarsen(2) keeps the 12 x 7 dies; (8) drops them


def test_dividing_k_is_unchanged() -> None:
    w = get_wafer("mesh64x64")
    c = w.coarsen(4)
    assert (c.fine_rows, c.fine_cols, c.partial_cores) == (0, 0, ())
    assert c.fine_shape == (64, 64) and c.node_shape((15, 15)) == (4, 4)
    assert c.link_spec((0, 0), (0, 1)) == c.link and c.d2d_link is not None
    assert c.d2d_link.bandwidth == 4 * w.d2d_link.bandwidth  # type: ignore[union-attr]
    assert (c.die_rows, c.die_cols) == (4, 4)


def test_coarsen_one_of_a_ragged_view_is_the_identity() -> None:
    c = make(5, 7).coarsen(3)
    assert c.coarsen(1) is c


# --- links -------------------------------------------------------------------------------


def _fine_cut_bandwidth(w: Wafer, k: int) -> dict[tuple, float]:
    """Sum of the fine links' bandwidth over each (src block, dst block) cut, and
    whether any of them is die-to-die."""
    bw: dict[tuple, float] = defaultdict(float)
    for x in w.links():
        a, b = block(x.src, k), block(x.dst, k)
        if a != b:
            bw[(a, b)] += x.spec.bandwidth
    return bw


@pytest.mark.parametrize("topology", [Topology.MESH, Topology.TORUS])
@pytest.mark.parametrize(
    ("rows", "cols", "k", "dies"),
    [
        (13, 10, 3, {}),
        (12, 10, 3, {"die_rows": 2, "d2d_link": D2D}),  # rows aligned, slower d2d
        (9, 14, 4, {"die_cols": 2, "d2d_link": LINK}),  # cols cut inside nodes, same figures
        (14, 9, 4, {"die_rows": 2, "die_cols": 3}),  # no d2d spec: both cuts dropped
    ],
)
def test_cut_bandwidth_is_the_fine_links_crossing_it(
    topology: Topology, rows: int, cols: int, k: int, dies: dict
) -> None:
    w = make(rows, cols, topology=topology, **dies)
    c = w.coarsen(k)
    fine = _fine_cut_bandwidth(w, k)
    coarse = {(x.src, x.dst): x for x in c.links()}
    assert set(coarse) == set(fine)
    assert len(coarse) == c.num_links()
    for (a, b), bw in fine.items():
        assert c.link_spec(a, b) == coarse[(a, b)].spec
        assert coarse[(a, b)].spec.bandwidth == pytest.approx(bw, rel=1e-12), (a, b)
        if c.num_dies == w.num_dies:
            # a cut is straight: its fine links are all die-to-die or none is
            kinds = {w.is_d2d(x, y) for x, y in _fine_pairs(w, a, b, k)}
            assert kinds == {coarse[(a, b)].is_d2d}


def _fine_pairs(w: Wafer, a: tuple[int, int], b: tuple[int, int], k: int) -> list:
    return [(x.src, x.dst) for x in w.links() if block(x.src, k) == a and block(x.dst, k) == b]


def test_d2d_latency_rule_on_an_aligned_axis_of_a_ragged_view() -> None:
    w = make(12, 10, die_rows=2, d2d_link=D2D)  # dies of 6 x 10: k = 3 aligns the rows
    c = w.coarsen(3)
    assert (c.rows, c.cols, c.die_rows, c.die_cols, c.fine_cols) == (4, 4, 2, 1, 10)
    spec = c.link_spec((1, 3), (2, 3))  # crosses the die cut, on the 1-wide ragged column
    assert spec.latency == pytest.approx(2 * LINK.latency + D2D.latency)
    assert spec.bandwidth == pytest.approx(1 * D2D.bandwidth)
    assert c.link_spec((1, 0), (2, 0)).bandwidth == pytest.approx(3 * D2D.bandwidth)


# --- dies --------------------------------------------------------------------------------


def test_unaligned_dies_need_equal_link_figures() -> None:
    slow = dataclasses.replace(get_wafer("wse2"), d2d_link=LinkSpec(1e9, 1e-8))
    with pytest.raises(
        ConfigError,
        match=r"dies are 84 x 108 cores.*k must divide 84 and 108.*\[1, 2, 3, 4, 6, 12\]",
    ):
        slow.coarsen(16)
    assert slow.coarsen(12).d2d_link is not None  # aligned: fine
    w = make(8, 9, die_cols=3, d2d_link=D2D)  # dies 8 x 3: only the columns are cut
    with pytest.raises(ConfigError, match=r"k must divide 3; choose one of \[1, 3\]"):
        w.coarsen(2)
    assert w.coarsen(3).die_cols == 3  # rows ragged (8 = 3 + 3 + 2), die columns aligned


def test_unaligned_axis_is_left_uncut_when_figures_are_equal() -> None:
    w = get_wafer("wse2")  # 12 x 7 dies of 84 x 108 cores
    c = w.coarsen(7)  # 84 % 7 == 0 but 108 % 7 != 0
    assert (c.rows, c.cols, c.fine_rows, c.fine_cols) == (144, 108, 0, 0)
    assert (c.die_rows, c.die_cols) == (12, 1)
    assert c.d2d_link == c.link  # equal figures stay equal exactly
    nodie = make(8, 8, die_rows=4, die_cols=4)  # no d2d spec: dies change no timing
    assert (nodie.coarsen(3).die_rows, nodie.coarsen(3).die_cols) == (1, 1)
    assert (nodie.coarsen(2).die_rows, nodie.coarsen(2).die_cols) == (4, 4)


# --- faults and composition --------------------------------------------------------------


def _faulty(topo: Topology, rows: int, cols: int, dead: set, dlinks: list) -> Wafer:
    base = make(rows, cols, topology=topo)
    cores = sorted(c for c in dead if base.in_grid(c))[: base.num_cores - 1]
    links = set()
    for r, c, i in dlinks:
        if base.in_grid((r, c)):
            nbs = base.neighbors((r, c))
            if nbs:
                links.add(((r, c), nbs[i % len(nbs)]))
    return dataclasses.replace(base, dead_cores=frozenset(cores), dead_links=frozenset(links))


@settings(max_examples=80, deadline=None)
@given(
    st.sampled_from([Topology.MESH, Topology.TORUS]),
    st.sampled_from([(13, 11), (10, 7), (14, 9), (5, 17)]),
    st.sampled_from([(2, 3), (3, 2), (2, 2), (3, 3), (4, 2)]),
    st.sets(st.tuples(st.integers(0, 16), st.integers(0, 16)), max_size=80),
    st.lists(st.tuples(st.integers(0, 16), st.integers(0, 16), st.integers(0, 3)), max_size=20),
)
def test_ragged_coarsening_composes_and_preserves_totals(
    topo: Topology, shape: tuple[int, int], ks: tuple[int, int], dead: set, dlinks: list
) -> None:
    w = _faulty(topo, *shape, dead, dlinks)
    a, b = ks
    one = w.coarsen(a * b)
    k = a * b
    kept = split_nodes(w, k)  # nodes a cut runs through keep their largest part
    if not (kept or split_nodes(w, a) or split_nodes(w.coarsen(a), b)):
        same(w.coarsen(a).coarsen(b), one)  # exact when no node splits
        assert one.total_sram() == w.total_sram()
        assert alive_fine_cores(one) == w.num_alive
        assert one.total_peak_flops(DType.F32) == pytest.approx(w.total_peak_flops(DType.F32))
    alive = defaultdict(int)
    for i in w.alive_cores():
        node = block(w.coord(i), k)
        if node not in kept or w.coord(i) in kept[node]:
            alive[node] += 1
    for r in range(one.rows):
        for c in range(one.cols):
            h, wd = one.node_shape((r, c))
            assert alive[(r, c)] == round(one.capacity((r, c)) * k * k)
            assert one.is_dead((r, c)) == (alive[(r, c)] == 0)
            assert alive[(r, c)] <= h * wd
    # a coarse link is dead exactly when no usable fine link crosses its cut between
    # the parts the two nodes keep

    def kept_cell(c: tuple[int, int]) -> bool:
        return block(c, k) not in kept or c in kept[block(c, k)]

    usable = {
        (block(x.src, k), block(x.dst, k))
        for x in w.links()
        if kept_cell(x.src) and kept_cell(x.dst)
    }
    for x in one.links():
        assert (x.src, x.dst) in usable


def test_random_dead_cores_on_a_ragged_view() -> None:
    c = make(10, 10).coarsen(3).with_dead_cores(0.25, seed=3)  # 4 x 4 nodes
    assert len(c.dead_cores) == 4
    assert not set(dict(c.partial_cores)) & c.dead_cores
    assert alive_fine_cores(c) == 100 - sum(
        c.node_shape(n)[0] * c.node_shape(n)[1] for n in c.dead_cores
    )


# --- validation --------------------------------------------------------------------------


def test_a_ragged_view_written_by_hand() -> None:
    c = make(5, 7).coarsen(3)
    kw = {f.name: getattr(c, f.name) for f in dataclasses.fields(Wafer)}
    # the healthy ragged nodes are filled in when partial_cores leaves them out
    assert Wafer(**{**kw, "partial_cores": ()}) == c
    # a fine size of exactly rows * k is spelled 0
    assert Wafer(
        **{**kw, "fine_rows": 6, "fine_cols": 9, "partial_cores": ()}
    ) == dataclasses.replace(c, fine_rows=0, fine_cols=0, partial_cores=())


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"fine_rows": 3}, r"wafer\.fine_rows = 3 does not fit wafer\.rows = 2 .* 4\.\.6 rows"),
        ({"fine_cols": 10}, r"wafer\.fine_cols = 10 does not fit wafer\.cols = 3 .* 7\.\.9 cols"),
        ({"fine_cols": -1}, r"wafer\.fine_cols must be >= 0"),
        ({"fine_rows": 2.5}, r"wafer\.fine_rows must be an integer"),
        (
            {"partial_cores": (((1, 2), 3),)},
            r"node \[1, 2\] has 3 alive fine cores but covers only 2 x 1 = 2",
        ),
    ],
)
def test_bad_ragged_fields(kw: dict, message: str) -> None:
    c = make(5, 7).coarsen(3)
    with pytest.raises(ConfigError, match=message):
        dataclasses.replace(c, **kw)


def test_fine_shape_needs_a_coarse_view() -> None:
    with pytest.raises(ConfigError, match=r"wafer\.fine_rows = 4 does not fit"):
        make(5, 7, fine_rows=4)
    assert make(5, 7, fine_rows=5).fine_rows == 0


def test_toml_round_trip_of_a_ragged_view() -> None:
    c = make(13, 10, dead_cores=frozenset({(12, 9), (0, 0)})).coarsen(3)
    assert c.fine_rows == 13 and c.fine_cols == 10 and c.dead_cores == {(4, 3)}
    text = wafer_to_toml(c)
    assert "fine_rows = 13" in text and "fine_cols = 10" in text
    assert parse_wafer_toml(text) == c
    w = get_wafer("wse2").coarsen(16)
    assert parse_wafer_toml(wafer_to_toml(w)) == w


# --- the simulator and the viz adapters --------------------------------------------------


def test_simulate_on_a_ragged_view() -> None:
    c = make(5, 7).coarsen(3)  # node (1, 2) holds 2 fine cores, node (0, 0) nine
    flops = 9 * 10**9
    plan = Plan.build(
        "ragged",
        c.name,
        [
            Actor(0, "full", c.core_id((0, 0)), flops=flops, mem_bytes=100),
            Actor(1, "edge", c.core_id((1, 2)), flops=flops, mem_bytes=100),
        ],
        [Message(0, 0, 1, 4096)],
    )
    res = simulate(plan, c)
    dur = [e - s for s, e in zip(res.actor_start_ps, res.actor_end_ps, strict=True)]
    assert dur[0] == duration_ps(flops, 9 * PEAK)
    assert dur[1] == duration_ps(flops, 2 * PEAK)  # the ragged node runs at 2 fine cores
    assert res.step_time_ps == res.actor_end_ps[1] > res.msg_arrive_ps[0]
    assert res.msg_hops[0] == 3  # (0,0) -> (0,1) -> (0,2) -> (1,2)
    view = memory_view(res, c)
    assert view.core_capacity[c.core_id((1, 2))] == 2 * 1000
    assert view.core_capacity[c.core_id((0, 0))] == 9 * 1000
