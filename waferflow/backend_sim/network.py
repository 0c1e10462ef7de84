"""Turn a plan on a wafer into flat arrays: routes, links, per-hop timings, durations.

Both the event simulator and the analytical estimator start from ``prepare()``, so
they share routes, packetisation and every cost figure. Cores that run actors are
renumbered densely (``ci``, the local core index) so that per-core arrays stay small
on big wafers; links are numbered in the order messages first use them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

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
    acore = [a.core for a in actors]
    actor_ci = [ci_of.get(c, -1) for c in acore]
    dur = actor_durations(actors, wafer, config.compute)
    if dur and min(dur) < 0:
        a = actors[next(i for i, d in enumerate(dur) if d < 0)]
        raise PlanError(f"compute model gave actor {a.id} ({a.name!r}) a negative duration")
    order_map = dict(plan.order)
    order = [list(order_map[c]) for c in cores]
    msgs = plan.messages  # ids are positions (verify_plan)
    src = [m.src_actor for m in msgs]
    dst = [m.dst_actor for m in msgs]
    nbytes = [m.bytes for m in msgs]
    routes = [m.route for m in msgs]

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

    # Messages between the same cores (or over the same explicit route) with the same
    # payload share links, timings and packets: each class is worked out once, from its
    # first message, classes in the order of their first messages (so links are still
    # numbered in the order messages first use them, and a bad route fails as before).
    sender = np.fromiter(src, np.int64, len(src))
    cls, firsts = _classes(acore, sender, dst, nbytes, routes)
    lat_on, lat_d2d = specs[False][0], specs[True][0]
    c_local: list[bool] = []
    c_links: list[tuple[int, ...]] = []
    c_lat: list[tuple[int, ...]] = []
    c_sf: list[tuple[int, ...]] = []
    c_sl: list[tuple[int, ...]] = []
    c_npk: list[int] = []
    explicit: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[bool, ...]]] = {}
    for i in firsts:
        s = acore[src[i]]
        d = acore[dst[i]]
        c_local.append(s == d)
        if s == d:
            c_links.append(())
            c_lat.append(())
            c_sf.append(())
            c_sl.append(())
            c_npk.append(0)
            continue
        r = routes[i]
        if r is not None:
            cached = explicit.get(r)
            if cached is None:  # many messages share a route: check and number it once
                _check_route(wafer, i, list(r))
                cached = explicit[r] = links_of([wafer.physical_node(x) for x in r])
            links, kinds = cached
        else:
            cached = route_cache.get((s, d))
            if cached is None:
                path = route(wafer, divmod(s, cols), divmod(d, cols), config.route_order)
                cached = links_of([wafer.node_id(x) for x in path])
                route_cache[(s, d)] = cached
            links, kinds = cached
        n, full, last = packetize(nbytes[i], flow.packet_bytes, flow.header_packets)
        h = len(links)
        if ragged or tree:
            c_sf.append(tuple(duration_ps(full, link_bw[li]) for li in links))
            c_sl.append(tuple(duration_ps(last, link_bw[li]) for li in links))
            c_lat.append(
                tuple(link_lat[li] for li in links)
                if tree
                else tuple(lat_d2d if k else lat_on for k in kinds)
            )
        elif True in kinds:
            c_sf.append(tuple(ser(k, full) for k in kinds))
            c_sl.append(tuple(ser(k, last) for k in kinds))
            c_lat.append(tuple(lat_d2d if k else lat_on for k in kinds))
        else:
            c_sf.append((ser(False, full),) * h)
            c_sl.append((ser(False, last),) * h)
            c_lat.append((lat_on,) * h)
        c_links.append(links)
        c_npk.append(n)
    msg_local = np.array(c_local, dtype=bool)[cls].tolist()
    n_msgs = len(msgs)
    lead = list(range(n_msgs))
    members: dict[int, list[int]] = {}
    bcast = [m.bcast for m in msgs]
    if max(bcast, default=-1) >= 0:
        first: dict[tuple[int, int], int] = {}
        for i, b in enumerate(bcast):
            if b >= 0 and not msg_local[i]:
                L = first.setdefault((src[i], b), i)
                lead[i] = L
                members.setdefault(L, []).append(i)
    prepared = Prepared(
        cores=cores,
        actor_ci=actor_ci,
        dur=dur,
        order=order,
        out_msgs=_out_msgs(sender, len(actors)),
        msg_src=src,
        msg_dst=dst,
        msg_local=msg_local,
        msg_links=_spread(c_links, cls),
        msg_lat=_spread(c_lat, cls),
        msg_ser_full=_spread(c_sf, cls),
        msg_ser_last=_spread(c_sl, cls),
        msg_npk=_spread(c_npk, cls),
        link_src=link_src,
        link_dst=link_dst,
        link_d2d=link_d2d,
        flow=flow,
        msg_lead=lead,
        lead_members={L: tuple(ids) for L, ids in members.items() if len(ids) > 1},
        stream_cap=[flow.max_streams] * len(cores),
        msg_bytes=nbytes,
        msg_last_use=[m.last_use for m in msgs],
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


def _int_key(values: list[Any]) -> np.ndarray:
    """``values`` (ints, as ``verify_plan`` checks) as int64, or numbered in order of
    first appearance when one does not fit (a payload of 2**63 bytes or more)."""
    try:
        return np.fromiter(values, np.int64, len(values))
    except OverflowError:
        ids: dict[Any, int] = {}
        return np.fromiter((ids.setdefault(v, len(ids)) for v in values), np.int64, len(values))


def _classes(
    acore: list[int],
    sender: np.ndarray,
    dst: list[int],
    nbytes: list[int],
    routes: list[tuple[int, ...] | None],
) -> tuple[np.ndarray, list[int]]:
    """Per message its class (same source and destination core, explicit route and
    payload), classes numbered in the order of their first messages; and per class its
    first message."""
    n = len(sender)
    if n == 0:
        return np.zeros(0, np.int64), []
    core = np.fromiter(acore, np.int64, len(acore))
    keys = [
        _int_key(nbytes),
        core[np.fromiter(dst, np.int64, n)],
        core[sender],
    ]
    distinct = dict.fromkeys(routes)
    if len(distinct) > 1 or None not in distinct:  # explicit routes: numbered by value
        number = {r: i for i, r in enumerate(distinct)}  # (None is one more)
        keys.insert(1, np.fromiter(map(number.__getitem__, routes), np.int64, n))
    order = np.lexsort(keys)  # stable: a class's messages in id order
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for k in keys:
        ks = k[order]
        new[1:] |= ks[1:] != ks[:-1]
    first = order[new]  # per class (in key order) its first message
    by_first = np.argsort(first)
    rank = np.empty(len(first), dtype=np.int64)
    rank[by_first] = np.arange(len(first))
    cls = np.empty(n, dtype=np.int64)
    cls[order] = rank[np.cumsum(new) - 1]
    return cls, first[by_first].tolist()


def _out_msgs(sender: np.ndarray, n_actors: int) -> list[tuple[int, ...]]:
    """Per actor the ids of the messages it sends, ascending."""
    by_sender = np.argsort(sender, kind="stable").tolist()  # ids grouped by sender
    ends = np.cumsum(np.bincount(sender, minlength=n_actors)).tolist()
    return [tuple(by_sender[a:b]) for a, b in itertools.pairwise([0, *ends])]


def _spread(per_class: list[Any], cls: np.ndarray) -> list[Any]:
    """Per message its class's value (the same objects)."""
    return np.fromiter(per_class, dtype=object, count=len(per_class))[cls].tolist()


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
