"""Floorplanning: a rectangle of cores per group, solved with CP-SAT.

The solve runs in phases, all inside one deterministic-time budget:

1. structured heuristics (no solver): work-proportional strips and snaking shelves;
2. ``strips``: an exact CP-SAT model over ordered full-height strips (both
   orientations), hinted with the best heuristic;
3. ``rectangles``: the general CP-SAT model (free rectangles, no-overlap-2D, dead cores
   as obstacles), hinted with the best layout so far, whose bound is valid for the
   problem as posed;
4. large-neighbourhood search on the rectangles model: free a few groups, fix the
   rest, re-solve, keep improvements.

The result is the best layout found, re-scored exactly, with a bound that is the best
of the rectangles model's bound and the analytic bound.
"""

from __future__ import annotations

import math
import time
from enum import Enum

from waferflow.errors import PlanError
from waferflow.mapper.baselines import work_strips
from waferflow.mapper.bounds import floorplan_lower_bound
from waferflow.mapper.cost import evaluate_floorplan
from waferflow.mapper.cpsat import SolveOptions, export, run_cpsat
from waferflow.mapper.fp_models import (
    Scale,
    build_rect_model,
    build_strips_model,
    canonical,
    transpose_problem,
    transpose_rects,
)
from waferflow.mapper.lns import improve_floorplan
from waferflow.mapper.problem import FloorplanProblem, Rect
from waferflow.mapper.report import FloorplanResult, SolveReport, Status, floorplan_view, relative_gap
from waferflow.mapper.shelves import shelf_layouts


class Formulation(Enum):
    AUTO = "auto"  # heuristics, strips, rectangles and LNS; the best wins
    STRIPS = "strips"  # ordered strips only (a pipeline's natural layout)
    RECTANGLES = "rectangles"  # the general model (with heuristic hints), then LNS


# shares of the deterministic budget
_STRIPS_SHARE = 0.15
_RECT_SHARE = 0.35


def worst_objective(problem: FloorplanProblem) -> float:
    """An objective no layout can exceed: used to scale a model without any hint."""
    g = problem.grid
    w = problem.weights
    t = max(
        (grp.work / (m * problem.core_flops) for grp, m in zip(problem.groups, problem.min_areas, strict=True)),
        default=0.0,
    )
    byt = sum(f.bytes for f in problem.flows if f.src != f.dst)
    return w.balance * t + w.traffic * byt * (g.rows + g.cols) + w.d2d * byt * (g.die_rows + g.die_cols)


class _Best:
    """The best feasible layout seen so far and where it came from."""

    def __init__(self, problem: FloorplanProblem) -> None:
        self.problem = problem
        self.rects: tuple[Rect, ...] | None = None
        self.objective = math.inf
        self.source = ""

    def offer(self, rects: tuple[Rect, ...] | None, source: str) -> bool:
        if rects is None:
            return False
        cost = evaluate_floorplan(self.problem, rects)
        if cost.feasible and cost.objective < self.objective * (1 - 1e-12):
            self.rects, self.objective, self.source = rects, cost.objective, source
            return True
        return False


def solve_floorplan(
    problem: FloorplanProblem,
    options: SolveOptions | None = None,
    formulation: Formulation = Formulation.AUTO,
) -> FloorplanResult:
    """Place every group on a rectangle of cores; never runs past the limits."""
    opts = options if options is not None else SolveOptions()
    t0 = time.perf_counter()
    budget = opts.time_limit
    used = 0.0
    techniques: list[str] = [f"formulation:{formulation.value}"]
    best = _Best(problem)
    wall_hit = False

    def wall_left() -> float:
        return opts.wall_cap - (time.perf_counter() - t0)

    # 1. structured heuristics
    try:
        best.offer(work_strips(problem).rects, "work-strips")
    except PlanError:
        pass  # more groups than columns: strips do not apply
    if formulation is not Formulation.STRIPS:
        for rects in shelf_layouts(problem)[:1]:
            best.offer(rects, "shelves")
        tp = transpose_problem(problem)
        for rects in shelf_layouts(tp)[:1]:
            best.offer(transpose_rects(rects), "shelves-transposed")
        techniques.append("heuristic:shelves")

    # 2. ordered strips, exact within the formulation
    strips_budget = budget if formulation is Formulation.STRIPS else budget * _STRIPS_SHARE
    strip_optimal = []
    for name, prob, back in (("strips", problem, False), ("strips-transposed", transpose_problem(problem), True)):
        if formulation is Formulation.RECTANGLES:
            break
        est = best.objective if best.rects is not None else worst_objective(problem)
        scale = Scale.from_estimate(est)
        hint = None
        if best.rects is not None and best.source in ("work-strips",) and not back:
            hint = best.rects
        sm = build_strips_model(prob, scale, hint)
        if sm is None:
            continue
        if not back:
            export(sm.model, opts.export_model if formulation is Formulation.STRIPS else None)
        run = run_cpsat(sm.model, opts, strips_budget / 2, wall_cap=max(wall_left(), 0.05), seed_offset=1 if back else 0)
        used += run.deterministic_time
        wall_hit |= run.hit_wall_cap
        if run.has_solution:
            rects = sm.rects(run.solver, prob.grid.rows)
            best.offer(transpose_rects(rects) if back else rects, name)
            strip_optimal.append(run.status == "OPTIMAL")
        techniques.append(f"cp-sat:{name}")
    if formulation is not Formulation.STRIPS and problem.grid.rows == problem.grid.cols:
        pass

    bound = floorplan_lower_bound(problem, best.objective if best.rects is not None else None)

    # 3. the general rectangles model
    if formulation is not Formulation.STRIPS:
        hint = canonical(problem, best.rects) if best.rects is not None else None
        est = best.objective if best.rects is not None else worst_objective(problem)
        scale = Scale.from_estimate(est)
        if best.rects is not None:
            techniques.append(f"hint:{best.source}")
        rm = build_rect_model(problem, scale, hint)
        techniques.extend(rm.techniques)
        export(rm.model, opts.export_model)
        share = _RECT_SHARE / (1 - _STRIPS_SHARE) if formulation is Formulation.AUTO else _RECT_SHARE / (1 - 0.0)
        rect_budget = max(budget - used, 0.0) * min(share, 1.0)
        run = run_cpsat(rm.model, opts, max(rect_budget, 1e-3), wall_cap=max(wall_left(), 0.05), seed_offset=2)
        used += run.deterministic_time
        wall_hit |= run.hit_wall_cap
        techniques.append("cp-sat:rectangles")
        if run.status == "INFEASIBLE" and best.rects is None:
            raise PlanError(
                "no floorplan exists: the groups' memory cannot be laid out as disjoint "
                f"rectangles on the {problem.grid.rows}x{problem.grid.cols} grid "
                f"({len(problem.grid.dead)} dead cores as obstacles); try dead_cores=IDLE or fewer groups"
            )
        if run.has_solution:
            best.offer(rm.rects(run.solver), "rectangles")
        if math.isfinite(run.bound) and run.status in ("OPTIMAL", "FEASIBLE", "UNKNOWN"):
            bound = max(bound, run.bound * scale.unit)
        # 4. LNS with what is left
        left = budget - used
        if best.rects is not None and left > 0.05 and bound < best.objective * (1 - opts.gap_limit):
            rects, dt, rounds, better = improve_floorplan(problem, best.rects, left, opts, wall_left)
            used += dt
            best.offer(rects, best.source + "+lns")
            techniques.append(f"lns:rectangles(rounds={rounds},improved={better})")

    if best.rects is None:
        raise PlanError(
            f"no feasible floorplan found within {budget} deterministic seconds "
            f"({problem.grid.rows}x{problem.grid.cols} grid, {len(problem.groups)} groups); "
            "raise the time limit or relax memory"
        )
    cost = evaluate_floorplan(problem, best.rects)
    bound = max(bound, floorplan_lower_bound(problem, cost.objective))
    bound = min(bound, cost.objective)  # rounding can leave the bound a hair above
    gap = relative_gap(cost.objective, bound)
    if wall_hit or time.perf_counter() - t0 > opts.wall_cap:
        techniques.append("wall-limit-hit(non-deterministic)")
    techniques.append(f"result:{best.source}")
    status = Status.OPTIMAL if gap <= opts.gap_limit else Status.FEASIBLE
    report = SolveReport(
        status=status,
        objective=cost.objective,
        best_bound=bound,
        gap=gap,
        wall_time=time.perf_counter() - t0,
        deterministic_time=used,
        techniques=tuple(techniques),
        view=floorplan_view(problem.grid, best.rects),
    )
    return FloorplanResult(best.rects, cost, report)
