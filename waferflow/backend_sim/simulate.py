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
from waferflow.backend_sim.results import CoreStat, LinkStat, SimResult
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


def _link_stats(plan: Plan, wafer: Wafer, p: Prepared, step: int) -> tuple[LinkStat, ...]:
    n_links = p.n_links
    nbytes = [0] * n_links
    busy = [0] * n_links
    for m in plan.messages:
        links = p.msg_links[m.id]
        if not links:
            continue
        n = p.msg_npk[m.id]
        sf = p.msg_ser_full[m.id]
        sl = p.msg_ser_last[m.id]
        for j, li in enumerate(links):
            nbytes[li] += m.bytes
            busy[li] += (n - 1) * sf[j] + sl[j]
    cols = wafer.cols
    return tuple(
        LinkStat(
            index=i,
            src=divmod(p.link_src[i], cols),
            dst=divmod(p.link_dst[i], cols),
            bytes=nbytes[i],
            busy_ps=busy[i],
            d2d=p.link_d2d[i],
            utilisation=busy[i] / step if step else 0.0,
        )
        for i in range(n_links)
    )


def _assemble(plan: Plan, wafer: Wafer, p: Prepared, raw: RawRun) -> SimResult:
    step = max(raw.end, default=0)
    n_msg = len(plan.messages)
    queue = tuple(
        0
        if p.msg_local[m]
        else raw.arrive[m] - raw.data_start[m] - uncontended_transit(p, m)
        for m in range(n_msg)
    )
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
    ideal = sum(ideal_compute_ps(a, wafer) for a in plan.actors)
    util = ideal / (step * len(p.cores)) if step and p.cores else 0.0
    return SimResult(
        plan=plan,
        wafer=wafer,
        step_time_ps=step,
        actor_start_ps=tuple(raw.start),
        actor_end_ps=tuple(raw.end),
        msg_inject_ps=tuple(raw.inject),
        msg_data_start_ps=tuple(raw.data_start),
        msg_arrive_ps=tuple(raw.arrive),
        msg_queueing_ps=queue,
        msg_hops=tuple(len(links) for links in p.msg_links),
        cores=cores,
        links=_link_stats(plan, wafer, p, step),
        critical_path=critical_path(
            plan, raw.start, raw.end, raw.cause_kind, raw.cause_id, raw.inject, raw.arrive
        ),
        flop_utilisation=util,
        events=raw.events,
        packet_hops=p.packet_hops(),
        link_occupancy=tuple(
            (p.msg_links[m], tuple(raw.occ_start[m]), tuple(raw.occ_end[m]))
            for m in range(n_msg)
        ),
    )


__all__ = ["simulate"]
