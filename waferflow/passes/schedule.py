"""schedule: lay the ranks out on the wafer; per-rank actors and each core's order.

After ``insert-collectives`` (run first when it was not): lays the ranks out on the
wafer (stages as vertical strips, tensor-parallel groups as rows; see
``waferflow.parallel.layout``) unless the ops already have regions (from ``place``),
writes every op's region (``on=[...]``: the core of each rank of its stage), and
builds one actor per rank, micro-batch and group of ops, ordered on each core GPipe
or 1F1B style (the plan's ``schedule``). The actors are derived from the IR; the
layout is the decision this pass adds to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from waferflow.ir.graph import Graph
from waferflow.parallel.driver import insert, schedule
from waferflow.passes._parallel_ctx import load_state, store_state
from waferflow.passes.base import Pass, PassContext
from waferflow.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class Schedule(Pass):
    """Lay the ranks out and order each core's actors (GPipe / 1F1B), after parallelize."""

    name: ClassVar[str] = "schedule"
    needs_wafer: ClassVar[bool] = True
    reads: ClassVar[str] = "the plan header, shardings, stages and micro-batch modes"
    writes: ClassVar[str] = "each op's region on=[...] (the default strips, unless placed)"

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        state = load_state(ctx, graph, self.name)
        insert(graph, state)
        schedule(graph, state, state.layout)
        ctx.put_result(self.name, state)
        store_state(ctx, graph, state)
        return graph
