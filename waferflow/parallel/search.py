"""``--plan auto``: search the parallel plans of a traced step on a wafer.

Two stages. A **rough screen** scores every candidate (dp x tp x pp x micro-batches x
recompute, schedule 1f1b, span auto) in closed form, without building anything, and
only orders them. An **exact check** then builds the best-ordered candidates
(``build_parallel_plan``), takes their real memory report and the analytic step time
(``backend_sim.analytic.estimate`` on the view the plan runs on) and keeps the
fitting one with the smallest step. The screen never decides alone: a plan is kept
only when its build fits. Before a build, a lower bound on the plan's memory from its
shardings (``waferflow.parallel.held``) rules out candidates that cannot fit; they
count as tried, as their builds did, so the builds and the kept plan are unchanged.

The rough screen (the candidates, the step's figures, the closed-form model of a rank's
time and bytes) is ``waferflow.parallel.screen``; this module is the search around it:
the exact check, the table, and holding the result against the uniform plans.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from waferflow.backend_sim import simulate
from waferflow.backend_sim.analytic import estimate, estimate_step
from waferflow.backend_sim.config import SimConfig
from waferflow.errors import PlanError
from waferflow.ir.graph import Graph, Phase
from waferflow.ir.plan import Plan
from waferflow.ir.target.wafer import Wafer
from waferflow.parallel.driver import (
    ParallelState,
    batch_size,
    build_parallel_plan,
    clone_graph,
    finish_state,
    parallelize,
)
from waferflow.parallel.held import shortfall
from waferflow.parallel.memory import MemoryReport, fmt_bytes
from waferflow.parallel.plan_spec import ParallelPlan
from waferflow.parallel.screen import ModelFigures, SearchRow, candidates, model_figures, rough_row
from waferflow.parallel.span import SpanChoice, choose_span
from waferflow.perf import gc_paused
from waferflow.progress import phase

if TYPE_CHECKING:
    from waferflow.parallel.uniform import UniformBaseline

NOTE_CHARS = 90  # a build error is shortened to this in the table

Progress = Callable[[str], None]


@dataclass(frozen=True)
class PlanSearch:
    """What ``search_plans`` kept, and every candidate it weighed."""

    best: ParallelPlan  # span resolved (``ParallelResult.spec``)
    rows: tuple[SearchRow, ...]  # every screened candidate, in screen order
    screened: int
    built: int  # builds attempted (a build that raised has a note and built=False)
    ruled_out: int = 0  # candidates that did not fit by the lower bound, not built
    # the kept plan as built (its graph and state): placement starts from it
    state: tuple[Graph, ParallelState] | None = field(default=None, repr=False, compare=False)
    # with ``uniform=True``: every uniform plan simulated, and the kept plan's simulated
    # step (default layout); the kept plan is never slower than the best uniform one
    uniform: UniformBaseline | None = None
    simulated_seconds: float | None = None
    uniform_kept: bool = False  # the best uniform plan was faster, and is kept
    searched_seconds: float | None = None  # the search's own plan, simulated (held only)

    @property
    def vs_uniform(self) -> float | None:
        """The kept plan's simulated step over the best uniform plan's (<= 1)."""
        best = None if self.uniform is None else self.uniform.best_seconds
        if best is None or self.simulated_seconds is None:
            return None
        return self.simulated_seconds / best

    @property
    def kept(self) -> SearchRow:
        return next(r for r in self.rows if r.kept)

    def table(self, *, all_rows: bool = False) -> str:
        """The built candidates (or every screened one) as aligned text; ``*`` marks
        the kept plan."""
        shown = [r for r in self.rows if all_rows or r.built or r.ruled_out]
        head = ["", "plan", "ranks", "span", "rough ms", "rough mem", "need", "have", "ms/step",
                "note"]  # fmt: skip
        lines = [head]
        for r in shown:
            need = "-" if r.peak_bytes is None else fmt_bytes(r.peak_bytes)
            need = f">= {need}" if r.ruled_out else need
            step = "-" if r.step_seconds is None else f"{r.step_seconds * 1e3:.4g}"
            note = r.note or ("fits" if r.fits else "does not fit" if r.built else "not built")
            lines.append(["*" if r.kept else "", r.plan, str(r.ranks), str(r.span),
                          f"{r.rough_seconds * 1e3:.4g}", fmt_bytes(r.rough_bytes), need,
                          fmt_bytes(r.capacity_bytes), step, note])  # fmt: skip
        widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
        out = ["  ".join(x.ljust(w) for x, w in zip(row, widths, strict=True)).rstrip()
               for row in lines]  # fmt: skip
        if len(shown) < len(self.rows):
            out.append(f"({len(self.rows) - len(shown)} more screened, not built)")
        return "\n".join(out)

    def summary(self) -> str:
        k = self.kept
        step = "" if k.step_seconds is None else f" (estimated {k.step_seconds * 1e3:.4g} ms/step)"
        text = f"plan auto: kept {self.best}{step} of {self.screened} screened, {self.built} built"
        if self.ruled_out:
            text += f", {self.ruled_out} ruled out unbuilt (memory bound)"
        if self.uniform is not None:
            text += f"\n{self.uniform.summary()}"
        ratio = self.vs_uniform
        if ratio is not None and self.simulated_seconds is not None:
            text += (
                f"\nplan auto vs the best uniform plan (both simulated, default layout): "
                f"{self.simulated_seconds * 1e3:.4g} ms, {ratio:.3f}x"
            )
        return text


def search_plans(
    graph: Graph,
    wafer: Wafer,
    *,
    top: int = 6,
    max_ranks: int | None = None,
    progress: Progress | None = None,
    uniform: bool = False,
) -> PlanSearch:
    """The fastest plan of ``graph`` on ``wafer`` that fits, among the candidates the
    rough screen orders first (see the module docstring). Deterministic.

    With ``uniform``, the search is also held against every uniform plan
    (``waferflow.parallel.uniform``): its plan and the best uniform plan are both
    simulated on the default layout and the faster is kept, so that the result is never
    slower than the best uniform plan (``PlanSearch.vs_uniform`` <= 1).

    Raises ``PlanError`` when no candidate builds and fits, naming the closest ones'
    needed vs available bytes."""
    if not uniform:
        return _search(graph, wafer, top=top, max_ranks=max_ranks, progress=progress)
    from waferflow.parallel.uniform import uniform_baseline

    try:
        found: PlanSearch | None = _search(graph, wafer, top=top, max_ranks=max_ranks,
                                           progress=progress)  # fmt: skip
    except PlanError as refusal:
        base = uniform_baseline(graph, wafer, max_ranks=max_ranks, progress=progress)
        if base.best is None:  # neither fits: the search's refusal says why
            raise refusal from None
        found = None
    else:
        base = uniform_baseline(graph, wafer, max_ranks=max_ranks, progress=progress)
    return hold_against_uniform(graph, wafer, found, base)


def hold_against_uniform(
    graph: Graph, wafer: Wafer, found: PlanSearch | None, base: UniformBaseline
) -> PlanSearch:
    """``found`` (a search's result; None when it fitted nothing) held against the
    uniform plans ``base``: the searched plan is simulated on the default layout and
    kept when it is at least as fast as the best uniform plan, else that is kept."""
    if found is None:
        return _keep_uniform(graph, wafer, base, None, None)
    plan, view, _ = _built(graph, wafer, found.best, found.state)
    own = simulate(plan, view).step_time
    found = replace(found, uniform=base, simulated_seconds=own, searched_seconds=own)
    best = base.best_seconds
    if best is None or own <= best:
        return found
    return _keep_uniform(graph, wafer, base, found, own)


def _keep_uniform(
    graph: Graph, wafer: Wafer, base: UniformBaseline, found: PlanSearch | None,
    own: float | None,
) -> PlanSearch:  # fmt: skip
    """The best uniform plan, kept because it simulates faster than the search's plan
    (which stays in the table, unkept) or because no searched plan fits."""
    assert base.best is not None and base.best_seconds is not None
    plan, view, mem = _built(graph, wafer, base.best, base.state)
    tight = max(mem.cores, key=lambda c: (c.overflow, -c.core))
    row = replace(
        rough_row(base.best, choose_span(wafer, base.best), model_figures(graph)),
        built=True, fits=True, peak_bytes=tight.peak_bytes, capacity_bytes=tight.capacity_bytes,
        step_seconds=estimate(plan, view).step_time, note="best uniform plan", kept=True,
    )  # fmt: skip
    rows = () if found is None else tuple(replace(r, kept=False) for r in found.rows)
    return PlanSearch(
        best=base.best, rows=(*rows, row), screened=len(rows) + 1,
        built=(0 if found is None else found.built) + 1, uniform=base,
        simulated_seconds=base.best_seconds, uniform_kept=True, searched_seconds=own,
        ruled_out=0 if found is None else found.ruled_out, state=base.state,
    )  # fmt: skip


def _built(
    graph: Graph, wafer: Wafer, plan: ParallelPlan, state: tuple[Graph, ParallelState] | None
) -> tuple[Plan, Wafer, MemoryReport]:
    """``plan``'s actor plan, view and memory: as the search or the uniform baseline
    built it (``state``, when it kept it), else built now."""
    if state is not None:
        st = state[1]
        if st.actor_plan is not None and st.memory is not None:
            return st.actor_plan, st.wafer, st.memory
    res = build_parallel_plan(graph, wafer, plan, check_memory=False)
    assert res.wafer is not None
    return res.plan, res.wafer, res.memory


def _search(
    graph: Graph,
    wafer: Wafer,
    *,
    top: int,
    max_ranks: int | None,
    progress: Progress | None,
) -> PlanSearch:
    if top < 1:
        raise PlanError(f"plan search: top={top} must be >= 1")
    figs = model_figures(graph)
    if figs.state_bytes > wafer.total_sram():
        raise PlanError(
            f"plan auto: @{graph.name}'s weights, gradients and optimizer state alone take "
            f"{fmt_bytes(figs.state_bytes)}, more than all the SRAM of {wafer.name!r} "
            f"({fmt_bytes(wafer.total_sram())}); no plan can fit: use a bigger wafer, --dtype bf16, "
            "--mode infer, or a smaller model"
        )
    limit = wafer.num_alive if max_ranks is None else min(max_ranks, wafer.num_alive)
    spans: dict[int, SpanChoice] = {}
    rows: list[SearchRow] = []
    with phase("plan search: screen", unit="candidates") as shown:
        for plan in candidates(graph, wafer, figs.batch, limit):
            if plan.num_ranks not in spans:
                spans[plan.num_ranks] = choose_span(wafer, plan)
            rows.append(rough_row(plan, spans[plan.num_ranks], figs))
            shown.advance(1)
    if not rows:
        raise PlanError(
            f"plan search: no candidate plan of @{graph.name} has at most {limit} ranks on "
            f"{wafer.name!r}; use a bigger wafer or a finer view (a smaller --coarsen)"
        )
    rows.sort(key=lambda r: (not r.rough_fits, r.rough_seconds, r.ranks, r.plan))

    best: tuple[float, int, str, int, ParallelPlan] | None = None
    kept: tuple[Graph, ParallelState] | None = None
    good = tries = builds = ruled = 0
    # at most 3 x top tries: the count shown is that bound (it stops at `top` that fit).
    # A candidate the memory bound rules out counts as a try, as its build did before the
    # bound: the candidates built and kept are the same as without it
    with phase("plan search: build", min(len(rows), 3 * top), "plans") as shown:
        for i, row in enumerate(rows):
            if good >= top or tries >= 3 * top:
                break
            tries += 1
            shown.status(f"building {row.plan}; {good} of {top} wanted fit so far")
            if progress is not None:
                progress(f"plan auto: building {row.plan} ({tries} of at most {3 * top})")
            g = clone_graph(graph)
            try:
                with gc_paused():
                    st = parallelize(g, wafer, row.plan)
                    short = shortfall(g, st)
                    if short is None:
                        builds += 1
                        # not verified here: the plan kept is, by placement (the assembler's
                        # output is checked by the tests; verifying each candidate cost 10%
                        # of the search)
                        finish_state(g, st, check_memory=False, verify=False)
            except PlanError as e:
                rows[i] = replace(row, note=_shorten(str(e)))
                shown.advance(1)
                continue
            if short is not None:
                ruled += 1
                rows[i] = replace(
                    row, fits=False, peak_bytes=short.need_bytes, ruled_out=True,
                    capacity_bytes=short.capacity_bytes,
                    note=f"does not fit (stage {short.stage}'s values for the backward alone)",
                )  # fmt: skip
                shown.advance(1)
                continue
            assert st.memory is not None and st.actor_plan is not None
            tight = max(st.memory.cores, key=lambda c: (c.overflow, -c.core))
            done = replace(row, built=True, fits=st.memory.fits, peak_bytes=tight.peak_bytes,
                           capacity_bytes=tight.capacity_bytes)  # fmt: skip
            if done.fits:
                step = estimate_step(st.actor_plan, st.wafer, SimConfig(verify=False))
                done = replace(done, step_seconds=step)
                good += 1
                key = (step, row.ranks, row.plan, i, st.plan)
                if best is None or key[:3] < best[:3]:
                    best, kept = key, (g, st)
            rows[i] = done
            shown.advance(1)
    if best is None:
        raise PlanError(_refusal(graph, wafer, rows))
    rows[best[3]] = replace(rows[best[3]], kept=True)
    return PlanSearch(best=best[4], rows=tuple(rows), screened=len(rows), built=builds,
                      ruled_out=ruled, state=kept)  # fmt: skip


def is_auto(plan: str | None) -> bool:
    """Whether ``plan`` asks for the search (``--plan auto``)."""
    return plan is not None and plan.strip().lower() == "auto"


def resolve_plan(
    graph: Graph, wafer: Wafer, plan: str | None, *, uniform: bool = False
) -> tuple[str | None, PlanSearch | None]:
    """``plan`` as given, or for ``"auto"`` the searched plan (spelt out) and its search
    (held against the uniform plans with ``uniform``: ``search_plans``)."""
    if not is_auto(plan):
        return plan, None
    search = search_plans(graph, wafer, uniform=uniform)
    return str(search.best), search


def _shorten(text: str) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= NOTE_CHARS else line[: NOTE_CHARS - 3] + "..."


def _refusal(graph: Graph, wafer: Wafer, rows: list[SearchRow]) -> str:
    built = sorted(
        (r for r in rows if r.built or r.ruled_out),
        key=lambda r: (r.peak_bytes or 0) - r.capacity_bytes,
    )
    if built:
        closest = [f"{r.plan} needs {'at least ' if r.ruled_out else ''}"
                   f"{fmt_bytes(r.peak_bytes or 0)} per core, has "
                   f"{fmt_bytes(r.capacity_bytes)} (short by "
                   f"{fmt_bytes((r.peak_bytes or 0) - r.capacity_bytes)})"
                   for r in built[:3]]  # fmt: skip
        what = f"none of the {len(built)} plans tried fits in SRAM; the closest: "
    else:
        near = sorted(rows, key=lambda r: (r.rough_bytes - r.capacity_bytes, r.plan))[:3]
        closest = [f"{r.plan} needs ~{fmt_bytes(r.rough_bytes)} per core, has "
                   f"{fmt_bytes(r.capacity_bytes)} (short by "
                   f"~{fmt_bytes(r.rough_bytes - r.capacity_bytes)})" for r in near]  # fmt: skip
        first = next((r.note for r in rows if r.note), "")
        what = f"no candidate plan could be built ({first}); roughly the closest: "
    training = any(op.phase is Phase.OPT for op in graph.ops)
    zero = ""
    if training and batch_size(graph, ParallelPlan()) < 2:
        zero = (
            " (ZeRO, zero=1..3, shards the model state over data-parallel replicas, and a "
            "batch of 1 allows none: a batch of 2 or more lets the search try it)"
        )
    return (
        f"plan auto: no plan of @{graph.name} fits wafer {wafer.name!r}: {what}"
        + "; ".join(closest)
        + zero
        + ". Try a bigger wafer, a smaller batch or sequence length, or recompute=true "
        "with an explicit plan of more ranks"
    )


__all__ = ["ModelFigures", "PlanSearch", "SearchRow", "candidates", "hold_against_uniform",
           "is_auto", "model_figures", "resolve_plan", "rough_row", "search_plans"]  # fmt: skip
