"""The host as a node of the simulation (a wafer with ``[host]``, a plan with
``Plan.host``).

The host has its own link to every core, each way (``Wafer.host``: bandwidth and
latency), as the seed machine's host has a thread and a link per actor. Before the
step it streams every source a core needs (weights, inputs, optimizer state) to the
first actor there that reads it; after an actor ends, its results for the host
(updated weights, the loss) go back. Both are ordinary messages to the engine:
packets on the host's links, the wafer's flow control (req / ack, the core's stream
slots), so a core's inputs arrive one after another over its host link, in the order
its actors run. The step ends when the host has received everything.

Added to a ``Prepared`` as one more local core with two zero-time actors: the source
of what the host sends (it ends at time 0 and injects every input, in order) and the
sink of what it receives.
"""

from __future__ import annotations

from waferflow.backend_sim.costs import duration_ps, packetize, seconds_to_ps
from waferflow.backend_sim.network import Prepared
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import Wafer

HOST = -1  # the host's end of a link in ``link_src`` / ``link_dst``


def add_host(p: Prepared, plan: Plan, wafer: Wafer) -> None:
    """Append the host's core, actors, links and transfers to ``p`` (in place)."""
    assert wafer.host is not None
    hc = len(p.order)
    source, sink = len(p.dur), len(p.dur) + 1
    p.actor_ci += [hc, hc]
    p.dur += [0, 0]
    p.order.append([source, sink])
    p.stream_cap.append(0)  # the host's side of its links is never short of streams
    pos = {a: k for ids in p.order[:hc] for k, a in enumerate(ids)}
    ins = sorted(
        (h for h in plan.host if not h.to_host), key=lambda h: (p.actor_ci[h.actor], pos[h.actor])
    )
    outs = [h for h in plan.host if h.to_host]
    lat = seconds_to_ps(wafer.host.latency)
    bw = wafer.host.bandwidth
    links: dict[tuple[int, int], int] = {}
    out = [list(x) for x in p.out_msgs] + [[], []]

    def message(src: int, dst: int, nbytes: int, core: int, to_host: bool, reader: int) -> None:
        key = (core, 1 if to_host else 0)
        li = links.get(key)
        if li is None:
            li = links[key] = len(p.link_src)
            p.link_src.append(core if to_host else HOST)
            p.link_dst.append(HOST if to_host else core)
            p.link_d2d.append(False)
        n, full, last = packetize(nbytes, p.flow.packet_bytes, p.flow.header_packets)
        m = len(p.msg_src)
        p.msg_src.append(src)
        p.msg_dst.append(dst)
        p.msg_local.append(False)
        p.msg_links.append((li,))
        p.msg_lat.append((lat,))
        p.msg_ser_full.append((duration_ps(full, bw),))
        p.msg_ser_last.append((duration_ps(last, bw),))
        p.msg_npk.append(n)
        p.msg_lead.append(m)
        p.msg_bytes.append(nbytes)
        p.msg_last_use.append(reader)
        out[src].append(m)

    for h in ins:
        message(source, h.actor, h.bytes, p.cores[p.actor_ci[h.actor]], False, h.last_use)
    for h in outs:
        message(h.actor, sink, h.bytes, p.cores[p.actor_ci[h.actor]], True, -1)
    p.out_msgs = [tuple(x) for x in out]


__all__ = ["HOST", "add_host"]
