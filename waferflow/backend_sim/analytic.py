"""The analytical estimator: the simulator's schedule without link contention.

Every message takes its closed-form time (``costs.transit_ps``, plus req / ack when
the wafer shakes hands); actors are list-scheduled in a topological order of
messages + per-core order, each starting at the latest of: its core's previous actor
ending, its inputs arriving, and (with bounded output buffers) an earlier buffer on
its core being freed. Stream limits (``max_streams``) are contention too and are not
modelled here. On a plan where no message is delayed by another, the estimate is
exactly the event simulation's result; otherwise ``Estimate.gap`` says by how much
they differ.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field

from waferflow.backend_sim.analysis import (
    PathStep,
    critical_path,
    handshake_ps,
    peak_memory,
    uncontended_transit,
)
from waferflow.backend_sim.config import SimConfig, check_call, for_wafer
from waferflow.backend_sim.costs import ps_to_seconds
from waferflow.backend_sim.engine import CAUSE_ACTOR, CAUSE_BUFFER, CAUSE_MESSAGE, CAUSE_NONE
from waferflow.backend_sim.network import prepare
from waferflow.backend_sim.results import SimResult
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import Wafer
from waferflow.perf import gc_paused


@dataclass(frozen=True)
class Estimate:
    """The contention-free schedule (times in ps, tuples indexed by id)."""

    plan: Plan = field(repr=False)
    wafer: Wafer = field(repr=False)
    step_time_ps: int
    actor_start_ps: tuple[int, ...] = field(repr=False)
    actor_end_ps: tuple[int, ...] = field(repr=False)
    msg_arrive_ps: tuple[int, ...] = field(repr=False)
    peak_mem_bytes: tuple[int, ...] = field(repr=False)  # aligned with plan.cores
    critical_path: tuple[PathStep, ...] = field(repr=False)

    @property
    def step_time(self) -> float:
        return ps_to_seconds(self.step_time_ps)

    @property
    def peak_memory(self) -> int:
        return max(self.peak_mem_bytes, default=0)

    def gap(self, sim: SimResult) -> float:
        """``(simulated - estimated) / simulated`` step time: the share of the step
        lost to contention (0 when they agree)."""
        if sim.step_time_ps == 0:
            return 0.0
        return (sim.step_time_ps - self.step_time_ps) / sim.step_time_ps

    def compare(self, sim: SimResult) -> str:
        return (
            f"estimate {self.step_time * 1e6:.3f} us vs simulated {sim.step_time * 1e6:.3f} us: "
            f"gap {100 * self.gap(sim):.2f} % (link contention "
            f"{sim.total_queueing_ps / 1e6:.3f} us summed over messages)"
        )


def estimate(plan: Plan, wafer: Wafer, config: SimConfig | None = None) -> Estimate:
    check_call(plan, wafer, config)
    with gc_paused():
        s = _schedule(plan, wafer, for_wafer(config, wafer))
        p, start, end, cause_kind, cause_id, inject, data_start, arrive = s
        n_act, n_pm = len(plan.actors), len(plan.messages)  # then the host's (backend_sim.host)
        return Estimate(
            plan=plan,
            wafer=wafer,
            step_time_ps=max(end, default=0),
            actor_start_ps=tuple(start[:n_act]),
            actor_end_ps=tuple(end[:n_act]),
            msg_arrive_ps=tuple(arrive[:n_pm]),
            peak_mem_bytes=tuple(peak_memory(plan, p, start, end, data_start, arrive)),
            critical_path=critical_path(plan, p, start, end, cause_kind, cause_id, inject, arrive),
        )


def estimate_step(plan: Plan, wafer: Wafer, config: SimConfig | None = None) -> float:
    """``estimate(...).step_time`` alone (no memory, no critical path): for searches."""
    check_call(plan, wafer, config)
    with gc_paused():
        end = _schedule(plan, wafer, for_wafer(config, wafer))[2]
    return ps_to_seconds(max(end, default=0))


def _schedule(plan: Plan, wafer: Wafer, cfg: SimConfig) -> tuple:
    """The contention-free list schedule: ``(prepared, start, end, cause kind, cause
    id, inject, data start, arrive)``."""
    p = prepare(plan, wafer, cfg)
    n = len(p.dur)  # the plan's actors, then the host's (backend_sim.host)
    n_msg = len(p.msg_src)
    nbuf = p.flow.buffers_per_core
    # predecessor on the core and inputs, for the topological list scheduling
    prev_on_core = [-1] * n
    next_on_core = [-1] * n
    for ids in p.order:
        for a, b in itertools.pairwise(ids):
            prev_on_core[b] = a
            next_on_core[a] = b
    inputs: list[list[int]] = [[] for _ in range(n)]
    for m in range(n_msg):
        inputs[p.msg_dst[m]].append(m)
    indeg = [len(inputs[a]) + (prev_on_core[a] >= 0) for a in range(n)]
    needs_buf = [False] * n
    if nbuf > 0:
        for a in range(n):
            needs_buf[a] = any(not p.msg_local[m] for m in p.out_msgs[a])

    start = [0] * n
    end = [0] * n
    cause_kind = [CAUSE_NONE] * n
    cause_id = [-1] * n
    inject = [0] * n_msg
    data_start = [0] * n_msg
    arrive = [0] * n_msg
    held: list[list[tuple[int, int]]] = [[] for _ in p.order]  # (release time, message)

    ready = deque(a for a in range(n) if indeg[a] == 0)
    while ready:
        a = ready.popleft()
        ci = p.actor_ci[a]
        t, ck, cid = 0, CAUSE_NONE, -1
        pa = prev_on_core[a]
        if pa >= 0:
            t, ck, cid = end[pa], CAUSE_ACTOR, pa
        for m in inputs[a]:
            if arrive[m] > t:
                t, ck, cid = arrive[m], CAUSE_MESSAGE, m
        if needs_buf[a] and len(held[ci]) == nbuf:
            r, rm = heapq.heappop(held[ci])
            if r > t:
                t, ck, cid = r, CAUSE_BUFFER, rm
        start[a] = t
        end[a] = t + p.dur[a]
        cause_kind[a], cause_id[a] = ck, cid
        release, release_msg = end[a], -1
        for m in p.out_msgs[a]:
            inject[m] = end[a]
            data_start[m] = end[a] + handshake_ps(p, m)
            arrive[m] = data_start[m] + uncontended_transit(p, m)
            if not p.msg_local[m] and arrive[m] >= release:
                release, release_msg = arrive[m], m
            d = p.msg_dst[m]
            indeg[d] -= 1
            if indeg[d] == 0:
                ready.append(d)
        if needs_buf[a]:
            heapq.heappush(held[ci], (release, release_msg))
        b = next_on_core[a]
        if b >= 0:
            indeg[b] -= 1
            if indeg[b] == 0:
                ready.append(b)

    return p, start, end, cause_kind, cause_id, inject, data_start, arrive


__all__ = ["Estimate", "estimate", "estimate_step"]
