"""What a placement returns: its options, each candidate's scores, the kept plan, and
the comparison table (``str(PlacedResult)``). Used by ``waferflow.passes.place``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from waferflow.backend_sim import Run, SimConfig, run_plan
from waferflow.backend_sim.analytic import estimate_step
from waferflow.errors import PlanError
from waferflow.ir.plan import Plan
from waferflow.ir.summary import human_time
from waferflow.ir.target.wafer import Wafer
from waferflow.mapper.bridge import Traffic
from waferflow.mapper.cpsat import MAX_WORKERS
from waferflow.mapper.placement import DeadCores, ObjectiveWeights, SolveOptions, SolveReport
from waferflow.parallel.driver import ParallelResult
from waferflow.parallel.layout import Layout
from waferflow.workers import jobs_from_env, usable_cpus

SIMULATE_LIMIT = 250_000  # actors: above this, evaluate="auto" uses the analytic estimate
# actors: from this size on, candidates are built on several processes by default (a
# candidate then takes seconds; below, forking costs about as much as it saves)
PARALLEL_ACTORS = 20_000
FEW_DEAD = 4  # up to this many dead nodes, dead cores are obstacles by default
EVALUATIONS = ("auto", "simulate", "estimate")
BASELINES = ("strips", "snake", "work-strips")
ROUTE_ORDERS = ("xy", "yx", "balance", "none")


@dataclass(frozen=True)
class PlaceOptions:
    """Options of a placement.

    ``time_limit`` is CP-SAT deterministic seconds for the whole placement: the
    floorplans take at most half, the rank refinement what they leave (its direct model
    and its LNS at most ``mapper.lns.lns_budget`` each, and the LNS stops once rounds
    stop improving). ``num_workers = 1`` (default: CP-SAT's search workers) is
    reproducible: the same inputs and seed give byte-identical plans. ``jobs`` processes
    build and time the candidates at the same time (``None``: the usable CPUs for a plan
    of at least ``PARALLEL_ACTORS`` actors, else 1); any number gives the same result.
    ``weights`` overrides the floorplan
    objective (default: link time, no balance term); ``dead_cores`` the floorplan's
    dead-core policy (default: obstacles with up to ``FEW_DEAD`` dead nodes, else idle).
    ``evaluate`` times candidates by the event simulation, the analytic estimate, or
    (``auto``) the simulation up to ``SIMULATE_LIMIT`` actors. ``route`` routes the kept
    plan (``none``: leave routes to the simulator). ``require_fit`` refuses a plan one of
    whose ranks needs more SRAM than a whole node before any solver runs (``compile``
    sets it; ``place --compare`` still compares plans that do not fit)."""

    time_limit: float = 10.0
    seed: int = 0
    num_workers: int = 1
    jobs: int | None = None
    export_model: Path | None = None
    weights: ObjectiveWeights | None = None
    dead_cores: DeadCores | None = None
    evaluate: str = "auto"
    refine: bool = True
    baselines: tuple[str, ...] = BASELINES
    route: str = "xy"
    require_fit: bool = False  # refuse early (PlanError) when a rank overflows a whole node

    def __post_init__(self) -> None:
        if not (isinstance(self.time_limit, int | float) and math.isfinite(self.time_limit)):
            raise PlanError(f"place: time limit must be a finite number, got {self.time_limit!r}")
        if self.time_limit <= 0:
            raise PlanError(
                f"place: time limit must be positive (deterministic seconds), got {self.time_limit}"
            )
        if not 1 <= self.num_workers <= MAX_WORKERS:  # CP-SAT rejects more as invalid
            raise PlanError(
                f"place: num_workers must be from 1 to {MAX_WORKERS:,} (CP-SAT threads), got "
                f"{self.num_workers}"
            )
        if self.jobs is not None and self.jobs < 1:
            raise PlanError(f"place: jobs must be >= 1, got {self.jobs}")
        if self.evaluate not in EVALUATIONS:
            raise PlanError(
                f"place: evaluate={self.evaluate!r}; choose one of {', '.join(EVALUATIONS)}"
            )
        bad = [b for b in self.baselines if b not in BASELINES]
        if bad:
            raise PlanError(f"place: unknown baseline(s) {bad}; known: {', '.join(BASELINES)}")
        if self.route not in ROUTE_ORDERS:
            raise PlanError(f"place: route={self.route!r}; choose one of {', '.join(ROUTE_ORDERS)}")

    def workers_for(self, actors: int) -> int:
        """Processes to build and time the candidates of a plan of ``actors`` actors:
        ``jobs``, else ``$WAFERFLOW_PLACE_JOBS``, else by the plan's size."""
        if self.jobs is not None:
            return self.jobs
        env = jobs_from_env()
        if env is not None:
            return env
        return usable_cpus() if actors >= PARALLEL_ACTORS else 1

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
    run: Run | None = field(default=None, repr=False)  # the kept plan's simulation

    def simulation(self) -> Any:
        """The kept plan's ``SimResult`` from the run that scored it (None when it was
        estimated, or routed otherwise than the simulator routes)."""
        return self.run.result(self.plan) if self.run is not None else None

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

    def summary(self) -> str:
        """One line: what was kept, its step and traffic against the baselines."""
        k = self.kept
        bases = [c for c in self.candidates if not c.method.startswith("cp-sat")]
        line = f"placed: kept {self.chosen}, step {k.step_time * 1e3:.4f} ms ({k.evaluated})"
        if bases:
            bt = min(c.byte_hops for c in bases)
            bs = min(c.step_time for c in bases)
            line += (
                f"; traffic x distance {_change(k.byte_hops, bt)} the least baseline's, "
                f"step {_change(k.step_time, bs)} the fastest baseline's"
            )
        for name, rep in self.reports:
            line += f"; {name} {rep.status.value} gap {100 * rep.gap:.1f}%"
        return line

    def __str__(self) -> str:
        return format_result(self)


# --- shared helpers ------------------------------------------------------------------------


def step_time(plan: Plan, wafer: Wafer, how: str) -> tuple[float, str, Run | None]:
    """A candidate's step: simulated (with the ``Run``, whose full result is assembled
    only for the plan that is kept) or estimated. Candidates come from the assembler
    and are not verified again here; the kept plan is."""
    cfg = SimConfig(verify=False)
    if how == "simulate" or (how == "auto" and len(plan.actors) <= SIMULATE_LIMIT):
        run = run_plan(plan, wafer, cfg)
        return run.step_time, "simulated", run
    return estimate_step(plan, wafer, cfg), "estimated", None


def run_traffic(run: Run) -> Traffic:
    """``bridge.plan_traffic`` of the plan ``run`` simulated, from the links the
    simulation routed each message over (the same routes, already computed).

    On int64 arrays while the byte-hop total is at most 2**53: the float sums message
    by message (``_traffic_loop``) are then exact, and equal to it."""
    p, plan = run.prepared, run.plan
    n = len(plan.messages)  # the host's transfers come after
    if n == 0:
        return Traffic(0, 0.0, 0, 0.0)
    try:
        nbytes = np.fromiter(p.msg_bytes, np.int64, n)
    except OverflowError:
        return _traffic_loop(run)
    hops = np.fromiter(map(len, p.msg_links), np.int64, n)
    if int(nbytes.min()) < 0 or int(nbytes.max()) * max(int(hops.max()), 1) * n >= 2**63:
        return _traffic_loop(run)
    byte_hops = nbytes * hops
    total = int(byte_hops.sum())
    if total > 2**53:
        return _traffic_loop(run)
    stage = np.array([a.stage for a in plan.actors], dtype=np.int64)
    inter = stage[np.fromiter(p.msg_src, np.int64, n)] != stage[np.fromiter(p.msg_dst, np.int64, n)]
    return Traffic(
        int(nbytes.sum()), float(total), int(nbytes[inter].sum()), float(byte_hops[inter].sum())
    )


def _traffic_loop(run: Run) -> Traffic:
    """``run_traffic`` message by message (Python ints, float byte-hop sums)."""
    p, plan = run.prepared, run.plan
    actors = plan.actors
    total = inter = 0.0
    nbytes = inter_bytes = 0
    for m, links in zip(plan.messages, p.msg_links, strict=False):  # the host's come after
        b = m.bytes
        h = len(links)
        nbytes += b
        total += b * h
        if actors[m.src_actor].stage != actors[m.dst_actor].stage:
            inter_bytes += b
            inter += b * h
    return Traffic(nbytes, total, inter_bytes, inter)


def keeps_routes(route: str) -> bool:
    """Whether routing the kept plan in ``route`` order leaves every message on the
    path the simulator took by default (so the candidate's run still holds)."""
    return route in ("none", SimConfig().route_order)


def _num(x: float | None, fmt: str = ".4g") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _change(x: float, ref: float) -> str:
    """``'72.0% lower than'`` / ``'3.1% higher than'`` / ``'equal to'``: ``x`` against
    ``ref``."""
    if ref <= 0 or x == ref:
        return "equal to"
    d = 100 * (x - ref) / ref
    return f"{abs(d):.1f}% {'higher' if d > 0 else 'lower'} than"


def comparison_table(r: PlacedResult) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """The header and rows of the comparison (the kept method marked with ``*``)."""
    base = r.best_baseline()
    rank_head = "rank byte-hops" if r.kind == "parallel" else "flow byte-hops"
    head = ("method", "floorplan", rank_head, "plan byte-hops", "vs best baseline",
            "step time", "fits", "note")  # fmt: skip
    body = []
    for c in r.candidates:
        ratio = "-"
        if base is not None and base.byte_hops > 0 and not math.isnan(c.byte_hops):
            ratio = f"{c.byte_hops / base.byte_hops:.3f}"
        step = (
            "-" if math.isnan(c.step_time) else f"{human_time(c.step_time, 5)} ({c.evaluated[:3]})"
        )
        mark = " *" if c.method == r.chosen else ""
        body.append((c.method + mark, _num(c.floorplan), _num(c.rank_cost), _num(c.byte_hops),
                     ratio, step, "yes" if c.fits else "no", c.note))  # fmt: skip
    if r.floorplan_bound is not None:
        body.append(("floorplan bound", _num(r.floorplan_bound), "-", "-", "-", "-", "-", ""))
    for name, rep in r.reports:
        if name in ("ranks", "actors"):
            body.append((f"{name} bound", "-", _num(rep.best_bound), "-", "-", "-", "-", ""))
    return head, body


def format_result(r: PlacedResult) -> str:
    """The comparison table, the solver reports and the decisions' views."""
    base = r.best_baseline()
    head, body = comparison_table(r)
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = [r.title]
    for row in [head, *body]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    lines.insert(2, "  ".join("-" * w for w in widths))
    kept = r.kept
    lines.append(f"kept: {r.chosen} (* above): fastest step{' that fits' if kept.fits else ''}")
    if base is not None and base.byte_hops > 0:
        fastest = min(c.step_time for c in r.candidates if not c.method.startswith("cp-sat"))
        lines.append(
            f"kept vs the baselines: traffic x distance {_change(kept.byte_hops, base.byte_hops)} "
            f"the least ({base.method}), step time {_change(kept.step_time, fastest)} the fastest"
        )
        cps = [c for c in r.candidates if c.method.startswith("cp-sat")]
        if cps and r.chosen not in {c.method for c in cps}:
            best = min(cps, key=lambda c: (c.byte_hops, c.method))
            lines.append(
                f"best CP-SAT placement by traffic ({best.method}): traffic x distance "
                f"{_change(best.byte_hops, base.byte_hops)} the least baseline, step time "
                f"{_change(best.step_time, fastest)} the fastest; "
                + ("not kept, being slower" if best.step_time > kept.step_time
                   else "not kept: it ties with the kept one, which came first")
            )  # fmt: skip
    for name, rep in r.reports:
        lines.append(
            f"solver ({name}): {rep.status.value}, objective {rep.objective:.6g}, bound "
            f"{rep.best_bound:.6g}, gap {100 * rep.gap:.2f}%, {rep.deterministic_time:.2f} "
            f"deterministic s ({rep.wall_time:.2f} s wall); "
            f"{', '.join(dict.fromkeys(rep.techniques))}"
        )
    if r.routes is not None:
        lines.append(r.routes.summary())
    lines += [f"view: {d}" for d in r.decisions]
    lines.append(f"placement wall time: {r.wall_time:.1f} s")
    return "\n".join(lines)


__all__ = [
    "BASELINES",
    "EVALUATIONS",
    "FEW_DEAD",
    "ROUTE_ORDERS",
    "SIMULATE_LIMIT",
    "Candidate",
    "PlaceOptions",
    "PlacedResult",
    "comparison_table",
    "format_result",
    "keeps_routes",
    "step_time",
]
