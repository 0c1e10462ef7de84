"""Hypothesis properties of the simulator on random plans."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from waferflow.backend_sim import SimConfig, estimate, simulate
from waferflow.backend_sim.costs import duration_ps
from waferflow.ir.plan import Message, Plan
from waferflow.ir.target.wafer import FlowControl, LinkSpec, Topology, Wafer

from ._helpers import GBPS, NS, actor, wafer

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def mesh_cases(draw: st.DrawFn) -> tuple[Plan, Wafer, SimConfig]:
    rows = draw(st.integers(1, 4))
    cols = draw(st.integers(2, 5))
    topology = draw(st.sampled_from([Topology.MESH, Topology.TORUS]))
    die_cols = draw(st.sampled_from([d for d in (1, 2) if cols % d == 0]))
    d2d = None
    if die_cols > 1:
        d2d = LinkSpec(
            draw(st.sampled_from([0.25, 0.5, 2.0])) * GBPS, draw(st.integers(0, 60)) * NS
        )
    w = wafer(
        rows, cols, topology=topology, die_cols=die_cols, d2d=d2d,
        lat=draw(st.integers(0, 20)) * NS, bw=draw(st.sampled_from([0.5, 1.0, 3.0])) * GBPS,
    )  # fmt: skip
    n_cores = rows * cols
    n = draw(st.integers(2, 9))
    actors = [
        actor(i, draw(st.integers(0, n_cores - 1)), flops=draw(st.integers(0, 3_000_000)))
        for i in range(n)
    ]
    msgs: list[Message] = []
    for _ in range(draw(st.integers(0, 14))):
        # messages only go forward in id order (= each core's order): no deadlock
        a = draw(st.integers(0, n - 2))
        b = draw(st.integers(a + 1, n - 1))
        msgs.append(Message(len(msgs), a, b, draw(st.integers(0, 6000))))
    plan = Plan.build("rand", w.name, actors, msgs)
    cfg = SimConfig(packet_bytes=draw(st.sampled_from([64, 300, 1024, 4096])))
    return plan, w, cfg


def _compute_chain_bound(plan: Plan, res) -> int:  # type: ignore[no-untyped-def]
    """Longest path of compute alone through messages and per-core order."""
    dur = [e - s for s, e in zip(res.actor_start_ps, res.actor_end_ps, strict=True)]
    best = [0] * len(plan.actors)
    preds: list[list[int]] = [[] for _ in plan.actors]
    for m in plan.messages:
        preds[m.dst_actor].append(m.src_actor)
    for _, ids in plan.order:
        for a, b in itertools.pairwise(ids):
            preds[b].append(a)
    for a in range(len(plan.actors)):  # ids are a topological order here
        best[a] = dur[a] + max((best[p] for p in preds[a]), default=0)
    return max(best, default=0)


@SETTINGS
@given(mesh_cases())
def test_conservation_and_bounds(case: tuple[Plan, Wafer, SimConfig]) -> None:
    plan, w, cfg = case
    res = simulate(plan, w, cfg)
    cols = w.cols
    # every message arrives, after it was sent, no earlier than its closed form
    for m in plan.messages:
        assert (
            0 <= res.msg_inject_ps[m.id] <= res.msg_data_start_ps[m.id] <= res.msg_arrive_ps[m.id]
        )
        assert res.msg_queueing_ps[m.id] >= 0
        assert res.msg_inject_ps[m.id] == res.actor_end_ps[m.src_actor]
        assert res.actor_start_ps[m.dst_actor] >= res.msg_arrive_ps[m.id]
    # every byte sent is received: each remote message's last link enters its consumer's core
    received: dict[int, int] = {}
    for m, (links, _, _) in zip(plan.messages, res.link_occupancy, strict=True):
        if links:
            last = res.links[links[-1]]
            assert last.dst == divmod(plan.actors[m.dst_actor].core, cols)
            assert res.links[links[0]].src == divmod(plan.actors[m.src_actor].core, cols)
            received[plan.actors[m.dst_actor].core] = (
                received.get(plan.actors[m.dst_actor].core, 0) + m.bytes
            )
    sent: dict[int, int] = {}
    for m in plan.messages:
        if plan.actors[m.src_actor].core != plan.actors[m.dst_actor].core:
            c = plan.actors[m.dst_actor].core
            sent[c] = sent.get(c, 0) + m.bytes
    assert received == sent
    # link bytes are message bytes times hops
    assert res.total_link_bytes == sum(
        m.bytes * h for m, h in zip(plan.messages, res.msg_hops, strict=True)
    )
    # the step is no shorter than any core's compute, the compute chain, any link's work
    step = res.step_time_ps
    assert step >= max((c.compute_ps for c in res.cores), default=0)
    assert step >= _compute_chain_bound(plan, res)
    for lk in res.links:
        bw = (w.d2d_link or w.link).bandwidth if lk.d2d else w.link.bandwidth
        assert lk.busy_ps >= duration_ps(lk.bytes, bw) - 1
        assert step >= lk.busy_ps
        assert 0.0 <= lk.utilisation <= 1.0
    for c in res.cores:
        assert c.compute_ps + c.comm_ps + c.idle_ps == step
        assert min(c.compute_ps, c.comm_ps, c.idle_ps) >= 0
    # one actor at a time per core, in order
    for _, ids in plan.order:
        for a, b in itertools.pairwise(ids):
            assert res.actor_start_ps[b] >= res.actor_end_ps[a]
    # the critical path ends the step and is contiguous in time
    if res.critical_path:
        assert res.critical_path[-1].end_ps == step
        for x, y in zip(res.critical_path, res.critical_path[1:], strict=False):
            assert x.end_ps <= y.start_ps


@SETTINGS
@given(mesh_cases())
def test_deterministic_and_estimate_exact_without_contention(
    case: tuple[Plan, Wafer, SimConfig],
) -> None:
    plan, w, cfg = case
    res = simulate(plan, w, cfg)
    assert simulate(plan, w, cfg) == res
    est = estimate(plan, w, cfg)
    if res.contention_free:
        assert est.actor_start_ps == res.actor_start_ps
        assert est.actor_end_ps == res.actor_end_ps
        assert est.msg_arrive_ps == res.msg_arrive_ps
        assert est.step_time_ps == res.step_time_ps
        assert est.peak_mem_bytes == tuple(c.peak_mem_bytes for c in res.cores)
        assert est.gap(res) == 0.0


@st.composite
def crossbar_cases(draw: st.DrawFn) -> tuple[Plan, Wafer]:
    """Crossbar, at most one message per ordered pair of cores: no link is ever shared,
    whatever the flow control, so the estimate must be exact."""
    n_cores = draw(st.integers(2, 6))
    flow = None
    if draw(st.booleans()):
        flow = FlowControl(
            packet_bytes=draw(st.sampled_from([32, 128, 1000])),
            header_packets=draw(st.integers(0, 1)),
            buffers_per_core=draw(st.integers(0, 2)),
            handshake=draw(st.booleans()),
        )
    w = wafer(1, n_cores, topology=Topology.CROSSBAR, lat=draw(st.integers(0, 30)) * NS, flow=flow)
    n = draw(st.integers(2, 10))
    actors = [
        actor(
            i, draw(st.integers(0, n_cores - 1)), flops=draw(st.integers(0, 2_000_000)),
            out_bytes=draw(st.integers(0, 100)), mem_bytes=draw(st.integers(0, 50)),
        )
        for i in range(n)
    ]  # fmt: skip
    used: set[tuple[int, int]] = set()
    msgs: list[Message] = []
    for _ in range(draw(st.integers(0, 12))):
        a = draw(st.integers(0, n - 2))
        b = draw(st.integers(a + 1, n - 1))
        pair = (actors[a].core, actors[b].core)
        if pair[0] == pair[1] or pair not in used:
            used.add(pair)
            msgs.append(Message(len(msgs), a, b, draw(st.integers(0, 3000))))
    return Plan.build("xbar", w.name, actors, msgs), w


@SETTINGS
@given(crossbar_cases())
def test_estimate_equals_simulation_on_contention_free_plans(case: tuple[Plan, Wafer]) -> None:
    plan, w = case
    res = simulate(plan, w)
    est = estimate(plan, w)
    assert res.contention_free
    assert est.actor_start_ps == res.actor_start_ps
    assert est.actor_end_ps == res.actor_end_ps
    assert est.msg_arrive_ps == res.msg_arrive_ps
    assert est.step_time_ps == res.step_time_ps
    assert est.peak_mem_bytes == tuple(c.peak_mem_bytes for c in res.cores)


def _broadcasts(plan: Plan) -> Plan:
    """``plan`` with the remote messages of each producer to distinct cores as one
    broadcast (the same bytes to each)."""
    from dataclasses import replace

    core = [a.core for a in plan.actors]
    groups: dict[int, list[Message]] = {}
    for m in plan.messages:
        if core[m.src_actor] != core[m.dst_actor]:
            groups.setdefault(m.src_actor, []).append(m)
    out = list(plan.messages)
    for ms in groups.values():
        if len(ms) > 1 and len({core[m.dst_actor] for m in ms}) == len(ms):
            for m in ms:
                out[m.id] = replace(m, bytes=ms[0].bytes, bcast=0)
    return replace(plan, messages=tuple(out))


@SETTINGS
@given(mesh_cases(), st.integers(1, 4), st.booleans(), st.integers(1, 6), st.booleans())
def test_a_window_of_actors_never_deadlocks_a_plan(
    case: tuple[Plan, Wafer, SimConfig], lookahead: int, handshake: bool, streams: int,
    bcast: bool,
) -> None:  # fmt: skip
    """With memory enough for every buffer, a window of ``lookahead`` actors (memory
    allocated ahead, first-fit) changes when actors and messages go but never stops a
    plan that runs without it: the window always holds the next actor to run, a
    message takes no stream before its destination is admitted, and a broadcast goes
    to the destinations admitted without waiting for the others."""
    from dataclasses import replace

    from waferflow.ir.target.wafer import MemoryModel

    plan, w, cfg = case
    if bcast:
        plan = _broadcasts(plan)
    flow = FlowControl(packet_bytes=cfg.packet_bytes or 128, handshake=handshake,
                       max_streams=streams)  # fmt: skip
    sized = [replace(a, out_bytes=(a.id % 3) * 100) for a in plan.actors]
    plan = replace(plan, actors=tuple(sized))
    free = replace(w, flow=flow)
    windowed = replace(free, memory=MemoryModel(block_bytes=64, lookahead=lookahead,
                                                first_fit=True))  # fmt: skip
    simulate(plan, free, cfg)
    res = simulate(plan, windowed, cfg)  # a deadlock would raise PlanError
    assert all(e >= 0 for e in res.actor_end_ps)
    peak = max(c.peak_mem_bytes for c in res.cores)
    assert peak % 64 == 0 and peak <= w.sram_bytes  # whole blocks, within SRAM
