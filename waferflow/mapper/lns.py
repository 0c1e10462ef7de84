"""Large-neighbourhood search: keep most of a placement fixed, free a small
neighbourhood, re-solve it exactly with CP-SAT (hinted with the current placement, so it
never gets worse), keep improvements, repeat.

Everything is deterministic: neighbourhoods come from ``random.Random(seed)``, the
sub-solves run under deterministic time limits, and a search stops when its
deterministic time or its rounds run out, never on wall-clock time (the same command
gives the same placement on a quiet and on a loaded machine). The neighbourhood grows
while sub-problems are solved to optimality without improvement and shrinks when they
time out.

Budgets that pay (the rank refinement of placement, ``bridge.refine_ranks``, and the
placement of one-actor-per-op plans, ``assign.solve_assignment``): the
assignment LNS stops once ``STALL_ROUNDS`` rounds in a row improved nothing (each round
re-solves a neighbourhood that is, by then, as large as it gets, so more of them rarely
pay: on the placements of ``make demo`` and ``benchmarks/bench_mapper.py``, 70 rounds
after the first 10 found nothing), and its budget scales with the problem:
``lns_budget``.
"""

from __future__ import annotations

import math
import random

from waferflow.mapper.assign_model import build_assign_model
from waferflow.mapper.cost import assignment_cost, evaluate_floorplan
from waferflow.mapper.cpsat import SolveOptions, run_cpsat
from waferflow.mapper.fp_models import Scale
from waferflow.mapper.fp_rects import build_rect_model
from waferflow.mapper.local import swap_descent
from waferflow.mapper.problem import AssignProblem, FloorplanProblem, Rect, centre_distance

_MAX_ROUNDS = 10_000
_MAX_SUB_VARS = 6_000  # x[a, c] literals per LNS sub-problem
STALL_ROUNDS = 10  # the assignment LNS stops after this many rounds in a row without gain
SECONDS_PER_ACTOR = 0.02  # deterministic seconds of assignment LNS per actor
MIN_LNS_SECONDS = 1.0


def lns_budget(n_actors: int, limit: float) -> float:
    """Deterministic seconds for an assignment LNS of ``n_actors``: ``SECONDS_PER_ACTOR``
    each (a round frees a few actors; the budget lets every actor be freed a few times
    over), at least ``MIN_LNS_SECONDS``, never more than ``limit``."""
    return min(limit, max(MIN_LNS_SECONDS, SECONDS_PER_ACTOR * n_actors))


def _slowest(problem: FloorplanProblem, rects: tuple[Rect, ...]) -> int:
    def t(g: int) -> float:
        c = problem.region_cores(rects[g])
        return problem.groups[g].work / c if c > 0 else math.inf

    return max(range(len(rects)), key=lambda g: (t(g), -g))


def improve_floorplan(
    problem: FloorplanProblem,
    rects: tuple[Rect, ...],
    budget: float,
    options: SolveOptions,
) -> tuple[tuple[Rect, ...], float, int, int, float]:
    """LNS over the rectangles model. Neighbourhoods, in turn: the slowest group and its
    nearest groups; a random group and its nearest; a run of consecutive groups (pipeline
    neighbours). Returns ``(rects, deterministic time used, rounds, improvements,
    bound)``; the bound (-inf if none) comes from rounds that left every group free."""
    n = len(problem.groups)
    rng = random.Random(options.seed)
    cur = rects
    cur_obj = evaluate_floorplan(problem, cur).objective
    k = min(n, 4)
    k_max = min(n, 10)
    per_round = max(0.05, min(1.0, budget / 10))
    used = 0.0
    rounds = better = 0
    bound = -math.inf
    while used < budget - 1e-3 and rounds < _MAX_ROUNDS:  # deterministic work only
        kind = rounds % 3
        if kind == 2:
            first = rng.randrange(n)
            free = {(first + i) % n for i in range(k)}
        else:
            centre = _slowest(problem, cur) if kind == 0 else rng.randrange(n)
            near = sorted(range(n), key=lambda g: (centre_distance(cur[g], cur[centre]), g))
            free = set(near[:k])
        fixed = frozenset(range(n)) - free
        scale = Scale.from_estimate(cur_obj)
        rm = build_rect_model(problem, scale, cur, fixed=fixed, symmetry=False)
        limit = min(per_round, budget - used)
        run = run_cpsat(rm.model, options, limit, seed_offset=1000 + rounds)
        used += run.deterministic_time
        rounds += 1
        improved = False
        if not fixed and math.isfinite(run.bound):  # everything free: a bound on the problem
            bound = max(bound, run.bound * scale.unit)
        if run.has_solution:
            new = rm.rects(run.solver)
            cost = evaluate_floorplan(problem, new)
            if cost.feasible and cost.objective < cur_obj * (1 - 1e-9):
                cur, cur_obj = new, cost.objective
                better += 1
                improved = True
        if run.status == "OPTIMAL" and not improved:
            k = min(k + 1, k_max)
        elif run.status != "OPTIMAL":
            k = max(2, k - 1)
        if n <= k and run.status == "OPTIMAL":
            break  # the whole problem was just solved exactly
    return cur, used, rounds, better, bound


def improve_assignment(
    problem: AssignProblem,
    cores: tuple[int, ...],
    budget: float,
    options: SolveOptions,
    lower_bound: float,
    stall_rounds: int | None = STALL_ROUNDS,
) -> tuple[tuple[int, ...], float, int, int]:
    """LNS over the assignment model. Neighbourhoods, in turn: a window of cores around a
    random actor (its actors may permute and use the window's free cores), and a
    breadth-first neighbourhood in the flow graph (its actors may use their own cores and
    the free cores of their bounding box). Stops after ``stall_rounds`` rounds in a row
    without improvement (``None``: only when the budget or the rounds run out). Returns ``(cores, det. time, rounds,
    improvements)``."""
    grid = problem.grid
    n = problem.n_actors
    rng = random.Random(options.seed)
    cur = list(cores)
    cur_cost = assignment_cost(problem, tuple(cur))
    nbrs: list[list[int]] = [[] for _ in range(n)]
    for a, b in problem.pair_bytes:
        nbrs[a].append(b)
        nbrs[b].append(a)
    k = min(n, 6)
    k_max = min(n, 30)
    per_round = max(0.05, min(0.2, budget / 50))
    used = 0.0
    rounds = better = stalled = 0
    alive = set(grid.alive_cores)
    while used < budget - 1e-3 and rounds < _MAX_ROUNDS:  # deterministic work only
        if cur_cost <= lower_bound * (1 + options.gap_limit):
            break
        if stall_rounds is not None and stalled >= stall_rounds:
            break
        seed_actor = rng.randrange(n)
        occupants: dict[int, list[int]] = {}
        for a, c in enumerate(cur):
            occupants.setdefault(c, []).append(a)
        if rounds % 2 == 0:
            free_actors, window = _window(grid, cur, occupants, seed_actor, k)
        else:
            free_actors = _bfs(nbrs, seed_actor, k)
            window = _bbox(grid, [cur[a] for a in free_actors])
        window = [c for c in window if c in alive]
        if len(window) * len(free_actors) > _MAX_SUB_VARS:
            # a sprawling neighbourhood: each actor may only move a few hops or swap
            homes = {cur[a] for a in free_actors}
            window = sorted(
                homes | {c for a in free_actors for c in _ball(grid, cur[a], 2)} & alive
            )
        cand = {}
        for a in free_actors:
            allowed = set(problem.cores_for(a))
            cand[a] = [c for c in window if c in allowed]
            if cur[a] not in cand[a]:
                cand[a].append(cur[a])
        sub = build_assign_model(problem, sorted(free_actors), cand, tuple(cur))
        limit = min(per_round, budget - used)
        run = run_cpsat(sub.model, options, limit, seed_offset=1000 + rounds)
        used += run.deterministic_time
        rounds += 1
        improved = False
        if run.has_solution:
            new = list(cur)
            for a, c in sub.solution(run.solver).items():
                new[a] = c
            cost = assignment_cost(problem, tuple(new))
            if cost < cur_cost * (1 - 1e-12):
                # a CP-SAT move often opens cheap follow-up swaps
                polished = list(swap_descent(problem, tuple(new), max_passes=3))
                pc = assignment_cost(problem, tuple(polished))
                cur, cur_cost = (polished, pc) if pc < cost else (new, cost)
                better += 1
                improved = True
        stalled = 0 if improved else stalled + 1
        if run.status == "OPTIMAL" and not improved:
            k = min(k + 2, k_max)
        elif run.status != "OPTIMAL":
            k = max(4, k - 1)
    return tuple(cur), used, rounds, better


def _window(grid, cur, occupants, seed_actor: int, k: int) -> tuple[set[int], list[int]]:
    """The smallest square of cores around the seed actor holding about ``k`` actors."""
    r0, c0 = divmod(cur[seed_actor], grid.cols)
    rad = 0
    while True:
        cells = [
            r * grid.cols + c
            for r in range(max(0, r0 - rad), min(grid.rows, r0 + rad + 1))
            for c in range(max(0, c0 - rad), min(grid.cols, c0 + rad + 1))
        ]
        acts = {a for c in cells for a in occupants.get(c, [])}
        if len(acts) >= k or len(cells) >= grid.num_cores:
            return acts, cells
        rad += 1


def _bfs(nbrs: list[list[int]], start: int, k: int) -> set[int]:
    seen = [start]
    got = {start}
    i = 0
    while i < len(seen) and len(seen) < k:
        for b in sorted(nbrs[seen[i]]):
            if b not in got:
                got.add(b)
                seen.append(b)
                if len(seen) >= k:
                    break
        i += 1
    return got


def _bbox(grid, cores: list[int]) -> list[int]:
    rs = [c // grid.cols for c in cores]
    cs = [c % grid.cols for c in cores]
    r0, r1 = max(0, min(rs) - 1), min(grid.rows - 1, max(rs) + 1)
    c0, c1 = max(0, min(cs) - 1), min(grid.cols - 1, max(cs) + 1)
    return [r * grid.cols + c for r in range(r0, r1 + 1) for c in range(c0, c1 + 1)]


def _ball(grid, core: int, radius: int) -> list[int]:
    r0, c0 = divmod(core, grid.cols)
    return [
        r * grid.cols + c
        for r in range(max(0, r0 - radius), min(grid.rows, r0 + radius + 1))
        for c in range(max(0, c0 - radius), min(grid.cols, c0 + radius + 1))
        if abs(r - r0) + abs(c - c0) <= radius
    ]
