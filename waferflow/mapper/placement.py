"""The placement solvers' public API, on plain data (see docs/mapper.md).

A ``place`` pass builds a :class:`FloorplanProblem` (op groups -> rectangles of cores)
or an :class:`AssignProblem` (actors -> cores) from a plan, calls
:func:`solve_floorplan` / :func:`solve_assignment` (or :func:`compare`), and applies the
result. Nothing here knows about the IR.
"""

from waferflow.mapper.assign import solve_assignment
from waferflow.mapper.baselines import (
    ASSIGN_BASELINES,
    FLOORPLAN_BASELINES,
    equal_strips,
    greedy,
    row_major,
    snake,
    work_strips,
)
from waferflow.mapper.bounds import (
    assignment_lower_bound,
    floorplan_lower_bound,
    pair_lower_bound,
    slowest_time_bound,
    star_lower_bound,
)
from waferflow.mapper.compare import ComparisonRow, ComparisonTable, compare
from waferflow.mapper.cost import (
    FloorplanCost,
    assignment_cost,
    assignment_violations,
    evaluate_floorplan,
)
from waferflow.mapper.cpsat import SolveOptions
from waferflow.mapper.floorplan import Formulation, solve_floorplan
from waferflow.mapper.problem import (
    AssignProblem,
    Coord,
    DeadCores,
    FloorplanProblem,
    Flow,
    Grid,
    Group,
    ObjectiveWeights,
    Rect,
    centre_distance,
)
from waferflow.mapper.report import Assignment, FloorplanResult, SolveReport, Status

__all__ = [
    "ASSIGN_BASELINES",
    "FLOORPLAN_BASELINES",
    "AssignProblem",
    "Assignment",
    "ComparisonRow",
    "ComparisonTable",
    "Coord",
    "DeadCores",
    "FloorplanCost",
    "FloorplanProblem",
    "FloorplanResult",
    "Flow",
    "Formulation",
    "Grid",
    "Group",
    "ObjectiveWeights",
    "Rect",
    "SolveOptions",
    "SolveReport",
    "Status",
    "assignment_cost",
    "assignment_lower_bound",
    "assignment_violations",
    "centre_distance",
    "compare",
    "equal_strips",
    "evaluate_floorplan",
    "floorplan_lower_bound",
    "greedy",
    "pair_lower_bound",
    "row_major",
    "slowest_time_bound",
    "snake",
    "solve_assignment",
    "solve_floorplan",
    "star_lower_bound",
    "work_strips",
]
