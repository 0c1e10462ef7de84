"""Derived figures of a schedule, shared by the simulator and the estimator.

Given when every actor started and ended and when every message was injected and
arrived, compute peak memory per core, the critical path and each core's split of
the step into compute, communication wait and idle time.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np

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


def memory_events(
    plan: Plan,
    start: Sequence[int],
    end: Sequence[int],
    data_start: Sequence[int],
    arrive: Sequence[int],
) -> tuple[dict[int, int], dict[int, list[tuple[int, int]]]]:
    """Per core that runs actors: its resident bytes (``mem_bytes`` of its actors, held
    the whole step) and its buffer allocations and frees as ``(time_ps, +-bytes)``.

    An actor's output buffer (``out_bytes``) lives from its start until it has ended,
    every remote output message has been delivered and every consumer on the same core
    has ended, except a consumer that recomputes it (a local message with
    ``holds=False``): the value then lives again while that consumer runs. A remote
    message occupies ``bytes`` on the destination core from the start of its data until
    its consumer ends."""
    actors = plan.actors
    core_of = [a.core for a in actors]
    out_msgs: list[list[int]] = [[] for _ in actors]
    for m in plan.messages:
        out_msgs[m.src_actor].append(m.id)
    resident: dict[int, int] = {}
    deltas: dict[int, list[tuple[int, int]]] = {}
    for a in actors:
        resident[a.core] = resident.get(a.core, 0) + a.mem_bytes
        own = deltas.setdefault(a.core, [])
        if not a.out_bytes:
            continue
        t_free = end[a.id]
        for mid in out_msgs[a.id]:
            m = plan.messages[mid]
            dst = m.dst_actor
            local = core_of[dst] == a.core
            if local and not m.holds:
                own.append((start[dst], a.out_bytes))  # recomputed for dst
                own.append((end[dst], -a.out_bytes))
                continue
            t = end[dst] if local else arrive[mid]
            if t > t_free:
                t_free = t
        own.append((start[a.id], a.out_bytes))
        own.append((t_free, -a.out_bytes))
    for m in plan.messages:
        dst_core = core_of[m.dst_actor]
        if dst_core != core_of[m.src_actor] and m.bytes:
            deltas[dst_core].append((data_start[m.id], m.bytes))
            deltas[dst_core].append((end[m.dst_actor], -m.bytes))
    return resident, deltas


def peak_memory(
    plan: Plan,
    p: Prepared,
    start: Sequence[int],
    end: Sequence[int],
    data_start: Sequence[int],
    arrive: Sequence[int],
) -> list[int]:
    """Peak bytes per local core (``p.cores`` order): resident bytes plus the most live
    buffers at once (``memory_events``). At equal times, frees come before allocations.
    Computed on int64 arrays (``_peak_memory_arrays``, the same figures) when every
    time and size fits one."""
    if times_fit_int64(end, arrive):
        return _peak_memory_arrays(plan, p, start, end, data_start, arrive)
    return _peak_memory_loop(plan, p, start, end, data_start, arrive)


def _peak_memory_loop(
    plan: Plan,
    p: Prepared,
    start: Sequence[int],
    end: Sequence[int],
    data_start: Sequence[int],
    arrive: Sequence[int],
) -> list[int]:
    resident, deltas = memory_events(plan, start, end, data_start, arrive)
    peaks = []
    for core in p.cores:
        live = 0
        top = 0
        for _, d in sorted(deltas.get(core, ())):
            live += d
            if live > top:
                top = live
        peaks.append(resident.get(core, 0) + top)
    return peaks


_INT64_SAFE = 1 << 62


def _peak_memory_arrays(
    plan: Plan,
    p: Prepared,
    start: Sequence[int],
    end: Sequence[int],
    data_start: Sequence[int],
    arrive: Sequence[int],
) -> list[int]:
    """``peak_memory`` vectorised: the events of ``memory_events`` as arrays, sorted by
    (core, time, delta), summed per core."""
    resident, ev_core, _, ev_d = memory_event_arrays(plan, start, end, data_start, arrive)
    live = np.cumsum(ev_d)
    top: dict[int, int] = {}
    if len(ev_core):
        first = np.flatnonzero(np.r_[True, ev_core[1:] != ev_core[:-1]])
        base = np.r_[0, live[first[1:] - 1]]  # live bytes before each core's first event
        peaks_in = np.maximum.reduceat(live, first) - base
        top = dict(zip(ev_core[first].tolist(), np.maximum(peaks_in, 0).tolist(), strict=True))
    return [resident.get(c, 0) + top.get(c, 0) for c in p.cores]


def memory_event_arrays(
    plan: Plan,
    start: Sequence[int],
    end: Sequence[int],
    data_start: Sequence[int],
    arrive: Sequence[int],
) -> tuple[dict[int, int], np.ndarray, np.ndarray, np.ndarray]:
    """``memory_events`` as int64 arrays (times below ``_INT64_SAFE``): per core that
    runs actors its resident bytes, then every allocation and free as (core, time_ps,
    +-bytes), sorted by core, time and delta (frees first at equal times)."""
    n_act = len(plan.actors)
    i64 = np.int64
    core = np.fromiter((a.core for a in plan.actors), i64, n_act)
    out_b = np.fromiter((a.out_bytes for a in plan.actors), i64, n_act)
    mem_b = np.fromiter((a.mem_bytes for a in plan.actors), i64, n_act)
    msgs = plan.messages
    n_msg = len(msgs)
    src = np.fromiter((m.src_actor for m in msgs), i64, n_msg)
    dst = np.fromiter((m.dst_actor for m in msgs), i64, n_msg)
    nbytes = np.fromiter((m.bytes for m in msgs), i64, n_msg)
    holds = np.fromiter((m.holds for m in msgs), np.bool_, n_msg)
    st = np.asarray(start[:n_act], dtype=i64)
    en = np.asarray(end[:n_act], dtype=i64)
    arr = np.asarray(arrive[:n_msg], dtype=i64)
    ds = np.asarray(data_start[:n_msg], dtype=i64)
    local = core[src] == core[dst]
    rebuilt = local & ~holds  # recomputed by the consumer: its own allocation
    # an output buffer is freed when its actor, remote deliveries and local readers are done
    t_free = en.copy()
    keep = ~rebuilt
    np.maximum.at(t_free, src[keep], np.where(local, en[dst], arr)[keep])
    has = out_b > 0
    reb = rebuilt & (out_b[src] > 0)
    remote = ~local & (nbytes > 0)
    ev_core = np.concatenate([core[has], core[has], core[src[reb]], core[src[reb]],
                              core[dst[remote]], core[dst[remote]]])  # fmt: skip
    ev_t = np.concatenate([st[has], t_free[has], st[dst[reb]], en[dst[reb]],
                           ds[remote], en[dst[remote]]])  # fmt: skip
    ev_d = np.concatenate([out_b[has], -out_b[has], out_b[src[reb]], -out_b[src[reb]],
                           nbytes[remote], -nbytes[remote]])  # fmt: skip
    order = np.lexsort((ev_d, ev_t, ev_core))
    cores_used, res_idx = np.unique(core, return_inverse=True)
    np_res = np.zeros(len(cores_used), dtype=i64)
    np.add.at(np_res, res_idx, mem_b)
    resident = dict(zip(cores_used.tolist(), np_res.tolist(), strict=True))
    return resident, ev_core[order], ev_t[order], ev_d[order]


def times_fit_int64(*times: Sequence[int]) -> bool:
    """Whether every time (ps) is small enough for the int64 array paths."""
    return all(max(t, default=0) < _INT64_SAFE for t in times)


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


class WaitKind(Enum):
    INPUT = "input"  # an input message from another core still in flight
    BUFFER = "buffer"  # inputs in, no free output buffer on the core yet


@dataclass(frozen=True, slots=True)
class Wait:
    """A stretch of time a core spent waiting to start ``actor`` (its next in order)."""

    core: int
    start_ps: int
    end_ps: int
    actor: int
    kind: WaitKind
    message: int = -1  # INPUT: the last of the actor's inputs to arrive


def core_waits(
    plan: Plan, start: Sequence[int], end: Sequence[int], arrive: Sequence[int]
) -> list[Wait]:
    """Every gap before an actor that its core spent waiting, in core then time order:
    for its last input from another core (INPUT), then, once the inputs are in, for an
    output buffer (BUFFER). The rest of a core's time off compute is idle: before its
    first actor with nothing to wait for, and after its last. Found on int64 arrays
    (``_core_waits_arrays``, the same waits) when the times fit them."""
    if times_fit_int64(end, arrive):
        return _core_waits_arrays(plan, start, end, arrive)
    return _core_waits_loop(plan, start, end, arrive)


def _core_waits_arrays(
    plan: Plan, start: Sequence[int], end: Sequence[int], arrive: Sequence[int]
) -> list[Wait]:
    i64 = np.int64
    actors, msgs = plan.actors, plan.messages
    n_act, n_msg = len(actors), len(msgs)
    core = np.fromiter((a.core for a in actors), i64, n_act)
    src = np.fromiter((m.src_actor for m in msgs), i64, n_msg)
    dst = np.fromiter((m.dst_actor for m in msgs), i64, n_msg)
    st = np.asarray(start[:n_act], dtype=i64)
    en = np.asarray(end[:n_act], dtype=i64)
    arr = np.asarray(arrive[:n_msg], dtype=i64)
    # each actor's last input from another core: the latest arrival (ties: higher id)
    remote = np.flatnonzero(core[src] != core[dst])
    by = remote[np.lexsort((remote, arr[remote], dst[remote]))]
    ends = np.flatnonzero(np.r_[dst[by][1:] != dst[by][:-1], True]) if len(by) else by
    last = np.full(n_act, -1, dtype=i64)
    last[dst[by[ends]]] = by[ends]
    # actors in core order, and when each core was free before each (its earlier ends)
    seq = np.fromiter(itertools.chain.from_iterable(ids for _, ids in plan.order), i64)
    seq_core = np.repeat([c for c, _ in plan.order], [len(ids) for _, ids in plan.order])
    avail = np.zeros(len(seq), dtype=i64)
    at = 0
    for _, ids in plan.order:
        k = len(ids)
        if k > 1:
            avail[at + 1 : at + k] = np.maximum.accumulate(np.maximum(en[seq[at : at + k - 1]], 0))
        at += k
    s_a = st[seq]
    gap = s_a > avail
    m = last[seq]
    got = np.zeros(len(seq), dtype=i64)
    got[m >= 0] = arr[m[m >= 0]]
    inp = gap & (m >= 0) & (got > avail)
    ready = np.where(inp, np.minimum(got, s_a), avail)
    buf = gap & (s_a > ready)
    waits: list[Wait] = []
    pick = np.flatnonzero(inp | buf)
    cols = (seq_core, seq, avail, ready, s_a, m, inp, buf)
    for c, a, t0, t1, t2, msg, i, b in zip(*(x[pick].tolist() for x in cols), strict=True):
        if i:
            waits.append(Wait(c, t0, t1, a, WaitKind.INPUT, msg))
        if b:
            waits.append(Wait(c, t1, t2, a, WaitKind.BUFFER))
    return waits


def _core_waits_loop(
    plan: Plan, start: Sequence[int], end: Sequence[int], arrive: Sequence[int]
) -> list[Wait]:
    actors = plan.actors
    incoming: dict[int, list[int]] = {}
    for m in plan.messages:
        if actors[m.src_actor].core != actors[m.dst_actor].core:
            incoming.setdefault(m.dst_actor, []).append(m.id)
    waits: list[Wait] = []
    for core, ids in plan.order:
        avail = 0
        for a in ids:
            if start[a] > avail:
                ready = avail
                msgs = incoming.get(a)
                if msgs:
                    last = max(msgs, key=lambda m: (arrive[m], m))
                    if arrive[last] > avail:
                        ready = min(arrive[last], start[a])
                        waits.append(Wait(core, avail, ready, a, WaitKind.INPUT, last))
                if start[a] > ready:
                    waits.append(Wait(core, ready, start[a], a, WaitKind.BUFFER))
            avail = max(avail, end[a])
    return waits


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
    "Wait",
    "WaitKind",
    "core_breakdown",
    "core_waits",
    "critical_path",
    "handshake_ps",
    "memory_events",
    "peak_memory",
    "uncontended_transit",
]
