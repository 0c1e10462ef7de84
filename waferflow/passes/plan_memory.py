"""plan-memory: per-core liveness of a parallel plan; refuse it if it does not fit.

After ``lower-collectives`` (lowering the graph itself, from its regions, when the
actor plan is not at hand): weights, gradients, optimizer state and activations
per core across micro-batches (see ``waferflow.parallel.memory``). With ``check``
(default) a plan whose peak exceeds a core's SRAM fails with the needed vs
available bytes of the worst cores. The graph is unchanged; the ``MemoryReport``
is stored under ``plan-memory``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from waferflow.ir.graph import Graph
from waferflow.parallel.driver import memory
from waferflow.passes._parallel_ctx import ensure_lowered, load_state, store_state
from waferflow.passes.base import Pass, PassContext, option
from waferflow.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class PlanMemory(Pass):
    """Peak memory per core of the parallel plan; fail when it does not fit."""

    name: ClassVar[str] = "plan-memory"
    needs_wafer: ClassVar[bool] = True
    reads: ClassVar[str] = "the annotations and regions"
    writes: ClassVar[str] = "nothing (a check; the memory report is a result)"
    check: bool = option(True, "fail when a core needs more SRAM than it has")

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        state = load_state(ctx, graph, self.name)
        ensure_lowered(graph, state)
        store_state(ctx, graph, state)
        report = memory(state, check=False)
        ctx.put_result(self.name, report)
        if not report.fits:
            if self.check:
                memory(state, check=True)  # raises PlanError with the offenders
            ctx.warn(self.name, report.refusal())
        return graph
