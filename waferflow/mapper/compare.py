"""CP-SAT beside the simple baselines and the lower bound: the table behind
``waferflow place --compare``."""

from __future__ import annotations

from dataclasses import dataclass

from waferflow.errors import PlanError
from waferflow.mapper.assign import solve_assignment
from waferflow.mapper.baselines import ASSIGN_BASELINES, FLOORPLAN_BASELINES
from waferflow.mapper.cost import assignment_violations
from waferflow.mapper.cpsat import SolveOptions
from waferflow.mapper.floorplan import Formulation, solve_floorplan
from waferflow.mapper.problem import AssignProblem, FloorplanProblem
from waferflow.mapper.report import SolveReport, relative_gap


@dataclass(frozen=True)
class ComparisonRow:
    method: str
    objective: float | None  # None: the method found no valid placement
    ratio: float | None  # objective / CP-SAT objective
    gap_to_bound: float | None  # (objective - bound) / objective
    note: str = ""


@dataclass(frozen=True)
class ComparisonTable:
    kind: str  # "floorplan" or "assignment"
    rows: tuple[ComparisonRow, ...]
    bound: float
    solver: SolveReport

    def row(self, method: str) -> ComparisonRow:
        for r in self.rows:
            if r.method == method:
                return r
        raise KeyError(method)

    def __str__(self) -> str:
        head = ("method", "objective", "vs CP-SAT", "gap to bound", "note")
        body = []
        for r in self.rows:
            body.append(
                (
                    r.method,
                    "-" if r.objective is None else f"{r.objective:.6g}",
                    "-" if r.ratio is None else f"{r.ratio:.3f}",
                    "-" if r.gap_to_bound is None else f"{100 * r.gap_to_bound:.2f}%",
                    r.note,
                )
            )
        cp = self.solver.objective
        body.append(
            (
                "lower bound",
                f"{self.bound:.6g}",
                f"{self.bound / cp:.3f}" if cp > 0 else "-",
                "-",
                "",
            )
        )
        widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
            for line in [head, *body]
        ]
        lines.insert(1, "  ".join("-" * w for w in widths))
        s = self.solver
        lines.append(
            f"{self.kind}: CP-SAT {s.status.value}, gap {100 * s.gap:.2f}%, "
            f"{s.deterministic_time:.2f} deterministic s ({s.wall_time:.2f} s wall); "
            f"techniques: {', '.join(s.techniques)}"
        )
        return "\n".join(lines)


def _row(
    method: str, objective: float | None, cp: float, bound: float, note: str = ""
) -> ComparisonRow:
    if objective is None:
        return ComparisonRow(method, None, None, None, note)
    ratio = objective / cp if cp > 0 else (1.0 if objective == 0 else float("inf"))
    return ComparisonRow(method, objective, ratio, relative_gap(objective, bound), note)


def compare(
    problem: FloorplanProblem | AssignProblem,
    options: SolveOptions | None = None,
    formulation: Formulation = Formulation.AUTO,
) -> ComparisonTable:
    """Solve with CP-SAT and score every baseline against it and against the bound."""
    if isinstance(problem, FloorplanProblem):
        res = solve_floorplan(problem, options, formulation)
        cp, bound = res.objective, res.report.best_bound
        rows = [_row("cp-sat", cp, cp, bound, res.report.status.value)]
        for name, fn in FLOORPLAN_BASELINES.items():
            try:
                b = fn(problem)
            except PlanError as e:  # e.g. more groups than columns
                rows.append(_row(name, None, cp, bound, f"not applicable: {e}"))
                continue
            if b.cost.feasible:
                rows.append(_row(name, b.objective, cp, bound))
            else:
                rows.append(_row(name, None, cp, bound, f"infeasible: {b.cost.violations[0]}"))
        return ComparisonTable("floorplan", tuple(rows), bound, res.report)
    ares = solve_assignment(problem, options)
    cp, bound = ares.cost, ares.report.best_bound
    rows = [_row("cp-sat", cp, cp, bound, ares.report.status.value)]
    for name, fn in ASSIGN_BASELINES.items():
        try:
            b = fn(problem)
        except PlanError as e:  # the baseline could not fit the actors
            rows.append(_row(name, None, cp, bound, f"failed: {e}"))
            continue
        bad = assignment_violations(problem, b.core_of_actor)
        rows.append(
            _row(name, None if bad else b.cost, cp, bound, f"invalid: {bad[0]}" if bad else "")
        )
    return ComparisonTable("assignment", tuple(rows), bound, ares.report)
