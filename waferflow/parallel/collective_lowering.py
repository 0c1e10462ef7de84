"""Collective ops to point-to-point transfers between the group's cores.

For each collective instance (one op, one group of ranks, one micro-batch) the
schedule comes from the collectives library (``build_schedule``): with
``algo=auto`` the cheapest algorithm under its cost model for the group's cores on
this wafer (``choose_algorithm``: routes, link bandwidths and latencies), else the
one asked for (falling back to the cheapest when it does not implement this
collective, with a diagnostic). The schedule is cached by its shape, so a plan with
thousands of identical all-reduces costs a handful of searches.

Expansion (``expand``): for every rank, one *step actor* per step in which it
receives (it adds or copies what arrived); a transfer of step ``j`` leaves from the
sender's latest actor before ``j`` (its producer before its first receive). So
each step reads the state of the step before, as the schedule's semantics say,
and the last step actor of a rank holds its result.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field

from waferflow.ir.opkind import OpKind
from waferflow.ir.target.wafer import Coord, Wafer
from waferflow.mapper.collectives import (
    Algorithm,
    CollectiveKind,
    Schedule,
    build_schedule,
    choose_algorithm,
    supported_algorithms,
)
from waferflow.mapper.routing import route
from waferflow.parallel.plan_spec import CollectiveAlgo

K = OpKind
KIND_OF: dict[OpKind, CollectiveKind] = {
    K.ALL_REDUCE: CollectiveKind.ALL_REDUCE,
    K.REDUCE: CollectiveKind.REDUCE,
    K.ALL_GATHER: CollectiveKind.ALL_GATHER,
    K.REDUCE_SCATTER: CollectiveKind.REDUCE_SCATTER,
    K.ALL_TO_ALL: CollectiveKind.ALL_TO_ALL,
    K.BROADCAST: CollectiveKind.BROADCAST,
}


def grid_shape(coords: list[Coord]) -> tuple[int, int] | None:
    """(rows, cols) when the coordinates fill a rectangle in row-major order."""
    rows = sorted({r for r, _ in coords})
    cols = sorted({c for _, c in coords})
    if len(rows) < 2 or len(cols) < 2 or len(rows) * len(cols) != len(coords):
        return None
    if coords != [(r, c) for r in rows for c in cols]:
        return None
    return len(rows), len(cols)


@dataclass
class ScheduleCache:
    """Chooses and builds schedules for groups of cores on one wafer."""

    wafer: Wafer
    algo: CollectiveAlgo
    notes: list[str] = field(default_factory=list)
    _choice: dict[tuple, tuple[Algorithm, float]] = field(default_factory=dict)
    _sched: dict[tuple, Schedule] = field(default_factory=dict)
    _routes: dict[tuple[Coord, Coord], list[Coord]] = field(default_factory=dict)

    def _route(self, a: Coord, b: Coord) -> list[Coord]:
        key = (a, b)
        r = self._routes.get(key)
        if r is None:
            r = self._routes[key] = route(self.wafer, a, b)
        return r

    def _bw(self, a: Coord, b: Coord) -> float:
        return self.wafer.link_spec(a, b).bandwidth

    def _lat(self, a: Coord, b: Coord) -> float:
        return self.wafer.link_spec(a, b).latency

    def schedule(
        self,
        kind: CollectiveKind,
        cores: tuple[int, ...],
        nbytes: int,
        root: int = 0,
        algorithm: Algorithm | None = None,
    ) -> Schedule:
        """The schedule of one instance; ``algorithm`` forces one (a compute-shift
        matmul rotates its blocks on the ring)."""
        n = len(cores)
        coords = [divmod(c, self.wafer.cols) for c in cores]
        grid = grid_shape(coords)
        if algorithm is None:
            algorithm = self._algorithm(kind, coords, nbytes, grid, root)
        key = (kind, algorithm, n, nbytes, grid if algorithm is Algorithm.MESH2D else None, root)
        s = self._sched.get(key)
        if s is None:
            s = self._sched[key] = build_schedule(
                kind, algorithm, n, nbytes, grid_shape=key[4], root=root
            )
        return s

    def _algorithm(
        self,
        kind: CollectiveKind,
        coords: list[Coord],
        nbytes: int,
        grid: tuple[int, int] | None,
        root: int,
    ) -> Algorithm:
        supported = supported_algorithms(kind)
        # algo=innet: the collectives the switches cannot run take the cheapest schedule
        if self.algo not in (CollectiveAlgo.AUTO, CollectiveAlgo.INNET):
            forced = Algorithm(self.algo.value)
            if forced in supported and (forced is not Algorithm.MESH2D or grid):
                return forced
            msg = (
                f"algo={self.algo.value} does not implement {kind.value} on this group; "
                "the cheapest supported algorithm is used"
            )
            if msg not in self.notes:
                self.notes.append(msg)
        if len(coords) == 1:
            return Algorithm.RING
        return self.cheapest(kind, coords, nbytes, grid, root)[0]

    def best_seconds(self, kind: CollectiveKind, cores: tuple[int, ...], nbytes: int) -> float:
        """The cost model's time of the cheapest rank-to-rank schedule."""
        coords = [divmod(c, self.wafer.cols) for c in cores]
        return self.cheapest(kind, coords, nbytes, grid_shape(coords), 0)[1]

    def cheapest(
        self,
        kind: CollectiveKind,
        coords: list[Coord],
        nbytes: int,
        grid: tuple[int, int] | None,
        root: int,
    ) -> tuple[Algorithm, float]:
        supported = supported_algorithms(kind)
        plain = not self.wafer.dead_cores and not self.wafer.dead_links and self.wafer.num_dies == 1
        base = coords[0]
        shape = tuple((r - base[0], c - base[1]) for r, c in coords) if plain else tuple(coords)
        key = (kind, shape, nbytes, root)
        a = self._choice.get(key)
        if a is None:
            cands = [x for x in supported if x is not Algorithm.MESH2D or grid]
            best, t, _ = choose_algorithm(
                kind, len(coords), nbytes, coords, self._route, self._bw, self._lat,
                grid_shape=grid, candidates=cands, root=root,
            )  # fmt: skip
            a = self._choice[key] = (best, t)
        return a


@dataclass
class Expanded:
    """The actors and transfers of one collective instance, by member (rank)."""

    steps: list[list[tuple[int, int, int]]]  # per member: (step, bytes received, bytes reduced)
    transfers: list[tuple[int, int, int, int]]  # (step, src member, dst member, bytes)


def expand(schedule: Schedule) -> Expanded:
    n = schedule.n_ranks
    recv: list[dict[int, list[int]]] = [{} for _ in range(n)]
    for t in schedule.transfers:
        tot = recv[t.dst].setdefault(t.step, [0, 0])
        tot[0] += t.bytes
        if t.reduce:
            tot[1] += t.bytes
    steps = [sorted((j, b[0], b[1]) for j, b in r.items()) for r in recv]
    transfers = [(t.step, t.src, t.dst, t.bytes) for t in schedule.transfers]
    return Expanded(steps, transfers)


def wire(
    ex: Expanded,
    entry: list[int | None],
    make_step: Callable[[int, int, int, int], int],
    make_start: Callable[[int], int],
    message: Callable[[int, int, int], None],
) -> list[int]:
    """Create the step actors (``make_step(member, step, received, reduced)``) and
    the transfers (``message(src actor, dst actor, bytes)``); returns each member's
    final actor. ``entry[i]`` is the actor holding member i's input (None: create a
    start actor with ``make_start``)."""
    n = len(entry)
    actor_at: list[dict[int, int]] = [{} for _ in range(n)]
    steps_of: list[list[int]] = []  # per member: its steps, ascending (ex.steps is sorted)
    actors_of: list[list[int]] = []  # per member: its first actor, then one per step
    for i in range(n):
        e = entry[i]
        actors_of.append([e if e is not None else make_start(i)])
        steps_of.append([])
        for j, got, reduced in ex.steps[i]:
            a = actor_at[i][j] = make_step(i, j, got, reduced)
            steps_of[i].append(j)
            actors_of[i].append(a)

    def latest_before(i: int, step: int) -> int:
        return actors_of[i][bisect_left(steps_of[i], step)]

    for step, src, dst, nbytes in ex.transfers:
        message(latest_before(src, step), actor_at[dst][step], nbytes)
    return [latest_before(i, 1 << 30) for i in range(n)]


__all__ = ["KIND_OF", "Expanded", "ScheduleCache", "expand", "grid_shape", "wire"]
