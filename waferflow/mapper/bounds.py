"""Lower bounds: what no placement can beat. Each result's gap is measured against the
best of these and the solver's own bound.

Floorplans. The slowest group needs at least ``total_work / (alive x core_flops)`` (all
cores busy) and at least ``work_g / (largest feasible region x core_flops)``. The joint
bound adds traffic: at slowest time ``T`` group ``g`` needs ``a_g(T) = max(mem cores,
ceil(work_g / (T x core_flops)))`` cores, so its rectangle is at least
``ceil(a_g / rows)`` wide and ``ceil(a_g / cols)`` tall, and two disjoint rectangles have
centres at least half their summed widths (or heights) apart. Minimising
``balance x T + traffic x sum(bytes x that distance)`` over ``T`` (on a fine geometric
grid, rounding each interval the safe way) gives a valid bound on the whole objective.

Assignments. Two actors that cannot share a core are at least one hop apart (and at
least the distance between their regions). The star bound looks at one actor at a time:
around a core there are at most ``4d x max_actors_per_core`` places at distance ``d``, so
its heaviest flows can at best take the nearest places; summing over actors counts each
flow twice, hence the half.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np

from waferflow.mapper.problem import AssignProblem, DeadCores, FloorplanProblem, Grid

_T_STEPS = 400
_PAIR_DIST_LIMIT = 4_000_000  # region pairs compared exactly below this many core pairs


def largest_alive_rectangle(grid: Grid) -> int:
    """Area of the largest rectangle without dead cores (histogram sweep, O(rows x cols))."""
    heights = np.zeros(grid.cols, dtype=np.int64)
    best = 0
    for r in range(grid.rows):
        heights = np.where(grid.alive_mask[r], heights + 1, 0)
        hs = [int(h) for h in heights] + [0]
        stack: list[int] = []
        for i, h in enumerate(hs):
            while stack and hs[stack[-1]] >= h:
                top = stack.pop()
                left = stack[-1] + 1 if stack else 0
                best = max(best, hs[top] * (i - left))
            stack.append(i)
    return best


def max_region_cores(problem: FloorplanProblem) -> tuple[int, ...]:
    """The most cores each group's rectangle could count, given the others' memory."""
    alive = problem.grid.num_alive
    total_min = sum(problem.min_areas)
    cap = alive
    if problem.dead_cores is DeadCores.OBSTACLE and problem.grid.dead:
        cap = largest_alive_rectangle(problem.grid)
    return tuple(min(cap, alive - (total_min - m)) for m in problem.min_areas)


def rectangle_areas(rows: int, cols: int) -> np.ndarray:
    """``up[a]``: the least area >= ``a`` that a ``w x h`` rectangle on the grid can have."""
    ok = np.zeros(rows * cols + 1, dtype=bool)
    for h in range(1, rows + 1):
        ok[h * np.arange(1, cols + 1)] = True
    up = np.full(rows * cols + 2, rows * cols + 1, dtype=np.int64)
    for a in range(rows * cols, -1, -1):
        up[a] = a if ok[a] else up[a + 1]
    return up


def _needed_cores(problem: FloorplanProblem, t: float) -> np.ndarray:
    """Cores each group needs to finish within ``t`` (rounded down a hair: stays safe)."""
    work = np.array([g.work for g in problem.groups], dtype=np.float64)
    need = np.ceil(work / (t * problem.core_flops) * (1 - 1e-12) - 1e-9)
    return np.maximum(need, np.array(problem.min_areas, dtype=np.float64)).astype(np.int64)


def _fits(
    problem: FloorplanProblem, t: float, up: np.ndarray | None, amax: tuple[int, ...]
) -> bool:
    need = _needed_cores(problem, t)
    if (need > np.array(amax)).any():
        return False
    if up is not None:  # without dead cores inside, a region is a whole rectangle
        need = up[np.minimum(need, len(up) - 1)]
    return int(need.sum()) <= problem.grid.num_alive


def slowest_time_bound(problem: FloorplanProblem) -> float:
    """Lower bound on the slowest group's compute time, in seconds: the least ``T`` at
    which every group's needed cores (whole cores; a realisable rectangle area when
    regions hold no dead cores) fit on the alive cores together."""
    f = problem.core_flops
    amax = max_region_cores(problem)
    lb = problem.total_work / (problem.grid.num_alive * f)
    for g, a in zip(problem.groups, amax, strict=True):
        lb = max(lb, g.work / (a * f))
    if lb <= 0:
        return 0.0
    exact_areas = problem.dead_cores is DeadCores.OBSTACLE or not problem.grid.dead
    up = rectangle_areas(problem.grid.rows, problem.grid.cols) if exact_areas else None
    lo, hi = lb * (1 - 1e-9), lb
    while not _fits(problem, hi, up, amax):
        lo, hi = hi, hi * 2
        if hi > lb * 2**40:
            return lb
    for _ in range(50):  # lo never fits, hi always does
        mid = (lo + hi) / 2
        if _fits(problem, mid, up, amax):
            hi = mid
        else:
            lo = mid
    return max(lb, lo)


def _pair_bytes(n: int, flows) -> dict[tuple[int, int], float]:
    out: dict[tuple[int, int], float] = defaultdict(float)
    for fl in flows:
        if fl.src != fl.dst and fl.bytes > 0:
            out[(min(fl.src, fl.dst), max(fl.src, fl.dst))] += fl.bytes
    return dict(sorted(out.items()))


def floorplan_lower_bound(
    problem: FloorplanProblem,
    upper: float | None = None,
    *,
    t_min: float | None = None,
    t_max: float | None = None,
) -> float:
    """Joint lower bound on the floorplan objective (see the module docstring), over the
    layouts whose slowest time lies in ``[t_min, t_max]`` (default: all).

    ``t_min`` may be any proven lower bound on the slowest time; ``upper`` (any feasible
    objective) only narrows the range of times examined."""
    w = problem.weights
    grid = problem.grid
    t_lb = slowest_time_bound(problem)
    if t_min is not None:
        t_lb = max(t_lb, t_min)
    pairs = _pair_bytes(len(problem.groups), problem.flows)
    if t_max is not None and t_max < t_lb:
        return math.inf  # no layout in the range
    if not pairs or w.traffic == 0:
        return w.balance * t_lb
    work = np.array([g.work for g in problem.groups], dtype=np.float64)
    mins = np.array(problem.min_areas, dtype=np.float64)
    src = np.array([p[0] for p in pairs], dtype=np.int64)
    dst = np.array([p[1] for p in pairs], dtype=np.int64)
    byt = np.array(list(pairs.values()), dtype=np.float64)
    exact_areas = problem.dead_cores is DeadCores.OBSTACLE or not grid.dead
    up = rectangle_areas(grid.rows, grid.cols) if exact_areas else None

    def traffic_at(t: np.ndarray) -> np.ndarray:
        # cores needed at slowest time t (rounded down a hair so the bound stays safe)
        with np.errstate(divide="ignore"):
            need = work[:, None] / (t[None, :] * problem.core_flops)
        need = np.ceil(need * (1 - 1e-12) - 1e-9)
        cores = np.maximum(need, mins[:, None])
        if up is not None:
            cores = up[np.minimum(cores, len(up) - 1).astype(np.int64)].astype(np.float64)
        wmin = np.ceil(cores / grid.rows)
        hmin = np.ceil(cores / grid.cols)
        sep = np.minimum(wmin[src] + wmin[dst], hmin[src] + hmin[dst]) / 2
        return byt @ np.maximum(sep, 1.0)

    if w.balance == 0:
        t_end = np.array([np.inf if t_max is None else t_max])
        return float(w.traffic * traffic_at(t_end)[0])
    t_hi = t_max
    if t_hi is None:
        t_hi = max(upper / w.balance, t_lb) if upper is not None else 64 * t_lb
    t_hi = max(t_hi, t_lb * (1 + 1e-9))
    if t_lb > 0:
        ts = t_lb * (t_hi / t_lb) ** (np.arange(_T_STEPS + 1) / _T_STEPS)
    else:
        ts = np.linspace(0, t_hi, _T_STEPS + 1)
    ts[0] = t_lb
    # on [t_i, t_{i+1}]: balance term >= balance t_i, distances >= those at t_{i+1}
    inner = w.balance * ts[:-1] + w.traffic * traffic_at(ts[1:])
    best = float(inner.min())
    if t_max is None:  # beyond t_hi: the balance term alone
        tail = w.balance * t_hi + w.traffic * traffic_at(np.array([np.inf]))[0]
        best = min(best, float(tail))
    return best


# --- assignment ----------------------------------------------------------------------


def _can_share(problem: AssignProblem, a: int, b: int) -> bool:
    if problem.max_actors_per_core < 2:
        return False
    if problem.actor_mem[a] + problem.actor_mem[b] > problem.core_sram:
        return False
    return not (
        problem.allowed is not None and not set(problem.allowed[a]) & set(problem.allowed[b])
    )


def _region_distance(problem: AssignProblem, a: int, b: int) -> int:
    """Least hops between any allowed core of ``a`` and any of ``b`` (>= 1 if disjoint)."""
    if problem.allowed is None:
        return 1
    ca, cb = problem.allowed[a], problem.allowed[b]
    if set(ca) & set(cb):
        return 1
    if len(ca) * len(cb) > _PAIR_DIST_LIMIT:
        return 1
    cols = problem.grid.cols
    ra, xa = np.divmod(np.array(ca), cols)
    rb, xb = np.divmod(np.array(cb), cols)
    d = np.abs(ra[:, None] - rb[None, :]) + np.abs(xa[:, None] - xb[None, :])
    return max(1, int(d.min()))


def pair_lower_bound(problem: AssignProblem) -> float:
    """Every flow whose ends cannot share a core travels at least the regions' distance."""
    total = 0.0
    for (a, b), byt in problem.pair_bytes.items():
        if not _can_share(problem, a, b):
            total += byt * _region_distance(problem, a, b)
    return total


def star_lower_bound(problem: AssignProblem) -> float:
    """Half the sum over actors of their heaviest flows packed onto the nearest places."""
    m = problem.max_actors_per_core
    nbrs: dict[int, list[tuple[float, int]]] = defaultdict(list)
    for (a, b), byt in problem.pair_bytes.items():
        nbrs[a].append((byt, b))
        nbrs[b].append((byt, a))
    total = 0.0
    for a, lst in nbrs.items():
        lst.sort(key=lambda t: (-t[0], t[1]))
        zero = 0
        rest: list[float] = []
        for byt, b in lst:
            if zero < m - 1 and _can_share(problem, a, b):
                zero += 1
            else:
                rest.append(byt)
        d, left = 1, 4 * m
        for byt in rest:
            if left == 0:
                d += 1
                left = 4 * d * m
            total += byt * d
            left -= 1
    return total / 2


def assignment_lower_bound(problem: AssignProblem) -> float:
    return max(pair_lower_bound(problem), star_lower_bound(problem))
