"""Plain data between compiled plans and the placement solvers.

The solvers (``placement.py``) see grids, groups, flows and actors; the compiler has a
``Wafer``, a ``Plan`` and a parallel ``Layout``. This module converts between them and
holds the structured pieces of placement that need no solver:

* ``placement_grid``: the wafer as a ``Grid``; nodes of a coarse view that hold less than
  ``MIN_CAPACITY`` of a full node (a ragged edge, or mostly dead) count as dead, since a
  rank on them runs at that fraction of the speed;
* ``tile_stages`` (from ``tiling.py``, with ``shrink_rects``, ``block_problem``): each
  stage's rectangle filled with its ``dp x tp`` ranks as a block grid (a
  tensor-parallel group is an ``a x b`` block, its ranks in a one-hop ring order when
  the block has one; replicas are blocks side by side), the block shape and the anchor
  inside an oversized rectangle chosen by the bytes x hops of the ranks' flows;
* ``rank_flows`` / ``layout_cost``: a lowered plan's messages as flows between ranks, and
  their bytes x hops under a layout;
* ``refine_ranks``: swap descent and large-neighbourhood search over the ranks, started
  from a given layout (never worse than the start);
* ``actor_problem`` / ``remap_plan``: one-actor-per-op plans as an ``AssignProblem``,
  and a plan with its actors moved;
* ``plan_traffic``: bytes x hops of every message of a plan (explicit routes, else
  the default route's length).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from waferflow.errors import PlanError
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import CAPACITY_TIERS, Topology, Wafer
from waferflow.mapper.assign import DIRECT_LIMIT, assignment_report, solve_assignment
from waferflow.mapper.bounds import assignment_lower_bound
from waferflow.mapper.cost import assignment_cost, assignment_violations
from waferflow.mapper.cpsat import SolveOptions
from waferflow.mapper.lns import improve_assignment, lns_budget
from waferflow.mapper.local import swap_descent
from waferflow.mapper.problem import (
    AssignProblem,
    Flow,
    Grid,
    Rect,
    fmt_bytes,
)
from waferflow.mapper.report import SolveReport
from waferflow.mapper.routing import route
from waferflow.mapper.tiling import (
    block_orders,
    block_problem,
    block_shape,
    shrink_rects,
    tile_stages,
)

MIN_CAPACITY = CAPACITY_TIERS[-1]  # a node with less of a full node's cores gets no rank


# --- the wafer as a grid ----------------------------------------------------------------


def usable_mask(wafer: Wafer, need: int = 0) -> np.ndarray:
    """``mask[row, col]``: the alive nodes a rank may be given. On a coarse view, the
    strongest of ``CAPACITY_TIERS`` that still leaves ``need`` nodes and a connected
    mesh: full nodes first, since a rank on a node with 75% of the cores runs its
    tensor-parallel group (which waits for its slowest rank) 33% slower; else nodes
    with at least 95%, then ``MIN_CAPACITY`` of a full node; else every alive node.
    (Routes may still cross the nodes left out; a ``Grid`` must be connected.)"""
    alive = np.ones((wafer.rows, wafer.cols), dtype=bool)
    for r, c in wafer.dead_cores:
        alive[r, c] = False
    for tier in CAPACITY_TIERS:
        weak = wafer.nodes_below(tier)
        if not weak:
            return alive
        strong = alive.copy()
        for r, c in weak:
            strong[r, c] = False
        if strong.sum() >= max(need, 1) and len(grid_from_mask(wafer, strong).islands()) == 1:
            return strong
    return alive


def grid_from_mask(wafer: Wafer, mask: np.ndarray) -> Grid:
    rows, cols = mask.shape
    dead = frozenset((int(r), int(c)) for r, c in zip(*np.nonzero(~mask), strict=True))
    return Grid(rows, cols, dead, min(wafer.die_rows, rows), min(wafer.die_cols, cols))


def placement_grid(wafer: Wafer) -> Grid:
    """The wafer as a placement ``Grid`` (usable nodes alive, the wafer's dies)."""
    return grid_from_mask(wafer, usable_mask(wafer))


def usable_box(mask: np.ndarray) -> Rect:
    """The bounding box of the usable cells."""
    rows = np.nonzero(mask.any(axis=1))[0]
    cols = np.nonzero(mask.any(axis=0))[0]
    if rows.size == 0:
        raise PlanError("no usable core on the wafer")
    r0, c0 = int(rows[0]), int(cols[0])
    return Rect(r0, c0, int(rows[-1]) - r0 + 1, int(cols[-1]) - c0 + 1)


def crop_grid(grid: Grid, box: Rect) -> Grid:
    """The part of ``grid`` inside ``box``. The die counts are kept, so die boundaries
    move when a crop cuts a ragged edge off (an approximation of the die term, exact
    without a crop)."""
    if box == Rect(0, 0, grid.rows, grid.cols):
        return grid
    dead = frozenset(
        (r - box.row, c - box.col)
        for r, c in grid.dead
        if box.row <= r < box.row + box.height and box.col <= c < box.col + box.width
    )
    dies = (min(grid.die_rows, box.height), min(grid.die_cols, box.width))
    return Grid(box.height, box.width, dead, *dies)


def describe_view(wafer: Wafer) -> str:
    """``'wse2@16x (63x48 nodes of up to 16x16 cores)'`` or ``'mesh16x16 (16x16 cores)'``."""
    k = wafer.coarsen_factor
    if k > 1:
        return (
            f"{wafer.name} ({wafer.rows}x{wafer.cols} nodes of up to {k}x{k} cores; a rank "
            "runs on a whole node)"
        )
    return f"{wafer.name} ({wafer.rows}x{wafer.cols} cores)"


def hop_distance(wafer: Wafer, a: int, b: int) -> int:
    """Hops of a fault-free shortest route between cores ``a`` and ``b``: links crossed
    (on a switched fabric, two per level climbed to their lowest common switch)."""
    if a == b:
        return 0
    if wafer.topology is Topology.CROSSBAR:
        return 1
    if wafer.tree is not None:
        return wafer.tree.hops(divmod(a, wafer.cols), divmod(b, wafer.cols), wafer.cols)
    (ra, ca), (rb, cb) = divmod(a, wafer.cols), divmod(b, wafer.cols)
    dr, dc = abs(ra - rb), abs(ca - cb)
    if wafer.topology is Topology.TORUS:
        dr, dc = min(dr, wafer.rows - dr), min(dc, wafer.cols - dc)
    return dr + dc


@dataclass(frozen=True)
class Traffic:
    """Bytes and bytes x hops of a plan's messages (``inter_stage_*``: between stages)."""

    bytes: int
    byte_hops: float
    inter_stage_bytes: int
    inter_stage_byte_hops: float


def plan_traffic(plan: Plan, wafer: Wafer) -> Traffic:
    """Bytes x hops of every message: its explicit route, else the default route (with
    detours on a faulty wafer), else the shortest distance on a healthy one."""
    faulty = bool(wafer.dead_cores or wafer.dead_links)
    cache: dict[tuple[int, int], int] = {}
    total = inter = 0.0
    nbytes = inter_bytes = 0
    actors = plan.actors
    cols = wafer.cols
    for m in plan.messages:
        src, dst = actors[m.src_actor], actors[m.dst_actor]
        if m.route is not None:
            h = len(m.route) - 1
        elif not faulty or src.core == dst.core:
            h = hop_distance(wafer, src.core, dst.core)
        else:
            key = (src.core, dst.core)
            h = cache.get(key, -1)
            if h < 0:
                h = cache[key] = len(route(wafer, divmod(key[0], cols), divmod(key[1], cols))) - 1
        nbytes += m.bytes
        total += m.bytes * h
        if src.stage != dst.stage:
            inter_bytes += m.bytes
            inter += m.bytes * h
    return Traffic(nbytes, total, inter_bytes, inter)


# --- ranks and their flows ---------------------------------------------------------------


@dataclass(frozen=True)
class RankFlows:
    """A parallel plan's messages between ranks. Rank ``i`` is stage ``i // ranks``,
    rank ``i % ranks`` of that stage."""

    pp: int
    ranks: int  # per stage
    pairs: tuple[tuple[int, int, float], ...]  # (a, b, bytes), a < b, sorted
    stage_flows: tuple[tuple[int, int, float], ...]  # (src stage, dst stage, bytes), sorted

    @property
    def n(self) -> int:
        return self.pp * self.ranks

    def flows(self) -> tuple[Flow, ...]:
        return tuple(Flow(a, b, w) for a, b, w in self.pairs)


def rank_flows(
    plan: Plan, layout_cores: Sequence[Sequence[int]], n_cores: int = 1 << 62
) -> RankFlows:
    """Aggregate ``plan``'s messages by the ranks (``layout_cores[stage][rank]``) of their
    endpoints' cores; nodes from ``n_cores`` on are a fabric's switches, whose messages
    are no rank's. Raises ``PlanError`` if an actor sits on a core of no rank."""
    pp, ranks = len(layout_cores), len(layout_cores[0])
    rank_of = {c: s * ranks + r for s, cs in enumerate(layout_cores) for r, c in enumerate(cs)}
    pairs: dict[tuple[int, int], float] = {}
    stages: dict[tuple[int, int], float] = {}
    for m in plan.messages:
        ca, cb = plan.actors[m.src_actor].core, plan.actors[m.dst_actor].core
        if ca == cb or m.bytes == 0 or max(ca, cb) >= n_cores:
            continue  # local, empty, or to a switch (an in-network collective's step)
        a, b = rank_of.get(ca), rank_of.get(cb)
        if a is None or b is None:
            raise PlanError(
                f"message {m.id} runs between cores {ca} and {cb}, not both cores of ranks; "
                "the plan does not match the layout"
            )
        key = (min(a, b), max(a, b))
        pairs[key] = pairs.get(key, 0.0) + m.bytes
        sa, sb = a // ranks, b // ranks
        if sa != sb:
            stages[(sa, sb)] = stages.get((sa, sb), 0.0) + m.bytes
    return RankFlows(
        pp,
        ranks,
        tuple((a, b, w) for (a, b), w in sorted(pairs.items())),
        tuple((a, b, w) for (a, b), w in sorted(stages.items())),
    )


def layout_cost(
    flows: RankFlows, cores: Sequence[int], cols: int, dist: np.ndarray | None = None
) -> float:
    """``sum(bytes x hops)`` of the rank flows with rank ``i`` on ``cores[i]``: Manhattan
    hops, or ``dist[a, b]`` when given (a switched fabric's ``hop_matrix``)."""
    if not flows.pairs:
        return 0.0
    arr = np.array(flows.pairs, dtype=np.float64)
    pos = np.asarray(cores, dtype=np.int64)
    a, b = pos[arr[:, 0].astype(np.int64)], pos[arr[:, 1].astype(np.int64)]
    if dist is not None:
        return float((arr[:, 2] * dist[a, b]).sum())
    d = np.abs(a // cols - b // cols) + np.abs(a % cols - b % cols)
    return float((arr[:, 2] * d).sum())


def hop_matrix(wafer: Wafer) -> np.ndarray:
    """``hop_distance`` between every pair of cores (for small wafers: n x n)."""
    n = wafer.num_cores
    return np.array([[hop_distance(wafer, a, b) for b in range(n)] for a in range(n)], float)


def flat_cores(layout_cores: Sequence[Sequence[int]]) -> tuple[int, ...]:
    return tuple(c for stage in layout_cores for c in stage)


def split_cores(cores: Sequence[int], pp: int, ranks: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(cores[s * ranks : (s + 1) * ranks]) for s in range(pp))


# --- rank-level refinement ----------------------------------------------------------------


def rank_problem(grid: Grid, flows: RankFlows) -> AssignProblem:
    """Ranks as actors (one per core, no memory limit: a rank's memory is checked per
    core by the parallel memory plan), flows between ranks."""
    names = tuple(f"s{i // flows.ranks}r{i % flows.ranks}" for i in range(flows.n))
    return AssignProblem(grid, flows.n, (0,) * flows.n, flows.flows(), 1, names=names)


def refine_ranks(
    problem: AssignProblem, start: tuple[int, ...], options: SolveOptions
) -> tuple[tuple[int, ...], SolveReport]:
    """Improve ``start`` by swap descent and large-neighbourhood search (CP-SAT on
    windows, hinted with the current placement: never worse); up to ``DIRECT_LIMIT``
    actors, also the direct CP-SAT model (whose bound then holds for the problem). Both
    budgets scale with the problem: the direct model gets ``lns.lns_budget`` of half the
    limit, the LNS ``lns.lns_budget`` of what is left, and the LNS stops after
    ``lns.STALL_ROUNDS`` rounds in a row without gain."""
    bad = assignment_violations(problem, start)
    if bad:
        raise PlanError(f"the start layout is not valid on the placement grid: {bad[0]}")
    t0 = time.perf_counter()
    techniques = ["start:given"]
    best = swap_descent(problem, start)
    if assignment_cost(problem, best) < assignment_cost(problem, start):
        techniques.append("local:swap-descent")
    else:
        best = start
    bound = assignment_lower_bound(problem)
    used = 0.0
    budget = options.budget
    if problem.n_actors <= DIRECT_LIMIT:
        # as much as the LNS would get: on the ranks of real plans (16 on GPT-2's
        # --plan auto) 5 s of it found nothing that 0.25 s had not (docs/mapper.md)
        limit = lns_budget(problem.n_actors, options.time_limit / 2)
        direct = solve_assignment(problem, replace(options, time_limit=limit))
        used += direct.report.deterministic_time
        bound = max(bound, direct.report.best_bound)
        techniques.append("cp-sat:direct")
        if direct.cost < assignment_cost(problem, best):
            best = direct.core_of_actor
        budget -= direct.report.deterministic_time
    budget = lns_budget(problem.n_actors, budget)
    if budget > 0.05 and assignment_cost(problem, best) > bound * (1 + options.gap_limit):
        best, dt, rounds, better = improve_assignment(problem, best, budget, options, bound)
        used += dt
        techniques.append(f"lns:assignment(rounds={rounds},improved={better})")
    _, report = assignment_report(problem, best, bound, options, t0, used, techniques)
    return best, report


# --- one actor per op ------------------------------------------------------------------------


def actor_problem(plan: Plan, wafer: Wafer, grid: Grid) -> tuple[AssignProblem, str]:
    """The plan's actors as an ``AssignProblem``: flows are its messages, memory each
    actor's resident bytes, ``ceil(actors / alive cores)`` actors per core at most.
    When the actors cannot fit the cores' SRAM (the naive lowering does not check
    memory), memory is left out and the note says so."""
    n = len(plan.actors)
    if n == 0:
        raise PlanError(f"plan {plan.name!r} has no actors to place")
    per_core = max(1, math.ceil(n / grid.num_alive))
    sram = min(wafer.core_sram_bytes(grid.coord(c)) for c in grid.alive_cores)
    mem = tuple(a.mem_bytes for a in plan.actors)
    flows = tuple(Flow(m.src_actor, m.dst_actor, float(m.bytes)) for m in plan.messages)
    names = tuple(a.name for a in plan.actors)
    note = f"memory: at most {fmt_bytes(sram)} of resident bytes per core"
    biggest = max(range(n), key=lambda i: (mem[i], -i))
    if mem[biggest] > sram or sum(mem) > sram * grid.num_alive:
        note = (
            f"memory not enforced: actor {names[biggest]!r} alone holds {fmt_bytes(mem[biggest])} "
            f"and all hold {fmt_bytes(sum(mem))}, but a core has {fmt_bytes(sram)}"
        )
        mem = (0,) * n
    problem = AssignProblem(
        grid, n, mem, flows, max(sram, 1), max_actors_per_core=per_core, names=names
    )
    return problem, note


def remap_plan(plan: Plan, core_of_actor: Sequence[int], *, note: str, source: str) -> Plan:
    """``plan`` with actor ``i`` on ``core_of_actor[i]``; each core runs its actors in id
    (graph) order; explicit routes are dropped (they belonged to the old cores).
    Messages between actors that now share a core stay (they cost no link)."""
    if len(core_of_actor) != len(plan.actors):
        raise PlanError(f"{len(core_of_actor)} cores for {len(plan.actors)} actors")
    actors = tuple(replace(a, core=int(c)) for a, c in zip(plan.actors, core_of_actor, strict=True))
    messages = tuple(replace(m, route=None) if m.route is not None else m for m in plan.messages)
    order: dict[int, list[int]] = {}
    for a in actors:
        order.setdefault(a.core, []).append(a.id)
    return Plan.build(
        plan.name,
        plan.wafer_name,
        actors,
        messages,
        order,
        notes=(*plan.notes, note),
        source=source,
    )


def order_consistent(plan: Plan) -> bool:
    """Whether every core runs its actors in ascending id (graph) order."""
    return all(list(ids) == sorted(ids) for _, ids in plan.order)


def assignment_cost_of(problem: AssignProblem, cores: Sequence[int]) -> float:
    """``sum(bytes x Manhattan hops)`` of the problem's flows under ``cores``."""
    return assignment_cost(problem, tuple(cores))


__all__ = [
    "MIN_CAPACITY",
    "RankFlows",
    "Traffic",
    "actor_problem",
    "assignment_cost_of",
    "block_orders",
    "block_problem",
    "block_shape",
    "crop_grid",
    "describe_view",
    "flat_cores",
    "grid_from_mask",
    "hop_distance",
    "hop_matrix",
    "layout_cost",
    "order_consistent",
    "placement_grid",
    "plan_traffic",
    "rank_flows",
    "rank_problem",
    "refine_ranks",
    "remap_plan",
    "shrink_rects",
    "split_cores",
    "tile_stages",
    "usable_box",
    "usable_mask",
]
