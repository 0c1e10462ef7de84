"""Derived figures of a schedule, shared by the simulator and the estimator.

Given when every actor started and ended and when every message was injected and
arrived, compute peak memory per core, the critical path and each core's split of
the step into compute, communication wait and idle time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from waferflow.backend_sim.costs import transit_ps
from waferflow.backend_sim.engine import CAUSE_ACTOR, CAUSE_BUFFER, CAUSE_MESSAGE
from waferflow.backend_sim.network import Prepared
from waferflow.ir.plan import Plan


@dataclass(frozen=True, slots=True)
class PathStep:
    """One segment of the critical path: an actor's run or a message's flight."""

    kind: str  # "actor" or "message"
    id: int
    name: str
    start_ps: int
    end_ps: int

    @property
    def duration_ps(self) -> int:
        return self.end_ps - self.start_ps


def peak_memory(
    plan: Plan,
    p: Prepared,
    start: Sequence[int],
    end: Sequence[int],
    data_start: Sequence[int],
    arrive: Sequence[int],
) -> list[int]:
    """Peak bytes per local core: resident ``mem_bytes`` of its actors for the whole
    step, plus live buffers. An actor's output buffer (``out_bytes``) lives from its
    start until it has ended, every remote output message has been delivered and every
    consumer on the same core has ended, except a consumer that recomputes it (a local
    message with ``holds=False``): the value then lives again while that consumer runs.
    A remote message occupies ``bytes`` on the destination core from the start of its
    data until its consumer ends. At equal times, frees come before allocations."""
    n_core = len(p.cores)
    resident = [0] * n_core
    deltas: list[list[tuple[int, int]]] = [[] for _ in range(n_core)]
    actors = plan.actors
    for a in actors:
        ci = p.actor_ci[a.id]
        resident[ci] += a.mem_bytes
        if a.out_bytes:
            t_free = end[a.id]
            for m in p.out_msgs[a.id]:
                dst = p.msg_dst[m]
                if p.msg_local[m] and not plan.messages[m].holds:
                    deltas[ci].append((start[dst], a.out_bytes))  # recomputed for dst
                    deltas[ci].append((end[dst], -a.out_bytes))
                    continue
                t = end[dst] if p.msg_local[m] else arrive[m]
                if t > t_free:
                    t_free = t
            deltas[ci].append((start[a.id], a.out_bytes))
            deltas[ci].append((t_free, -a.out_bytes))
    for m in plan.messages:
        if not p.msg_local[m.id] and m.bytes:
            ci = p.actor_ci[m.dst_actor]
            deltas[ci].append((data_start[m.id], m.bytes))
            deltas[ci].append((end[m.dst_actor], -m.bytes))
    peaks = []
    for ci in range(n_core):
        live = 0
        top = 0
        for _, d in sorted(deltas[ci]):
            live += d
            if live > top:
                top = live
        peaks.append(resident[ci] + top)
    return peaks


def critical_path(
    plan: Plan,
    p: Prepared,
    start: Sequence[int],
    end: Sequence[int],
    cause_kind: Sequence[int],
    cause_id: Sequence[int],
    inject: Sequence[int],
    arrive: Sequence[int],
) -> tuple[PathStep, ...]:
    """Walk back from the last actor to finish through whatever enabled each start:
    the previous actor on the core, or the input message (or the delivery that freed
    an output buffer) and then that message's producer. The host (``backend_sim.host``)
    appears as the actor ``host`` (id -1) and its transfers as messages (id -1)."""
    if not plan.actors:
        return ()
    n_act = len(plan.actors)
    a = max(range(len(end)), key=lambda i: (end[i], -i))
    steps: list[PathStep] = []
    actors = plan.actors

    def name(i: int) -> str:
        return actors[i].name if i < n_act else "host"

    while True:
        aid = a if a < n_act else -1
        if aid >= 0 or end[a] > 0:
            steps.append(PathStep("actor", aid, name(a), start[a], end[a]))
        ck = cause_kind[a]
        if ck == CAUSE_ACTOR:
            a = cause_id[a]
        elif ck in (CAUSE_MESSAGE, CAUSE_BUFFER):
            m = cause_id[a]
            src = p.msg_src[m]
            label = f"{name(src)}->{name(p.msg_dst[m])}"
            mid = m if m < len(plan.messages) else -1
            steps.append(PathStep("message", mid, label, inject[m], arrive[m]))
            a = src
        else:
            break
    steps.reverse()
    return tuple(steps)


def core_breakdown(
    p: Prepared,
    step_ps: int,
    start: Sequence[int],
    end: Sequence[int],
    cause_kind: Sequence[int],
) -> tuple[list[int], list[int], list[int]]:
    """Per local core: compute, communication wait, idle (ps; they sum to the step).

    The gap before an actor counts as communication wait when an input message was
    the last thing it waited for; everything else the core does not compute (waiting
    for an output buffer, the tail after its last actor) is idle."""
    n_core = len(p.cores)
    comp = [0] * n_core
    comm = [0] * n_core
    for ci, ids in enumerate(p.order[:n_core]):  # the plan's cores (not the host)
        avail = 0
        for a in ids:
            comp[ci] += end[a] - start[a]
            if cause_kind[a] == CAUSE_MESSAGE:
                comm[ci] += start[a] - avail
            avail = end[a]
    idle = [step_ps - comp[ci] - comm[ci] for ci in range(n_core)]
    return comp, comm, idle


def uncontended_transit(p: Prepared, m: int) -> int:
    """The closed-form transit time of message ``m`` (0 for same-core messages)."""
    if p.msg_local[m]:
        return 0
    return transit_ps(p.msg_lat[m], p.msg_ser_full[m], p.msg_ser_last[m], p.msg_npk[m])


def handshake_ps(p: Prepared, m: int) -> int:
    """req there and ack back, before data flows (0 without handshake)."""
    if p.msg_local[m] or not p.flow.handshake:
        return 0
    return 2 * sum(p.msg_lat[m])


__all__ = [
    "PathStep",
    "core_breakdown",
    "critical_path",
    "handshake_ps",
    "peak_memory",
    "uncontended_transit",
]
