"""parallelize: choose how the step is cut over dp x tp x pp ranks.

Runs sharding propagation (every value's placement along dp / tp / mb, parameters
split Megatron-style) and the pipeline stage cut, and writes them onto the graph:
the plan in its header (``parallel(plan=..., wafer=..., ...)``), each value's
sharding after its type, each op's stage, micro-batch mode and operand placements
(``par(...)``). ``insert-collectives``, ``schedule``, ``lower-collectives`` and
``plan-memory`` read them from there. Fallbacks (an op replicated for want of a
rule) become warnings. Needs a wafer. See docs/parallel.md.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from waferflow.errors import PassError, PlanError
from waferflow.ir.graph import Graph
from waferflow.parallel.driver import parallelize
from waferflow.parallel.plan_spec import (
    SPAN_AUTO,
    CollectiveAlgo,
    GradReduce,
    Granularity,
    MatmulAlgo,
    ParallelPlan,
    PipelineSchedule,
    StageCut,
    parse_plan,
)
from waferflow.passes._parallel_ctx import store_state
from waferflow.passes.base import Pass, PassContext, option
from waferflow.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class Parallelize(Pass):
    """Shard the step over dp x tp x pp ranks with micro-batches (shardings, stages)."""

    name: ClassVar[str] = "parallelize"
    needs_wafer: ClassVar[bool] = True
    reads: ClassVar[str] = "the ops, their costs and module paths"
    writes: ClassVar[str] = (
        "the plan header parallel(...), each value's sharding, each op's stage, "
        "micro-batch mode and operand placements par(...)"
    )
    dp: int = option(1, "data-parallel replicas")
    tp: int = option(1, "tensor-parallel ranks")
    pp: int = option(1, "pipeline stages")
    microbatches: int = option(1, "micro-batches per step")
    schedule: PipelineSchedule = option(PipelineSchedule.ONE_F_ONE_B, "pipeline schedule")
    grad_reduce: GradReduce = option(GradReduce.ALL_REDUCE, "gradient reduction")
    algo: CollectiveAlgo = option(CollectiveAlgo.AUTO, "collective algorithm")
    recompute: bool = option(False, "recompute activations in the backward")
    layers: str = option("", "per-layer pattern, one of d/t/r per layer (needs ways)")
    ways: int = option(1, "degree of the per-layer pattern")
    group: Granularity = option(Granularity.MODULE, "ops per actor: op, module or layer")
    overlap: bool = option(True, "interleave gradient reduction with the backward")
    span: int = option(SPAN_AUTO, "each rank runs on span x span nodes (0: auto)")
    cut: StageCut = option(StageCut.BALANCED, "pipeline stages: balanced, or one per layer")
    zero: int = option(0, "ZeRO stage over dp: 1 optimizer state, 2 + gradients, 3 + parameters")
    ep: int = option(1, "expert-parallel ranks (mixture-of-experts models)")
    matmul: MatmulAlgo = option(
        MatmulAlgo.GATHER, "a gathered matmul operand: gather, shift or auto"
    )
    plan: str = option("", 'the whole plan as one string, e.g. "dp=2,tp=4" (overrides)')

    def spec(self) -> ParallelPlan:
        if self.plan:
            return parse_plan(self.plan)
        values = {f.name: getattr(self, f.name) for f in fields(ParallelPlan)}
        return ParallelPlan(**values)

    def check_options(self) -> None:
        try:
            self.spec()
        except PlanError as exc:
            raise PassError(f"pass 'parallelize': {exc}") from None
        given = [f.name.replace("_", "-") for f in fields(self)
                 if f.name != "plan" and getattr(self, f.name) != f.default]  # fmt: skip
        if self.plan and given:  # the plan string replaces them all: they would be ignored
            raise PassError(
                f"pass 'parallelize': plan=\"{self.plan}\" gives the whole plan, so "
                f"{', '.join(given)} would be ignored: put {'it' if len(given) == 1 else 'them'} "
                "in the plan string, or drop plan"
            )

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        wafer = ctx.require_wafer(self.name)
        state = parallelize(graph, wafer, self.spec())
        if state.span is not None and state.span.span > 1:
            ctx.note(self.name, state.span.describe(state.ranks))
            ctx.wafer = state.wafer  # later passes work on the view the plan runs on
        for note in state.diagnostics:
            ctx.warn(self.name, note)
        ctx.put_result(self.name, state)
        store_state(ctx, graph, state)
        return graph
