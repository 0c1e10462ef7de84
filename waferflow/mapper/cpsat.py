"""Solver discipline shared by every CP-SAT call: deterministic limits, a seed, a wall
safety net, and the numbers each call reports back."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ortools.sat.python import cp_model

from waferflow.errors import PlanError
from waferflow.fileio import atomic_path
from waferflow.interrupt import run_interruptible

GUARD_FACTOR = 20.0  # a deterministic second takes about a wall second on one free core
GUARD_SLACK = 30.0  # wall seconds


@dataclass(frozen=True)
class SolveOptions:
    """Limits and knobs for one placement solve.

    ``time_limit`` is in CP-SAT *deterministic* seconds (roughly seconds on a typical
    core, but independent of machine load), so the same inputs and seed give the same
    result. Nothing stops on wall-clock time, except one safety net against a hung
    solver: each CP-SAT call is stopped after ``wall_guard(its limit)`` wall seconds
    (``max_wall_time`` if set, else ``GUARD_FACTOR`` x its deterministic limit +
    ``GUARD_SLACK``: far more than a loaded machine needs). If that ever fires, the
    result says so in its techniques, because it may then differ between runs.

    ``num_workers > 1`` runs CP-SAT's parallel portfolio: often better, but *not*
    reproducible (measured with 9.15: even ``interleave_search``, documented as
    deterministic, returned different solutions for the same short sub-problems, and
    aborted on infeasible hints). Results then carry a ``non-deterministic`` technique.
    """

    time_limit: float = 10.0
    seed: int = 0
    num_workers: int = 1
    gap_limit: float = 1e-4  # stop once (objective - bound) / objective falls below this
    export_model: Path | None = None
    max_wall_time: float | None = None

    def __post_init__(self) -> None:
        if not (self.time_limit > 0 and math.isfinite(self.time_limit)):
            raise PlanError(f"time limit must be positive (and finite), got {self.time_limit}")
        if self.num_workers < 1:
            raise PlanError(f"num_workers must be >= 1, got {self.num_workers}")
        if not 0 <= self.gap_limit < 1:
            raise PlanError(f"gap_limit must be in [0, 1), got {self.gap_limit}")
        if self.max_wall_time is not None and not self.max_wall_time > 0:
            raise PlanError(f"max_wall_time must be positive, got {self.max_wall_time}")

    @property
    def budget(self) -> float:
        """What the phases of a solve share: CP-SAT checks its limits only every so often
        and may overrun a call slightly, so 2% of the limit is held back."""
        return 0.98 * self.time_limit

    def wall_guard(self, det_limit: float) -> float:
        """Wall seconds after which one CP-SAT call of ``det_limit`` deterministic
        seconds is taken to hang and stopped."""
        if self.max_wall_time is not None:
            return self.max_wall_time
        return GUARD_FACTOR * det_limit + GUARD_SLACK


@dataclass(frozen=True)
class CpRun:
    """The outcome of one ``solve`` call."""

    solver: cp_model.CpSolver
    status: str  # OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN, MODEL_INVALID
    objective: float  # integer model units; nan without a solution
    bound: float  # integer model units
    deterministic_time: float
    wall_time: float
    hit_wall_cap: bool

    @property
    def has_solution(self) -> bool:
        return self.status in ("OPTIMAL", "FEASIBLE")


def run_cpsat(
    model: cp_model.CpModel,
    options: SolveOptions,
    det_limit: float,
    *,
    seed_offset: int = 0,
    linearization: int | None = None,
) -> CpRun:
    """Solve ``model`` within ``det_limit`` deterministic seconds; never raises on limits
    (the wall-clock guard, ``SolveOptions.wall_guard``, only catches a hung solver)."""
    hint_time = complete_hint(model, options) if model.proto.solution_hint.vars else 0.0
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.max_deterministic_time = max(det_limit - hint_time, 1e-3)
    cap = options.wall_guard(det_limit)
    p.max_time_in_seconds = cap
    p.random_seed = (options.seed + seed_offset) % (2**31 - 1)
    p.num_workers = options.num_workers
    p.relative_gap_limit = options.gap_limit
    # presolve probing can eat a short budget whole on big tables: keep it to a tenth
    p.probing_deterministic_time_limit = min(1.0, 0.1 * p.max_deterministic_time)
    p.log_search_progress = False
    if linearization is not None:
        p.linearization_level = linearization
    status = _solve(solver, model)
    name = solver.status_name(status)
    if name == "MODEL_INVALID":
        raise RuntimeError(f"internal error: CP-SAT rejected the model: {model.validate()}")
    has = name in ("OPTIMAL", "FEASIBLE")
    wall = solver.wall_time
    dtime = solver.deterministic_time + hint_time
    return CpRun(
        solver=solver,
        status=name,
        objective=solver.objective_value if has else math.nan,
        bound=solver.best_objective_bound,
        deterministic_time=dtime,
        wall_time=wall,
        hit_wall_cap=wall >= 0.98 * cap and dtime < 0.98 * det_limit and name != "OPTIMAL",
    )


def _solve(solver: cp_model.CpSolver, model: cp_model.CpModel) -> int:
    """Every CP-SAT solve goes through here, so that Ctrl-C interrupts it
    (``waferflow.interrupt``): CP-SAT's own SIGINT handler is turned off (it would end
    the search early as if it had finished, and the compile would carry on)."""
    solver.parameters.catch_sigint_signal = False
    return run_interruptible(lambda: solver.solve(model), solver.stop_search)


def complete_hint(model: cp_model.CpModel, options: SolveOptions) -> float:
    """Turn a partial hint into a complete one: solve with the hinted variables fixed
    (pure propagation, near-instant) and hint every variable with the result. A
    complete, feasible hint is taken as the first solution; a partial one is often
    lost. Returns the deterministic time spent. A hint that contradicts the model is
    dropped."""
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.fix_variables_to_their_hinted_value = True
    p.max_deterministic_time = 0.5
    p.max_time_in_seconds = options.wall_guard(p.max_deterministic_time)
    p.num_workers = 1
    p.random_seed = options.seed % (2**31 - 1)
    name = solver.status_name(_solve(solver, model))
    if name in ("OPTIMAL", "FEASIBLE"):
        values = list(solver.response_proto.solution)
        model.clear_hints()
        for i, v in enumerate(values):
            model.add_hint(model.get_int_var_from_proto_index(i), v)
    elif name == "INFEASIBLE":
        # a hint that breaks the model is useless (and CP-SAT 9.15's interleaved search
        # even aborts on one: "Check failed: heuristics.fixed_search != nullptr")
        model.clear_hints()
    return solver.deterministic_time


def export(model: cp_model.CpModel, path: Path | None) -> None:
    """Write the model proto (text if the name ends in .txt / .pbtxt, else binary)."""
    if path is None:
        return
    with atomic_path(path) as tmp:  # the suffix (text or binary) is kept
        if not model.export_to_file(str(tmp)):
            raise PlanError(f"could not write the CP-SAT model to {path}")
