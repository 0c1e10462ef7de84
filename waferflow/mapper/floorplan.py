"""Floorplanning: a rectangle of cores per group, solved with CP-SAT.

The solve runs in phases inside one deterministic-time budget (see docs/mapper.md):

1. structured heuristics, no solver: work-proportional strips, snaking shelves (both
   orientations);
2. ``strips``: an exact CP-SAT model over ordered full-height strips (both orientations);
3. ``balance``: the rectangles model with the slowest time as the only objective. Its
   optimum ``T*`` (or its bound) is a proven lower limit on the slowest time;
4. ``sweep``: the slowest-time range ``[T*, best objective / balance]`` is cut into
   narrow slices; each slice is solved with the full objective (sizes then barely
   move, so a shape table pins them down). The least slice bound is a bound on the
   whole problem; slices still open get a second, longer look;
5. large-neighbourhood search on the best layout with whatever time is left.

Every layout is re-scored exactly; the reported bound is the best of the analytic
bound, the sweep's bound and the solver's bounds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import time
from enum import Enum

from waferflow.errors import PlanError
from waferflow.mapper.baselines import work_strips
from waferflow.mapper.bounds import floorplan_lower_bound, slowest_time_bound
from waferflow.mapper.cost import evaluate_floorplan
from waferflow.mapper.cpsat import CpRun, SolveOptions, export, run_cpsat
from waferflow.mapper.fp_models import (
    Scale,
    build_strips_model,
    transpose_problem,
    transpose_rects,
)
from waferflow.mapper.fp_rects import build_rect_model, canonical
from waferflow.mapper.lns import improve_floorplan
from waferflow.mapper.problem import FloorplanProblem, ObjectiveWeights, Rect
from waferflow.mapper.report import (
    FloorplanResult,
    SolveReport,
    Status,
    floorplan_view,
    relative_gap,
)
from waferflow.mapper.shelves import shelf_layouts


class Formulation(Enum):
    AUTO = "auto"  # every phase; the best layout wins
    STRIPS = "strips"  # ordered strips only (a pipeline's natural layout)
    RECTANGLES = "rectangles"  # the general model only (heuristics still serve as hints)


# shares of the deterministic budget (what a phase does not use passes on)
_STRIPS_SHARE = 0.1
_BALANCE_SHARE = 0.15
_SLICES = 8
_MIN_SLICE = 0.002  # relative width of a slowest-time slice


def worst_objective(problem: FloorplanProblem) -> float:
    """An objective no layout exceeds: scales a model that has no hint."""
    g = problem.grid
    w = problem.weights
    t = max(
        (
            grp.work / (m * problem.core_flops)
            for grp, m in zip(problem.groups, problem.min_areas, strict=True)
        ),
        default=0.0,
    )
    byt = sum(f.bytes for f in problem.flows if f.src != f.dst)
    return (
        w.balance * t
        + w.traffic * byt * (g.rows + g.cols)
        + w.d2d * byt * (g.die_rows + g.die_cols)
    )


class _Search:
    """The state of one solve: best layout, layouts seen, budget spent, notes."""

    def __init__(self, problem: FloorplanProblem, options: SolveOptions) -> None:
        self.problem = problem
        self.opts = options
        self.t0 = time.perf_counter()
        self.rects: tuple[Rect, ...] | None = None
        self.objective = math.inf
        self.source = ""
        self.pool: list[
            tuple[float, float, tuple[Rect, ...]]
        ] = []  # (slowest time, objective, rects)
        self.used = 0.0
        self.techniques: list[str] = []
        self.exported = False

    def offer(self, rects: tuple[Rect, ...] | None, source: str) -> bool:
        if rects is None:
            return False
        cost = evaluate_floorplan(self.problem, rects)
        if not cost.feasible:
            return False
        self.pool.append((cost.slowest_time, cost.objective, rects))
        if cost.objective < self.objective * (1 - 1e-12):
            self.rects, self.objective, self.source = rects, cost.objective, source
            return True
        return False

    def left(self) -> float:
        return self.opts.budget - self.used

    def run(self, model, limit: float, seed_offset: int, linearization: int | None = None) -> CpRun:
        if not self.exported and self.opts.export_model is not None:
            export(model, self.opts.export_model)
            self.exported = True
        r = run_cpsat(
            model,
            self.opts,
            max(min(limit, self.left()), 1e-3),
            seed_offset=seed_offset,
            linearization=linearization,
        )
        self.used += r.deterministic_time
        return r

    def hint_for(self, t_lo: float, t_hi: float) -> tuple[Rect, ...] | None:
        """The best layout seen whose slowest time lies in ``[t_lo, t_hi]``, else the best."""
        inside = [(obj, i) for i, (t, obj, _) in enumerate(self.pool) if t_lo <= t <= t_hi]
        if inside:
            return self.pool[min(inside)[1]][2]
        return self.rects


def _heuristics(s: _Search, formulation: Formulation) -> None:
    if len(s.problem.groups) <= s.problem.grid.cols:  # else strips do not apply
        # no strip hint when the groups' memory needs more columns than the grid has
        with contextlib.suppress(PlanError):
            s.offer(work_strips(s.problem).rects, "work-strips")
    if formulation is Formulation.STRIPS:
        return
    for rects in shelf_layouts(s.problem):
        s.offer(rects, "shelves")
    for rects in shelf_layouts(transpose_problem(s.problem)):
        s.offer(transpose_rects(rects), "shelves")
    s.techniques.append("heuristic:shelves")


def _strips(s: _Search, budget: float) -> None:
    for k, (name, prob, back) in enumerate(
        (("strips", s.problem, False), ("strips-transposed", transpose_problem(s.problem), True))
    ):
        if s.left() <= 1e-3:
            return
        est = s.objective if s.rects is not None else worst_objective(s.problem)
        hint = None
        if s.rects is not None and s.source == "work-strips" and not back:
            hint = s.rects
        sm = build_strips_model(prob, Scale.from_estimate(est), hint)
        if sm is None:
            continue
        run = s.run(sm.model, budget / 2, seed_offset=1 + k)
        if run.has_solution:
            rects = sm.rects(run.solver, prob.grid.rows)
            s.offer(transpose_rects(rects) if back else rects, name)
        s.techniques.append(f"cp-sat:{name}")


def _balance_phase(s: _Search, budget: float) -> tuple[float, bool]:
    """Minimise the slowest time alone; return a proven lower bound on it (seconds) and
    whether the solver proved it optimal."""
    p = s.problem
    bal = dataclasses.replace(p, weights=ObjectiveWeights(balance=1.0, traffic=0.0, d2d=0.0))
    t_best = min((t for t, _, _ in s.pool), default=None)
    est = t_best if t_best is not None else worst_objective(bal)
    scale = Scale.from_estimate(est)
    hint = None
    if t_best is not None:
        hint = canonical(p, min(s.pool, key=lambda e: (e[0], e[1]))[2])
    rm = build_rect_model(bal, scale, hint)
    run = s.run(rm.model, budget, seed_offset=3)
    s.techniques.append("cp-sat:balance")
    if run.status == "INFEASIBLE" and s.rects is None:
        raise _infeasible(p)
    if run.has_solution:
        s.offer(rm.rects(run.solver), "balance")
    lb = slowest_time_bound(p)
    if math.isfinite(run.bound):
        lb = max(lb, run.bound * scale.unit)
    if run.status == "INFEASIBLE" and t_best is not None:
        lb = max(lb, t_best)  # nothing beats the known slowest time
    return lb, run.status in ("OPTIMAL", "INFEASIBLE")


def _sweep(s: _Search, t_lower: float, budget: float) -> float:
    """Solve the full objective in slices of the slowest time; return the sweep's
    bound on the whole problem (-inf if it could not visit every slice)."""
    p = s.problem
    bal = p.weights.balance
    t_top = s.objective / bal  # a layout this slow or slower cannot beat the best
    if t_top <= t_lower:
        return s.objective
    ratio = max(1 + _MIN_SLICE, (t_top / t_lower) ** (1 / _SLICES))
    edges = [t_lower]
    while edges[-1] < t_top:
        edges.append(edges[-1] * ratio)
    slices = list(itertools.pairwise(edges))
    bounds: list[float] = [-math.inf] * len(slices)
    start = s.used
    s.techniques.append(f"sweep:slowest-time({len(slices)} slices)")

    def solve(i: int, limit: float, seed: int) -> None:
        lo, hi = slices[i]
        if bal * lo >= s.objective:
            bounds[i] = s.objective  # every layout here is no better than the best
            return
        scale = Scale.from_estimate(s.objective)
        hint = s.hint_for(lo, hi)
        rm = build_rect_model(
            p,
            scale,
            canonical(p, hint) if hint is not None else None,
            t_range=(math.floor(lo * bal / scale.unit), math.floor(hi * bal / scale.unit)),
        )
        # slices fix the sizes almost completely: propagation beats the LP here
        run = s.run(rm.model, limit, seed_offset=seed, linearization=0)
        analytic = floorplan_lower_bound(p, t_min=lo, t_max=hi)
        if run.status == "INFEASIBLE":
            bounds[i] = max(bounds[i], s.objective)
        else:
            if run.has_solution:
                s.offer(rm.rects(run.solver), "sweep")
            solver_b = run.bound * scale.unit if math.isfinite(run.bound) else -math.inf
            bounds[i] = max(bounds[i], solver_b, analytic)

    def open_slices() -> list[int]:
        return [i for i in range(len(slices)) if bounds[i] < s.objective * (1 - s.opts.gap_limit)]

    limits = [budget / 4 / len(slices)] * len(slices)
    for i in range(len(slices)):  # pass 1: a quick look at every slice
        if s.left() <= 1e-3:
            break  # unvisited slices keep a bound of -inf
        solve(i, limits[i], 10 + i)
    rnd = 0
    while s.left() > 1e-3:  # then the open slice with the weakest bound, with doubled time
        todo = open_slices()
        spare = budget - (s.used - start)
        if not todo or spare <= 1e-2:
            break
        i = min(todo, key=lambda k: (bounds[k], k))
        # one long run proves more than several short restarts
        limits[i] = min(spare, max(2 * limits[i], spare if len(todo) == 1 else 0.6 * spare))
        rnd += 1
        solve(i, limits[i], 100 * rnd + i)
    return min(min(bounds), s.objective)


def _full_model(s: _Search, budget: float) -> float:
    """The rectangles model with the full objective, no slicing; returns its bound."""
    p = s.problem
    scale = Scale.from_estimate(s.objective if s.rects is not None else worst_objective(p))
    rm = build_rect_model(p, scale, canonical(p, s.rects) if s.rects is not None else None)
    s.techniques.extend(rm.techniques)
    run = s.run(rm.model, budget, seed_offset=4)
    s.techniques.append("cp-sat:rectangles")
    if run.status == "INFEASIBLE" and s.rects is None:
        raise _infeasible(p)
    if run.has_solution:
        s.offer(rm.rects(run.solver), "rectangles")
    if run.status == "INFEASIBLE":
        return s.objective
    return run.bound * scale.unit if math.isfinite(run.bound) else -math.inf


def _infeasible(p: FloorplanProblem) -> PlanError:
    return PlanError(
        "no floorplan exists: the groups' memory cannot be laid out as disjoint rectangles "
        f"on the {p.grid.rows}x{p.grid.cols} grid with its {len(p.grid.dead)} dead cores as "
        "obstacles; use dead_cores=DeadCores.IDLE, fewer or smaller groups, or a larger grid"
    )


def solve_floorplan(
    problem: FloorplanProblem,
    options: SolveOptions | None = None,
    formulation: Formulation = Formulation.AUTO,
) -> FloorplanResult:
    """Place every group on a rectangle of cores, within the options' limits.

    Deterministic for fixed inputs, seed and limits. Raises :class:`PlanError` when no
    layout exists or none was found in time."""
    opts = options if options is not None else SolveOptions()
    s = _Search(problem, opts)
    s.techniques.append(f"formulation:{formulation.value}")
    w = problem.weights
    budget = opts.budget
    _heuristics(s, formulation)
    if formulation is not Formulation.RECTANGLES:
        _strips(s, budget if formulation is Formulation.STRIPS else budget * _STRIPS_SHARE)
    bound = -math.inf
    t_lower: float | None = None
    if formulation is not Formulation.STRIPS and s.left() > 1e-3:
        s.techniques.extend(
            [
                "redundant:area",
                "redundant:work-bounds",
                "redundant:tangent-cuts",
                "redundant:cumulative",
            ]
        )
        s.techniques.append("symmetry:grid-reflections+identical-groups")
        others = w.traffic > 0 or w.d2d > 0
        if w.balance > 0:
            t_lower, proven = _balance_phase(s, budget * _BALANCE_SHARE)
            if not others:
                bound = w.balance * t_lower
            elif proven and s.rects is not None and s.left() > 1e-3:
                # CP-SAT masters this instance: slicing can prove the full objective
                bound = max(bound, _sweep(s, t_lower, s.left()))
        elif s.left() > 1e-3:
            bound = max(bound, _full_model(s, s.left() / 2))
        if s.rects is not None and s.left() > 0.05 and bound < s.objective * (1 - opts.gap_limit):
            rects, dt, rounds, better, lns_bound = improve_floorplan(
                problem, s.rects, s.left(), opts
            )
            s.used += dt
            s.offer(rects, s.source + "+lns")
            bound = max(bound, lns_bound)
            s.techniques.append(f"lns:rectangles(rounds={rounds},improved={better})")
    if s.rects is None and formulation is Formulation.STRIPS:
        raise PlanError(
            f"no strip layout found for {len(problem.groups)} groups on the {problem.grid.rows}x"
            f"{problem.grid.cols} grid (memory, dead cores or too many groups for full-height strips); "
            "use formulation=auto or rectangles"
        )
    if s.rects is None:
        raise PlanError(
            f"no feasible floorplan found within {opts.time_limit} deterministic seconds "
            f"({problem.grid.rows}x{problem.grid.cols} grid, {len(problem.groups)} groups); "
            "raise the time limit, or relax memory"
        )
    cost = evaluate_floorplan(problem, s.rects)
    bound = max(bound, floorplan_lower_bound(problem, cost.objective, t_min=t_lower))
    bound = min(bound, cost.objective)  # integer rounding can leave it a hair above
    gap = relative_gap(cost.objective, bound)
    if opts.num_workers > 1:
        s.techniques.append(f"parallel:{opts.num_workers}-workers(non-deterministic)")
    s.techniques.append(f"result:{s.source}")
    report = SolveReport(
        status=Status.OPTIMAL if gap <= opts.gap_limit else Status.FEASIBLE,
        objective=cost.objective,
        best_bound=bound,
        gap=gap,
        wall_time=time.perf_counter() - s.t0,
        deterministic_time=s.used,
        techniques=tuple(s.techniques),
        view=floorplan_view(problem.grid, s.rects),
    )
    return FloorplanResult(s.rects, cost, report)
