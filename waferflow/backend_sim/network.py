"""Turn a plan on a wafer into flat arrays: routes, links, per-hop timings, durations.

Both the event simulator and the analytical estimator start from ``prepare()``, so
they share routes, packetisation and every cost figure. Cores that run actors are
renumbered densely (``ci``, the local core index) so that per-core arrays stay small
on big wafers; links are numbered in the order messages first use them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from waferflow.backend_sim.config import SimConfig
from waferflow.backend_sim.costs import (
    DEFAULT_PACKET_BYTES,
    actor_durations,
    duration_ps,
    packetize,
    seconds_to_ps,
)
from waferflow.errors import PlanError
from waferflow.ir.plan import Plan, verify_plan

if TYPE_CHECKING:
    from waferflow.backend_sim.memory import MemPlan
from waferflow.ir.target.wafer import Coord, LinkSpec, Wafer
from waferflow.mapper.routing import adjacent, link_is_dead, route


def die_of(wafer: Wafer, coord: Coord) -> tuple[int, int]:
    """The die holding ``coord``, as ``Wafer.die_of`` (equal dies; no bounds check)."""
    return (coord[0] // (wafer.rows // wafer.die_rows), coord[1] // (wafer.cols // wafer.die_cols))


def crosses_die(wafer: Wafer, a: Coord, b: Coord) -> bool:
    if wafer.die_rows == 1 and wafer.die_cols == 1:
        return False
    return die_of(wafer, a) != die_of(wafer, b)


def link_spec(wafer: Wafer, a: Coord, b: Coord) -> LinkSpec:
    """The spec of the link from ``a`` to ``b``: die-to-die figures across a die edge."""
    if wafer.d2d_link is not None and crosses_die(wafer, a, b):
        return wafer.d2d_link
    return wafer.link


@dataclass(frozen=True, slots=True)
class FlowParams:
    packet_bytes: int
    header_packets: int
    buffers_per_core: int  # output buffers per core; 0 = unbounded
    max_streams: int  # concurrent outgoing / incoming messages per core; 0 = unlimited
    handshake: bool
    retry_ps: int  # period at which an unanswered req is resent


def flow_params(wafer: Wafer, config: SimConfig) -> FlowParams:
    fl = wafer.flow
    if fl is None:
        pb = config.packet_bytes or DEFAULT_PACKET_BYTES
        return FlowParams(pb, 0, 0, 0, False, 0)
    pb = config.packet_bytes or fl.packet_bytes
    if pb <= 0:
        raise PlanError(f"wafer {wafer.name!r}: flow.packet_bytes must be positive, got {pb}")
    retry = duration_ps(fl.retry_cycles, wafer.clock_hz) if fl.retry_cycles > 0 else 0
    return FlowParams(
        pb, fl.header_packets, fl.buffers_per_core, fl.max_streams, fl.handshake, retry
    )


@dataclass(slots=True)
class Prepared:
    """Flat, index-addressed description of one simulation (all times in ps).

    With a host (``backend_sim.host``) the arrays go on past the plan's: one more
    local core (the host), its two actors (the source of what it streams in, the sink
    of what it receives) and the host transfers as messages on links of their own.
    ``cores`` lists the plan's cores only; the ``n_plan_*`` counts say where the
    plan's part of each array ends."""

    cores: tuple[int, ...]  # global core id of each local core index
    actor_ci: list[int]
    dur: list[int]
    order: list[list[int]]  # per local core: actor ids in execution order
    out_msgs: list[tuple[int, ...]]  # per actor: outgoing message ids, ascending
    msg_src: list[int]
    msg_dst: list[int]
    msg_local: list[bool]
    msg_links: list[tuple[int, ...]]  # per message: link index per hop (() if local)
    msg_lat: list[tuple[int, ...]]
    msg_ser_full: list[tuple[int, ...]]
    msg_ser_last: list[tuple[int, ...]]
    msg_npk: list[int]
    link_src: list[int]  # global core ids
    link_dst: list[int]
    link_d2d: list[bool]
    flow: FlowParams
    # per message: the broadcast it belongs to, as its first message's id (itself when
    # alone); per first message: every message of its broadcast (one stream serves them)
    msg_lead: list[int] = field(default_factory=list)
    lead_members: dict[int, tuple[int, ...]] = field(default_factory=dict)
    stream_cap: list[int] = field(default_factory=list)  # per local core (0: unlimited)
    msg_bytes: list[int] = field(default_factory=list)  # payload per message
    msg_last_use: list[int] = field(default_factory=list)  # last reader of a receive buffer
    mem: MemPlan | None = None  # the wafer's [memory] model (backend_sim.memory)
    n_plan_actors: int = 0
    n_plan_msgs: int = 0
    n_plan_links: int = 0

    @property
    def n_links(self) -> int:
        return len(self.link_src)

    def packet_hops(self) -> int:
        return sum(n * len(links) for n, links in zip(self.msg_npk, self.msg_links, strict=True))


def prepare(plan: Plan, wafer: Wafer, config: SimConfig) -> Prepared:
    if config.verify:
        verify_plan(plan, wafer)
    flow = flow_params(wafer, config)
    cores = plan.cores
    ci_of = {c: i for i, c in enumerate(cores)}
    actors = plan.actors
    actor_ci = [ci_of.get(a.core, -1) for a in actors]
    dur = actor_durations(actors, wafer, config.compute)
    for a, d in zip(actors, dur, strict=True):
        if d < 0:
            raise PlanError(f"compute model gave actor {a.id} ({a.name!r}) a negative duration")
    order_map = dict(plan.order)
    order = [list(order_map[c]) for c in cores]
    out: list[list[int]] = [[] for _ in actors]
    for m in plan.messages:
        out[m.src_actor].append(m.id)

    cols = wafer.cols
    specs: dict[bool, tuple[int, float]] = {
        False: (seconds_to_ps(wafer.link.latency), wafer.link.bandwidth),
        True: (
            seconds_to_ps((wafer.d2d_link or wafer.link).latency),
            (wafer.d2d_link or wafer.link).bandwidth,
        ),
    }
    for spec in (wafer.link, wafer.d2d_link):
        if spec is not None and (spec.bandwidth <= 0 or spec.latency < 0):
            raise PlanError(f"wafer {wafer.name!r}: link bandwidth must be > 0, latency >= 0")
    ser_cache: dict[tuple[bool, int], int] = {}
    link_index: dict[int, int] = {}
    link_src: list[int] = []
    link_dst: list[int] = []
    link_d2d: list[bool] = []
    route_cache: dict[tuple[int, int], tuple[tuple[int, ...], tuple[bool, ...]]] = {}
    nnodes = wafer.num_nodes  # cores, and a switched fabric's switches

    single_die = wafer.die_rows == 1 and wafer.die_cols == 1
    d2d_spec = wafer.d2d_link is not None
    # a ragged coarse view has narrower links on its last row / column (Wafer.link_spec);
    # a switched fabric's levels differ in bandwidth and latency: specs per link
    ragged = bool(wafer.fine_rows or wafer.fine_cols)
    tree = wafer.tree is not None
    shared = not (ragged or tree)  # else links differ in spec: no per-shape sharing
    link_bw: list[float] = []
    link_lat: list[int] = []

    def links_of(path: list[int]) -> tuple[tuple[int, ...], tuple[bool, ...]]:
        """Link indices along ``path`` and, per hop, whether it uses the d2d spec."""
        idx: list[int] = []
        for a, b in itertools.pairwise(path):
            key = a * nnodes + b
            li = link_index.get(key)
            if li is None:
                li = len(link_src)
                link_index[key] = li
                link_src.append(a)
                link_dst.append(b)
                link_d2d.append(
                    not single_die and crosses_die(wafer, divmod(a, cols), divmod(b, cols))
                )
                if ragged or tree:
                    spec = wafer.link_spec(wafer.node_coord(a), wafer.node_coord(b))
                    link_bw.append(spec.bandwidth)
                    link_lat.append(seconds_to_ps(spec.latency))
            idx.append(li)
        if single_die or not d2d_spec:
            return tuple(idx), (False,) * len(idx)
        return tuple(idx), tuple(link_d2d[li] for li in idx)

    def ser(on_d2d: bool, size: int) -> int:
        v = ser_cache.get((on_d2d, size))
        if v is None:
            v = duration_ps(size, specs[on_d2d][1])
            ser_cache[(on_d2d, size)] = v
        return v

    lat_on, lat_d2d = specs[False][0], specs[True][0]
    n_msgs = len(plan.messages)
    msg_local = [False] * n_msgs
    msg_links: list[tuple[int, ...]] = [()] * n_msgs
    msg_lat: list[tuple[int, ...]] = [()] * n_msgs
    msg_sf: list[tuple[int, ...]] = [()] * n_msgs
    msg_sl: list[tuple[int, ...]] = [()] * n_msgs
    msg_npk = [0] * n_msgs
    explicit: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[bool, ...]]] = {}
    shapes: dict[tuple[int, tuple[bool, ...]], tuple[tuple[int, ...], ...]] = {}
    for m in plan.messages:
        s = actors[m.src_actor].core
        d = actors[m.dst_actor].core
        if s == d:
            msg_local[m.id] = True
            continue
        if m.route is not None:
            cached = explicit.get(m.route)
            if cached is None:  # many messages share a route: check and number it once
                _check_route(wafer, m.id, list(m.route))
                cached = explicit[m.route] = links_of([wafer.physical_node(x) for x in m.route])
            links, kinds = cached
        else:
            cached = route_cache.get((s, d))
            if cached is None:
                path = route(wafer, divmod(s, cols), divmod(d, cols), config.route_order)
                cached = links_of([wafer.node_id(x) for x in path])
                route_cache[(s, d)] = cached
            links, kinds = cached
        if shared:
            shape = shapes.get((m.bytes, kinds))
            if shape is not None:
                msg_sf[m.id], msg_sl[m.id], msg_lat[m.id], msg_npk[m.id] = shape
                msg_links[m.id] = links
                continue
        n, full, last = packetize(m.bytes, flow.packet_bytes, flow.header_packets)
        h = len(links)
        if ragged or tree:
            msg_sf[m.id] = tuple(duration_ps(full, link_bw[li]) for li in links)
            msg_sl[m.id] = tuple(duration_ps(last, link_bw[li]) for li in links)
            msg_lat[m.id] = (
                tuple(link_lat[li] for li in links)
                if tree
                else tuple(lat_d2d if k else lat_on for k in kinds)
            )
        elif True in kinds:
            msg_sf[m.id] = tuple(ser(k, full) for k in kinds)
            msg_sl[m.id] = tuple(ser(k, last) for k in kinds)
            msg_lat[m.id] = tuple(lat_d2d if k else lat_on for k in kinds)
        else:
            msg_sf[m.id] = (ser(False, full),) * h
            msg_sl[m.id] = (ser(False, last),) * h
            msg_lat[m.id] = (lat_on,) * h
        msg_links[m.id] = links
        msg_npk[m.id] = n
        if shared:  # messages of one size over hops of the same kinds: one shape
            shapes[(m.bytes, kinds)] = (msg_sf[m.id], msg_sl[m.id], msg_lat[m.id], n)
    lead = list(range(n_msgs))
    members: dict[int, list[int]] = {}
    first: dict[tuple[int, int], int] = {}
    for m in plan.messages:
        if m.bcast >= 0 and not msg_local[m.id]:
            L = first.setdefault((m.src_actor, m.bcast), m.id)
            lead[m.id] = L
            members.setdefault(L, []).append(m.id)
    prepared = Prepared(
        cores=cores,
        actor_ci=actor_ci,
        dur=dur,
        order=order,
        out_msgs=[tuple(o) for o in out],
        msg_src=[m.src_actor for m in plan.messages],
        msg_dst=[m.dst_actor for m in plan.messages],
        msg_local=msg_local,
        msg_links=msg_links,
        msg_lat=msg_lat,
        msg_ser_full=msg_sf,
        msg_ser_last=msg_sl,
        msg_npk=msg_npk,
        link_src=link_src,
        link_dst=link_dst,
        link_d2d=link_d2d,
        flow=flow,
        msg_lead=lead,
        lead_members={L: tuple(ids) for L, ids in members.items() if len(ids) > 1},
        stream_cap=[flow.max_streams] * len(cores),
        msg_bytes=[m.bytes for m in plan.messages],
        msg_last_use=[m.last_use for m in plan.messages],
        n_plan_actors=len(actors),
        n_plan_msgs=n_msgs,
        n_plan_links=len(link_src),
    )
    if wafer.host is not None and plan.host:
        from waferflow.backend_sim.host import add_host

        add_host(prepared, plan, wafer)
    if wafer.memory is not None:
        from waferflow.backend_sim.memory import plan_memory

        prepared.mem = plan_memory(prepared, plan, wafer.memory, wafer.sram_bytes)
    return prepared


def _check_route(wafer: Wafer, mid: int, path: list[int]) -> None:
    coords = [wafer.node_coord(c) for c in path]
    for c in coords:
        if c in wafer.dead_cores:
            raise PlanError(f"messages[{mid}].route visits dead core {c}; route around it")
    for a, b in itertools.pairwise(coords):
        if not adjacent(wafer, a, b):
            raise PlanError(
                f"messages[{mid}].route jumps from {a} to {b}, which share no link on "
                f"{wafer.topology.value} wafer {wafer.name!r}"
            )
        if link_is_dead(wafer, a, b):
            raise PlanError(
                f"messages[{mid}].route uses dead link {a}-{b} of wafer {wafer.name!r}; "
                "route around it or leave route unset for an automatic detour"
            )


__all__ = [
    "FlowParams",
    "Prepared",
    "crosses_die",
    "die_of",
    "flow_params",
    "link_spec",
    "prepare",
]
