"""The candidates of one parallel-plan placement: offered, built, timed, the best kept.

``ParallelPlacement`` holds everything a placement of a dp x tp x pp plan knows about
its candidate layouts: each is scored by rank byte-hops when offered, then lowered,
memory-planned and timed (here or on worker processes, ``settle``), and the fastest
that fits is kept with its build. It also poses and solves the stage floorplans
(``solve``) whose tilings are candidates. ``waferflow.passes.place`` decides which
candidates to offer and turns the kept one into a ``PlacedResult``; this module is
separate because the build-and-compare machinery is one piece with its own state,
apart from that orchestration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from waferflow.backend_sim import Run
from waferflow.errors import PassError, PlanError
from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Graph
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import Wafer
from waferflow.mapper import bridge
from waferflow.mapper.placement import (
    DeadCores,
    FloorplanProblem,
    Flow,
    Group,
    ObjectiveWeights,
    Rect,
    SolveReport,
    evaluate_floorplan,
    solve_floorplan,
)
from waferflow.parallel.build import Program, retarget
from waferflow.parallel.driver import ParallelState, lower, memory, schedule
from waferflow.parallel.layout import Layout
from waferflow.parallel.memory import MemoryReport
from waferflow.passes.place_result import (
    FEW_DEAD,
    Candidate,
    PlaceOptions,
    run_traffic,
    step_time,
)
from waferflow.progress import Phase
from waferflow.workers import fork_map


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


@dataclass
class Built:
    """A candidate's lowered state (kept only for the best so far)."""

    layout: Layout
    program: Any
    plan: Plan
    meta: Any
    records: list[Any]
    memory: MemoryReport
    run: Run | None = None  # its simulation, when it was simulated


@dataclass
class Pending:
    """A candidate offered and not yet built: its layout and what is known already."""

    idx: int
    method: str
    layout: Layout
    note: str
    floorplan: float | None
    rank_cost: float = math.inf


@dataclass(frozen=True)
class Figures:
    """What building and timing a candidate tells (small: a worker sends it back)."""

    step: float
    how: str
    fits: bool
    byte_hops: float
    inter_stage_byte_hops: float

    def key(self, idx: int) -> tuple[int, float, float, int]:
        """The order of preference: fits, then faster, then less traffic, then earlier."""
        return (0 if self.fits else 1, self.step, self.byte_hops, idx)


class ParallelPlacement:
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
        # floorplans are posed on the usable part: a ragged edge of weak nodes is cut off
        self.box = bridge.usable_box(self.usable)
        self.fp_grid = bridge.crop_grid(self.grid, self.box)
        self.candidates: list[Candidate | None] = []  # None until settled
        self.methods: list[str] = []  # each candidate's method, known at once
        self.pending: list[Pending] = []  # offered, not yet built and timed
        # (index, index of the same layout, note): a candidate that repeats another
        self.aliases: list[tuple[int, int, str]] = []
        self.jobs = 1  # processes that build and time candidates (PlaceOptions.workers_for)
        self.best: tuple[tuple[int, float, float, int], Built | None, str] | None = None
        self.flows: bridge.RankFlows | None = None
        self.problem: FloorplanProblem | None = None  # stage level: scores every candidate
        self.reports: list[tuple[str, SolveReport]] = []
        self.starts: list[tuple[float, int, tuple[int, ...]]] = []  # (rank cost, index, cores)
        self.notes: list[str] = []
        self.seen: dict[tuple[tuple[int, ...], ...], int] = {}  # layout -> first candidate
        # a switched fabric: distances are switch hops, not Manhattan
        self.hops = bridge.hop_matrix(self.wafer) if self.wafer.tree is not None else None
        # the program is scheduled once (or taken as the state brings it, from the plan
        # search) and retargeted to every other layout
        self.program: Program | None = state.program
        self.ready: Built | None = None
        s = state
        lowered = s.layout is not None and s.actor_plan is not None and s.meta is not None
        if s.program is not None and lowered and s.memory is not None:
            self.ready = Built(s.layout, s.program, s.actor_plan, s.meta, list(s.records),
                                s.memory)  # fmt: skip
        self.shown: Phase | None = None  # progress, when shown (waferflow.progress)

    def starting(self, what: str, share: float | None = None) -> None:
        """Progress: ``what`` starts (a CP-SAT call with ``share`` of the budget)."""
        if self.shown is None:
            return
        budget = (
            f", CP-SAT with {share:.0%} of the {self.opts.time_limit:g} s deterministic budget"
            if share is not None
            else ""
        )
        best = ""
        if self.best is not None:
            kept = self.candidates[self.best[0][3]]
            assert kept is not None
            best = f"; best so far {kept.method}, {kept.step_time * 1e3:.4g} ms/step"
        self.shown.status(f"{what}{budget}{best}")

    def finished(self, report: SolveReport | None = None) -> None:
        """Progress: the unit of work started last is done."""
        if self.shown is None:
            return
        if report is None:
            self.shown.advance(1)
        else:
            self.shown.advance(1, status=f"objective {report.objective:,.6g}, bound "
                               f"{report.best_bound:,.6g} ({report.status.value})")  # fmt: skip

    def build(self, layout: Layout) -> Built:
        s = self.state
        if self.ready is not None and self.ready.layout.cores == layout.cores:
            built, self.ready = self.ready, None
            return replace(built, layout=layout)
        if self.program is None:
            self.program = schedule(self.g, s, layout)
        else:
            layout.check(self.wafer, self.pp, self.ranks, widths=s.stages.widths)
            s.layout, s.program = layout, retarget(self.program, layout)
        plan = lower(s, verify=False)  # the kept plan is verified once, at the end
        mem = memory(s, check=False)
        return Built(layout, s.program, plan, s.meta, list(s.records), mem)

    def offer(self, method: str, layout: Layout, note: str = "") -> None:
        """A candidate: scored by rank byte-hops now, built and timed by ``settle``
        (the first one at once: its plan gives the rank flows every other is scored
        by). A layout offered before is the same candidate under another name."""
        idx = len(self.candidates)
        self.candidates.append(None)
        self.methods.append(method)
        same = self.seen.get(layout.cores)
        if same is not None:  # lowering and timing it again would give the same figures
            again = "; ".join(x for x in (note, f"= {self.methods[same]} (same layout)") if x)
            self.aliases.append((idx, same, again))
            return
        self.seen[layout.cores] = idx
        cols = self.wafer.cols
        flat = bridge.flat_cores(layout.cores)
        weak = sum(1 for c in flat if not self.usable[c // cols, c % cols])
        if weak:
            note = "; ".join(
                x for x in (note, f"{weak} rank(s) on partial nodes the floorplan leaves out") if x
            )
        todo = Pending(idx, method, layout, note, self.floorplan_score(layout))
        if self.flows is None:
            figures, built = self.evaluate(todo)
            self.flows = bridge.rank_flows(built.plan, layout.cores, self.wafer.num_cores)
            self.jobs = self.opts.workers_for(len(built.plan.actors))
            self.record(todo, figures, built)
            self.finished()
        else:
            self.pending.append(todo)
        assert self.flows is not None
        todo.rank_cost = bridge.layout_cost(self.flows, flat, cols, self.hops)
        if self.candidates[idx] is not None:
            self.candidates[idx] = replace(self.candidates[idx], rank_cost=todo.rank_cost)
        if not weak:
            self.starts.append((todo.rank_cost, idx, flat))

    def evaluate(self, todo: Pending) -> tuple[Figures, Built]:
        """Build ``todo``'s layout and time it (here, or in a worker process)."""
        self.starting(f"{todo.method}: build and time")
        built = self.build(todo.layout)
        step, how, built.run = step_time(built.plan, self.wafer, self.opts.evaluate)
        if built.run is not None:  # priced on the routes the simulation took
            traffic = run_traffic(built.run)
        else:
            traffic = bridge.plan_traffic(built.plan, self.wafer)
        figures = Figures(step, how, built.memory.fits, traffic.byte_hops,
                           traffic.inter_stage_byte_hops)  # fmt: skip
        return figures, built

    def record(self, todo: Pending, f: Figures, built: Built | None) -> None:
        """Enter an evaluated candidate; ``built`` (None: evaluated by a worker) is
        kept when it is the best so far."""
        self.candidates[todo.idx] = Candidate(
            todo.method, todo.floorplan, todo.rank_cost, f.byte_hops, f.inter_stage_byte_hops,
            f.step, f.how, f.fits, todo.note,
        )  # fmt: skip
        key = f.key(todo.idx)
        if self.best is None or key < self.best[0]:
            self.best = (key, built, todo.method)  # type: ignore[assignment]

    @staticmethod
    def likeliest(t: Pending) -> tuple[float, int]:
        """The order in which candidates are expected to win: least rank byte-hops."""
        return (t.rank_cost, t.idx)

    def settle(self) -> None:
        """Build and time every pending candidate, the likeliest winners (least rank
        byte-hops) here and the rest on ``jobs - 1`` worker processes at the same
        time (``waferflow.workers``); the figures are the same as one after the other.
        Keeps the best; a worker's winner is built again here (its plan stays there)."""
        todo, self.pending = self.pending, []
        if todo:
            ranked = sorted(todo, key=self.likeliest)
            jobs = max(1, min(self.jobs, len(ranked)))
            share = -(-len(ranked) // jobs)
            mine, rest = ranked[:share], ranked[share:]
            theirs = [rest[i :: jobs - 1] for i in range(jobs - 1)] if jobs > 1 else []

            def run(t: Pending) -> Figures:  # recorded here; a worker's record is lost
                figures, built = self.evaluate(t)
                self.record(t, figures, built)
                self.finished()
                return figures

            _, there = fork_map(mine, theirs, run)
            if theirs and self.shown is not None:
                self.shown.advance(len(rest))
            for ts, fs in zip(theirs, there, strict=True):  # the best is the least key:
                for t, f in zip(ts, fs, strict=True):  # the order of records is free
                    self.record(t, f, None)
        for idx, same, note in self.aliases:
            first = self.candidates[same]
            assert first is not None
            self.candidates[idx] = replace(first, method=self.methods[idx], note=note)
        self.aliases.clear()
        assert self.best is not None
        key, built, method = self.best
        if built is None:  # a worker's: build it here (the same figures, by construction)
            todo_best = next(t for t in todo if t.idx == key[3])
            figures, again_built = self.evaluate(todo_best)
            if figures.key(todo_best.idx) != key:
                raise PassError(
                    f"internal: candidate {method!r} timed {figures.step} s here but "
                    "differently in a worker process"
                )
            self.best = (key, again_built, method)

    def floorplan_score(self, layout: Layout) -> float | None:
        """The stage-level floorplan objective of the stages' bounding boxes."""
        if self.problem is None:
            return None
        boxes = [self.to_box(r) for r in _boxes(layout.cores, self.wafer.cols)]
        if any(b is None for b in boxes):
            return None  # a stage outside the usable part
        cost = evaluate_floorplan(self.problem, tuple(b for b in boxes if b is not None))
        return cost.objective if cost.feasible else None

    def to_box(self, r: Rect) -> Rect | None:
        """``r`` in the floorplan grid's coordinates (None if it leaves it)."""
        b = self.box
        if not (b.row <= r.row and r.row + r.height <= b.row + b.height):
            return None
        if not (b.col <= r.col and r.col + r.width <= b.col + b.width):
            return None
        return Rect(r.row - b.row, r.col - b.col, r.height, r.width)

    def from_box(self, rects: tuple[Rect, ...], a: int = 1, b: int = 1) -> tuple[Rect, ...]:
        """Floorplan rectangles (of ``a x b`` cells) back in wafer coordinates."""
        o = self.box
        return tuple(
            Rect(o.row + r.row * a, o.col + r.col * b, r.height * a, r.width * b) for r in rects
        )

    def floorplan_problem(self, stage_plan: Plan) -> FloorplanProblem:
        """Groups are the stages, each needing ``dp x tp`` cores; flows are the bytes the
        stages send each other."""
        assert self.flows is not None
        work = [0.0] * self.pp
        for a in stage_plan.actors:
            work[a.stage] += a.flops
        sram = self.wafer.sram_bytes
        groups = tuple(Group(f"stage{s}", work[s], self.ranks * sram) for s in range(self.pp))
        flows = tuple(Flow(a, b, w) for a, b, w in self.flows.stage_flows)
        return FloorplanProblem(
            self.fp_grid, groups, flows, self.wafer.peak(_dominant_dtype(stage_plan)), sram,
            _weights(self.wafer, self.ranks, self.opts.weights),
            _policy(self.opts, len(self.fp_grid.dead)),
        )  # fmt: skip

    def tiled(self, rects: tuple[Rect, ...], kind: str) -> Layout:
        return Layout(bridge.tile_stages(rects, self.dp, self.tp, self.usable, self.flows), kind)

    def solve(self, share: float) -> None:
        """CP-SAT floorplans of the stages (``share`` of the time limit), tiled: one on
        the cores, and one on cells of one tensor-parallel block each (so every stage is
        a grid of compact blocks, which the core-level objective cannot see: it prices
        only the traffic between stages)."""
        if self.problem is None:
            return
        a, b = bridge.block_shape(self.tp)
        blocks = (a, b) != (1, 1)
        part = share / 2 if blocks else share
        self.starting("cp-sat floorplan (a rectangle per stage)", part)
        try:
            fp = solve_floorplan(self.problem, self.opts.solve_options(part))
        except PlanError as e:  # e.g. no rectangles fit: the baselines still stand
            self.notes.append(f"cp-sat floorplan: {e}")
            return
        self.finished(fp.report)
        self.reports.append(("floorplan", fp.report))
        try:
            rects = self.from_box(bridge.shrink_rects(self.problem, fp.rects))
            self.offer("cp-sat floorplan", self.tiled(rects, "cp-sat floorplan"))
        except PlanError as e:
            self.notes.append(f"cp-sat floorplan: tiling failed: {e}")
        if not blocks:
            return
        method = f"cp-sat floorplan ({a}x{b} blocks)"
        try:
            o = self.box
            inside = self.usable[o.row : o.row + o.height, o.col : o.col + o.width]
            cells = bridge.block_problem(self.problem, inside, a, b, self.dp)
        except PlanError as e:
            self.notes.append(f"{method}: not posed: {e}")
            return
        self.starting(method, part)
        try:
            fpb = solve_floorplan(cells, self.opts.solve_options(part, export=False))
        except PlanError as e:
            self.notes.append(f"{method}: {e}")
            return
        self.finished(fpb.report)
        self.reports.append((f"floorplan ({a}x{b} blocks)", fpb.report))
        rects = self.from_box(bridge.shrink_rects(cells, fpb.rects), a, b)
        try:
            self.offer(method, self.tiled(rects, method))
        except PlanError as e:
            self.notes.append(f"{method}: tiling failed: {e}")


__all__ = ["Built", "Figures", "ParallelPlacement", "Pending"]
