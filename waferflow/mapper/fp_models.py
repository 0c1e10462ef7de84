"""The CP-SAT floorplan models: ordered vertical strips, and free rectangles.

Both work on a scaled integer objective. ``unit`` is the objective value of one integer
step (the hint's objective / 1e8) and the slowest time is counted in ticks of
``unit / balance`` seconds, so the balance term has coefficient 1. Every coefficient
and every compute time is rounded *down*: the integer objective never exceeds the true
one, hence the solver's bound, times ``unit``, is a valid bound on the true optimum.
Results are always re-scored exactly (``cost.evaluate_floorplan``).

This module holds that scaling, the pieces both models share (pair weights, time
ticks, tangent cuts, core bounds, die indices), the transposition, and the strips
model; the rectangles model and its symmetry breaking are ``fp_rects``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from waferflow.mapper._ortools import cp_model
from waferflow.mapper.bounds import slowest_time_bound
from waferflow.mapper.problem import DeadCores, FloorplanProblem, Grid, Rect

RESOLUTION = 1e8  # integer steps per hint objective


@dataclass(frozen=True)
class Scale:
    unit: float  # objective per integer step
    upper: int  # integer objective of a known solution (an upper bound)

    @classmethod
    def from_estimate(cls, estimate: float, upper: float | None = None) -> Scale:
        if not (estimate > 0 and math.isfinite(estimate)):
            return cls(unit=1.0, upper=0)
        unit = estimate / RESOLUTION
        top = estimate if upper is None else max(upper, estimate)
        return cls(unit=unit, upper=math.ceil(top / unit) + 1)


def pair_weights(problem: FloorplanProblem, scale: Scale) -> list[tuple[int, int, int, int]]:
    """``(a, b, per doubled hop, per die crossing)`` integer weights per unordered pair."""
    acc: dict[tuple[int, int], float] = {}
    for f in problem.flows:
        if f.src != f.dst and f.bytes > 0:
            k = (min(f.src, f.dst), max(f.src, f.dst))
            acc[k] = acc.get(k, 0.0) + f.bytes
    w = problem.weights
    out = []
    for (a, b), byt in sorted(acc.items()):
        hop = math.floor(w.traffic * byt / (2 * scale.unit))  # centres are in doubled units
        die = math.floor(w.d2d * byt / scale.unit)
        if hop or die:
            out.append((a, b, hop, die))
    return out


def time_ticks(problem: FloorplanProblem, scale: Scale, g: int, cores: int) -> int:
    """Floor of the group's compute time on ``cores`` cores, in ticks, capped at ``upper``."""
    if problem.weights.balance == 0 or problem.groups[g].work == 0:
        return 0
    if cores <= 0:
        return scale.upper
    k = problem.groups[g].work * problem.weights.balance / (problem.core_flops * scale.unit)
    return min(math.floor(k / cores), scale.upper)


def time_constant(problem: FloorplanProblem, scale: Scale, g: int) -> float:
    """K: the group's compute time on one core, in ticks (on ``c`` cores, ``K / c``)."""
    return problem.groups[g].work * problem.weights.balance / (problem.core_flops * scale.unit)


def add_tangent_cuts(
    model: cp_model.CpModel,
    problem: FloorplanProblem,
    scale: Scale,
    g: int,
    t: cp_model.IntVar,
    cores,
    lo: int,
    hi: int,
) -> None:
    """Linear cuts ``a0^2 T + K cores >= 2 K a0 - a0^2`` under the convex ``K / cores``,
    so that the LP relaxation knows that small regions are slow."""
    k = time_constant(problem, scale, g)
    if k <= 0:
        return
    total = problem.total_work
    share = problem.grid.num_alive * problem.groups[g].work / total if total > 0 else lo
    points = sorted({min(hi, max(lo, round(share * m))) for m in (0.5, 0.75, 1.0, 1.5, 2.0)})
    for a0 in points:
        if a0 < 1:
            continue
        rhs = math.floor(2 * k * a0 - a0 * a0)
        if rhs > 0:
            model.add(a0 * a0 * t + math.ceil(k) * cores >= rhs)


def core_bounds(
    problem: FloorplanProblem, scale: Scale, g: int, t_cap: int | None = None
) -> tuple[int, int]:
    """Fewest and most cores a group may get: memory, the others' memory, and the time
    an improving solution must beat (``floor(K / cores) <= cap`` means
    ``cores > K / (cap + 1)``)."""
    alive = problem.grid.num_alive
    lo = problem.min_areas[g]
    hi = alive - (sum(problem.min_areas) - lo)
    k = time_constant(problem, scale, g)
    cap = scale.upper if t_cap is None else min(t_cap, scale.upper)
    if k > 0 and cap > 0:
        lo = max(lo, math.floor(k / (cap + 1)) + 1)
    return lo, hi


# --- transposition: strips and shelves are written for one orientation ----------------


def transpose_problem(problem: FloorplanProblem) -> FloorplanProblem:
    g = problem.grid
    grid = Grid(g.cols, g.rows, frozenset((c, r) for r, c in g.dead), g.die_cols, g.die_rows)
    return FloorplanProblem(
        grid,
        problem.groups,
        problem.flows,
        problem.core_flops,
        problem.core_sram,
        problem.weights,
        problem.dead_cores,
    )


def transpose_rects(rects: tuple[Rect, ...]) -> tuple[Rect, ...]:
    return tuple(r.transposed() for r in rects)


# --- strips ---------------------------------------------------------------------------


@dataclass
class StripsModel:
    model: cp_model.CpModel
    start: list[cp_model.IntVar]
    width: list[cp_model.IntVar]

    def rects(self, solver: cp_model.CpSolver, rows: int) -> tuple[Rect, ...]:
        return tuple(
            Rect(0, solver.value(s), rows, solver.value(w))
            for s, w in zip(self.start, self.width, strict=True)
        )


def build_strips_model(
    problem: FloorplanProblem, scale: Scale, hint: tuple[Rect, ...] | None
) -> StripsModel | None:
    """Groups in order as full-height vertical strips (gaps allowed). Each strip's start,
    width, cores and time come from a table of every legal ``(start, width)``, which makes
    the alive-core counts exact around dead cores. ``None`` if the table would be huge."""
    grid = problem.grid
    rows, cols = grid.rows, grid.cols
    n = len(problem.groups)
    if n * cols * (cols + 1) // 2 > 3_000_000 or n > cols:
        return None
    m = cp_model.CpModel()
    t_var = m.new_int_var(0, max(scale.upper, 0), "T")
    if problem.weights.balance > 0:
        m.add(
            t_var >= math.floor(slowest_time_bound(problem) * problem.weights.balance / scale.unit)
        )
    start, width, cores_v = [], [], []
    for g in range(n):
        lo, hi = core_bounds(problem, scale, g)
        tuples = []
        for s in range(cols):
            for w in range(1, cols - s + 1):
                c = grid.alive_in(0, s, rows, w)
                if problem.dead_cores is DeadCores.OBSTACLE and c < rows * w:
                    continue
                if lo <= c <= hi:
                    tuples.append((s, w, c, time_ticks(problem, scale, g, c)))
        if not tuples:
            return None
        s_v = m.new_int_var(0, cols - 1, f"s{g}")
        w_v = m.new_int_var(1, cols, f"w{g}")
        c_v = m.new_int_var(lo, hi, f"cores{g}")
        t_g = m.new_int_var(0, max(scale.upper, 0), f"t{g}")
        m.add_allowed_assignments([s_v, w_v, c_v, t_g], tuples)
        m.add(t_var >= t_g)
        add_tangent_cuts(m, problem, scale, g, t_var, c_v, lo, hi)
        start.append(s_v)
        width.append(w_v)
        cores_v.append(c_v)
    for g in range(n - 1):
        m.add(start[g + 1] >= start[g] + width[g])
    m.add(start[-1] + width[-1] <= cols)
    m.add(sum(width) <= cols)
    m.add(sum(cores_v) <= grid.num_alive)
    centre = [2 * start[g] + width[g] for g in range(n)]
    terms = [t_var] if problem.weights.balance > 0 else []
    die_col = die_indices(m, grid, centre, grid.die_cols, grid.die_of_col, cols)
    for a, b, hop, die in pair_weights(problem, scale):
        if hop:
            terms.append(hop * (centre[b] - centre[a]))  # strips are in group order
        if die and die_col is not None:
            terms.append(die * (die_col[b] - die_col[a]))
    obj = sum(terms) if terms else 0
    m.minimize(obj)
    if scale.upper > 0:
        m.add(obj <= scale.upper)
    if hint is not None:
        for g, r in enumerate(hint):
            m.add_hint(start[g], r.col)
            m.add_hint(width[g], r.width)
    return StripsModel(m, start, width)


def die_indices(m: cp_model.CpModel, grid: Grid, centre2, n_dies: int, die_of, length: int):
    """Die index (along one axis) of each group's centre core, by element on the doubled centre."""
    if n_dies <= 1:
        return None
    table = [die_of(max(v - 1, 0) // 2) for v in range(2 * length + 1)]
    out = []
    for i, c in enumerate(centre2):
        cv = m.new_int_var(0, 2 * length, f"c2_{i}_{id(table)}")
        m.add(cv == c)
        d = m.new_int_var(0, n_dies - 1, f"die_{i}_{id(table)}")
        m.add_element(cv, table, d)
        out.append(d)
    return out
