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

The rough model, per rank of a candidate (F = the step's FLOPs, P = peak FLOP/s of
one node of the plan's view, i.e. of one rank's span x span block):

* time = compute + communication. Compute: max(F * (4/3 with recompute: the forward
  runs twice) / (dp * tp * pp) / P, the rank's share of the matmul operand bytes
  moved inside its node, ``backend_sim.costs.node_network_ps``) * (m + pp - 1) / m
  (the 1F1B pipeline bubble).
  Communication, over the view's links (bandwidth ``B``, latency ``L``, one hop
  between neighbouring ranks), with ``H`` the bytes of the residual stream (the most
  common size among the values the backward reads: ``b x s x h`` in a transformer):
  dp's ring all-reduce of the rank's share of the model's gradients G,
  2 (dp - 1) / dp * G / (tp * pp) / B + 2 (dp - 1) L; tp's Megatron all-reduces,
  one forward and one backward per pair of weighted matmuls of the stage (K / pp in
  all), each 2 (tp - 1) / tp * H / dp / B + 2 (tp - 1) m L; pp's stage-boundary
  sends, 2 (m + pp - 1) (H / (dp m) / B + L).
  With ``overlap`` (the default) dp's reduction hides behind the backward: only what
  exceeds 2/3 of the compute time counts. tp and pp collectives are not overlapped.
  With ``zero``, dp's traffic and the model state follow the ZeRO stage
  (``waferflow.parallel.zero.zero_rough``). A mixture-of-experts model is also
  screened with ``ep`` degrees (``waferflow.parallel.experts``): ep ranks count as
  data parallel (dp above is dp x ep) and add their all-to-alls; the experts' state
  is divided by ep.
* bytes = (weights + gradients + optimizer state of the whole model) / (tp * pp)
  * 1.5 when pp > 1 (stages are not even: the first / last hold embeddings and head)
  + saved / (dp * tp * pp * m) * in-flight + inputs / dp, where ``saved`` is the
  bytes of forward values read by the backward (what a micro-batch keeps between
  its forward and backward), and in-flight is min(pp, m) micro-batches (1F1B keeps
  at most pp on the first stage) or 1 with recompute (one micro-batch's activations
  are rebuilt at a time; the small stage inputs kept per micro-batch are ignored).
  Without a backward (inference) nothing is kept for a backward: ``saved`` is
  ``INFER_LIVE`` times the largest value the forward makes (what one op reads and
  writes at a time, with a margin), and ``H`` comes from every forward value.
  Dividing all activations by tp is optimistic (Megatron replicates layer norms and
  residuals over tp).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from waferflow.backend_sim import simulate
from waferflow.backend_sim.analytic import estimate, estimate_step
from waferflow.backend_sim.config import SimConfig
from waferflow.errors import PlanError
from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Graph, Phase
from waferflow.ir.opkind import MATMUL_LIKE, OpKind
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
from waferflow.parallel.experts import (
    NO_EXPERTS,
    ExpertFigures,
    ep_choices,
    ep_seconds,
    expert_figures,
    expert_state_share,
)
from waferflow.parallel.held import shortfall
from waferflow.parallel.memory import MemoryReport, fmt_bytes
from waferflow.parallel.plan_spec import ParallelPlan
from waferflow.parallel.span import SpanChoice, choose_span
from waferflow.parallel.stages import param_of
from waferflow.parallel.zero import zero_rough, zero_stages
from waferflow.perf import gc_paused
from waferflow.progress import phase

if TYPE_CHECKING:
    from waferflow.parallel.uniform import UniformBaseline

TP_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16)
PP_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
IMBALANCE = 1.5  # the fullest stage's share of the model state, over an even share (pp > 1)
BACKWARD_SHARE = 2 / 3  # of a training step's FLOPs: what a dp reduction can hide behind
RECOMPUTE_FLOPS = 4 / 3  # forward (1) + backward (2) + the forward again (1), over 3
INFER_LIVE = 4  # inference: values live at once, in units of the largest
NOTE_CHARS = 90  # a build error is shortened to this in the table

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ModelFigures:
    """What the rough screen needs of the step, summed once over the graph."""

    flops: int
    dtype: DType  # the dtype doing most of the FLOPs
    state_bytes: int  # weights + gradients + optimizer state
    saved_bytes: int  # forward values the backward reads
    grad_bytes: int
    hidden_bytes: int  # the residual stream (the commonest size of a saved value)
    weighted_matmuls: int  # forward matmuls reading a parameter
    input_bytes: int
    batch: int
    matmul_read_bytes: int = 0  # operand bytes of every matmul (moved inside a node)
    opt_bytes: int = 0  # optimizer state (AdamW's moments), part of state_bytes
    experts: ExpertFigures = NO_EXPERTS  # mixture of experts (parallel.experts)


@dataclass(frozen=True)
class SearchRow:
    """One candidate: its rough figures, then (when built) the exact ones."""

    plan: str
    ranks: int
    span: int
    rough_seconds: float
    rough_bytes: int
    rough_fits: bool
    built: bool = False
    fits: bool | None = None
    peak_bytes: int | None = None  # of the tightest core (largest need - have)
    capacity_bytes: int = 0  # the tightest core's once built, else a view node's SRAM
    step_seconds: float | None = None  # analytic estimate, for fitting builds
    note: str = ""
    kept: bool = False
    # ruled out before building: its values kept for the backward alone exceed a core
    # (``waferflow.parallel.held``); peak_bytes is then that lower bound
    ruled_out: bool = False


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


def model_figures(graph: Graph) -> ModelFigures:
    """Sum the step's FLOPs and bytes by role (see the module docstring)."""
    by_dtype: dict[DType, int] = {}
    for op in graph.ops:
        if op.results and op.cost.flops:
            d = op.results[0].type.dtype
            by_dtype[d] = by_dtype.get(d, 0) + op.cost.flops
    dtype = min(by_dtype, key=lambda d: (-by_dtype[d], d.value)) if by_dtype else DType.F32
    opt_ops = [op for op in graph.ops if op.phase is Phase.OPT]  # updates are plain ops
    opt_state = {id(v): v.type.nbytes for op in opt_ops for v in op.operands
                 if v.producer is not None and v.producer.kind is OpKind.BUFFER}  # fmt: skip
    trained = {id(v): v.type.nbytes for op in opt_ops for v in op.operands
               if v.producer is not None and v.producer.kind is OpKind.PARAM}  # fmt: skip
    weights = sum(
        op.results[0].type.nbytes
        for op in graph.ops
        if op.kind in (OpKind.PARAM, OpKind.BUFFER) and id(op.results[0]) not in opt_state
    )
    inputs = sum(r.type.nbytes for op in graph.ops if op.kind is OpKind.INPUT for r in op.results)
    saved: dict[int, int] = {}
    for op in graph.ops:
        if op.phase is Phase.BWD:
            for v in op.operands:
                p = v.producer
                if p is not None and p.phase is Phase.FWD and not p.is_source:
                    saved[id(v)] = v.type.nbytes
    if not opt_ops:  # inference: what a forward holds at once is bounded by all it makes
        saved = {id(r): r.type.nbytes for op in graph.ops if not op.is_source for r in op.results}
    counts: dict[int, int] = {}
    for n in saved.values():
        counts[n] = counts.get(n, 0) + 1
    hidden = max(counts, key=lambda n: (counts[n], n)) if counts else 0
    matmuls = sum(
        1
        for op in graph.ops
        if op.phase is Phase.FWD
        and op.kind in MATMUL_LIKE
        and any(param_of(v) is not None for v in op.operands)
    )
    return ModelFigures(
        flops=graph.total_cost().flops,
        dtype=dtype,
        state_bytes=weights + sum(trained.values()) + sum(opt_state.values()),
        # inference keeps no activations for a backward: a few values live at once
        saved_bytes=sum(saved.values()) if opt_ops else INFER_LIVE * max(saved.values(), default=0),
        grad_bytes=sum(trained.values()),
        hidden_bytes=hidden,
        weighted_matmuls=matmuls,
        input_bytes=inputs,
        batch=batch_size(graph, ParallelPlan()),
        matmul_read_bytes=sum(op.cost.bytes_read for op in graph.ops if op.kind in MATMUL_LIKE),
        opt_bytes=sum(opt_state.values()),
        experts=expert_figures(graph),
    )


def candidates(graph: Graph, wafer: Wafer, batch: int, limit: int) -> list[ParallelPlan]:
    """Every plan the search scores, in a fixed order; tp and pp degrees the model
    cannot take (a probe on one rank raises) are left out."""
    tps = [t for t in TP_CHOICES if t <= limit and _takes(graph, wafer, ParallelPlan(tp=t))]
    pps = [p for p in PP_CHOICES if p <= limit and _takes(graph, wafer, ParallelPlan(pp=p))]
    out = []
    training = any(op.phase is Phase.BWD for op in graph.ops)
    recomputes = (False, True) if training else (False,)  # nothing to recompute in inference
    experts = expert_figures(graph)
    for dp, ep in ((d, e) for d in _divisors(batch) for e in ep_choices(experts, batch // d)):
        ms = _divisors(batch // (dp * ep))
        zeros = zero_stages(dp, training) if ep == 1 else (0,)
        for pp in pps:
            chosen = _microbatches(ms, pp)
            for tp in tps:
                if dp * ep * tp * pp > limit:
                    continue
                for m in chosen:
                    for rc in recomputes:
                        for z in zeros:
                            out.append(ParallelPlan(dp=dp, tp=tp, pp=pp, microbatches=m,
                                                    recompute=rc, zero=z, ep=ep))  # fmt: skip
    return out


def rough_row(plan: ParallelPlan, span: SpanChoice, figs: ModelFigures) -> SearchRow:
    """The closed-form time and bytes of one rank of ``plan`` (module docstring)."""
    dp, tp, pp, m = plan.dp, plan.tp, plan.pp, plan.microbatches
    data = dp * plan.ep  # ep ranks are data parallel for everything but the experts
    ranks = plan.num_ranks
    flops = figs.flops * (RECOMPUTE_FLOPS if plan.recompute else 1.0)
    bw, lat = span.view.link.bandwidth, span.view.link.latency
    compute = flops / ranks / span.view.peak(figs.dtype)
    k = span.view.coarsen_factor  # matmul operands cross a node (backend_sim.costs)
    node = figs.matmul_read_bytes * (RECOMPUTE_FLOPS if plan.recompute else 1.0) / ranks
    node *= (k - 1) / (2 * k * bw)
    seconds = max(compute, node) * (m + pp - 1) / m
    zr = None
    if dp > 1 and plan.zero:
        weights = figs.state_bytes - figs.grad_bytes - figs.opt_bytes
        zr = zero_rough(plan, weights, figs.grad_bytes, figs.opt_bytes, figs.weighted_matmuls,
                        bw, lat)  # fmt: skip
        hidden = BACKWARD_SHARE * compute if plan.overlap else 0.0
        seconds += zr.exposed + max(0.0, zr.hideable - hidden)
    elif data > 1:
        reduce = 2 * (data - 1) / data * figs.grad_bytes / (tp * pp) / bw + 2 * (data - 1) * lat
        if plan.overlap:  # gradients are reduced during the backward (2/3 of the compute)
            reduce = max(0.0, reduce - BACKWARD_SHARE * compute)
        seconds += reduce
    if tp > 1:
        per = 2 * (tp - 1) / tp * figs.hidden_bytes / data / bw + 2 * (tp - 1) * m * lat
        seconds += figs.weighted_matmuls / pp * per
    if pp > 1:
        seconds += 2 * (m + pp - 1) * (figs.hidden_bytes / (data * m) / bw + lat)
    seconds += ep_seconds(plan, figs.experts, bw, lat)
    inflight = 1 if plan.recompute else min(pp, m)
    state = zr.state_bytes if zr is not None else figs.state_bytes / (tp * pp)
    weights = figs.state_bytes - figs.grad_bytes - figs.opt_bytes
    state *= 1 - expert_state_share(plan, figs.experts, weights)
    nbytes = (
        state * (IMBALANCE if pp > 1 else 1.0)
        + figs.saved_bytes / (data * tp * pp * m) * inflight
        + figs.input_bytes / data
    )
    have = span.view.sram_bytes
    return SearchRow(
        plan=str(plan), ranks=ranks, span=span.span, rough_seconds=seconds,
        rough_bytes=math.ceil(nbytes), rough_fits=nbytes <= have, capacity_bytes=have,
    )  # fmt: skip


def _takes(graph: Graph, wafer: Wafer, plan: ParallelPlan) -> bool:
    """Whether sharding and staging ``plan`` raise (tp not dividing heads, pp > layers)."""
    try:
        parallelize(clone_graph(graph), wafer, plan)
    except PlanError:
        return False
    return True


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _microbatches(ms: list[int], pp: int) -> list[int]:
    """At most two micro-batch counts: the smallest >= pp (none: the pipeline cannot
    fill) and the smallest >= 2 pp (a smaller bubble), else the largest there is."""
    first = next((m for m in ms if m >= pp), None)
    if first is None:
        return []
    second = next((m for m in ms if m >= 2 * pp), ms[-1])
    return sorted({first, second})


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
