"""schedule: per-rank actors and the order each core runs them in.

After ``insert-collectives``: lays the ranks out on the wafer (stages as vertical
strips, tensor-parallel groups as rows; see ``waferflow.parallel.layout``), makes
one actor per rank, micro-batch and group of ops, and orders each core's actors
GPipe or 1F1B style (the plan's ``schedule``). Stores the state under ``schedule``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from waferflow.ir.graph import Graph
from waferflow.parallel.driver import ParallelState, schedule
from waferflow.parallel.insert import insert_collectives
from waferflow.passes.base import Pass, PassContext
from waferflow.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class Schedule(Pass):
    """Per-core actor order of a parallel plan (GPipe / 1F1B), after parallelize."""

    name: ClassVar[str] = "schedule"

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        state = ctx.get_result("parallelize", ParallelState)
        if state.collectives is None:
            state.collectives = insert_collectives(graph, state.sharding, state.stages, state.plan)
        schedule(graph, state)
        ctx.put_result(self.name, state)
        return graph
