"""lower-collectives: collectives to point-to-point messages; assemble the Plan.

After ``schedule``: each collective instance becomes per-rank step actors joined by
messages following a schedule from ``waferflow.mapper.collectives``: ``algo=auto``
picks the cheapest by the cost model for the group's cores on this wafer, or force
``ring`` / ``biring`` / ``mesh2d`` / ``tree`` / ``direct`` / ``root`` (``plan``: as
the parallel plan says; a forced algorithm is written into the plan in the graph's
header, so that later runs lower alike). The finished actor program
(``waferflow.ir.plan.Plan``) is a result, in the state stored under
``lower-collectives`` (``state.actor_plan``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from waferflow.errors import PassError
from waferflow.ir.graph import Graph
from waferflow.parallel.driver import lower
from waferflow.parallel.plan_spec import CollectiveAlgo
from waferflow.passes._parallel_ctx import ensure_lowered, load_state, store_state
from waferflow.passes.base import Pass, PassContext, option
from waferflow.passes.registry import register_pass

_CHOICES = ("plan", *(a.value for a in CollectiveAlgo))


@register_pass
@dataclass(frozen=True)
class LowerCollectives(Pass):
    """Lower collectives to point-to-point messages and build the actor Plan."""

    name: ClassVar[str] = "lower-collectives"
    needs_wafer: ClassVar[bool] = True
    reads: ClassVar[str] = "the annotations and regions"
    writes: ClassVar[str] = "the plan header's algo, when given one (the actor plan is a result)"
    algo: str = option("plan", "plan | auto | ring | biring | mesh2d | tree | direct | root")

    def check_options(self) -> None:
        if self.algo not in _CHOICES:
            raise PassError(
                f"option 'algo' of pass 'lower-collectives' is {self.algo!r}; choose one of "
                + ", ".join(_CHOICES)
            )

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        state = load_state(ctx, graph, self.name)
        if self.algo != "plan" and state.plan.algo is not CollectiveAlgo(self.algo):
            state.plan = replace(state.plan, algo=CollectiveAlgo(self.algo))
            assert graph.parallel is not None
            graph.parallel = replace(graph.parallel, plan=str(state.plan))
            if state.program is not None:
                state.program.plan = state.plan
        if state.program is None:
            state.actor_plan = None
            ensure_lowered(graph, state)
        else:
            lower(state)
        ctx.put_result(self.name, state)
        store_state(ctx, graph, state)
        return graph
