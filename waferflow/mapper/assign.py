"""Actor assignment: each actor (an op shard) to a core, minimising bytes x hops.

Small problems (up to ``DIRECT_LIMIT`` actors, and a modest number of actor-core
pairs) are solved by one CP-SAT model over all actors, hinted with the best baseline;
its bound is valid for the whole problem. Larger ones start from the best baseline and
improve by large-neighbourhood search (:mod:`waferflow.mapper.lns`). Either way the
reported bound is the best of the solver's and the analytic bounds.
"""

from __future__ import annotations

import math
import time

from waferflow.errors import PlanError
from waferflow.mapper.assign_model import GridSymmetry, anchor_actor, build_assign_model
from waferflow.mapper.baselines import greedy_cores, row_major, snake
from waferflow.mapper.bounds import assignment_lower_bound
from waferflow.mapper.cost import assignment_cost, assignment_violations
from waferflow.mapper.cpsat import SolveOptions, export, run_cpsat
from waferflow.mapper.lns import improve_assignment
from waferflow.mapper.local import swap_descent
from waferflow.mapper.problem import AssignProblem
from waferflow.mapper.report import Assignment, SolveReport, Status, assignment_view, relative_gap

DIRECT_LIMIT = 40  # actors
DIRECT_PAIRS = 20_000  # actor x candidate-core literals


def _start(problem: AssignProblem) -> tuple[tuple[int, ...], str]:
    """The cheapest valid baseline: greedy, snake or row-major."""
    options: list[tuple[float, int, tuple[int, ...], str]] = []
    for i, (name, fn) in enumerate(
        (
            ("greedy", lambda p: greedy_cores(p)),
            ("snake", lambda p: snake(p).core_of_actor),
            ("row-major", lambda p: row_major(p).core_of_actor),
        )
    ):
        try:
            cores = fn(problem)
        except PlanError:
            continue  # that baseline could not fit the actors; another may
        if not assignment_violations(problem, cores):
            options.append((assignment_cost(problem, cores), i, cores, name))
    if not options:
        raise PlanError(
            f"no baseline could place the {problem.n_actors} actors (memory or regions too tight); "
            "enlarge the regions or raise max_actors_per_core"
        )
    _cost, _, cores, name = min(options)
    return cores, name


def solve_assignment(problem: AssignProblem, options: SolveOptions | None = None) -> Assignment:
    """Assign actors to cores; deterministic for fixed inputs, seed and limits."""
    opts = options if options is not None else SolveOptions()
    t0 = time.perf_counter()
    start, source = _start(problem)
    polished = swap_descent(problem, start)
    techniques = [f"start:{source}"]
    if assignment_cost(problem, polished) < assignment_cost(problem, start):
        start = polished
        techniques.append("local:swap-descent")
    bound = assignment_lower_bound(problem)
    used = 0.0
    best = start
    literals = sum(len(problem.cores_for(a)) for a in range(problem.n_actors))
    if problem.n_actors <= DIRECT_LIMIT and literals <= DIRECT_PAIRS:
        sym = GridSymmetry.of(problem)
        anchor = anchor_actor(problem)
        hint = sym.canonical(problem, anchor, start)
        cand = {a: list(problem.cores_for(a)) for a in range(problem.n_actors)}
        am = build_assign_model(problem, list(range(problem.n_actors)), cand, hint, symmetry=sym)
        export(am.model, opts.export_model)
        run = run_cpsat(am.model, opts, opts.budget)
        used += run.deterministic_time
        techniques += ["cp-sat:direct", *am.techniques]
        if run.status == "INFEASIBLE":
            raise PlanError(
                "no assignment exists: the regions, memory or per-core limits cannot all be met"
            )
        if run.has_solution:
            sol = am.solution(run.solver)
            cand_cores = tuple(sol[a] for a in range(problem.n_actors))
            if assignment_cost(problem, cand_cores) < assignment_cost(problem, best):
                best = cand_cores
        if math.isfinite(run.bound):
            bound = max(bound, run.bound * am.unit)
    else:
        if opts.export_model is not None:
            # the full model, hinted with the start, for reproduction outside waferflow
            cand = {a: list(problem.cores_for(a)) for a in range(problem.n_actors)}
            export(
                build_assign_model(problem, list(range(problem.n_actors)), cand, start).model,
                opts.export_model,
            )
        best, used, rounds, better = improve_assignment(problem, start, opts.budget, opts, bound)
        techniques.append(f"lns:assignment(rounds={rounds},improved={better})")
    bad = assignment_violations(problem, best)
    if bad:
        raise RuntimeError(f"internal error: invalid assignment: {bad[:3]}")
    cost, report = assignment_report(problem, best, bound, opts, t0, used, techniques)
    return Assignment(best, cost, report)


def assignment_report(
    problem: AssignProblem,
    best: tuple[int, ...],
    bound: float,
    options: SolveOptions,
    t0: float,
    used: float,
    techniques: list[str],
) -> tuple[float, SolveReport]:
    """The cost of ``best`` and its report: the bound never exceeds the cost found, and
    the status is OPTIMAL only within the gap limit."""
    cost = assignment_cost(problem, best)
    bound = min(bound, cost)
    gap = relative_gap(cost, bound)
    if options.num_workers > 1:
        techniques.append(f"parallel:{options.num_workers}-workers(non-deterministic)")
    report = SolveReport(
        status=Status.OPTIMAL if gap <= options.gap_limit else Status.FEASIBLE,
        objective=cost,
        best_bound=bound,
        gap=gap,
        wall_time=time.perf_counter() - t0,
        deterministic_time=used,
        techniques=tuple(techniques),
        view=assignment_view(problem.grid, best),
    )
    return cost, report
