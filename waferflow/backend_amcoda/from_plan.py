"""The seed machine's programs for a plan compiled through the general path.

``waferflow compile MODEL --wafer amcoda --plan P --emit amcoda`` compiles like every
other wafer (trace, passes, parallelize, simulate); this backend then writes the
experiment folder the authors' simulator runs. The programs are the seed's layer
templates (``generate.py``), chosen by the compiled plan's spec: a per-layer plan
(``cut=layer``) without data / tensor degrees of its own is a seed plan when

* it has no pattern: ``pipe`` (one micro-batch) or ``gpipe=M`` (GPipe, M <= 4);
* its pattern gives the conv layers ``d`` or ``t`` and every later layer ``s``, over
  ``ways`` ranks, one micro-batch, gradients reduced to replica 0
  (``grad-reduce=root,algo=root``): ``layers=<d|t...>,ways=R``.

Anything else has no seed template and is refused, naming what differs. The CNN
comes from the traced graph (``cnn_layers_from_graph``), the MemWidth from the
wafer's stream slots (``flow.max_streams``).
"""

from __future__ import annotations

from waferflow.backend_amcoda.layers import cnn_layers_from_graph
from waferflow.backend_amcoda.report import SeedCompileResult, compile_seed_plan
from waferflow.errors import PlanError
from waferflow.ir.graph import Graph
from waferflow.parallel.plan_spec import (
    CollectiveAlgo,
    GradReduce,
    LayerMode,
    ParallelPlan,
    PipelineSchedule,
    StageCut,
)


def seed_plan_text(spec: ParallelPlan, n_convs: int) -> str:
    """The seed plan string of a compiled per-layer plan (module docstring), or
    ``PlanError`` naming what the seed's templates cannot express."""

    def refuse(why: str) -> PlanError:
        return PlanError(
            f"plan {spec} has no seed-machine program: {why}. The seed's templates are "
            "pipe, gpipe=M and layers=<d|t...>,ways=R (see docs/amcoda.md)"
        )

    if spec.cut is not StageCut.LAYER:
        raise refuse("its stages are not one per layer (cut=layer)")
    if spec.dp > 1 or spec.tp > 1 or spec.recompute:
        raise refuse("dp, tp and recompute have no template")
    if not spec.layers:
        if spec.ways > 1:
            raise refuse(f"ways={spec.ways} without a pattern")
        if spec.microbatches == 1:
            return "pipe"
        if spec.schedule is not PipelineSchedule.GPIPE:
            raise refuse("micro-batches run GPipe-style on the seed (schedule=gpipe)")
        return f"gpipe={spec.microbatches}"
    convs, rest = spec.layers[:n_convs], spec.layers[n_convs:]
    if set(convs) - {LayerMode.DATA.value, LayerMode.TENSOR.value}:
        raise refuse(f"conv layers are d or t, got {convs!r}")
    if set(rest) - {LayerMode.SINGLE.value}:
        raise refuse(f"the layers after the convolutions run on one actor (s), got {rest!r}")
    if spec.microbatches > 1:
        raise refuse("per-layer replication has no micro-batches")
    if spec.grad_reduce is not GradReduce.ROOT or spec.algo is not CollectiveAlgo.ROOT:
        raise refuse("gradients go to replica 0 (grad-reduce=root,algo=root)")
    return f"layers={convs},ways={spec.ways}"


def seed_programs(
    graph: Graph, spec: ParallelPlan, *, mem_ports: int, hazard_guard: bool = False
) -> SeedCompileResult:
    """The seed machine's experiment for ``graph`` (a traced training step) under the
    compiled plan ``spec``, with its cycle-level timing."""
    cnn = cnn_layers_from_graph(graph)
    text = seed_plan_text(spec, len(cnn.convs))
    return compile_seed_plan(cnn, text, mem_ports=mem_ports, hazard_guard=hazard_guard)


__all__ = ["seed_plan_text", "seed_programs"]
