"""The rough screen of ``--plan auto``: every candidate plan scored in closed form.

``candidates`` lists the plans the search weighs (dp x tp x pp x micro-batches x
recompute, with the ZeRO stages and ep degrees that apply), ``model_figures`` sums what
the screen needs of the step once, and ``rough_row`` scores one rank of a plan: its
time and bytes, without building anything. The screen only orders the candidates;
``search.py`` builds the best-ordered ones and keeps the fitting one with the smallest
step. It is separate from the search because it is a model (the one below) with no
build in it; ``uniform.py`` shares its degrees (``TP_CHOICES``, ``PP_CHOICES``,
``takes``, ``divisors``).

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
from dataclasses import dataclass

from waferflow.errors import PlanError
from waferflow.ir.dtypes import DType
from waferflow.ir.graph import Graph, Phase
from waferflow.ir.opkind import MATMUL_LIKE, OpKind
from waferflow.ir.target.wafer import Wafer
from waferflow.parallel.driver import batch_size, clone_graph, parallelize
from waferflow.parallel.experts import (
    NO_EXPERTS,
    ExpertFigures,
    ep_choices,
    ep_seconds,
    expert_figures,
    expert_state_share,
)
from waferflow.parallel.plan_spec import ParallelPlan
from waferflow.parallel.span import SpanChoice
from waferflow.parallel.stages import param_of
from waferflow.parallel.zero import zero_rough, zero_stages

TP_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16)
PP_CHOICES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)
IMBALANCE = 1.5  # the fullest stage's share of the model state, over an even share (pp > 1)
BACKWARD_SHARE = 2 / 3  # of a training step's FLOPs: what a dp reduction can hide behind
RECOMPUTE_FLOPS = 4 / 3  # forward (1) + backward (2) + the forward again (1), over 3
INFER_LIVE = 4  # inference: values live at once, in units of the largest


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
    tps = [t for t in TP_CHOICES if t <= limit and takes(graph, wafer, ParallelPlan(tp=t))]
    pps = [p for p in PP_CHOICES if p <= limit and takes(graph, wafer, ParallelPlan(pp=p))]
    out = []
    training = any(op.phase is Phase.BWD for op in graph.ops)
    recomputes = (False, True) if training else (False,)  # nothing to recompute in inference
    experts = expert_figures(graph)
    for dp, ep in ((d, e) for d in divisors(batch) for e in ep_choices(experts, batch // d)):
        ms = divisors(batch // (dp * ep))
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


def takes(graph: Graph, wafer: Wafer, plan: ParallelPlan) -> bool:
    """Whether sharding and staging ``plan`` raise (tp not dividing heads, pp > layers)."""
    try:
        parallelize(clone_graph(graph), wafer, plan)
    except PlanError:
        return False
    return True


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _microbatches(ms: list[int], pp: int) -> list[int]:
    """At most two micro-batch counts: the smallest >= pp (none: the pipeline cannot
    fill) and the smallest >= 2 pp (a smaller bubble), else the largest there is."""
    first = next((m for m in ms if m >= pp), None)
    if first is None:
        return []
    second = next((m for m in ms if m >= 2 * pp), ms[-1])
    return sorted({first, second})


__all__ = [
    "BACKWARD_SHARE",
    "IMBALANCE",
    "INFER_LIVE",
    "PP_CHOICES",
    "RECOMPUTE_FLOPS",
    "TP_CHOICES",
    "ModelFigures",
    "SearchRow",
    "candidates",
    "divisors",
    "model_figures",
    "rough_row",
    "takes",
]
