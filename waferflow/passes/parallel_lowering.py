"""parallel-lowering: the whole parallel path in one pass.

``parallel-lowering{plan="dp=2,tp=4,pp=2,microbatches=4"}`` runs parallelize,
insert-collectives, schedule, lower-collectives and plan-memory on the graph and
stores a ``ParallelResult`` (the actor ``Plan``, the memory report, diagnostics)
under ``parallel-lowering``. The graph keeps what they wrote: the plan header,
shardings, stages, micro-batch modes, collectives and regions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from waferflow.errors import PassError, PlanError
from waferflow.ir.graph import Graph
from waferflow.parallel.driver import run_in_place
from waferflow.parallel.plan_spec import parse_plan
from waferflow.passes.base import Pass, PassContext, option
from waferflow.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class ParallelLowering(Pass):
    """Parallelize, insert and lower collectives, schedule and check memory in one go."""

    name: ClassVar[str] = "parallel-lowering"
    needs_wafer: ClassVar[bool] = True
    reads: ClassVar[str] = "the ops, their costs and module paths"
    writes: ClassVar[str] = "what parallelize, insert-collectives and schedule write"
    plan: str = option("dp=1", 'the parallel plan, e.g. "dp=2,tp=4,pp=2,microbatches=4"')
    check_memory: bool = option(True, "fail when the plan does not fit in SRAM")

    def check_options(self) -> None:
        try:
            parse_plan(self.plan)
        except PlanError as exc:
            raise PassError(f"pass 'parallel-lowering': {exc}") from None

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        wafer = ctx.require_wafer(self.name)
        result = run_in_place(graph, wafer, self.plan, check_memory=self.check_memory)
        for note in result.diagnostics:
            ctx.warn(self.name, note)
        ctx.put_result(self.name, result)
        return graph
