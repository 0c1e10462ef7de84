"""``simulate(plan, wafer)``: prepare, run the event engine, assemble a ``SimResult``.

``run_plan`` stops before the last step: its ``Run`` knows the step time and assembles
the full ``SimResult`` only when asked (``Run.result``), so that a caller comparing
several plans (placement) pays for the figures of the one it keeps only.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from waferflow.backend_sim.analysis import (
    core_breakdown,
    critical_path,
    peak_memory,
)
from waferflow.backend_sim.config import SimConfig, check_call, for_wafer
from waferflow.backend_sim.costs import compute_ps, ideal_compute_ps, ps_to_seconds, transit_ps
from waferflow.backend_sim.engine import RawRun, run
from waferflow.backend_sim.network import Prepared, prepare
from waferflow.backend_sim.results import CoreStat, Occupancy, SimResult
from waferflow.backend_sim.utilisation import op_classes
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import Wafer
from waferflow.perf import gc_paused


@dataclass(eq=False)
class Run:
    """One simulated step whose ``SimResult`` is assembled on demand (once)."""

    plan: Plan
    wafer: Wafer
    config: SimConfig
    prepared: Prepared = field(repr=False)
    raw: RawRun = field(repr=False)
    _result: SimResult | None = field(default=None, repr=False)

    @property
    def step_time_ps(self) -> int:
        return max(self.raw.end, default=0)

    @property
    def step_time(self) -> float:
        """Seconds per step."""
        return ps_to_seconds(self.step_time_ps)

    def result(self, plan: Plan | None = None) -> SimResult:
        """The full result. ``plan`` may replace the plan that ran by an equal one that
        only spells out the routes the simulation took (``passes.route`` in the
        simulator's order): the result then refers to it."""
        if self._result is None or (plan is not None and plan is not self._result.plan):
            with gc_paused():
                result = _assemble(plan or self.plan, self.wafer, self.prepared, self.raw)
            if self.config.compute is compute_ps:  # the class table explains the default model
                result = replace(result, op_classes=op_classes(result.plan, self.wafer))
            self._result = result
        return self._result


def run_plan(plan: Plan, wafer: Wafer, config: SimConfig | None = None) -> Run:
    """Prepare and run one step of ``plan`` on ``wafer``, leaving the assembly of its
    ``SimResult`` to ``Run.result`` (``simulate`` does both)."""
    check_call(plan, wafer, config)
    cfg = for_wafer(config, wafer)
    with gc_paused():
        p = prepare(plan, wafer, cfg)
        raw = run(p, cfg.engine)
    return Run(plan, wafer, cfg, p, raw)


def simulate(plan: Plan, wafer: Wafer, config: SimConfig | None = None) -> SimResult:
    """Run one step of ``plan`` on ``wafer`` through the discrete-event simulator.

    Raises ``VerificationError`` / ``PlanError`` for a malformed plan or one that does
    not fit the wafer (dead cores, bad routes, no path)."""
    return run_plan(plan, wafer, config).result()


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


__all__ = ["Run", "run_plan", "simulate"]
