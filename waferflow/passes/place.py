"""place: put a compiled plan's work on the wafer with CP-SAT, beside the baselines.

Two entry points, both returning a ``PlacedResult`` (the kept plan, every candidate's
scores, the solver reports, and which view each decision was made on; ``str()`` is the
comparison table):

* ``place_parallel(graph, wafer, spec)`` for dp x tp x pp plans. The stages get
  rectangles from the CP-SAT floorplan (``waferflow.mapper``; groups = stages with
  their FLOPs, each needing ``dp x tp`` cores, one rank a core; flows = the bytes the
  stages send each other); each rectangle is tiled with its ranks as a block grid
  (``mapper.bridge.tile_stages``: a tensor-parallel group is a block, replicas are
  blocks side by side); then the ranks are refined by swap descent and
  large-neighbourhood search on the plan's real rank-to-rank flows (collectives
  included). The baselines are laid out the same way: ``strip_layout`` (the default),
  ranks along a snake, and work-proportional strips. Every candidate is lowered,
  memory-planned and timed (simulated, or estimated on big plans); the kept plan is the
  fastest that fits (so never slower than the best baseline).
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
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from waferflow.backend_sim import estimate, simulate
from waferflow.errors import PassError, PlanError
from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Graph
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import Topology, Wafer
from waferflow.mapper import bridge
from waferflow.mapper.placement import (
    DeadCores,
    FloorplanProblem,
    Flow,
    Group,
    ObjectiveWeights,
    Rect,
    SolveOptions,
    SolveReport,
    evaluate_floorplan,
    greedy,
    row_major,
    snake,
    solve_assignment,
    solve_floorplan,
    work_strips,
)
from waferflow.parallel.driver import (
    ParallelResult,
    ParallelState,
    clone_graph,
    lower,
    memory,
    parallelize,
    schedule,
)
from waferflow.parallel.insert import insert_collectives
from waferflow.parallel.layout import Layout, strip_layout
from waferflow.parallel.layout import snake as snake_walk
from waferflow.parallel.memory import MemoryReport
from waferflow.passes.base import Pass, PassContext, option
from waferflow.passes.registry import register_pass

SIMULATE_LIMIT = 40_000  # actors: above this, evaluate="auto" uses the analytic estimate
FEW_DEAD = 4  # up to this many dead nodes, dead cores are obstacles by default
EVALUATIONS = ("auto", "simulate", "estimate")
BASELINES = ("strips", "snake", "work-strips")
ROUTE_ORDERS = ("xy", "yx", "balance", "none")
_FLOORPLAN_SHARE = 0.5  # of the time limit; the rank refinement gets the rest


@dataclass(frozen=True)
class PlaceOptions:
    """Options of a placement.

    ``time_limit`` is CP-SAT deterministic seconds for the whole placement (floorplan
    and refinement share it). ``num_workers = 1`` (default) is reproducible: the same
    inputs and seed give byte-identical plans. ``weights`` overrides the floorplan
    objective (default: link time, no balance term); ``dead_cores`` the floorplan's
    dead-core policy (default: obstacles with up to ``FEW_DEAD`` dead nodes, else idle).
    ``evaluate`` times candidates by the event simulation, the analytic estimate, or
    (``auto``) the simulation up to ``SIMULATE_LIMIT`` actors. ``route`` routes the kept
    plan (``none``: leave routes to the simulator)."""

    time_limit: float = 10.0
    seed: int = 0
    num_workers: int = 1
    export_model: Path | None = None
    weights: ObjectiveWeights | None = None
    dead_cores: DeadCores | None = None
    evaluate: str = "auto"
    refine: bool = True
    baselines: tuple[str, ...] = BASELINES
    route: str = "xy"

    def __post_init__(self) -> None:
        if not (isinstance(self.time_limit, int | float) and math.isfinite(self.time_limit)):
            raise PlanError(f"place: time limit must be a finite number, got {self.time_limit!r}")
        if self.time_limit <= 0:
            raise PlanError(
                f"place: time limit must be positive (deterministic seconds), got {self.time_limit}"
            )
        if self.num_workers < 1:
            raise PlanError(f"place: num_workers must be >= 1, got {self.num_workers}")
        if self.evaluate not in EVALUATIONS:
            raise PlanError(
                f"place: evaluate={self.evaluate!r}; choose one of {', '.join(EVALUATIONS)}"
            )
        bad = [b for b in self.baselines if b not in BASELINES]
        if bad:
            raise PlanError(f"place: unknown baseline(s) {bad}; known: {', '.join(BASELINES)}")
        if self.route not in ROUTE_ORDERS:
            raise PlanError(f"place: route={self.route!r}; choose one of {', '.join(ROUTE_ORDERS)}")

    def solve_options(self, share: float, export: bool = True) -> SolveOptions:
        return SolveOptions(
            time_limit=self.time_limit * share,
            seed=self.seed,
            num_workers=self.num_workers,
            export_model=self.export_model if export else None,
        )


@dataclass(frozen=True)
class Candidate:
    """One placement and its scores. ``floorplan``: the floorplan objective of the
    stages' bounding boxes (None when they overlap or are not placements);
    ``rank_cost``: bytes x hops of the rank (or actor) flows, the refinement's
    objective; ``byte_hops``: of every message of the lowered plan, routes included."""

    method: str
    floorplan: float | None
    rank_cost: float | None
    byte_hops: float
    inter_stage_byte_hops: float
    step_time: float  # seconds
    evaluated: str  # "simulated" | "estimated"
    fits: bool
    note: str = ""


@dataclass(frozen=True)
class PlacedResult:
    """The kept plan and how every candidate scored (``str()``: the comparison)."""

    kind: str  # "parallel" or "actors"
    plan: Plan
    chosen: str
    candidates: tuple[Candidate, ...]
    reports: tuple[tuple[str, SolveReport], ...]  # ("floorplan" | "ranks" | "actors", report)
    decisions: tuple[str, ...]
    title: str
    floorplan_bound: float | None = None
    layout: Layout | None = None
    parallel: ParallelResult | None = field(default=None, repr=False)
    routes: Any = None  # LinkLoadReport of the kept plan (passes.route), if routed
    wall_time: float = 0.0

    def candidate(self, method: str) -> Candidate:
        for c in self.candidates:
            if c.method == method:
                return c
        raise KeyError(method)

    @property
    def kept(self) -> Candidate:
        return self.candidate(self.chosen)

    def best_baseline(self) -> Candidate | None:
        """The baseline with the least traffic x distance (plan byte-hops)."""
        bases = [c for c in self.candidates if not c.method.startswith("cp-sat")]
        return min(bases, key=lambda c: (c.byte_hops, c.method)) if bases else None

    def __str__(self) -> str:
        return format_result(self)


# --- shared helpers ------------------------------------------------------------------------


def _step_time(plan: Plan, wafer: Wafer, how: str) -> tuple[float, str]:
    if how == "simulate" or (how == "auto" and len(plan.actors) <= SIMULATE_LIMIT):
        return simulate(plan, wafer).step_time, "simulated"
    return estimate(plan, wafer).step_time, "estimated"


def _dominant_dtype(plan: Plan) -> DType:
    flops: dict[DType, int] = {}
    for a in plan.actors:
        flops[a.dtype] = flops.get(a.dtype, 0) + a.flops
    return max(flops, key=lambda d: (flops[d], d.value)) if flops else DType.F32


def _weights(wafer: Wafer, ranks: int, given: ObjectiveWeights | None) -> ObjectiveWeights:
    if given is not None:
        return given
    d2d = wafer.d2d_link.bandwidth if wafer.d2d_link is not None else None
    w = ObjectiveWeights.seconds(wafer.link.bandwidth, d2d, parallel_links=max(1, ranks))
    return ObjectiveWeights(balance=0.0, traffic=w.traffic, d2d=w.d2d)


def _policy(options: PlaceOptions, dead: int) -> DeadCores:
    if options.dead_cores is not None:
        return options.dead_cores
    return DeadCores.OBSTACLE if dead <= FEW_DEAD else DeadCores.IDLE


def _boxes(cores: tuple[tuple[int, ...], ...], cols: int) -> tuple[Rect, ...]:
    out = []
    for stage in cores:
        rs = [c // cols for c in stage]
        cs = [c % cols for c in stage]
        out.append(Rect(min(rs), min(cs), max(rs) - min(rs) + 1, max(cs) - min(cs) + 1))
    return tuple(out)


# --- parallel plans ----------------------------------------------------------------------------


@dataclass
class _Built:
    """A candidate's lowered state (kept only for the best so far)."""

    layout: Layout
    program: Any
    plan: Plan
    meta: Any
    records: list[Any]
    memory: MemoryReport


class _Parallel:
    """One placement of a parallel plan: builds and scores candidates, keeps the best."""

    def __init__(self, graph: Graph, state: ParallelState, options: PlaceOptions) -> None:
        self.g = graph
        self.state = state
        self.wafer = state.wafer
        self.opts = options
        spec = state.plan
        self.pp = spec.pp
        self.ranks = spec.ranks_per_stage
        self.tp = spec.mesh().dims[-1]
        self.dp = self.ranks // self.tp
        self.usable = bridge.usable_mask(self.wafer, need=self.pp * self.ranks)
        self.grid = bridge.grid_from_mask(self.wafer, self.usable)
        self.candidates: list[Candidate] = []
        self.best: tuple[tuple[int, float, float, int], _Built, str] | None = None
        self.flows: bridge.RankFlows | None = None
        self.problem: FloorplanProblem | None = None
        self.reports: list[tuple[str, SolveReport]] = []
        self.starts: list[tuple[float, int, tuple[int, ...]]] = []  # (rank cost, index, cores)

    def build(self, layout: Layout) -> _Built:
        schedule(self.g, self.state, layout)
        plan = lower(self.state)
        mem = memory(self.state, check=False)
        s = self.state
        return _Built(layout, s.program, plan, s.meta, list(s.records), mem)

    def offer(self, method: str, layout: Layout, note: str = "") -> None:
        built = self.build(layout)
        if self.flows is None:
            self.flows = bridge.rank_flows(built.plan, layout.cores)
        cols = self.wafer.cols
        flat = bridge.flat_cores(layout.cores)
        rank_cost = bridge.layout_cost(self.flows, flat, cols)
        fp = None
        if self.problem is not None:
            cost = evaluate_floorplan(self.problem, _boxes(layout.cores, cols))
            fp = cost.objective if cost.feasible else None
        traffic = bridge.plan_traffic(built.plan, self.wafer)
        step, how = _step_time(built.plan, self.wafer, self.opts.evaluate)
        fits = built.memory.fits
        idx = len(self.candidates)
        self.candidates.append(
            Candidate(method, fp, rank_cost, traffic.byte_hops, traffic.inter_stage_byte_hops,
                      step, how, fits, note)
        )  # fmt: skip
        if all(self.usable[c // cols, c % cols] for c in flat):
            self.starts.append((rank_cost, idx, flat))
        key = (0 if fits else 1, step, traffic.byte_hops, idx)
        if self.best is None or key < self.best[0]:
            self.best = (key, built, method)

    def floorplan_problem(self, stage_plan: Plan) -> FloorplanProblem:
        assert self.flows is not None
        work = [0.0] * self.pp
        for a in stage_plan.actors:
            work[a.stage] += a.flops
        sram = self.wafer.sram_bytes
        groups = tuple(Group(f"stage{s}", work[s], self.ranks * sram) for s in range(self.pp))
        flows = tuple(Flow(a, b, w) for a, b, w in self.flows.stage_flows)
        core_flops = self.wafer.peak(_dominant_dtype(stage_plan))
        return FloorplanProblem(
            self.grid, groups, flows, core_flops, sram,
            _weights(self.wafer, self.ranks, self.opts.weights),
            _policy(self.opts, len(self.grid.dead)),
        )  # fmt: skip

    def tiled(self, rects: tuple[Rect, ...], kind: str) -> Layout:
        cores = bridge.tile_stages(rects, self.dp, self.tp, self.usable, self.flows)
        return Layout(cores, kind)


def place_parallel(
    graph: Graph, wafer: Wafer, spec: Any, *, options: PlaceOptions | None = None
) -> PlacedResult:
    """Place a dp x tp x pp plan of ``graph`` (a traced step, left untouched) on ``wafer``
    (see the module docstring). Raises ``PlanError`` for a plan the model or wafer
    cannot take."""
    g = clone_graph(graph)
    state = parallelize(g, wafer, spec)
    state.collectives = insert_collectives(g, state.sharding, state.stages, state.plan)
    return place_state(g, state, options or PlaceOptions())


def place_state(graph: Graph, state: ParallelState, options: PlaceOptions) -> PlacedResult:
    """``place_parallel`` on a state after ``parallelize`` and ``insert-collectives``
    (the ``place`` pass); leaves the kept layout, program, plan and memory in ``state``."""
    t0 = time.perf_counter()
    wafer = state.wafer
    if wafer.topology is Topology.CROSSBAR:
        raise PlanError(
            f"wafer {wafer.name!r} is a crossbar: every pair of cores is one hop apart, so "
            "placement cannot change the traffic; compile without the place step"
        )
    run = _Parallel(graph, state, options)
    view = bridge.describe_view(wafer)
    default = strip_layout(wafer, run.pp, run.ranks, run.tp)
    run.offer("strips (default)" if default.kind == "strips" else "snake (default)", default)
    assert run.flows is not None and run.best is not None
    first_plan = run.best[1].plan
    notes: list[str] = []
    try:
        run.problem = run.floorplan_problem(first_plan)
    except PlanError as e:
        notes.append(f"cp-sat floorplan: not posed: {e}")
    if run.problem is not None:  # score the default now that the problem exists
        c0 = run.candidates[0]
        cost = evaluate_floorplan(run.problem, _boxes(default.cores, wafer.cols))
        run.candidates[0] = replace(c0, floorplan=cost.objective if cost.feasible else None)
        share = _FLOORPLAN_SHARE if options.refine else 1.0
        fp = solve_floorplan(run.problem, options.solve_options(share))
        run.reports.append(("floorplan", fp.report))
        try:
            run.offer("cp-sat floorplan", run.tiled(fp.rects, "cp-sat floorplan"))
        except PlanError as e:
            notes.append(f"cp-sat floorplan: tiling failed: {e}")
    _baselines(run, options, default, notes)
    if options.refine and run.starts:
        _refine(run, options, notes)
    assert run.best is not None
    _, built, chosen = run.best
    state.layout, state.program, state.actor_plan = built.layout, built.program, built.plan
    state.meta, state.records, state.memory = built.meta, built.records, built.memory
    plan = built.plan
    routes = None
    if options.route != "none":
        from waferflow.passes.route import route_plan

        plan, routes = route_plan(plan, wafer, order=options.route)
        state.actor_plan = plan
    decisions = [
        f"floorplan (a rectangle per stage): CP-SAT on {view}",
        f"tiling (ranks in each rectangle, tensor-parallel groups as blocks): on {view}",
    ]
    if options.refine:
        decisions.append(f"rank refinement (swap descent + CP-SAT LNS over the ranks): on {view}")
    if options.route != "none":
        decisions.append(f"routes ({options.route}): on {view}")
    if wafer.coarsen_factor > 1:
        decisions.append(
            f"inside a node: its {wafer.coarsen_factor}x{wafer.coarsen_factor} cores pool compute "
            "and SRAM (the coarse model); they are not placed one by one"
        )
    decisions += notes
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
        candidates=tuple(run.candidates),
        reports=tuple(run.reports),
        decisions=tuple(decisions),
        title=title,
        floorplan_bound=fp_rep.best_bound if fp_rep is not None else None,
        layout=built.layout,
        parallel=_parallel_result(graph, state, plan, built),
        routes=routes,
        wall_time=time.perf_counter() - t0,
    )


def _baselines(run: _Parallel, options: PlaceOptions, default: Layout, notes: list[str]) -> None:
    wafer = run.wafer
    if "snake" in options.baselines and default.kind != "snake":
        order = snake_walk(wafer)
        cores = bridge.split_cores(order[: run.pp * run.ranks], run.pp, run.ranks)
        run.offer("snake", Layout(cores, "snake"))
    if "work-strips" in options.baselines and run.problem is not None:
        try:
            rects = work_strips(run.problem).rects
            run.offer("work strips", run.tiled(rects, "work strips"))
        except PlanError as e:
            notes.append(f"work strips: not applicable: {e}")


def _refine(run: _Parallel, options: PlaceOptions, notes: list[str]) -> None:
    assert run.flows is not None
    try:
        problem = bridge.rank_problem(run.grid, run.flows)
    except PlanError as e:
        notes.append(f"cp-sat rank refinement: not posed: {e}")
        return
    _, idx, start = min(run.starts)
    share = 1.0 - _FLOORPLAN_SHARE if run.problem is not None else 1.0
    cores, rep = bridge.refine_ranks(
        problem, start, options.solve_options(share, export=run.problem is None)
    )
    run.reports.append(("ranks", rep))
    source = run.candidates[idx].method
    layout = Layout(bridge.split_cores(cores, run.pp, run.ranks), "cp-sat ranks")
    run.offer("cp-sat + rank LNS", layout, note=f"from {source}")


def _parallel_result(
    graph: Graph, state: ParallelState, plan: Plan, built: _Built
) -> ParallelResult:
    from waferflow.parallel.driver import _op_name  # the driver's naming of ops

    stage_of_op = {
        _op_name(op, i): s
        for i, op in enumerate(graph.ops)
        if (s := state.stages.stage_of.get(op)) is not None
    }
    return ParallelResult(
        plan=plan,
        memory=built.memory,
        spec=state.plan,
        layout=built.layout,
        graph=graph,
        stage_of_op=stage_of_op,
        shardings={k: str(v) for k, v in state.sharding.values.items()},
        collectives=tuple(built.records),
        diagnostics=tuple(state.diagnostics),
        model_flops=graph.total_cost().flops,
    )


# --- one actor per op ---------------------------------------------------------------------------


def place_actors(plan: Plan, wafer: Wafer, *, options: PlaceOptions | None = None) -> PlacedResult:
    """Place a one-actor-per-op plan's actors on ``wafer`` (see the module docstring).
    Each core runs its actors in graph (id) order."""
    opts = options or PlaceOptions()
    t0 = time.perf_counter()
    grid = bridge.placement_grid(wafer)
    problem, mem_note = bridge.actor_problem(plan, wafer, grid)
    view = bridge.describe_view(wafer)
    cands: list[Candidate] = []
    best: tuple[tuple[float, float, int], Plan, str] | None = None

    def offer(method: str, cores: tuple[int, ...], cand_plan: Plan, note: str = "") -> None:
        nonlocal best
        traffic = bridge.plan_traffic(cand_plan, wafer)
        step, how = _step_time(cand_plan, wafer, opts.evaluate)
        cost = bridge.assignment_cost_of(problem, cores)
        cands.append(Candidate(method, None, cost, traffic.byte_hops,
                               traffic.inter_stage_byte_hops, step, how, True, note))  # fmt: skip
        key = (step, traffic.byte_hops, len(cands))
        if best is None or key < best[0]:
            best = (key, cand_plan, method)

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
    _, kept, chosen = best
    routes = None
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
    )


# --- text --------------------------------------------------------------------------------------


def _num(x: float | None, fmt: str = ".4g") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def format_result(r: PlacedResult) -> str:
    """The comparison table, the solver reports and the decisions' views."""
    base = r.best_baseline()
    rank_head = "rank byte-hops" if r.kind == "parallel" else "flow byte-hops"
    head = ("method", "floorplan", rank_head, "plan byte-hops", "vs best baseline",
            "step time", "fits", "note")  # fmt: skip
    body = []
    for c in r.candidates:
        ratio = "-"
        if base is not None and base.byte_hops > 0 and not math.isnan(c.byte_hops):
            ratio = f"{c.byte_hops / base.byte_hops:.3f}"
        step = "-" if math.isnan(c.step_time) else f"{c.step_time * 1e3:.4f} ms ({c.evaluated[:3]})"
        mark = " *" if c.method == r.chosen else ""
        body.append((c.method + mark, _num(c.floorplan), _num(c.rank_cost), _num(c.byte_hops),
                     ratio, step, "yes" if c.fits else "no", c.note))  # fmt: skip
    if r.floorplan_bound is not None:
        body.append(("floorplan bound", _num(r.floorplan_bound), "-", "-", "-", "-", "-", ""))
    for name, rep in r.reports:
        if name in ("ranks", "actors"):
            body.append((f"{name} bound", "-", _num(rep.best_bound), "-", "-", "-", "-", ""))
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = [r.title]
    for row in [head, *body]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    lines.insert(2, "  ".join("-" * w for w in widths))
    kept = r.kept
    lines.append(f"kept: {r.chosen} (* above): fastest step{' that fits' if kept.fits else ''}")
    if base is not None and base.byte_hops > 0:
        lines.append(
            f"traffic x distance vs the best baseline ({base.method}): "
            f"{100 * (1 - kept.byte_hops / base.byte_hops):+.1f}% lower; step time "
            f"{100 * (1 - kept.step_time / min(c.step_time for c in r.candidates if not c.method.startswith('cp-sat'))):+.1f}% lower than the fastest baseline"
        )
    for name, rep in r.reports:
        lines.append(
            f"solver ({name}): {rep.status.value}, objective {rep.objective:.6g}, bound "
            f"{rep.best_bound:.6g}, gap {100 * rep.gap:.2f}%, {rep.deterministic_time:.2f} "
            f"deterministic s ({rep.wall_time:.2f} s wall); {', '.join(rep.techniques)}"
        )
    if r.routes is not None:
        lines.append(r.routes.summary())
    lines += [f"view: {d}" for d in r.decisions]
    lines.append(f"placement wall time: {r.wall_time:.1f} s")
    return "\n".join(lines)


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
    time: float = option(10.0, "deterministic seconds for the solvers")
    seed: int = option(0, "solver seed")
    workers: int = option(1, "CP-SAT workers (more than 1 is not reproducible)")
    dead_cores: str = option("auto", "auto | obstacle | idle: dead cores in floorplans")
    evaluate: str = option("auto", "auto | simulate | estimate: how candidates are timed")
    refine: bool = option(True, "refine the ranks by LNS after the floorplan")
    route: str = option("xy", "xy | yx | balance | none: route the kept plan")
    export: str = option("", "write the first CP-SAT model to this file")

    def options(self) -> PlaceOptions:
        policy = None if self.dead_cores == "auto" else DeadCores(self.dead_cores)
        return PlaceOptions(
            time_limit=self.time, seed=self.seed, num_workers=self.workers,
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

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        wafer = ctx.require_wafer(self.name)
        state = ctx.find_result("parallelize", ParallelState)
        if state is not None:
            if state.collectives is None:
                state.collectives = insert_collectives(
                    graph, state.sharding, state.stages, state.plan
                )
            result = place_state(graph, state, self.options())
            for key in ("schedule", "lower-collectives"):
                ctx.put_result(key, state)
            assert state.memory is not None
            ctx.put_result("plan-memory", state.memory)
        else:
            from waferflow.passes.lower_plan import lower_to_plan

            result = place_actors(lower_to_plan(graph, wafer), wafer, options=self.options())
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
