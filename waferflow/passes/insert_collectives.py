"""insert-collectives: put the communication a sharding needs into the graph.

After ``parallelize``: every operand whose placement must change becomes the
result of an ``all_reduce`` / ``reduce`` / ``all_gather`` / ``reduce_scatter`` /
``all_to_all`` op (attributes ``axis``, ``src``, ``dst``) inserted after its
producer; a softmax over a split dimension is followed by an ``all_reduce`` of its
statistics (``stats_dim``). Print the IR after this pass to see where the plan
communicates. Stores the updated state under ``insert-collectives``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from waferflow.ir.graph import Graph
from waferflow.parallel.driver import ParallelState
from waferflow.parallel.insert import insert_collectives
from waferflow.passes.base import Pass, PassContext
from waferflow.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class InsertCollectives(Pass):
    """Insert the collectives a parallel plan needs (after parallelize)."""

    name: ClassVar[str] = "insert-collectives"

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        state = ctx.get_result("parallelize", ParallelState)
        if state.collectives is not None:
            return graph  # already inserted
        state.collectives = insert_collectives(graph, state.sharding, state.stages, state.plan)
        ctx.put_result(self.name, state)
        return graph
