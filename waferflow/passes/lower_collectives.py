"""lower-collectives: collectives to point-to-point messages; assemble the Plan.

After ``schedule``: each collective instance becomes per-rank step actors joined by
messages following a schedule from ``waferflow.mapper.collectives``: ``algo=auto``
picks the cheapest by the cost model for the group's cores on this wafer, or force
``ring`` / ``biring`` / ``mesh2d`` / ``tree`` / ``direct`` / ``root`` (``plan``: as
the parallel plan says). The finished actor program (``waferflow.ir.plan.Plan``) is
in the state stored under ``lower-collectives`` (``state.actor_plan``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from waferflow.errors import PassError
from waferflow.ir.graph import Graph
from waferflow.parallel.driver import ParallelState, lower
from waferflow.parallel.plan_spec import CollectiveAlgo
from waferflow.passes.base import Pass, PassContext, option
from waferflow.passes.registry import register_pass

_CHOICES = ("plan", *(a.value for a in CollectiveAlgo))


@register_pass
@dataclass(frozen=True)
class LowerCollectives(Pass):
    """Lower collectives to point-to-point messages and build the actor Plan."""

    name: ClassVar[str] = "lower-collectives"
    algo: str = option("plan", "plan | auto | ring | biring | mesh2d | tree | direct | root")

    def check_options(self) -> None:
        if self.algo not in _CHOICES:
            raise PassError(
                f"option 'algo' of pass 'lower-collectives' is {self.algo!r}; choose one of "
                + ", ".join(_CHOICES)
            )

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        state = ctx.get_result("schedule", ParallelState)
        algo = None if self.algo == "plan" else CollectiveAlgo(self.algo)
        lower(state, algo)
        ctx.put_result(self.name, state)
        return graph
