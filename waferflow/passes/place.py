"""place: put a compiled plan's work on the wafer with CP-SAT, beside the baselines.

Two entry points, both returning a ``PlacedResult`` (the kept plan, every candidate's
scores, the solver reports, and which view each decision was made on; ``str()`` is the
comparison table, ``summary()`` one line):

* ``place_parallel(graph, wafer, spec)`` for dp x tp x pp plans. Candidates:

  - ``cp-sat floorplan``: the stages get rectangles from the CP-SAT floorplan
    (``waferflow.mapper``; groups = stages with their FLOPs, each needing ``dp x tp``
    cores, one rank a core; flows = the bytes the stages send each other), each cut
    down to just the cores it needs (``bridge.shrink_rects``: the objective does not
    charge for spare area) and tiled with its ranks as a block grid
    (``bridge.tile_stages``: a tensor-parallel group is a block, replicas are blocks
    side by side; block shape and anchor by the bytes x hops of the ranks' flows);
  - ``cp-sat floorplan (a x b blocks)``: the same floorplan on a grid of cells of one
    near-square tensor-parallel block each, so that every stage is a grid of compact
    blocks: the core-level objective prices only the traffic between stages and would
    happily stretch a stage into a line, although most bytes are its own collectives;
  - ``cp-sat + rank LNS``: the best candidate so far (by rank byte-hops) refined by swap
    descent and CP-SAT large-neighbourhood search on the plan's real rank-to-rank flows
    (collectives included; never worse than its start);
  - baselines: ``strip_layout`` (the compiler's default), ranks along a snake, and
    work-proportional strips (tiled like the CP-SAT floorplans).

  Floorplans are posed on the usable part of the wafer: coarse nodes holding less
  than a full node (a ragged edge; see ``bridge.usable_mask`` for the tiers) get no
  rank from them when the rest leaves room. Every
  candidate is lowered, memory-planned and timed (simulated; estimated above
  ``SIMULATE_LIMIT`` actors); the kept plan is the fastest that fits (the fastest
  overall when none fits), so it is never slower than the best baseline.
* ``place_actors(plan, wafer)`` for one-actor-per-op plans (``lower_to_plan``): the
  actors and their messages as an assignment problem (``ceil(actors / cores)`` actors a
  core when they outnumber the cores), solved by CP-SAT (direct, or LNS when large),
  against row-major, snake, greedy and the plan as given.

``place_compare(model, wafer, spec)`` is the text of ``waferflow place --compare``.
The ``place`` pass runs the first after ``parallelize`` (or the second on the naive
lowering) and stores the ``PlacedResult`` under ``place``.

The floorplan objective here has no balance term by default: every stage runs on
exactly ``dp x tp`` cores whatever its rectangle, so a larger rectangle would not make
it faster; the objective is link time (bytes x hops over the link bandwidth, spread over
the ranks' parallel links) plus the die-to-die surcharge.

This module is the orchestration: which candidates are offered, in what order, and
the result. The candidates themselves (built, timed, compared; the floorplans posed and
solved) are ``waferflow.passes.place_candidates``; the result and its table
``waferflow.passes.place_result``; one-actor-per-op placement
``waferflow.passes.place_actors``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

from waferflow.errors import PassError, PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.plan import Plan, verify_plan
from waferflow.ir.target.wafer import Topology, Wafer
from waferflow.mapper import bridge
from waferflow.mapper.local import swap_descent_dist
from waferflow.mapper.placement import DeadCores, work_strips
from waferflow.parallel.annotate import annotate_layout
from waferflow.parallel.driver import (
    ParallelResult,
    ParallelState,
    clone_graph,
    insert,
    make_result,
    parallelize,
)
from waferflow.parallel.layout import Layout, strip_layout
from waferflow.parallel.layout import snake as snake_walk
from waferflow.parallel.memory import check_fits
from waferflow.passes._parallel_ctx import load_state, store_state
from waferflow.passes.base import Pass, PassContext, option
from waferflow.passes.place_actors import place_actors
from waferflow.passes.place_candidates import Built, ParallelPlacement
from waferflow.passes.place_result import (
    BASELINES,
    Candidate,
    PlacedResult,
    PlaceOptions,
    format_result,
    keeps_routes,
)
from waferflow.passes.registry import register_pass
from waferflow.perf import gc_paused
from waferflow.progress import phase

_FLOORPLAN_SHARE = 0.5  # at most, of the time limit; the rank refinement gets the rest


def place_parallel(
    graph: Graph, wafer: Wafer, spec: Any, *, options: PlaceOptions | None = None
) -> PlacedResult:
    """Place a dp x tp x pp plan of ``graph`` (a traced step, left untouched) on ``wafer``
    (see the module docstring). Raises ``PlanError`` for a plan the model or wafer
    cannot take."""
    g = clone_graph(graph)
    state = parallelize(g, wafer, spec)
    insert(g, state)
    return place_state(g, state, options or PlaceOptions())


def place_state(graph: Graph, state: ParallelState, options: PlaceOptions) -> PlacedResult:
    """``place_parallel`` on a state after ``parallelize`` and ``insert-collectives``
    (the ``place`` pass); writes the kept layout onto the graph's regions and leaves
    it, its program, plan and memory in ``state``. A state that already holds a program
    (lowered, with its memory: the plan search's build) is not scheduled again: its
    layout is the first candidate's."""
    with gc_paused():
        return _place_state(graph, state, options)


def _place_state(graph: Graph, state: ParallelState, options: PlaceOptions) -> PlacedResult:
    t0 = time.perf_counter()
    wafer = state.wafer
    crossbar = wafer.topology in (Topology.CROSSBAR, Topology.TREE)
    run = ParallelPlacement(graph, state, options)
    if not crossbar:
        run.grid.require_connected()  # PlanError listing the islands
    with phase("placement", _planned_steps(run, crossbar), "steps") as shown:
        run.shown = shown
        return _place(graph, state, options, run, crossbar, t0)


def _planned_steps(run: ParallelPlacement, crossbar: bool) -> int:
    """How many units of work placement will do (for the progress estimate): each
    candidate built and timed, each CP-SAT call, the routes."""
    if crossbar:
        return 1
    a, b = bridge.block_shape(run.tp)
    solves = 2 + (2 if (a, b) != (1, 1) else 0)  # each solve and its candidate
    baselines = len(run.opts.baselines)
    refine = 2 if run.opts.refine else 0
    return 1 + solves + baselines + refine + (run.opts.route != "none")


def _place(
    graph: Graph, state: ParallelState, options: PlaceOptions, run: ParallelPlacement, crossbar: bool,
    t0: float,
) -> PlacedResult:  # fmt: skip
    wafer = state.wafer
    view = bridge.describe_view(wafer)
    default = strip_layout(wafer, run.pp, run.ranks, run.tp)
    run.offer("strips (default)" if default.kind == "strips" else "snake (default)", default)
    assert run.flows is not None and run.best is not None and run.best[1] is not None
    first = run.best[1].memory
    if options.require_fit and any(c.peak_bytes > wafer.sram_bytes for c in first.cores):
        check_fits(first)  # a rank that overflows a full node fits no placement: say so now
    if run.hops is not None:
        _tree_swaps(run)
    elif crossbar:
        run.notes.append(
            f"{wafer.name} is a crossbar: every pair of cores is one hop apart, so placement "
            "cannot change the traffic; the default layout is kept, no solver ran"
        )
    else:
        first_plan = run.best[1].plan
        try:
            run.problem = run.floorplan_problem(first_plan)
            assert run.candidates[0] is not None
            run.candidates[0] = replace(run.candidates[0], floorplan=run.floorplan_score(default))
        except PlanError as e:
            run.notes.append(f"cp-sat floorplan: not posed: {e}")
        run.solve(_FLOORPLAN_SHARE if options.refine else 1.0)
        _baselines(run, options, default)
        if options.refine and run.starts:
            _refine(run, options)
    run.settle()
    assert run.best is not None and run.best[1] is not None
    _, built, chosen = run.best
    annotate_layout(graph, built.layout)
    state.layout, state.program, state.actor_plan = built.layout, built.program, built.plan
    state.meta, state.records, state.memory = built.meta, built.records, built.memory
    plan = built.plan
    verify_plan(plan, wafer)
    routes = None
    kept_run = built.run if keeps_routes(options.route) else None
    if options.route != "none":
        from waferflow.passes.route import route_plan

        run.starting(f"routes ({options.route})")
        plan, routes = route_plan(plan, wafer, order=options.route)
        run.finished()
        state.actor_plan = plan
    g = run.fp_grid
    part = "" if (g.rows, g.cols) == (wafer.rows, wafer.cols) else (
        f", its usable {g.rows}x{g.cols} part at {(run.box.row, run.box.col)}"
    )  # fmt: skip
    names = {name for name, _ in run.reports}
    on = wafer.name  # the title describes the view in full
    decisions = []
    if "floorplan" in names:
        decisions.append(f"floorplan (a rectangle per stage): CP-SAT on {on}{part}")
    a, b = bridge.block_shape(run.tp)
    if f"floorplan ({a}x{b} blocks)" in names:
        decisions.append(
            f"floorplan on blocks: CP-SAT on {g.rows // a}x{g.cols // b} cells of {a}x{b} "
            f"nodes of {on} (one tensor-parallel group each)"
        )
    if len(run.candidates) > 1 and run.hops is None:
        decisions.append(
            f"tiling (ranks in each rectangle, tensor-parallel groups as blocks): on {on}"
        )
    if "ranks" in names:
        decisions.append(f"rank refinement (swap descent + CP-SAT LNS over the ranks): on {on}")
    if options.route != "none":
        decisions.append(f"routes ({options.route}): on {on}")
    if wafer.coarsen_factor > 1:
        k = wafer.coarsen_factor
        decisions.append(
            f"inside a node: its {k}x{k} cores pool compute and SRAM and are not placed one by "
            f"one; each matmul spreads over them as a {k}x{k} block grid whose operand "
            "traffic is priced (docs/simulator.md)"
        )
    decisions += run.notes
    spec = state.plan
    title = (
        f"placement of plan {spec} ({run.pp} stage(s) x {run.ranks} rank(s): dp={run.dp}, "
        f"tp={run.tp}) on {view}"
    )
    fp_rep = dict(run.reports).get("floorplan")
    return PlacedResult(
        kind="parallel",
        plan=plan,
        chosen=chosen,
        candidates=tuple(c for c in run.candidates if c is not None),
        reports=tuple(run.reports),
        decisions=tuple(decisions),
        title=title,
        floorplan_bound=fp_rep.best_bound if fp_rep is not None else None,
        layout=built.layout,
        parallel=_parallel_result(graph, state, plan, built),
        routes=routes,
        wall_time=time.perf_counter() - t0,
        run=kept_run,
    )


def _tree_swaps(run: ParallelPlacement) -> None:
    """On a switched fabric: swap descent of the ranks under switch hops (the CP-SAT
    models measure Manhattan distance); the result is a candidate like the others."""
    assert run.flows is not None and run.hops is not None
    start = run.starts[0][2] if run.starts else ()
    better = swap_descent_dist(run.flows.pairs, start, run.hops) if start else start
    if better != start:
        layout = Layout(bridge.split_cores(better, run.pp, run.ranks), "switch-hop swaps")
        run.offer("switch-hop swaps", layout)
        run.notes.append(
            f"{run.wafer.name} is a tree of switches: ranks placed by swap descent on switch "
            "hops (bytes x hops between ranks; in-network collectives run in the switches)"
        )
    else:
        run.notes.append(
            f"{run.wafer.name} is a tree of switches: no swap of ranks lowers bytes x switch "
            "hops, so the default layout is kept"
        )


def _baselines(run: ParallelPlacement, options: PlaceOptions, default: Layout) -> None:
    wafer = run.wafer
    if "snake" in options.baselines and default.kind != "snake":
        order = snake_walk(wafer)
        cores = bridge.split_cores(order[: run.pp * run.ranks], run.pp, run.ranks)
        run.offer("snake", Layout(cores, "snake"))
    if "work-strips" in options.baselines and run.problem is not None:
        try:
            rects = run.from_box(work_strips(run.problem).rects)
            run.offer("work strips", run.tiled(rects, "work strips"))
        except PlanError as e:
            run.notes.append(f"work strips: not applicable: {e}")


def _refine(run: ParallelPlacement, options: PlaceOptions) -> None:
    assert run.flows is not None
    try:
        problem = bridge.rank_problem(run.grid, run.flows)
    except PlanError as e:
        run.notes.append(f"cp-sat rank refinement: not posed: {e}")
        return
    _, idx, start = min(run.starts)
    # the placement's time limit bounds all its solvers: the refinement gets what the
    # floorplans left (they take at most _FLOORPLAN_SHARE)
    used = sum(rep.deterministic_time for _, rep in run.reports)
    share = max(0.05 * options.time_limit, options.time_limit - used) / options.time_limit
    run.starting("rank refinement (swap descent + CP-SAT LNS)", share)
    cores, rep = bridge.refine_ranks(
        problem, start, options.solve_options(share, export=not run.reports)
    )
    run.finished(rep)
    run.reports.append(("ranks", rep))
    source = run.methods[idx]
    if cores == start:  # nothing better found: the same layout, no need to rebuild it
        run.candidates.append(None)
        run.methods.append("cp-sat + rank LNS")
        run.aliases.append((len(run.candidates) - 1, idx, f"= {source} (no better move)"))
        return
    layout = Layout(bridge.split_cores(cores, run.pp, run.ranks), "cp-sat ranks")
    run.offer("cp-sat + rank LNS", layout, note=f"from {source}")


def _parallel_result(
    graph: Graph, state: ParallelState, plan: Plan, built: Built
) -> ParallelResult:
    return make_result(
        graph, state, plan=plan, memory=built.memory, layout=built.layout,
        records=built.records, model_flops=graph.total_cost().flops,
    )  # fmt: skip


# --- text --------------------------------------------------------------------------------------


def place_compare(
    model: Graph | str,
    wafer: Wafer | str,
    spec: str | None = None,
    options: PlaceOptions | None = None,
    *,
    mode: str = "train",
    batch: int | None = None,
    seq: int | None = None,
    coarsen: int = 1,
) -> str:
    """The text of ``waferflow place MODEL --wafer W [--plan P] --compare``: CP-SAT against
    every baseline and the bounds. ``model`` is a traced graph or a zoo name
    (``hf:gpt2``, ...); without ``spec`` the naive one-actor-per-op plan is placed."""
    from waferflow.ir.target import get_wafer
    from waferflow.passes.lower_plan import lower_to_plan

    w = get_wafer(wafer) if isinstance(wafer, str) else wafer
    if coarsen > 1:
        w = w.coarsen(coarsen)
    if isinstance(model, Graph):
        graph = model
    else:
        from waferflow.frontend import load_model, trace

        b = load_model(model, batch=batch, seq=seq)
        graph = trace(b.module, b.example_inputs, mode=mode, loss_fn=b.loss_fn, name=b.name)
    if spec:
        result = place_parallel(graph, w, spec, options=options)
    else:
        result = place_actors(lower_to_plan(graph, w), w, options=options)
    return str(result)


# --- the pass ------------------------------------------------------------------------------------


@register_pass
@dataclass(frozen=True)
class Place(Pass):
    """Place the plan on the wafer with CP-SAT (floorplan, tiling, LNS) vs baselines."""

    name: ClassVar[str] = "place"
    needs_wafer: ClassVar[bool] = True
    reads: ClassVar[str] = "the annotations (or, unparallelised, the ops: one actor each)"
    writes: ClassVar[str] = (
        "each op's region on=[...] (the kept placement); unparallelised, nothing "
        "(the placed actor plan is a result)"
    )
    time: float = option(10.0, "deterministic seconds for the solvers")
    seed: int = option(-1, "solver seed (-1: the run's seed, `opt --seed`)")
    workers: int = option(1, "CP-SAT workers (more than 1 is not reproducible)")
    dead_cores: str = option("auto", "auto | obstacle | idle: dead cores in floorplans")
    evaluate: str = option("auto", "auto | simulate | estimate: how candidates are timed")
    refine: bool = option(True, "refine the ranks by LNS after the floorplan")
    route: str = option("xy", "xy | yx | balance | none: route the kept plan")
    export: str = option("", "write the first CP-SAT model to this file")

    def options(self, run_seed: int = 0) -> PlaceOptions:
        policy = None if self.dead_cores == "auto" else DeadCores(self.dead_cores)
        return PlaceOptions(
            time_limit=self.time, seed=self.seed if self.seed >= 0 else run_seed,
            num_workers=self.workers,
            export_model=Path(self.export) if self.export else None, dead_cores=policy,
            evaluate=self.evaluate, refine=self.refine, route=self.route,
        )  # fmt: skip

    def check_options(self) -> None:
        if self.dead_cores not in ("auto", "obstacle", "idle"):
            raise PassError(
                f"option 'dead-cores' of pass 'place' is {self.dead_cores!r}; "
                "choose auto, obstacle or idle"
            )
        try:
            self.options()
        except PlanError as e:
            raise PassError(f"pass 'place': {e}") from None
        if self.export:  # before any work: placement would fail only when it writes it
            from waferflow.fileio import check_output

            check_output(self.export, "place{export=...}")

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        wafer = ctx.require_wafer(self.name)
        if graph.parallel is not None:
            state = load_state(ctx, graph, self.name)
            insert(graph, state)
            result = place_state(graph, state, self.options(ctx.seed))
            for key in ("schedule", "lower-collectives"):
                ctx.put_result(key, state)
            assert state.memory is not None
            ctx.put_result("plan-memory", state.memory)
            store_state(ctx, graph, state)
        else:
            from waferflow.passes.lower_plan import lower_to_plan

            result = place_actors(
                lower_to_plan(graph, wafer), wafer, options=self.options(ctx.seed)
            )
        ctx.note(self.name, f"kept {result.chosen}; {len(result.candidates)} candidates compared")
        ctx.put_result(self.name, result)
        return graph


__all__ = [
    "BASELINES",
    "Candidate",
    "Place",
    "PlaceOptions",
    "PlacedResult",
    "format_result",
    "place_actors",
    "place_compare",
    "place_parallel",
    "place_state",
]
