"""The event loop of ``engine.run``, compiled with numba on flat arrays.

The same model, the same events in the same order: one heap of ``(time_ps, seq, x,
k, code)`` rows, ``seq`` increasing with every push, so the run is the pure-Python
engine's, event for event and picosecond for picosecond (the tests compare them on
random plans). Only the representation differs: per-message and per-hop data are
numpy arrays (hops of all messages in one array, ``hop_ptr`` says where each
message's begin), the broadcast groups and per-core orders likewise, the stream
queues are linked lists through per-message ``next`` arrays, and the heap is an
``int64`` array of rows that doubles when full.

Times are ``int64`` here (Python ints in the pure-Python engine): ``fits_int64``
checks before the run that no event can reach 2**62 ps (about 53 days), else the
pure-Python engine runs. The wafer's memory model (``[memory]``) is not compiled:
with it the pure-Python engine runs (``engine.run`` decides).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from waferflow.backend_sim.network import Prepared

try:  # numba is a dependency; without it (an unsupported platform) Python runs alone
    from numba import njit
except ImportError:  # pragma: no cover - exercised only where numba does not install
    njit = None

AVAILABLE = njit is not None

# event codes, as in engine.py (code > 0: packet k of message x after `code` hops)
_END = 0
_ARRIVE = -1
_REQ = -2
_DATA = -3
CAUSE_NONE = 0
CAUSE_ACTOR = 1
CAUSE_MESSAGE = 2
CAUSE_BUFFER = 3

_LIMIT = 1 << 62  # no event time may reach this (int64 headroom)


@dataclass(slots=True)
class Flat:
    """A ``Prepared`` as the arrays the compiled loop reads."""

    dur: np.ndarray
    actor_ci: np.ndarray
    ord_ptr: np.ndarray  # per local core, its slice of ord_ids
    ord_ids: np.ndarray
    out_ptr: np.ndarray  # per actor, its slice of out_ids (message ids, ascending)
    out_ids: np.ndarray
    msg_src: np.ndarray
    msg_dst: np.ndarray
    msg_local: np.ndarray
    msg_lastk: np.ndarray  # packets - 1
    hop_ptr: np.ndarray  # per message, its slice of the hop arrays
    hop_link: np.ndarray
    hop_lat: np.ndarray
    hop_sf: np.ndarray
    hop_sl: np.ndarray
    lead: np.ndarray
    grp_ptr: np.ndarray  # per message, the messages its stream serves (itself if alone)
    grp_ids: np.ndarray
    stream_cap: np.ndarray
    n_links: int


def _i64(values: list[int] | tuple[int, ...]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _csr(rows: list[tuple[int, ...]] | list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    lens = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    ptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.int64, count=int(ptr[-1]))
    return ptr, ids


def flatten(p: Prepared) -> Flat | None:
    """The arrays of ``p`` (``Prepared``) for the compiled loop; None when a duration
    does not fit an int64."""
    try:
        return _flatten(p)
    except OverflowError:
        return None


def _flatten(p: Prepared) -> Flat:
    ord_ptr, ord_ids = _csr(p.order)
    out_ptr, out_ids = _csr(p.out_msgs)
    hop_ptr, hop_link = _csr(p.msg_links)
    _, hop_lat = _csr(p.msg_lat)
    _, hop_sf = _csr(p.msg_ser_full)
    _, hop_sl = _csr(p.msg_ser_last)
    n_msg = len(p.msg_src)
    if p.lead_members:
        members = p.lead_members
        grp_ptr, grp_ids = _csr([members.get(m, (m,)) for m in range(n_msg)])
    else:
        grp_ptr = np.arange(n_msg + 1, dtype=np.int64)
        grp_ids = np.arange(n_msg, dtype=np.int64)
    return Flat(
        dur=_i64(p.dur),
        actor_ci=_i64(p.actor_ci),
        ord_ptr=ord_ptr,
        ord_ids=ord_ids,
        out_ptr=out_ptr,
        out_ids=out_ids,
        msg_src=_i64(p.msg_src),
        msg_dst=_i64(p.msg_dst),
        msg_local=np.array(p.msg_local, dtype=np.bool_),
        msg_lastk=_i64(p.msg_npk) - 1,
        hop_ptr=hop_ptr,
        hop_link=hop_link,
        hop_lat=hop_lat,
        hop_sf=hop_sf,
        hop_sl=hop_sl,
        lead=_i64(p.msg_lead),
        grp_ptr=grp_ptr,
        grp_ids=grp_ids,
        stream_cap=_i64(p.stream_cap),
        n_links=p.n_links,
    )


def fits_int64(p: Prepared, f: Flat) -> bool:
    """No event can reach 2**62 ps: every event time is at most the sum of every
    duration the run can spend (compute, each message's packets over each hop, its
    latencies for data, req and ack, and one resend period)."""
    n = f.msg_lastk[np.repeat(np.arange(len(f.msg_lastk)), np.diff(f.hop_ptr))] + 1
    total = (
        int(f.dur.sum(dtype=np.float64))
        + float((n * f.hop_sf.astype(np.float64)).sum())
        + float(f.hop_sl.astype(np.float64).sum())
        + 3.0 * float(f.hop_lat.astype(np.float64).sum())
        + float(len(f.msg_src)) * float(p.flow.retry_ps)
    )
    return total < _LIMIT / 2


# -- the compiled loop ---------------------------------------------------------------------
if AVAILABLE:

    @njit("int64[:, ::1](int64[:, ::1], int64[::1], int64, int64, int64, int64)", cache=True)
    def _push(heap, st, t, x, k, code):  # type: ignore[no-untyped-def]
        """Push (t, seq, x, k, code); st = [size, seq]. Returns the heap (grown when full)."""
        n = st[0]
        if n == heap.shape[0]:
            bigger = np.empty((2 * n, 5), dtype=np.int64)
            bigger[:n] = heap
            heap = bigger
        seq = st[1]
        pos = n
        while pos > 0:  # sift up: (t, seq) keys are unique, seq the newest
            parent = (pos - 1) >> 1
            if heap[parent, 0] > t or (heap[parent, 0] == t and heap[parent, 1] > seq):
                heap[pos, 0] = heap[parent, 0]
                heap[pos, 1] = heap[parent, 1]
                heap[pos, 2] = heap[parent, 2]
                heap[pos, 3] = heap[parent, 3]
                heap[pos, 4] = heap[parent, 4]
                pos = parent
            else:
                break
        heap[pos, 0] = t
        heap[pos, 1] = seq
        heap[pos, 2] = x
        heap[pos, 3] = k
        heap[pos, 4] = code
        st[0] = n + 1
        st[1] = seq + 1
        return heap

    @njit("void(int64[:, ::1], int64[::1], int64[::1])", cache=True)
    def _pop(heap, st, out):  # type: ignore[no-untyped-def]
        """Move the smallest row into out[0:5]."""
        out[0] = heap[0, 0]
        out[1] = heap[0, 1]
        out[2] = heap[0, 2]
        out[3] = heap[0, 3]
        out[4] = heap[0, 4]
        n = st[0] - 1
        st[0] = n
        if n == 0:
            return
        t = heap[n, 0]
        s = heap[n, 1]
        pos = 0
        while True:
            c = 2 * pos + 1
            if c >= n:
                break
            if c + 1 < n and (
                heap[c + 1, 0] < heap[c, 0]
                or (heap[c + 1, 0] == heap[c, 0] and heap[c + 1, 1] < heap[c, 1])
            ):
                c += 1
            if heap[c, 0] < t or (heap[c, 0] == t and heap[c, 1] < s):
                heap[pos, 0] = heap[c, 0]
                heap[pos, 1] = heap[c, 1]
                heap[pos, 2] = heap[c, 2]
                heap[pos, 3] = heap[c, 3]
                heap[pos, 4] = heap[c, 4]
                pos = c
            else:
                break
        heap[pos, 0] = t
        heap[pos, 1] = s
        heap[pos, 2] = heap[n, 2]
        heap[pos, 3] = heap[n, 3]
        heap[pos, 4] = heap[n, 4]

    @njit("void(int64[::1], int64[::1], int64[::1], int64, int64)", cache=True)
    def _enqueue(head, tail, nxt, q, m):  # type: ignore[no-untyped-def]
        """Append message m to FIFO queue q (a linked list through nxt)."""
        if tail[q] < 0:
            head[q] = m
        else:
            nxt[tail[q]] = m
        tail[q] = m

    @njit("int64(int64[::1], int64[::1], int64[::1], int64)", cache=True)
    def _dequeue(head, tail, nxt, q):  # type: ignore[no-untyped-def]
        """Take the first message of FIFO queue q (-1 when empty)."""
        m = head[q]
        if m >= 0:
            head[q] = nxt[m]
            if head[q] < 0:
                tail[q] = -1
        return m

    @njit(cache=True)
    def _loop(  # type: ignore[no-untyped-def]
        dur, actor_ci, ord_ptr, ord_ids, out_ptr, out_ids,
        msg_src, msg_dst, msg_local, msg_lastk,
        hop_ptr, hop_link, hop_lat, hop_sf, hop_sl,
        lead, grp_ptr, grp_ids, cap, n_links,
        nbuf, handshake, retry, streams,
        start, end, cause_kind, cause_id, inject, data_start, arrive, occ_s, occ_e,
    ):  # fmt: skip
        n_act = dur.shape[0]
        n_msg = msg_src.shape[0]
        n_core = ord_ptr.shape[0] - 1
        pending = np.zeros(n_act, dtype=np.int64)
        rem_out = np.zeros(n_act, dtype=np.int64)
        for m in range(n_msg):
            pending[msg_dst[m]] += 1
            if not msg_local[m]:
                rem_out[msg_src[m]] += 1
        needs_buf = np.zeros(n_act, dtype=np.bool_)
        if nbuf > 0:
            for a in range(n_act):
                needs_buf[a] = rem_out[a] > 0
        bufs_free = np.full(n_core, nbuf, dtype=np.int64)
        running = np.zeros(n_core, dtype=np.bool_)
        ptr = ord_ptr[:-1].copy()
        sum_lat = np.zeros(n_msg, dtype=np.int64)
        src_ci = np.empty(n_msg, dtype=np.int64)
        dst_ci = np.empty(n_msg, dtype=np.int64)
        for m in range(n_msg):
            s = 0
            for j in range(hop_ptr[m], hop_ptr[m + 1]):
                s += hop_lat[j]
            sum_lat[m] = s
            src_ci[m] = actor_ci[msg_src[m]]
            dst_ci[m] = actor_ci[msg_dst[m]]
        req_at = np.zeros(n_msg, dtype=np.int64)
        out_left = np.zeros(n_msg, dtype=np.int64)
        out_used = np.zeros(n_core, dtype=np.int64)
        in_used = np.zeros(n_core, dtype=np.int64)
        # FIFO queues of waiting messages, per core, as linked lists
        out_head = np.full(n_core, -1, dtype=np.int64)
        out_tail = np.full(n_core, -1, dtype=np.int64)
        out_next = np.full(n_msg, -1, dtype=np.int64)
        in_head = np.full(n_core, -1, dtype=np.int64)
        in_tail = np.full(n_core, -1, dtype=np.int64)
        in_next = np.full(n_msg, -1, dtype=np.int64)
        free = np.zeros(n_links, dtype=np.int64)
        heap = np.empty((max(16, n_core + 16), 5), dtype=np.int64)
        st = np.zeros(2, dtype=np.int64)  # heap size, next seq
        ev = np.empty(5, dtype=np.int64)
        ended = 0

        # The helpers below mirror engine.run's closures one for one; each returns the
        # heap, which a push may have replaced with a bigger one.
        def try_start(heap, ci, t, ck, cid):  # type: ignore[no-untyped-def]
            if running[ci]:
                return heap
            i = ptr[ci]
            if i >= ord_ptr[ci + 1]:
                return heap
            a = ord_ids[i]
            if pending[a]:
                return heap
            if needs_buf[a]:
                if bufs_free[ci] == 0:
                    return heap
                bufs_free[ci] -= 1
            running[ci] = True
            ptr[ci] = i + 1
            start[a] = t
            cause_kind[a] = ck
            cause_id[a] = cid
            return _push(heap, st, t + dur[a], a, 0, _END)

        def grant(heap, m, t):  # type: ignore[no-untyped-def]
            ts = t + sum_lat[m] if handshake else t
            data_start[m] = ts
            return _push(heap, st, ts, m, 0, _DATA)

        def request_in(heap, m, t):  # type: ignore[no-untyped-def]
            if streams:
                d = dst_ci[m]
                c = cap[d]
                if c and in_used[d] >= c:
                    _enqueue(in_head, in_tail, in_next, d, m)
                    return heap
                in_used[d] += 1
            return grant(heap, m, t)

        def go_out(heap, m, t):  # type: ignore[no-untyped-def]
            if handshake:
                ta = t + sum_lat[m]
                req_at[m] = ta
                return _push(heap, st, ta, m, 0, _REQ)
            return request_in(heap, m, t)

        def go_all(heap, m, t):  # type: ignore[no-untyped-def]
            for g in range(grp_ptr[m], grp_ptr[m + 1]):
                heap = go_out(heap, grp_ids[g], t)
            return heap

        def stream_out(heap, m, t):  # type: ignore[no-untyped-def]
            out_left[m] = grp_ptr[m + 1] - grp_ptr[m]
            return go_all(heap, m, t)

        def launch(heap, m, t):  # type: ignore[no-untyped-def]
            if streams:
                s = src_ci[m]
                c = cap[s]
                if c and out_used[s] >= c:
                    _enqueue(out_head, out_tail, out_next, s, m)
                    return heap
                out_used[s] += 1
                return stream_out(heap, m, t)
            return go_all(heap, m, t)

        for ci in range(n_core):
            heap = try_start(heap, ci, 0, CAUSE_NONE, -1)

        while st[0] > 0:
            _pop(heap, st, ev)
            t = ev[0]
            m = ev[2]
            k = ev[3]
            hop = ev[4]
            if hop > 0:
                base = hop_ptr[m]
                h = hop_ptr[m + 1] - base
                lastk = msg_lastk[m]
                if hop == 1 and k < lastk:
                    k1 = k + 1
                    if k1 < lastk:
                        tn = occ_s[base] + (k1 + 1) * hop_sf[base] + hop_lat[base]
                    else:
                        tn = occ_e[base] + hop_lat[base]
                    heap = _push(heap, st, tn, m, k1, 1)
                while True:
                    j = base + hop
                    li = hop_link[j]
                    f = free[li]
                    s0 = t if t > f else f
                    if k == lastk:
                        e = s0 + hop_sl[j]
                        occ_e[j] = e
                    else:
                        e = s0 + hop_sf[j]
                    free[li] = e
                    if k == 0:
                        occ_s[j] = s0
                    t = e + hop_lat[j]
                    hop += 1
                    if hop == h:
                        if k == lastk:
                            heap = _push(heap, st, t, m, k, _ARRIVE)
                        break
                    if st[0] > 0 and t >= heap[0, 0]:
                        heap = _push(heap, st, t, m, k, hop)
                        break
            elif hop == _DATA:
                base = hop_ptr[m]
                h = hop_ptr[m + 1] - base
                lastk = msg_lastk[m]
                li = hop_link[base]
                f = free[li]
                s0 = t if t > f else f
                occ_s[base] = s0
                e = s0 + lastk * hop_sf[base] + hop_sl[base]
                free[li] = e
                occ_e[base] = e
                if h > 1:
                    first = hop_sf[base] if lastk else hop_sl[base]
                    heap = _push(heap, st, s0 + first + hop_lat[base], m, 0, 1)
                else:
                    heap = _push(heap, st, e + hop_lat[base], m, lastk, _ARRIVE)
            elif hop == _END:
                a = m
                end[a] = t
                ended += 1
                ci = actor_ci[a]
                running[ci] = False
                for q in range(out_ptr[a], out_ptr[a + 1]):
                    x = out_ids[q]
                    inject[x] = t
                    if msg_local[x]:
                        data_start[x] = t
                        arrive[x] = t
                        pending[msg_dst[x]] -= 1
                    elif lead[x] == x:
                        heap = launch(heap, x, t)
                heap = try_start(heap, ci, t, CAUSE_ACTOR, a)
            elif hop == _ARRIVE:
                arrive[m] = t
                d = msg_dst[m]
                pending[d] -= 1
                if streams:
                    s = src_ci[m]
                    ld = lead[m]
                    out_left[ld] -= 1
                    if out_left[ld] == 0:
                        out_used[s] -= 1
                        w = _dequeue(out_head, out_tail, out_next, s)
                        if w >= 0:
                            out_used[s] += 1
                            heap = stream_out(heap, w, t)
                    dc = dst_ci[m]
                    in_used[dc] -= 1
                    w = _dequeue(in_head, in_tail, in_next, dc)
                    if w >= 0:
                        in_used[dc] += 1
                        tw = t
                        if handshake and retry > 0:
                            r0 = req_at[w]
                            tw = r0 + -((r0 - t) // retry) * retry
                        heap = grant(heap, w, tw)
                src = msg_src[m]
                rem_out[src] -= 1
                if rem_out[src] == 0 and needs_buf[src]:
                    s = src_ci[m]
                    bufs_free[s] += 1
                    heap = try_start(heap, s, t, CAUSE_BUFFER, m)
                if pending[d] == 0:
                    heap = try_start(heap, dst_ci[m], t, CAUSE_MESSAGE, m)
            else:  # _REQ
                heap = request_in(heap, m, t)
        return ended, st[1]


def run_flat(p: Prepared, f: Flat) -> tuple[int, int, dict[str, np.ndarray]]:
    """Run the compiled loop; returns (actors ended, events, the recorded arrays)."""
    n_act = len(f.dur)
    n_msg = len(f.msg_src)
    n_hops = len(f.hop_link)
    out = {
        "start": np.full(n_act, -1, dtype=np.int64),
        "end": np.full(n_act, -1, dtype=np.int64),
        "cause_kind": np.zeros(n_act, dtype=np.int64),
        "cause_id": np.full(n_act, -1, dtype=np.int64),
        "inject": np.full(n_msg, -1, dtype=np.int64),
        "data_start": np.full(n_msg, -1, dtype=np.int64),
        "arrive": np.full(n_msg, -1, dtype=np.int64),
        "occ_s": np.zeros(n_hops, dtype=np.int64),
        "occ_e": np.zeros(n_hops, dtype=np.int64),
    }
    fl = p.flow
    ended, events = _loop(
        f.dur, f.actor_ci, f.ord_ptr, f.ord_ids, f.out_ptr, f.out_ids,
        f.msg_src, f.msg_dst, f.msg_local, f.msg_lastk,
        f.hop_ptr, f.hop_link, f.hop_lat, f.hop_sf, f.hop_sl,
        f.lead, f.grp_ptr, f.grp_ids, f.stream_cap, f.n_links,
        fl.buffers_per_core, fl.handshake, fl.retry_ps, fl.max_streams > 0,
        out["start"], out["end"], out["cause_kind"], out["cause_id"],
        out["inject"], out["data_start"], out["arrive"], out["occ_s"], out["occ_e"],
    )  # fmt: skip
    return int(ended), int(events), out


__all__ = ["AVAILABLE", "Flat", "fits_int64", "flatten", "run_flat"]
