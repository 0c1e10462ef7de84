"""The discrete-event engine: one heap of ``(time_ps, seq, x, k, code)`` events.

``seq`` is owned by the engine and increases with every push, so events at the same
time run in the order they were scheduled: the run is deterministic.

Network model (closed form in ``costs.transit_ps``, derivation in docs/simulator.md):
a message is cut into packets; each directed link serves one packet at a time in
arrival order (FIFO, ties by ``seq``), for ``packet / bandwidth``; the packet then
takes the link's latency to reach the next core, which forwards it once it has
arrived whole (store-and-forward per packet, pipelined across hops). A packet
reserves its next link (``start = max(now, link free)``) in the event of its arrival
at the core before it; events run in time order, so reservations are FIFO. That is
at most one event per packet per hop, and none for the final hop of any packet but
the last: the destination only cares when the whole message is there. A packet whose
next arrival is strictly earlier than every queued event skips the heap, and packets
on a message's first link are queued one after the other (one heap entry per
message there, however long it is); neither changes the order of events.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass
from heapq import heappop, heappush

from waferflow.backend_sim.config import ENGINES
from waferflow.backend_sim.memory import MemoryRun
from waferflow.backend_sim.network import Prepared
from waferflow.errors import ConfigError, PlanError
from waferflow.progress import phase

# Events are (time_ps, seq, x, k, code). code > 0: packet k of message x arrived at
# the core after `code` hops. Otherwise code names the event and x is its subject.
_END = 0  # actor x finished
_ARRIVE = -1  # message x fully delivered
_REQ = -2  # req of message x reached its destination
_DATA = -3  # message x may start sending data

# why an actor started when it did (the last condition to be met)
CAUSE_NONE = 0  # at time zero
CAUSE_ACTOR = 1  # the previous actor on the core finished (id = that actor)
CAUSE_MESSAGE = 2  # an input message arrived (id = the message)
CAUSE_BUFFER = 3  # an output buffer was freed by a delivery (id = the message)
CAUSE_MEMORY = 4  # memory was freed ([memory] model), so it could be admitted


@dataclass(slots=True)
class RawRun:
    """What the engine records (ps; indexed by actor / message id). The per-hop
    figures of all messages are in one list each: message m's hops are
    ``occ_ptr[m]:occ_ptr[m + 1]``."""

    start: list[int]
    end: list[int]
    cause_kind: list[int]
    cause_id: list[int]
    inject: list[int]  # the producer finished
    data_start: list[int]  # data began to flow (after handshake / stream slots)
    arrive: list[int]
    occ_ptr: list[int]  # per message, where its hops begin in occ_start / occ_end
    occ_start: list[int]  # per hop: the message's first packet starts on the link
    occ_end: list[int]  # per hop: the message's last packet leaves the link
    events: int
    mem_peak: list[int] | None = None  # per plan core, bytes ([memory] model only)
    mem_log: list[tuple[int, list[tuple[int, int]]]] | None = None  # per core: (ps, +-bytes)


def run(p: Prepared, engine: str = "auto") -> RawRun:
    """Run the event loop: compiled (``engine_jit``, numba) or pure Python, which give
    the same run event for event. ``auto`` compiles when it can: numba is installed,
    the wafer has no memory model (``[memory]`` runs in Python) and no time can
    overflow 64 bits; ``compiled`` insists (a ``ConfigError`` says why it cannot).
    Progress (``waferflow.progress``, shown only when a caller asks) marks the run as
    one phase of ``len(p.dur)`` actors; its heartbeat shows life during the loop."""
    with phase("simulate", total=len(p.dur), unit="actors") as shown:
        raw = _run(p, engine)
        shown.update(len(p.dur))
    return raw


def _run(p: Prepared, engine: str) -> RawRun:
    if engine not in ENGINES:
        raise ConfigError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")
    if engine != "python":
        from waferflow.backend_sim import engine_jit

        why = ""
        if not engine_jit.AVAILABLE:
            why = "numba is not installed (pip install numba)"
        elif p.mem is not None:
            why = "the wafer's memory model ([memory]) runs in the pure-Python engine only"
        else:
            flat = engine_jit.flatten(p)
            if flat is not None and engine_jit.fits_int64(p, flat):
                return _run_compiled(p, flat)
            why = "event times could exceed 2**62 ps, past the compiled engine's int64"
        if engine == "compiled":
            raise ConfigError(f"the compiled engine cannot run this simulation: {why}")
    return run_python(p)


def _run_compiled(p: Prepared, flat: object) -> RawRun:
    from waferflow.backend_sim import engine_jit

    assert isinstance(flat, engine_jit.Flat)
    ended, events, out = engine_jit.run_flat(p, flat)
    end = out["end"].tolist()
    if ended < len(end):
        _deadlock(p, end, None)
    return RawRun(
        start=out["start"].tolist(),
        end=end,
        cause_kind=out["cause_kind"].tolist(),
        cause_id=out["cause_id"].tolist(),
        inject=out["inject"].tolist(),
        data_start=out["data_start"].tolist(),
        arrive=out["arrive"].tolist(),
        occ_ptr=flat.hop_ptr.tolist(),
        occ_start=out["occ_s"].tolist(),
        occ_end=out["occ_e"].tolist(),
        events=events,
    )


def _deadlock(
    p: Prepared, end: list[int], mem: MemoryRun | None, held: list[int] | None = None
) -> None:
    """``held``: cores whose output buffers are all held by messages that wait for
    their destinations to be admitted (a memory window with ``flow.buffers_per_core``)."""
    n_act = len(end)
    stuck = [a for a in range(n_act) if end[a] < 0]
    why = ""
    if mem is not None:
        short = [x for x in (mem.stuck(ci) for ci in range(len(p.cores))) if x]
        why = f"; memory: {'; '.join(short[:3])}" if short else ""
    if held:
        cores = ", ".join(str(p.cores[ci]) for ci in held[:3])
        why += (
            f"; the output buffers of core(s) {cores} (flow.buffers_per_core = "
            f"{p.flow.buffers_per_core}) are all held by messages waiting for their "
            "destinations to enter a window (memory.lookahead), which waits on those cores: "
            "raise flow.buffers_per_core or memory.lookahead"
        )
    raise PlanError(
        f"simulation stopped with {len(stuck)} actor(s) never run (e.g. {stuck[:5]}); "
        f"the plan deadlocks{why}"
    )


def run_python(p: Prepared) -> RawRun:
    """The event loop in pure Python (the reference the compiled loop follows)."""
    n_act = len(p.dur)
    n_msg = len(p.msg_src)
    n_core = len(p.order)
    fl = p.flow
    nbuf = fl.buffers_per_core
    handshake = fl.handshake
    retry = fl.retry_ps
    cap = p.stream_cap  # per core; 0 = unlimited
    streams = fl.max_streams > 0
    lead = p.msg_lead  # per message, its broadcast's first (as split by launch)
    first = p.msg_lead  # ... as the plan has it (which message launches the broadcast)
    members = p.lead_members

    dur = p.dur
    actor_ci = p.actor_ci
    order = p.order
    out_msgs = p.out_msgs
    msg_src = p.msg_src
    msg_dst = p.msg_dst
    msg_local = p.msg_local

    start = [-1] * n_act
    end = [-1] * n_act
    cause_kind = [CAUSE_NONE] * n_act
    cause_id = [-1] * n_act
    inject = [-1] * n_msg
    data_start = [-1] * n_msg
    arrive = [-1] * n_msg

    pending = [0] * n_act  # input messages not yet arrived
    for d in msg_dst:
        pending[d] += 1
    rem_out = [0] * n_act  # remote output messages not yet delivered
    for m in range(n_msg):
        if not msg_local[m]:
            rem_out[msg_src[m]] += 1
    needs_buf = [nbuf > 0 and r > 0 for r in rem_out]
    bufs_free = [nbuf] * n_core
    running = [False] * n_core
    ptr = [0] * n_core

    # per message: (links, lat, ser_full, ser_last, last packet index, hops, occ_s, occ_e)
    occ_start: list[list[int]] = []
    occ_end: list[list[int]] = []
    rec: list[tuple] = []
    for m in range(n_msg):
        links = p.msg_links[m]
        h = len(links)
        os_ = [0] * h
        oe = [0] * h
        occ_start.append(os_)
        occ_end.append(oe)
        rec.append(
            (
                links,
                p.msg_lat[m],
                p.msg_ser_full[m],
                p.msg_ser_last[m],
                p.msg_npk[m] - 1,
                h,
                os_,
                oe,
            )
        )
    sum_lat = [sum(r[1]) for r in rec]
    msg_src_ci = [actor_ci[msg_src[m]] for m in range(n_msg)]
    msg_dst_ci = [actor_ci[msg_dst[m]] for m in range(n_msg)]
    req_at = [0] * n_msg  # when the first req reached the destination
    out_left = [0] * n_msg  # per broadcast (first message): members not yet delivered
    out_used = [0] * n_core
    in_used = [0] * n_core
    out_wait: list[deque[int]] = [deque() for _ in range(n_core)]
    in_wait: list[deque[int]] = [deque() for _ in range(n_core)]

    mem = MemoryRun(p, p.mem) if p.mem is not None else None
    admitted = mem.admitted if mem is not None else []
    parked: list[list[int]] = [[] for _ in range(n_act)] if mem is not None else []

    free = [0] * p.n_links  # when each link finishes its last reserved packet
    heap: list[tuple] = []
    push = heappush
    pop = heappop
    seq = 0
    ended = 0

    def try_start(ci: int, t: int, ck: int, cid: int) -> None:
        nonlocal seq
        if running[ci]:
            return
        i = ptr[ci]
        oc = order[ci]
        if i >= len(oc):
            return
        a = oc[i]
        if pending[a]:
            return
        if mem is not None and not admitted[a]:
            return
        if needs_buf[a]:
            if bufs_free[ci] == 0:
                return
            bufs_free[ci] -= 1
        running[ci] = True
        ptr[ci] = i + 1
        start[a] = t
        cause_kind[a] = ck
        cause_id[a] = cid
        push(heap, (t + dur[a], seq, a, 0, _END))
        seq += 1

    def grant(m: int, t: int) -> None:
        """The destination accepts message m at t (the ack then travels back)."""
        nonlocal seq
        ts = t + sum_lat[m] if handshake else t
        data_start[m] = ts
        push(heap, (ts, seq, m, 0, _DATA))
        seq += 1

    def request_in(m: int, t: int) -> None:
        """Message m asks its destination for an incoming stream at t."""
        if streams:
            d = msg_dst_ci[m]
            c = cap[d]
            if c and in_used[d] >= c:
                in_wait[d].append(m)
                return
            in_used[d] += 1
        grant(m, t)

    def go_out(m: int, t: int) -> None:
        """Message m holds an outgoing stream from t: send req (or ask directly)."""
        nonlocal seq
        if handshake:
            ta = t + sum_lat[m]
            req_at[m] = ta
            push(heap, (ta, seq, m, 0, _REQ))
            seq += 1
        else:
            request_in(m, t)

    def stream_out(m: int, t: int) -> None:
        """Broadcast (or lone message) m has its outgoing stream: every member goes."""
        group = members.get(m)
        if group is None:
            out_left[m] = 1
            go_out(m, t)
        else:
            out_left[m] = len(group)
            for x in group:
                go_out(x, t)

    def resend_at(m: int, t: int) -> int:
        """The first resent req of waiting message m at or after t."""
        if handshake and retry > 0:
            r0 = req_at[m]
            return r0 + -(-(t - r0) // retry) * retry
        return t

    def launch(m: int, t: int) -> None:
        """Message (or broadcast) m is ready to go: take an outgoing stream, or queue.
        With a memory model it first waits (holding no stream) until its destination
        is admitted: it has nowhere to land before. A broadcast goes to the members
        whose destinations are admitted and waits for the others as a broadcast of its
        own: waiting for all could wait on itself (a destination further down its
        core's order than the window reaches, behind work that needs another member)."""
        nonlocal members, lead
        if mem is not None:
            group = members.get(m, (m,))
            later = tuple(x for x in group if not admitted[msg_dst[x]])
            if later:
                now = tuple(x for x in group if admitted[msg_dst[x]])
                if now:
                    if members is p.lead_members:  # split a copy: the plan's stays whole
                        members, lead = dict(members), list(lead)
                    del members[m]
                    for part in (now, later):
                        if len(part) > 1:
                            members[part[0]] = part
                        for x in part:
                            lead[x] = part[0]
                    m = now[0]
                parked[msg_dst[later[0]]].append(later[0])
                if not now:
                    return
        if streams:
            s_ci = msg_src_ci[m]
            c = cap[s_ci]
            if c and out_used[s_ci] >= c:
                out_wait[s_ci].append(m)
            else:
                out_used[s_ci] += 1
                stream_out(m, t)
        else:
            for x in members.get(m, (m,)):
                go_out(x, t)

    def admit(ci: int, t: int) -> None:
        """Admit what memory and the window allow on core ci; launch their messages."""
        assert mem is not None
        mem.now = t
        for a in mem.admit(ci, -1 if running[ci] else ptr[ci]):
            waiting = parked[a]
            if waiting:
                parked[a] = []
                for m in waiting:
                    launch(m, t)

    for ci in range(n_core):
        if mem is not None:
            admit(ci, 0)
        try_start(ci, 0, CAUSE_NONE, -1)

    while heap:
        t, _, m, k, hop = pop(heap)
        if hop > 0:
            # packet k of message m reached the core after `hop` hops: take the next link.
            # While the packet's next arrival is strictly earlier than every queued event,
            # it would be popped next anyway: follow it without touching the heap.
            links, lat, sf, sl, lastk, h, os_, oe = rec[m]
            if hop == 1 and k < lastk:
                # the next packet on the first link is one serialisation behind this one
                k1 = k + 1
                tn = (os_[0] + (k1 + 1) * sf[0] if k1 < lastk else oe[0]) + lat[0]
                push(heap, (tn, seq, m, k1, 1))
                seq += 1
            while True:
                li = links[hop]
                f = free[li]
                st = t if t > f else f
                if k == lastk:
                    e = st + sl[hop]
                    oe[hop] = e
                else:
                    e = st + sf[hop]
                free[li] = e
                if k == 0:
                    os_[hop] = st
                t = e + lat[hop]
                hop += 1
                if hop == h:
                    if k == lastk:
                        push(heap, (t, seq, m, k, _ARRIVE))
                        seq += 1
                    break
                if heap and t >= heap[0][0]:
                    push(heap, (t, seq, m, k, hop))
                    seq += 1
                    break
        elif hop == _DATA:
            # all packets are at the source: queue them on the first link
            links, lat, sf, sl, lastk, h, os_, oe = rec[m]
            li = links[0]
            f = free[li]
            st = t if t > f else f
            os_[0] = st
            e = st + lastk * sf[0] + sl[0]
            free[li] = e
            oe[0] = e
            # only the first packet's arrival is queued; each packet queues the next's
            # (keeps the heap at one entry per message on its first hop)
            if h > 1:
                push(heap, (st + (sf[0] if lastk else sl[0]) + lat[0], seq, m, 0, 1))
            else:
                push(heap, (e + lat[0], seq, m, lastk, _ARRIVE))
            seq += 1
        elif hop == _END:
            a = m
            end[a] = t
            ended += 1
            ci = actor_ci[a]
            running[ci] = False
            for m in out_msgs[a]:
                inject[m] = t
                if msg_local[m]:
                    data_start[m] = t
                    arrive[m] = t
                    pending[msg_dst[m]] -= 1
                elif first[m] == m:  # a broadcast goes with its first message
                    launch(m, t)
            if mem is not None:
                mem.now = t
                mem.on_end(a)
                admit(ci, t)
            try_start(ci, t, CAUSE_ACTOR, a)
        elif hop == _ARRIVE:
            arrive[m] = t
            d = msg_dst[m]
            pending[d] -= 1
            if streams:
                s_ci = msg_src_ci[m]
                L = lead[m]
                out_left[L] -= 1
                if out_left[L] == 0:  # the last of its broadcast: the stream is free
                    out_used[s_ci] -= 1
                    if out_wait[s_ci]:
                        out_used[s_ci] += 1
                        stream_out(out_wait[s_ci].popleft(), t)
                d_ci = msg_dst_ci[m]
                in_used[d_ci] -= 1
                if in_wait[d_ci]:
                    in_used[d_ci] += 1
                    m2 = in_wait[d_ci].popleft()
                    # the waiting producer resends req every `retry`; the next one wins
                    grant(m2, resend_at(m2, t))
            src = msg_src[m]
            rem_out[src] -= 1
            if rem_out[src] == 0 and needs_buf[src]:
                s_ci = msg_src_ci[m]
                bufs_free[s_ci] += 1
                try_start(s_ci, t, CAUSE_BUFFER, m)
            if mem is not None:
                s_ci = msg_src_ci[m]
                mem.now = t
                mem.on_delivered(src)
                admit(s_ci, t)
                try_start(s_ci, t, CAUSE_MEMORY, -1)
            if pending[d] == 0:
                try_start(msg_dst_ci[m], t, CAUSE_MESSAGE, m)
        else:  # _REQ
            request_in(m, t)

    if ended < n_act:
        waiting = {msg_src_ci[m] for ms in parked for m in ms}
        held = sorted(ci for ci in waiting if nbuf and bufs_free[ci] == 0)
        _deadlock(p, end, mem, held)
    occ_ptr = [0] * (n_msg + 1)
    for m in range(n_msg):
        occ_ptr[m + 1] = occ_ptr[m] + len(occ_start[m])
    return RawRun(
        start=start,
        end=end,
        cause_kind=cause_kind,
        cause_id=cause_id,
        inject=inject,
        data_start=data_start,
        arrive=arrive,
        occ_ptr=occ_ptr,
        occ_start=list(itertools.chain.from_iterable(occ_start)),
        occ_end=list(itertools.chain.from_iterable(occ_end)),
        events=seq,
        mem_peak=mem.peak_bytes() if mem is not None else None,
        mem_log=mem.events() if mem is not None else None,
    )
