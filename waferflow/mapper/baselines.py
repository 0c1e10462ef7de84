"""Simple placements that every solver result is measured against.

Floorplans: groups in order as vertical strips of equal width, or of width
proportional to their work. Assignments: actors in index order along the rows
(row-major), along a boustrophedon (snake), and a greedy that puts each actor next to
its heaviest already-placed partners.
"""

from __future__ import annotations

import time

import numpy as np

from waferflow.errors import PlanError
from waferflow.mapper.bounds import assignment_lower_bound, floorplan_lower_bound
from waferflow.mapper.cost import assignment_cost, evaluate_floorplan
from waferflow.mapper.problem import AssignProblem, FloorplanProblem, Rect
from waferflow.mapper.report import (
    Assignment,
    FloorplanResult,
    SolveReport,
    Status,
    assignment_view,
    floorplan_view,
    relative_gap,
)

# --- floorplans ---------------------------------------------------------------------


def strips_from_widths(problem: FloorplanProblem, widths: list[int]) -> tuple[Rect, ...]:
    """Full-height vertical strips, left to right in group order."""
    out = []
    x = 0
    for w in widths:
        out.append(Rect(0, x, problem.grid.rows, w))
        x += w
    return tuple(out)


def proportional_widths(
    total: int, shares: list[float], minimums: list[int] | None = None
) -> list[int]:
    """Integer widths summing to ``total``, proportional to ``shares`` but at least
    ``minimums`` (default 1): groups held at their minimum drop out and the rest share
    what is left (water-filling), then largest remainders round."""
    n = len(shares)
    lows = [max(1, m) for m in minimums] if minimums is not None else [1] * n
    if sum(lows) > total:
        raise PlanError(
            f"{n} strips need {sum(lows)} columns but the grid has {total}; use a wider grid or fewer groups"
        )
    pinned: set[int] = set()
    while True:
        free = [k for k in range(n) if k not in pinned]
        room = total - sum(lows[k] for k in pinned)
        s = float(sum(shares[k] for k in free))
        raw = {k: room * shares[k] / s if s > 0 else room / len(free) for k in free}
        low = [k for k in free if raw[k] < lows[k]]
        if not low:
            break
        pinned.update(low)
    target = [float(lows[k]) if k in pinned else raw[k] for k in range(n)]
    widths = [max(lows[k], int(target[k])) for k in range(n)]
    while sum(widths) > total:  # the minimums overshot: take from the widest above its minimum
        k = max(
            (k for k in range(n) if widths[k] > lows[k]),
            key=lambda k: (widths[k] - target[k], widths[k], -k),
        )
        widths[k] -= 1
    order = sorted(range(n), key=lambda k: (-(target[k] - widths[k]), k))
    i = 0
    while sum(widths) < total:
        widths[order[i % n]] += 1
        i += 1
    return widths


def _floorplan_result(
    problem: FloorplanProblem, rects: tuple[Rect, ...], name: str, t0: float
) -> FloorplanResult:
    cost = evaluate_floorplan(problem, rects)
    bound = floorplan_lower_bound(problem, cost.objective if cost.feasible else None)
    rep = SolveReport(
        status=Status.BASELINE,
        objective=cost.objective,
        best_bound=bound,
        gap=relative_gap(cost.objective, bound),
        wall_time=time.perf_counter() - t0,
        deterministic_time=0.0,
        techniques=(f"baseline:{name}",),
        view=floorplan_view(problem.grid, rects),
    )
    return FloorplanResult(rects, cost, rep)


def equal_strips(problem: FloorplanProblem) -> FloorplanResult:
    """Groups in order as vertical strips of (nearly) equal width."""
    t0 = time.perf_counter()
    widths = proportional_widths(problem.grid.cols, [1.0] * len(problem.groups))
    return _floorplan_result(problem, strips_from_widths(problem, widths), "equal-strips", t0)


def work_strips(problem: FloorplanProblem) -> FloorplanResult:
    """Groups in order as vertical strips with widths proportional to their work, but
    wide enough for their memory."""
    t0 = time.perf_counter()
    rows = problem.grid.rows
    mem_cols = [-(-m // rows) for m in problem.min_areas]
    widths = proportional_widths(problem.grid.cols, [g.work for g in problem.groups], mem_cols)
    return _floorplan_result(problem, strips_from_widths(problem, widths), "work-strips", t0)


FLOORPLAN_BASELINES = {"equal strips": equal_strips, "work strips": work_strips}

# --- assignments --------------------------------------------------------------------


def _fill_in_order(problem: AssignProblem, order: list[int]) -> tuple[int, ...]:
    """Actors in index order onto cores in ``order``, moving on only when a core is full
    (or does not suit the actor)."""
    cap = dict.fromkeys(order, problem.max_actors_per_core)
    mem = dict.fromkeys(order, problem.core_sram)
    allowed = None if problem.allowed is None else [set(s) for s in problem.allowed]
    out: list[int] = []
    p = 0
    n = len(order)
    for a in range(problem.n_actors):
        for k in range(n):
            c = order[(p + k) % n]
            if (
                cap[c] > 0
                and mem[c] >= problem.actor_mem[a]
                and (allowed is None or c in allowed[a])
            ):
                cap[c] -= 1
                mem[c] -= problem.actor_mem[a]
                out.append(c)
                p = (p + k) % n
                break
        else:
            raise PlanError(
                f"no core left for actor {problem.actor_names[a]!r} (memory or region full)"
            )
    return tuple(out)


def _assignment_result(
    problem: AssignProblem, cores: tuple[int, ...], name: str, t0: float
) -> Assignment:
    cost = assignment_cost(problem, cores)
    bound = assignment_lower_bound(problem)
    rep = SolveReport(
        status=Status.BASELINE,
        objective=cost,
        best_bound=bound,
        gap=relative_gap(cost, bound),
        wall_time=time.perf_counter() - t0,
        deterministic_time=0.0,
        techniques=(f"baseline:{name}",),
        view=assignment_view(problem.grid, cores),
    )
    return Assignment(cores, cost, rep)


def row_major(problem: AssignProblem) -> Assignment:
    t0 = time.perf_counter()
    return _assignment_result(
        problem, _fill_in_order(problem, list(problem.grid.alive_cores)), "row-major", t0
    )


def snake_order(rows: int, cols: int) -> list[int]:
    """Boustrophedon: even rows left to right, odd rows right to left."""
    out = []
    for r in range(rows):
        xs = range(cols) if r % 2 == 0 else range(cols - 1, -1, -1)
        out.extend(r * cols + x for x in xs)
    return out


def snake(problem: AssignProblem) -> Assignment:
    t0 = time.perf_counter()
    g = problem.grid
    order = [c for c in snake_order(g.rows, g.cols) if g.coord(c) not in g.dead]
    return _assignment_result(problem, _fill_in_order(problem, order), "snake", t0)


def greedy_cores(problem: AssignProblem) -> tuple[int, ...]:
    """Place the busiest actor near the centre of its region, then repeatedly the actor
    with most traffic to those placed, on the free core nearest (in bytes x hops) to its
    placed partners."""
    grid = problem.grid
    n = problem.n_actors
    rr, cc = np.divmod(np.arange(grid.num_cores), grid.cols)
    cap = np.zeros(grid.num_cores, dtype=np.int64)
    cap[list(grid.alive_cores)] = problem.max_actors_per_core
    mem = np.full(grid.num_cores, problem.core_sram, dtype=np.int64)
    allowed = [np.array(problem.cores_for(a), dtype=np.int64) for a in range(n)]
    nbrs: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for (a, b), byt in problem.pair_bytes.items():
        nbrs[a].append((b, byt))
        nbrs[b].append((a, byt))
    volume = np.array([sum(w for _, w in nbrs[a]) for a in range(n)])
    attach = np.zeros(n)  # traffic to placed actors
    placed = np.full(n, -1, dtype=np.int64)
    centre_r, centre_c = (grid.rows - 1) / 2, (grid.cols - 1) / 2
    for _ in range(n):
        free = placed < 0
        # most traffic to placed actors first; if none has any, most traffic overall
        att = np.where(free, attach, -1.0)
        a = int(np.argmax(att)) if att.max() > 0 else int(np.argmax(np.where(free, volume, -1.0)))
        cand = allowed[a]
        cand = cand[(cap[cand] > 0) & (mem[cand] >= problem.actor_mem[a])]
        if cand.size == 0:
            raise PlanError(f"greedy: no core left for actor {problem.actor_names[a]!r}")
        cost = np.zeros(cand.size)
        pl = [(placed[b], w) for b, w in nbrs[a] if placed[b] >= 0]
        for core_b, w in pl:
            cost += w * (np.abs(rr[cand] - rr[core_b]) + np.abs(cc[cand] - cc[core_b]))
        if pl:
            anchor_r, anchor_c = centre_r, centre_c
        elif (placed >= 0).any():
            anchor_r, anchor_c = rr[placed[placed >= 0]].mean(), cc[placed[placed >= 0]].mean()
        else:
            anchor_r, anchor_c = rr[allowed[a]].mean(), cc[allowed[a]].mean()
        tie = np.abs(rr[cand] - anchor_r) + np.abs(cc[cand] - anchor_c)
        # among equals, prefer a core with free neighbours: room for the partners to come
        free = (cap > 0).reshape(grid.rows, grid.cols)
        pad = np.pad(free, 1)
        room = pad[:-2, 1:-1].astype(np.int64) + pad[2:, 1:-1] + pad[1:-1, :-2] + pad[1:-1, 2:]
        best = cand[np.lexsort((cand, tie, -room.reshape(-1)[cand], cost))[0]]
        placed[a] = best
        cap[best] -= 1
        mem[best] -= problem.actor_mem[a]
        for b, w in nbrs[a]:
            attach[b] += w
    return tuple(int(c) for c in placed)


def greedy(problem: AssignProblem) -> Assignment:
    t0 = time.perf_counter()
    return _assignment_result(problem, greedy_cores(problem), "greedy", t0)


ASSIGN_BASELINES = {"row-major": row_major, "snake": snake, "greedy": greedy}
