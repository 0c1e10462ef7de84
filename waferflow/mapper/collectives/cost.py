"""Analytic time of a schedule on placed ranks, and the algorithm chooser.

The model is bulk synchronous and contention aware per step:

* Steps run one after another; a step ends when its slowest part ends.
* A transfer from rank a to rank b follows ``route(placement[a], placement[b])``, the
  list of cores from source to destination inclusive (a route that omits the source
  is accepted). Its links are the consecutive pairs of that list, taken as directed.
* Step time = max over directed links L of (bytes crossing L in the step) /
  bandwidth(L), plus the largest per-transfer latency (sum of the latencies of the
  links it crosses, i.e. latency x hops on a uniform fabric).

A step with a single transfer costs exactly latency x hops + bytes / bottleneck
bandwidth. With several transfers the bandwidth term is exact when the busiest link
can stay busy for the whole step (e.g. transfers on disjoint links, or evenly shared
ones); otherwise it is a lower bound, since a link may idle while its flows are
throttled elsewhere. Transfers between ranks on the same core cost nothing.

Closed form (tested): ring all-reduce of S bytes over n ranks whose ring neighbours
are one hop apart, wrap-around included (a torus row), with bandwidth B and latency
alpha per link, costs 2(n-1)/n x S/B + 2(n-1) x alpha when n divides S. On a mesh
row the wrap-around goes n-1 hops back along the row on the opposite-direction
links, so it shares no link with the forward transfers: each step still moves S/n
per link but waits (n-1) x alpha, i.e. 2(n-1) x (S/(nB) + (n-1) x alpha).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import pairwise

from waferflow.errors import PlanError
from waferflow.mapper.collectives.builders import build_schedule, supported_algorithms
from waferflow.mapper.collectives.schedule import Algorithm, CollectiveKind, Schedule

Coord = tuple[int, int]
Route = Callable[[Coord, Coord], list[Coord]]
LinkFn = Callable[[Coord, Coord], float]
Link = tuple[Coord, Coord]


def estimate_time(
    schedule: Schedule,
    placement: Sequence[Coord],
    route: Route,
    link_bandwidth: LinkFn,
    link_latency: LinkFn,
) -> float:
    """Seconds the schedule takes under the per-step contention model above."""
    if len(placement) != schedule.n_ranks:
        raise PlanError(
            f"the placement lists {len(placement)} cores for a group of {schedule.n_ranks} ranks"
        )
    paths: dict[tuple[int, int], tuple[Link, ...]] = {}
    latency: dict[tuple[int, int], float] = {}
    bandwidth: dict[Link, float] = {}
    total = 0.0
    for group in schedule.steps():
        load: dict[Link, int] = {}
        slowest_latency = 0.0
        for t in group:
            pair = (t.src, t.dst)
            if pair not in paths:
                paths[pair] = _links(placement[t.src], placement[t.dst], route)
                latency[pair] = sum(_positive(link_latency, link, True) for link in paths[pair])
            for link in paths[pair]:
                load[link] = load.get(link, 0) + t.bytes
            slowest_latency = max(slowest_latency, latency[pair])
        busiest = 0.0
        for link, nbytes in load.items():
            if link not in bandwidth:
                bandwidth[link] = _positive(link_bandwidth, link, False)
            busiest = max(busiest, nbytes / bandwidth[link])
        total += busiest + slowest_latency
    return total


def choose_algorithm(
    kind: CollectiveKind,
    n_ranks: int,
    total_bytes: int,
    placement: Sequence[Coord],
    route: Route,
    link_bandwidth: LinkFn,
    link_latency: LinkFn,
    *,
    grid_shape: tuple[int, int] | None = None,
    candidates: Iterable[Algorithm] | None = None,
    root: int = 0,
    arity: int = 2,
    max_operands: int = 4,
) -> tuple[Algorithm, float, dict[Algorithm, float]]:
    """The cheapest algorithm under ``estimate_time``, its time, and every candidate's
    time (in enum order, for printing a comparison). Ties go to the earlier algorithm
    in ``Algorithm`` order. By default every supported algorithm is tried, MESH2D only
    when ``grid_shape`` is given; explicit ``candidates`` must all be supported."""
    kind = CollectiveKind(kind)
    if candidates is None:
        pool = [a for a in supported_algorithms(kind) if a is not Algorithm.MESH2D or grid_shape]
    else:
        pool = [Algorithm(a) for a in candidates]
        if not pool:
            raise PlanError(f"no candidate algorithms given for the {kind.value}")
    costs: dict[Algorithm, float] = {}
    for algorithm in sorted(set(pool), key=list(Algorithm).index):
        schedule = build_schedule(
            kind,
            algorithm,
            n_ranks,
            total_bytes,
            grid_shape=grid_shape,
            root=root,
            arity=arity,
            max_operands=max_operands,
        )
        costs[algorithm] = estimate_time(schedule, placement, route, link_bandwidth, link_latency)
    best = min(costs, key=lambda a: (costs[a], list(Algorithm).index(a)))
    return best, costs[best], costs


def _links(src: Coord, dst: Coord, route: Route) -> tuple[Link, ...]:
    if src == dst:
        return ()
    path = list(route(src, dst))
    if not path or path[0] != src:
        path.insert(0, src)
    if path[-1] != dst:
        raise PlanError(f"route from core {src} to core {dst} ends at {path[-1]}, not {dst}")
    return tuple((a, b) for a, b in pairwise(path))


def _positive(fn: LinkFn, link: Link, zero_ok: bool) -> float:
    value = float(fn(*link))
    if value < 0 or (value == 0 and not zero_ok):
        name, bound = ("latency", ">= 0") if zero_ok else ("bandwidth", "> 0")
        raise PlanError(f"link {link[0]} -> {link[1]} has {name} {value}; it must be {bound}")
    return value
