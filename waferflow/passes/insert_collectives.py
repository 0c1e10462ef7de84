"""insert-collectives: put the communication a sharding needs into the graph.

After ``parallelize``: every operand whose placement must change becomes the
result of an ``all_reduce`` / ``reduce`` / ``all_gather`` / ``reduce_scatter`` /
``all_to_all`` op (attributes ``axis``, ``src``, ``dst``) inserted after its
producer; a graph output that is a partial sum along ``dp`` or ``tp`` is
all-reduced; a softmax over a split dimension is followed by an ``all_reduce`` of
its statistics (``stats_dim``). The graph's level becomes ``collectives``: from
then on the verifier refuses any partial sum left unreduced. Reads everything from
the IR, so it needs no wafer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from waferflow.ir.graph import Graph
from waferflow.ir.parallel import ParallelLevel
from waferflow.parallel.annotate import plan_of, sharding_from_ir, stages_from_ir
from waferflow.parallel.insert import insert_collectives
from waferflow.passes.base import Pass, PassContext
from waferflow.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class InsertCollectives(Pass):
    """Insert the collectives a parallel plan needs (after parallelize)."""

    name: ClassVar[str] = "insert-collectives"
    reads: ClassVar[str] = "the plan header, shardings and operand placements"
    writes: ClassVar[str] = (
        "collective ops where placements change (axis, src, dst), level=collectives"
    )

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        plan = plan_of(graph)
        assert graph.parallel is not None
        if graph.parallel.level is ParallelLevel.COLLECTIVES:
            return graph  # already inserted
        sharding, stages = sharding_from_ir(graph, plan), stages_from_ir(graph, plan)
        insert_collectives(graph, sharding, stages, plan)
        return graph
