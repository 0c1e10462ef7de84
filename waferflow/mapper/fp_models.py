"""The CP-SAT floorplan models: ordered vertical strips, and free rectangles.

Both work on a scaled integer objective. ``unit`` is the objective value of one integer
step (the hint's objective / 1e8) and the slowest time is counted in ticks of
``unit / balance`` seconds, so the balance term has coefficient 1. Every coefficient
and every compute time is rounded *down*: the integer objective never exceeds the true
one, hence the solver's bound, times ``unit``, is a valid bound on the true optimum.
Results are always re-scored exactly (``cost.evaluate_floorplan``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from waferflow.mapper._ortools import cp_model
from waferflow.mapper.bounds import largest_alive_rectangle, slowest_time_bound
from waferflow.mapper.problem import DeadCores, FloorplanProblem, Grid, Group, Rect

RESOLUTION = 1e8  # integer steps per hint objective
_MAX_SHAPES = 3000  # (width, height) pairs per group for a shape table


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


def _k(problem: FloorplanProblem, scale: Scale, g: int) -> float:
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
    k = _k(problem, scale, g)
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


def _core_bounds(
    problem: FloorplanProblem, scale: Scale, g: int, t_cap: int | None = None
) -> tuple[int, int]:
    """Fewest and most cores a group may get: memory, the others' memory, and the time
    an improving solution must beat (``floor(K / cores) <= cap`` means
    ``cores > K / (cap + 1)``)."""
    alive = problem.grid.num_alive
    lo = problem.min_areas[g]
    hi = alive - (sum(problem.min_areas) - lo)
    k = _k(problem, scale, g)
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
        lo, hi = _core_bounds(problem, scale, g)
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
    die_col = _die_indices(m, grid, centre, grid.die_cols, grid.die_of_col, cols)
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


def _die_indices(m: cp_model.CpModel, grid: Grid, centre2, n_dies: int, die_of, length: int):
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


# --- rectangles -----------------------------------------------------------------------


@dataclass
class RectModel:
    model: cp_model.CpModel
    x: list  # column: IntVar, or int for a pinned group
    y: list  # row
    w: list
    h: list
    techniques: tuple[str, ...]

    def rects(self, solver: cp_model.CpSolver) -> tuple[Rect, ...]:
        def val(v) -> int:
            return v if isinstance(v, int) else int(solver.value(v))

        return tuple(
            Rect(val(y), val(x), val(h), val(w))
            for x, y, w, h in zip(self.x, self.y, self.w, self.h, strict=True)
        )


@dataclass(frozen=True)
class Symmetries:
    """Which reflections of the grid map dead cores and dies onto themselves."""

    mirror_cols: bool
    mirror_rows: bool
    transpose: bool

    @classmethod
    def of(cls, grid: Grid) -> Symmetries:
        R, C = grid.rows, grid.cols
        dead = grid.dead
        mc = {(r, C - 1 - c) for r, c in dead} == dead and all(
            grid.die_of_col(c) == grid.die_cols - 1 - grid.die_of_col(C - 1 - c) for c in range(C)
        )
        mr = {(R - 1 - r, c) for r, c in dead} == dead and all(
            grid.die_of_row(r) == grid.die_rows - 1 - grid.die_of_row(R - 1 - r) for r in range(R)
        )
        tr = R == C and {(c, r) for r, c in dead} == dead and grid.die_rows == grid.die_cols
        return cls(mc, mr, tr)


def canonical(problem: FloorplanProblem, rects: tuple[Rect, ...]) -> tuple[Rect, ...]:
    """Map a layout into the part of the solution space the symmetry breaking keeps."""
    grid = problem.grid
    sym = Symmetries.of(grid)
    anchor = symmetry_anchor(problem)
    R, C = grid.rows, grid.cols
    out = rects
    if sym.mirror_cols and out[anchor].centre2[1] > C:
        out = tuple(Rect(r.row, C - r.col - r.width, r.height, r.width) for r in out)
    if sym.mirror_rows and out[anchor].centre2[0] > R:
        out = tuple(Rect(R - r.row - r.height, r.col, r.height, r.width) for r in out)
    if sym.transpose and out[anchor].centre2[1] > out[anchor].centre2[0]:
        out = transpose_rects(out)
    lst = list(out)
    for cls in identical_classes(problem):
        placed = sorted((lst[g] for g in cls), key=lambda r: (r.centre2[1], r.centre2[0]))
        for g, r in zip(cls, placed, strict=True):
            lst[g] = r
    return tuple(lst)


def identical_classes(problem: FloorplanProblem) -> list[list[int]]:
    """Classes (of 2 or more) of interchangeable groups, the symmetry anchor left out."""
    anchor = symmetry_anchor(problem)
    classes: list[list[int]] = []
    for g in range(len(problem.groups)):
        if g == anchor:
            continue
        for cls in classes:
            if _signature(problem, cls[0]) == _signature(problem, g) and _swappable(
                problem, cls[0], g
            ):
                cls.append(g)
                break
        else:
            classes.append([g])
    return [c for c in classes if len(c) > 1]


def symmetry_anchor(problem: FloorplanProblem) -> int:
    """The group whose centre the symmetry breaking pins: the one with most traffic."""
    vol = [0.0] * len(problem.groups)
    for f in problem.flows:
        vol[f.src] += f.bytes
        vol[f.dst] += f.bytes
    return max(range(len(vol)), key=lambda g: (vol[g], -g))


def _dead_runs(grid: Grid) -> list[tuple[int, int, int]]:
    """Dead cores merged into horizontal runs ``(row, col, length)``: fewer obstacles."""
    runs = []
    for r in range(grid.rows):
        c = 0
        while c < grid.cols:
            if (r, c) in grid.dead:
                s = c
                while c < grid.cols and (r, c) in grid.dead:
                    c += 1
                runs.append((r, s, c - s))
            else:
                c += 1
    return runs


def build_rect_model(
    problem: FloorplanProblem,
    scale: Scale,
    hint: tuple[Rect, ...] | None,
    *,
    fixed: frozenset[int] = frozenset(),
    symmetry: bool = True,
    t_range: tuple[int, int] | None = None,
) -> RectModel:
    """Free rectangles in a no-overlap-2D, with the redundant structure that makes CP-SAT
    effective: area and work bounds, tangent cuts, cumulative projections, pairwise
    separation, and symmetry breaking. Groups in ``fixed`` are pinned to ``hint`` (LNS)."""
    grid = problem.grid
    R, C = grid.rows, grid.cols
    n = len(problem.groups)
    idle = problem.dead_cores is DeadCores.IDLE
    if fixed and hint is None:
        raise ValueError("fixed groups need a hint to pin them to")
    techniques = [
        "redundant:area",
        "redundant:work-bounds",
        "redundant:tangent-cuts",
        "redundant:cumulative",
    ]
    m = cp_model.CpModel()
    upper_t = max(scale.upper, 0)
    balance = problem.weights.balance > 0
    t_var = m.new_int_var(0, upper_t, "T")
    if balance:
        m.add(
            t_var >= math.floor(slowest_time_bound(problem) * problem.weights.balance / scale.unit)
        )
    t_cap = None
    if t_range is not None and balance:  # one slice of the slowest-time range
        m.add(t_var >= t_range[0])
        m.add(t_var <= t_range[1])
        t_cap = t_range[1]
        techniques.append("slice:slowest-time")
    max_rect = largest_alive_rectangle(grid) if (grid.dead and not idle) else R * C
    xs: list = []
    ys: list = []
    ws: list = []
    hs: list = []
    areas: list = []
    xiv, yiv = [], []
    free = [g for g in range(n) if g not in fixed]
    bounds: dict[int, tuple[int, int]] = {}
    sum_lo = sum(problem.region_cores(hint[g]) for g in fixed) + sum(
        _core_bounds(problem, scale, g, t_cap)[0] for g in free
    )
    shape_tables = 0
    for g in range(n):
        if g in fixed:
            r = hint[g]
            xs.append(r.col)
            ys.append(r.row)
            ws.append(r.width)
            hs.append(r.height)
            areas.append(r.area)
            xiv.append(m.new_fixed_size_interval_var(r.col, r.width, f"X{g}"))
            yiv.append(m.new_fixed_size_interval_var(r.row, r.height, f"Y{g}"))
            if balance:
                m.add(t_var >= time_ticks(problem, scale, g, problem.region_cores(r)))
            continue
        lo, hi = _core_bounds(problem, scale, g, t_cap)
        hi = min(hi, max_rect)
        if lo > hi:  # this slice (or bound) leaves the group no legal size
            m.add_bool_or([])
            lo = hi = max(1, min(lo, hi))
        bounds[g] = (lo, hi)
        x = m.new_int_var(0, C - 1, f"x{g}")
        y = m.new_int_var(0, R - 1, f"y{g}")
        w = m.new_int_var(max(1, -(-lo // R)), C, f"w{g}")
        h = m.new_int_var(max(1, -(-lo // C)), R, f"h{g}")
        area = m.new_int_var(lo, R * C if idle else hi, f"area{g}")
        m.add_multiplication_equality(area, [w, h])
        if not (idle and grid.dead):
            spare = grid.num_alive - sum_lo  # what the other groups' minimum sizes leave
            shapes = [
                (ww, hh)
                for ww in range(1, C + 1)
                for hh in range(max(1, -(-lo // ww)), min(R, (min(hi, lo + spare)) // ww) + 1)
            ]
            if len(shapes) <= _MAX_SHAPES:  # few legal shapes: a table propagates far better
                m.add_allowed_assignments([w, h], shapes)
                shape_tables += 1
        xe = m.new_int_var(1, C, f"xe{g}")  # the interval keeps x + w == xe <= C
        ye = m.new_int_var(1, R, f"ye{g}")
        xiv.append(m.new_interval_var(x, w, xe, f"X{g}"))
        yiv.append(m.new_interval_var(y, h, ye, f"Y{g}"))
        xs.append(x)
        ys.append(y)
        ws.append(w)
        hs.append(h)
        areas.append(area)
    if shape_tables:
        techniques.append(f"shapes:table({shape_tables})")
    if grid.dead and not idle:
        for r, c, length in _dead_runs(grid):
            xiv.append(m.new_fixed_size_interval_var(c, length, f"deadx{r}_{c}"))
            yiv.append(m.new_fixed_size_interval_var(r, 1, f"deady{r}_{c}"))
        techniques.append("dead:obstacles")
    m.add_no_overlap_2d(xiv, yiv)
    # the packing projected on each axis: a cumulative of heights (widths) <= rows (cols)
    m.add_cumulative(xiv, hs + [1] * (len(xiv) - n), R)
    m.add_cumulative(yiv, ws + [1] * (len(yiv) - n), C)
    if idle and grid.dead:
        cores = _idle_cores(m, grid, free, xs, ys, ws, hs, areas, bounds)
        techniques.append("dead:idle-count")
    else:
        cores = {g: areas[g] for g in free}
    fixed_cores = sum(problem.region_cores(hint[g]) for g in fixed) if fixed else 0
    fixed_area = sum(hint[g].area for g in fixed) if fixed else 0
    if free:
        m.add(sum(cores[g] for g in free) <= grid.num_alive - fixed_cores)
        m.add(sum(areas[g] for g in free) <= (R * C if idle else grid.num_alive) - fixed_area)
    if balance and free:
        amax = max(hi for _, hi in bounds.values())
        a = np.arange(amax + 1, dtype=np.float64)
        for g in free:
            if problem.groups[g].work == 0:
                continue
            lo, hi = bounds[g]
            with np.errstate(divide="ignore"):
                raw = np.floor(_k(problem, scale, g) / a)
            table = (
                np.minimum(np.nan_to_num(raw, posinf=upper_t), upper_t).astype(np.int64).tolist()
            )
            t_g = m.new_int_var(0, upper_t, f"t{g}")
            m.add_element(cores[g], table, t_g)
            m.add(t_var >= t_g)
            add_tangent_cuts(m, problem, scale, g, t_var, cores[g], lo, hi)
    cx = [2 * xs[g] + ws[g] for g in range(n)]
    cy = [2 * ys[g] + hs[g] for g in range(n)]
    terms: list = [t_var] if balance else []
    die_c = _die_indices(m, grid, cx, grid.die_cols, grid.die_of_col, C)
    die_r = _die_indices(m, grid, cy, grid.die_rows, grid.die_of_row, R)
    hint_vals: list[tuple[cp_model.IntVar, int]] = []
    pairs = pair_weights(problem, scale)
    for a, b, hop, die in pairs:
        if a in fixed and b in fixed:
            ra, rb = hint[a], hint[b]
            terms.append(
                hop * (abs(ra.centre2[0] - rb.centre2[0]) + abs(ra.centre2[1] - rb.centre2[1]))
            )
            terms.append(die * grid.die_crossings(ra.centre_core, rb.centre_core))
            continue
        if hop:
            dx = m.new_int_var(0, 2 * C, f"dx{a}_{b}")
            dy = m.new_int_var(0, 2 * R, f"dy{a}_{b}")
            m.add_abs_equality(dx, cx[a] - cx[b])
            m.add_abs_equality(dy, cy[a] - cy[b])
            # disjoint rectangles are apart by their half-widths in x or half-heights in y
            rel = [m.new_bool_var(f"rel{a}_{b}_{k}") for k in range(4)]
            m.add_bool_or(rel)
            m.add(xs[a] + ws[a] <= xs[b]).only_enforce_if(rel[0])  # a left of b
            m.add(xs[b] + ws[b] <= xs[a]).only_enforce_if(rel[1])
            m.add(ys[a] + hs[a] <= ys[b]).only_enforce_if(rel[2])  # a above b
            m.add(ys[b] + hs[b] <= ys[a]).only_enforce_if(rel[3])
            m.add(dx >= ws[a] + ws[b]).only_enforce_if(rel[0])
            m.add(dx >= ws[a] + ws[b]).only_enforce_if(rel[1])
            m.add(dy >= hs[a] + hs[b]).only_enforce_if(rel[2])
            m.add(dy >= hs[a] + hs[b]).only_enforce_if(rel[3])
            # ... so at least the least such separation their minimum sizes allow
            sep = 2
            if a in bounds and b in bounds:
                la, lb_ = bounds[a][0], bounds[b][0]
                sep = max(2, min(-(-la // R) + -(-lb_ // R), -(-la // C) + -(-lb_ // C)))
            m.add(dx + dy >= sep)
            terms.append(hop * (dx + dy))
            if hint is not None:
                ra, rb = hint[a], hint[b]
                hint_vals += [
                    (dx, abs(ra.centre2[1] - rb.centre2[1])),
                    (dy, abs(ra.centre2[0] - rb.centre2[0])),
                ]
        if die:
            for k, dies in enumerate((die_c, die_r)):
                if dies is not None:
                    dd = m.new_int_var(0, grid.die_rows + grid.die_cols, f"dd{a}_{b}_{k}")
                    m.add_abs_equality(dd, dies[a] - dies[b])
                    terms.append(die * dd)
    if pairs:
        techniques.append("redundant:separation")
    obj = sum(terms) if terms else 0
    m.minimize(obj)
    if scale.upper > 0:
        m.add(obj <= scale.upper)
    if symmetry and not fixed:
        techniques += _break_symmetry(m, problem, cx, cy)
    if hint is not None:
        for g in free:
            r = hint[g]
            m.add_hint(xs[g], r.col)
            m.add_hint(ys[g], r.row)
            m.add_hint(ws[g], r.width)
            m.add_hint(hs[g], r.height)
            m.add_hint(areas[g], r.area)
        for v, val in hint_vals:
            m.add_hint(v, val)
        techniques.append("hint")
    return RectModel(m, xs, ys, ws, hs, tuple(techniques))


def _idle_cores(m, grid: Grid, free: list[int], xs, ys, ws, hs, areas, bounds) -> dict:
    """Alive cores of each rectangle = area minus the dead cores inside it, with one
    indicator per (group, dead row) and (group, dead column) shared by the dead cores."""
    dead = sorted(grid.dead)
    dead_rows = sorted({r for r, _ in dead})
    dead_cols = sorted({c for _, c in dead})
    out = {}
    for g in free:
        rin = {r: _covers(m, ys[g], hs[g], r, f"g{g}r{r}") for r in dead_rows}
        cin = {c: _covers(m, xs[g], ws[g], c, f"g{g}c{c}") for c in dead_cols}
        inside = []
        for r, c in dead:
            b = m.new_bool_var(f"in{g}_{r}_{c}")
            m.add_bool_and([rin[r], cin[c]]).only_enforce_if(b)
            m.add_bool_or([~rin[r], ~cin[c], b])
            inside.append(b)
        lo, hi = bounds[g]
        cv = m.new_int_var(lo, hi, f"cores{g}")
        m.add(cv == areas[g] - sum(inside))
        out[g] = cv
    return out


def _covers(m, start, size, pos: int, name: str):
    """A literal true iff ``start <= pos < start + size``."""
    a = m.new_bool_var(f"{name}a")
    b = m.new_bool_var(f"{name}b")
    m.add(start <= pos).only_enforce_if(a)
    m.add(start >= pos + 1).only_enforce_if(~a)
    m.add(start + size >= pos + 1).only_enforce_if(b)
    m.add(start + size <= pos).only_enforce_if(~b)
    both = m.new_bool_var(name)
    m.add_bool_and([a, b]).only_enforce_if(both)
    m.add_bool_or([~a, ~b, both])
    return both


def _break_symmetry(m, problem: FloorplanProblem, cx, cy) -> list[str]:
    grid = problem.grid
    sym = Symmetries.of(grid)
    g = symmetry_anchor(problem)
    used = []
    if sym.mirror_cols:
        m.add(cx[g] <= grid.cols)
        used.append("symmetry:mirror-cols")
    if sym.mirror_rows:
        m.add(cy[g] <= grid.rows)
        used.append("symmetry:mirror-rows")
    if sym.transpose:
        m.add(cx[g] <= cy[g])
        used.append("symmetry:transpose")
    # interchangeable groups (same work, memory and flows) are kept in centre order
    key = [cx[i] * (2 * grid.rows + 1) + cy[i] for i in range(len(cx))]
    for cls in identical_classes(problem):
        for i, j in itertools.pairwise(cls):
            m.add(key[i] <= key[j])
        if "symmetry:identical-groups" not in used:
            used.append("symmetry:identical-groups")
    return used


def _signature(problem: FloorplanProblem, g: int) -> tuple:
    grp: Group = problem.groups[g]
    return (grp.work, grp.mem_bytes)


def _swappable(problem: FloorplanProblem, i: int, j: int) -> bool:
    """Swapping groups ``i`` and ``j`` maps the flow multiset onto itself."""

    def swap(v: int) -> int:
        return j if v == i else i if v == j else v

    fl = sorted((f.src, f.dst, f.bytes) for f in problem.flows)
    sw = sorted((swap(f.src), swap(f.dst), f.bytes) for f in problem.flows)
    return fl == sw
