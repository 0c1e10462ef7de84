"""Views from a real plan, simulation result and wafer, and their pictures."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.viz.images import DPI, colours, pixels
from waferflow.backend_sim.results import SimResult
from waferflow.backend_sim.simulate import simulate
from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Phase
from waferflow.ir.plan import Actor, Message, Plan
from waferflow.ir.target.wafer import LinkSpec, Topology, Wafer
from waferflow.parallel.ranks import CoreRank
from waferflow.viz import (
    UNASSIGNED,
    LabelBy,
    Region,
    SpanKind,
    VizError,
    link_view,
    memory_view,
    placement_view,
    plot_links,
    plot_memory,
    plot_placement,
    plot_timeline,
    timeline_view,
)

FWD, BWD, OPT = Phase.FWD, Phase.BWD, Phase.OPT


def _wafer(dead: frozenset = frozenset({(3, 3)})) -> Wafer:
    return Wafer(
        name="w4",
        rows=4,
        cols=4,
        topology=Topology.MESH,
        clock_hz=1e9,
        peak_flops=((DType.F32, 1e12),),
        sram_bytes=1 << 16,
        sram_bandwidth=1e12,
        link=LinkSpec(1e9, 5e-9),
        die_rows=2,
        die_cols=2,
        d2d_link=LinkSpec(0.5e9, 20e-9),
        dead_cores=dead,
    )


# (core, flops, phase, module, stage, mem_bytes)
_ACTORS = [
    (0, 1_000_000, FWD, "model.embed", 0, 20_000),
    (1, 2_000_000, FWD, "model.layers.0", 0, 30_000),
    (2, 2_000_000, FWD, "model.layers.1", 1, 30_000),
    (3, 2_000_000, FWD, "model.layers.2", 1, 90_000),  # more than the 64 KiB SRAM
    (10, 1_000_000, FWD, "model.head", 2, 10_000),
    (10, 4_000_000, BWD, "model.head", 2, 0),
    (2, 4_000_000, BWD, "model.layers.1", 1, 0),
    (0, 2_000_000, BWD, "model.embed", 0, 0),
    (0, 100_000, OPT, "model.embed", 0, 0),
]
_MESSAGES = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8)]


def _plan() -> Plan:
    actors = [
        Actor(i, f"a{i}", core, flops, phase=ph, module=mod, stage=st, mem_bytes=mem)
        for i, (core, flops, ph, mod, st, mem) in enumerate(_ACTORS)
    ]
    msgs = [Message(i, s, d, 4096) for i, (s, d) in enumerate(_MESSAGES)]
    return Plan.build("pipe3", "w4", actors, msgs)


Run = tuple[Plan, Wafer, SimResult]


@pytest.fixture(scope="module")
def run() -> Run:
    plan, wafer = _plan(), _wafer()
    return plan, wafer, simulate(plan, wafer)


def test_placement_view_by_stage(run: Run) -> None:
    plan, wafer, _ = run
    view = placement_view(plan, wafer)  # pipelined, so AUTO means stages
    assert view.labels == ("stage 0", "stage 1", "stage 2")
    grid = view.label_array()
    assert grid[0].tolist() == [0, 0, 1, 1]
    assert grid[2, 2] == 2
    assert (grid == UNASSIGNED).sum() == 16 - 5
    assert view.dead == frozenset({(3, 3)})
    assert (view.die_rows, view.die_cols) == (2, 2)
    assert view.regions == (
        Region("stage 0", 0, 0, 1, 2),
        Region("stage 1", 0, 2, 1, 4),
        Region("stage 2", 2, 2, 3, 3),
    )


def test_placement_view_by_module_uses_the_heaviest_actor(run: Run) -> None:
    plan, wafer, _ = run
    view = placement_view(plan, wafer, LabelBy.MODULE)
    # core 0 runs embed fwd (1M), embed bwd (2M) and opt: all "model.embed"
    assert view.labels[view.core_label[0]] == "model.embed"
    assert view.labels[view.core_label[2]] == "model.layers.1"
    assert view.labels == (
        "model.embed",
        "model.layers.0",
        "model.layers.1",
        "model.layers.2",
        "model.head",
    )


def test_placement_view_rejects_a_smaller_wafer(run: Run) -> None:
    plan, _, _ = run
    small = Wafer(
        name="tiny",
        rows=2,
        cols=2,
        topology=Topology.MESH,
        clock_hz=1e9,
        peak_flops=((DType.F32, 1e12),),
        sram_bytes=1024,
        sram_bandwidth=1e12,
        link=LinkSpec(1e9, 1e-9),
    )
    with pytest.raises(VizError, match="not on wafer 'tiny'"):
        placement_view(plan, small)


def test_link_view_matches_the_result(run: Run) -> None:
    _, wafer, result = run
    view = link_view(result)
    by_pair = {(lk.src, lk.dst): lk for lk in view.links}
    assert len(by_pair) == len(view.links) == wafer.num_links()  # idle links filled in
    for stat in result.links:
        lk = by_pair[(stat.src, stat.dst)]
        assert lk.bytes == stat.bytes and lk.is_d2d == stat.d2d
        assert lk.utilisation == pytest.approx(min(stat.utilisation, 1.0))
    assert any(lk.bytes > 0 and lk.is_d2d for lk in view.links)
    for (src, dst), lk in by_pair.items():
        assert lk.is_d2d == wafer.is_d2d(src, dst)
    assert sum(lk.bytes for lk in view.links) == result.total_link_bytes


def test_timeline_view_matches_the_result(run: Run) -> None:
    plan, _, result = run
    view = timeline_view(plan, result)
    assert view.tracks == tuple(f"core {divmod(c, 4)}" for c in plan.cores)
    assert view.groups == ("stage 0", "stage 1", "stage 2")
    assert view.track_group == (0, 0, 1, 1, 2)  # cores 0, 1 | 2, 3 | 10
    assert view.step_time_s == pytest.approx(result.step_time)
    compute = [s for s in view.spans if s.kind is SpanKind.COMPUTE]
    assert len(compute) == len(plan.actors)
    for span, actor in zip(compute, plan.actors, strict=True):
        assert (span.start_s, span.end_s) == pytest.approx(result.actor_span(actor.id))
        assert span.phase == actor.phase.value
        assert view.tracks[span.track] == f"core {divmod(actor.core, 4)}"
    remote = [
        m for m in plan.messages if plan.actors[m.src_actor].core != plan.actors[m.dst_actor].core
    ]
    sends = [s for s in view.spans if s.kind is SpanKind.SEND]
    recvs = [s for s in view.spans if s.kind is SpanKind.RECV]
    assert len(sends) == len(recvs) == len(remote)
    for send, recv, m in zip(sends, recvs, remote, strict=True):
        src, dst = plan.actors[m.src_actor], plan.actors[m.dst_actor]
        assert send.label == recv.label == f"{src.name}->{dst.name}"
        assert send.phase == recv.phase == src.phase.value
        assert view.tracks[send.track] == f"core {divmod(src.core, 4)}"
        assert view.tracks[recv.track] == f"core {divmod(dst.core, 4)}"
        links, first, last = result.link_occupancy[m.id]
        assert links  # the first hop is the send, the last the receive
        assert (send.start_s, send.end_s) == pytest.approx((first[0] * 1e-12, last[0] * 1e-12))
        assert (recv.start_s, recv.end_s) == pytest.approx((first[-1] * 1e-12, last[-1] * 1e-12))
    # without the per-hop record, both are the whole flight: data start to arrival
    bare = timeline_view(plan, replace(result, link_occupancy=()))
    m = remote[0]
    flight = (result.msg_data_start_ps[m.id] * 1e-12, result.msg_arrive_ps[m.id] * 1e-12)
    for kind in (SpanKind.SEND, SpanKind.RECV):
        span = next(s for s in bare.spans if s.kind is kind)
        assert (span.start_s, span.end_s) == pytest.approx(flight)
    # stage 1's first actor waits for stage 0's output to cross the die boundary
    waits = [s for s in view.spans if s.kind is SpanKind.WAIT]
    assert any(view.tracks[s.track] == "core (0, 2)" for s in waits)
    assert len(waits) == len(result.waits())


def test_ranks_label_the_placement_and_order_the_timeline(run: Run) -> None:
    plan, wafer, result = run
    ranks = {
        0: CoreRank(0, 1, 2, tp=1), 1: CoreRank(0, 0, 2, tp=0),
        2: CoreRank(1, 0, 2, tp=0), 3: CoreRank(1, 1, 2, tp=1), 10: CoreRank(2, 0, 1),
    }  # fmt: skip
    view = placement_view(plan, wafer, ranks=ranks)
    assert view.cell_text[0] == "tp1" and view.cell_text[10] == "" and view.cell_text[5] == ""
    assert placement_view(plan, wafer).cell_text == ()
    timeline = timeline_view(plan, result, ranks)
    assert timeline.tracks == (
        "tp0 core (0, 1)", "tp1 core (0, 0)", "tp0 core (0, 2)", "tp1 core (0, 3)", "core (2, 2)",
    )  # fmt: skip
    assert timeline.track_group == (0, 0, 1, 1, 2)


def test_coarse_views_speak_of_nodes() -> None:
    coarse = _wafer(dead=frozenset()).coarsen(2)
    plan = Plan.build("one", coarse.name, [Actor(0, "a", 0), Actor(1, "b", 3)],
                      [Message(0, 0, 1, 64)])  # fmt: skip
    result = simulate(plan, coarse)
    for view in (placement_view(plan, coarse), link_view(result), memory_view(result)):
        assert view.unit == "node" and "(nodes of 2x2 cores)" in view.title
    assert timeline_view(plan, result).tracks == ("node (0, 0)", "node (1, 1)")


def test_timeline_view_needs_the_simulated_plan(run: Run) -> None:
    _, _, result = run
    other = Plan.build("other", "w4", [Actor(0, "x", 0)], [])
    with pytest.raises(VizError, match="pass the plan that was simulated"):
        timeline_view(other, result)


def test_memory_view_matches_the_result(run: Run) -> None:
    _, wafer, result = run
    view = memory_view(result)
    assert view.capacity_bytes == wafer.sram_bytes
    for stat in result.cores:
        assert view.used_bytes[stat.core] == stat.peak_mem_bytes
    assert sum(1 for u in view.used_bytes if u) == len(result.cores)
    assert view.fraction_array()[0, 3] > 1.0  # core 3 holds 90 kB of a 64 KiB SRAM


def test_memory_view_of_a_coarse_wafer_has_reduced_capacities() -> None:
    fine = _wafer(dead=frozenset({(0, 0)}))
    coarse = fine.coarsen(2)
    assert coarse.partial_cores
    plan = Plan.build(
        "one",
        coarse.name,
        [Actor(0, "a", 0, mem_bytes=100), Actor(1, "b", 3)],
        [Message(0, 0, 1, 64)],
    )
    view = memory_view(simulate(plan, coarse))
    assert view.core_capacity[0] == coarse.core_sram_bytes((0, 0)) < coarse.sram_bytes
    assert view.core_capacity[3] == coarse.sram_bytes


def four_pictures(run: Run, folder: Path) -> dict[str, Path]:
    """The placement, links, timeline and memory pictures of a run (small, for tests)."""
    plan, wafer, result = run
    return {
        "placement": plot_placement(placement_view(plan, wafer), folder / "p.png", dpi=DPI),
        "links": plot_links(link_view(result, wafer), folder / "l.png", dpi=DPI),
        "timeline": plot_timeline(timeline_view(plan, result), folder / "t.png", dpi=DPI),
        "memory": plot_memory(memory_view(result, wafer), folder / "m.png", dpi=DPI),
    }


def test_all_four_pictures(run: Run, tmp_path: Path) -> None:
    for out in four_pictures(run, tmp_path).values():
        assert len(colours(pixels(out))) > 20
