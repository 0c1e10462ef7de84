"""The engine's network against a slow, independent reference of the same model.

The reference moves every packet hop by hop through its own priority queue (no
chaining of packets, no fast path): a packet arriving at a core at time t takes the
next link at ``max(t, link free)``, holds it for its serialisation and arrives at the
next core a latency later; links serve packets in arrival order. Equal-time arrivals
of different messages at one link may be ordered either way by a correct engine, so
examples with such ties are discarded.
"""

from __future__ import annotations

import heapq

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from waferflow.backend_sim import SimConfig, SimResult, simulate
from waferflow.backend_sim.costs import duration_ps, packetize
from waferflow.ir.plan import Message, Plan
from waferflow.ir.target.wafer import LinkSpec, Topology, Wafer
from waferflow.mapper.routing import route

from ._helpers import GBPS, actor, wafer


def reference_arrivals(plan: Plan, w: Wafer, res: SimResult, pb: int) -> list[int] | None:
    """Arrival time of every message given the engine's injection times; None when
    two messages' packets reach one link at the same instant (ambiguous order)."""
    cols = w.cols
    free: dict[tuple[int, int], int] = {}
    last_arrival: dict[tuple[int, int], tuple[int, int, int]] = {}  # link -> (t, msg, hop)
    heap: list[tuple[int, int, int, int]] = []  # (time, message, packet, hop)
    info = []
    for m in plan.messages:
        s, d = plan.actors[m.src_actor].core, plan.actors[m.dst_actor].core
        path = [r * cols + c for r, c in route(w, divmod(s, cols), divmod(d, cols))]
        n, full, last = packetize(m.bytes, pb, 0)
        sizes = [full] * (n - 1) + [last]
        info.append((path, sizes))
        if s != d:
            for k in range(n):
                heapq.heappush(heap, (res.msg_inject_ps[m.id], m.id, k, 0))
    arrive = [res.msg_inject_ps[m.id] for m in plan.messages]
    while heap:
        t, mid, k, hop = heapq.heappop(heap)
        path, sizes = info[mid]
        if hop == len(path) - 1:
            arrive[mid] = max(arrive[mid], t)
            continue
        a, b = path[hop], path[hop + 1]
        prev = last_arrival.get((a, b))
        if prev is not None and prev[0] == t and prev[1] != mid and (hop, prev[2]) != (0, 0):
            return None  # (two injections at one core at once go in message id order)
        last_arrival[(a, b)] = (t, mid, hop)
        ra, rb = divmod(a, cols), divmod(b, cols)
        spec = w.d2d_link if (w.d2d_link and w.is_d2d(ra, rb)) else w.link
        start = max(t, free.get((a, b), 0))
        end = start + duration_ps(sizes[k], spec.bandwidth)
        free[(a, b)] = end
        heapq.heappush(heap, (end + round(spec.latency * 1e12), mid, k, hop + 1))
    return arrive


@st.composite
def traffic(draw: st.DrawFn) -> tuple[Plan, Wafer, int]:
    rows, cols = draw(st.integers(1, 4)), draw(st.sampled_from([2, 4, 6]))
    d2d = None
    die_cols = draw(st.sampled_from([1, 2]))
    if die_cols == 2:
        d2d = LinkSpec(
            draw(st.sampled_from([0.3, 0.7, 2.1])) * GBPS, draw(st.integers(1, 999)) * 1e-12 * 97
        )
    w = wafer(
        rows, cols, topology=draw(st.sampled_from([Topology.MESH, Topology.TORUS])),
        die_cols=die_cols, d2d=d2d, lat=draw(st.integers(1, 5000)) * 1e-12,
        bw=draw(st.sampled_from([0.9, 1.3, 2.9])) * GBPS,
    )  # fmt: skip
    n_cores = rows * cols
    n_msgs = draw(st.integers(1, 10))
    actors = []
    msgs = []
    for i in range(n_msgs):
        # producer i computes for a random time (distinct injections), consumer is idle
        actors.append(
            actor(2 * i, draw(st.integers(0, n_cores - 1)), flops=draw(st.integers(0, 400_000)))
        )
        actors.append(actor(2 * i + 1, draw(st.integers(0, n_cores - 1))))
        msgs.append(Message(i, 2 * i, 2 * i + 1, draw(st.integers(0, 5000))))
    # each core runs all its producers before its consumers: no deadlock
    order: dict[int, list[int]] = {}
    for a in sorted(actors, key=lambda a: (a.id % 2, a.id)):
        order.setdefault(a.core, []).append(a.id)
    pb = draw(st.sampled_from([97, 512, 1500]))
    return Plan.build("traffic", w.name, actors, msgs, order), w, pb


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(traffic())
def test_engine_matches_reference(case: tuple[Plan, Wafer, int]) -> None:
    plan, w, pb = case
    res = simulate(plan, w, SimConfig(packet_bytes=pb))
    ref = reference_arrivals(plan, w, res, pb)
    assume(ref is not None)
    assert list(res.msg_arrive_ps) == ref
