"""annotate-cost: give ops that have no cost one computed from their shapes.

The rules are in ``cost_rules.py`` (``ir_flops``, ``ir_cost``). An op "has no
cost" when its cost is ``Cost()``; with ``overwrite`` every op is recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from waferflow.ir.graph import Cost, Graph
from waferflow.passes.base import Pass, PassContext, option
from waferflow.passes.cost_rules import ir_cost
from waferflow.passes.registry import register_pass


@register_pass
@dataclass(frozen=True)
class AnnotateCost(Pass):
    """Fill in missing op costs (FLOPs, bytes) from shapes by IR-level rules."""

    name: ClassVar[str] = "annotate-cost"
    reads: ClassVar[str] = "the ops' kinds, attributes and shapes"
    writes: ClassVar[str] = "op costs"
    overwrite: bool = option(False, "recompute every op's cost, not only missing ones")

    def apply(self, ctx: PassContext, graph: Graph) -> Graph:
        for op in list(graph.ops):
            if not self.overwrite and op.cost != Cost():
                continue
            cost = ir_cost(op)
            if cost != op.cost:
                op.cost = cost
        return graph
