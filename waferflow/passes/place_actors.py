"""``place_actors``: the one-actor-per-op lowering (``lower_to_plan``) placed by a CP-SAT
assignment of actors to cores (direct for small plans, LNS above), beside the
row-major, snake and greedy baselines and the plan as given; every candidate is timed
and the fastest kept, then routed. The parallel plans' placement is ``place.py``.
"""

from __future__ import annotations

import math
import time

from waferflow.backend_sim import Run
from waferflow.errors import PlanError
from waferflow.ir.plan import Plan, verify_plan
from waferflow.ir.target.wafer import Wafer
from waferflow.mapper import bridge
from waferflow.mapper.placement import greedy, row_major, snake, solve_assignment
from waferflow.passes.place_result import (
    Candidate,
    PlacedResult,
    PlaceOptions,
    keeps_routes,
    step_time,
)
from waferflow.perf import gc_paused


def place_actors(plan: Plan, wafer: Wafer, *, options: PlaceOptions | None = None) -> PlacedResult:
    """Place a one-actor-per-op plan's actors on ``wafer`` (see the module docstring of ``place.py``).
    Each core runs its actors in graph (id) order."""
    with gc_paused():
        return _place_actors(plan, wafer, options or PlaceOptions())


def _place_actors(plan: Plan, wafer: Wafer, opts: PlaceOptions) -> PlacedResult:
    t0 = time.perf_counter()
    verify_plan(plan, wafer)  # the candidates move its actors only
    grid = bridge.placement_grid(wafer)
    problem, mem_note = bridge.actor_problem(plan, wafer, grid)
    view = bridge.describe_view(wafer)
    cands: list[Candidate] = []
    best: tuple[tuple[float, float, int], Plan, str, Run | None] | None = None

    def offer(method: str, cores: tuple[int, ...], cand_plan: Plan, note: str = "") -> None:
        nonlocal best
        traffic = bridge.plan_traffic(cand_plan, wafer)
        step, how, run = step_time(cand_plan, wafer, opts.evaluate)
        cost = bridge.assignment_cost_of(problem, cores)
        cands.append(Candidate(method, None, cost, traffic.byte_hops,
                               traffic.inter_stage_byte_hops, step, how, True, note))  # fmt: skip
        key = (step, traffic.byte_hops, len(cands))
        if best is None or key < best[0]:
            best = (key, cand_plan, method, run)

    given = tuple(a.core for a in plan.actors)
    offer(f"as given ({plan.source or 'input'})", given, plan)
    for name, fn in (("row-major", row_major), ("snake", snake), ("greedy", greedy)):
        try:
            cores = fn(problem).core_of_actor
        except PlanError as e:
            cands.append(Candidate(name, None, None, math.nan, math.nan, math.nan, "-", False,
                                   f"failed: {e}"))  # fmt: skip
            continue
        offer(name, cores, bridge.remap_plan(plan, cores, note=f"placed: {name}", source="place"))
    res = solve_assignment(problem, opts.solve_options(1.0))
    placed = bridge.remap_plan(
        plan, res.core_of_actor, note=f"placed: cp-sat ({res.report.status.value})", source="place"
    )
    offer("cp-sat assignment", res.core_of_actor, placed)
    assert best is not None
    _, kept, chosen, run = best
    verify_plan(kept, wafer)
    routes = None
    if not keeps_routes(opts.route):
        run = None  # the routed plan is another plan: simulate it when asked
    if opts.route != "none":
        from waferflow.passes.route import route_plan

        kept, routes = route_plan(kept, wafer, order=opts.route)
    decisions = [
        f"assignment (actors to cores, at most {problem.max_actors_per_core} a core): CP-SAT on {view}",
        mem_note,
    ]
    if opts.route != "none":
        decisions.append(f"routes ({opts.route}): on {view}")
    title = f"placement of {len(plan.actors)} actors of {plan.name!r} on {view}"
    return PlacedResult(
        kind="actors",
        plan=kept,
        chosen=chosen,
        candidates=tuple(cands),
        reports=(("actors", res.report),),
        decisions=tuple(decisions),
        title=title,
        routes=routes,
        wall_time=time.perf_counter() - t0,
        run=run,
    )


__all__ = ["place_actors"]
