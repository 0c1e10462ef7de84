"""``simulate(plan, wafer)``: prepare, run the event engine, assemble a ``SimResult``."""

from __future__ import annotations

from waferflow.backend_sim.analysis import (
    core_breakdown,
    critical_path,
    peak_memory,
    uncontended_transit,
)
from waferflow.backend_sim.config import SimConfig
from waferflow.backend_sim.costs import ideal_compute_ps
from waferflow.backend_sim.engine import RawRun, run
from waferflow.backend_sim.network import Prepared, prepare
from waferflow.backend_sim.results import CoreStat, SimResult
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import Wafer


def simulate(plan: Plan, wafer: Wafer, config: SimConfig | None = None) -> SimResult:
    """Run one step of ``plan`` on ``wafer`` through the discrete-event simulator.

    Raises ``VerificationError`` / ``PlanError`` for a malformed plan or one that does
    not fit the wafer (dead cores, bad routes, no path)."""
    cfg = config or SimConfig()
    p = prepare(plan, wafer, cfg)
    raw = run(p)
    return _assemble(plan, wafer, p, raw)


def _link_loads(plan: Plan, p: Prepared) -> tuple[list[int], list[int]]:
    """Payload bytes and busy time (headers included) of every used link."""
    nbytes = [0] * p.n_links
    busy = [0] * p.n_links
    for m in plan.messages:
        links = p.msg_links[m.id]
        if not links:
            continue
        b = m.bytes
        n1 = p.msg_npk[m.id] - 1
        for li, f, g in zip(links, p.msg_ser_full[m.id], p.msg_ser_last[m.id], strict=True):
            nbytes[li] += b
            busy[li] += n1 * f + g
    return nbytes, busy


def _assemble(plan: Plan, wafer: Wafer, p: Prepared, raw: RawRun) -> SimResult:
    step = max(raw.end, default=0)  # the host's sink included: it has received everything
    n_msg = len(plan.messages)
    n_act = len(plan.actors)
    queue = tuple(
        0 if p.msg_local[m] else raw.arrive[m] - raw.data_start[m] - uncontended_transit(p, m)
        for m in range(n_msg)
    )
    peaks = raw.mem_peak
    if peaks is None:
        peaks = peak_memory(plan, p, raw.start, raw.end, raw.data_start, raw.arrive)
    comp, comm, idle = core_breakdown(p, step, raw.start, raw.end, raw.cause_kind)
    cols = wafer.cols
    n_per_core = [len(ids) for ids in p.order]
    cores = tuple(
        CoreStat(
            core=c,
            coord=divmod(c, cols),
            actors=n_per_core[ci],
            compute_ps=comp[ci],
            comm_ps=comm[ci],
            idle_ps=idle[ci],
            peak_mem_bytes=peaks[ci],
        )
        for ci, c in enumerate(p.cores)
    )
    link_bytes, link_busy = _link_loads(plan, p)
    ideal = sum(ideal_compute_ps(a, wafer) for a in plan.actors)
    n_used = sum(1 for c in p.cores if not wafer.is_switch_node(c))  # switches run no compute
    util = ideal / (step * n_used) if step and n_used else 0.0
    n_links = p.n_plan_links
    return SimResult(
        plan=plan,
        wafer=wafer,
        step_time_ps=step,
        actor_start_ps=tuple(raw.start[:n_act]),
        actor_end_ps=tuple(raw.end[:n_act]),
        msg_inject_ps=tuple(raw.inject[:n_msg]),
        msg_data_start_ps=tuple(raw.data_start[:n_msg]),
        msg_arrive_ps=tuple(raw.arrive[:n_msg]),
        msg_queueing_ps=queue,
        msg_hops=tuple(len(links) for links in p.msg_links[:n_msg]),
        cores=cores,
        link_src=tuple(p.link_src[:n_links]),
        link_dst=tuple(p.link_dst[:n_links]),
        link_bytes=tuple(link_bytes[:n_links]),
        link_busy_ps=tuple(link_busy[:n_links]),
        link_d2d=tuple(p.link_d2d[:n_links]),
        critical_path=critical_path(
            plan, p, raw.start, raw.end, raw.cause_kind, raw.cause_id, raw.inject, raw.arrive
        ),
        flop_utilisation=util,
        events=raw.events,
        packet_hops=p.packet_hops(),
        memory_log=tuple((c, tuple(ev)) for c, ev in raw.mem_log or ()),
        link_occupancy=tuple(
            (p.msg_links[m], tuple(raw.occ_start[m]), tuple(raw.occ_end[m])) for m in range(n_msg)
        ),
    )


__all__ = ["simulate"]
