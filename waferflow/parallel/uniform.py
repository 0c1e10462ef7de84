"""The uniform baseline that ``--plan auto`` is held against.

A *uniform* plan is Megatron-style: one dp x tp x pp x micro-batch count for the
whole model, gradients and tensor-parallel sums on a fixed ring all-reduce
(``algo=ring``), 1F1B, no recompute, ``span=auto`` and the default layout
(``strip_layout``). ``uniform_plans`` lists every one of them the model and wafer can
take: dp over the divisors of the batch, micro-batches over the divisors of each
replica's batch, tp and pp over the degrees the plan search uses
(``screen.TP_CHOICES`` / ``PP_CHOICES``) that the model takes. ``uniform_baseline``
builds each, and simulates (the event simulation, not the estimate) each one that
fits: the fastest is the best uniform plan, and its build is kept (``--plan auto``
places it as built when it is kept). A plan that the memory bound of
``waferflow.parallel.held`` already rules out is not built. Deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from waferflow.backend_sim import simulate
from waferflow.errors import PlanError
from waferflow.ir.graph import Graph
from waferflow.ir.target.wafer import Wafer
from waferflow.parallel.driver import (
    ParallelState,
    batch_size,
    clone_graph,
    finish_state,
    parallelize,
)
from waferflow.parallel.held import shortfall
from waferflow.parallel.plan_spec import CollectiveAlgo, ParallelPlan
from waferflow.perf import gc_paused

NOTE_CHARS = 90


@dataclass(frozen=True)
class UniformRow:
    """One uniform plan: built or refused, and its simulated step when it fits."""

    plan: str  # span resolved when built
    fits: bool | None = None  # None: the build was refused (``note`` says why)
    step_seconds: float | None = None  # simulated, for plans that fit
    note: str = ""


@dataclass(frozen=True)
class UniformBaseline:
    """Every uniform plan of a model on a wafer and the fastest that fits."""

    rows: tuple[UniformRow, ...]
    best: ParallelPlan | None  # span resolved; None when no uniform plan fits
    # the best plan as built (its graph and state), for placement when it is kept
    state: tuple[Graph, ParallelState] | None = field(default=None, repr=False, compare=False)

    @property
    def best_row(self) -> UniformRow | None:
        fitting = [r for r in self.rows if r.step_seconds is not None]
        return min(fitting, key=lambda r: r.step_seconds or 0.0) if fitting else None

    @property
    def best_seconds(self) -> float | None:
        row = self.best_row
        return None if row is None else row.step_seconds

    def summary(self) -> str:
        fitting = sum(1 for r in self.rows if r.step_seconds is not None)
        head = f"uniform plans: {len(self.rows)} tried, {fitting} fit"
        row = self.best_row
        if row is None or row.step_seconds is None:
            return head + "; none fits"
        return f"{head}; best {row.plan} ({row.step_seconds * 1e3:.4g} ms/step simulated)"


def uniform_plans(graph: Graph, wafer: Wafer, max_ranks: int | None = None) -> list[ParallelPlan]:
    """Every uniform plan (module docstring) with at most ``max_ranks`` (default: the
    wafer's alive cores) ranks, in a fixed order."""
    from waferflow.parallel.screen import PP_CHOICES, TP_CHOICES, divisors, takes

    limit = wafer.num_alive if max_ranks is None else min(max_ranks, wafer.num_alive)
    batch = batch_size(graph, ParallelPlan())
    tps = [t for t in TP_CHOICES if t <= limit and takes(graph, wafer, ParallelPlan(tp=t))]
    pps = [p for p in PP_CHOICES if p <= limit and takes(graph, wafer, ParallelPlan(pp=p))]
    return [
        ParallelPlan(dp=dp, tp=tp, pp=pp, microbatches=m, algo=CollectiveAlgo.RING)
        for dp in divisors(batch)
        for pp in pps
        for tp in tps
        if dp * tp * pp <= limit
        for m in divisors(batch // dp)
    ]


def uniform_baseline(
    graph: Graph,
    wafer: Wafer,
    *,
    max_ranks: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> UniformBaseline:
    """Build every uniform plan and simulate the ones that fit (module docstring)."""
    plans = uniform_plans(graph, wafer, max_ranks)
    rows: list[UniformRow] = []
    best: tuple[float, int, ParallelPlan] | None = None
    kept: tuple[Graph, ParallelState] | None = None
    for i, plan in enumerate(plans):
        if progress is not None:
            progress(f"uniform plans: {plan} ({i + 1} of {len(plans)})")
        g = clone_graph(graph)
        try:
            with gc_paused():
                st = parallelize(g, wafer, plan)
                short = shortfall(g, st)
                if short is None:
                    finish_state(g, st, check_memory=False)
        except PlanError as e:
            first = str(e).splitlines()[0] if str(e) else ""
            rows.append(UniformRow(str(plan), note=first[:NOTE_CHARS]))
            continue
        if short is not None:
            rows.append(UniformRow(str(st.plan), fits=False, note="does not fit (memory bound)"))
            continue
        assert st.memory is not None and st.actor_plan is not None
        if not st.memory.fits:
            rows.append(UniformRow(str(st.plan), fits=False, note="does not fit"))
            continue
        step = simulate(st.actor_plan, st.wafer).step_time
        rows.append(UniformRow(str(st.plan), fits=True, step_seconds=step))
        if best is None or step < best[0]:  # ties: the first in grid order
            best, kept = (step, i, st.plan), (g, st)
    return UniformBaseline(tuple(rows), None if best is None else best[2], kept)


__all__ = ["UniformBaseline", "UniformRow", "uniform_baseline", "uniform_plans"]
