"""Expert parallelism (``ep=N``) in the plan search: which degrees, and what they cost.

A mixture-of-experts step (``moe_dispatch`` / ``moe_combine`` ops, see
``frontend/moe.py``) can deal its experts out over ``ep`` ranks that also split the
batch. The closed form the search screens with, per rank of a plan with ``dp``,
``ep``, ``tp``, ``pp`` (B the link bandwidth, L its latency):

* memory: the experts' share of the model state (weights, gradients, optimizer
  state in proportion to their weights) is divided by ``ep`` as well;
* time: every exchange of capacity slots (one per ``moe_dispatch`` and
  ``moe_combine`` of the step, forward and backward) is an all-to-all in which a rank
  keeps 1/ep of its slots and sends the rest: (ep - 1) / ep * S / (dp ep tp pp) / B
  + (ep - 1) L, with S the bytes of the exchanged ``[E, C, H]`` values (all layers).
"""

from __future__ import annotations

from dataclasses import dataclass

from waferflow.ir.graph import Graph
from waferflow.ir.opkind import OpKind
from waferflow.parallel.plan_spec import ParallelPlan
from waferflow.parallel.rules_moe import expert_params


@dataclass(frozen=True)
class ExpertFigures:
    experts: int  # experts per MoE layer (the smallest, when layers differ); 0: dense
    weight_bytes: int  # the experts' weights
    exchanged_bytes: int  # capacity slots exchanged per step (every dispatch and combine)


NO_EXPERTS = ExpertFigures(0, 0, 0)  # a dense model


def expert_figures(graph: Graph) -> ExpertFigures:
    counts = [
        int(op.attrs.get("experts", 0) or 0)  # type: ignore[arg-type]
        for op in graph.ops
        if op.kind is OpKind.MOE_DISPATCH
    ]
    if not counts:
        return NO_EXPERTS
    params = expert_params(graph)
    weights = sum(
        op.results[0].type.nbytes for op in graph.ops if op.results and id(op.results[0]) in params
    )
    exchanged = sum(
        op.results[0].type.nbytes if op.kind is OpKind.MOE_DISPATCH else op.operands[0].type.nbytes
        for op in graph.ops
        if op.kind in (OpKind.MOE_DISPATCH, OpKind.MOE_COMBINE)
    )
    return ExpertFigures(min(counts), weights, exchanged)


def ep_choices(figs: ExpertFigures, batch_per_replica: int) -> list[int]:
    """The ``ep`` degrees the search tries: 1, and for an MoE model every degree that
    divides both the experts and the batch left after ``dp``."""
    if figs.experts < 2:
        return [1]
    return [e for e in range(1, figs.experts + 1)
            if figs.experts % e == 0 and batch_per_replica % e == 0]  # fmt: skip


def ep_seconds(plan: ParallelPlan, figs: ExpertFigures, bandwidth: float, latency: float) -> float:
    """The all-to-alls of ``plan`` per step (module docstring)."""
    ep = plan.ep
    if ep < 2 or not figs.exchanged_bytes:
        return 0.0
    share = plan.dp * ep * plan.tp * plan.pp
    per = (ep - 1) / ep * figs.exchanged_bytes / share / bandwidth
    return per + (ep - 1) * latency * plan.microbatches


def expert_state_share(plan: ParallelPlan, figs: ExpertFigures, weights: int) -> float:
    """The fraction of the model state that ``ep`` no longer keeps on every rank."""
    if plan.ep < 2 or not weights:
        return 0.0
    return figs.weight_bytes / weights * (1 - 1 / plan.ep)


__all__ = [
    "NO_EXPERTS",
    "ExpertFigures",
    "ep_choices",
    "ep_seconds",
    "expert_figures",
    "expert_state_share",
]
