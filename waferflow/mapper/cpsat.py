"""Solver discipline shared by every CP-SAT call: deterministic limits, a seed, a hang
guard, and the numbers each call reports back."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from waferflow.errors import PlanError, SolverHangError
from waferflow.fileio import atomic_path
from waferflow.interrupt import run_interruptible
from waferflow.mapper._ortools import cp_model

# The hang guard, in CPU seconds of this process per deterministic second per worker: a
# deterministic second costs about one to three CPU seconds (model loading is not counted
# in it), so a call past this has stopped making progress. CPU time, not wall time: a
# loaded machine stretches wall time without limit but leaves CPU time alone.
GUARD_FACTOR = 50.0
GUARD_SLACK = 120.0  # CPU seconds, for the fixed costs of a call whatever its limit
MAX_WORKERS = 10_000  # CP-SAT's own bound on num_workers: more is MODEL_INVALID
_GUARD_POLL = 0.25  # seconds between two looks at the CPU clock


@dataclass(frozen=True)
class SolveOptions:
    """Limits and knobs for one placement solve.

    ``time_limit`` is in CP-SAT *deterministic* seconds (roughly seconds on a typical
    core, but independent of machine load), so the same inputs and seed give the same
    result. Nothing stops on wall-clock time. One guard catches a hung solver: a call
    that has used ``hang_guard(its limit)`` CPU seconds (``max_cpu_time`` if set, else
    ``GUARD_FACTOR`` x its deterministic limit x workers + ``GUARD_SLACK``: far beyond
    what the limit needs, however loaded the machine) is stopped and the solve fails
    with ``SolverHangError``; a plan cut short by it would not be reproducible, so none
    is returned.

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
    max_cpu_time: float | None = None  # the hang guard, overridden (tests)

    def __post_init__(self) -> None:
        if not (self.time_limit > 0 and math.isfinite(self.time_limit)):
            raise PlanError(f"time limit must be positive (and finite), got {self.time_limit}")
        if not 1 <= self.num_workers <= MAX_WORKERS:  # CP-SAT rejects more as invalid
            raise PlanError(
                f"num_workers must be from 1 to {MAX_WORKERS:,} (CP-SAT threads), got "
                f"{self.num_workers}"
            )
        if not 0 <= self.gap_limit < 1:
            raise PlanError(f"gap_limit must be in [0, 1), got {self.gap_limit}")
        if self.max_cpu_time is not None and not self.max_cpu_time > 0:
            raise PlanError(f"max_cpu_time must be positive, got {self.max_cpu_time}")

    @property
    def budget(self) -> float:
        """What the phases of a solve share: CP-SAT checks its limits only every so often
        and may overrun a call slightly, so 2% of the limit is held back."""
        return 0.98 * self.time_limit

    def hang_guard(self, det_limit: float) -> float:
        """CPU seconds after which one CP-SAT call of ``det_limit`` deterministic
        seconds is taken to hang."""
        if self.max_cpu_time is not None:
            return self.max_cpu_time
        return GUARD_FACTOR * det_limit * self.num_workers + GUARD_SLACK


@dataclass(frozen=True)
class CpRun:
    """The outcome of one ``solve`` call."""

    solver: cp_model.CpSolver
    status: str  # OPTIMAL, FEASIBLE, INFEASIBLE, UNKNOWN, MODEL_INVALID
    objective: float  # integer model units; nan without a solution
    bound: float  # integer model units
    deterministic_time: float
    wall_time: float

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
    (only a hung solver raises: ``SolveOptions.hang_guard``)."""
    hint_time = complete_hint(model, options) if model.proto.solution_hint.vars else 0.0
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.max_deterministic_time = max(det_limit - hint_time, 1e-3)
    p.random_seed = (options.seed + seed_offset) % (2**31 - 1)
    p.num_workers = options.num_workers
    p.relative_gap_limit = options.gap_limit
    # presolve probing can eat a short budget whole on big tables: keep it to a tenth
    p.probing_deterministic_time_limit = min(1.0, 0.1 * p.max_deterministic_time)
    p.log_search_progress = False
    if linearization is not None:
        p.linearization_level = linearization
    status = _solve(solver, model, options.hang_guard(det_limit), det_limit)
    name = solver.status_name(status)
    if name == "MODEL_INVALID":
        raise RuntimeError(f"internal error: CP-SAT rejected the model: {model.validate()}")
    has = name in ("OPTIMAL", "FEASIBLE")
    dtime = solver.deterministic_time + hint_time
    return CpRun(
        solver=solver,
        status=name,
        objective=solver.objective_value if has else math.nan,
        bound=solver.best_objective_bound,
        deterministic_time=dtime,
        wall_time=solver.wall_time,
    )


def _solve(
    solver: cp_model.CpSolver, model: cp_model.CpModel, cpu_limit: float, det_limit: float
) -> int:
    """Every CP-SAT solve goes through here, so that Ctrl-C interrupts it
    (``waferflow.interrupt``; CP-SAT's own SIGINT handler is turned off: it would end
    the search early as if it had finished, and the compile would carry on), and so
    that a hung solve is stopped after ``cpu_limit`` CPU seconds and reported."""
    solver.parameters.catch_sigint_signal = False
    guard = _HangGuard(cpu_limit, solver.stop_search)
    try:
        status = run_interruptible(lambda: solver.solve(model), solver.stop_search)
    finally:
        guard.close()
    if guard.fired:
        raise SolverHangError(
            f"CP-SAT was stopped after {guard.used:.0f} CPU seconds on a call limited to "
            f"{det_limit:.3g} deterministic seconds (about that many CPU seconds): it "
            "stopped making progress. No plan is returned, since one cut short would "
            "differ between runs. Run again with another --seed or a smaller problem "
            "(fewer actors, a coarser view); if it recurs, export the model "
            "(waferflow place ... --export-model FILE) and report it"
        )
    return status


class _HangGuard:
    """Calls ``stop`` once this process has used ``limit`` CPU seconds since it began
    (looked at every ``_GUARD_POLL`` s by a daemon thread)."""

    def __init__(self, limit: float, stop: Callable[[], None]) -> None:
        self.limit = limit
        self.used = 0.0
        self.fired = False
        self._stop = stop
        self._start = time.process_time()
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, name="waferflow-hang-guard", daemon=True
        )
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(_GUARD_POLL):
            self.used = time.process_time() - self._start
            if self.used > self.limit:
                self.fired = True
                self._stop()
                return

    def close(self) -> None:
        self._done.set()
        self._thread.join()


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
    p.num_workers = 1
    p.random_seed = options.seed % (2**31 - 1)
    limit = p.max_deterministic_time
    name = solver.status_name(_solve(solver, model, options.hang_guard(limit), limit))
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
