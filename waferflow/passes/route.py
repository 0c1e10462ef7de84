"""route: an explicit route for every message of a placed plan, and the links' load.

``route_plan(plan, wafer, order=...)``:

* ``xy`` / ``yx``: dimension order (column first / row first) on a healthy mesh; a
  message whose dimension-order path touches a dead core or link takes the shortest
  detour (``waferflow.mapper.routing.route``);
* ``balance``: each message takes its XY or its YX route, chosen greedily to keep the
  busiest link as idle as possible: messages in order of decreasing bytes (then id),
  each onto the option whose busiest link would be least busy (then the smaller sum of
  busy time over its links, then XY); then sweeps that re-route one message at a time
  while that lowers the busiest link it touches. The result is compared with pure XY
  and pure YX and the least loaded of the three is kept, so ``balance`` is never worse
  than either on the busiest link. Deterministic.

Load is a link's busy time: the bytes it carries over its bandwidth (die-to-die links
are slower on some wafers), in seconds per step without contention. A message between
actors on one core gets the route ``(core,)`` and loads no link.

The ``route`` pass routes the plan that an earlier pass left in the context (``place``
or ``lower-collectives``) and stores ``(Plan, LinkLoadReport)`` under ``route``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import ClassVar

from waferflow.errors import PassError, PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.plan import Message, Plan
from waferflow.ir.summary import human_bytes, human_count, human_time
from waferflow.ir.target.wafer import Coord, Wafer
from waferflow.mapper.routing import route as mapper_route
from waferflow.passes.base import Pass, PassContext, option
from waferflow.passes.registry import register_pass

ORDERS = ("xy", "yx", "balance")
_SWEEPS = 4  # re-routing sweeps of the balance heuristic

Link = tuple[int, int]  # directed, core ids


@dataclass(frozen=True)
class LinkLoad:
    src: Coord
    dst: Coord
    bytes: int
    busy_s: float  # bytes / bandwidth

    def __str__(self) -> str:
        return f"{self.src}->{self.dst}: {self.bytes} B, {self.busy_s * 1e6:.3f} us"


@dataclass(frozen=True)
class LinkLoadReport:
    """Per-link load of a routed plan (``links`` sorted busiest first)."""

    order: str
    links: tuple[LinkLoad, ...]
    byte_hops: int  # sum over messages of bytes x hops
    detours: int  # messages whose route is longer than the shortest distance
    xy_choices: int  # messages routed XY (the rest YX); with order=balance
    note: str = ""

    @property
    def max_busy_s(self) -> float:
        return self.links[0].busy_s if self.links else 0.0

    @property
    def max_bytes(self) -> int:
        return max((x.bytes for x in self.links), default=0)

    @property
    def mean_busy_s(self) -> float:
        return sum(x.busy_s for x in self.links) / len(self.links) if self.links else 0.0

    def top(self, k: int = 5) -> tuple[LinkLoad, ...]:
        return self.links[:k]

    def summary(self) -> str:
        return (
            f"routes ({self.order}): {len(self.links):,} links used; the busiest is busy "
            f"{human_time(self.max_busy_s)} ({human_bytes(self.max_bytes)}), the mean link "
            f"{human_time(self.mean_busy_s)}; {human_count(self.byte_hops)} byte-hops, "
            f"{self.detours} detour(s)" + (f"; {self.note}" if self.note else "")
        )

    def __str__(self) -> str:
        lines = [self.summary()]
        lines += [f"  {x}" for x in self.top(8)]
        return "\n".join(lines)


class _Loads:
    """Busy seconds per directed link, with the wafer's bandwidths."""

    def __init__(self, wafer: Wafer) -> None:
        self.wafer = wafer
        self.busy: dict[Link, float] = {}
        self.nbytes: dict[Link, int] = {}
        self._inv_bw: dict[Link, float] = {}

    def inv_bw(self, link: Link) -> float:
        v = self._inv_bw.get(link)
        if v is None:
            w = self.wafer
            spec = w.link_spec(w.node_coord(link[0]), w.node_coord(link[1]))
            v = self._inv_bw[link] = 1.0 / spec.bandwidth
        return v

    def _physical(self, links: tuple[Link, ...]) -> tuple[Link, ...]:
        """A switched fabric's switch units as their switch (``Wafer.physical_node``)."""
        if self.wafer.tree is None:
            return links
        phys = self.wafer.physical_node
        return tuple((phys(a), phys(b)) for a, b in links)

    def add(self, links: tuple[Link, ...], nbytes: int, sign: int = 1) -> None:
        for ln in self._physical(links):
            self.busy[ln] = self.busy.get(ln, 0.0) + sign * nbytes * self.inv_bw(ln)
            self.nbytes[ln] = self.nbytes.get(ln, 0) + sign * nbytes

    def peak_with(self, links: tuple[Link, ...], nbytes: int) -> tuple[float, float]:
        """(busiest, summed) busy time of ``links`` if ``nbytes`` more crossed them."""
        vals = [self.busy.get(ln, 0.0) + nbytes * self.inv_bw(ln) for ln in self._physical(links)]
        return (max(vals, default=0.0), sum(vals))

    def max_busy(self) -> float:
        return max(self.busy.values(), default=0.0)


def _links(path: tuple[int, ...]) -> tuple[Link, ...]:
    return tuple(itertools.pairwise(path))


def _options(plan: Plan, wafer: Wafer, orders: tuple[str, ...]) -> list[list[tuple[int, ...]]]:
    """Per message, its candidate routes (core ids) for each order (deduplicated)."""
    cols = wafer.cols
    cache: dict[tuple[int, int, str], tuple[int, ...]] = {}
    out: list[list[tuple[int, ...]]] = []
    for m in plan.messages:
        s, d = plan.actors[m.src_actor].core, plan.actors[m.dst_actor].core
        if s == d:
            out.append([(s,)])
            continue
        if m.route is not None:  # an in-network collective's hop to or from a switch
            out.append([m.route])
            continue
        opts: list[tuple[int, ...]] = []
        for o in orders:
            key = (s, d, o)
            path = cache.get(key)
            if path is None:
                coords = mapper_route(wafer, divmod(s, cols), divmod(d, cols), o)
                path = cache[key] = tuple(wafer.node_id(x) for x in coords)
            if path not in opts:
                opts.append(path)
        out.append(opts)
    return out


def _balance(plan: Plan, wafer: Wafer, opts: list[list[tuple[int, ...]]]) -> list[int]:
    """Index of the chosen option per message (greedy, then re-routing sweeps)."""
    loads = _Loads(wafer)
    choice = [0] * len(plan.messages)
    links = [[_links(p) for p in o] for o in opts]
    order = sorted(range(len(plan.messages)), key=lambda i: (-plan.messages[i].bytes, i))
    for i in order:
        nb = plan.messages[i].bytes
        if len(opts[i]) > 1:
            scores = [(*loads.peak_with(ls, nb), k) for k, ls in enumerate(links[i])]
            choice[i] = min(scores)[2]
        loads.add(links[i][choice[i]], nb)
    for _ in range(_SWEEPS):
        moved = False
        for i in order:
            if len(opts[i]) < 2:
                continue
            nb = plan.messages[i].bytes
            loads.add(links[i][choice[i]], nb, -1)
            scores = [(*loads.peak_with(ls, nb), k) for k, ls in enumerate(links[i])]
            cur = next(s for s in scores if s[2] == choice[i])
            best = min(scores)
            if best[:2] < cur[:2]:
                choice[i] = best[2]
                moved = True
            loads.add(links[i][choice[i]], nb)
        if not moved:
            break
    return choice


def _report(
    plan: Plan, wafer: Wafer, routes: list[tuple[int, ...]], order: str, xy: int, note: str = ""
) -> LinkLoadReport:
    """Per-link load of ``routes``. Messages share few distinct paths: their bytes are
    summed per path first, and a link's busy time is its summed bytes over its
    bandwidth (one product, not a float sum per message)."""
    per_path: dict[tuple[int, ...], list[int]] = {}  # path -> [bytes, messages]
    for m, path in zip(plan.messages, routes, strict=True):
        got = per_path.get(path)
        if got is None:
            per_path[path] = [m.bytes, 1]
        else:
            got[0] += m.bytes
            got[1] += 1
    loads = _Loads(wafer)
    nbytes = loads.nbytes
    byte_hops = 0
    detours = 0
    mesh = wafer.topology.value == "mesh"
    for path, (b, count) in per_path.items():
        ls = loads._physical(_links(path))
        for ln in ls:
            nbytes[ln] = nbytes.get(ln, 0) + b
        byte_hops += b * len(ls)
        (rs, cs), (rd, cd) = wafer.node_coord(path[0]), wafer.node_coord(path[-1])
        if mesh and len(ls) > abs(rs - rd) + abs(cs - cd):
            detours += count
    busy = {ln: b * loads.inv_bw(ln) for ln, b in nbytes.items()}
    rows = sorted(busy, key=lambda ln: (-busy[ln], ln))
    links = tuple(
        LinkLoad(wafer.node_coord(a), wafer.node_coord(b), nbytes[(a, b)], busy[(a, b)])
        for a, b in rows
        if nbytes[(a, b)] > 0
    )
    return LinkLoadReport(order, links, byte_hops, detours, xy, note)


def route_plan(plan: Plan, wafer: Wafer, *, order: str = "xy") -> tuple[Plan, LinkLoadReport]:
    """``plan`` with an explicit route on every message, and the per-link load.

    Raises ``PlanError`` for an unknown order, an actor on a dead core, or a message
    whose endpoints the dead cores and links cut apart."""
    if order not in ORDERS:
        raise PlanError(f"unknown route order {order!r}; use one of {', '.join(ORDERS)}")
    if order in ("xy", "yx"):
        opts = _options(plan, wafer, (order,))
        routes = [o[0] for o in opts]
        rep = _report(plan, wafer, routes, order, len(routes) if order == "xy" else 0)
    else:
        opts = _options(plan, wafer, ("xy", "yx"))
        choice = _balance(plan, wafer, opts)
        routes = [o[c] for o, c in zip(opts, choice, strict=True)]
        xy = sum(1 for o, c in zip(opts, choice, strict=True) if c == 0)
        rep = _report(plan, wafer, routes, order, xy)
        for pure in ("xy", "yx"):  # never worse on the busiest link than a pure order
            k = 0 if pure == "xy" else 1
            alt = [o[min(k, len(o) - 1)] for o in opts]
            alt_rep = _report(plan, wafer, alt, order, len(alt) if k == 0 else 0)
            if alt_rep.max_busy_s < rep.max_busy_s:
                routes, rep = alt, _with_note(alt_rep, f"balanced greedy lost to pure {pure}")
    # every field but the route carries over (broadcast groups, last readers)
    messages = tuple(
        Message(m.id, m.src_actor, m.dst_actor, m.bytes, path, m.holds, m.bcast, m.last_use)
        for m, path in zip(plan.messages, routes, strict=True)
    )
    note = f"routes: {order}, busiest link {rep.max_busy_s * 1e6:.3f} us"
    return replace(plan, messages=messages, notes=(*plan.notes, note)), rep


def _with_note(rep: LinkLoadReport, note: str) -> LinkLoadReport:
    return LinkLoadReport(rep.order, rep.links, rep.byte_hops, rep.detours, rep.xy_choices, note)


def routes_touch_dead(plan: Plan, wafer: Wafer) -> list[int]:
    """Ids of messages whose explicit route visits a dead core (for checks and tests)."""
    dead = {wafer.core_id(c) for c in wafer.dead_cores}
    return [m.id for m in plan.messages if m.route is not None and dead & set(m.route)]


def _plan_in_context(ctx: PassContext, graph: Graph) -> Plan:
    """The placed plan: a parallel graph's, from its regions (lowered again when the
    context does not hold it); an unparallelised graph's, from ``place``'s result."""
    from waferflow.passes._parallel_ctx import ensure_lowered, load_state, store_state
    from waferflow.passes.place import PlacedResult

    if graph.parallel is not None:
        state = load_state(ctx, graph, "route")
        ensure_lowered(graph, state)
        store_state(ctx, graph, state)
        assert state.actor_plan is not None
        return state.actor_plan
    placed = ctx.find_result("place", PlacedResult)
    if placed is not None:
        return placed.plan
    raise PassError(
        "pass 'route' needs a placed plan: parallelize and schedule (or place) the graph, "
        "or run 'place' earlier in the pipeline"
    )


@register_pass
@dataclass(frozen=True)
class Route(Pass):
    """Give every message of the placed plan an explicit route; report link loads."""

    name: ClassVar[str] = "route"
    needs_wafer: ClassVar[bool] = True
    reads: ClassVar[str] = "the regions (or place's actor plan, unparallelised)"
    writes: ClassVar[str] = "nothing in the graph (routes go into the actor plan, a result)"
    order: str = option("xy", "xy | yx | balance (per message, XY or YX to even out links)")

    def check_options(self) -> None:
        if self.order not in ORDERS:
            raise PassError(
                f"option 'order' of pass 'route' is {self.order!r}; choose one of {', '.join(ORDERS)}"
            )

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        wafer = ctx.require_wafer(self.name)
        plan = _plan_in_context(ctx, graph)
        routed, report = route_plan(plan, wafer, order=self.order)
        ctx.note(self.name, report.summary())
        ctx.put_result(self.name, RoutedPlan(routed, report))
        return graph


@dataclass(frozen=True)
class RoutedPlan:
    """What the ``route`` pass stores: the routed plan and its link loads."""

    plan: Plan
    report: LinkLoadReport


__all__ = [
    "ORDERS",
    "LinkLoad",
    "LinkLoadReport",
    "Route",
    "RoutedPlan",
    "route_plan",
    "routes_touch_dead",
]
