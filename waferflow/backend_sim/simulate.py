"""``simulate(plan, wafer)``: prepare, run the event engine, assemble a ``SimResult``."""

from __future__ import annotations

from dataclasses import replace

from waferflow.backend_sim.analysis import (
    core_breakdown,
    critical_path,
    peak_memory,
)
from waferflow.backend_sim.config import SimConfig
from waferflow.backend_sim.costs import compute_ps, ideal_compute_ps, transit_ps
from waferflow.backend_sim.engine import RawRun, run
from waferflow.backend_sim.network import Prepared, prepare
from waferflow.backend_sim.results import CoreStat, Occupancy, SimResult
from waferflow.backend_sim.utilisation import op_classes
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import Wafer


def simulate(plan: Plan, wafer: Wafer, config: SimConfig | None = None) -> SimResult:
    """Run one step of ``plan`` on ``wafer`` through the discrete-event simulator.

    Raises ``VerificationError`` / ``PlanError`` for a malformed plan or one that does
    not fit the wafer (dead cores, bad routes, no path)."""
    cfg = config or SimConfig()
    p = prepare(plan, wafer, cfg)
    raw = run(p, cfg.engine)
    result = _assemble(plan, wafer, p, raw)
    if cfg.compute is compute_ps:  # the class table explains the default model only
        result = replace(result, op_classes=op_classes(plan, wafer))
    return result


def _network(p: Prepared, raw: RawRun, n_msg: int) -> tuple[tuple[int, ...], list[int], list[int]]:
    """Per message its queueing (arrival past the data start and the closed-form
    transit); per used link its payload bytes and busy time (headers included). Messages
    of the same shape (latencies, serialisations, packets) share one closed form."""
    nbytes = [0] * p.n_links
    busy = [0] * p.n_links
    queue = [0] * n_msg
    transit: dict[tuple, int] = {}
    msg_links, lat, sf, sl, npk = p.msg_links, p.msg_lat, p.msg_ser_full, p.msg_ser_last, p.msg_npk
    arrive, data_start, msg_bytes = raw.arrive, raw.data_start, p.msg_bytes
    for m in range(n_msg):
        links = msg_links[m]
        if not links:
            continue
        f_m, g_m, n = sf[m], sl[m], npk[m]
        key = (lat[m], f_m, g_m, n)
        t = transit.get(key)
        if t is None:
            t = transit[key] = transit_ps(lat[m], f_m, g_m, n)
        queue[m] = arrive[m] - data_start[m] - t
        b = msg_bytes[m]
        n1 = n - 1
        for li, f, g in zip(links, f_m, g_m, strict=True):
            nbytes[li] += b
            busy[li] += n1 * f + g
    return tuple(queue), nbytes, busy


def _assemble(plan: Plan, wafer: Wafer, p: Prepared, raw: RawRun) -> SimResult:
    step = max(raw.end, default=0)  # the host's sink included: it has received everything
    n_msg = len(plan.messages)
    n_act = len(plan.actors)
    queue, link_bytes, link_busy = _network(p, raw, n_msg)
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
        link_occupancy=Occupancy(p.msg_links[:n_msg], raw.occ_ptr, raw.occ_start, raw.occ_end),
    )


__all__ = ["simulate"]
