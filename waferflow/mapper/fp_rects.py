"""The free-rectangles CP-SAT floorplan model and its symmetry breaking.

``build_rect_model`` gives every group a rectangle anywhere on the grid (no overlap,
dead cores as obstacles or idle cores, shape tables where few shapes are legal),
on the scaled integer objective of ``fp_models``. ``Symmetries`` and ``canonical``
say which reflections of the grid and which permutations of interchangeable groups
give equal layouts: the model keeps one of each, and hints are mapped into it first.

It is separate from ``fp_models.py`` (the shared objective scaling, cuts and the
strips model) because it is the larger model with concerns of its own (obstacles,
shapes, symmetry), which the strips model does not share.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from waferflow.mapper._ortools import cp_model
from waferflow.mapper.bounds import largest_alive_rectangle, slowest_time_bound
from waferflow.mapper.fp_models import (
    Scale,
    add_tangent_cuts,
    core_bounds,
    die_indices,
    pair_weights,
    time_constant,
    time_ticks,
    transpose_rects,
)
from waferflow.mapper.problem import DeadCores, FloorplanProblem, Grid, Group, Rect

_MAX_SHAPES = 3000  # (width, height) pairs per group for a shape table


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
        core_bounds(problem, scale, g, t_cap)[0] for g in free
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
        lo, hi = core_bounds(problem, scale, g, t_cap)
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
                raw = np.floor(time_constant(problem, scale, g) / a)
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
    die_c = die_indices(m, grid, cx, grid.die_cols, grid.die_of_col, C)
    die_r = die_indices(m, grid, cy, grid.die_rows, grid.die_of_row, R)
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
